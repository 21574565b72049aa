"""Training steps exported as Ebb fixtures.

Every model is written in plain `jax.numpy` / `jax.lax` (no flax) so the exported StableHLO is
easy to relate back to this file through the debug locations. Each `*_step` function is a full
training step: forward, backward (`jax.value_and_grad`) and the optimizer update, returning
`(loss, new_params)` or `(loss, new_params, new_opt_state)`.

Initialisation is deterministic (fixed `jax.random.PRNGKey` seeds). Large models are never
initialised: `param_specs` uses `jax.eval_shape`, which only traces the init function.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import optax
from jax import lax
from jax.ad_checkpoint import checkpoint_name

# ----------------------------------------------------------------------------------------------
# Shared pieces
# ----------------------------------------------------------------------------------------------


def cross_entropy(logits, labels):
    """Mean softmax cross-entropy with integer labels, computed in f32."""
    logits = logits.astype(jnp.float32)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


def sgd_update(params, grads, lr):
    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)


# ----------------------------------------------------------------------------------------------
# 1. MLP + SGD (f32) and 8. MLP with bf16 compute / f32 master weights
# ----------------------------------------------------------------------------------------------

MLP_SIZES = (64, 256, 256, 10)
MLP_LR = 0.05


def init_mlp(key, sizes=MLP_SIZES):
    params = []
    keys = jax.random.split(key, len(sizes) - 1)
    for k, fan_in, fan_out in zip(keys, sizes[:-1], sizes[1:]):
        w = jax.random.normal(k, (fan_in, fan_out), jnp.float32) * math.sqrt(2.0 / fan_in)
        params.append({"w": w, "b": jnp.zeros((fan_out,), jnp.float32)})
    return params


def mlp_forward(params, x, compute_dtype=jnp.float32):
    h = x.astype(compute_dtype)
    for i, layer in enumerate(params):
        h = h @ layer["w"].astype(compute_dtype) + layer["b"].astype(compute_dtype)
        if i + 1 < len(params):
            h = jax.nn.relu(h)
    return h


def mlp_sgd_step(params, x, y):
    def loss_fn(p):
        return cross_entropy(mlp_forward(p, x), y)

    loss, grads = jax.value_and_grad(loss_fn)(params)
    return loss, sgd_update(params, grads, MLP_LR)


def mlp_bf16_step(params, x, y):
    """bf16 compute, f32 master weights: the grads flow back through the converts to f32."""

    def loss_fn(p):
        return cross_entropy(mlp_forward(p, x, jnp.bfloat16), y)

    loss, grads = jax.value_and_grad(loss_fn)(params)
    return loss, sgd_update(params, grads, MLP_LR)


# ----------------------------------------------------------------------------------------------
# 7. Small CNN + SGD (convolution, reduce_window max-pool, dense)
# ----------------------------------------------------------------------------------------------

CNN_LR = 0.05
_CONV_DN = ("NCHW", "OIHW", "NCHW")


def he(k, shape, fan_in):
    """He-normal initialization: N(0, 2 / fan_in)."""
    return jax.random.normal(k, shape, jnp.float32) * math.sqrt(2.0 / fan_in)


def init_cnn(key):
    k1, k2, k3 = jax.random.split(key, 3)
    return {
        "conv1": {"w": he(k1, (8, 1, 3, 3), 9), "b": jnp.zeros((8,), jnp.float32)},
        "conv2": {"w": he(k2, (16, 8, 3, 3), 72), "b": jnp.zeros((16,), jnp.float32)},
        "dense": {"w": he(k3, (16 * 7 * 7, 10), 16 * 7 * 7), "b": jnp.zeros((10,), jnp.float32)},
    }


def _conv(x, p):
    y = lax.conv_general_dilated(x, p["w"], window_strides=(1, 1), padding="SAME",
                                 dimension_numbers=_CONV_DN)
    return y + p["b"][None, :, None, None]


def _max_pool_2x2(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")


def cnn_forward(params, x):
    h = _max_pool_2x2(jax.nn.relu(_conv(x, params["conv1"])))  # [B, 8, 14, 14]
    h = _max_pool_2x2(jax.nn.relu(_conv(h, params["conv2"])))  # [B, 16, 7, 7]
    h = h.reshape(h.shape[0], -1)  # [B, 784]
    return h @ params["dense"]["w"] + params["dense"]["b"]


def cnn_sgd_step(params, x, y):
    def loss_fn(p):
        return cross_entropy(cnn_forward(p, x), y)

    loss, grads = jax.value_and_grad(loss_fn)(params)
    return loss, sgd_update(params, grads, CNN_LR)


# ----------------------------------------------------------------------------------------------
# CNN on NHWC images of any size that is a multiple of 8 (`(B, 8*h, 8*w, 3)`), with the loss
# written with `take_along_axis` as many users write it
# ----------------------------------------------------------------------------------------------

CNN_POLY_LR = 0.05
_NHWC_DN = ("NHWC", "HWIO", "NHWC")


def init_cnn_poly(key):
    k1, k2, k3 = jax.random.split(key, 3)
    return {
        "conv1": {"w": he(k1, (3, 3, 3, 16), 27), "b": jnp.zeros((16,), jnp.float32)},
        "conv2": {"w": he(k2, (3, 3, 16, 32), 144), "b": jnp.zeros((32,), jnp.float32)},
        "dense": {"w": he(k3, (32, 10), 32), "b": jnp.zeros((10,), jnp.float32)},
    }


def _conv_nhwc(x, p):
    y = lax.conv_general_dilated(x, p["w"], window_strides=(1, 1), padding="SAME",
                                 dimension_numbers=_NHWC_DN)
    return y + p["b"]


def _max_pool_nhwc(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def cnn_poly_forward(params, x):
    h = _max_pool_nhwc(jax.nn.relu(_conv_nhwc(x, params["conv1"])))  # [B, 4h, 4w, 16]
    h = _max_pool_nhwc(jax.nn.relu(_conv_nhwc(h, params["conv2"])))  # [B, 2h, 2w, 32]
    h = h.mean(axis=(1, 2))  # global average pool: [B, 32]
    return h @ params["dense"]["w"] + params["dense"]["b"]


def cnn_poly_sgd_step(params, x, y):
    def loss_fn(p):
        logp = jax.nn.log_softmax(cnn_poly_forward(p, x))
        return -jnp.take_along_axis(logp, y[:, None], axis=1).mean()

    loss, grads = jax.value_and_grad(loss_fn)(params)
    return loss, sgd_update(params, grads, CNN_POLY_LR)


# ----------------------------------------------------------------------------------------------
# ResNet-style CNN with batch norm in training mode (batch statistics, running averages
# returned as new state), SGD with momentum
# ----------------------------------------------------------------------------------------------

RESNET_BN_MOMENTUM = 0.9
RESNET_BN_EPS = 1e-5


def _bn_params(c):
    return {"scale": jnp.ones((c,), jnp.float32), "bias": jnp.zeros((c,), jnp.float32)}


def _bn_stats(c):
    return {"mean": jnp.zeros((c,), jnp.float32), "var": jnp.ones((c,), jnp.float32)}


def init_resnet_bn(key):
    """Stem conv3x3 3->16, one residual block at 16 channels, one downsampling block to 32
    (stride-2 conv and a 1x1 stride-2 projection shortcut), global average pool, dense 32->10.
    Returns (params, batch_stats)."""
    ks = jax.random.split(key, 7)
    conv = lambda k, kh, cin, cout: he(k, (kh, kh, cin, cout), kh * kh * cin)  # noqa: E731
    params = {
        "stem": {"w": conv(ks[0], 3, 3, 16), "bn": _bn_params(16)},
        "block1": {"w1": conv(ks[1], 3, 16, 16), "bn1": _bn_params(16),
                   "w2": conv(ks[2], 3, 16, 16), "bn2": _bn_params(16)},
        "block2": {"w1": conv(ks[3], 3, 16, 32), "bn1": _bn_params(32),
                   "w2": conv(ks[4], 3, 32, 32), "bn2": _bn_params(32),
                   "proj": conv(ks[5], 1, 16, 32), "bn_proj": _bn_params(32)},
        "dense": {"w": he(ks[6], (32, 10), 32), "b": jnp.zeros((10,), jnp.float32)},
    }
    stats = {
        "stem": _bn_stats(16),
        "block1": {"bn1": _bn_stats(16), "bn2": _bn_stats(16)},
        "block2": {"bn1": _bn_stats(32), "bn2": _bn_stats(32), "bn_proj": _bn_stats(32)},
    }
    return params, stats


def batch_norm_train(x, p, s):
    """Batch norm in training mode over N, H, W (NHWC): normalizes with the batch statistics
    and returns the updated running statistics (momentum 0.9, unbiased variance as Flax)."""
    mean = x.mean(axis=(0, 1, 2))
    var = jnp.square(x - mean).mean(axis=(0, 1, 2))
    n = x.shape[0] * x.shape[1] * x.shape[2]
    y = (x - mean) * lax.rsqrt(var + RESNET_BN_EPS) * p["scale"] + p["bias"]
    m = RESNET_BN_MOMENTUM
    new = {"mean": m * s["mean"] + (1 - m) * lax.stop_gradient(mean),
           "var": m * s["var"] + (1 - m) * lax.stop_gradient(var * n / (n - 1))}
    return y, new


def _conv_s(x, w, stride=1):
    return lax.conv_general_dilated(x, w, (stride, stride), "SAME", dimension_numbers=_NHWC_DN)


def resnet_bn_forward(params, stats, x):
    new = {}
    h, new["stem"] = batch_norm_train(_conv_s(x, params["stem"]["w"]), params["stem"]["bn"],
                                      stats["stem"])
    h = jax.nn.relu(h)
    p, s, n1 = params["block1"], stats["block1"], {}
    r, n1["bn1"] = batch_norm_train(_conv_s(h, p["w1"]), p["bn1"], s["bn1"])
    r, n1["bn2"] = batch_norm_train(_conv_s(jax.nn.relu(r), p["w2"]), p["bn2"], s["bn2"])
    h = jax.nn.relu(h + r)
    new["block1"] = n1
    p, s, n2 = params["block2"], stats["block2"], {}
    r, n2["bn1"] = batch_norm_train(_conv_s(h, p["w1"], 2), p["bn1"], s["bn1"])
    r, n2["bn2"] = batch_norm_train(_conv_s(jax.nn.relu(r), p["w2"]), p["bn2"], s["bn2"])
    sc, n2["bn_proj"] = batch_norm_train(_conv_s(h, p["proj"], 2), p["bn_proj"], s["bn_proj"])
    h = jax.nn.relu(sc + r)
    new["block2"] = n2
    h = h.mean(axis=(1, 2))
    return h @ params["dense"]["w"] + params["dense"]["b"], new


def make_resnet_bn_step():
    opt = optax.sgd(learning_rate=0.05, momentum=0.9)

    def resnet_bn_step(params, state, x, y):
        """state = {"batch_stats": ..., "opt": optax state}; returns (loss, new_params,
        new_state)."""
        def loss_fn(p):
            logits, new_stats = resnet_bn_forward(p, state["batch_stats"], x)
            return cross_entropy(logits, y), new_stats

        (loss, new_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, new_opt = opt.update(grads, state["opt"], params)
        return loss, optax.apply_updates(params, updates), {"batch_stats": new_stats,
                                                             "opt": new_opt}

    return resnet_bn_step, opt


# ----------------------------------------------------------------------------------------------
# Small UNet with group norm + SiLU (a denoiser: MSE to a clean image), SGD with momentum
# ----------------------------------------------------------------------------------------------

UNET_GN_GROUPS = 4
UNET_GN_EPS = 1e-5
UNET_GN_CH = (16, 32)  # channels at 32x32 and at 16x16 / 8x8


def _gn_params(c):
    return {"scale": jnp.ones((c,), jnp.float32), "bias": jnp.zeros((c,), jnp.float32)}


def init_unet_gn(key):
    """Encoder 32x32 (3->16->16), stride-2 conv to 16x16 (16->32, 32->32), stride-2 conv to
    the 8x8 bottleneck (32->32, 32->32), nearest-neighbour upsample to 16x16 + skip concat
    (64->32), conv_transpose stride 2 to 32x32 (32->16) + skip concat (32->16), 1x1 head
    16->3. Every 3x3 conv is followed by group norm (4 groups) and SiLU."""
    c1, c2 = UNET_GN_CH
    shapes = {
        "enc1a": (3, c1), "enc1b": (c1, c1), "down1": (c1, c2), "enc2": (c2, c2),
        "down2": (c2, c2), "mid": (c2, c2), "up2": (2 * c2, c2), "up1t": (c2, c1),
        "up1": (2 * c1, c1),
    }
    ks = jax.random.split(key, len(shapes) + 1)
    params = {}
    for k, (name, (cin, cout)) in zip(ks, shapes.items()):
        params[name] = {"w": he(k, (3, 3, cin, cout), 9 * cin), "gn": _gn_params(cout)}
    params["head"] = {"w": he(ks[-1], (1, 1, c1, 3), c1), "b": jnp.zeros((3,), jnp.float32)}
    return params


def group_norm(x, p, groups=UNET_GN_GROUPS):
    """Group norm over (H, W, C/groups) per sample and group, NHWC."""
    b, h, w, c = x.shape
    g = x.reshape(b, h, w, groups, c // groups)
    mean = g.mean(axis=(1, 2, 4), keepdims=True)
    var = jnp.square(g - mean).mean(axis=(1, 2, 4), keepdims=True)
    g = (g - mean) * lax.rsqrt(var + UNET_GN_EPS)
    return g.reshape(b, h, w, c) * p["scale"] + p["bias"]


def _conv_gn_silu(x, p, stride=1):
    return jax.nn.silu(group_norm(_conv_s(x, p["w"], stride), p["gn"]))


def _upsample_nearest_2x(x):
    b, h, w, c = x.shape
    x = jnp.broadcast_to(x[:, :, None, :, None, :], (b, h, 2, w, 2, c))
    return x.reshape(b, 2 * h, 2 * w, c)


def unet_gn_forward(params, x):
    s1 = _conv_gn_silu(_conv_gn_silu(x, params["enc1a"]), params["enc1b"])  # [B,32,32,16]
    s2 = _conv_gn_silu(_conv_gn_silu(s1, params["down1"], 2), params["enc2"])  # [B,16,16,32]
    h = _conv_gn_silu(_conv_gn_silu(s2, params["down2"], 2), params["mid"])  # [B,8,8,32]
    h = jnp.concatenate([_upsample_nearest_2x(h), s2], axis=-1)  # [B,16,16,64]
    h = _conv_gn_silu(h, params["up2"])  # [B,16,16,32]
    h = lax.conv_transpose(h, params["up1t"]["w"], (2, 2), "SAME",
                           dimension_numbers=_NHWC_DN)  # [B,32,32,16]
    h = jax.nn.silu(group_norm(h, params["up1t"]["gn"]))
    h = _conv_gn_silu(jnp.concatenate([h, s1], axis=-1), params["up1"])  # [B,32,32,16]
    return _conv_s(h, params["head"]["w"]) + params["head"]["b"]  # [B,32,32,3]


def make_unet_gn_step():
    opt = optax.sgd(learning_rate=0.05, momentum=0.9)

    def unet_gn_step(params, opt_state, x, target):
        def loss_fn(p):
            return jnp.mean(jnp.square(unet_gn_forward(p, x) - target))

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, new_opt = opt.update(grads, opt_state, params)
        return loss, optax.apply_updates(params, updates), new_opt

    return unet_gn_step, opt


# ----------------------------------------------------------------------------------------------
# Convolutional VAE: strided conv encoder, reparameterization from a noise input, conv_transpose
# decoder, negative ELBO (Gaussian reconstruction + KL), Adam
# ----------------------------------------------------------------------------------------------

VAE_LATENT = 8
VAE_CH = (16, 32, 32)  # encoder channels at 16x16, 8x8, 4x4


def init_vae_convt(key):
    c1, c2, c3 = VAE_CH
    ks = jax.random.split(key, 8)
    conv = lambda k, cin, cout: he(k, (3, 3, cin, cout), 9 * cin)  # noqa: E731
    z = jnp.zeros
    return {
        "enc1": {"w": conv(ks[0], 3, c1), "b": z((c1,))},
        "enc2": {"w": conv(ks[1], c1, c2), "b": z((c2,))},
        "enc3": {"w": conv(ks[2], c2, c3), "b": z((c3,))},
        "stats": {"w": he(ks[3], (16 * c3, 2 * VAE_LATENT), 16 * c3), "b": z((2 * VAE_LATENT,))},
        "dec_in": {"w": he(ks[4], (VAE_LATENT, 16 * c3), VAE_LATENT), "b": z((16 * c3,))},
        "dec3": {"w": conv(ks[5], c3, c2), "b": z((c2,))},
        "dec2": {"w": conv(ks[6], c2, c1), "b": z((c1,))},
        "dec1": {"w": conv(ks[7], c1, 3), "b": z((3,))},
    }


def _convt(x, p, act=True):
    y = lax.conv_transpose(x, p["w"], (2, 2), "SAME", dimension_numbers=_NHWC_DN) + p["b"]
    return jax.nn.silu(y) if act else y


def vae_convt_loss(params, x, eps):
    """Negative ELBO per image: 0.5 * squared error summed over pixels (unit-variance Gaussian
    decoder) + KL(q(z|x) || N(0, I)), averaged over the batch."""
    b = x.shape[0]
    h = x
    for name in ("enc1", "enc2", "enc3"):
        h = jax.nn.silu(_conv_s(h, params[name]["w"], 2) + params[name]["b"])  # 16, 8, 4
    st = h.reshape(b, -1) @ params["stats"]["w"] + params["stats"]["b"]
    mu, logvar = st[:, :VAE_LATENT], st[:, VAE_LATENT:]
    z = mu + jnp.exp(0.5 * logvar) * eps
    h = jax.nn.silu(z @ params["dec_in"]["w"] + params["dec_in"]["b"])
    h = h.reshape(b, 4, 4, VAE_CH[2])
    h = _convt(_convt(h, params["dec3"]), params["dec2"])  # 8x8, 16x16
    recon = _convt(h, params["dec1"], act=False)  # [B, 32, 32, 3]
    rec = 0.5 * jnp.sum(jnp.square(recon - x), axis=(1, 2, 3))
    kl = -0.5 * jnp.sum(1.0 + logvar - jnp.square(mu) - jnp.exp(logvar), axis=1)
    return jnp.mean(rec + kl)


def make_vae_convt_step():
    opt = optax.adam(1e-3)

    def vae_convt_step(params, opt_state, x, eps):
        loss, grads = jax.value_and_grad(vae_convt_loss)(params, x, eps)
        updates, new_opt = opt.update(grads, opt_state, params)
        return loss, optax.apply_updates(params, updates), new_opt

    return vae_convt_step, opt


# ----------------------------------------------------------------------------------------------
# Mamba-style selective state-space LM: the S6 recurrence run by lax.scan over the (symbolic)
# sequence length (Gu & Dao, "Mamba: Linear-Time Sequence Modeling with Selective State
# Spaces", 2023, Algorithm 2), in its plain form: the discretized A and B·u of every step are
# materialized as [B, S, d_inner, d_state] and scanned time-major. AdamW.
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MambaConfig:
    n_layer: int = 2
    d_model: int = 32
    d_inner: int = 64  # expand 2
    d_state: int = 8
    d_conv: int = 4
    dt_rank: int = 4
    vocab: int = 128
    # Unroll the scans (`lax.scan(unroll=True)`): needs a static sequence length; the
    # comparison the symbolic-length loop's plan is measured against.
    unroll: bool = False


MAMBA_SMALL = MambaConfig()


def init_mamba(key, cfg: MambaConfig = MAMBA_SMALL):
    d, di, ds, r = cfg.d_model, cfg.d_inner, cfg.d_state, cfg.dt_rank
    keys = jax.random.split(key, cfg.n_layer + 1)

    def layer(k):
        ks = jax.random.split(k, 5)
        return {
            "norm": jnp.ones((d,), jnp.float32),
            "in_proj": jax.random.normal(ks[0], (d, 2 * di), jnp.float32) / math.sqrt(d),
            "conv_w": jax.random.normal(ks[1], (cfg.d_conv, 1, di), jnp.float32)
            / math.sqrt(cfg.d_conv),
            "conv_b": jnp.zeros((di,), jnp.float32),
            "x_proj": jax.random.normal(ks[2], (di, r + 2 * ds), jnp.float32) / math.sqrt(di),
            "dt_proj": jax.random.normal(ks[3], (r, di), jnp.float32) / math.sqrt(r),
            # softplus^-1(0.01): initial step sizes of 0.01
            "dt_bias": jnp.full((di,), math.log(math.expm1(0.01)), jnp.float32),
            # S4D-real initialization: A = -(1, 2, ..., d_state) per channel
            "A_log": jnp.log(jnp.tile(jnp.arange(1, ds + 1, dtype=jnp.float32), (di, 1))),
            "D": jnp.ones((di,), jnp.float32),
            "out_proj": jax.random.normal(ks[4], (di, d), jnp.float32) / math.sqrt(di),
        }

    return {
        "embed": jax.random.normal(keys[0], (cfg.vocab, d), jnp.float32) * 0.02,
        "layers": [layer(k) for k in keys[1:]],
        "norm_f": jnp.ones((d,), jnp.float32),
    }


def rms_norm(x, g, eps=1e-5):
    return x * lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps) * g


def causal_conv1d(x, w, b):
    """Depthwise causal convolution over the sequence: x [B, S, C], w [K, 1, C]."""
    k, c = w.shape[0], w.shape[2]
    y = lax.conv_general_dilated(x, w, window_strides=(1,), padding=[(k - 1, 0)],
                                 dimension_numbers=("NWC", "WIO", "NWC"),
                                 feature_group_count=c)
    return y + b


def selective_scan(u, dt, a, bm, cm, dskip, unroll=False):
    """y_t = C_t · h_t + D u_t, h_t = exp(dt_t A) h_{t-1} + dt_t B_t u_t (h_0 = 0).

    u, dt: [B, S, di]; a: [di, ds]; bm, cm: [B, S, ds]; dskip: [di]. `unroll`: unroll the
    scan (a static S only)."""
    da = jnp.exp(dt[..., None] * a)  # [B, S, di, ds]
    dbu = dt[..., None] * bm[:, :, None, :] * u[..., None]  # [B, S, di, ds]

    def step(h, xs):
        da_t, dbu_t, c_t = xs
        h = da_t * h + dbu_t
        return h, jnp.einsum("bds,bs->bd", h, c_t)

    h0 = jnp.zeros((u.shape[0], a.shape[0], a.shape[1]), u.dtype)
    time_major = lambda t: jnp.swapaxes(t, 0, 1)  # noqa: E731
    _, ys = lax.scan(step, h0, (time_major(da), time_major(dbu), time_major(cm)),
                     unroll=unroll)
    return time_major(ys) + u * dskip


def mamba_block(h, p, cfg: MambaConfig):
    ds, r = cfg.d_state, cfg.dt_rank
    xz = rms_norm(h, p["norm"]) @ p["in_proj"]
    x, z = jnp.split(xz, 2, axis=-1)
    x = jax.nn.silu(causal_conv1d(x, p["conv_w"], p["conv_b"]))
    dbc = x @ p["x_proj"]
    dt, bm, cm = dbc[..., :r], dbc[..., r:r + ds], dbc[..., r + ds:]
    dt = jax.nn.softplus(dt @ p["dt_proj"] + p["dt_bias"])
    y = selective_scan(x, dt, -jnp.exp(p["A_log"]), bm, cm, p["D"], unroll=cfg.unroll)
    return h + (y * jax.nn.silu(z)) @ p["out_proj"]


def mamba_loss(params, tokens, targets, cfg: MambaConfig = MAMBA_SMALL):
    h = params["embed"][tokens]
    for p in params["layers"]:
        h = mamba_block(h, p, cfg)
    logits = rms_norm(h, params["norm_f"]) @ params["embed"].T
    return cross_entropy(logits.reshape(-1, cfg.vocab), targets.reshape(-1))


def make_mamba_step(cfg: MambaConfig = MAMBA_SMALL):
    opt = make_adamw()

    def mamba_ssm_step(params, opt_state, tokens, targets):
        loss, grads = jax.value_and_grad(mamba_loss)(params, tokens, targets, cfg)
        updates, new_opt = opt.update(grads, opt_state, params)
        return loss, optax.apply_updates(params, updates), new_opt

    return mamba_ssm_step, opt


# ----------------------------------------------------------------------------------------------
# 2-6. GPT-2 style decoder + AdamW (plain, remat, scan; tiny / small / 24-layer)
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GPTConfig:
    n_layer: int
    d_model: int
    n_head: int
    vocab: int
    n_pos: int
    remat: bool = False  # wrap each block in jax.checkpoint
    scan: bool = False  # stack the blocks and run them with lax.scan
    dropout: float = 0.0  # rate on attention probabilities and residual branches (needs a key)
    clip_norm: float | None = None  # global-norm gradient clip through lax.cond
    # each block in jax.checkpoint with a policy that offloads the named residuals
    # (OFFLOAD_NAMES) to pinned host memory and saves nothing else
    offload: bool = False

    @property
    def d_ff(self):
        return 4 * self.d_model


GPT_TINY = GPTConfig(n_layer=2, d_model=64, n_head=4, vocab=256, n_pos=512)
GPT_SMALL = GPTConfig(n_layer=12, d_model=768, n_head=12, vocab=50257, n_pos=1024)
GPT_24L = GPTConfig(n_layer=24, d_model=1024, n_head=16, vocab=50257, n_pos=1024)


def make_adamw():
    return optax.adamw(learning_rate=1e-3, b1=0.9, b2=0.95, eps=1e-8, weight_decay=0.1)


def _init_block(key, cfg: GPTConfig):
    d, f = cfg.d_model, cfg.d_ff
    k_qkv, k_out, k_fc, k_proj = jax.random.split(key, 4)
    std = 0.02
    # GPT-2 scales the residual projections by 1/sqrt(2 * n_layer).
    res_std = std / math.sqrt(2 * cfg.n_layer)

    def ln():
        return {"g": jnp.ones((d,), jnp.float32), "b": jnp.zeros((d,), jnp.float32)}

    return {
        "ln1": ln(),
        "attn": {
            "w_qkv": jax.random.normal(k_qkv, (d, 3 * d), jnp.float32) * std,
            "b_qkv": jnp.zeros((3 * d,), jnp.float32),
            "w_out": jax.random.normal(k_out, (d, d), jnp.float32) * res_std,
            "b_out": jnp.zeros((d,), jnp.float32),
        },
        "ln2": ln(),
        "mlp": {
            "w_fc": jax.random.normal(k_fc, (d, f), jnp.float32) * std,
            "b_fc": jnp.zeros((f,), jnp.float32),
            "w_proj": jax.random.normal(k_proj, (f, d), jnp.float32) * res_std,
            "b_proj": jnp.zeros((d,), jnp.float32),
        },
    }


def init_gpt(key, cfg: GPTConfig):
    k_wte, k_wpe, k_blocks = jax.random.split(key, 3)
    blocks = [_init_block(k, cfg) for k in jax.random.split(k_blocks, cfg.n_layer)]
    if cfg.scan:
        blocks = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *blocks)
    return {
        "wte": jax.random.normal(k_wte, (cfg.vocab, cfg.d_model), jnp.float32) * 0.02,
        "wpe": jax.random.normal(k_wpe, (cfg.n_pos, cfg.d_model), jnp.float32) * 0.01,
        "blocks": blocks,
        "ln_f": {"g": jnp.ones((cfg.d_model,), jnp.float32),
                 "b": jnp.zeros((cfg.d_model,), jnp.float32)},
    }


def layer_norm(x, p, eps=1e-5):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + eps) * p["g"] + p["b"]


def causal_mask(s):
    """[S, S] bool, True where key position <= query position (iota compare)."""
    q = lax.broadcasted_iota(jnp.int32, (s, s), 0)
    k = lax.broadcasted_iota(jnp.int32, (s, s), 1)
    return q >= k


def dropout(key, x, rate):
    """Inverted dropout: keep with probability 1 - rate (jax.random.bernoulli, threefry)."""
    if key is None or rate == 0.0:
        return x
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), jnp.zeros_like(x))


def attention(x, p, mask, n_head, key=None, rate=0.0):
    b, s, d = x.shape
    dh = d // n_head
    qkv = x @ p["w_qkv"] + p["b_qkv"]  # [B, S, 3D]
    q, k, v = jnp.split(qkv, 3, axis=-1)
    q = q.reshape(b, s, n_head, dh)
    k = k.reshape(b, s, n_head, dh)
    v = v.reshape(b, s, n_head, dh)
    att = jnp.einsum("bqhd,bkhd->bhqk", q, k) * (1.0 / math.sqrt(dh))  # [B, H, S, S]
    att = jnp.where(mask, att, jnp.finfo(att.dtype).min)
    att = jax.nn.softmax(att, axis=-1)
    att = dropout(key, att, rate)
    y = jnp.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, s, d)
    return y @ p["w_out"] + p["b_out"]


def mlp_block(x, p):
    h = jax.nn.gelu(x @ p["w_fc"] + p["b_fc"], approximate=True)
    return h @ p["w_proj"] + p["b_proj"]


def block(x, p, mask, n_head, key=None, rate=0.0):
    """Pre-LayerNorm transformer block (with dropout when given a key and a rate)."""
    k_att, k_res1, k_res2 = jax.random.split(key, 3) if key is not None else (None,) * 3
    x = x + dropout(k_res1, attention(layer_norm(x, p["ln1"]), p["attn"], mask, n_head,
                                      k_att, rate), rate)
    x = x + dropout(k_res2, mlp_block(layer_norm(x, p["ln2"]), p["mlp"]), rate)
    return x


# The residuals `offload_block` names, offloaded to the host by OFFLOAD_POLICY: the residual
# stream between the attention and the MLP, and the MLP's pre-activation [B, S, 4D].
OFFLOAD_NAMES = ("resid_mid", "mlp_pre")
OFFLOAD_POLICY = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=[], names_which_can_be_offloaded=list(OFFLOAD_NAMES),
    offload_src="device", offload_dst="pinned_host")


def offload_block(x, p, mask, n_head):
    """`block` (no dropout) with its residuals named for OFFLOAD_POLICY (checkpoint_name)."""
    x = x + attention(layer_norm(x, p["ln1"]), p["attn"], mask, n_head)
    x = checkpoint_name(x, "resid_mid")
    h = checkpoint_name(layer_norm(x, p["ln2"]) @ p["mlp"]["w_fc"] + p["mlp"]["b_fc"],
                        "mlp_pre")
    return x + jax.nn.gelu(h, approximate=True) @ p["mlp"]["w_proj"] + p["mlp"]["b_proj"]


def gpt_forward(params, tokens, cfg: GPTConfig, key=None):
    s = tokens.shape[1]
    x = params["wte"][tokens] + params["wpe"][:s]  # [B, S, D]; wpe[:S] is a symbolic slice
    mask = causal_mask(s)

    def run_block(h, p, k=None):
        return block(h, p, mask, cfg.n_head, k, cfg.dropout)

    if cfg.remat:
        run_block = jax.checkpoint(run_block)
    if cfg.offload:
        run_block = jax.checkpoint(lambda h, p: offload_block(h, p, mask, cfg.n_head),
                                   policy=OFFLOAD_POLICY)
    if cfg.scan:
        x, _ = lax.scan(lambda h, p: (run_block(h, p), None), x, params["blocks"])
    elif key is not None:
        for p, k in zip(params["blocks"], jax.random.split(key, cfg.n_layer)):
            x = run_block(x, p, k)
    else:
        for p in params["blocks"]:
            x = run_block(x, p)
    x = layer_norm(x, params["ln_f"])
    return x @ params["wte"].T  # tied embedding: [B, S, V]


def make_gpt_step(cfg: GPTConfig):
    opt = make_adamw()

    def gpt_adamw_step(params, opt_state, tokens, targets):
        def loss_fn(p):
            return cross_entropy(gpt_forward(p, tokens, cfg), targets)

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, new_opt_state = opt.update(grads, opt_state, params)
        new_params = optax.apply_updates(params, updates)
        return loss, new_params, new_opt_state

    return gpt_adamw_step


def clip_by_global_norm_cond(grads, max_norm):
    """Scales the gradients to global norm `max_norm` when above it, through `lax.cond` (a
    `stablehlo.case`), as training loops that skip work on the common path write it."""
    norm = optax.global_norm(grads)
    return lax.cond(norm > max_norm,
                    lambda g: jax.tree_util.tree_map(lambda v: v * (max_norm / norm), g),
                    lambda g: g, grads)


def make_gpt_dropout_step(cfg: GPTConfig):
    """gpt_adamw_step with dropout (key: uint32[2], a raw `jax.random.PRNGKey`) and a
    `lax.cond` global-norm gradient clip."""
    opt = make_adamw()

    def gpt_dropout_step(params, opt_state, tokens, targets, key):
        def loss_fn(p):
            return cross_entropy(gpt_forward(p, tokens, cfg, key), targets)

        loss, grads = jax.value_and_grad(loss_fn)(params)
        grads = clip_by_global_norm_cond(grads, cfg.clip_norm)
        updates, new_opt_state = opt.update(grads, opt_state, params)
        new_params = optax.apply_updates(params, updates)
        return loss, new_params, new_opt_state

    return gpt_dropout_step


def make_gpt_bf16_scaled_step(cfg: GPTConfig, compute_dtype=jnp.bfloat16):
    """gpt_adamw_step computing in bf16 (or `compute_dtype`: f16 for the classic
    mixed-precision recipe) (f32 master weights converted to bf16 inside the loss,
    logits converted back to f32) with dynamic loss scaling: the loss is multiplied by
    `loss_scale` (f32[]), the gradients divided by it, and AdamW is wrapped in
    `optax.apply_if_finite`, whose `lax.cond` (a `stablehlo.case`) skips the update when a
    gradient is not finite: the skip branch returns zero updates and the old moments
    (operands forwarded unchanged). The scale is halved after a skipped step."""
    opt = optax.apply_if_finite(make_adamw(), max_consecutive_errors=5)

    def gpt_bf16_scaled_step(params, opt_state, loss_scale, tokens, targets):
        def loss_fn(p):
            pb = jax.tree_util.tree_map(lambda x: x.astype(compute_dtype), p)
            logits = gpt_forward(pb, tokens, cfg).astype(jnp.float32)
            loss = cross_entropy(logits, targets)
            return loss * loss_scale, loss

        (_, loss), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        grads = jax.tree_util.tree_map(lambda g: g / loss_scale, grads)
        updates, new_opt_state = opt.update(grads, opt_state, params)
        new_params = optax.apply_updates(params, updates)
        new_scale = jnp.where(new_opt_state.last_finite, loss_scale, loss_scale * 0.5)
        return loss, new_params, new_opt_state, new_scale

    return gpt_bf16_scaled_step, opt


# ----------------------------------------------------------------------------------------------
# 9. A single GPT block + SGD (MSE regression on the block output)
# ----------------------------------------------------------------------------------------------

# Only d_model / n_head / d_ff / n_layer (residual init scale) of the config are used: there is
# no embedding, so vocab and n_pos play no part.
GPT_BLOCK = GPTConfig(n_layer=1, d_model=32, n_head=2, vocab=0, n_pos=0)
GPT_BLOCK_LR = 0.05


def init_gpt_block(key):
    return _init_block(key, GPT_BLOCK)


def gpt_block_sgd_step(params, x, target):
    """x, target: f32[B, S, D]; loss = mean((block(x) - target)^2) over all B*S*D elements."""

    def loss_fn(p):
        y = block(x, p, causal_mask(x.shape[1]), GPT_BLOCK.n_head)
        return jnp.mean(jnp.square(y - target))

    loss, grads = jax.value_and_grad(loss_fn)(params)
    return loss, sgd_update(params, grads, GPT_BLOCK_LR)


# ----------------------------------------------------------------------------------------------
# 10. A shifted-token LM step whose inputs' dimensions are expressions of the symbols
# ----------------------------------------------------------------------------------------------

SHIFTED_LM_VOCAB = 32
SHIFTED_LM_D = 16
SHIFTED_LM_LR = 0.1


def init_shifted_lm(key):
    k1, k2, k3 = jax.random.split(key, 3)
    v, d = SHIFTED_LM_VOCAB, SHIFTED_LM_D
    return {
        "emb": jax.random.normal(k1, (v, d), jnp.float32) * 0.1,
        "w1": he(k2, (d, 2 * d), d), "b1": jnp.zeros((2 * d,), jnp.float32),
        "w2": he(k3, (2 * d, v), 2 * d), "b2": jnp.zeros((v,), jnp.float32),
    }


def shifted_lm_sgd_step(params, tokens, weights):
    """tokens: i32[B, S+1], sliced into inputs `tokens[:, :-1]` and targets `tokens[:, 1:]`;
    weights: f32[B*S], one loss weight per target token, flattened. The embedding is read with
    `jnp.take` (its default `mode="fill"`: an in-bounds check and a NaN fill). The loss is the
    weighted mean cross-entropy."""

    def loss_fn(p):
        inp, tgt = tokens[:, :-1], tokens[:, 1:]
        h = jnp.take(p["emb"], inp, axis=0)  # [B, S, D]
        h = jnp.tanh(h @ p["w1"] + p["b1"])
        logits = (h @ p["w2"] + p["b2"]).reshape(-1, SHIFTED_LM_VOCAB)  # [B*S, V]
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, tgt.reshape(-1))
        return jnp.sum(weights * ce) / jnp.sum(weights)

    loss, grads = jax.value_and_grad(loss_fn)(params)
    return loss, sgd_update(params, grads, SHIFTED_LM_LR)


# ----------------------------------------------------------------------------------------------
# 11. jax.checkpoint with a policy, a cumulative sum over S and a typed PRNG key
# ----------------------------------------------------------------------------------------------

CKPT_CUMSUM_D = 8
CKPT_CUMSUM_LR = 0.1
CKPT_CUMSUM_KEEP = 0.75


def init_ckpt_cumsum(key):
    k1, k2 = jax.random.split(key)
    d = CKPT_CUMSUM_D
    return {"w1": he(k1, (d, d), d), "w2": he(k2, (d, d), d)}


def ckpt_cumsum_key_step(params, key, x):
    """x: f32[B, S, 8]; key: a typed `jax.random.key` (JAX brackets it with Shardy
    `sdy.sharding_constraint`s), split into the next step's key and a dropout key. The block
    dense-tanh-dense runs under `jax.checkpoint(policy=dots_saveable)` (the saved dots are
    marked by `stablehlo.reduce_precision`); `jnp.cumsum` over the symbolic S (a
    `custom_call @stablehlo.dynamic_reduce_window`); inverted dropout keeping 3/4 from the
    typed key; loss = mean of the squares. Returns (loss, new_params, new_key)."""
    key, sub = jax.random.split(key)

    def loss_fn(p):
        def blk(h):
            return jnp.tanh(h @ p["w1"]) @ p["w2"]

        h = jax.checkpoint(blk, policy=jax.checkpoint_policies.dots_saveable)(x)
        h = jnp.cumsum(h, axis=1)
        keep = jax.random.bernoulli(sub, CKPT_CUMSUM_KEEP, h.shape)
        h = jnp.where(keep, h / CKPT_CUMSUM_KEEP, 0.0)
        return jnp.mean(h * h)

    loss, grads = jax.value_and_grad(loss_fn)(params)
    return loss, sgd_update(params, grads, CKPT_CUMSUM_LR), key


# ----------------------------------------------------------------------------------------------
# 12. Attention with its own key bias under Adam, Lion and SGD momentum
# ----------------------------------------------------------------------------------------------
# The key bias `bk` adds `q . bk` to every logit of a query's row, which softmax ignores: its
# gradient is zero in exact arithmetic, and what a float computation gives is round-off. Adam
# (`g / (|g| + eps)` at the first step, `|g| << eps`), Lion (`sign`) and momentum turn that
# noise into updates no two implementations share: the case a numerics check must not flag.

ATTN_KBIAS_VOCAB = 32
ATTN_KBIAS_D = 16
ATTN_KBIAS_HEADS = 2


def init_attn_kbias(key):
    ks = jax.random.split(key, 6)
    v, d = ATTN_KBIAS_VOCAB, ATTN_KBIAS_D
    p = {"emb": jax.random.normal(ks[0], (v, d), jnp.float32) * 0.5}
    for name, k in zip(("q", "k", "v", "o"), ks[1:5]):
        p["w" + name] = jax.random.normal(k, (d, d), jnp.float32) * (1.0 / math.sqrt(d))
        p["b" + name] = jnp.full((d,), 0.1, jnp.float32)
    p["head"] = jax.random.normal(ks[5], (d, v), jnp.float32) * (1.0 / math.sqrt(d))
    return p


def attn_kbias_loss(p, tokens, targets):
    """tokens, targets: i32[B, S]; one causal self-attention layer with separate q/k/v/o
    projections and biases, a residual, a linear head; mean cross-entropy."""
    b, s = tokens.shape
    h, dh = ATTN_KBIAS_HEADS, ATTN_KBIAS_D // ATTN_KBIAS_HEADS
    x = p["emb"][tokens]  # [B, S, D]

    def proj(name):
        return (x @ p["w" + name] + p["b" + name]).reshape(b, s, h, dh)

    q, k, v = proj("q"), proj("k"), proj("v")
    att = jnp.einsum("bqhd,bkhd->bhqk", q, k) * (1.0 / math.sqrt(dh))
    att = jnp.where(causal_mask(s), att, jnp.finfo(att.dtype).min)
    att = jax.nn.softmax(att, axis=-1)
    y = jnp.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, s, ATTN_KBIAS_D)
    x = x + y @ p["wo"] + p["bo"]
    return cross_entropy(x @ p["head"], targets)


ATTN_KBIAS_OPTIMIZERS = {
    "adam": lambda: optax.adam(1e-3),
    "lion": lambda: optax.lion(1e-4),
    "momentum": lambda: optax.sgd(0.05, momentum=0.9),
}


def make_attn_kbias_step(optimizer: str):
    opt = ATTN_KBIAS_OPTIMIZERS[optimizer]()

    def attn_kbias_step(params, opt_state, tokens, targets):
        loss, grads = jax.value_and_grad(attn_kbias_loss)(params, tokens, targets)
        updates, opt_state = opt.update(grads, opt_state, params)
        return loss, optax.apply_updates(params, updates), opt_state

    return attn_kbias_step, opt
