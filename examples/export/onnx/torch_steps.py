"""PyTorch training steps exported to ONNX as pure functions (the `torch_*` fixtures).

Pipeline for one fixture:
  1. `make_fx(step, tracing_mode="symbolic")` traces the functional step of `models_torch`
     (forward, `torch.autograd.grad`, optimizer update) into an aten-level FX graph;
  2. the graph is wrapped in an `nn.Module` and exported with `torch.onnx.export(dynamo=True)`,
     `batch` (and `seq`, at most n_pos) dynamic; Adam steps with `optimize=False` (the onnxscript
     optimizer folds AdamW's `+ eps` into `x + 0`, which turns the update into NaN);
  3. the exporter's shape symbols are renamed to `batch` / `seq` in every dim_param;
  4. onnxruntime runs the saved model at each reference binding, and the result is checked
     against the eager PyTorch step (`F.cross_entropy`, `backward()`, `torch.optim.SGD` /
     `torch.optim.AdamW`): max relative error per output must stay below `RTOL`.

Invariant of every exported step: graph inputs are params (JAX pytree order), then for AdamW the
state m (exp_avg), v (exp_avg_sq) per param and `step` (f32[], the count before this step),
then the data; graph outputs are `loss` (f32[]), the new params, then the new m, v, step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn.functional as F
from torch._decomp import get_decompositions
from torch.export import Dim
from torch.fx.experimental.proxy_tensor import make_fx

import models_torch as M
from onnx_common import (describe_values, dim_params, model_meta, op_counts, rel_err,
                         rename_dim_params, save_model, versions, write_meta, write_npz)

# Tolerances of the export check (ONNX Runtime vs eager PyTorch).
RTOL = 1e-5  # per output tensor: max|ort - eager| / max|eager|
RTOL_UPDATE = 1e-3  # per param: same, on the update (new - old); catches wrong gradient scales
SGD_LR = 0.05  # examples/export/models.py: MLP_LR, GPT_BLOCK_LR
ADAM_WARMUP_STEPS = 1  # eager AdamW steps before the reference step, so m, v, step are not 0


@dataclass
class ModelSpec:
    """A model: parameter init, data, and the two loss functions (decomposed / eager)."""

    init: Callable[[], object]  # -> param tree
    loss: Callable  # (params, *data) -> f32[], in basic ops (traced)
    eager_loss: Callable  # (params, *data) -> f32[], with F.cross_entropy (reference)
    data: Callable  # (bindings, seed) -> tuple of tensors
    data_names: tuple[str, ...]
    data_dims: tuple[dict, ...]  # per data input: {axis: symbol name}
    config: dict
    # The eager loss the references are checked against when it differs from eager_loss: for
    # a model with dropout, the loss without it (ONNX Runtime's and Ebb's masks are their own
    # random numbers, so the references run with every Dropout ratio set to 0).
    reference_loss: Callable | None = None


def _gen(seed):
    return torch.Generator().manual_seed(1000 + seed)


def _mlp_data(b, seed):
    g = _gen(seed)
    x = torch.randn(b["batch"], M.MLP_SIZES[0], generator=g)
    y = torch.randint(0, M.MLP_SIZES[-1], (b["batch"],), generator=g, dtype=torch.int64)
    return x, y


def _gpt_data(b, seed):
    g = _gen(seed)
    shape = (b["batch"], b["seq"])
    tokens = torch.randint(0, M.GPT_TINY.vocab, shape, generator=g, dtype=torch.int64)
    targets = torch.randint(0, M.GPT_TINY.vocab, shape, generator=g, dtype=torch.int64)
    return tokens, targets


MLP = ModelSpec(
    init=M.init_mlp, loss=M.mlp_loss,
    eager_loss=lambda p, x, y: F.cross_entropy(M.mlp_forward(p, x), y),
    data=_mlp_data, data_names=("x", "y"), data_dims=({0: "batch"}, {0: "batch"}),
    config={"sizes": list(M.MLP_SIZES), "activation": "relu", "init_seed": 0})

GPT_TINY = ModelSpec(
    init=lambda: M.init_gpt(M.GPT_TINY),
    loss=lambda p, t, y: M.gpt_loss(p, t, y, M.GPT_TINY),
    eager_loss=lambda p, t, y: F.cross_entropy(
        M.gpt_forward(p, t, M.GPT_TINY).reshape(-1, M.GPT_TINY.vocab), y.reshape(-1)),
    data=_gpt_data, data_names=("tokens", "targets"),
    data_dims=({0: "batch", 1: "seq"}, {0: "batch", 1: "seq"}),
    config={"n_layer": 2, "d_model": 64, "n_head": 4, "vocab": 256, "n_pos": 512, "d_ff": 256,
            "tied_embedding": True, "layer_norm": "pre (F.layer_norm, eps 1e-5)",
            "activation": "gelu_tanh", "mask": "causal, arange compare", "init_seed": 0})

# The MLP with tanh activations (ONNX Runtime training differentiates Tanh with TanhGrad).
MLP_TANH = ModelSpec(
    init=M.init_mlp, loss=lambda p, x, y: M.cross_entropy(M.mlp_forward(p, x, torch.tanh), y),
    eager_loss=lambda p, x, y: F.cross_entropy(M.mlp_forward(p, x, torch.tanh), y),
    data=_mlp_data, data_names=("x", "y"), data_dims=({0: "batch"}, {0: "batch"}),
    config={**MLP.config, "activation": "tanh"})

# The same GPT traced with its eager loss: `F.cross_entropy` as users write it, which the dynamo
# exporter emits as LogSoftmax + GatherElements (forward) and ScatterElements (backward).
GPT_TINY_CE = ModelSpec(
    init=GPT_TINY.init, loss=GPT_TINY.eager_loss, eager_loss=GPT_TINY.eager_loss,
    data=_gpt_data, data_names=GPT_TINY.data_names, data_dims=GPT_TINY.data_dims,
    config={**GPT_TINY.config, "loss": "F.cross_entropy (traced as written)"})


def _cnn_data(b, seed):
    g = _gen(seed)
    x = torch.randn(b["batch"], *M.CNN_IMAGE, generator=g)
    y = torch.randint(0, 10, (b["batch"],), generator=g, dtype=torch.int64)
    return x, y


# GPT_TINY with dropout 0.1 (attention probabilities, both residual branches): training-mode
# Dropout nodes, which ONNX Runtime differentiates with com.microsoft::DropoutGrad.
GPT_TINY_DROPOUT = ModelSpec(
    init=GPT_TINY.init,
    loss=GPT_TINY.loss,
    eager_loss=lambda p, t, y: F.cross_entropy(
        M.gpt_forward(p, t, M.GPT_TINY_DROPOUT).reshape(-1, M.GPT_TINY.vocab), y.reshape(-1)),
    data=_gpt_data, data_names=GPT_TINY.data_names, data_dims=GPT_TINY.data_dims,
    config={**GPT_TINY.config, "dropout": 0.1,
            "references": "every Dropout ratio set to 0 (the masks are random)"},
    reference_loss=GPT_TINY.eager_loss)

# The CNN with batch norm in training mode (batch statistics) after its first convolution.
CNN_BN = ModelSpec(
    init=lambda: M.init_cnn_bn(),
    loss=lambda p, x, y: F.cross_entropy(M.cnn_forward(p, x), y),
    eager_loss=lambda p, x, y: F.cross_entropy(M.cnn_forward(p, x), y),
    data=lambda b, seed: _cnn_data(b, seed), data_names=("x", "y"),
    data_dims=({0: "batch"}, {0: "batch"}),
    config={"layout": "NCHW/OIHW", "image": [3, 16, 16], "batch_norm": "training mode, "
            "batch statistics, after conv1 (no conv1 bias)", "init_seed": 0})

# A CNN with max and global average pooling; F.cross_entropy as users write it.
CNN = ModelSpec(
    init=M.init_cnn,
    loss=lambda p, x, y: F.cross_entropy(M.cnn_forward(p, x), y),
    eager_loss=lambda p, x, y: F.cross_entropy(M.cnn_forward(p, x), y),
    data=_cnn_data, data_names=("x", "y"), data_dims=({0: "batch"}, {0: "batch"}),
    config={"layout": "NCHW/OIHW", "image": list(M.CNN_IMAGE), "pools": "max 2x2, global average",
            "init_seed": 0})


# A small MLP (16-32-10, relu) trained with F.cross_entropy as users write it, traced without
# decompositions: the exporter emits ai.onnx NegativeLogLikelihoodLoss (forward). The last
# label of every batch is F.cross_entropy's default ignore_index (-100).
MLP_CE_SIZES = (16, 32, 10)


def _mlp_ce_data(b, seed):
    g = _gen(seed)
    x = torch.randn(b["batch"], MLP_CE_SIZES[0], generator=g)
    y = torch.randint(0, MLP_CE_SIZES[-1], (b["batch"],), generator=g, dtype=torch.int64)
    y[-1] = -100
    return x, y


MLP_CE = ModelSpec(
    init=lambda: M.init_mlp(0, MLP_CE_SIZES),
    loss=lambda p, x, y: F.cross_entropy(M.mlp_forward(p, x), y),
    eager_loss=lambda p, x, y: F.cross_entropy(M.mlp_forward(p, x), y),
    data=_mlp_ce_data, data_names=("x", "y"), data_dims=({0: "batch"}, {0: "batch"}),
    config={"sizes": list(MLP_CE_SIZES), "activation": "relu", "init_seed": 0,
            "loss": "F.cross_entropy (traced as written, ignore_index -100 on the last label)"})


def _moe_data(b, seed):
    g = _gen(seed)
    x = torch.randn(b["batch"], M.MOE_D, generator=g)
    y = torch.randint(0, M.MOE_CLASSES, (b["batch"],), generator=g, dtype=torch.int64)
    return x, y


# A top-2 mixture-of-experts classifier: torch.topk in the router (ONNX TopK), the chosen
# experts gathered (GatherElements), their gradients scattered back.
MOE_TOP2 = ModelSpec(
    init=M.init_moe,
    loss=lambda p, x, y: M.cross_entropy(M.moe_forward(p, x), y),
    eager_loss=lambda p, x, y: F.cross_entropy(M.moe_forward(p, x), y),
    data=_moe_data, data_names=("x", "y"), data_dims=({0: "batch"}, {0: "batch"}),
    config={"d_model": M.MOE_D, "experts": M.MOE_EXPERTS, "top_k": 2, "classes": M.MOE_CLASSES,
            "router": "softmax, torch.topk(2), renormalized", "expert": "dense D x D",
            "activation": "relu", "init_seed": 0})


@dataclass
class TorchFixture:
    name: str
    description: str
    model: ModelSpec
    optimizer: str  # "sgd" | "adamw"
    trace_bindings: dict
    refs: list[dict] = field(default_factory=list)
    symbols: tuple[str, ...] = ("batch",)
    constraints: tuple[str, ...] = ()
    # Trace with aten's own decompositions of these ops (as `torch.export`'s
    # `run_decompositions` does before ONNX export): nll_loss becomes gather/scatter, which the
    # exporter emits as GatherElements/ScatterElements. The exporter's direct translation of
    # `nll_loss_backward` (torch 2.15) scales the gradient by the token count.
    decompose: tuple[str, ...] = ()
    # A known defect of the exporter that makes ONNX Runtime's outputs differ from the eager
    # step: then only the loss is checked against eager (the references are ORT's outputs on
    # the file, which is what an importer must reproduce), and the reason is recorded.
    exporter_defect: str | None = None


# ----------------------------------------------------------------------------------------------
# The step: flat inputs -> flat outputs
# ----------------------------------------------------------------------------------------------


def io_names(fx: TorchFixture, tree) -> tuple[list[str], list[str], list[str], list[str]]:
    """(input names, input pytree paths, output names, output paths) in graph order."""
    paths = [p for p, _ in M.flatten(tree)]
    dotted = [p.replace("['", ".").replace("']", "").replace("[", ".").replace("]", "")
              for p in paths]
    in_names = [f"params{d}" for d in dotted]
    in_paths = [f"params{p}" for p in paths]
    out_names = ["loss"] + [f"new_params{d}" for d in dotted]
    out_paths = ["loss"] + [f"new_params{p}" for p in paths]
    if fx.optimizer == "adamw":
        for key in ("m", "v"):
            in_names += [f"adam.{key}{d}" for d in dotted]
            in_paths += [f"opt_state.{key}{p}" for p in paths]
            out_names += [f"new_adam.{key}{d}" for d in dotted]
            out_paths += [f"new_opt_state.{key}{p}" for p in paths]
        in_names.append("adam.step")
        in_paths.append("opt_state.step")
        out_names.append("new_adam.step")
        out_paths.append("new_opt_state.step")
    in_names += list(fx.model.data_names)
    in_paths += list(fx.model.data_names)
    return in_names, in_paths, out_names, out_paths


def make_functional_step(fx: TorchFixture, tree):
    """The training step as a function of flat tensors (see the module invariant)."""
    n = len(M.flatten(tree))
    adam = fx.optimizer == "adamw"

    def step(*args):
        params = list(args[:n])
        rest = args[n:]
        if adam:
            m, v, t = list(rest[:n]), list(rest[n:2 * n]), rest[2 * n]
            rest = rest[2 * n + 1:]
        leaves = [p.detach().requires_grad_(True) for p in params]
        with torch.enable_grad():
            loss = fx.model.loss(M.unflatten(tree, leaves), *rest)
            grads = torch.autograd.grad(loss, leaves)
        if not adam:
            return (loss.detach(), *[p - SGD_LR * g for p, g in zip(params, grads)])
        upd = [M.ADAMW.update(p, g, mi, vi, t) for p, g, mi, vi in zip(params, grads, m, v)]
        return (loss.detach(), *[u[0] for u in upd], *[u[1] for u in upd],
                *[u[2] for u in upd], t + 1.0)

    return step


def eager_reference(fx: TorchFixture, bindings: dict, seed: int):
    """The same step done the ordinary PyTorch way. Returns (flat inputs, flat outputs) as
    numpy arrays in graph order; for AdamW the state comes from ADAM_WARMUP_STEPS earlier steps
    on the same batch."""
    tree = fx.model.init()
    leaves = [t.clone().requires_grad_(True) for _, t in M.flatten(tree)]
    params = M.unflatten(tree, leaves)
    data = fx.model.data(bindings, seed)
    if fx.optimizer == "sgd":
        opt = torch.optim.SGD(leaves, lr=SGD_LR)
        warmup = 0
    else:
        opt = M.ADAMW.torch_optimizer(leaves)
        warmup = ADAM_WARMUP_STEPS

    def snapshot():
        flat = [p.detach().numpy().copy() for p in leaves]
        if fx.optimizer == "adamw":
            st = [opt.state.get(p, {}) for p in leaves]
            zero = [np.zeros(p.shape, np.float32) for p in leaves]
            flat += [s["exp_avg"].numpy().copy() if s else z for s, z in zip(st, zero)]
            flat += [s["exp_avg_sq"].numpy().copy() if s else z for s, z in zip(st, zero)]
            flat.append(np.asarray(st[0]["step"].item() if st[0] else 0.0, np.float32))
        return flat

    for i in range(warmup + 1):
        if i == warmup:
            inputs = snapshot()
        opt.zero_grad()
        loss = fx.model.eager_loss(params, *data)
        loss.backward()
        opt.step()
    outputs = [loss.detach().numpy().copy()] + snapshot()
    inputs += [d.numpy() for d in data]
    return inputs, outputs


# ----------------------------------------------------------------------------------------------
# Export
# ----------------------------------------------------------------------------------------------


class _Step(torch.nn.Module):
    """nn.Module around the make_fx graph, so torch.onnx.export(dynamo=True) can take it."""

    def __init__(self, gm):
        super().__init__()
        self.gm = gm

    def forward(self, *args):
        return tuple(self.gm(*args))


def export_onnx(fx: TorchFixture, tree, in_names, out_names) -> onnx.ModelProto:
    step = make_functional_step(fx, tree)
    inputs, _ = eager_reference(fx, fx.trace_bindings, seed=99)
    example = [torch.from_numpy(np.array(a)) for a in inputs]
    # (No table at all without decompositions: the other fixtures stay byte-identical.)
    kw = {"decomposition_table": get_decompositions(
        [getattr(torch.ops.aten, op) for op in fx.decompose])} if fx.decompose else {}
    gm = make_fx(step, tracing_mode="symbolic", **kw)(*example)

    dims = {s: Dim(s, min=1, max=M.GPT_TINY.n_pos) if s == "seq" else Dim(s, min=1)
            for s in fx.symbols}
    n_data = len(fx.model.data_names)
    spec = [None] * (len(example) - n_data) + \
        [{ax: dims[s] for ax, s in d.items()} for d in fx.model.data_dims]
    prog = torch.onnx.export(
        _Step(gm).eval(), tuple(example), dynamo=True, dynamic_shapes=(tuple(spec),),
        input_names=in_names, output_names=out_names,
        optimize=fx.optimizer != "adamw", verbose=False)
    model = prog.model_proto

    # Rename the exporter's symbols to ours, using the data inputs' dynamic axes.
    mapping = {}
    by_name = {vi.name: vi for vi in model.graph.input}
    for name, d in zip(fx.model.data_names, fx.model.data_dims):
        dim = by_name[name].type.tensor_type.shape.dim
        for ax, sym in d.items():
            if not dim[ax].HasField("dim_param"):
                raise AssertionError(f"{fx.name}: {name} axis {ax} is not symbolic")
            mapping[dim[ax].dim_param] = sym
    rename_dim_params(model, {k: v for k, v in mapping.items() if k != v})
    _drop_stack_traces(model)
    return model


def _drop_stack_traces(model: onnx.ModelProto):
    """Remove the exporter's `pkg.torch.onnx.stack_trace` node metadata. It only points into
    the code make_fx generated (`<eval_with_key>.N`, N a process-wide counter) with absolute
    paths, so it made the bytes depend on the machine and on earlier exports in the process.
    The other metadata (`namespace`, `pkg.torch.onnx.fx_node`, ...) is kept."""
    for node in model.graph.node:
        keep = [p for p in node.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
        del node.metadata_props[:]
        node.metadata_props.extend(keep)


def ort_session(path: Path) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1  # deterministic reductions
    so.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def export_torch_fixture(fx: TorchFixture, out_dir: Path) -> dict:
    t0 = time.time()
    tree = fx.model.init()
    in_names, in_paths, out_names, out_paths = io_names(fx, tree)
    model = export_onnx(fx, tree, in_names, out_names)
    assert [i.name for i in model.graph.input] == in_names, [i.name for i in model.graph.input]
    assert [o.name for o in model.graph.output] == out_names
    path = out_dir / f"{fx.name}.onnx"
    size = save_model(model, path)
    sess = ort_session(path)

    refs, checks = [], []
    n_params = len(M.flatten(tree))
    for k, bindings in enumerate(fx.refs):
        inputs, want = eager_reference(fx, bindings, seed=k)
        got = sess.run(None, dict(zip(in_names, inputs)))
        raw = {out_names[i]: rel_err(g, w) for i, (g, w) in enumerate(zip(got, want))}
        masks = _noise_masks(fx, want, n_params)
        errs = {out_names[i]: rel_err(g, w, masks.get(i)) for i, (g, w) in
                enumerate(zip(got, want))}
        upd = {out_names[1 + i]: rel_err(got[1 + i] - inputs[i], want[1 + i] - inputs[i],
                                         masks.get(1 + i)) for i in range(n_params)}
        worst = max(errs, key=errs.get)
        worst_u = max(upd, key=upd.get)
        worst_raw = max(raw, key=raw.get)
        if fx.exporter_defect:
            if errs[out_names[0]] > RTOL or not all(np.isfinite(g).all() for g in got):
                raise AssertionError(f"{fx.name} ref{k}: ORT vs eager loss "
                                     f"{errs[out_names[0]]:.3g}")
        elif errs[worst] > RTOL or upd[worst_u] > RTOL_UPDATE or not all(
                np.isfinite(g).all() for g in got):
            raise AssertionError(f"{fx.name} ref{k}: ORT vs eager: {worst} {errs[worst]:.3g}, "
                                 f"update {worst_u} {upd[worst_u]:.3g}")
        n_noise = int(sum((~m).sum() for m in masks.values()))
        for i, (g, w) in enumerate(zip(got, want)):
            assert g.dtype == w.dtype and g.shape == w.shape, (out_names[i], g.dtype, w.dtype)
        arrays = {f"in_{i}": a for i, a in enumerate(inputs)}
        arrays.update({f"out_{i}": a for i, a in enumerate(got)})
        ref_file = f"{fx.name}.ref{k}.npz"
        write_npz(out_dir / ref_file, arrays)
        refs.append({"file": ref_file, "bindings": bindings})
        checks.append({"bindings": bindings, "loss": float(got[0]),
                       "max_rel_err": errs[worst], "max_rel_err_output": worst,
                       "max_rel_err_all_elements": raw[worst_raw],
                       "max_rel_err_all_elements_output": worst_raw,
                       "small_v_elements_excluded": n_noise,
                       "max_rel_err_update": upd[worst_u], "max_rel_err_update_param": worst_u})
        print(f"  ref{k} {bindings}: loss {float(got[0]):.6f}, max rel err {errs[worst]:.3g} "
              f"({worst}; all elements {raw[worst_raw]:.3g}, {n_noise} elements with "
              f"sqrt(v_hat) < eps excluded), update {upd[worst_u]:.3g} ({worst_u}); {ref_file} "
              f"{(out_dir / ref_file).stat().st_size} bytes")

    ops = op_counts(model)
    meta = {
        "name": fx.name,
        "description": fx.description,
        "kind": "torch_train_step",
        "versions": versions("torch", "onnxscript", "onnxruntime"),
        **model_meta(model),
        "symbols": list(fx.symbols),
        "constraints": list(fx.constraints),
        "dim_params": dim_params(model),
        "config": {**fx.model.config, "optimizer": _optimizer_desc(fx.optimizer),
                   "adam_warmup_steps": ADAM_WARMUP_STEPS if fx.optimizer == "adamw" else None,
                   "exported_with": {"tracer": 'make_fx(tracing_mode="symbolic")',
                                     **({"decompositions": list(fx.decompose)}
                                        if fx.decompose else {}),
                                     "torch.onnx.export": {"dynamo": True,
                                                           "optimize": fx.optimizer != "adamw"}}},
        "inputs": describe_values(model.graph.input, in_paths),
        "outputs": describe_values(model.graph.output, out_paths),
        "ops": sum(ops.values()),
        "bytes": size,
        "op_names": dict(sorted(ops.items())),
        "refs": refs,
        "ref_format": "npz (deflate); in_i = graph inputs in order, out_i = onnxruntime "
                      "(CPU, 1 thread) outputs in order; compare with rtol~1e-4, atol~1e-5",
        "checks": {"reference": "eager PyTorch step: F.cross_entropy, backward(), "
                                "torch.optim." + ("SGD" if fx.optimizer == "sgd" else "AdamW"),
                   "rtol": RTOL, "rtol_update": RTOL_UPDATE, "refs": checks,
                   **({"exporter_defect": fx.exporter_defect,
                       "checked_against_eager": "loss only"} if fx.exporter_defect else {})},
    }
    write_meta(out_dir, fx.name, meta)
    print(f"{fx.name}: {meta['ops']} nodes, {size} bytes, {len(in_names)} inputs, "
          f"{len(out_names)} outputs ({time.time() - t0:.1f}s)")
    return meta


def _noise_masks(fx: TorchFixture, want, n_params) -> dict[int, np.ndarray]:
    """For AdamW: output index -> mask of the elements whose update is well conditioned.

    Where a gradient is zero in exact arithmetic (e.g. the attention key bias: softmax is
    invariant to a per-query constant) its f32 value is rounding noise (~1e-11), and
    sqrt(v_hat) < eps makes the AdamW update `m_hat / (sqrt(v_hat) + eps)` amplify that noise to
    ~1e-3 of lr, differently in every implementation. Such elements (sqrt(v_hat) < eps) are left
    out of the check of the params and m; they are counted in the metadata."""
    if fx.optimizer != "adamw":
        return {}
    a = M.ADAMW
    t = float(want[-1])
    masks = {}
    for i in range(n_params):
        v_hat = want[1 + 2 * n_params + i].astype(np.float64) / (1.0 - a.b2 ** t)
        ok = np.sqrt(v_hat) >= a.eps
        masks[1 + i] = ok  # new param
        masks[1 + n_params + i] = ok  # new m
    return masks


def _optimizer_desc(kind):
    if kind == "sgd":
        return f"SGD(lr={SGD_LR})"
    a = M.ADAMW
    return f"AdamW(lr={a.lr}, betas=({a.b1}, {a.b2}), eps={a.eps}, weight_decay={a.weight_decay})"


_MLP_REFS = [{"batch": 8}, {"batch": 3}]
_GPT_REFS = [{"batch": 4, "seq": 37}, {"batch": 2, "seq": 64}]
_GPT_SYMS = ("batch", "seq")
_GPT_CONS = (f"seq <= {M.GPT_TINY.n_pos}",)

TORCH_FIXTURES = [
    TorchFixture(
        "torch_mlp_sgd",
        "PyTorch MLP 64-256-256-10 (relu), mean softmax cross-entropy with int64 labels, SGD "
        "(lr=0.05), one training step as a pure function. Inputs: params (JAX pytree order: "
        "[i]['b'] before [i]['w']; w is [in, out]), x: f32[batch,64], y: i64[batch]. Outputs: "
        "loss, new params.", MLP, "sgd", {"batch": 5}, _MLP_REFS),
    TorchFixture(
        "torch_mlp_adam",
        "torch_mlp_sgd with AdamW (torch.optim.AdamW semantics, lr=1e-3, betas=(0.9, 0.95), "
        "eps=1e-8, weight_decay=0.1). Inputs: params, m (exp_avg) per param, v (exp_avg_sq) per "
        "param, step f32[] (count before this step), x, y. Outputs: loss, new params, new m, "
        "new v, new step.", MLP, "adamw", {"batch": 5}, _MLP_REFS),
    TorchFixture(
        "torch_gpt2_tiny_sgd",
        "PyTorch 2-layer GPT (d=64, 4 heads, vocab 256, 512 positions, pre-LN F.layer_norm, "
        "GELU-tanh MLP 4x, causal mask by arange compare, tied embedding, wpe[:seq] slice), "
        "mean cross-entropy over batch*seq tokens, SGD (lr=0.05). tokens, targets: "
        "i64[batch,seq]. Outputs: loss, new params.",
        GPT_TINY, "sgd", {"batch": 3, "seq": 11}, _GPT_REFS, _GPT_SYMS, _GPT_CONS),
    TorchFixture(
        "torch_gpt2_tiny_adam",
        "torch_gpt2_tiny_sgd with AdamW (as torch_mlp_adam; the JAX gpt2_tiny_adamw "
        "hyper-parameters). Inputs: params, m, v, step, tokens, targets. Outputs: loss, new "
        "params, new m, new v, new step.",
        GPT_TINY, "adamw", {"batch": 3, "seq": 11}, _GPT_REFS, _GPT_SYMS, _GPT_CONS),
    TorchFixture(
        "torch_gpt2_tiny_ce_adam",
        "torch_gpt2_tiny_adam with the loss traced as users write it, F.cross_entropy on the "
        "[batch*seq, vocab] logits (the exporter emits GatherElements and ScatterElements). "
        "Inputs: params, m, v, step, tokens, targets. Outputs: loss, new params, new m, new v, "
        "new step.",
        GPT_TINY_CE, "adamw", {"batch": 3, "seq": 11}, _GPT_REFS, _GPT_SYMS, _GPT_CONS,
        decompose=("nll_loss_forward", "nll_loss_backward")),
    TorchFixture(
        "torch_mlp_ce_nll_sgd",
        "PyTorch MLP 16-32-10 (relu), F.cross_entropy traced as written (no decompositions: "
        "LogSoftmax + ai.onnx NegativeLogLikelihoodLoss with ignore_index -100, which the last "
        "label of every batch is), SGD (lr=0.05). Inputs: params, x: f32[batch,16], "
        "y: i64[batch]. Outputs: loss, new params. The references are ONNX Runtime's outputs on "
        "the file; only the loss equals the eager step's (exporter_defect).",
        MLP_CE, "sgd", {"batch": 5}, _MLP_REFS,
        exporter_defect="torch.onnx (dynamo) translates aten.nll_loss_backward with a wrong "
                        "scale, so the gradients in the file differ from eager PyTorch's"),
    TorchFixture(
        "torch_moe_top2_sgd",
        "PyTorch top-2 mixture-of-experts classifier: router softmax(x @ gate) over 4 experts, "
        "torch.topk(probs, 2) (ONNX TopK, k a constant input), the two probabilities "
        "renormalized weight the chosen experts' outputs (each expert a 16x16 dense layer; all "
        "evaluated, the chosen two gathered by torch.gather), relu, dense head 16->10, mean "
        "cross-entropy, SGD (lr=0.05). Inputs: params (experts f32[4,16,16], gate f32[16,4], "
        "head.b, head.w), x: f32[batch,16], y: i64[batch]. Outputs: loss, new params.",
        MOE_TOP2, "sgd", {"batch": 5}, _MLP_REFS),
]
