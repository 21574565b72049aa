"""Export PyTorch and ONNX Runtime training steps as ONNX fixtures for Ebb's ONNX front end.

Usage (from the repository root, with the venv(s) of examples/export/onnx/requirements*.txt):

    /work/venv-onnx/bin/python examples/export/onnx/export_onnx.py                  # everything
    /work/venv-onnx/bin/python examples/export/onnx/export_onnx.py --only torch_mlp_sgd
    /work/venv-onnx/bin/python examples/export/onnx/export_onnx.py --out /tmp/fx

Two kinds of fixture:
  torch_*  A whole PyTorch training step (forward, backward, optimizer update) as one pure ONNX
           function: parameters (and AdamW state m, v, step) are graph *inputs*, the updated ones
           graph *outputs*. Traced with `make_fx(tracing_mode="symbolic")` around
           `torch.autograd.grad`, then exported by `torch.onnx.export(dynamo=True)` with dynamic
           `batch` / `seq`. Needs torch + onnxscript + onnxruntime (requirements.txt).
  ort_*    ONNX Runtime training artifacts (`onnxruntime.training.artifacts.generate_artifacts`):
           the training model (forward + gradient graph, com.microsoft ops) and the AdamW
           optimizer model. Needs onnxruntime-training (requirements-ort.txt), which cannot share
           a venv with onnxruntime: the script re-runs itself under `--ort-python` for these.

For each fixture NAME this writes into --out (default tests/fixtures/onnx/):
  NAME.onnx        the model (no external data),
  NAME.json        metadata: versions, opsets, symbols, inputs/outputs (name, dtype, shape with
                   dim_param strings), op counts by "domain::op", refs, checks,
  NAME.ref{0,1}.npz  onnxruntime's results at two concrete bindings: in_0..in_{n-1} in graph
                   input order, out_0..out_{m-1} in graph output order (ort_*: also after_in_i,
                   the inputs ORT updates in place; in_i.j for element j of a sequence input).
An ort_X fixture writes ort_X_training.* and ort_X_optimizer.*.
The output is deterministic (fixed seeds; npz members carry a fixed timestamp).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[2]
DEFAULT_OUT = REPO_ROOT / "tests" / "fixtures" / "onnx"
DEFAULT_ORT_PYTHON = "/work/venv-ort/bin/python"
sys.path.insert(0, str(HERE))

TORCH_NAMES = ["torch_mlp_sgd", "torch_mlp_adam", "torch_gpt2_tiny_sgd", "torch_gpt2_tiny_adam",
               "torch_gpt2_tiny_ce_adam", "torch_mlp_ce_nll_sgd", "torch_moe_top2_sgd"]
ORT_NAMES = ["ort_mlp", "ort_mlp_tanh", "ort_gpt2_tiny", "ort_cnn", "ort_gpt2_tiny_dropout", "ort_cnn_bn"]


def _has_ort_training() -> bool:
    try:
        import onnxruntime.training  # noqa: F401
        return True
    except ImportError:
        return False


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--only", nargs="*", help="fixture names (default: all)")
    ap.add_argument("--ort-python", default=os.environ.get("ORT_PYTHON", DEFAULT_ORT_PYTHON),
                    help="interpreter with onnxruntime-training, for the ort_* fixtures")
    ap.add_argument("--forward-dir", type=Path, help=argparse.SUPPRESS)  # internal
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    known = TORCH_NAMES + ORT_NAMES
    # ort_X writes ort_X_training.* and ort_X_optimizer.*; either file name selects it.
    alias = {f"{n}_{k}": n for n in ORT_NAMES for k in ("training", "optimizer")}
    todo = []
    for n in args.only or known:
        if alias.get(n, n) not in known:
            ap.error(f"unknown fixture {n!r}; known: {', '.join(known + list(alias))}")
        if alias.get(n, n) not in todo:
            todo.append(alias.get(n, n))
    union: Counter = Counter()
    torch_todo = [n for n in todo if n in TORCH_NAMES]
    ort_todo = [n for n in todo if n in ORT_NAMES]
    if torch_todo:
        import torch_steps

        by_name = {f.name: f for f in torch_steps.TORCH_FIXTURES}
        for n in torch_todo:
            union.update(torch_steps.export_torch_fixture(by_name[n], args.out)["op_names"])
    if ort_todo:
        if _has_ort_training():
            import ort_artifacts

            if args.forward_dir is None:
                ap.error("the ort_* fixtures start in the torch venv (it exports the forward "
                         "models); run this script with the venv of requirements.txt")
            for n in ort_todo:
                fwd = args.forward_dir / f"{n}_forward.onnx"
                union.update(ort_artifacts.export_ort_fixture(n, args.out, fwd))
        else:
            # Forward models here (torch + onnxscript), artifacts in the onnxruntime-training
            # venv: it cannot share a venv with onnxruntime.
            import forward_export

            with tempfile.TemporaryDirectory() as tmp:
                for n in ort_todo:
                    forward_export.export_forward(n, Path(tmp) / f"{n}_forward.onnx")
                # One process per fixture: onnxblock numbers some names with a process-wide
                # counter (`onnx::adamw.updated_flag::1`), so this keeps --only byte-identical.
                for n in ort_todo:
                    cmd = [args.ort_python, str(Path(__file__).resolve()), "--out",
                           str(args.out), "--forward-dir", tmp, "--only", n]
                    print("running", " ".join(cmd), flush=True)
                    subprocess.run(cmd, check=True)
    if union:
        print("op names across fixtures:", json.dumps(dict(sorted(union.items()))))


if __name__ == "__main__":
    main()
