"""`ebb.Runtime.step` on real steps with optimizer state: every JAX fixture with references runs
from Python (0-d inputs such as optax's `count` stay 0-d, 0-d outputs come back 0-d) with the
outputs `ebb run --save-outputs` writes, bit for bit; every optax optimizer's scalar state
round-trips through a step exported by `ebb.jax.export`, outputs within float rounding of JAX's;
budgets are accepted as everywhere (`"60%"`, `"50%scheduled"`, bytes, `"2GiB"`)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import ebb
import ebb.jax
from conftest import FIXTURES, ebb_cli


def _refs():
    out = []
    for meta in sorted(FIXTURES.glob("*.json")):
        m = json.loads(meta.read_text())
        for r in m.get("refs") or []:
            out.append((m["name"], r["file"], r["bindings"]))
            break  # the first reference of each fixture
    return out


@pytest.mark.parametrize("name,ref,bind", _refs(), ids=[r[0] for r in _refs()])
def test_every_fixture_steps_from_python_as_ebb_run(name, ref, bind, tmp_path):
    plan = ebb.compile(FIXTURES / f"{name}.mlir")
    with np.load(FIXTURES / ref) as z:
        n_in = sum(1 for k in z.files if k.startswith("in_"))
        inputs = [z[f"in_{i}"] for i in range(n_in)]
        want = [z[f"out_{i}"] for i in range(sum(1 for k in z.files if k.startswith("out_")))]
    specs = plan.input_specs(bind)
    for (n, dtype, shape), x in zip(specs, inputs):
        assert x.shape == shape, (n, x.shape, shape)
    outs, report = ebb.Runtime(plan).step(bind, inputs)
    assert [o.shape for o in outs] == [w.shape for w in want]
    assert any(o.ndim == 0 for o in outs)
    saved = tmp_path / "outputs.npz"
    b = ",".join(f"{k}={v}" for k, v in bind.items())
    cli = ebb_cli("run", str(FIXTURES / f"{name}.mlir"), "--bind", b, "--inputs", str(FIXTURES / ref), "--save-outputs", str(saved))
    assert cli["numerics"]["passed"]
    with np.load(saved) as s:
        for i, o in enumerate(outs):
            got = s[f"out_{i}"]
            o32 = o.astype(np.float32) if o.dtype.name == "bfloat16" else o
            assert got.shape == o.shape and got.tobytes() == o32.tobytes(), f"{name} out_{i}"


def _optimizers():
    import optax

    return {
        "adam": optax.adam(1e-2),
        "adamw": optax.adamw(1e-2, weight_decay=0.1),
        "lion": optax.lion(1e-3),
        "sgd_momentum": optax.sgd(0.1, momentum=0.9),
        "sgd_nesterov": optax.sgd(0.1, momentum=0.9, nesterov=True),
        "rmsprop": optax.rmsprop(1e-2),
        "adagrad": optax.adagrad(1e-2),
        "adamax": optax.adamax(1e-2),
        "adabelief": optax.adabelief(1e-2),
        "radam": optax.radam(1e-2),
        "yogi": optax.yogi(1e-2),
        "lamb": optax.lamb(1e-2),
        "novograd": optax.novograd(1e-2),
        "nadam": optax.nadam(1e-2),
        "adafactor": optax.adafactor(1e-2),
        "sm3": optax.sm3(1e-2),
        "sgd_schedule": optax.sgd(optax.exponential_decay(0.1, 10, 0.5)),
    }


@pytest.mark.parametrize("opt_name", list(_optimizers()))
def test_every_optax_optimizers_scalar_state_round_trips(opt_name):
    import jax
    import jax.numpy as jnp

    opt = _optimizers()[opt_name]
    key = jax.random.PRNGKey(0)
    params = {"w": jax.random.normal(key, (8, 4)) * 0.3, "b": jnp.zeros((4,))}
    state = opt.init(params)

    def step(params, state, x, y):
        def loss(p):
            return jnp.mean((jnp.tanh(x @ p["w"] + p["b"]) - y) ** 2)

        l, g = jax.value_and_grad(loss)(params)
        upd, state = opt.update(g, state, params)
        return l, jax.tree_util.tree_map(lambda p, u: p + u, params, upd), state

    specs_state = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), state)
    plan = ebb.jax.export(step, {"w": ebb.jax.spec((8, 4)), "b": ebb.jax.spec((4,))}, specs_state,
                          ebb.jax.spec("B, 8"), ebb.jax.spec("B, 4"), symbolic="B")
    scalars = [a for a in jax.tree_util.tree_leaves(state) if np.ndim(a) == 0]
    rt = ebb.Runtime(plan)
    for b in (5, 3):
        x = jax.random.normal(jax.random.PRNGKey(b), (b, 8))
        y = jax.random.normal(jax.random.PRNGKey(b + 10), (b, 4))
        args = (params, state, x, y)
        inputs = [np.asarray(a) for a in jax.tree_util.tree_leaves(args)]
        outs, _ = rt.step({"B": b}, inputs)
        want = [np.asarray(a) for a in jax.tree_util.tree_leaves(jax.jit(step)(*args))]
        assert len(outs) == len(want)
        for i, (o, w) in enumerate(zip(outs, want)):
            assert o.shape == w.shape and o.dtype == w.dtype, (opt_name, i, o.shape, w.shape)
            np.testing.assert_allclose(o, w, rtol=2e-5, atol=1e-6, err_msg=f"{opt_name} output {i}")
        # The next step starts from Ebb's state (its 0-d leaves included).
        n_p = len(jax.tree_util.tree_leaves(params))
        treedef = jax.tree_util.tree_structure((params, state))
        params, state = jax.tree_util.tree_unflatten(treedef, [jnp.asarray(o) for o in outs[1:]])
    assert scalars or opt_name in ("sgd_momentum", "sgd_nesterov", "rmsprop", "adagrad", "sm3", "adafactor"), opt_name


def test_budgets_are_accepted_in_every_form():
    plan = ebb.compile(FIXTURES / "gpt2_tiny_adamw.mlir", fusion=False, donate="keep")
    bind = {"B": 4, "S": 64}
    specs = plan.input_specs(bind)
    rng = np.random.default_rng(0)
    inputs = [
        (rng.standard_normal(s) * 0.02).astype(d) if np.issubdtype(d, np.floating) else rng.integers(0, 4, s).astype(d)
        for _, d, s in specs
    ]
    po = plan.program_order_peak_bytes(bind)
    for budget in ("90%", "80%scheduled", int(0.9 * po), f"{0.9 * po / 2**20:.3f}MiB"):
        _, report = ebb.Runtime(plan, budget=budget).step(bind, inputs)
        r = plan.finalize(bind, budget=budget)
        assert report["budget_bytes"] == r["budget_bytes"], budget
        assert report["peak_bytes_planned"] <= report["budget_bytes"]
    _, report = ebb.Runtime(plan, budget="90%").step(bind, inputs)
    assert report["budget_bytes"] == int(po * 0.9)


def _steps_as_without_budget(plan, rt, free, rng, lengths):
    """Steps `rt` at B=4 and each of `lengths` on random inputs: every report is within its
    budget, measured == planned, and the outputs are `free`'s (no budget) bit for bit."""
    for s in lengths:
        bind = {"B": 4, "S": s}
        inputs = [
            (rng.standard_normal(sh) * 0.02).astype(d) if np.issubdtype(d, np.floating) else rng.integers(0, 4, sh).astype(d)
            for _, d, sh in plan.input_specs(bind)
        ]
        want, _ = free.step(bind, inputs)
        outs, report = rt.step(bind, inputs)
        assert report["peak_bytes_planned"] <= report["budget_bytes"], s
        assert report["measured_peak_bytes"] == report["peak_bytes_planned"], s
        assert all(o.tobytes() == w.tobytes() for o, w in zip(outs, want)), s
        yield bind, report


def test_a_plan_atlas_steps_new_shapes_within_its_budget():
    # An atlas serves plans of one schedule variant: this one, unfused.
    plan = ebb.compile(FIXTURES / "gpt2_tiny_scan.mlir", fusion=False, donate="keep")
    budget = int(0.6 * plan.program_order_peak_bytes({"B": 4, "S": 40}))
    rt = ebb.Runtime(plan, budget=budget)
    samples = [{"B": 4, "S": s} for s in (16, 32, 48, 64)]
    assert rt.prepare_atlas(samples) > 0
    free = ebb.Runtime(plan)
    rng = np.random.default_rng(1)
    for _, report in _steps_as_without_budget(plan, rt, free, rng, (40, 24)):
        assert report["budget_bytes"] == budget
    # A fractional budget (75%: 60% is infeasible at S=16): each sample under its own
    # bytes, the atlas keyed by the share.
    share = ebb.Runtime(plan, budget="75%")
    assert share.prepare_atlas(samples) > 0
    for bind, report in _steps_as_without_budget(plan, share, free, rng, (40, 24)):
        assert report["budget_bytes"] == int(0.75 * plan.program_order_peak_bytes(bind))
    # At least one of the two new shapes replays an entry of the same share.
    assert share.atlas_hits >= 1
    with pytest.raises(ebb.EbbError):
        rt.prepare_atlas([{"B": 4}])


def test_jax_arrays_step_through_dlpack_and_outputs_go_back_to_jax():
    import jax
    import jax.numpy as jnp

    plan = ebb.compile(FIXTURES / "mlp_sgd.mlir")
    with np.load(FIXTURES / "mlp_sgd.ref0.npz") as z:
        inputs = [z[f"in_{i}"] for i in range(sum(1 for k in z.files if k.startswith("in_")))]
    rt = ebb.Runtime(plan)
    want, _ = rt.step({"B": 8}, inputs)
    outs, _ = rt.step({"B": 8}, [jnp.asarray(x) for x in inputs])
    assert all(a.tobytes() == b.tobytes() for a, b in zip(outs, want))
    big = max(outs, key=lambda o: o.size)
    j = jax.dlpack.from_dlpack(big)
    assert np.asarray(j).tobytes() == big.tobytes()
