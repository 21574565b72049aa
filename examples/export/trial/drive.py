#!/usr/bin/env python3
"""Run the ebb trial pipeline on one file.
usage: drive.py FILE BIND [--npz REF.npz] [--params-from T.onnx] [--jax] [--import-only]
Prints one JSON line summary; full logs in FILE.ebb.log"""
import json
import re
import subprocess
import sys

EBB = "/tmp/trial/ebb"
args = sys.argv[1:]
f, bind = args[0], args[1]
npz = args[args.index("--npz") + 1] if "--npz" in args else None
pf = ["--params-from", args[args.index("--params-from") + 1]] if "--params-from" in args else []
is_jax = "--jax" in args
log = open(f + ".ebb.log", "w")
S = {"file": f, "bind": bind}


def sh(cmd):
    log.write("$ " + " ".join(cmd) + "\n")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    log.write(p.stdout[-20000:] + "\n" + p.stderr[-20000:] + f"\n[rc={p.returncode}]\n")
    log.flush()
    return p


def j(p):
    try:
        return json.loads(p.stdout)
    except Exception:
        return None


p = sh([EBB, "import", f, "--json"] + pf)
d = j(p)
if p.returncode != 0 or d is None:
    S["import"] = "FAIL: " + (p.stderr.strip() or p.stdout.strip())[-1500:]
    p2 = sh([EBB, "import", f, "--json", "--allow-unsupported"] + pf)
    d2 = j(p2)
    S["allow_unsupported"] = (d2 if d2 is None else {k: v for k, v in d2.items()
                              if "unsupported" in k}) or p2.stderr[-800:]
    print(json.dumps(S))
    sys.exit(0)
S["import"] = "ok"
S["unresolved_dims"] = d.get("unresolved_dims")
S["symbols"] = d.get("symbols")
S["warnings"] = d.get("warnings")
target = f
if pf:  # plan/run take no --params-from: compile first
    target = f + ".plan.json"
    c = sh([EBB, "compile", f, "-o", target] + pf)
    if c.returncode != 0:
        S["compile"] = "FAIL: " + c.stderr.strip()[-1500:]
        print(json.dumps(S))
        sys.exit(0)
    pf = []
if "--import-only" in args:
    print(json.dumps(S))
    sys.exit(0)


def plan_budget(extra):
    budget = "50%"
    p = sh([EBB, "plan", target, "--bind", bind, "--budget", budget, "--json"] + pf + extra)
    if p.returncode != 0:
        m = re.search(r"smallest feasible budget for this plan at these shapes is (\d+) bytes",
                      p.stderr)
        if not m:
            return None, "plan FAIL: " + p.stderr.strip()[-1500:]
        budget = m.group(1)
        p = sh([EBB, "plan", target, "--bind", bind, "--budget", budget, "--json"] + pf + extra)
        if p.returncode != 0:
            return None, "plan FAIL at " + budget + ": " + p.stderr.strip()[-1500:]
    return budget, j(p)


def run(extra, budget, inputs=None, tag=""):
    cmd = [EBB, "run", target, "--bind", bind, "--budget", budget, "--check", "--json"] + extra
    if inputs:
        cmd += ["--inputs", inputs]
    p = sh(cmd)
    d = j(p)
    if d is None:
        m = re.search(r"smallest feasible budget[^\d]*(\d+) bytes", p.stderr)
        if m and m.group(1) != budget:
            return run(extra, m.group(1), inputs, tag)
        return {"rc": p.returncode, "err": p.stderr.strip()[-1500:]}
    r = {"rc": p.returncode, "budget": budget,
         "match": d.get("outputs_match_reference"),
         "peaks(meas,plan,checker)": (d.get("measured_peak_bytes"), d.get("peak_bytes_planned"),
                                      d.get("checker_peak_bytes")),
         "npz_rel": d.get("npz_max_rel_err")}
    if p.returncode != 0:
        r["err"] = p.stderr.strip()[-1500:]
    return r


for tag, extra in [("plain", []), ("fusion_donate", ["--fusion", "on", "--donate", "auto"])]:
    if tag == "fusion_donate" and not is_jax:
        continue
    budget, pl = plan_budget(extra)
    if budget is None:
        S[tag] = pl
        continue
    S[tag] = {"plan_budget": budget,
              "plan_peak": pl.get("peak_bytes_planned") if isinstance(pl, dict) else None}
    S[tag]["run"] = run(extra, budget)
    if npz:
        S[tag]["run_npz"] = run(extra, budget, npz)
print(json.dumps(S))
