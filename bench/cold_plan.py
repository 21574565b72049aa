#!/usr/bin/env python3
"""Cold one-shot `ebb plan`: whole-process wall time over the long-tail distribution.

A trainer (or a user at a shell) that runs `ebb plan` once per new shape pays the process's
start, the plan file's decode, finalize at the shape and the checker's proof. This times that
from outside, as `time ebb plan ...` would: each run is one fresh process, its wall time read
with a monotonic clock around `subprocess.run` (the fork and exec of the child included).

Cases: the 24-layer d=1024 GPT (`tests/fixtures/jax/gpt2_24l.mlir`) compiled once to a stamped
binary plan (`ebb compile --plan-format binary --device h100-sxm-pcie5`); B=8 and N sequence
lengths drawn from the long-tail distribution of `ebb bench --dist longtail` (log-normal over
32..1024, seed 7; de-duplicated); budgets none, `16GiB` and `50%` (of each shape's program-order
peak); devices `h100-sxm-pcie5` and `cpu` (the measured profile, cached after the first run).
Per case the median of R runs (an infeasible budget is timed too: `ebb plan` then
answers with the smallest feasible budget); the table gives p50 / p90 / max over the shapes, in ms.

Usage: python3 bench/cold_plan.py [--ebb target/release/ebb] [--samples 16] [--runs 5]
       [--json out.json]
Run it on an otherwise idle machine: the figure is wall time of single short processes.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd):
    """Runs `cmd`; its wall time in ms and whether the budget was infeasible (the command's
    answer then is the smallest feasible budget, also a result). Exits on any other failure."""
    t = time.perf_counter_ns()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ms = (time.perf_counter_ns() - t) / 1e6
    infeasible = p.returncode == 1 and "infeasible" in p.stderr
    if p.returncode != 0 and not infeasible:
        sys.exit(f"cold_plan: {' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    return ms, infeasible


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ebb", default=os.path.join(ROOT, "target/release/ebb"))
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json")
    a = ap.parse_args()
    ebb = os.path.abspath(a.ebb)
    with tempfile.TemporaryDirectory() as tmp:
        plan = os.path.join(tmp, "g24.bin")
        subprocess.run([ebb, "compile", os.path.join(ROOT, "tests/fixtures/jax/gpt2_24l.mlir"),
                        "-o", plan, "--plan-format", "binary", "--device", "h100-sxm-pcie5"],
                       check=True, stdout=subprocess.DEVNULL)
        report = os.path.join(tmp, "shapes.json")
        subprocess.run([ebb, "bench", plan, "--dist", "longtail", "--samples", str(a.samples),
                        "--json", report], check=True, stdout=subprocess.DEVNULL)
        with open(report) as f:
            rows = json.load(f)["rows"]
        shapes = [",".join(f"{k}={v}" for k, v in r["bind"].items()) for r in rows]
        cases = {}
        for device in ["h100-sxm-pcie5", "cpu"]:
            for budget in [None, "16GiB", "50%"]:
                name = f"{device} budget={budget or 'none'}"
                per_shape = []
                infeasible = 0
                for s in shapes:
                    cmd = [ebb, "plan", plan, "--bind", s, "--device", device]
                    if budget:
                        cmd += ["--budget", budget]
                    infeasible += run(cmd)[1]  # also warms the page cache and the device profile
                    per_shape.append(statistics.median(run(cmd)[0] for _ in range(a.runs)))
                cases[name] = per_shape
                print(f"{name:32} p50 {quantile(per_shape, 0.5):6.2f}  p90 "
                      f"{quantile(per_shape, 0.9):6.2f}  max {max(per_shape):6.2f} ms"
                      f"  ({infeasible} of {len(shapes)} infeasible)", flush=True)
    every = [x for v in cases.values() for x in v]
    print(f"{'all':32} p50 {quantile(every, 0.5):6.2f}  p90 {quantile(every, 0.9):6.2f}  "
          f"max {max(every):6.2f} ms  ({len(shapes)} shapes x {len(cases)} cases, median of "
          f"{a.runs} runs each)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"shapes": shapes, "cases": cases}, f, indent=1)


if __name__ == "__main__":
    main()
