"""`ebb.torch.export` on a torch MLP (AdamW) and a small transformer (SGD with momentum and
weight decay): the exported step, finalized under a budget and run by `ebb.Runtime.step` at two
shapes, gives the loss, parameters and optimizer state of eager PyTorch's step
(`loss.backward()`, `optimizer.step()`), and writing them back (`TorchPlan.apply`) continues
training as eager PyTorch does."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover - the test venv has torch (scripts/setup-debian.sh)
    pytest.fail(
        "torch is not installed in the test venv: run `bash scripts/setup-debian.sh` (it "
        "installs python/requirements-torch.txt)",
        pytrace=False,
    )

import ebb
import ebb.torch


def _eager_step(model, opt, loss_fn, *data):
    """One ordinary PyTorch step on copies; (loss, new params, new optimizer state)."""
    m, o = copy.deepcopy((model, opt))  # one memo: the copied optimizer holds m's parameters
    o.zero_grad()
    loss = loss_fn(m, *data)
    loss.backward()
    o.step()
    return float(loss), m, o


def _normwise(got, want, base):
    got, want, base = (np.asarray(a, np.float64) for a in (got, want, base))
    den = np.linalg.norm(want - base)
    return float(np.linalg.norm(got - want) / (den if den > 0 else max(np.linalg.norm(want), 1e-30)))


def _check_against_eager(plan, rt, model, opt, loss_fn, bind, *data, tol=1e-4):
    inputs = plan.step_inputs(*data)
    outs, report = rt.step(bind, inputs)
    assert report["measured_peak_bytes"] == report["peak_bytes_planned"]
    loss, m, o = _eager_step(model, opt, loss_fn, *data)
    assert abs(float(outs[0]) - loss) <= 1e-5 * abs(loss), (float(outs[0]), loss)
    params = list(model.parameters())
    n = len(params)
    for k, (old, new) in enumerate(zip(params, m.parameters())):
        e = _normwise(outs[1 + k], new.detach().numpy(), old.detach().numpy())
        assert e <= tol, f"{plan.output_names[1 + k]}: normwise update error {e:.2e}"
    state = outs[1 + n :]
    names = plan.output_names[1 + n :]
    for name, got in zip(names, state):
        key, pname = name.split(".", 2)[1:] if name != "new_opt.step" else ("step", None)
        if pname is None:
            want = next(iter(o.state.values()))["step"]
            assert float(got) == float(want), (float(got), float(want))
            continue
        p_new = dict(m.named_parameters())[pname]
        p_old = dict(model.named_parameters())[pname]
        before = opt.state.get(p_old, {}).get(key, torch.zeros_like(p_old))
        e = _normwise(got, o.state[p_new][key].numpy(), before.numpy())
        assert e <= tol, f"{name}: normwise error {e:.2e}"
    return outs, m, o


def test_a_torch_mlp_under_adamw_matches_eager_pytorch():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 5))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)

    def loss_fn(m, x, y):
        return F.cross_entropy(m(x), y)

    x, y = torch.randn(6, 16), torch.randint(0, 5, (6,))
    # One eager step first: the exported step starts from optimizer state that is not zero.
    opt.zero_grad()
    loss_fn(model, x, y).backward()
    opt.step()
    plan = ebb.torch.export(model, loss_fn, opt, x, y, dims=[{0: "B"}, {0: "B"}], input_names=["x", "y"])
    assert plan.symbols == ["B"]
    assert plan.input_names[-2:] == ["x", "y"] and plan.output_names[0] == "loss"
    # This MLP's step has nothing worth evicting: its smallest feasible budget is its scheduled
    # peak (27748 bytes at B=6, above 95% of the program-order peak), so the budget is that.
    r = plan.finalize({"B": 11}, budget="100%scheduled")
    assert r["peak_bytes_planned"] <= r["budget_bytes"]
    rt = ebb.Runtime(plan, budget="100%scheduled")
    for b in (6, 11):
        xb, yb = torch.randn(b, 16), torch.randint(0, 5, (b,))
        _check_against_eager(plan, rt, model, opt, loss_fn, {"B": b}, xb, yb)
    # Written back, the next step continues from Ebb's parameters and state, as eager does.
    outs, m, o = _check_against_eager(plan, rt, model, opt, loss_fn, {"B": 7}, torch.randn(7, 16), torch.randint(0, 5, (7,)))
    plan.apply(outs)
    for p, q in zip(model.parameters(), m.parameters()):
        assert np.allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-7)
    assert float(next(iter(opt.state.values()))["step"]) == 2.0
    _check_against_eager(plan, rt, model, opt, loss_fn, {"B": 9}, torch.randn(9, 16), torch.randint(0, 5, (9,)))


class TinyTransformer(torch.nn.Module):
    """A pre-LayerNorm transformer block on tokens: embedding read by indexing, causal
    self-attention written out (no fused attention kernel), a GELU MLP, a tied head."""

    def __init__(self, vocab=24, d=16, heads=2, n_pos=32):
        super().__init__()
        self.heads = heads
        self.wte = torch.nn.Parameter(torch.randn(vocab, d) * 0.1)
        self.wpe = torch.nn.Parameter(torch.randn(n_pos, d) * 0.05)
        self.ln1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.fc = torch.nn.Linear(d, 4 * d)
        self.out = torch.nn.Linear(4 * d, d)

    def forward(self, tokens):
        b, s = tokens.shape
        x = self.wte[tokens] + self.wpe[:s]
        h = self.ln1(x)
        q, k, v = self.qkv(h).split(x.shape[-1], dim=-1)
        dh = x.shape[-1] // self.heads
        q, k, v = (t.reshape(b, s, self.heads, dh).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(dh))
        pos = torch.arange(s)
        att = torch.where(pos.unsqueeze(1) >= pos.unsqueeze(0), att, torch.finfo(att.dtype).min)
        y = (torch.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, s, -1)
        x = x + self.proj(y)
        x = x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        return x @ self.wte.t()


def test_a_small_transformer_under_sgd_momentum_matches_eager_pytorch():
    torch.manual_seed(1)
    model = TinyTransformer()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)

    def loss_fn(m, tokens, targets):
        logits = m(tokens)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    tokens, targets = torch.randint(0, 24, (3, 5)), torch.randint(0, 24, (3, 5))
    plan = ebb.torch.export(
        model, loss_fn, opt, tokens, targets,
        dims=[{0: "B", 1: "S"}, {0: "B", 1: "S"}], max={"S": 32},
    )
    assert sorted(plan.symbols) == ["B", "S"]
    rt = ebb.Runtime(plan)
    for b, s in ((2, 7), (4, 16)):
        t, y = torch.randint(0, 24, (b, s)), torch.randint(0, 24, (b, s))
        outs, m, o = _check_against_eager(plan, rt, model, opt, loss_fn, {"B": b, "S": s}, t, y)
    plan.apply(outs)
    t, y = torch.randint(0, 24, (3, 9)), torch.randint(0, 24, (3, 9))
    _check_against_eager(plan, rt, model, opt, loss_fn, {"B": 3, "S": 9}, t, y)


def test_what_the_exporter_cannot_handle_is_a_clear_error():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    with pytest.raises(ebb.torch.TorchExportError, match="RMSprop"):
        ebb.torch.export(model, lambda m, x: m(x).sum(), torch.optim.RMSprop(model.parameters()), torch.randn(3, 4), dims=[{0: "B"}])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ebb.torch.TorchExportError, match="same example size"):
        ebb.torch.export(model, lambda m, x, y: (m(x) * y).sum(), opt, torch.randn(4, 4), torch.randn(4, 4), dims=[{0: "B"}, {1: "C"}])
    conv = torch.nn.Conv2d(3, 4, 3)
    with pytest.raises(ebb.torch.TorchExportError, match="convolution"):
        ebb.torch.export(conv, lambda m, x: m(x).square().mean(), torch.optim.SGD(conv.parameters(), lr=0.1), torch.randn(2, 3, 8, 8), dims=[{0: "B"}])
