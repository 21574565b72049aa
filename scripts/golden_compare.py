#!/usr/bin/env python3
"""Compares finalize's results on the golden set between two builds ("no worse than before").

Usage: `EBB_GOLDEN_TSV=/tmp/old.tsv cargo test -p ebb-tests --all-features --test integration
golden` on each build, then `python3 scripts/golden_compare.py OLD.tsv NEW.tsv [--all]`.

Per case (tab-separated: case, budget bytes or -1, added µs, step µs, arena bytes, planned peak
bytes; or the error): the change of added time in points of the modelled step, where the old
arena fits the budget (or there are no offsets); every changed arena over 1.05 × its planned
peak or over a budget the old one fit. Exits 1 when a case adds more than 1 point or breaks an arena
bound.
"""
import sys


def load(path):
    rows = {}
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        rows[f[0]] = f[1:]
    return rows


def main():
    old, new = load(sys.argv[1]), load(sys.argv[2])
    assert old.keys() == new.keys(), "the two files list different cases"
    worst, worst_case, changed, bad = float("-inf"), None, 0, []
    best = float("inf")
    for case, o in old.items():
        n = new[case]
        if o != n:
            changed += 1
        budget = int(o[0])
        offsets = "offsets=true" in case
        if len(o) < 5 or len(n) < 5:
            if o != n:
                bad.append(f"{case}: {o[1:]} -> {n[1:]}")
            continue
        ou, step, oa = float(o[1]), float(o[2]), int(o[3])
        nu, na, np_ = float(n[1]), int(n[3]), int(n[4])
        delta = 100.0 * (nu - ou) / step if step > 0 else 0.0
        fits = not offsets or budget < 0 or oa <= budget
        if fits:
            if delta > worst:
                worst, worst_case = delta, case
            best = min(best, delta)
            if delta > 1.0:
                bad.append(f"{case}: added {delta:+.3f} points of the step")
        if offsets and np_ > 0 and na > 1.05 * np_ and o != n:
            bad.append(f"{case}: arena / planned {na / np_:.4f}")
        if offsets and budget >= 0 and oa <= budget < na:
            bad.append(f"{case}: arena {na} over the budget {budget} the old one fit")
        if "--all" in sys.argv and o != n:
            print(f"{case}: added {100 * ou / step:.3f}% -> {100 * nu / step:.3f}% "
                  f"({delta:+.3f}), arena {oa} -> {na}")
    print(f"{len(old)} cases, {changed} changed; added time where the old arena fits: "
          f"worst {worst:+.3f}, best {best:+.3f} points of the step ({worst_case})")
    for b in bad:
        print("VIOLATION", b)
    sys.exit(1 if bad else 0)


main()
