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

A step that is not a fixture (your own export) is compiled from its module instead:
`--module F.mlir --signature SIG` (what `ebb bench --xla` passes for a `.mlir` input whose
JSON metadata does not name a fixture). SIG is JSON, `{"symbols": ["B", "S"], "inputs":
["f32[B,S]", ...], "outputs": [...]}` (Ebb's types of `@main`'s arguments and results,
symbolic dimensions as expressions of the symbols); the module becomes a `jax.export.Exported`
with those avals, and `jax.jit(exported.call)` compiles it at each shape (JAX refines the
symbolic shapes, as when calling a deserialized export). Timed runs feed it inputs drawn
here: floats from a normal distribution scaled by 0.1 (seed 0), integers and booleans zero.

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


class ModuleStep:
    """A step compiled from a StableHLO module: `symbols`, `step` and `make_args` as a fixture
    of export_all.py has them."""

    DTYPES = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16",
              "i1": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
              "ui8": "uint8", "ui16": "uint16", "ui32": "uint32", "ui64": "uint64"}

    def __init__(self, path, signature):
        import jax
        import numpy as np
        from jax._src.interpreters import mlir as jm
        from jax._src.lib.mlir import ir

        sig = json.loads(signature)
        self.symbols = ", ".join(sig["symbols"])
        scope = jax.export.SymbolicScope() if not sig["symbols"] else \
            jax.export.symbolic_shape(self.symbols)[0].scope

        def aval(t):
            dt, _, rest = t.partition("[")
            dims = rest.rstrip("]").strip()
            shape = tuple(jax.export.symbolic_shape(dims, scope=scope)) if dims else ()
            if dt not in self.DTYPES:
                raise ValueError(f"element type {dt!r} of {t!r}")
            return jax.core.ShapedArray(shape, jax.numpy.dtype(self.DTYPES[dt]))

        ins = tuple(aval(t) for t in sig["inputs"])
        outs = tuple(aval(t) for t in sig["outputs"])
        with jm.make_ir_context():
            module = ir.Module.parse(open(path).read())
            bytecode = jm.module_to_bytecode(module)
        tree = jax.tree_util.tree_structure
        none = lambda n: (None,) * n  # noqa: E731
        self.exported = jax.export.Exported(
            fun_name="main", in_tree=tree((tuple(range(len(ins))), {})), in_avals=ins,
            out_tree=tree(tuple(range(len(outs)))), out_avals=outs,
            _has_named_shardings=False, _in_named_shardings=none(len(ins)),
            _out_named_shardings=none(len(outs)), in_shardings_hlo=none(len(ins)),
            out_shardings_hlo=none(len(outs)), nr_devices=1, platforms=("cpu",),
            ordered_effects=(), unordered_effects=(), disabled_safety_checks=(),
            mlir_module_serialized=bytecode, calling_convention_version=10,
            module_kept_var_idx=tuple(range(len(ins))), uses_global_constants=bool(sig["symbols"]),
            _get_vjp=None)
        self.np = np

    def step(self, *args):
        return self.exported.call(*args)

    def make_args(self, dims, concrete):
        import jax
        env = {k: int(v) for k, v in dims.items()}
        shapes = [tuple(int(d) if isinstance(d, int) else int(d._evaluate(env)) for d in a.shape)
                  for a in self.exported.in_avals]
        if not concrete:
            return [jax.ShapeDtypeStruct(s, a.dtype) for s, a in zip(shapes, self.exported.in_avals)]
        rng = self.np.random.default_rng(0)
        out = []
        for s, a in zip(shapes, self.exported.in_avals):
            if jax.numpy.issubdtype(a.dtype, jax.numpy.floating):
                out.append(jax.numpy.asarray(0.1 * rng.standard_normal(s), dtype=a.dtype))
            else:
                out.append(jax.numpy.zeros(s, dtype=a.dtype))
        return out


def module_step(path, signature):
    try:
        return ModuleStep(path, signature)
    except Exception as e:  # a module or signature JAX cannot take
        fail("bad_module", f"{path}: {type(e).__name__}: {e}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixture", help="fixture name, as in export_all.py")
    ap.add_argument("--module", help="a StableHLO module (.mlir) to compile where --fixture "
                    "is not a fixture of export_all.py (needs --signature)")
    ap.add_argument("--signature", help="JSON: symbols, input and output types of --module")
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
    fx = X.FIXTURES_BY_NAME.get(args.fixture) if args.fixture else None
    if fx is None and args.module and args.signature:
        fx = module_step(args.module, args.signature)
    if fx is None:
        fail("unknown_fixture",
             f"{args.fixture!r} is not a fixture of export_all.py ({', '.join(X.FIXTURES_BY_NAME)})"
             " and no --module/--signature was given")
    names = [s.strip() for s in fx.symbols.split(",") if s.strip()]
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
