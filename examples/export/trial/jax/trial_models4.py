"""Fourth batch of JAX trial models: layer kinds not in batches 1-3 — a ConvNeXt stage
(depthwise 7x7 convolution, channel LayerNorm, inverted MLP, layer scale), a LLaMA-style
decoder (RMS norm, rotary embeddings, grouped-query attention, SwiGLU), Swin-style shifted
window attention (`jnp.roll`, window partition by reshape/transpose, a relative position bias
table), a bidirectional LSTM (two `lax.scan`s over S, one reversed) and an MLP-Mixer; plain JAX
+ optax at widths of 64-128.
/work/main/.venv-jax/bin/python /tmp/trial/jax/trial_models4.py [names]"""
import math
import sys

import jax
import jax.numpy as jnp
import optax
from jax import lax

from harness import export
from trial_models import key, layer_norm, normal, with_opt
from trial_models3 import rms

SDS = jax.ShapeDtypeStruct
NC4, V4 = 10, 512


def ce(logits, labels):
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


def image_args(init_fn, opt, size, chans=3):
    """`(params, opt_state, images [B, size, size, chans], labels [B])` as specs or values."""
    def make(dims, concrete):
        init = with_opt(init_fn, opt)
        b = dims["B"]
        if concrete:
            p, st = init(key(0))
            return (p, st, jax.random.normal(key(1), (b, size, size, chans)),
                    jax.random.randint(key(2), (b,), 0, NC4))
        p, st = jax.eval_shape(init, key(0))
        return p, st, SDS((b, size, size, chans), jnp.float32), SDS((b,), jnp.int32)
    return make


def step_of(loss_fn, opt):
    def step(params, opt_state, *batch):
        loss, g = jax.value_and_grad(loss_fn)(params, *batch)
        upd, opt_state = opt.update(g, opt_state, params)
        return loss, optax.apply_updates(params, upd), opt_state
    return step


# a) ConvNeXt: a 4x4/4 stem, two blocks of depthwise 7x7 conv -> LayerNorm over channels ->
#    1x1 MLP (4x, GELU) -> layer scale -> residual; AdamW
CX = 64


def init_convnext(k):
    ks = iter(jax.random.split(k, 32))
    blocks = [{"dw": normal(next(ks), (7, 7, 1, CX), 0.1), "dwb": jnp.zeros(CX),
               "ln_g": jnp.ones(CX), "ln_b": jnp.zeros(CX),
               "w1": normal(next(ks), (CX, 4 * CX)), "b1": jnp.zeros(4 * CX),
               "w2": normal(next(ks), (4 * CX, CX)), "b2": jnp.zeros(CX),
               "gamma": jnp.full((CX,), 1e-1)} for _ in range(2)]
    return {"stem": normal(next(ks), (4, 4, 3, CX), 0.1), "stem_b": jnp.zeros(CX),
            "blocks": blocks, "head": normal(next(ks), (CX, NC4))}


CONVNEXT_OPT = optax.adamw(1e-3, weight_decay=0.05)


def convnext_loss(p, images, labels):
    dn = ("NHWC", "HWIO", "NHWC")
    x = lax.conv_general_dilated(images, p["stem"], (4, 4), "VALID", dimension_numbers=dn) + p["stem_b"]
    for blk in p["blocks"]:
        h = lax.conv_general_dilated(x, blk["dw"], (1, 1), "SAME", dimension_numbers=dn,
                                     feature_group_count=CX) + blk["dwb"]
        h = layer_norm(h, blk["ln_g"], blk["ln_b"])
        h = jax.nn.gelu(h @ blk["w1"] + blk["b1"]) @ blk["w2"] + blk["b2"]
        x = x + blk["gamma"] * h
    return ce(x.mean((1, 2)) @ p["head"], labels)


# b) LLaMA-style decoder: RMS norm, rotary position embeddings, grouped-query attention (4
#    query heads sharing 2 key/value heads), SwiGLU, causal mask, untied head; AdamW with a
#    warmup-cosine schedule
DL, HQ, HKV, FFL = 128, 4, 2, 256
HD = DL // HQ


def rope(x):
    """Rotary embedding of x [B, S, H, HD] over its position axis."""
    s = x.shape[1]
    inv = 1.0 / (10000.0 ** (jnp.arange(0, HD, 2, dtype=jnp.float32) / HD))
    ang = jnp.arange(s, dtype=jnp.float32)[:, None] * inv[None, :]          # [S, HD/2]
    cos, sin = jnp.cos(ang)[None, :, None, :], jnp.sin(ang)[None, :, None, :]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return jnp.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).reshape(x.shape)


def init_llama(k):
    ks = iter(jax.random.split(k, 32))
    layers = [{"wq": normal(next(ks), (DL, HQ * HD)), "wk": normal(next(ks), (DL, HKV * HD)),
               "wv": normal(next(ks), (DL, HKV * HD)), "wo": normal(next(ks), (HQ * HD, DL)),
               "wg": normal(next(ks), (DL, FFL)), "wu": normal(next(ks), (DL, FFL)),
               "wd": normal(next(ks), (FFL, DL)), "n1": jnp.ones(DL), "n2": jnp.ones(DL)}
              for _ in range(2)]
    return {"emb": normal(next(ks), (V4, DL)), "layers": layers, "nf": jnp.ones(DL),
            "head": normal(next(ks), (DL, V4))}


LLAMA_OPT = optax.adamw(optax.warmup_cosine_decay_schedule(0.0, 3e-4, 10, 1000), weight_decay=0.1)


def llama_loss(p, tokens, targets):
    b, s = tokens.shape
    x = p["emb"][tokens]
    causal = jnp.tril(jnp.ones((s, s), bool))
    for ly in p["layers"]:
        h = rms(x, ly["n1"])
        q = rope((h @ ly["wq"]).reshape(b, s, HQ, HD))
        k = rope((h @ ly["wk"]).reshape(b, s, HKV, HD))
        v = (h @ ly["wv"]).reshape(b, s, HKV, HD)
        k, v = jnp.repeat(k, HQ // HKV, axis=2), jnp.repeat(v, HQ // HKV, axis=2)
        sc = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(HD)
        sc = jnp.where(causal[None, None], sc, jnp.finfo(jnp.float32).min)
        o = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(sc, -1), v).reshape(b, s, HQ * HD)
        x = x + o @ ly["wo"]
        h = rms(x, ly["n2"])
        x = x + (jax.nn.silu(h @ ly["wg"]) * (h @ ly["wu"])) @ ly["wd"]
    return ce(rms(x, p["nf"]) @ p["head"], targets)


def llama_args(dims, concrete):
    init = with_opt(init_llama, LLAMA_OPT)
    b, s = dims["B"], dims["S"]
    if concrete:
        p, st = init(key(0))
        return p, st, jax.random.randint(key(1), (b, s), 0, V4), jax.random.randint(key(2), (b, s), 0, V4)
    p, st = jax.eval_shape(init, key(0))
    return p, st, SDS((b, s), jnp.int32), SDS((b, s), jnp.int32)


# c) Swin-style blocks on a 16x16 grid of 2x2 patches: window attention in 4x4 windows, the
#    second block's windows shifted by 2 (`jnp.roll`) with the shifted-window mask, a relative
#    position bias table gathered by index; AdamW
SW, WIN, HS, SGRID = 64, 4, 4, 16


def rel_index():
    c = jnp.stack(jnp.meshgrid(jnp.arange(WIN), jnp.arange(WIN), indexing="ij")).reshape(2, -1)
    d = (c[:, :, None] - c[:, None, :]) + (WIN - 1)
    return d[0] * (2 * WIN - 1) + d[1]                                      # [W*W, W*W]


def shift_mask(shift):
    img = jnp.zeros((SGRID, SGRID), jnp.int32)
    cnt = 0
    for hs in (slice(0, -WIN), slice(-WIN, -shift), slice(-shift, None)):
        for ws in (slice(0, -WIN), slice(-WIN, -shift), slice(-shift, None)):
            img = img.at[hs, ws].set(cnt)
            cnt += 1
    w = img.reshape(SGRID // WIN, WIN, SGRID // WIN, WIN).transpose(0, 2, 1, 3).reshape(-1, WIN * WIN)
    return jnp.where(w[:, :, None] == w[:, None, :], 0.0, -100.0)          # [nW, W*W, W*W]


def init_swin(k):
    ks = iter(jax.random.split(k, 32))
    blocks = [{"qkv": normal(next(ks), (SW, 3 * SW)), "proj": normal(next(ks), (SW, SW)),
               "rel": normal(next(ks), ((2 * WIN - 1) ** 2, HS)), "n1_g": jnp.ones(SW),
               "n1_b": jnp.zeros(SW), "n2_g": jnp.ones(SW), "n2_b": jnp.zeros(SW),
               "w1": normal(next(ks), (SW, 2 * SW)), "w2": normal(next(ks), (2 * SW, SW))}
              for _ in range(2)]
    return {"embed": normal(next(ks), (2, 2, 3, SW), 0.1), "blocks": blocks,
            "head": normal(next(ks), (SW, NC4))}


SWIN_OPT = optax.adamw(1e-3, weight_decay=0.05)


def window_attn(blk, x, shift):
    b = x.shape[0]
    if shift:
        x = jnp.roll(x, (-shift, -shift), axis=(1, 2))
    n = SGRID // WIN
    w = x.reshape(b, n, WIN, n, WIN, SW).transpose(0, 1, 3, 2, 4, 5).reshape(b * n * n, WIN * WIN, SW)
    qkv = (w @ blk["qkv"]).reshape(-1, WIN * WIN, 3, HS, SW // HS)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    s = jnp.einsum("nqhd,nkhd->nhqk", q, k) / math.sqrt(SW // HS)
    s = s + jnp.transpose(blk["rel"][rel_index()], (2, 0, 1))[None]
    if shift:
        s = (s.reshape(b, n * n, HS, WIN * WIN, WIN * WIN) + shift_mask(shift)[None, :, None]
             ).reshape(-1, HS, WIN * WIN, WIN * WIN)
    o = jnp.einsum("nhqk,nkhd->nqhd", jax.nn.softmax(s, -1), v).reshape(-1, WIN * WIN, SW) @ blk["proj"]
    o = o.reshape(b, n, n, WIN, WIN, SW).transpose(0, 1, 3, 2, 4, 5).reshape(b, SGRID, SGRID, SW)
    if shift:
        o = jnp.roll(o, (shift, shift), axis=(1, 2))
    return o


def swin_loss(p, images, labels):
    x = lax.conv_general_dilated(images, p["embed"], (2, 2), "VALID",
                                 dimension_numbers=("NHWC", "HWIO", "NHWC"))
    for i, blk in enumerate(p["blocks"]):
        x = x + window_attn(blk, layer_norm(x, blk["n1_g"], blk["n1_b"]), (WIN // 2) * i)
        x = x + jax.nn.gelu(layer_norm(x, blk["n2_g"], blk["n2_b"]) @ blk["w1"]) @ blk["w2"]
    return ce(x.mean((1, 2)) @ p["head"], labels)


# d) bidirectional LSTM over a symbolic length: two `lax.scan`s (one reversed), concatenated
#    states, a per-token tagging loss with a padding mask from lengths; SGD with momentum
DH, DE = 64, 64


def init_bilstm(k):
    ks = iter(jax.random.split(k, 16))
    cell = lambda: {"wx": normal(next(ks), (DE, 4 * DH), 0.1), "wh": normal(next(ks), (DH, 4 * DH), 0.1),
                    "b": jnp.zeros(4 * DH)}
    return {"emb": normal(next(ks), (V4, DE), 0.1), "fwd": cell(), "bwd": cell(),
            "out": normal(next(ks), (2 * DH, NC4), 0.1)}


BILSTM_OPT = optax.sgd(0.05, momentum=0.9)


def lstm_scan(c, xs, reverse):
    b = xs.shape[1]

    def cell(carry, x):
        h, cc = carry
        z = x @ c["wx"] + h @ c["wh"] + c["b"]
        i, f, g, o = jnp.split(z, 4, -1)
        cc = jax.nn.sigmoid(f) * cc + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(cc)
        return (h, cc), h
    zero = jnp.zeros((b, DH))
    return lax.scan(cell, (zero, zero), xs, reverse=reverse)[1]            # [S, B, DH]


def bilstm_loss(p, tokens, lengths, tags):
    xs = jnp.swapaxes(p["emb"][tokens], 0, 1)                               # [S, B, DE]
    h = jnp.concatenate([lstm_scan(p["fwd"], xs, False), lstm_scan(p["bwd"], xs, True)], -1)
    logits = jnp.swapaxes(h, 0, 1) @ p["out"]                               # [B, S, NC]
    valid = (jnp.arange(tokens.shape[1])[None, :] < lengths[:, None]).astype(jnp.float32)
    l = optax.softmax_cross_entropy_with_integer_labels(logits, tags)
    return (l * valid).sum() / jnp.maximum(valid.sum(), 1.0)


def bilstm_args(dims, concrete):
    init = with_opt(init_bilstm, BILSTM_OPT)
    b, s = dims["B"], dims["S"]
    if concrete:
        p, st = init(key(0))
        return (p, st, jax.random.randint(key(1), (b, s), 0, V4),
                jnp.maximum(1, s - jnp.arange(b, dtype=jnp.int32)), jax.random.randint(key(2), (b, s), 0, NC4))
    p, st = jax.eval_shape(init, key(0))
    return p, st, SDS((b, s), jnp.int32), SDS((b,), jnp.int32), SDS((b, s), jnp.int32)


# e) MLP-Mixer on 4x4 patches of 32x32 images: token mixing by a transposed MLP over the 64
#    patches, channel mixing, LayerNorm; Lion
MX, MT = 96, 64


def init_mixer(k):
    ks = iter(jax.random.split(k, 32))
    blocks = [{"n1_g": jnp.ones(MX), "n1_b": jnp.zeros(MX), "t1": normal(next(ks), (MT, 2 * MT)),
               "t2": normal(next(ks), (2 * MT, MT)), "n2_g": jnp.ones(MX), "n2_b": jnp.zeros(MX),
               "c1": normal(next(ks), (MX, 4 * MX)), "c2": normal(next(ks), (4 * MX, MX))}
              for _ in range(2)]
    return {"patch": normal(next(ks), (4 * 4 * 3, MX)), "blocks": blocks, "head": normal(next(ks), (MX, NC4))}


MIXER_OPT = optax.lion(1e-4, weight_decay=0.01)


def mixer_loss(p, images, labels):
    b = images.shape[0]
    x = images.reshape(b, 8, 4, 8, 4, 3).transpose(0, 1, 3, 2, 4, 5).reshape(b, MT, 48) @ p["patch"]
    for blk in p["blocks"]:
        y = jnp.swapaxes(layer_norm(x, blk["n1_g"], blk["n1_b"]), 1, 2)     # [B, MX, MT]
        x = x + jnp.swapaxes(jax.nn.gelu(y @ blk["t1"]) @ blk["t2"], 1, 2)
        x = x + jax.nn.gelu(layer_norm(x, blk["n2_g"], blk["n2_b"]) @ blk["c1"]) @ blk["c2"]
    return ce(x.mean(1) @ p["head"], labels)


ALL = {
    "jx4_convnext_dw7": (step_of(convnext_loss, CONVNEXT_OPT), "B", (),
                         image_args(init_convnext, CONVNEXT_OPT, 32), {"B": 3}),
    "jx4_llama_gqa_rope": (step_of(llama_loss, LLAMA_OPT), "B, S", (), llama_args, {"B": 2, "S": 11}),
    "jx4_swin_shifted": (step_of(swin_loss, SWIN_OPT), "B", (), image_args(init_swin, SWIN_OPT, 32), {"B": 3}),
    "jx4_bilstm_tagger": (step_of(bilstm_loss, BILSTM_OPT), "B, S", (), bilstm_args, {"B": 3, "S": 9}),
    "jx4_mixer_lion": (step_of(mixer_loss, MIXER_OPT), "B", (), image_args(init_mixer, MIXER_OPT, 32), {"B": 3}),
}

if __name__ == "__main__":
    for n in sys.argv[1:] or list(ALL):
        export(n, *ALL[n])
