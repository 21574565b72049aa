"""ONNX Runtime training artifacts as fixtures (`ort_mlp_*`, `ort_gpt2_tiny_*`).

Runs in the onnxruntime-training venv (requirements-ort.txt). Input: the forward + loss model
written by `forward_export.py` in the torch venv (params as initializers, dynamic batch/seq).

Steps for one model NAME:
  1. post-process the forward model for ORT's gradient builder: every `LayerNormalization` gets
     its optional Mean / InvStdDev outputs, `Dropout` its mask output (for `DropoutGrad`) and
     `SoftmaxCrossEntropyLoss` its log_prob output
     (torch omits them; LayerNormalizationGrad and SoftmaxCrossEntropyLossGrad consume them),
     and `Gelu(approximate="tanh")` becomes com.microsoft::FastGelu (ORT 1.19 differentiates
     ai.onnx Gelu as the exact erf GELU whatever `approximate` says);
  2. `generate_artifacts(requires_grad=<all params>, loss=None, optimizer=onnxblock AdamW)`
     gives `training_model.onnx` (forward + gradient graph; gradients accumulated in place into
     `<param>_grad.accumulation.buffer` inputs by com.microsoft::InPlaceAccumulatorV2) and
     `optimizer_model.onnx` (one com.microsoft::AdamWOptimizer over tensor sequences, updating
     params and moments in place); saved as NAME_training.onnx / NAME_optimizer.onnx;
  3. references: the training model run by `onnxruntime.InferenceSession` (the training build
     registers the com.microsoft training kernels) at two bindings; the optimizer model run on
     the gradients it produced. In-place results are stored as `after_in_<i>` (see `inplace` in
     the JSON). Checked against eager PyTorch: loss and gradients (`backward()`), and the AdamW
     update written out in torch (ORT's `adam_mode=1`, the Hugging Face AdamW formula).
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch

import models_torch as M
from onnx_common import (describe_values, dim_params, model_meta, op_counts, rel_err,
                         save_model, versions, write_meta, write_npz, zero_dropout)
from torch_steps import (CNN, CNN_BN, GPT_TINY, GPT_TINY_DROPOUT, MLP, MLP_TANH, TorchFixture,
                         eager_reference)

RTOL = 1e-5  # loss, new params, new moments
RTOL_GRAD = 1e-5  # gradients, per tensor relative to max |grad|
LR = M.ADAMW.lr

MODELS = {
    "ort_mlp": (MLP, [{"batch": 8}, {"batch": 3}], ("batch",), ()),
    "ort_mlp_tanh": (MLP_TANH, [{"batch": 8}, {"batch": 3}], ("batch",), ()),
    "ort_cnn": (CNN, [{"batch": 8}, {"batch": 3}], ("batch",), ()),
    "ort_cnn_bn": (CNN_BN, [{"batch": 8}, {"batch": 3}], ("batch",), ()),
    "ort_gpt2_tiny_dropout": (GPT_TINY_DROPOUT, [{"batch": 4, "seq": 37}, {"batch": 2, "seq": 64}],
                              ("batch", "seq"), (f"seq <= {M.GPT_TINY.n_pos}",)),
    "ort_gpt2_tiny": (GPT_TINY, [{"batch": 4, "seq": 37}, {"batch": 2, "seq": 64}],
                      ("batch", "seq"), (f"seq <= {M.GPT_TINY.n_pos}",)),
}


def add_optional_outputs(model: onnx.ModelProto) -> list[str]:
    """Step 1 above; returns a description of each change (for the metadata)."""
    changes = []
    for node in model.graph.node:
        if node.domain in ("", "ai.onnx") and node.op_type == "LayerNormalization" \
                and len(node.output) == 1:
            node.output.extend([node.output[0] + "_mean", node.output[0] + "_inv_std_dev"])
            changes.append(f"LayerNormalization {node.name}: + Mean, InvStdDev outputs")
        if node.domain in ("", "ai.onnx") and node.op_type == "Dropout" and len(node.output) == 1:
            node.output.append(node.output[0] + "_mask")  # DropoutGrad reads the mask
            changes.append(f"Dropout {node.name}: + mask output")
        if node.domain in ("", "ai.onnx") and node.op_type == "SoftmaxCrossEntropyLoss" \
                and len(node.output) == 1:
            node.output.append(node.output[0] + "_log_prob")
            changes.append(f"SoftmaxCrossEntropyLoss {node.name}: + log_prob output")
        if node.domain in ("", "ai.onnx") and node.op_type == "Gelu" and any(
                a.name == "approximate" and a.s == b"tanh" for a in node.attribute):
            # ORT 1.19's gradient builder maps ai.onnx Gelu to com.microsoft::GeluGrad, the
            # derivative of the exact (erf) GELU, whatever `approximate` says: the gradients
            # were off by ~1e-4 relative. com.microsoft::FastGelu is the same tanh formula and
            # gets FastGeluGrad.
            node.op_type = "FastGelu"
            node.domain = "com.microsoft"
            del node.attribute[:]
            changes.append(f"Gelu(approximate=tanh) {node.name} -> com.microsoft::FastGelu")
    if any(n.domain == "com.microsoft" for n in model.graph.node) and not any(
            o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(onnx.helper.make_opsetid("com.microsoft", 1))
    return changes


def generate(forward: onnx.ModelProto, params: list[str], work: Path):
    from onnxruntime.training import artifacts
    import onnxruntime.training.onnxblock as onnxblock

    ort.set_default_logger_severity(3)  # the graph transformers log every pass at INFO
    a = M.ADAMW
    opt = onnxblock.optim.AdamW(bias_correction=True, betas=(a.b1, a.b2), eps=a.eps,
                                weight_decay=a.weight_decay)
    artifacts.generate_artifacts(forward, requires_grad=params, frozen_params=[], loss=None,
                                 optimizer=opt, artifact_directory=str(work))
    return onnx.load(str(work / "training_model.onnx")), onnx.load(
        str(work / "optimizer_model.onnx"))


def hf_adamw(p, g, m, v, t):
    """ORT AdamWOptimizer with adam_mode=1 (Hugging Face transformers AdamW), bias correction
    on, in eager torch; t is the 1-based count of this update. Returns (p, m, v)."""
    a = M.ADAMW
    m = m * a.b1 + g * (1.0 - a.b1)
    v = v * a.b2 + g * g * (1.0 - a.b2)
    step_size = LR * np.sqrt(1.0 - a.b2 ** t) / (1.0 - a.b1 ** t)
    p = p - step_size * (m / (torch.sqrt(v) + a.eps))
    p = p - LR * a.weight_decay * p
    return p, m, v


def _session(model_path: Path) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(str(model_path), so, providers=["CPUExecutionProvider"])


def _with_optimizer_outputs(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of the optimizer model whose AdamWOptimizer also returns its optional outputs
    (updated weights, moments), so an InferenceSession can read what it wrote in place."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    (node,) = [n for n in m.graph.node if n.op_type == "AdamWOptimizer"]
    extra = ["ref.updated_weights", "ref.updated_m", "ref.updated_v"]
    del node.output[1:]
    node.output.extend(extra)
    seq = onnx.helper.make_tensor_sequence_value_info
    for name in extra:
        m.graph.output.append(seq(name, onnx.TensorProto.FLOAT, None))
    return m


def training_api_check(work: Path, spec, bindings, params, init) -> dict:
    """Run the unmodified artifacts with ORT's training API (Module + Optimizer from the
    generated checkpoint: initial params, zero moments) for one step, and the same step the
    way the references are made (InferenceSession on the training model, then on the optimizer
    copy with its optional outputs, step = 1). Returns the max relative differences; raises if
    they exceed RTOL. This pins down the in-place semantics and the meaning of `step`."""
    from onnxruntime.training import api

    data = [d.numpy() for d in spec.data(bindings, 0)]
    state = api.CheckpointState.load_checkpoint(str(work / "checkpoint"))
    module = api.Module(str(work / "training_model.onnx"), state,
                        str(work / "eval_model.onnx"))
    opt = api.Optimizer(str(work / "optimizer_model.onnx"), module)
    module.train()
    api_loss = module(*data)
    api_grads = [state.parameters[p].grad.copy() for p in params]
    opt.step()
    api_params = [state.parameters[p].data.copy() for p in params]

    sess = _session(work / "training_model.onnx")
    feeds = dict(zip(spec.data_names, data))
    feeds.update({p: init[p].copy() for p in params})
    feeds.update({f"{p}_grad.accumulation.buffer": np.zeros_like(init[p]) for p in params})
    feeds["lazy_reset_grad"] = np.array([True])
    loss = sess.run(None, feeds)[0]
    grads = [feeds[f"{p}_grad.accumulation.buffer"] for p in params]
    ref = _with_optimizer_outputs(onnx.load(str(work / "optimizer_model.onnx")))
    (work / "optimizer_ref.onnx").write_bytes(ref.SerializeToString())
    osess = _session(work / "optimizer_ref.onnx")
    zeros = lambda: [np.zeros_like(init[p]) for p in params]  # noqa: E731
    new_p = osess.run(None, {
        "learning_rate": np.array([opt.get_learning_rate()], np.float32),
        "step": np.array([1], np.int64), "params": [init[p].copy() for p in params],
        "gradients": grads, "first_order_moments": zeros(), "second_order_moments": zeros()})[1]
    out = {"loss": rel_err(loss, api_loss),
           "grads": max(rel_err(a, b) for a, b in zip(grads, api_grads)),
           "new_params": max(rel_err(a, b) for a, b in zip(new_p, api_params))}
    if max(out.values()) > RTOL:
        raise AssertionError(f"training API vs InferenceSession: {out}")
    return out


def _describe_inputs(model, params_order):
    out = describe_values([i for i in model.graph.input if i.type.HasField("tensor_type")])
    by = {r["name"]: r for r in out}
    recs = []
    for i in model.graph.input:
        if i.type.HasField("sequence_type"):
            el = i.type.sequence_type.elem_type.tensor_type
            recs.append({"name": i.name, "type": "sequence",
                         "dtype": str(onnx.helper.tensor_dtype_to_np_dtype(el.elem_type))
                         if el.elem_type else "float32",
                         "elements": params_order})
        else:
            recs.append(by[i.name])
    return recs


def export_ort_fixture(name: str, out_dir: Path, forward_path: Path) -> dict:
    """Write NAME_training.* and NAME_optimizer.*; returns the union of their op counts."""
    t0 = time.time()
    spec, ref_bindings, symbols, constraints = MODELS[name]
    forward = onnx.load(str(forward_path))
    params = [t.name for t in forward.graph.initializer if t.name.startswith("params.")]
    init = {t.name: onnx.numpy_helper.to_array(t) for t in forward.graph.initializer}
    changes = add_optional_outputs(forward)
    work = Path(tempfile.mkdtemp(prefix=f"{name}_"))
    try:
        training, optimizer = generate(forward, params, work)
        api_check = ("skipped: dropout masks are random" if spec.reference_loss else
                     training_api_check(work, spec, ref_bindings[0], params, init))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"  training API vs InferenceSession (fresh state, step 1): {api_check}")
    forward_ops = op_counts(forward)
    paths = {}
    for kind, model in (("training", training), ("optimizer", optimizer)):
        paths[kind] = out_dir / f"{name}_{kind}.onnx"
        size = save_model(model, paths[kind])
        print(f"  {paths[kind].name}: {len(model.graph.node)} nodes, {size} bytes")
    opt_model_ref = _with_optimizer_outputs(optimizer)
    ratio_inputs = []
    with tempfile.TemporaryDirectory() as tmp:
        ref_path = Path(tmp) / f"{name}_optimizer_ref.onnx"
        ref_path.write_bytes(opt_model_ref.SerializeToString())
        opt_sess = _session(ref_path)
        if spec.reference_loss:
            no_drop, ratio_inputs = zero_dropout(training)
            t_path = Path(tmp) / f"{name}_training_ratio0.onnx"
            t_path.write_bytes(no_drop.SerializeToString())
            train_sess = _session(t_path)
        else:
            train_sess = _session(paths["training"])

    if spec.reference_loss:
        spec = dataclasses.replace(spec, eager_loss=spec.reference_loss)
    fx = TorchFixture(name, "", spec, "adamw", {})
    tree = spec.init()
    n = len(M.flatten(tree))
    pytree_names = ["params" + p.replace("['", ".").replace("']", "").replace("[", ".")
                    .replace("]", "") for p, _ in M.flatten(tree)]
    assert sorted(pytree_names) == sorted(params), (pytree_names, params)
    for p, (_, t) in zip(pytree_names, M.flatten(tree)):
        assert np.array_equal(init[p], t.numpy()), p

    t_inputs = [i.name for i in training.graph.input]
    buffers = [f"{p}_grad.accumulation.buffer" for p in params]
    train_refs, opt_refs, train_checks, opt_checks = [], [], [], []
    for k, bindings in enumerate(ref_bindings):
        # State after ADAM_WARMUP_STEPS eager torch.optim.AdamW steps, as in the torch fixtures.
        flat_in, _ = eager_reference(fx, bindings, seed=k)
        p1 = dict(zip(pytree_names, flat_in[:n]))
        m1 = dict(zip(pytree_names, flat_in[n:2 * n]))
        v1 = dict(zip(pytree_names, flat_in[2 * n:3 * n]))
        step1 = int(flat_in[3 * n])
        data = dict(zip(spec.data_names, flat_in[3 * n + 1:]))
        # Eager loss and gradients at p1.
        leaves = [torch.from_numpy(p1[p].copy()).requires_grad_(True) for p in pytree_names]
        loss = spec.eager_loss(M.unflatten(tree, leaves),
                               *[torch.from_numpy(d) for d in data.values()])
        loss.backward()
        want_grad = {p: leaf.grad.numpy() for p, leaf in zip(pytree_names, leaves)}

        # --- training model
        feeds = {}
        for nm in t_inputs:
            if nm in data:
                feeds[nm] = data[nm]
            elif nm in p1:
                feeds[nm] = p1[nm].copy()
            elif nm in buffers:
                feeds[nm] = np.zeros(init[nm[:-len("_grad.accumulation.buffer")]].shape,
                                     np.float32)
            elif nm == "lazy_reset_grad":
                feeds[nm] = np.array([True])
            else:
                raise AssertionError(f"{name}: unexpected training input {nm}")
        ins = [feeds[nm].copy() for nm in t_inputs]
        outs = train_sess.run(None, feeds)  # writes the gradients into the buffers (in place)
        grads = {p: feeds[b].copy() for p, b in zip(params, buffers)}
        assert not np.array_equal(grads[params[0]], np.zeros_like(grads[params[0]]))
        e_loss = rel_err(outs[0], loss.detach().numpy())
        e_grad = {p: rel_err(grads[p], want_grad[p]) for p in params}
        worst = max(e_grad, key=e_grad.get)
        if e_loss > RTOL or e_grad[worst] > RTOL_GRAD:
            raise AssertionError(f"{name}_training ref{k}: loss {e_loss:.3g}, grad {worst} "
                                 f"{e_grad[worst]:.3g}")
        arrays = {f"in_{i}": a for i, a in enumerate(ins)}
        arrays.update({f"out_{i}": a for i, a in enumerate(outs)})
        inplace = [t_inputs.index(b) for b in buffers]
        arrays.update({f"after_in_{i}": feeds[t_inputs[i]] for i in inplace})
        ref_file = f"{name}_training.ref{k}.npz"
        write_npz(out_dir / ref_file, arrays)
        train_refs.append({"file": ref_file, "bindings": bindings})
        train_checks.append({"bindings": bindings, "loss": float(outs[0]),
                             "loss_rel_err": e_loss, "max_grad_rel_err": e_grad[worst],
                             "max_grad_rel_err_param": worst})
        print(f"  training ref{k} {bindings}: loss {float(outs[0]):.6f} (rel err {e_loss:.3g}), "
              f"max grad rel err {e_grad[worst]:.3g} ({worst})")

        # --- optimizer model, on the gradients the training model produced
        o_feeds = {"learning_rate": np.array([LR], np.float32),
                   "step": np.array([step1 + 1], np.int64),
                   "params": [p1[p].copy() for p in params],
                   "gradients": [grads[p] for p in params],
                   "first_order_moments": [m1[p].copy() for p in params],
                   "second_order_moments": [v1[p].copy() for p in params]}
        o_in_names = [i.name for i in optimizer.graph.input]
        assert sorted(o_in_names) == sorted(o_feeds), o_in_names
        # ORT updates the sequence elements in place (in the caller's numpy buffers): keep the
        # inputs as they were for the npz.
        o_before = {nm: [a.copy() for a in v] if isinstance(v, list) else v.copy()
                    for nm, v in o_feeds.items()}
        flag, new_p, new_m, new_v = opt_sess.run(None, o_feeds)
        errs = {}
        for j, p in enumerate(params):
            wp, wm, wv = hf_adamw(*(torch.from_numpy(np.asarray(x, np.float32)) for x in (
                p1[p], grads[p], m1[p], v1[p])), step1 + 1)
            v_hat = wv.numpy().astype(np.float64) / (1.0 - M.ADAMW.b2 ** (step1 + 1))
            ok = np.sqrt(v_hat) >= M.ADAMW.eps  # see torch_steps._noise_masks
            errs[f"param {p}"] = rel_err(new_p[j], wp.numpy(), ok)
            errs[f"m {p}"] = rel_err(new_m[j], wm.numpy(), ok)
            errs[f"v {p}"] = rel_err(new_v[j], wv.numpy())
        worst_o = max(errs, key=errs.get)
        if errs[worst_o] > RTOL:
            raise AssertionError(f"{name}_optimizer ref{k}: {worst_o} {errs[worst_o]:.3g}")
        arrays = {}
        for i, nm in enumerate(o_in_names):
            val = o_before[nm]
            if isinstance(val, list):
                arrays.update({f"in_{i}.{j}": a for j, a in enumerate(val)})
            else:
                arrays[f"in_{i}"] = val
        arrays["out_0"] = flag
        after = {"params": new_p, "first_order_moments": new_m, "second_order_moments": new_v}
        for i, nm in enumerate(o_in_names):
            if nm in after:
                arrays.update({f"after_in_{i}.{j}": a for j, a in enumerate(after[nm])})
        ref_file = f"{name}_optimizer.ref{k}.npz"
        write_npz(out_dir / ref_file, arrays)
        opt_refs.append({"file": ref_file, "bindings": bindings})
        opt_checks.append({"bindings": bindings, "step": step1 + 1, "max_rel_err": errs[worst_o],
                           "max_rel_err_tensor": worst_o})
        print(f"  optimizer ref{k}: step {step1 + 1}, max rel err {errs[worst_o]:.3g} "
              f"({worst_o})")

    common = {
        "versions": versions("onnxruntime", "torch"),
        "symbols": list(symbols),
        "constraints": list(constraints),
        "config": {**spec.config, "optimizer": "onnxblock.optim.AdamW(bias_correction=True, "
                   f"betas=({M.ADAMW.b1}, {M.ADAMW.b2}), eps={M.ADAMW.eps}, weight_decay="
                   f"{M.ADAMW.weight_decay}) -> AdamWOptimizer adam_mode=1; learning_rate "
                   f"input {LR}", "adam_warmup_steps": 1},
        "forward_model": {"exported_with": "torch.onnx.export(dynamo=True), onnxscript optimizer "
                                           "without initializer deduplication",
                          "postprocess": changes, "op_names": dict(sorted(forward_ops.items()))},
    }
    t_ops = op_counts(training)
    t_inplace = [t_inputs.index(b) for b in buffers]
    t_meta = {
        "name": f"{name}_training",
        "description": f"ONNX Runtime training model of {name[4:]} (forward + loss + gradient "
                       "graph from onnxruntime.training.artifacts.generate_artifacts). Inputs: "
                       "data, params, one gradient accumulation buffer per param, "
                       "lazy_reset_grad (bool[1]; true: overwrite the buffers). Outputs: loss, "
                       "one bool flag per buffer; the gradients are written into the buffers "
                       "in place (com.microsoft::InPlaceAccumulatorV2).",
        "kind": "ort_training_model", **common, **model_meta(training),
        "dim_params": dim_params(training),
        "inputs": describe_values(training.graph.input),
        "outputs": describe_values(training.graph.output),
        "inplace": {"inputs": t_inplace, "npz": "after_in_<i>: input i after the run"},
        "ops": sum(t_ops.values()), "bytes": paths["training"].stat().st_size,
        "op_names": dict(sorted(t_ops.items())), "refs": train_refs,
        "ref_format": "npz (deflate); in_i = graph inputs in order, out_i = outputs in order, "
                      "after_in_i = in-place results (gradients); onnxruntime-training "
                      "InferenceSession (CPU, 1 thread)",
        **({"refs_dropout_ratio_zero": ratio_inputs} if ratio_inputs else {}),
        "checks": {"reference": "eager PyTorch loss.backward() at the same params",
                   "rtol": RTOL, "rtol_grad": RTOL_GRAD, "refs": train_checks,
                   "training_api_vs_inference_session": api_check},
    }
    write_meta(out_dir, t_meta["name"], t_meta)
    o_ops = op_counts(optimizer)
    o_meta = {
        "name": f"{name}_optimizer",
        "description": f"ONNX Runtime optimizer model for {name}_training: one "
                       "com.microsoft::AdamWOptimizer. Inputs: learning_rate f32[1], step "
                       "i64[1] (1-based count of this update), params, gradients, "
                       "first_order_moments, second_order_moments (tensor sequences, element "
                       "order = `elements`). Output: updated_flag; params and moments are "
                       "updated in place.",
        "kind": "ort_optimizer_model", **common, "symbols": [], "constraints": [],
        **model_meta(optimizer),
        "dim_params": dim_params(optimizer),
        "inputs": _describe_inputs(optimizer, params),
        "outputs": describe_values(optimizer.graph.output),
        "inplace": {"inputs": [o_in_names.index(x) for x in ("params", "first_order_moments",
                                                              "second_order_moments")],
                    "npz": "after_in_<i>.<j>: element j of sequence input i after the run"},
        "ops": sum(o_ops.values()), "bytes": paths["optimizer"].stat().st_size,
        "op_names": dict(sorted(o_ops.items())), "refs": opt_refs,
        "ref_format": "npz (deflate); in_i (tensor) or in_i.j (element j of sequence input i), "
                      "out_0 = updated_flag, after_in_i.j = in-place results; gradients are "
                      f"those of {name}_training.ref<k>; state after 1 eager AdamW step",
        "checks": {"reference": "eager torch: Hugging Face AdamW formula (adam_mode=1); "
                                "elements with sqrt(v_hat) < eps not compared for params/m",
                   "rtol": RTOL, "refs": opt_checks,
                   "training_api_vs_inference_session": api_check},
    }
    write_meta(out_dir, o_meta["name"], o_meta)
    print(f"{name}: done ({time.time() - t0:.1f}s)")
    union = t_ops.copy()
    union.update(o_ops)
    return union
