"""From a PyTorch model to an Ebb plan, without touching ONNX: :func:`export` builds the
training step (forward, ``torch.autograd.grad``, the optimizer's update written out as tensor
ops), traces it with ``make_fx`` (symbolic shapes), exports it with
``torch.onnx.export(dynamo=True)``, names its dynamic dimensions as you do, and compiles it, as
:func:`ebb.jax.export` does for JAX.

    >>> import torch, torch.nn.functional as F, ebb, ebb.torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    >>> opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    >>> x, y = torch.randn(8, 64), torch.randint(0, 10, (8,))
    >>> plan = ebb.torch.export(model, lambda m, x, y: F.cross_entropy(m(x), y), opt, x, y,
    ...                         dims=[{0: "B"}, {0: "B"}])
    >>> rt = ebb.Runtime(plan, budget="90%")
    >>> outs, report = rt.step({"B": 8}, plan.step_inputs(x, y))
    >>> loss = plan.apply(outs)          # new parameters and optimizer state into model and opt

The step's inputs, in order: the trainable parameters (``model.named_parameters()`` order),
the optimizer state (per parameter: SGD's momentum buffer; Adam's and AdamW's ``exp_avg``, then
``exp_avg_sq``, then the step count, an ``f32[]``), then the data. Its outputs: the loss, the
new parameters, the new optimizer state. Optimizers: ``torch.optim.SGD`` (momentum, Nesterov,
weight decay; no dampening), ``torch.optim.Adam`` and ``torch.optim.AdamW`` (no AMSGrad),
one parameter group holding every trainable parameter. Requires ``torch`` and ``onnxscript``
(``pip install ebb[torch]``).
"""

from __future__ import annotations

import os
import re
import tempfile
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from . import EbbError, Plan, compile as _compile

Dims = Mapping[int, str]


class TorchExportError(EbbError):
    """The training step cannot be exported: an optimizer or module this exporter does not
    handle, or an op ``torch.onnx.export`` has no ONNX translation for (named)."""


def _state_names(opt) -> list[str]:
    import torch

    if isinstance(opt, torch.optim.SGD):
        return ["momentum_buffer"] if opt.param_groups[0]["momentum"] else []
    return ["exp_avg", "exp_avg_sq"]


def _check_optimizer(opt, params) -> dict:
    import torch

    kinds = (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW)
    if type(opt) not in kinds:
        raise TorchExportError(
            f"ebb.torch.export handles torch.optim.SGD, Adam and AdamW, not {type(opt).__name__}"
        )
    if len(opt.param_groups) != 1:
        raise TorchExportError("the optimizer must have one parameter group")
    group = opt.param_groups[0]
    ids = [id(p) for p in group["params"]]
    if sorted(ids) != sorted(id(p) for p in params):
        raise TorchExportError(
            "the optimizer's parameters must be the model's trainable parameters"
        )
    for flag in ("maximize", "amsgrad", "differentiable", "capturable"):
        if group.get(flag):
            raise TorchExportError(f"the optimizer option {flag}=True is not handled")
    if isinstance(opt, torch.optim.SGD) and group.get("dampening", 0):
        raise TorchExportError("SGD with dampening is not handled")
    return group


def _update(opt, group, p, g, state):
    """One optimizer update of parameter `p` with gradient `g`, as torch.optim's single-tensor
    path computes it; `state` is the list of this parameter's state tensors (see the module
    docs). Returns (new p, new state)."""
    import torch

    lr, wd = group["lr"], group["weight_decay"]
    if isinstance(opt, torch.optim.SGD):
        d = g + wd * p if wd else g
        if not group["momentum"]:
            return p - lr * d, []
        buf = state[0] * group["momentum"] + d
        d = d + group["momentum"] * buf if group["nesterov"] else buf
        return p - lr * d, [buf]
    m, v, t = state
    b1, b2 = group["betas"]
    t = t + 1.0
    if isinstance(opt, torch.optim.AdamW):
        p = p * (1.0 - lr * wd)
    elif wd:
        g = g + wd * p
    m = m + (g - m) * (1.0 - b1)
    v = v * b2 + (g * g) * (1.0 - b2)
    bc1 = 1.0 - b1**t
    bc2 = 1.0 - b2**t
    denom = torch.sqrt(v) / torch.sqrt(bc2) + group["eps"]
    p = p - (lr / bc1) * (m / denom)
    return p, [m, v, t]


def _initial_state(opt, params) -> list:
    """The optimizer state tensors in step-input order, from ``opt.state`` or zeros."""
    import torch

    names = _state_names(opt)
    out = []
    for key in names:
        for p in params:
            s = opt.state.get(p, {})
            out.append(s[key].detach().clone() if key in s else torch.zeros_like(p))
    if not isinstance(opt, torch.optim.SGD):
        s = opt.state.get(params[0], {})
        step = s.get("step", 0.0)
        out.append(torch.tensor(float(step), dtype=torch.float32))
    return out


class TorchPlan(Plan):
    """A :class:`ebb.Plan` of a PyTorch training step, with the model and optimizer it was
    exported from: :meth:`step_inputs` gives :meth:`ebb.Runtime.step` its inputs, and
    :meth:`apply` writes the step's outputs back into the model and the optimizer."""

    def __init__(self, inner, model, opt, params, names):
        super().__init__(inner)
        self._model, self._opt, self._params, self._names = model, opt, params, names

    @property
    def input_names(self) -> list[str]:
        """The step's input names, in order (parameters, optimizer state, data)."""
        return list(self._names[0])

    @property
    def output_names(self) -> list[str]:
        """The step's output names, in order (loss, parameters, optimizer state)."""
        return list(self._names[1])

    def step_inputs(self, *data) -> list[np.ndarray]:
        """The step's inputs as numpy arrays: the model's parameters and the optimizer's
        state now, then ``data`` (tensors or arrays)."""
        import torch

        def arr(t):
            return t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)

        return [arr(t) for t in [*self._params, *_initial_state(self._opt, self._params), *data]]

    def apply(self, outputs: Sequence[np.ndarray]) -> float:
        """Writes the new parameters and optimizer state of a step's ``outputs`` into the model
        and the optimizer (as ``optimizer.step()`` would); returns the loss."""
        import torch

        n = len(self._params)
        with torch.no_grad():
            for p, new in zip(self._params, outputs[1 : 1 + n]):
                p.copy_(torch.from_numpy(np.asarray(new)))
        rest = list(outputs[1 + n :])
        for key in _state_names(self._opt):
            for p in self._params:
                self._opt.state.setdefault(p, {})[key] = torch.from_numpy(np.array(rest.pop(0)))
        if rest:
            step = torch.tensor(float(np.asarray(rest.pop(0))))
            for p in self._params:
                self._opt.state.setdefault(p, {})["step"] = step.clone()
        return float(np.asarray(outputs[0]))


def _unsupported_ops(err: BaseException) -> list[str]:
    text = "".join(str(e) for e in (err, err.__cause__, err.__context__) if e is not None)
    return sorted(set(re.findall(r"aten[.:]{1,2}[A-Za-z_0-9]+(?:\.[A-Za-z_0-9]+)?", text)))


def export(
    model,
    loss_fn: Callable,
    optimizer,
    *inputs,
    dims: Sequence[Dims | None] | None = None,
    max: Mapping[str, int] | None = None,
    input_names: Sequence[str] | None = None,
    device: str | None = None,
    fusion: bool = True,
    donate: str = "auto",
) -> TorchPlan:
    """Exports the training step of ``model`` under ``optimizer`` and compiles it into a plan.

    ``loss_fn(model, *inputs)`` returns the scalar loss. ``inputs`` are example tensors (used
    for tracing only: their values do not matter); ``dims[i]`` names the dynamic axes of
    ``inputs[i]`` (``{0: "B", 1: "S"}``; ``None`` or missing: static); ``max`` bounds symbols
    (``{"S": 512}``, e.g. for a position table). Example sizes of distinct symbols must differ
    and be at least 2 (the symbolic trace takes equal sizes for one symbol, and 0 and 1 as
    constants). ``input_names`` names the data inputs (default ``input_0``, ...). ``device``,
    ``fusion`` and ``donate`` are :func:`ebb.compile`'s.

    Raises :class:`TorchExportError` for an optimizer, module or op the export cannot handle,
    naming it, and :class:`ebb.ImportFailed` when Ebb cannot import the ONNX model."""
    import torch
    from torch._decomp import get_decompositions
    from torch.export import Dim
    from torch.fx.experimental.proxy_tensor import make_fx

    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    params = [p for _, p in named]
    group = _check_optimizer(optimizer, params)
    if model.training:
        for name, b in model.named_buffers():
            raise TorchExportError(
                f"the model has buffer `{name}`, which training updates in place (batch "
                "norm's running statistics): export it in eval mode or without buffers"
            )
    dims = list(dims or [])
    dims += [None] * (len(inputs) - len(dims))
    sizes: dict[str, int] = {}
    for i, (x, d) in enumerate(zip(inputs, dims)):
        for ax, sym in (d or {}).items():
            n = int(x.shape[ax])
            if n < 2:
                raise TorchExportError(f"input {i} axis {ax} (`{sym}`): give an example size >= 2")
            if sizes.setdefault(sym, n) != n:
                raise TorchExportError(f"`{sym}` has example sizes {sizes[sym]} and {n}")
    by_size: dict[int, str] = {}
    for sym, n in sizes.items():
        if by_size.setdefault(n, sym) != sym:
            raise TorchExportError(
                f"`{by_size[n]}` and `{sym}` have the same example size {n}: give them different "
                "sizes (the symbolic trace would take them for one symbol)"
            )

    state = _initial_state(optimizer, params)
    n_p, n_s = len(params), len(state)
    buffers = dict(model.named_buffers())

    def step(*args):
        ps, st, data = list(args[:n_p]), list(args[n_p : n_p + n_s]), args[n_p + n_s :]
        leaves = [p.detach().requires_grad_(True) for p in ps]
        with torch.enable_grad():
            tensors = {n: t for (n, _), t in zip(named, leaves)}
            tensors.update(buffers)
            stateless = _Stateless(model, tensors)
            loss = loss_fn(stateless, *data)
            grads = torch.autograd.grad(loss, leaves)
        new_p, new_s = [], []
        per = len(_state_names(optimizer))
        for k, (p, g) in enumerate(zip(ps, grads)):
            s = [st[j * n_p + k] for j in range(per)]
            if not isinstance(optimizer, torch.optim.SGD):
                s.append(st[-1])
            q, s2 = _update(optimizer, group, p, g, s)
            new_p.append(q)
            new_s.append(s2)
        flat_s = [new_s[k][j] for j in range(per) for k in range(n_p)]
        if not isinstance(optimizer, torch.optim.SGD):
            flat_s.append(new_s[0][-1])
        return (loss.detach(), *new_p, *flat_s)

    example = [p.detach().clone() for p in params] + state + [torch.as_tensor(x) for x in inputs]
    data_names = list(input_names or [f"input_{i}" for i in range(len(inputs))])
    dotted = [n for n, _ in named]
    keys = _state_names(optimizer)
    in_names = [f"params.{n}" for n in dotted]
    in_names += [f"opt.{key}.{n}" for key in keys for n in dotted]
    out_names = ["loss"] + [f"new_params.{n}" for n in dotted]
    out_names += [f"new_opt.{key}.{n}" for key in keys for n in dotted]
    if not isinstance(optimizer, torch.optim.SGD):
        in_names.append("opt.step")
        out_names.append("new_opt.step")
    in_names += data_names
    try:
        # aten's own decomposition of nll_loss (as torch.export's run_decompositions does):
        # the exporter's direct translation of nll_loss_backward scales the gradient by the
        # number of targets (torch 2.15).
        aten = torch.ops.aten
        table = get_decompositions([aten.nll_loss_forward, aten.nll_loss_backward])
        gm = make_fx(step, tracing_mode="symbolic", decomposition_table=table)(*example)

        class StepModule(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.gm = gm

            def forward(self, *args):
                return tuple(self.gm(*args))

        bounds = dict(max or {})
        made = {s: Dim(s, min=2, max=bounds[s]) if s in bounds else Dim(s, min=2) for s in sizes}
        spec = [None] * (n_p + n_s) + [
            {ax: made[s] for ax, s in (d or {}).items()} or None for d in dims
        ]
        prog = torch.onnx.export(
            StepModule().eval(),
            tuple(example),
            dynamo=True,
            dynamic_shapes=(tuple(spec),),
            input_names=in_names,
            output_names=out_names,
            optimize=isinstance(optimizer, torch.optim.SGD),
            verbose=False,
        )
    except TorchExportError:
        raise
    except Exception as e:  # the tracer's and the exporter's own errors
        ops = _unsupported_ops(e)
        what = f" (ops: {', '.join(ops)})" if ops else ""
        raise TorchExportError(
            f"torch.onnx.export cannot export this training step{what}: "
            f"{str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}"
        ) from e
    m = prog.model_proto
    _rename_dims(m, inputs, dims, data_names)
    with tempfile.TemporaryDirectory(prefix="ebb-torch-") as d:
        path = os.path.join(d, "step.onnx")
        with open(path, "wb") as f:
            f.write(m.SerializeToString())
        inner = _compile(path, device=device, fusion=fusion, donate=donate)._p
    return TorchPlan(inner, model, optimizer, params, (in_names, out_names))


class _Stateless:
    """Calls `model` with its parameters and buffers replaced by `tensors`
    (``torch.func.functional_call``); other attributes are the model's."""

    def __init__(self, model, tensors):
        self._model, self._tensors = model, tensors

    def __call__(self, *args, **kwargs):
        from torch.func import functional_call

        return functional_call(self._model, self._tensors, args, kwargs)

    def __getattr__(self, name):
        return getattr(self._model, name)


def _rename_dims(model, inputs, dims, data_names):
    """Renames the exporter's symbols (`s17`) to the user's (`B`) in every dim_param, token-wise
    (derived expressions such as `4*s17` become `4*B`)."""
    by_name = {vi.name: vi for vi in model.graph.input}
    mapping = {}
    for name, d in zip(data_names, dims):
        vi = by_name.get(name)
        if vi is None:
            continue
        shape = vi.type.tensor_type.shape.dim
        for ax, sym in (d or {}).items():
            if not shape[ax].HasField("dim_param"):
                raise TorchExportError(f"input `{name}` axis {ax} (`{sym}`) was exported static")
            mapping[shape[ax].dim_param] = sym
    mapping = {k: v for k, v in mapping.items() if k != v}
    if not mapping:
        return
    pat = re.compile(r"\b(" + "|".join(re.escape(k) for k in sorted(mapping, key=len, reverse=True)) + r")\b")

    def fix(vi):
        t = vi.type.tensor_type
        if t.HasField("shape"):
            for dim in t.shape.dim:
                if dim.HasField("dim_param"):
                    dim.dim_param = pat.sub(lambda m: mapping[m.group(1)], dim.dim_param)

    g = model.graph
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        fix(vi)
    for fn in model.functions:
        for vi in fn.value_info:
            fix(vi)
