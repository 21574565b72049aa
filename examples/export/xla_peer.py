"""XLA peer of `ebb bench --xla`: compile a fixture's JAX training step at concrete shapes on the
CPU backend and print XLA's memory analysis per shape.

Usage (from the repository root, with the pinned environment of requirements.txt):

    python examples/export/xla_peer.py --fixture gpt2_tiny_adamw --shapes 'B=8,S=128;B=8,S=256'

The step and its argument specs are those of `export_all.py` (imported, not copied), so XLA
compiles exactly the program Ebb imports, at each shape with static dimensions. Nothing is
materialized: arguments are `jax.ShapeDtypeStruct`s.

Output (stdout), one JSON object a line:
  {"jax_version": "0.10.2"}                                   first
  {"bind": {"B": 8, "S": 128}, "argument_bytes": ..., "output_bytes": ..., "alias_bytes": ...,
   "temp_bytes": ..., "total_bytes": ..., "compile_ms": ...}   one per shape, in order
  {"error": "jax_unavailable" | "unknown_fixture" | "bad_shapes", "message": "..."}  on failure
total_bytes = argument + output - alias + temp (`compiled.memory_analysis()`, bytes).
Exit status: 0, or 2 after an error line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

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
        emit({"bind": {k: dims[k] for k in sorted(dims)}, "argument_bytes": arg,
              "output_bytes": out, "alias_bytes": alias, "temp_bytes": temp,
              "total_bytes": arg + out - alias + temp, "compile_ms": round(compile_ms, 3)})


if __name__ == "__main__":
    main()
