#!/usr/bin/env bash
# The trial's 13 JAX steps beside XLA:CPU, two shapes each: one `ebb bench --xla --json` per step.
#   bash examples/export/trial/bench_vs_xla.sh EBB_BINARY OUT_DIR
#   python3 examples/export/trial/summ_vs_xla.py OUT_DIR      # one row per step x shape, then median / max
# Needs the exports in /tmp/trial/jax/out (README.md of this folder) and .venv-jax.
set -euo pipefail
BIN=$1; OUT=$2; mkdir -p "$OUT"
root="$(cd "$(dirname "$0")/../../.." && pwd)"
D=/tmp/trial/jax/out
export EBB_PYTHON="$root/.venv-jax/bin/python"
while read -r step shapes; do
  "$BIN" bench "$D/$step.mlir" --shapes "$shapes" --xla --xla-time-runs 30 --exec 30 \
    --json "$OUT/$step.json" > "$OUT/$step.txt" 2>&1 || echo "FAIL $step (see $OUT/$step.txt)" >&2
done <<'LIST'
jx_bf16_lossscale B=8;B=64
jx_cnn_nhwc_avgpool B=8;B=64
jx_cumsum_sort_topk_segsum B=8,S=32;B=16,S=64
jx_emb_mlp_adam_ls B=8,S=32;B=16,S=64
jx_grad_accum_fori m=2;m=8
jx_misc_cumsum_static_argsort_names B=8;B=64
jx_misc_cumsum_static_argsort_nockpt B=8;B=64
jx_rnn_scan_over_S B=8,S=32;B=16,S=64
jx_rope_rms_acc B=8,S=32;B=16,S=64
jx_scan_remat_dots B=8,S=32;B=16,S=64
jx_sdpa_lengths_stepin B=8,S=32;B=16,S=64
jx_tfm_sdpa_erf_adamw_sched B=8,S=32;B=16,S=64
jx_typed_key_dropout B=8;B=64
LIST
