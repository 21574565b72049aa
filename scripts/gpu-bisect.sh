#!/usr/bin/env bash
# Which ops' device work makes a GPU step's outputs differ from the reference executor's:
# runs `ebb run PLAN --bind BIND --executor EXECUTOR --check` once as is and once per group of
# op kinds forced onto the host (`EBB_DEVICE_HOST`), and prints, per run, whether the outputs
# are within tolerance and the outputs that are not. The group whose forcing makes the outputs
# pass holds the culprit.
#
# Usage: scripts/gpu-bisect.sh EBB PLAN BIND [INPUTS] [EXECUTOR]
#   EBB       the `ebb` binary (with the CUDA executor for `cuda`)
#   PLAN      a plan compiled with `--target cuda` (its kernels' PTX inside)
#   BIND      the shape, e.g. B=2,S=16
#   INPUTS    `random:SEED` or an `.npz` (default random:7)
#   EXECUTOR  cuda (default) or simt
set -uo pipefail
[ $# -ge 3 ] || { sed -n '2,14p' "$0"; exit 2; }
EBB="$1" PLAN="$2" BIND="$3" INPUTS="${4:-random:7}" EXECUTOR="${5:-cuda}"
GROUPS_TO_TRY=(
    ""
    "fusion"
    "reduce"
    "dot_general,convolution"
    "gather,scatter"
    "transpose,broadcast_in_dim,slice,reverse,concatenate,pad,dynamic_slice,dynamic_update_slice"
    "reduce_window,select_and_scatter,rng_bit_generator,iota,constant"
)
for group in "${GROUPS_TO_TRY[@]}"; do
    out=$(EBB_DEVICE_HOST="$group" timeout 120 "$EBB" run "$PLAN" --bind "$BIND" \
        --executor "$EXECUTOR" --check --inputs "$INPUTS" 2>&1)
    rc=$?
    echo "== on the host: ${group:-nothing} (exit $rc)"
    grep -E '^(device|check:|error|output [0-9]+)' <<< "$out" | head -12
done
