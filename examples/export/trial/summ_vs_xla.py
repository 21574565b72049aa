"""Rows of `bench_vs_xla.sh`'s JSON files: XLA and Ebb step ms, their ratio, Ebb/XLA memory
(both donated); then the median and max ratio and the rows within 1.2x.
python3 examples/export/trial/summ_vs_xla.py OUT_DIR"""
import glob, json, os, statistics, sys

rows = []
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    name = os.path.basename(f)[:-5]
    for row in json.load(open(f))["rows"]:
        x, e = row.get("xla") or {}, row.get("exec") or {}
        bind = ",".join(f"{k}={v}" for k, v in row["bind"].items())
        r, m = e.get("ebb_over_xla_step"), x.get("ebb_over_xla_donated")
        rows.append((r, m))
        print(f"{name:40s} {bind:12s} xla {x.get('step_ms')} ebb {e.get('step_ms')} ratio {r} mem {m}")
rs = [r for r, _ in rows if r]
ms = [m for _, m in rows if m]
print(f"rows {len(rows)}: step median {statistics.median(rs):.2f} max {max(rs):.2f}, "
      f"within 1.2x {sum(r <= 1.2 for r in rs)}/{len(rs)}; memory median {statistics.median(ms):.3f} "
      f"({min(ms):.2f}-{max(ms):.2f})")
