"""XLA peer of `ebb bench --xla`: compile a fixture's JAX training step at concrete shapes on the
CPU backend and print XLA's memory analysis per shape, without and with donation of the
arguments, and optionally the time of one executed step.

Usage (from the repository root, with the pinned environment of requirements.txt):

    python examples/export/xla_peer.py --fixture gpt2_tiny_adamw --shapes 'B=8,S=128;B=8,S=256'
    python examples/export/xla_peer.py --fixture mlp_sgd --shapes 'B=8' --time-runs 3

The step and its argument specs are those of `export_all.py` (imported, not copied), so XLA
compiles exactly the program Ebb imports, at each shape with static dimensions. Nothing is
materialized for the memory analysis: arguments are `jax.ShapeDtypeStruct`s. "Donated" compiles
the step with `donate_argnums` over every argument, as a trainer that updates parameters and
optimizer state in place does (`jax.jit(step, donate_argnums=...)`): XLA aliases each donated
buffer that an output of the same type can reuse. With `--time-runs N` (N >= 1) the step (not
donated) runs on concrete arguments (the fixture's own `make_args(..., concrete=True)`) once to
warm up and N times timed; `step_ms` is the median wall time, `jax.block_until_ready` included. With
`JAX_PLATFORMS=cuda` in the environment the step compiles and runs on the GPU instead
(`scripts/gpu-check.sh`'s peer columns).

Output (stdout), one JSON object a line:
  {"jax_version": "0.10.2"}                                   first
  {"bind": {"B": 8, "S": 128}, "argument_bytes": ..., "output_bytes": ..., "alias_bytes": ...,
   "temp_bytes": ..., "total_bytes": ..., "compile_ms": ...,
   "donated_alias_bytes": ..., "donated_temp_bytes": ..., "donated_total_bytes": ...,
   "step_ms": ... (only with --time-runs),
   "peak_bytes_in_use": ... (only with --time-runs, where the device reports memory_stats(),
   e.g. a GPU: the allocator's peak over the compile and the timed runs)}  one per shape
  {"error": "jax_unavailable" | "unknown_fixture" | "bad_shapes", "message": "..."}  on failure
total_bytes = argument + output - alias + temp (`compiled.memory_analysis()`, bytes).
Exit status: 0, or 2 after an error line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import warnings

os.environ.setdefault("JAX_PLATFORMS", "cpu")


def emit(obj):
    print(json.dumps(obj), flush=True)


def fail(kind, message):
    emit({"error": kind, "message": message})
    sys.exit(2)


def parse_shapes(text):
    shapes = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        dims = {}
        for kv in filter(None, (x.strip() for x in part.split(","))):
            name, _, value = kv.partition("=")
            try:
                dims[name.strip()] = int(value)
            except ValueError:
                fail("bad_shapes", f"`{kv}` in `{part}` is not NAME=INT")
        shapes.append(dims)
    if not shapes:
        fail("bad_shapes", f"no shape in `{text}`")
    return shapes


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixture", required=True, help="fixture name, as in export_all.py")
    ap.add_argument("--shapes", required=True, help="e.g. 'B=8,S=128;B=8,S=256'")
    ap.add_argument("--time-runs", type=int, default=0,
                    help="time this many executions of the step per shape (0: none)")
    args = ap.parse_args(argv)
    shapes = parse_shapes(args.shapes)
    try:
        import jax
    except Exception as e:  # ImportError, or a broken install
        fail("jax_unavailable", f"JAX is not importable by {sys.executable}: {e}")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import export_all as X

    emit({"jax_version": jax.__version__})
    fx = X.FIXTURES_BY_NAME.get(args.fixture)
    if fx is None:
        fail("unknown_fixture",
             f"{args.fixture!r} is not a fixture of export_all.py ({', '.join(X.FIXTURES_BY_NAME)})")
    names = [s.strip() for s in fx.symbols.split(",")]
    for dims in shapes:
        if sorted(dims) != sorted(names):
            fail("bad_shapes", f"{dims} does not bind exactly the symbols {names}")
        specs = fx.make_args(dims, concrete=False)
        t0 = time.perf_counter()
        compiled = jax.jit(fx.step).lower(*specs).compile()
        compile_ms = (time.perf_counter() - t0) * 1e3
        m = compiled.memory_analysis()
        arg, out = int(m.argument_size_in_bytes), int(m.output_size_in_bytes)
        alias, temp = int(m.alias_size_in_bytes), int(m.temp_size_in_bytes)
        line = {"bind": {k: dims[k] for k in sorted(dims)}, "argument_bytes": arg,
                "output_bytes": out, "alias_bytes": alias, "temp_bytes": temp,
                "total_bytes": arg + out - alias + temp, "compile_ms": round(compile_ms, 3)}
        with warnings.catch_warnings():
            # "Some donated buffers were not usable": inputs without a same-typed output.
            warnings.simplefilter("ignore")
            donated = jax.jit(fx.step, donate_argnums=tuple(range(len(specs)))).lower(
                *specs).compile().memory_analysis()
        d_alias, d_temp = int(donated.alias_size_in_bytes), int(donated.temp_size_in_bytes)
        d_arg, d_out = int(donated.argument_size_in_bytes), int(donated.output_size_in_bytes)
        line.update({"donated_alias_bytes": d_alias, "donated_temp_bytes": d_temp,
                     "donated_total_bytes": d_arg + d_out - d_alias + d_temp})
        if args.time_runs > 0:
            real = fx.make_args(dims, concrete=True)
            jax.block_until_ready(compiled(*real))
            times = []
            for _ in range(args.time_runs):
                t0 = time.perf_counter()
                jax.block_until_ready(compiled(*real))
                times.append((time.perf_counter() - t0) * 1e3)
            line["step_ms"] = round(statistics.median(times), 3)
            stats = jax.devices()[0].memory_stats() or {}
            if "peak_bytes_in_use" in stats:
                line["peak_bytes_in_use"] = int(stats["peak_bytes_in_use"])
        emit(line)


if __name__ == "__main__":
    main()
