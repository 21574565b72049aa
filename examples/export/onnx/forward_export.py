"""Forward + loss ONNX models with the parameters as initializers: the input of ONNX Runtime's
training-artifact generator (the `ort_*` fixtures). Runs in the torch venv (needs onnxscript).

The model is the eager one of `models_torch` (`F.cross_entropy`, which the dynamo exporter
lowers to a single `SoftmaxCrossEntropyLoss`), exported with `torch.onnx.export(dynamo=True)`
and dynamic `batch` / `seq`. The onnxscript optimizer is run by hand with the parameters
temporarily marked as graph inputs: its `DeduplicateInitializersPass` would otherwise merge
parameters that happen to have equal initial values (every LayerNorm gain is ones, every bias
zeros), tying them in training, and constant folding could fold parameters into constants.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxscript
import torch
from torch.export import Dim

import models_torch as M
from onnx_common import rename_dim_params, zero_dropout
from torch_steps import CNN, CNN_BN, GPT_TINY, GPT_TINY_DROPOUT, MLP, MLP_TANH, ModelSpec


class ParamTree(torch.nn.Module):
    """A nested dict/list of tensors as an nn.Module, so the parameter (and ONNX initializer)
    names are the dotted pytree paths: `blocks.0.attn.w_qkv`."""

    def __init__(self, tree):
        super().__init__()
        self.is_list = isinstance(tree, list)
        self.keys = list(range(len(tree))) if self.is_list else sorted(tree)  # pytree order
        for k in self.keys:
            v = tree[k]
            if isinstance(v, torch.Tensor):
                self.register_parameter(str(k), torch.nn.Parameter(v.clone()))
            else:
                self.add_module(str(k), ParamTree(v))

    def tree(self):
        vals = [getattr(self, str(k)) for k in self.keys]
        vals = [v.tree() if isinstance(v, ParamTree) else v for v in vals]
        return vals if self.is_list else dict(zip(self.keys, vals))


class LossModel(torch.nn.Module):
    """loss = spec.eager_loss(params, *data) with the params as nn.Parameters."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.spec = spec
        self.params = ParamTree(spec.init())

    def forward(self, *data):
        return self.spec.eager_loss(self.params.tree(), *data)


SPECS = {"ort_mlp": (MLP, {"batch": 5}), "ort_mlp_tanh": (MLP_TANH, {"batch": 5}),
         "ort_gpt2_tiny": (GPT_TINY, {"batch": 3, "seq": 11}),
         "ort_cnn": (CNN, {"batch": 5}),
         "ort_cnn_bn": (CNN_BN, {"batch": 5}),
         "ort_gpt2_tiny_dropout": (GPT_TINY_DROPOUT, {"batch": 3, "seq": 11})}


def export_forward(name: str, path: Path) -> list[str]:
    """Write the forward + loss model of fixture `name` to `path`; returns the parameter
    (initializer) names in pytree order."""
    spec, bindings = SPECS[name]
    model = LossModel(spec).eval()
    data = spec.data(bindings, 99)
    dims = {s: Dim(s, min=1, max=M.GPT_TINY.n_pos) if s == "seq" else Dim(s, min=1)
            for d in spec.data_dims for s in d.values()}
    dyn = tuple({ax: dims[s] for ax, s in d.items()} for d in spec.data_dims)
    prog = torch.onnx.export(model, data, dynamo=True, dynamic_shapes=(dyn,),
                             input_names=list(spec.data_names), output_names=["loss"],
                             optimize=False)
    g = prog.model.graph
    names = [n for n, _ in model.named_parameters()]
    params = [g.initializers[n] for n in names]
    for v in params:
        g.inputs.append(v)
    onnxscript.optimizer.optimize(prog.model)
    for v in params:
        g.inputs.remove(v)
    proto = ir.serde.serialize_model(prog.model)
    kept = {t.name for t in proto.graph.initializer}
    assert all(n in kept for n in names), sorted(set(names) - kept)

    mapping = {}
    by_name = {vi.name: vi for vi in proto.graph.input}
    for dname, d in zip(spec.data_names, spec.data_dims):
        dim = by_name[dname].type.tensor_type.shape.dim
        for ax, sym in d.items():
            mapping[dim[ax].dim_param] = sym
    rename_dim_params(proto, {k: v for k, v in mapping.items() if k != v})
    for node in proto.graph.node:  # machine-specific, see torch_steps._drop_stack_traces
        keep = [p for p in node.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
        del node.metadata_props[:]
        node.metadata_props.extend(keep)
    onnx.checker.check_model(proto)
    path.write_bytes(proto.SerializeToString(deterministic=True))

    # The forward model run by onnxruntime must give the eager loss.
    import onnxruntime as ort

    check = path
    if spec.reference_loss:  # random masks: compare without dropout
        check = path.with_suffix(".ratio0.onnx")
        check.write_bytes(zero_dropout(proto)[0].SerializeToString())
    sess = ort.InferenceSession(str(check), providers=["CPUExecutionProvider"])
    got = sess.run(None, {n: d.numpy() for n, d in zip(spec.data_names, data)})[0]
    with torch.no_grad():
        want = (spec.reference_loss(model.params.tree(), *data) if spec.reference_loss
                else model(*data)).numpy()
    assert np.allclose(got, want, rtol=1e-5, atol=1e-6), (got, want)
    return names
