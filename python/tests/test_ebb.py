"""The `ebb` Python package against the `ebb` CLI and the frameworks' own outputs: compile from a
JAX function, memory figures equal to the CLI's, finalize under a budget, a runtime step,
typed errors, and the packing oracle (every returned batch finalized again)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import ebb
import ebb.jax
from conftest import FIXTURES, REPO, ebb_cli


def mlp_step(params, x, y):
    """A two-layer MLP training step (softmax cross-entropy, SGD)."""
    import jax
    import jax.numpy as jnp

    def loss(p):
        h = jnp.tanh(x @ p["w1"])
        logits = h @ p["w2"]
        logp = jax.nn.log_softmax(logits)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    l, g = jax.value_and_grad(loss)(params)
    return l, jax.tree_util.tree_map(lambda p, d: p - 0.1 * d, params, g)


def test_compile_from_a_jax_function_peaks_equal_the_cli(tmp_path):
    params = {"w1": ebb.jax.spec((32, 128)), "w2": ebb.jax.spec((128, 10))}
    plan = ebb.jax.export(mlp_step, params, ebb.jax.spec("B, 32"), ebb.jax.spec("B", "int32"), symbolic="B")
    assert plan.symbols == ["B"]
    path = tmp_path / "mlp.plan.json"
    plan.save(path)
    peaks = []
    for b in (1, 8, 64, 1000):
        cli = ebb_cli("plan", str(path), "--bind", f"B={b}")
        assert plan.peak_bytes(B=b) == cli["peak_bytes_scheduled"]
        assert plan.program_order_peak_bytes(B=b) == cli["peak_bytes_program_order"]
        assert plan.lower_bound_bytes({"B": b}) == cli["lower_bound_bytes"]
        peaks.append(plan.peak_bytes(B=b))
    assert peaks == sorted(peaks) and peaks[0] < peaks[-1]
    # The saved plan loads (verified) and answers the same.
    assert ebb.load(path).peak_bytes(B=64) == peaks[2]
    specs = plan.input_specs(B=4)
    assert [s[1:] for s in specs] == [
        (np.dtype("float32"), (32, 128)),
        (np.dtype("float32"), (128, 10)),
        (np.dtype("float32"), (4, 32)),
        (np.dtype("int32"), (4,)),
    ]


def test_finalize_under_a_budget_matches_ebb_plan(gpt2_tiny, gpt2_tiny_file):
    bind = {"B": 8, "S": 256}
    r = gpt2_tiny.finalize(bind, budget="50%")
    assert r["budget_bytes"] < r["peak_bytes_program_order"]
    assert r["peak_bytes_planned"] <= r["budget_bytes"]
    assert r["device"] == "h100-sxm-pcie5"
    assert len(r["decisions"]) == r["recompute_decisions"] + r["swap_decisions"] > 0
    cli = ebb_cli("plan", str(gpt2_tiny_file), "--bind", "B=8,S=256", "--budget", "50%")
    assert r["decisions"] == cli["decisions"]
    assert r["peak_bytes_planned"] == cli["peak_bytes_planned"]
    assert r["arena_bytes"] == cli["arena_bytes"]
    only = gpt2_tiny.finalize(bind, budget="80%", kinds="recompute")
    assert {d["kind"] for d in only["decisions"]} == {"recompute"}


def test_a_runtime_step_equals_ebb_run_and_jax(tmp_path):
    # Unfused, inputs kept: a plan with something to evict under a budget.
    plan = ebb.compile(FIXTURES / "mlp_sgd.mlir", fusion=False, donate="keep")
    ref = FIXTURES / "mlp_sgd.ref0.npz"
    z = np.load(ref)
    n_in = sum(1 for k in z.files if k.startswith("in_"))
    inputs = [z[f"in_{i}"] for i in range(n_in)]
    want = [z[f"out_{i}"] for i in range(sum(1 for k in z.files if k.startswith("out_")))]
    bind = {"B": 8}
    with pytest.raises(ebb.InfeasibleBudget) as e:
        ebb.Runtime(plan, budget=1024).step(bind, inputs)
    budget = e.value.smallest_feasible_bytes  # the tightest budget this step runs under
    assert budget < plan.peak_bytes(bind)
    rt = ebb.Runtime(plan, budget=budget)
    outs, report = rt.step(bind, inputs)
    assert report["measured_peak_bytes"] == report["peak_bytes_planned"] <= budget
    assert [o.shape for o in outs] == [w.shape for w in want]
    # Normwise relative errors against JAX, as `ebb run --inputs REF.npz` measures them: the
    # loss by value, each new parameter (out_{k+1}) by its update from in_k.
    def normwise(k, o, w):
        o, w = o.astype(np.float64), w.astype(np.float64)
        base = inputs[k - 1].astype(np.float64) if k > 0 else 0.0
        return float(np.linalg.norm(o - w) / np.linalg.norm(w - base))

    rel = [normwise(k, o, w) for k, (o, w) in enumerate(zip(outs, want))]
    saved = tmp_path / "outputs.npz"
    cli = ebb_cli("run", str(FIXTURES / "mlp_sgd.mlir"), "--fusion", "off", "--donate", "keep", "--bind", "B=8", "--budget", str(budget), "--inputs", str(ref), "--save-outputs", str(saved))
    n = cli["numerics"]
    assert n["passed"] and [o["compared"] for o in n["outputs"]] == ["value"] + ["update"] * 6
    assert [o["normwise_rel_err"] for o in n["outputs"]] == pytest.approx(rel, rel=1e-9, abs=1e-15)
    assert max(rel) < 1e-4
    # Bit for bit what `ebb run` computed.
    with np.load(saved) as s:
        assert sorted(s.files) == [f"out_{i}" for i in range(len(outs))]
        for i, o in enumerate(outs):
            assert s[f"out_{i}"].dtype == o.dtype and s[f"out_{i}"].tobytes() == o.tobytes()
    # Decisions do not change a bit of the outputs.
    free, _ = ebb.Runtime(plan).step(bind, inputs)
    for a, b in zip(outs, free):
        assert a.tobytes() == b.tobytes()


def test_errors_are_typed_exceptions(gpt2_tiny, tmp_path):
    bad = tmp_path / "bad.mlir"
    bad.write_text('"builtin.module"() ({ "func.func"() <{sym_name = "main"}> ({ ^bb0: "stablehlo.frobnicate"() : () -> () }) : () -> () }) : () -> ()\n')
    with pytest.raises(ebb.ImportFailed):
        ebb.compile(bad)
    with pytest.raises(ebb.ShapeError, match="512"):
        gpt2_tiny.peak_bytes(B=2, S=2000)
    with pytest.raises(ebb.ShapeError):
        gpt2_tiny.peak_bytes(B=2, S=64, Q=3)
    with pytest.raises(ebb.InfeasibleBudget) as e:
        gpt2_tiny.finalize({"B": 8, "S": 256}, budget=1024)
    assert isinstance(e.value.smallest_feasible_bytes, int) and e.value.smallest_feasible_bytes > 1024
    assert str(e.value.smallest_feasible_bytes) in str(e.value)
    # A tampered plan file does not load.
    plan = tmp_path / "p.json"
    gpt2_tiny.save(plan)
    v = json.loads(plan.read_text())
    v["values"][3]["bytes"] = v["values"][3]["bytes"] + " - 4"
    plan.write_text(json.dumps(v))
    with pytest.raises(ebb.PlanError, match="values"):
        ebb.load(plan)
    assert issubclass(ebb.InfeasibleBudget, ebb.EbbError) and issubclass(ebb.EbbError, Exception)


def test_pack_never_exceeds_the_budget(gpt2_tiny):
    rng = np.random.default_rng(0)
    lengths = np.clip(np.round(np.exp(rng.normal(np.log(60), 1.0, size=400))), 1, 512).astype(int).tolist()
    budget = gpt2_tiny.peak_bytes(B=16, S=256) // 2
    r = ebb.pack(gpt2_tiny, lengths, budget=budget, device="h100-sxm-pcie5")
    ebb_packing = r["packings"][0]
    assert ebb_packing["policy"] == "ebb" and r["gain_vs_fixed_tokens"] >= 1.0
    seen = sorted(i for b in ebb_packing["batches"] for i in b["indices"])
    assert seen == list(range(len(lengths)))
    for b in ebb_packing["batches"]:
        assert b["seq"] >= max(lengths[i] for i in b["indices"])
        assert b["cost"]["peak_bytes"] <= budget
        assert b["cost"]["added_us"] <= 0.1 * b["cost"]["step_us"] + 1e-9
        # The trainer's finalize at the batch's shape fits, arena included (where the layout
        # fragments more than the allowance it decides again, so it may add a little more time
        # than the oracle's estimate).
        f = gpt2_tiny.finalize({"B": b["batch"], "S": b["seq"]}, budget=budget, device="h100-sxm-pcie5")
        assert f["peak_bytes_planned"] <= budget and f["arena_bytes"] <= budget
        assert f["added_us"] <= 0.15 * f["step_us_modelled"] + 1e-9
    with pytest.raises(ebb.ShapeError):
        ebb.pack(gpt2_tiny, [600], budget=budget)
    with pytest.raises(ebb.InfeasibleBudget):
        ebb.pack(gpt2_tiny, [500], budget=1 << 20)


def test_the_readme_example_runs():
    """The README's "Use from Python" example, as written."""
    text = (REPO / "README.md").read_text()
    start = text.index("## Use from Python")
    block = text[text.index("```python", start) + len("```python"):]
    block = block[: block.index("```")]
    env: dict = {}
    exec(compile(block, "README.md", "exec"), env)
    assert env["report"]["packings"][0]["policy"] == "ebb"


def test_unrolling_a_scan_over_layers_lowers_its_peak():
    unrolled = ebb.compile(FIXTURES / "gpt2_tiny_scan.mlir")
    kept = ebb.compile(FIXTURES / "gpt2_tiny_scan.mlir", unroll=False)
    b = {"B": 8, "S": 256}
    assert unrolled.peak_bytes(b) < 0.6 * kept.peak_bytes(b)


def test_budget_curve_is_monotone_fits_and_equals_the_cli(gpt2_tiny, gpt2_tiny_file):
    bind = {"B": 8, "S": 256}
    c = gpt2_tiny.budget_curve(bind, points=6)
    pts = c["points"]
    assert len(pts) >= 6
    assert pts[0]["budget_bytes"] == c["smallest_feasible_bytes"]
    assert c["peak_bytes_scheduled"] in [p["budget_bytes"] for p in pts]
    fits = [p for p in pts if p["fits"]]
    assert fits and fits[-1]["added_us"] == 0.0
    for a, b in zip(pts, pts[1:]):
        assert a["budget_bytes"] < b["budget_bytes"]
        assert not a["fits"] or b["fits"]
    for a, b in zip(fits, fits[1:]):
        assert b["added_us"] <= a["added_us"]
    for p in fits:
        at = p["decided_at_bytes"]
        assert p["arena_bytes"] <= (p["budget_bytes"] if at is None else at) <= p["budget_bytes"]
        if at is not None:
            # The runtime runs a point by finalizing at its decided_at budget.
            r = gpt2_tiny.finalize(bind, budget=at)
            assert (r["arena_bytes"], r["added_us"]) == (p["arena_bytes"], p["added_us"])
    cli = ebb_cli("plan", str(gpt2_tiny_file), "--bind", "B=8,S=256", "--budget-curve", "6")
    strip = lambda q: {k: v for k, v in q.items() if k != "own"}
    assert [strip(p) for p in cli["points"]] == [strip(p) for p in pts]
    with pytest.raises(ebb.EbbError):
        gpt2_tiny.budget_curve(bind, points=1)
