"""ORT training artifacts from /tmp/trial/ort/out/fwd_<name>.onnx (method of
/work/main/examples/export/onnx/ort_artifacts.py: add_optional_outputs, generate_artifacts with
onnxblock AdamW). Run: /work/venv-ort/bin/python /tmp/trial/ort/gen_artifacts.py [names]
Writes out/<name>_training.onnx, out/<name>_optimizer.onnx, out/<name>_training.ref0.npz
(in_i graph inputs, out_i outputs, after_in_i in-place gradient buffers), checks vs eager grads."""
from __future__ import annotations

import json
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, "/work/main/examples/export/onnx")
from ort_artifacts import _session, add_optional_outputs, generate  # noqa: E402
from onnx_common import rel_err, write_npz  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"


def run(name):
    fwd = onnx.load(str(OUT / f"fwd_{name}.onnx"))
    meta = json.loads((OUT / f"fwd_{name}.meta.json").read_text())
    ref = np.load(OUT / f"fwd_{name}.ref.npz")
    params = meta["params"]
    init = {t.name: onnx.numpy_helper.to_array(t) for t in fwd.graph.initializer}
    changes = add_optional_outputs(fwd)
    work = Path(tempfile.mkdtemp(prefix=f"{name}_"))
    try:
        training, optimizer = generate(fwd, params, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    tp, op = OUT / f"{name}_training.onnx", OUT / f"{name}_optimizer.onnx"
    onnx.save(training, str(tp))
    onnx.save(optimizer, str(op))
    ops = sorted({(n.domain or "ai.onnx") + "::" + n.op_type for n in training.graph.node})
    print(f"OK artifacts {name}: training {len(training.graph.node)} nodes, changes {changes}")
    print(f"   training ops: {ops}")
    sess = _session(tp)
    feeds = {}
    di = 0
    for i in training.graph.input:
        if i.name in meta["data_names"]:
            feeds[i.name] = ref[f"data_{meta['data_names'].index(i.name)}"]
        elif i.name in init:
            feeds[i.name] = init[i.name].copy()
        elif i.name.endswith("_grad.accumulation.buffer"):
            feeds[i.name] = np.zeros_like(init[i.name[:-len("_grad.accumulation.buffer")]])
        elif i.name == "lazy_reset_grad":
            feeds[i.name] = np.array([True])
        else:
            raise AssertionError(f"unknown input {i.name}")
    names = [i.name for i in training.graph.input]
    before = {k: v.copy() for k, v in feeds.items()}
    outs = sess.run(None, feeds)
    arrays = {f"in_{k}": before[n] for k, n in enumerate(names)}
    arrays.update({f"out_{k}": o for k, o in enumerate(outs)})
    errs = {}
    for k, n in enumerate(names):
        if n.endswith("_grad.accumulation.buffer"):
            arrays[f"after_in_{k}"] = feeds[n]
            p = n[:-len("_grad.accumulation.buffer")]
            if f"grad:{p}" in ref.files:
                errs[p] = rel_err(feeds[n], ref[f"grad:{p}"])
    write_npz(OUT / f"{name}_training.ref0.npz", arrays)
    worst = max(errs, key=errs.get) if errs else None
    print(f"   ref {meta['ref_binding']}: loss ort {float(outs[0]):.6f} eager "
          f"{float(ref['loss']):.6f}; worst grad rel err {errs.get(worst)} ({worst})")


if __name__ == "__main__":
    for n in sys.argv[1:]:
        try:
            run(n)
        except Exception:
            print(f"ARTIFACTS FAILED {n}")
            tb = traceback.format_exc()
            print(tb[-2500:])
            (OUT / f"{n}.artifacts_error.txt").write_text(tb)
