"""Export the JAX training-step fixtures used by Ebb's StableHLO front end.

Usage (from the repository root):

    python examples/export/export_all.py                 # everything into tests/fixtures/jax/
    python examples/export/export_all.py --only mlp_sgd  # a subset
    python examples/export/export_all.py --out /tmp/fx   # somewhere else
    python examples/export/export_all.py --only mamba_ssm_unrolled --static B=8,S=64 --out /tmp/fx
                                       # at concrete shapes: <name>_B8_S64.mlir, no references

For each fixture <name> this writes
  <name>.mlir          StableHLO module in MLIR *generic* form with debug locations,
  <name>.json          metadata: versions, symbols, flattened inputs/outputs, op counts, refs,
  <name>.ref<k>.npz    (small models only) numeric reference data at concrete shapes:
                       in_0..in_{n-1} in @main argument order, out_0..out_{m-1} from the plain
                       jitted step on CPU.
The output is deterministic: running the script twice gives byte-identical files (source file
names in locations are made relative; npz members carry a fixed timestamp).
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import io
import json
import os
import re
import sys
import time
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

os.environ.setdefault("JAX_PLATFORMS", "cpu")

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
DEFAULT_OUT = REPO_ROOT / "tests" / "fixtures" / "jax"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jaxlib  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from jax._src.interpreters import mlir as jm  # noqa: E402
from jax._src.lib.mlir import ir  # noqa: E402

# Locations name source files; make them independent of where the repo / venv lives:
# "<repo>/examples/export/models.py" -> "examples/export/models.py",
# ".../site-packages/optax/_src/transform.py" -> "optax/_src/transform.py".
jax.config.update(
    "jax_hlo_source_file_canonicalization_regex",
    r"^(?:.*/(?:site|dist)-packages/|" + re.escape(str(REPO_ROOT) + os.sep) + ")",
)

sys.path.insert(0, str(HERE))
import models as M  # noqa: E402

PLATFORM = "cpu"

# ----------------------------------------------------------------------------------------------
# Fixture definitions
# ----------------------------------------------------------------------------------------------


@dataclass
class Fixture:
    name: str
    description: str
    step: Callable
    symbols: str  # e.g. "B, S"
    constraints: tuple[str, ...]
    # make_args(dims, concrete, seed) -> tuple of positional args. `dims` maps symbol -> int
    # (concrete) or -> symbolic dim (export). With concrete=False only shapes are needed, so
    # params/opt state are ShapeDtypeStructs from jax.eval_shape (never materialized).
    make_args: Callable
    refs: list[dict] = field(default_factory=list)  # bindings for numeric references
    config: dict = field(default_factory=dict)
    # Reuse the reference files of another fixture whose flattened inputs are identical and whose
    # outputs must match (e.g. remat vs. plain): verified at export time, no npz written.
    refs_from: str | None = None
    # Names of the step's outputs (default: loss, new_params, new_opt_state).
    out_names: tuple[str, ...] | None = None
    # Pytree-path fragments of outputs that are round-off amplified by the step (parameters
    # whose gradient is zero in exact arithmetic, and their optimizer state): the exported
    # module and the jitted step disagree there beyond any elementwise tolerance, so they are
    # not checked elementwise; their largest difference is recorded in the JSON.
    roundoff_outputs: tuple[str, ...] = ()
    # The platform the module is lowered for. A module lowered for another platform than the
    # CPU (e.g. "cuda", whose lowering keeps a host-offload policy's annotate_device_placement
    # custom calls, dropped by the CPU lowering) cannot be exp.call'ed here: its references are
    # the plain jitted step on CPU only (an offload does not change the math).
    platform: str = "cpu"
    # Exportable at concrete shapes only (`--static`; e.g. a scan unrolled over S): not part of
    # the default set.
    static_only: bool = False


def _spec(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def _data_keys(seed):
    return jax.random.split(jax.random.PRNGKey(1000 + seed), 2)


def ckpt_cumsum_args(dims, concrete, seed=0):
    b, s = dims["B"], dims["S"]
    shape = (b, s, M.CKPT_CUMSUM_D)
    if concrete:
        params = M.init_ckpt_cumsum(jax.random.PRNGKey(0))
        kx, _ = _data_keys(seed)
        return params, jax.random.key(7 + seed), jax.random.normal(kx, shape, jnp.float32)
    params = jax.eval_shape(M.init_ckpt_cumsum, jax.random.PRNGKey(0))
    return params, jax.eval_shape(jax.random.key, 0), jax.ShapeDtypeStruct(shape, jnp.float32)


def mlp_args(dims, concrete, seed=0):
    b = dims["B"]
    if concrete:
        params = M.init_mlp(jax.random.PRNGKey(0))
        kx, ky = _data_keys(seed)
        x = jax.random.normal(kx, (b, M.MLP_SIZES[0]), jnp.float32)
        y = jax.random.randint(ky, (b,), 0, M.MLP_SIZES[-1], jnp.int32)
        return params, x, y
    params = jax.eval_shape(M.init_mlp, jax.random.PRNGKey(0))
    return (params, jax.ShapeDtypeStruct((b, M.MLP_SIZES[0]), jnp.float32),
            jax.ShapeDtypeStruct((b,), jnp.int32))


def cnn_args(dims, concrete, seed=0):
    b = dims["B"]
    if concrete:
        params = M.init_cnn(jax.random.PRNGKey(0))
        kx, ky = _data_keys(seed)
        x = jax.random.normal(kx, (b, 1, 28, 28), jnp.float32)
        y = jax.random.randint(ky, (b,), 0, 10, jnp.int32)
        return params, x, y
    params = jax.eval_shape(M.init_cnn, jax.random.PRNGKey(0))
    return (params, jax.ShapeDtypeStruct((b, 1, 28, 28), jnp.float32),
            jax.ShapeDtypeStruct((b,), jnp.int32))


def cnn_poly_args(dims, concrete, seed=0):
    b, h, w = dims["B"], dims["h"], dims["w"]
    shape = (b, 8 * h, 8 * w, 3)
    if concrete:
        params = M.init_cnn_poly(jax.random.PRNGKey(0))
        kx, ky = _data_keys(seed)
        x = jax.random.normal(kx, shape, jnp.float32)
        y = jax.random.randint(ky, (b,), 0, 10, jnp.int32)
        return params, x, y
    params = jax.eval_shape(M.init_cnn_poly, jax.random.PRNGKey(0))
    return (params, jax.ShapeDtypeStruct(shape, jnp.float32), jax.ShapeDtypeStruct((b,), jnp.int32))


def shifted_lm_args(dims, concrete, seed=0):
    b, s = dims["B"], dims["S"]
    tok_shape, w_shape = (b, s + 1), (b * s,)
    if concrete:
        params = M.init_shifted_lm(jax.random.PRNGKey(0))
        kt, kw = _data_keys(seed)
        tokens = jax.random.randint(kt, tok_shape, 0, M.SHIFTED_LM_VOCAB, jnp.int32)
        weights = jax.random.uniform(kw, w_shape, jnp.float32, 0.5, 1.5)
        return params, tokens, weights
    params = jax.eval_shape(M.init_shifted_lm, jax.random.PRNGKey(0))
    return (params, jax.ShapeDtypeStruct(tok_shape, jnp.int32),
            jax.ShapeDtypeStruct(w_shape, jnp.float32))


def resnet_bn_args_fn():
    _, opt = M.make_resnet_bn_step()

    def init(key):
        params, stats = M.init_resnet_bn(key)
        return params, {"batch_stats": stats, "opt": opt.init(params)}

    def make(dims, concrete, seed=0):
        b = dims["B"]
        shape = (b, 16, 16, 3)
        if concrete:
            params, state = init(jax.random.PRNGKey(0))
            kx, ky = _data_keys(seed)
            x = jax.random.normal(kx, shape, jnp.float32)
            y = jax.random.randint(ky, (b,), 0, 10, jnp.int32)
            return params, state, x, y
        params, state = jax.eval_shape(init, jax.random.PRNGKey(0))
        return (params, state, jax.ShapeDtypeStruct(shape, jnp.float32),
                jax.ShapeDtypeStruct((b,), jnp.int32))

    return make


def image_opt_args_fn(init_params, opt, second):
    """Arguments (params, opt_state, x, second) of a step on NHWC 32x32x3 images: `second` is
    "target" (a clean image: x is it plus Gaussian noise) or "eps" (standard normal noise of
    shape [B, models.VAE_LATENT] for the reparameterization)."""
    def init(key):
        params = init_params(key)
        return params, opt.init(params)

    def make(dims, concrete, seed=0):
        b = dims["B"]
        shape = (b, 32, 32, 3)
        sshape = shape if second == "target" else (b, M.VAE_LATENT)
        if concrete:
            params, opt_state = init(jax.random.PRNGKey(0))
            kx, ks = _data_keys(seed)
            clean = jax.random.uniform(kx, shape, jnp.float32)
            if second == "target":
                return (params, opt_state,
                        clean + 0.1 * jax.random.normal(ks, shape, jnp.float32), clean)
            return params, opt_state, clean, jax.random.normal(ks, sshape, jnp.float32)
        params, opt_state = jax.eval_shape(init, jax.random.PRNGKey(0))
        return (params, opt_state, jax.ShapeDtypeStruct(shape, jnp.float32),
                jax.ShapeDtypeStruct(sshape, jnp.float32))

    return make


def gpt_block_args(dims, concrete, seed=0):
    b, s, d = dims["B"], dims["S"], M.GPT_BLOCK.d_model
    if concrete:
        params = M.init_gpt_block(jax.random.PRNGKey(0))
        kx, kt = _data_keys(seed)
        x = jax.random.normal(kx, (b, s, d), jnp.float32)
        target = jax.random.normal(kt, (b, s, d), jnp.float32)
        return params, x, target
    params = jax.eval_shape(M.init_gpt_block, jax.random.PRNGKey(0))
    xs = jax.ShapeDtypeStruct((b, s, d), jnp.float32)
    return params, xs, xs


def lm_args_fn(init_params, vocab: int, opt):
    """Arguments (params, opt_state, tokens, targets) of a language-model step: int32 tokens
    and targets of shape [B, S] in [0, vocab)."""

    def init(key):
        params = init_params(key)
        return params, opt.init(params)

    def make(dims, concrete, seed=0):
        b, s = dims["B"], dims["S"]
        if concrete:
            params, opt_state = init(jax.random.PRNGKey(0))
            kt, kg = _data_keys(seed)
            tokens = jax.random.randint(kt, (b, s), 0, vocab, jnp.int32)
            targets = jax.random.randint(kg, (b, s), 0, vocab, jnp.int32)
            return params, opt_state, tokens, targets
        params, opt_state = jax.eval_shape(init, jax.random.PRNGKey(0))
        tok = jax.ShapeDtypeStruct((b, s), jnp.int32)
        return params, opt_state, tok, tok

    return make


def gpt_args_fn(cfg: M.GPTConfig, opt=None):
    return lm_args_fn(lambda key: M.init_gpt(key, cfg), cfg.vocab, opt or M.make_adamw())


def gpt_dropout_args_fn(cfg: M.GPTConfig):
    base = gpt_args_fn(cfg)

    def make(dims, concrete, seed=0):
        if concrete:
            return (*base(dims, True, seed), jax.random.PRNGKey(7 + seed))
        return (*base(dims, False), jax.ShapeDtypeStruct((2,), jnp.uint32))

    return make


# A small GPT for the bf16 loss-scaled step (fast in debug-build tests).
_BF16_SCALED = M.GPTConfig(n_layer=2, d_model=32, n_head=2, vocab=128, n_pos=128)
# ref0's scale keeps every gradient finite (the update branch); ref1's (inf) makes them all
# non-finite, so the update is skipped (the branch that forwards the old moments).
_BF16_SCALES = (2.0 ** 12, float("inf"))


def gpt_bf16_scaled_args_fn(cfg: M.GPTConfig, compute_dtype=jnp.bfloat16):
    base = gpt_args_fn(cfg, M.make_gpt_bf16_scaled_step(cfg, compute_dtype)[1])

    def make(dims, concrete, seed=0):
        params, opt_state, tokens, targets = base(dims, concrete, seed)
        scale = (jnp.asarray(_BF16_SCALES[seed % len(_BF16_SCALES)], jnp.float32) if concrete
                 else jax.ShapeDtypeStruct((), jnp.float32))
        return params, opt_state, scale, tokens, targets

    return make


def _gpt_config_dict(cfg: M.GPTConfig):
    return {
        "n_layer": cfg.n_layer, "d_model": cfg.d_model, "n_head": cfg.n_head,
        "vocab": cfg.vocab, "n_pos": cfg.n_pos, "d_ff": cfg.d_ff, "remat": cfg.remat,
        "scan": cfg.scan, **({"dropout": cfg.dropout, "clip_norm": cfg.clip_norm}
                             if cfg.dropout else {}),
        **({"offload": {"names": list(M.OFFLOAD_NAMES), "saved": [],
                        "offload_src": "device", "offload_dst": "pinned_host"}}
           if cfg.offload else {}),
        "tied_embedding": True, "layer_norm": "pre", "activation": "gelu_tanh",
        "optimizer": "optax.adamw(lr=1e-3, b1=0.9, b2=0.95, eps=1e-8, weight_decay=0.1)",
    }


def _gpt_fixture(name, cfg, description, refs=(), refs_from=None, platform=PLATFORM):
    return Fixture(
        name=name, description=description, step=M.make_gpt_step(cfg), symbols="B, S",
        constraints=(f"S <= {cfg.n_pos}",), make_args=gpt_args_fn(cfg), refs=list(refs),
        config=_gpt_config_dict(cfg), refs_from=refs_from, platform=platform)


_TINY = M.GPT_TINY
_GPT_REFS = [{"B": 2, "S": 16}, {"B": 3, "S": 7}]
_TINY_DROPOUT = M.GPTConfig(**{**_TINY.__dict__, "dropout": 0.1, "clip_norm": 4.5})
_MLP_REFS = [{"B": 8}, {"B": 3}]

FIXTURES: list[Fixture] = [
    Fixture(
        name="mlp_sgd",
        description="MLP 64-256-256-10 (relu), softmax cross-entropy with int labels, plain SGD "
                    "(lr=0.05). x: f32[B,64], y: i32[B]. Returns (loss, new_params).",
        step=M.mlp_sgd_step, symbols="B", constraints=(), make_args=mlp_args, refs=_MLP_REFS,
        config={"sizes": list(M.MLP_SIZES), "lr": M.MLP_LR, "compute_dtype": "float32"}),
    _gpt_fixture(
        "gpt2_tiny_adamw", _TINY,
        "2-layer GPT (d=64, 4 heads, vocab 256, 512 positions, pre-LN, GELU-tanh MLP 4x, causal "
        "mask by iota compare, tied embedding), wpe[:S] slice, optax.adamw. Returns (loss, "
        "new_params, new_opt_state).", refs=_GPT_REFS),
    _gpt_fixture(
        "gpt2_tiny_remat", M.GPTConfig(**{**_TINY.__dict__, "remat": True}),
        "gpt2_tiny_adamw with every block wrapped in jax.checkpoint (default policy: save "
        "nothing inside the block). Its flattened inputs/outputs are those of gpt2_tiny_adamw, "
        "so it shares that fixture's reference files.", refs=_GPT_REFS,
        refs_from="gpt2_tiny_adamw"),
    _gpt_fixture(
        "gpt2_tiny_offload", M.GPTConfig(**{**_TINY.__dict__, "offload": True}),
        "gpt2_tiny_adamw with every block in jax.checkpoint under the host-offload policy "
        "save_and_offload_only_these_names(names_which_can_be_saved=[], "
        "names_which_can_be_offloaded=['resid_mid', 'mlp_pre'], offload_src='device', "
        "offload_dst='pinned_host'): the residual stream between attention and MLP and the MLP "
        "pre-activation (checkpoint_name) go to pinned host memory, everything else is "
        "recomputed. Lowered for cuda (stablehlo.custom_call @annotate_device_placement with "
        "_xla_buffer_placement pinned_host / device; the CPU lowering drops them). Its "
        "flattened inputs/outputs are those of gpt2_tiny_adamw, whose reference files it "
        "shares (its jitted step on CPU matches them).", refs=_GPT_REFS,
        refs_from="gpt2_tiny_adamw", platform="cuda"),
    _gpt_fixture(
        "gpt2_tiny_scan", M.GPTConfig(**{**_TINY.__dict__, "scan": True}),
        "gpt2_tiny_adamw with the block params stacked on a leading layer axis and the blocks "
        "run by lax.scan (stablehlo.while in forward and backward).", refs=_GPT_REFS),
    _gpt_fixture(
        "gpt2_tiny_scan_offload",
        M.GPTConfig(**{**_TINY.__dict__, "offload": True, "scan": True}),
        "gpt2_tiny_scan (blocks run by lax.scan) with each block under gpt2_tiny_offload's "
        "host-offload policy: the annotate_device_placement custom calls sit in the scan's "
        "stablehlo.while bodies (forward and backward). Lowered for cuda. Its flattened "
        "inputs/outputs are those of gpt2_tiny_scan, whose reference files it shares.",
        refs=_GPT_REFS, refs_from="gpt2_tiny_scan", platform="cuda"),
    Fixture(
        name="gpt2_tiny_dropout",
        description="gpt2_tiny_adamw with dropout 0.1 (jax.random.bernoulli on the attention "
                    "probabilities and both residual branches; threefry2x32 as a stablehlo.while, "
                    "ui32/ui64 bit ops, bitcast_convert) from a raw uint32[2] key input, and a "
                    "global-norm gradient clip at 4.5 through lax.cond (stablehlo.case; ref0's "
                    "gradient norm, 3.88, takes the pass-through branch, ref1's, 5.19, the "
                    "scaling one). Returns "
                    "(loss, new_params, new_opt_state).",
        step=M.make_gpt_dropout_step(_TINY_DROPOUT), symbols="B, S",
        constraints=(f"S <= {_TINY.n_pos}",), make_args=gpt_dropout_args_fn(_TINY_DROPOUT),
        refs=_GPT_REFS, config=_gpt_config_dict(_TINY_DROPOUT)),
    _gpt_fixture(
        "gpt2_small", M.GPT_SMALL,
        "GPT-2 small shape: 12 layers, d=768, 12 heads, vocab 50257, 1024 positions, tied "
        "embedding, optax.adamw. Spec-only export (params never materialized)."),
    _gpt_fixture(
        "gpt2_24l", M.GPT_24L,
        "GPT-2 medium shape: 24 layers, d=1024, 16 heads, vocab 50257, 1024 positions, tied "
        "embedding, optax.adamw. Spec-only export (params never materialized)."),
    Fixture(
        name="gpt_bf16_scaled",
        description="2-layer GPT (d=32, 2 heads, vocab 128, 128 positions, pre-LN, GELU-tanh, "
                    "tied embedding) computing in bf16 from f32 master weights, with dynamic "
                    "loss scaling: loss * loss_scale (f32[] input), gradients / loss_scale, "
                    "optax.apply_if_finite(optax.adamw, max_consecutive_errors=5), whose "
                    "lax.cond (stablehlo.case) skips the update on a non-finite gradient (the "
                    "skip branch returns zero updates and the old moments, forwarded), and the "
                    "scale halved after a skipped step. ref0 (scale 4096) takes the update "
                    "branch, ref1 (scale inf) the skip branch. Returns (loss, new_params, "
                    "new_opt_state, new_scale).",
        step=M.make_gpt_bf16_scaled_step(_BF16_SCALED)[0], symbols="B, S",
        constraints=(f"S <= {_BF16_SCALED.n_pos}",),
        make_args=gpt_bf16_scaled_args_fn(_BF16_SCALED), refs=[{"B": 2, "S": 8}, {"B": 3, "S": 5}],
        out_names=("loss", "new_params", "new_opt_state", "new_scale"),
        config={**_gpt_config_dict(_BF16_SCALED), "compute_dtype": "bfloat16",
                "loss_scaling": "dynamic: optax.apply_if_finite(max_consecutive_errors=5), "
                                "scale halved on a skipped step",
                "loss_scales": [str(x) for x in _BF16_SCALES]}),
    Fixture(
        name="gpt_f16_scaled",
        description="gpt_bf16_scaled computing in f16 instead of bf16 (the classic mixed-precision "
                    "recipe, where loss scaling keeps small gradients above f16's smallest "
                    "normal): f32 master weights converted to f16 inside the loss, logits back "
                    "to f32, loss * loss_scale, gradients / loss_scale, "
                    "optax.apply_if_finite(optax.adamw, max_consecutive_errors=5) (a "
                    "stablehlo.case), the scale halved after a skipped step. ref0 (scale 4096) "
                    "takes the update branch, ref1 (scale inf) the skip branch. Returns (loss, "
                    "new_params, new_opt_state, new_scale).",
        step=M.make_gpt_bf16_scaled_step(_BF16_SCALED, jnp.float16)[0], symbols="B, S",
        constraints=(f"S <= {_BF16_SCALED.n_pos}",),
        make_args=gpt_bf16_scaled_args_fn(_BF16_SCALED, jnp.float16),
        refs=[{"B": 2, "S": 8}, {"B": 3, "S": 5}],
        out_names=("loss", "new_params", "new_opt_state", "new_scale"),
        config={**_gpt_config_dict(_BF16_SCALED), "compute_dtype": "float16",
                "loss_scaling": "dynamic: optax.apply_if_finite(max_consecutive_errors=5), "
                                "scale halved on a skipped step",
                "loss_scales": [str(x) for x in _BF16_SCALES]}),
    Fixture(
        name="cnn_sgd",
        description="CNN: conv3x3(1->8, SAME)+relu+maxpool2x2 (reduce_window), conv3x3(8->16)"
                    "+relu+maxpool2x2, dense 784->10, softmax cross-entropy, SGD (lr=0.05). "
                    "x: f32[B,1,28,28] (NCHW), y: i32[B]. Returns (loss, new_params).",
        step=M.cnn_sgd_step, symbols="B", constraints=(), make_args=cnn_args, refs=_MLP_REFS,
        config={"layout": "NCHW/OIHW", "lr": M.CNN_LR}),
    Fixture(
        name="cnn_poly_sgd",
        description="CNN on NHWC images whose height and width are any multiple of 8: x: "
                    "f32[B, 8*h, 8*w, 3] (JAX emits divmod shape assertions for the "
                    "divisibility), conv3x3(3->16, SAME)+relu+maxpool2x2, conv3x3(16->32)+relu+"
                    "maxpool2x2, global average pool, dense 32->10, cross-entropy written with "
                    "jnp.take_along_axis, SGD (lr=0.05). y: i32[B]. Returns (loss, new_params).",
        step=M.cnn_poly_sgd_step, symbols="B, h, w", constraints=(), make_args=cnn_poly_args,
        refs=[{"B": 4, "h": 2, "w": 3}, {"B": 2, "h": 4, "w": 1}],
        config={"layout": "NHWC/HWIO", "lr": M.CNN_POLY_LR,
                "image": "(B, 8*h, 8*w, 3)"}),
    Fixture(
        name="resnet_bn",
        description="ResNet-style CNN on NHWC 16x16x3 images: conv3x3 stem, a residual block "
                    "(16 ch) and a downsampling block (stride-2 conv, 1x1 stride-2 projection "
                    "shortcut, 32 ch), batch norm in training mode after every conv (batch "
                    "statistics over N,H,W; running mean/var updated with momentum 0.9 and "
                    "returned), global average pool, dense 32->10, cross-entropy, "
                    "optax.sgd(0.05, momentum=0.9). Returns (loss, new_params, new_state) with "
                    "new_state = {batch_stats, opt}.",
        step=M.make_resnet_bn_step()[0], symbols="B", constraints=(),
        make_args=resnet_bn_args_fn(), refs=_MLP_REFS,
        config={"layout": "NHWC/HWIO", "image": "(B, 16, 16, 3)", "batch_norm": "training",
                "optimizer": "optax.sgd(0.05, momentum=0.9)"}),
    Fixture(
        name="unet_gn",
        description="Small UNet denoiser on NHWC 32x32x3 images: conv3x3 blocks with group norm "
                    "(4 groups) + SiLU at 16 ch, two stride-2 conv downsamples to 32 ch (16x16, "
                    "8x8), nearest-neighbour 2x upsample (broadcast + reshape) and a stride-2 "
                    "conv_transpose back up, skip concatenations at 16x16 and 32x32, 1x1 head to "
                    "3 ch, MSE to the clean image, optax.sgd(0.05, momentum=0.9). x: noisy "
                    "f32[B,32,32,3], target: f32[B,32,32,3]. Returns (loss, new_params, "
                    "new_opt_state).",
        step=M.make_unet_gn_step()[0], symbols="B", constraints=(),
        make_args=image_opt_args_fn(M.init_unet_gn, M.make_unet_gn_step()[1], "target"),
        refs=[{"B": 4}, {"B": 2}],
        config={"layout": "NHWC/HWIO", "image": "(B, 32, 32, 3)", "channels": list(M.UNET_GN_CH),
                "group_norm_groups": M.UNET_GN_GROUPS,
                "optimizer": "optax.sgd(0.05, momentum=0.9)"}),
    Fixture(
        name="vae_convt",
        description="Convolutional VAE on NHWC 32x32x3 images: three stride-2 conv3x3 + SiLU "
                    "(16, 32, 32 ch, down to 4x4), dense to mean and log-variance of an 8-d "
                    "latent, reparameterization z = mu + exp(logvar/2) * eps from a noise input, "
                    "dense back to 4x4x32, three stride-2 conv_transpose 3x3 (32, 16, 3 ch) to "
                    "32x32, negative ELBO (0.5 * squared error summed per image + KL to N(0, I), "
                    "batch mean), optax.adam(1e-3). x: f32[B,32,32,3], eps: f32[B,8]. Returns "
                    "(loss, new_params, new_opt_state).",
        step=M.make_vae_convt_step()[0], symbols="B", constraints=(),
        make_args=image_opt_args_fn(M.init_vae_convt, M.make_vae_convt_step()[1], "eps"),
        refs=[{"B": 4}, {"B": 2}],
        config={"layout": "NHWC/HWIO", "image": "(B, 32, 32, 3)", "channels": list(M.VAE_CH),
                "latent": M.VAE_LATENT, "optimizer": "optax.adam(1e-3)"}),
    Fixture(
        name="mlp_bf16",
        description="mlp_sgd computing in bf16 with f32 master weights (params and x converted "
                    "to bf16, logits converted back to f32 for the loss); grads and SGD update "
                    "in f32. Returns (loss, new_params).",
        step=M.mlp_bf16_step, symbols="B", constraints=(), make_args=mlp_args, refs=_MLP_REFS,
        config={"sizes": list(M.MLP_SIZES), "lr": M.MLP_LR, "compute_dtype": "bfloat16"}),
    Fixture(
        name="gpt_block_sgd",
        description="One pre-LayerNorm GPT block (d=32, 2 heads, causal mask by iota compare, "
                    "GELU-tanh MLP 4x), no embedding: mean squared error of block(x) vs target, "
                    "SGD (lr=0.05). x, target: f32[B,S,32]. Returns (loss, new_params).",
        step=M.gpt_block_sgd_step, symbols="B, S", constraints=(), make_args=gpt_block_args,
        config={"d_model": M.GPT_BLOCK.d_model, "n_head": M.GPT_BLOCK.n_head,
                "d_ff": M.GPT_BLOCK.d_ff, "layer_norm": "pre", "activation": "gelu_tanh",
                "loss": "mse", "lr": M.GPT_BLOCK_LR}),
    Fixture(
        name="shifted_lm_take",
        description="Token LM step whose inputs' dimensions are expressions of the symbols: "
                    "tokens: i32[B, S+1] sliced into inputs [:, :-1] and targets [:, 1:] (JAX "
                    "computes S as tokens.shape[1] - 1), weights: f32[B*S] per-token loss "
                    "weights (a shape assertion ties its dimension to B*S). Embedding (vocab 32, "
                    "d=16) read with jnp.take (mode='fill': in-bounds check, NaN fill), tanh MLP "
                    "16-32-32, weighted mean cross-entropy, SGD (lr=0.1). Returns (loss, "
                    "new_params).",
        step=M.shifted_lm_sgd_step, symbols="B, S", constraints=(), make_args=shifted_lm_args,
        refs=[{"B": 2, "S": 5}, {"B": 3, "S": 4}],
        config={"vocab": M.SHIFTED_LM_VOCAB, "d_model": M.SHIFTED_LM_D, "lr": M.SHIFTED_LM_LR,
                "tokens": "(B, S+1)", "weights": "(B*S,)", "embedding": "jnp.take"}),
    Fixture(
        name="ckpt_cumsum_key",
        description="jax.checkpoint(policy=dots_saveable) around a dense-tanh-dense block "
                    "(stablehlo.reduce_precision), jnp.cumsum over the symbolic S "
                    "(custom_call @stablehlo.dynamic_reduce_window), inverted dropout (keep "
                    "3/4) from a typed jax.random.key input that is split and returned (Shardy "
                    "sdy.mesh / sdy.sharding_constraint); loss = mean(h^2), SGD (lr=0.1). "
                    "x: f32[B, S, 8]. Returns (loss, new_params, new_key).",
        step=M.ckpt_cumsum_key_step, symbols="B, S", constraints=(),
        make_args=ckpt_cumsum_args, refs=[{"B": 2, "S": 5}, {"B": 3, "S": 3}],
        out_names=("loss", "new_params", "new_key"),
        config={"d_model": M.CKPT_CUMSUM_D, "lr": M.CKPT_CUMSUM_LR,
                "keep": M.CKPT_CUMSUM_KEEP, "policy": "dots_saveable", "key": "typed"}),
]

def attn_kbias_args_fn(opt):
    def init(key):
        params = M.init_attn_kbias(key)
        return params, opt.init(params)

    def make(dims, concrete, seed=0):
        b, s = dims["B"], dims["S"]
        if concrete:
            params, opt_state = init(jax.random.PRNGKey(0))
            kt, kg = _data_keys(seed)
            tokens = jax.random.randint(kt, (b, s), 0, M.ATTN_KBIAS_VOCAB, jnp.int32)
            targets = jax.random.randint(kg, (b, s), 0, M.ATTN_KBIAS_VOCAB, jnp.int32)
            return params, opt_state, tokens, targets
        params, opt_state = jax.eval_shape(init, jax.random.PRNGKey(0))
        tok = jax.ShapeDtypeStruct((b, s), jnp.int32)
        return params, opt_state, tok, tok

    return make


def _attn_kbias_fixture(optimizer: str, spelled: str) -> Fixture:
    step, opt = M.make_attn_kbias_step(optimizer)
    return Fixture(
        name=f"attn_kbias_{optimizer}",
        description=f"One causal self-attention layer (vocab {M.ATTN_KBIAS_VOCAB}, d="
                    f"{M.ATTN_KBIAS_D}, {M.ATTN_KBIAS_HEADS} heads) with separate q/k/v/o "
                    "projections and biases, a residual and a linear head, mean cross-entropy, "
                    f"{spelled}, from the optimizer's initial state. The key bias `bk` has a "
                    "zero gradient in exact arithmetic (softmax ignores a constant added to a "
                    "row's logits): its computed gradient is round-off, which the optimizer "
                    "turns into updates no two implementations share. tokens, targets: "
                    "i32[B, S]. Returns (loss, new_params, new_opt_state).",
        step=step, symbols="B, S", constraints=(), make_args=attn_kbias_args_fn(opt),
        refs=[{"B": 2, "S": 8}, {"B": 3, "S": 5}],
        config={"vocab": M.ATTN_KBIAS_VOCAB, "d_model": M.ATTN_KBIAS_D,
                "n_head": M.ATTN_KBIAS_HEADS, "optimizer": spelled,
                "zero_gradient_params": ["bk"]},
        roundoff_outputs=("['bk']",))


FIXTURES += [
    _attn_kbias_fixture("adam", "optax.adam(1e-3)"),
    _attn_kbias_fixture("lion", "optax.lion(1e-4)"),
    _attn_kbias_fixture("momentum", "optax.sgd(0.05, momentum=0.9)"),
]

def mamba_args_fn(cfg: M.MambaConfig):
    """Arguments (params, opt_state, tokens, targets) of the Mamba-style LM step."""
    return lm_args_fn(lambda key: M.init_mamba(key, cfg), cfg.vocab, M.make_mamba_step(cfg)[1])


_MAMBA = M.MAMBA_SMALL
_MAMBA_UNROLLED = dataclasses.replace(_MAMBA, unroll=True)
FIXTURES += [
    Fixture(
        name="mamba_ssm",
        description="Mamba-style selective state-space LM (2 layers, d_model 32, d_inner 64, "
                    "d_state 8, causal depthwise conv1d of width 4, dt rank 4, vocab 128, tied "
                    "embedding, RMSNorm): the S6 recurrence h_t = exp(dt_t A) h_{t-1} + dt_t "
                    "B_t u_t, y_t = C_t h_t + D u_t run by lax.scan over the symbolic sequence "
                    "length S (stablehlo.while with a symbolic trip count in forward and "
                    "backward), the discretized A and B*u materialized as [B,S,64,8]; "
                    "cross-entropy, optax.adamw. Returns (loss, new_params, new_opt_state).",
        step=M.make_mamba_step(_MAMBA)[0], symbols="B, S", constraints=(),
        make_args=mamba_args_fn(_MAMBA), refs=[{"B": 2, "S": 16}, {"B": 3, "S": 7}],
        config={"n_layer": _MAMBA.n_layer, "d_model": _MAMBA.d_model,
                "d_inner": _MAMBA.d_inner, "d_state": _MAMBA.d_state,
                "d_conv": _MAMBA.d_conv, "dt_rank": _MAMBA.dt_rank, "vocab": _MAMBA.vocab,
                "scan": "lax.scan over S", "norm": "rms",
                "optimizer": "optax.adamw(lr=1e-3, b1=0.9, b2=0.95, eps=1e-8, "
                             "weight_decay=0.1)"}),
    # The same step with both scans unrolled (lax.scan(unroll=True)): the reference for the
    # peak of the loop over the symbolic S; exported at concrete shapes only (`--static`).
    Fixture(
        name="mamba_ssm_unrolled",
        description="mamba_ssm with lax.scan(unroll=True): every step of the recurrence "
                    "unrolled at a concrete S (no while loops).",
        step=M.make_mamba_step(_MAMBA_UNROLLED)[0], symbols="B, S", constraints=(),
        make_args=mamba_args_fn(_MAMBA_UNROLLED), static_only=True,
        config={"n_layer": _MAMBA.n_layer, "scan": "lax.scan(unroll=True)"}),
]

FIXTURES_BY_NAME = {f.name: f for f in FIXTURES}

# ----------------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------------

_OP_LINE = re.compile(r'^\s*(?:%[^=]*= )?"([a-z_][a-z_0-9]*\.[a-z_0-9.]+)"\(', re.M)


def generic_text(exp) -> tuple[str, Counter, int]:
    """Generic-form MLIR text (with debug locations), op-name counts from an IR walk, and the
    number of arguments of @main."""
    ctx = jm.make_ir_context()
    with ctx:
        m = ir.Module.parse(exp.mlir_module())
        text = m.operation.get_asm(print_generic_op_form=True, enable_debug_info=True)
        counts: Counter = Counter()

        def visit(op):
            counts[op.name] += 1
            return ir.WalkResult.ADVANCE

        m.operation.walk(visit)
        main_args = None
        for op in m.body.operations:
            if op.operation.name == "func.func" and \
                    ir.StringAttr(op.attributes["sym_name"]).value == "main":
                main_args = len(op.regions[0].blocks[0].arguments)
    return text, counts, main_args


def pretty_text(generic: str) -> str:
    """The pretty form of a module given in generic form, exactly as
    `jax.export.Exported.mlir_module()` prints the same module: JAX's MLIR context (StableHLO,
    Shardy registered), `mlir.module_to_string` (pretty form, debug locations)."""
    with jm.make_ir_context():
        return jm.module_to_string(ir.Module.parse(generic))


def _np(a):
    """A leaf as a numpy array; a typed PRNG key (`jax.random.key`) as its key data
    (`uint32[..., 2]`, what the exported module takes and returns)."""
    if jax.dtypes.issubdtype(getattr(a, "dtype", None), jax.dtypes.prng_key):
        a = jax.random.key_data(a)
    return np.asarray(a)


def _dtype_name(d) -> str:
    return str(d) if jax.dtypes.issubdtype(d, jax.dtypes.prng_key) else str(np.dtype(d))


def dim_json(d):
    return d if isinstance(d, int) else str(d)


def keystr(path) -> str:
    return jax.tree_util.keystr(path)


def describe_leaves(tree, top_names) -> list[dict]:
    """Flatten `tree` (a tuple whose i-th element is named top_names[i]) into per-leaf records,
    in jax's flattened order."""
    out = []
    for i, sub in enumerate(tree):
        for path, leaf in jax.tree_util.tree_flatten_with_path(sub)[0]:
            out.append({"path": top_names[i] + keystr(path),
                        "shape": [dim_json(d) for d in leaf.shape],
                        "dtype": _dtype_name(leaf.dtype)})
    return out


def write_npz(path: Path, arrays: dict):
    """np.savez_compressed equivalent with fixed zip timestamps (deterministic bytes)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, arr in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(arr), allow_pickle=False)  # keeps 0-d
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, buf.getvalue())


def check_close(name, a, b, rtol=1e-4, atol=1e-5):
    a, b = _np(a), _np(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        raise AssertionError(f"{name}: {a.shape}/{a.dtype} vs {b.shape}/{b.dtype}")
    np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=atol,
                               err_msg=name)
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)), initial=0.0))


# ----------------------------------------------------------------------------------------------
# Export
# ----------------------------------------------------------------------------------------------


def export_fixture(fx: Fixture, out_dir: Path, with_refs=True, static=None) -> dict:
    """Export one fixture; write <name>.mlir, <name>.json and its reference npz files.

    `static`: symbol -> int, to export at these concrete shapes instead of symbolic ones, as
    <name>_<S1><v1>_<S2><v2>.mlir and .json, without references."""
    t0 = time.time()
    names = [s.strip() for s in fx.symbols.split(",")]
    if static is not None:
        if set(static) != set(names):
            raise SystemExit(f"{fx.name}: --static must bind exactly {', '.join(names)}")
        dims = {n: static[n] for n in names}
        fx = dataclasses.replace(
            fx, name=fx.name + "".join(f"_{n}{v}" for n, v in dims.items()), symbols="",
            refs=[], refs_from=None)
        names = []
    else:
        if fx.static_only:
            raise SystemExit(f"{fx.name}: exported at concrete shapes only (--static)")
        sym = jax.export.symbolic_shape(fx.symbols, constraints=fx.constraints)
        dims = dict(zip(names, sym))
    specs = fx.make_args(dims, concrete=False)

    exp = jax.export.export(jax.jit(fx.step), platforms=[fx.platform])(*specs)
    text, op_counts, main_args = generic_text(exp)

    # The exported calling convention must be jax's flattened argument order, every leaf kept.
    assert exp.in_tree == jax.tree_util.tree_structure((tuple(specs), {})), exp.in_tree
    assert len(exp.in_avals) == len(jax.tree_util.tree_leaves(specs))
    assert tuple(exp.module_kept_var_idx) == tuple(range(len(exp.in_avals))), \
        f"{fx.name}: unused inputs were dropped: {exp.module_kept_var_idx}"
    assert main_args == len(exp.in_avals), (main_args, len(exp.in_avals))
    assert not exp.ordered_effects and not exp.unordered_effects

    arg_names = list(inspect.signature(fx.step).parameters)
    inputs = describe_leaves(specs, arg_names)
    out_shape = jax.eval_shape(fx.step, *specs)
    out_names = list(fx.out_names or ("loss", "new_params", "new_opt_state"))[:len(out_shape)]
    outputs = describe_leaves(out_shape, out_names)
    assert [o["shape"] for o in outputs] == \
        [[dim_json(d) for d in a.shape] for a in exp.out_avals]
    for rec, aval in zip(inputs, exp.in_avals):
        assert rec["shape"] == [dim_json(d) for d in aval.shape]

    # The pretty form `ebb import` also reads is the one mlir_module() prints.
    assert pretty_text(text) == exp.mlir_module(), f"{fx.name}: pretty form differs"
    regex_ops = len(_OP_LINE.findall(text))
    total_ops = sum(op_counts.values())
    if regex_ops != total_ops:
        print(f"  note: regex op count {regex_ops} != walk count {total_ops}")

    path = out_dir / f"{fx.name}.mlir"
    path.write_text(text)
    size = path.stat().st_size

    refs_meta = []
    if with_refs:
        jitted = jax.jit(fx.step)
        for k, bindings in enumerate(fx.refs):
            args = fx.make_args(bindings, concrete=True, seed=k)
            in_leaves = jax.tree_util.tree_leaves(args)
            want = jax.tree_util.tree_leaves(jitted(*args))
            # A module for another platform cannot run here: only the jitted step on CPU.
            got = (jax.tree_util.tree_leaves(exp.call(*args)) if fx.platform == PLATFORM
                   else want)
            checked = ("exp.call vs jit" if fx.platform == PLATFORM
                       else f"(lowered for {fx.platform}: jit on CPU only)")
            assert len(want) == len(got) == len(outputs)
            noisy = [i for i, o in enumerate(outputs)
                     if any(f in o["path"] for f in fx.roundoff_outputs)]
            worst = max(check_close(f"{fx.name}.ref{k} out_{i}", g, w)
                        for i, (g, w) in enumerate(zip(got, want)) if i not in noisy)
            roundoff = {outputs[i]["path"]: float(np.max(np.abs(
                _np(got[i]).astype(np.float64) - _np(want[i]).astype(np.float64)),
                initial=0.0)) for i in noisy}
            if fx.refs_from:
                other = FIXTURES_BY_NAME[fx.refs_from]
                assert other.refs[k] == bindings
                other_args = other.make_args(bindings, concrete=True, seed=k)
                assert jax.tree_util.tree_structure(other_args) == \
                    jax.tree_util.tree_structure(args)
                theirs = jax.tree_util.tree_leaves(jax.jit(other.step)(*other_args))
                d = max(check_close(f"{fx.name}.ref{k} vs {other.name} out_{i}", w, t)
                        for i, (w, t) in enumerate(zip(want, theirs)))
                ref_file = f"{other.name}.ref{k}.npz"
                print(f"  ref{k} {bindings}: {checked} max|diff| = {worst:.3g}; shares "
                      f"{ref_file} (max|diff| vs {other.name} = {d:.3g})")
            else:
                arrays = {f"in_{i}": _np(a) for i, a in enumerate(in_leaves)}
                arrays.update({f"out_{i}": _np(a) for i, a in enumerate(want)})
                ref_file = f"{fx.name}.ref{k}.npz"
                write_npz(out_dir / ref_file, arrays)
                nbytes = (out_dir / ref_file).stat().st_size
                print(f"  ref{k} {bindings}: {checked} max|diff| = {worst:.3g}; "
                      f"{ref_file} {nbytes} bytes")
            refs_meta.append({"file": ref_file, "bindings": bindings,
                              **({"roundoff_outputs_max_abs_diff": roundoff}
                                 if roundoff else {})})

    meta = {
        "name": fx.name,
        "description": fx.description,
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "optax_version": optax.__version__,
        "numpy_version": np.__version__,
        "python_version": "%d.%d" % sys.version_info[:2],
        "platforms": list(exp.platforms),
        "calling_convention_version": exp.calling_convention_version,
        "entry": "main",
        "symbols": names,
        "constraints": list(fx.constraints),
        "config": fx.config,
        "inputs": inputs,
        "outputs": outputs,
        "ops": total_ops,
        "bytes": size,
        "op_names": dict(sorted(op_counts.items())),
        "refs": refs_meta,
        "ref_format": ("npz (deflate); in_i = flattened inputs in @main argument order, out_i = "
                       "outputs of jax.jit(step) on CPU; compare with rtol~1e-4, atol~1e-5"
                       if refs_meta else None),
        **({"refs_note": f"the module is lowered for {fx.platform} and cannot be called on "
                         "the CPU: the references are the outputs of the plain jax.jit(step) "
                         "on CPU only (not checked against the exported module)"}
           if refs_meta and fx.platform != PLATFORM else {}),
    }
    (out_dir / f"{fx.name}.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"{fx.name}: {total_ops} ops, {size} bytes, {len(inputs)} inputs, "
          f"{len(outputs)} outputs ({time.time() - t0:.1f}s)")
    return meta


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--only", nargs="*", help="fixture names (default: all)")
    ap.add_argument("--no-refs", action="store_true", help="skip the numeric reference data")
    ap.add_argument("--static", metavar="B=8,S=64",
                    help="export at these concrete shapes (every symbol bound), no references")
    ap.add_argument("--pretty-of", nargs="*", type=Path, metavar="FIXTURE.mlir",
                    help="write these exported modules (generic form) in the pretty form "
                         "jax.export's mlir_module() prints, to --out, instead of exporting")
    args = ap.parse_args(argv)
    if args.pretty_of is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        for f in args.pretty_of:
            (args.out / f.name).write_text(pretty_text(f.read_text()))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    known = FIXTURES_BY_NAME
    todo = args.only or [n for n, f in known.items() if not f.static_only]
    static = None
    if args.static:
        static = {k.strip(): int(v) for k, v in
                  (kv.split("=") for kv in args.static.split(","))}
    for n in todo:
        if n not in known:
            ap.error(f"unknown fixture {n!r}; known: {', '.join(known)}")
    union: Counter = Counter()
    for n in todo:
        meta = export_fixture(known[n], args.out, with_refs=not args.no_refs, static=static)
        union.update(meta["op_names"])
    print("op names across fixtures:", json.dumps(dict(sorted(union.items()))))


if __name__ == "__main__":
    main()
