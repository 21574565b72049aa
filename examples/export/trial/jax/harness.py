"""Export harness: same method as /work/main/examples/export/export_all.py
(jax.export.export(jax.jit(step), platforms=["cpu"]) with jax.export.symbolic_shape, generic MLIR
form with debug info; npz refs in_i / out_i in flattened argument order)."""
from __future__ import annotations

import io
import json
import os
import sys
import traceback
import zipfile
from collections import Counter
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax._src.interpreters import mlir as jm  # noqa: E402
from jax._src.lib.mlir import ir  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"


def generic_text(exp):
    ctx = jm.make_ir_context()
    with ctx:
        m = ir.Module.parse(exp.mlir_module())
        text = m.operation.get_asm(print_generic_op_form=True, enable_debug_info=True)
        counts = Counter()

        def visit(op):
            counts[op.name] += 1
            return ir.WalkResult.ADVANCE

        m.operation.walk(visit)
    return text, counts


def write_npz(path, arrays):
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, arr in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(arr), allow_pickle=False)
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, buf.getvalue())


def _np(a):
    if jax.dtypes.issubdtype(getattr(a, "dtype", None), jax.dtypes.prng_key):
        a = jax.random.key_data(a)
    return np.asarray(a)


def export(name, step, symbols, constraints, make_args, ref_binding):
    OUT.mkdir(exist_ok=True)
    try:
        sym = jax.export.symbolic_shape(symbols, constraints=constraints)
        names = [s.strip() for s in symbols.split(",")]
        dims = dict(zip(names, sym))
        specs = make_args(dims, concrete=False)
        exp = jax.export.export(jax.jit(step), platforms=["cpu"])(*specs)
        text, counts = generic_text(exp)
        assert tuple(exp.module_kept_var_idx) == tuple(range(len(exp.in_avals))), \
            f"unused inputs dropped: {exp.module_kept_var_idx}"
        (OUT / f"{name}.mlir").write_text(text)
        args = make_args(ref_binding, concrete=True)
        in_leaves = jax.tree_util.tree_leaves(args)
        want = jax.tree_util.tree_leaves(jax.jit(step)(*args))
        got = jax.tree_util.tree_leaves(exp.call(*args))
        worst = 0.0
        for g, w in zip(got, want):
            worst = max(worst, float(np.max(np.abs(_np(g).astype(np.float64) - _np(w).astype(np.float64)), initial=0)))
        arrays = {f"in_{i}": _np(a) for i, a in enumerate(in_leaves)}
        arrays.update({f"out_{i}": _np(a) for i, a in enumerate(want)})
        write_npz(OUT / f"{name}.ref0.npz", arrays)
        meta = {"name": name, "symbols": names, "constraints": list(constraints),
                "binding": ref_binding, "n_in": len(in_leaves), "n_out": len(want),
                "in_avals": [str(a) for a in exp.in_avals],
                "out_avals": [str(a) for a in exp.out_avals],
                "op_names": dict(sorted(counts.items())), "exp_call_vs_jit": worst}
        (OUT / f"{name}.json").write_text(json.dumps(meta, indent=1))
        print(f"OK {name}: {sum(counts.values())} ops, {len(in_leaves)} in, {len(want)} out, "
              f"exp.call vs jit {worst:.3g}")
    except Exception:
        print(f"EXPORT FAILED {name}")
        traceback.print_exc()
        (OUT / f"{name}.export_error.txt").write_text(traceback.format_exc())
