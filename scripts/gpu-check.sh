#!/usr/bin/env bash
# The GPU check: the GPU executor on real training steps, one JSON report.
#
# Cases: the 2-layer GPT (gpt2_tiny_adamw), GPT-2 small, a bf16 step (mlp_bf16: the Llama-style
# bf16 fixture does not exist yet), the CNN (cnn_sgd) and the scan GPT (gpt2_tiny_scan), at two
# shapes each, with no budget and at 50% of the scheduled peak (or the smallest feasible
# budget when that is infeasible). Per run (`ebb run --check --repeat N --json`): measured
# peak vs planned vs the plan checker's, the arena's high-water mark vs its size, the
# driver's free-memory drop (cuda), outputs vs the CPU reference executor (and vs JAX's own
# outputs where the shape is a fixture's reference shape), the median step time and the added
# time measured (budget vs no budget) vs modelled; and, where `jax` with CUDA is importable,
# the same JAX step on the same GPU (`memory_stats()["peak_bytes_in_use"]`, median step time).
#
# Usage:
#   scripts/gpu-check.sh --build DIR             build the artifacts into DIR (needs the Rust
#                                                toolchain, LLVM/MLIR 22; no GPU): `ebb`, the
#                                                CLI with the CUDA executor and no LLVM or MLIR
#                                                (`--no-default-features --features cuda`), the
#                                                plans with their PTX (compiled by a full `ebb`),
#                                                the reference npz files, the JAX peer scripts;
#                                                fails above 60 MiB
#   scripts/gpu-check.sh --artifacts DIR [--executor cuda|simt] [--device PROFILE]
#                        [--repeat N] [--out REPORT.json]
#                                                run the check from DIR (a GPU machine needs the
#                                                NVIDIA driver and cuBLAS on the library path,
#                                                python3 for the report, JAX for the peer)
#   scripts/gpu-check.sh --executor simt         both, here: the same report on the CPU through
#                                                the simulated device (GPU fields null; smaller
#                                                shapes, one timed step), run by the full `ebb`
#                                                (simt needs the code generator); the shipped
#                                                `ebb` loads every plan and refuses
#                                                `--executor cuda` cleanly without a driver
#   --ebb PATH                                   a full `ebb` (default features) to compile the
#                                                plans and run simt, instead of building one
#   --lean PATH                                  with --build: ship this `ebb` (built with
#                                                `--no-default-features --features cuda`)
#                                                instead of building one
#   --work DIR                                   keep every run's JSON and stderr in DIR
#                                                (default: a temporary folder)
#   --run-timeout S                              stop one `ebb run` after S seconds and
#                                                report it as an error (default 300)
#   --no-peer                                    skip the JAX peer (it runs after every Ebb
#                                                run, one process per shape)
#
# cuBLAS: cudarc opens `libcublas.so` or `libcublas.so.12` (and older). Where only a newer
# versioned file exists (CUDA 13: `libcublas.so.13`, in the toolkit or in the `nvidia-cublas`
# Python package), the check links it as `libcublas.so` in its work folder and puts that
# folder on LD_LIBRARY_PATH, and says so.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
EXECUTOR=cuda
DEVICE=""
REPEAT=""
OUT=gpu-check.json
BUILD=""
ARTIFACTS=""
EBB=""
LEAN=""
LIMIT=$((60 * 1024 * 1024))
WORK=""
RUN_TIMEOUT=300
PEER=1

while [ $# -gt 0 ]; do
    case "$1" in
        --build) BUILD="$2"; shift 2 ;;
        --artifacts) ARTIFACTS="$2"; shift 2 ;;
        --executor) EXECUTOR="$2"; shift 2 ;;
        --device) DEVICE="$2"; shift 2 ;;
        --repeat) REPEAT="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --ebb) EBB="$2"; shift 2 ;;
        --lean) LEAN="$2"; shift 2 ;;
        --work) WORK="$2"; shift 2 ;;
        --run-timeout) RUN_TIMEOUT="$2"; shift 2 ;;
        --no-peer) PEER=0; shift ;;
        -h|--help) sed -n '2,51p' "$0"; exit 0 ;;
        *) echo "gpu-check: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
case "$EXECUTOR" in cuda|simt) ;; *) echo "gpu-check: --executor cuda or simt" >&2; exit 2 ;; esac

# name | shapes on a GPU | shapes under simt (each: shape;shape). A shape that is one of the
# fixture's reference shapes runs on the reference npz's inputs (compared with JAX's outputs).
CASES="gpt2_tiny_adamw|B=2,S=16;B=8,S=256|B=2,S=16;B=3,S=7
gpt2_small|B=1,S=128;B=2,S=256|B=1,S=16;B=1,S=32
mlp_bf16|B=8;B=512|B=8;B=3
cnn_sgd|B=8;B=128|B=8;B=3
gpt2_tiny_scan|B=2,S=16;B=8,S=256|B=2,S=16;B=3,S=7"

# The full `ebb` (default features: StableHLO import, the code generator): `--ebb`, else built
# (the dev profile, which the tests build too).
full_ebb() {
    if [ -z "$EBB" ]; then
        (cd "$ROOT" && cargo build -p ebb-compiler --bin ebb)
        EBB="$ROOT/target/debug/ebb"
    fi
}

build() {
    local dir="$1"
    mkdir -p "$dir/plans" "$dir/refs" "$dir/peer"
    full_ebb
    if [ -z "$LEAN" ]; then
        (cd "$ROOT" && cargo build --release -p ebb-compiler --bin ebb \
            --no-default-features --features cuda)
        LEAN="$ROOT/target/release/ebb"
    fi
    cp "$LEAN" "$dir/ebb"
    strip "$dir/ebb" 2>/dev/null || true
    local line name gpu simt
    while IFS='|' read -r name gpu simt; do
        "$EBB" compile "$ROOT/tests/fixtures/jax/$name.mlir" --target cuda \
            --kernel-shapes "$gpu;$simt" -o "$dir/plans/$name.json"
        cp "$ROOT/tests/fixtures/jax/$name.json" "$dir/refs/$name.meta.json"
        for npz in "$ROOT/tests/fixtures/jax/$name".ref*.npz; do
            [ -e "$npz" ] && cp "$npz" "$dir/refs/"
        done
    done <<< "$CASES"
    cp "$ROOT"/examples/export/{xla_peer.py,export_all.py,models.py} "$dir/peer/"
    printf '%s\n' "$CASES" > "$dir/cases.txt"
    local size
    size=$(du -sb "$dir" | cut -f1)
    echo "gpu-check: artifacts in $dir: $size bytes ($((size / 1048576)) MiB)"
    echo "$size" > "$dir/artifact_bytes"
    if [ "$size" -gt "$LIMIT" ]; then
        if [ "$EXECUTOR" = cuda ]; then
            echo "gpu-check: the artifacts exceed 60 MiB" >&2
            exit 1
        fi
        echo "gpu-check: warning: the artifacts exceed 60 MiB (a rehearsal under simt goes on)" >&2
    fi
}

# The reference npz of `name` whose bindings are `shape`, if any.
ref_npz() {
    local dir="$1" name="$2" shape="$3"
    python3 - "$dir/refs/$name.meta.json" "$shape" <<'PY'
import json, sys, os
meta, shape = json.load(open(sys.argv[1])), sys.argv[2]
want = dict(kv.split("=") for kv in shape.split(","))
for r in meta.get("refs") or []:
    if {k: str(v) for k, v in r["bindings"].items()} == want:
        print(os.path.join(os.path.dirname(sys.argv[1]), r["file"]))
        break
PY
}

run_case() {
    local dir="$1" name="$2" shape="$3" budget="$4" out="$5"
    local inputs="random:7" npz
    npz=$(ref_npz "$dir" "$name" "$shape")
    [ -n "$npz" ] && inputs="$npz"
    local args=(run "$dir/plans/$name.json" --bind "$shape" --executor "$EXECUTOR" --check
        --repeat "$REPEAT" --inputs "$inputs" --device "$DEVICE" --json)
    [ -n "$budget" ] && args+=(--budget "$budget")
    local err rc=0
    timeout "$RUN_TIMEOUT" "$RUNNER" "${args[@]}" > "$out" 2> "$out.err" || rc=$?
    if [ "$rc" != 0 ]; then
        err=$(cat "$out.err")
        [ "$rc" = 124 ] && err="stopped after $RUN_TIMEOUT s (--run-timeout): $err"
        local smallest
        smallest=$(sed -n 's/.*smallest feasible budget for this plan at these shapes is \([0-9]*\) bytes.*/\1/p' <<< "$err")
        if [ -n "$smallest" ] && [ -n "$budget" ]; then
            run_case "$dir" "$name" "$shape" "$smallest" "$out"
            return
        fi
        echo "{\"error\": $(python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))' <<< "$err")}" > "$out"
    fi
}

# Makes cuBLAS loadable under a name cudarc tries (see the header), in folder `$1`.
find_cublas() {
    local lib="$1/lib" f
    if python3 -c 'import ctypes; ctypes.CDLL("libcublas.so")' 2>/dev/null \
        || python3 -c 'import ctypes; ctypes.CDLL("libcublas.so.12")' 2>/dev/null; then
        return
    fi
    for f in /usr/local/cuda/lib64/libcublas.so.* /usr/local/cuda*/targets/*/lib/libcublas.so.* \
        $(python3 -c 'import site, glob; print(" ".join(p for s in site.getsitepackages() for p in glob.glob(s + "/nvidia/*/lib/libcublas.so.*")))' 2>/dev/null) \
        /usr/lib/x86_64-linux-gnu/libcublas.so.*; do
        [ -e "$f" ] || continue
        mkdir -p "$lib"
        ln -sf "$f" "$lib/libcublas.so"
        export LD_LIBRARY_PATH="$lib:$(dirname "$f")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        echo "gpu-check: cuBLAS from $f (linked as $lib/libcublas.so)" >&2
        return
    done
    echo "gpu-check: no cuBLAS library found; the runs will say so" >&2
}

check() {
    local dir="$1"
    [ -x "$dir/ebb" ] || { echo "gpu-check: no ebb binary in $dir (run --build first)" >&2; exit 2; }
    RUNNER="$dir/ebb"
    local lean_plans=null
    if [ "$EXECUTOR" = simt ]; then
        full_ebb
        RUNNER="$EBB"
        # The shipped binary: every plan loads, and without a driver `--executor cuda` is a
        # clean error (exit 1 with a message), never a crash.
        lean_plans=0
        local name gpu simt msg
        while IFS='|' read -r name gpu simt; do
            msg=$("$dir/ebb" run "$dir/plans/$name.json" --bind "${simt%%;*}" \
                --executor cuda 2>&1 >/dev/null) && true
            case "$msg" in
                *"NVIDIA driver"*) lean_plans=$((lean_plans + 1)) ;;
                *) echo "gpu-check: the shipped ebb on $name: $msg" >&2 ;;
            esac
        done < "$dir/cases.txt"
    fi
    command -v python3 > /dev/null || { echo "gpu-check: python3 writes the report" >&2; exit 2; }
    local work="$WORK"
    if [ -n "$work" ]; then mkdir -p "$work"; : > "$work/index.tsv"; else work=$(mktemp -d); fi
    if [ "$EXECUTOR" = cuda ]; then find_cublas "$work"; fi
    local jax_gpu=0
    if [ "$PEER" = 1 ] && JAX_PLATFORMS=cuda python3 -c 'import jax; assert jax.devices()[0].platform == "gpu"' 2>/dev/null; then
        jax_gpu=1
    fi
    local name gpu simt shapes shape budget k=0
    while IFS='|' read -r name gpu simt; do
        shapes="$gpu"
        [ "$EXECUTOR" = simt ] && shapes="$simt"
        IFS=';' read -ra list <<< "$shapes"
        for shape in "${list[@]}"; do
            for budget in "" "50%scheduled"; do
                k=$((k + 1))
                echo "gpu-check: $name $shape ${budget:-no budget} ($EXECUTOR)" >&2
                run_case "$dir" "$name" "$shape" "$budget" "$work/run$k.json"
                printf '%s\t%s\t%s\t%s\n' "$name" "$shape" "${budget:-none}" "$work/run$k.json" >> "$work/index.tsv"
            done
        done
    done < "$dir/cases.txt"
    # The peer after every Ebb run, so that a short lease gets Ebb's figures first; not at
    # all when every Ebb run failed (there is nothing to compare).
    if [ "$jax_gpu" = 1 ] && [ -z "$(grep -L '"error"' "$work"/run*.json 2>/dev/null)" ]; then
        echo "gpu-check: every Ebb run failed; the JAX peer is skipped" >&2
        jax_gpu=0
    fi
    if [ "$jax_gpu" = 1 ]; then
        while IFS='|' read -r name gpu simt; do
            IFS=';' read -ra list <<< "$gpu"
            for shape in "${list[@]}"; do
                echo "gpu-check: JAX peer $name $shape" >&2
                JAX_PLATFORMS=cuda timeout "$RUN_TIMEOUT" python3 "$dir/peer/xla_peer.py" \
                    --fixture "$name" --shapes "$shape" --time-runs 10 \
                    > "$work/jax-$name-$shape.jsonl" 2> "$work/jax-$name-$shape.err" || true
            done
        done < "$dir/cases.txt"
    fi
    python3 - "$work" "$EXECUTOR" "$OUT" "$jax_gpu" "$(cat "$dir/artifact_bytes" 2>/dev/null || echo null)" \
        "$lean_plans" "$(wc -l < "$dir/cases.txt")" <<'PY'
import json, os, sys, glob
work, executor, out, jax_gpu = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
artifact_bytes = json.loads(sys.argv[5])
lean_plans, n_plans = json.loads(sys.argv[6]), int(sys.argv[7])
runs = []
for line in open(os.path.join(work, "index.tsv")):
    name, shape, budget, path = line.rstrip("\n").split("\t")
    r = json.load(open(path))
    runs.append((name, shape, budget, r))
def jax_of(name, shape):
    p = os.path.join(work, f"jax-{name}-{shape}.jsonl")
    if not os.path.exists(p):
        return None
    for l in open(p):
        o = json.loads(l)
        if "bind" in o:
            return {"step_ms": o.get("step_ms"), "peak_bytes_in_use": o.get("peak_bytes_in_use"),
                    "xla_total_bytes": o.get("total_bytes")}
    return None
base = {(n, s): r for n, s, b, r in runs if b == "none" and "error" not in r}
cases = []
for name, shape, budget, r in runs:
    if "error" in r:
        cases.append({"model": name, "bind": shape, "budget": budget, "error": r["error"]})
        continue
    d = r.get("device") or {}
    planned = r.get("peak_bytes_planned") or r.get("peak_bytes_scheduled")
    free = base.get((name, shape))
    step = r.get("wall_ms_median") or r.get("wall_ms")
    free_step = free and (free.get("wall_ms_median") or free.get("wall_ms"))
    cases.append({
        "model": name, "bind": shape, "budget": budget,
        "budget_bytes": r.get("budget_bytes"),
        "decisions": {"recompute": r.get("recompute_decisions", 0), "swap": r.get("swap_decisions", 0)},
        "peak_bytes_planned": planned,
        "measured_peak_bytes": r["measured_peak_bytes"],
        "checker_peak_bytes": r.get("checker_peak_bytes"),
        "measured_equals_planned": r["measured_peak_bytes"] == planned == r.get("checker_peak_bytes"),
        "arena_bytes": r.get("arena_bytes"),
        "arena_high_water_bytes": (d.get("run") or {}).get("arena_high_water_bytes"),
        "scratch_bytes": (d.get("program") or {}).get("scratch_bytes"),
        "driver_free_drop_bytes": (d.get("run") or {}).get("device_bytes") if executor == "cuda" else None,
        "outputs_bit_identical": r.get("outputs_match_reference"),
        "reference_max_rel_err": r.get("reference_max_rel_err"),
        "outputs_within_tolerance": r.get("outputs_within_tolerance"),
        "output_errors": r.get("reference_output_errors") or [],
        "npz_max_rel_err": r.get("npz_max_rel_err"),
        "step_ms_median": step,
        "added_ms_measured": (step - free_step) if (budget != "none" and free_step) else None,
        "added_ms_modelled": r.get("added_us", 0) / 1e3 if budget != "none" else None,
        "launches": (d.get("program") or {}).get("launches"),
        "kernels": (d.get("program") or {}).get("kernels"),
        "gemms": (d.get("program") or {}).get("gemms"),
        "host_ops": (d.get("program") or {}).get("host_ops"),
        "jax": jax_of(name, shape) if budget == "none" else None,
    })
ok = [c for c in cases if "error" not in c]
report = {
    "executor": executor,
    "jax_on_gpu": jax_gpu,
    "artifact_bytes": artifact_bytes,
    "artifact_limit_bytes": 60 * 1024 * 1024,
    "artifacts_fit": None if artifact_bytes is None else artifact_bytes <= 60 * 1024 * 1024,
    "shipped_ebb_refuses_cuda_cleanly": None if lean_plans is None else lean_plans == n_plans,
    "runs": len(cases),
    "failed_runs": len(cases) - len(ok),
    "all_measured_equal_planned": all(c["measured_equals_planned"] for c in ok) and len(ok) == len(cases),
    "all_outputs_within_tolerance": all(c["outputs_within_tolerance"] for c in ok) and len(ok) == len(cases),
    "cases": cases,
}
json.dump(report, open(out, "w"), indent=1)
print(f"gpu-check: {len(ok)}/{len(cases)} runs, measured == planned == checker on all: "
      f"{report['all_measured_equal_planned']}, outputs within tolerance on all: "
      f"{report['all_outputs_within_tolerance']}, artifacts {artifact_bytes} bytes (fit 60 MiB: "
      f"{report['artifacts_fit']}), shipped ebb refuses cuda cleanly without a driver: "
      f"{report['shipped_ebb_refuses_cuda_cleanly']} -> {out}", file=sys.stderr)
report_ok = (report["all_measured_equal_planned"] and report["all_outputs_within_tolerance"]
             and report["artifacts_fit"] is not False
             and report["shipped_ebb_refuses_cuda_cleanly"] is not False)
sys.exit(0 if report_ok else 1)
PY
}

if [ -z "$DEVICE" ]; then DEVICE=h100-sxm-pcie5; fi
if [ -z "$REPEAT" ]; then
    if [ "$EXECUTOR" = simt ]; then REPEAT=1; else REPEAT=10; fi
fi
if [ -n "$BUILD" ]; then
    build "$BUILD"
    [ -z "$ARTIFACTS" ] && exit 0
fi
if [ -z "$ARTIFACTS" ]; then
    # Here: build into a temporary directory first.
    ARTIFACTS=$(mktemp -d)
    build "$ARTIFACTS"
fi
check "$ARTIFACTS"
