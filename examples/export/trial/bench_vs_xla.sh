#!/usr/bin/env bash
# The trial's JAX steps beside XLA:CPU, two shapes each: one `ebb bench --xla --json` per step.
#   bash examples/export/trial/bench_vs_xla.sh EBB_BINARY OUT_DIR [all|12|3|4|5] [odd]
# `12` (the default): the 13 steps of trial_models.py and trial_models2.py; `3`: the 6 steps of
# trial_models3.py (ViT, BERT, T5, MoE, Whisper, CLIP) and the 2 of trial_models_flax.py (linen,
# NNX); `4`: the 5 steps of trial_models4.py (ConvNeXt, LLaMA-style, Swin, BiLSTM, MLP-Mixer);
# `5`: the 6 steps of trial_models5.py (GRU LM, ResNet with BatchNorm, graph network, WaveNet,
# Perceiver, DLRM); `all`: every set. Each list line is `step shapes odd-shapes`: with `odd`, the
# third field's shapes are run instead, a small one and an odd-sized one (B=3, S=13; B=11, S=47,
# ...: sizes that are not multiples of a vector width or a tile), as users meet them.
#   python3 examples/export/trial/summ_vs_xla.py OUT_DIR      # one row per step x shape, then median / max
# Needs the exports in /tmp/trial/jax/out (README.md of this folder) and .venv-jax.
set -euo pipefail
BIN=$1; OUT=$2; SET=${3:-12}; MODE=${4:-main}; mkdir -p "$OUT"
root="$(cd "$(dirname "$0")/../../.." && pwd)"
D=/tmp/trial/jax/out
export EBB_PYTHON="$root/.venv-jax/bin/python"
want() { [ "$SET" = all ] || [ "$SET" = "$1" ]; }
{ if want 12; then cat <<'LIST'
jx_bf16_lossscale B=8;B=64 B=3;B=37
jx_cnn_nhwc_avgpool B=8;B=64 B=3;B=37
jx_cumsum_sort_topk_segsum B=8,S=32;B=16,S=64 B=3,S=13;B=11,S=47
jx_emb_mlp_adam_ls B=8,S=32;B=16,S=64 B=3,S=13;B=11,S=47
jx_grad_accum_fori m=2;m=8 m=1;m=5
jx_misc_cumsum_static_argsort_names B=8;B=64 B=3;B=37
jx_misc_cumsum_static_argsort_nockpt B=8;B=64 B=3;B=37
jx_rnn_scan_over_S B=8,S=32;B=16,S=64 B=3,S=13;B=11,S=47
jx_rope_rms_acc B=8,S=32;B=16,S=64 B=3,S=13;B=11,S=47
jx_scan_remat_dots B=8,S=32;B=16,S=64 B=3,S=13;B=11,S=47
jx_sdpa_lengths_stepin B=8,S=32;B=16,S=64 B=3,S=13;B=11,S=47
jx_tfm_sdpa_erf_adamw_sched B=8,S=32;B=16,S=64 B=3,S=13;B=11,S=47
jx_typed_key_dropout B=8;B=64 B=3;B=37
LIST
fi; if want 3; then cat <<'LIST'
jx3_vit_patchconv_adamw B=8;B=64 B=3;B=37
jx3_bert_padmask_mlm B=8,S=32;B=16,S=64 B=3,S=13;B=11,S=47
jx3_t5_encdec_two_syms B=8,S=32,T=16;B=16,S=64,T=32 B=3,S=13,T=9;B=11,S=47,T=29
jx3_moe_top2_dense B=8,S=32;B=16,S=64 B=3,S=13;B=11,S=47
jx3_whisper_conv1d B=8,T=50;B=16,T=100 B=3,T=27;B=11,T=77
jx3_clip_bb_logits B=8,S=16;B=64,S=32 B=3,S=13;B=37,S=29
fx_linen_cnn_bn_dropout B=8;B=64 B=3;B=37
fx_nnx_tfm_padmask B=8,S=32;B=16,S=64 B=3,S=13;B=11,S=47
LIST
fi; if want 4; then cat <<'LIST'
jx4_convnext_dw7 B=8;B=64 B=3;B=37
jx4_llama_gqa_rope B=8,S=32;B=16,S=64 B=3,S=13;B=11,S=47
jx4_swin_shifted B=8;B=64 B=3;B=37
jx4_bilstm_tagger B=8,S=32;B=16,S=64 B=3,S=13;B=11,S=47
jx4_mixer_lion B=8;B=64 B=3;B=37
LIST
fi; if want 5; then cat <<'LIST'
jx5_gru_lm B=8,S=32;B=16,S=64 B=3,S=13;B=11,S=47
jx5_resnet_bn_sgdwd B=8;B=64 B=3;B=37
jx5_gnn_segsum N=64,E=256;N=512,E=2048 N=37,E=133;N=301,E=1201
jx5_wavenet_dilated B=8,T=64;B=16,T=256 B=3,T=70;B=11,T=151
jx5_perceiver_xattn B=8,S=32;B=16,S=128 B=3,S=13;B=11,S=77
jx5_dlrm_embag B=64;B=512 B=3;B=301
LIST
fi; } | while read -r step shapes odd; do
  if [ "$MODE" = odd ]; then shapes=$odd; fi
  "$BIN" bench "$D/$step.mlir" --shapes "$shapes" --xla --xla-time-runs 30 --exec 30 \
    --json "$OUT/$step.json" > "$OUT/$step.txt" 2>&1 || echo "FAIL $step (see $OUT/$step.txt)" >&2
done
