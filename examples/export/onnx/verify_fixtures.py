"""Re-run every ONNX fixture from its own reference inputs and compare with the stored outputs.

    /work/venv-onnx/bin/python examples/export/onnx/verify_fixtures.py torch_   # onnxruntime
    /work/venv-ort/bin/python  examples/export/onnx/verify_fixtures.py ort_     # -training

Reads only what a consumer reads: NAME.json (inputs in order, sequence inputs, `inplace`,
refs) and NAME.ref<k>.npz; checks the concrete shapes against the dim_params and bindings, and
that onnxruntime reproduces out_i (and the in-place results after_in_i) exactly. Exits 1 on the
first mismatch. Optimizer models are run through a copy exposing AdamWOptimizer's optional
outputs, as in ort_artifacts.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def verify(meta: dict, d: Path) -> float:
    name = meta["name"]
    model = onnx.load(str(d / f"{name}.onnx"))
    if meta["kind"] == "ort_optimizer_model":
        from ort_artifacts import _with_optimizer_outputs

        model = _with_optimizer_outputs(model)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    worst = 0.0
    for ref in meta["refs"]:
        z = np.load(d / ref["file"])
        feeds = {}
        for i, inp in enumerate(meta["inputs"]):
            if inp.get("type") == "sequence":
                feeds[inp["name"]] = [z[f"in_{i}.{j}"].copy()
                                      for j in range(len(inp["elements"]))]
                continue
            a = z[f"in_{i}"].copy()
            assert str(a.dtype) == inp["dtype"], (name, inp["name"], a.dtype)
            assert a.ndim == len(inp["shape"]), (name, inp["name"], a.shape)
            for dim, n in zip(inp["shape"], a.shape):
                want = dim if isinstance(dim, int) else ref["bindings"].get(dim, n)
                assert want == n, (name, inp["name"], inp["shape"], a.shape, ref["bindings"])
            feeds[inp["name"]] = a
        outs = sess.run(None, feeds)
        pairs = [(outs[i], z[f"out_{i}"]) for i in range(len(meta["outputs"]))]
        if meta["kind"] == "ort_training_model":
            pairs += [(feeds[meta["inputs"][i]["name"]], z[f"after_in_{i}"])
                      for i in meta["inplace"]["inputs"]]
        if meta["kind"] == "ort_optimizer_model":
            for k, i in enumerate(meta["inplace"]["inputs"]):
                pairs += [(outs[1 + k][j], z[f"after_in_{i}.{j}"])
                          for j in range(len(meta["inputs"][i]["elements"]))]
        for got, want in pairs:
            assert got.shape == want.shape and got.dtype == want.dtype, (name, ref["file"])
            diff = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)),
                                initial=0.0))
            worst = max(worst, diff)
        print(f"{name} {ref['file']} {ref['bindings']}: max |rerun - ref| = {worst:.3g}")
    return worst


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("prefix", nargs="?", default="", help="only fixtures whose name starts so")
    ap.add_argument("--dir", type=Path, default=HERE.parents[2] / "tests" / "fixtures" / "onnx")
    args = ap.parse_args(argv)
    bad = 0
    for jf in sorted(args.dir.glob(f"{args.prefix}*.json")):
        if verify(json.loads(jf.read_text()), args.dir) != 0.0:
            bad += 1
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
