"""Third batch of JAX trial models: the layer kinds of the issue's own trial (ViT, BERT with a
padding mask, a T5-style encoder-decoder with two sequence symbols, a top-2 MoE, a Whisper-style
conv1d front end, CLIP's [B, B] logits), in plain JAX + optax at widths of 64-128.
/work/main/.venv-jax/bin/python /tmp/trial/jax/trial_models3.py [names]"""
import math
import sys

import jax
import jax.numpy as jnp
import optax
from jax import lax

from harness import export
from trial_models import key, layer_norm, normal, with_opt

SDS = jax.ShapeDtypeStruct
D3, H3, FF3, V3, NPOS3, NC3 = 128, 4, 256, 512, 128, 10


def mha(p, xq, xkv, bias=None):
    """Multi-head attention by einsum; `bias` broadcasts to [B, H, Sq, Sk]."""
    b, sq, _ = xq.shape
    sk = xkv.shape[1]
    q = (xq @ p["wq"]).reshape(b, sq, H3, D3 // H3)
    k = (xkv @ p["wk"]).reshape(b, sk, H3, D3 // H3)
    v = (xkv @ p["wv"]).reshape(b, sk, H3, D3 // H3)
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(D3 // H3)
    if bias is not None:
        s = s + bias
    a = jax.nn.softmax(s, axis=-1)
    o = jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(b, sq, D3)
    return o @ p["wo"]


def init_attn(ks):
    return {n: normal(next(ks), (D3, D3)) for n in ("wq", "wk", "wv", "wo")}


def init_block(ks, cross=False):
    p = {"attn": init_attn(ks), "w1": normal(next(ks), (D3, FF3)), "b1": jnp.zeros(FF3),
         "w2": normal(next(ks), (FF3, D3)), "b2": jnp.zeros(D3),
         "ln1_g": jnp.ones(D3), "ln1_b": jnp.zeros(D3), "ln2_g": jnp.ones(D3),
         "ln2_b": jnp.zeros(D3)}
    if cross:
        p["cross"] = init_attn(ks)
        p["ln3_g"], p["ln3_b"] = jnp.ones(D3), jnp.zeros(D3)
    return p


def pre_ln_block(p, x, bias=None):
    x = x + mha(p["attn"], *(2 * [layer_norm(x, p["ln1_g"], p["ln1_b"])]), bias)
    h = layer_norm(x, p["ln2_g"], p["ln2_b"])
    return x + jax.nn.gelu(h @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


# a) ViT: patch embedding by a strided convolution, a class token, 2 pre-LN blocks, AdamW
PATCH, IMG = 4, 32


def init_vit(k):
    ks = iter(jax.random.split(k, 64))
    n = (IMG // PATCH) ** 2 + 1
    return {"patch": normal(next(ks), (PATCH, PATCH, 3, D3), 0.1), "cls": normal(next(ks), (1, 1, D3)),
            "pos": normal(next(ks), (1, n, D3)), "blocks": [init_block(ks) for _ in range(2)],
            "lnf_g": jnp.ones(D3), "lnf_b": jnp.zeros(D3), "head": normal(next(ks), (D3, NC3))}


VIT_OPT = optax.adamw(1e-3, weight_decay=0.05)


def vit_step(params, opt_state, images, labels):
    def loss_fn(p):
        x = lax.conv_general_dilated(images, p["patch"], (PATCH, PATCH), "VALID",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        b = x.shape[0]
        x = x.reshape(b, -1, D3)
        x = jnp.concatenate([jnp.broadcast_to(p["cls"], (b, 1, D3)), x], axis=1) + p["pos"]
        for blk in p["blocks"]:
            x = pre_ln_block(blk, x)
        logits = layer_norm(x[:, 0], p["lnf_g"], p["lnf_b"]) @ p["head"]
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
    loss, g = jax.value_and_grad(loss_fn)(params)
    upd, opt_state = VIT_OPT.update(g, opt_state, params)
    return loss, optax.apply_updates(params, upd), opt_state


def vit_args(dims, concrete):
    init = with_opt(init_vit, VIT_OPT)
    b = dims["B"]
    if concrete:
        p, st = init(key(0))
        return p, st, jax.random.normal(key(1), (b, IMG, IMG, 3)), jax.random.randint(key(2), (b,), 0, NC3)
    p, st = jax.eval_shape(init, key(0))
    return p, st, SDS((b, IMG, IMG, 3), jnp.float32), SDS((b,), jnp.int32)


# b) BERT: token-type embeddings, a key padding mask from lengths, post-LN, masked-LM loss on
#    weighted positions, AdamW with gradient clipping
def init_bert(k):
    ks = iter(jax.random.split(k, 64))
    return {"tok": normal(next(ks), (V3, D3)), "pos": normal(next(ks), (NPOS3, D3)),
            "typ": normal(next(ks), (2, D3)), "ln_g": jnp.ones(D3), "ln_b": jnp.zeros(D3),
            "blocks": [init_block(ks) for _ in range(2)], "mlm_b": jnp.zeros(V3)}


BERT_OPT = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-4, weight_decay=0.01))


def bert_step(params, opt_state, tokens, types, lengths, mlm_weights, targets):
    def loss_fn(p):
        b, s = tokens.shape
        x = p["tok"][tokens] + p["pos"][:s] + p["typ"][types]
        x = layer_norm(x, p["ln_g"], p["ln_b"])
        valid = jnp.arange(s)[None, :] < lengths[:, None]                  # [B, S]
        bias = jnp.where(valid, 0.0, -1e9)[:, None, None, :]              # [B, 1, 1, S]
        for blk in p["blocks"]:
            x = layer_norm(x + mha(blk["attn"], x, x, bias), blk["ln1_g"], blk["ln1_b"])
            h = jax.nn.gelu(x @ blk["w1"] + blk["b1"], approximate=False) @ blk["w2"] + blk["b2"]
            x = layer_norm(x + h, blk["ln2_g"], blk["ln2_b"])
        logits = x @ p["tok"].T + p["mlm_b"]
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, targets)
        return (ce * mlm_weights).sum() / jnp.maximum(mlm_weights.sum(), 1.0)
    loss, g = jax.value_and_grad(loss_fn)(params)
    upd, opt_state = BERT_OPT.update(g, opt_state, params)
    return loss, optax.apply_updates(params, upd), opt_state


def bert_args(dims, concrete):
    init = with_opt(init_bert, BERT_OPT)
    b, s = dims["B"], dims["S"]
    if concrete:
        p, st = init(key(0))
        tok = jax.random.randint(key(1), (b, s), 0, V3)
        typ = (jnp.arange(s)[None, :] >= s // 2).astype(jnp.int32) * jnp.ones((b, 1), jnp.int32)
        lengths = jnp.maximum(1, s - 2 * jnp.arange(b, dtype=jnp.int32))
        w = (jax.random.uniform(key(3), (b, s)) < 0.15).astype(jnp.float32)
        return p, st, tok, typ, lengths, w, jax.random.randint(key(2), (b, s), 0, V3)
    p, st = jax.eval_shape(init, key(0))
    return (p, st, SDS((b, s), jnp.int32), SDS((b, s), jnp.int32), SDS((b,), jnp.int32),
            SDS((b, s), jnp.float32), SDS((b, s), jnp.int32))


# c) T5-style encoder-decoder over two sequence symbols (S source, T target): RMS norm, a
#    relative position bias from clipped distances, causal self-attention and cross-attention,
#    a shared embedding, Adafactor
REL = 16


def rms(x, g, eps=1e-6):
    return x * lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + eps) * g


def rel_bias(table, sq, sk):
    d = jnp.clip(jnp.arange(sk)[None, :] - jnp.arange(sq)[:, None], -REL, REL) + REL
    return jnp.transpose(table[d], (2, 0, 1))[None]                     # [1, H, Sq, Sk]


def init_t5(k):
    ks = iter(jax.random.split(k, 64))
    enc, dec = init_block(ks), init_block(ks, cross=True)
    return {"emb": normal(next(ks), (V3, D3), 1.0), "enc": enc, "dec": dec,
            "enc_rel": normal(next(ks), (2 * REL + 1, H3)), "dec_rel": normal(next(ks), (2 * REL + 1, H3)),
            "enc_g": jnp.ones(D3), "dec_g": jnp.ones(D3)}


T5_OPT = optax.adafactor(1e-3)


def t5_step(params, opt_state, src, tgt_in, tgt_out):
    def loss_fn(p):
        s, t = src.shape[1], tgt_in.shape[1]
        e, blk = p["emb"][src], p["enc"]
        e = e + mha(blk["attn"], *(2 * [rms(e, blk["ln1_g"])]), rel_bias(p["enc_rel"], s, s))
        e = e + jax.nn.relu(rms(e, blk["ln2_g"]) @ blk["w1"]) @ blk["w2"]
        e = rms(e, p["enc_g"])
        x, blk = p["emb"][tgt_in], p["dec"]
        causal = jnp.where(jnp.arange(t)[None, :] <= jnp.arange(t)[:, None], 0.0, -1e9)
        x = x + mha(blk["attn"], *(2 * [rms(x, blk["ln1_g"])]), rel_bias(p["dec_rel"], t, t) + causal)
        x = x + mha(blk["cross"], rms(x, blk["ln3_g"]), e)
        x = x + jax.nn.relu(rms(x, blk["ln2_g"]) @ blk["w1"]) @ blk["w2"]
        logits = rms(x, p["dec_g"]) @ p["emb"].T / math.sqrt(D3)
        return optax.softmax_cross_entropy_with_integer_labels(logits, tgt_out).mean()
    loss, g = jax.value_and_grad(loss_fn)(params)
    upd, opt_state = T5_OPT.update(g, opt_state, params)
    return loss, optax.apply_updates(params, upd), opt_state


def t5_args(dims, concrete):
    init = with_opt(init_t5, T5_OPT)
    b, s, t = dims["B"], dims["S"], dims["T"]
    if concrete:
        p, st = init(key(0))
        return (p, st, jax.random.randint(key(1), (b, s), 0, V3), jax.random.randint(key(2), (b, t), 0, V3),
                jax.random.randint(key(3), (b, t), 0, V3))
    p, st = jax.eval_shape(init, key(0))
    return p, st, SDS((b, s), jnp.int32), SDS((b, t), jnp.int32), SDS((b, t), jnp.int32)


# d) top-2 mixture of experts: a softmax router, lax.top_k, renormalized gates, every expert
#    computed densely and combined by the gates, a load-balancing loss, Adam
E = 4


def init_moe(k):
    ks = iter(jax.random.split(k, 16))
    return {"emb": normal(next(ks), (V3, D3)), "router": normal(next(ks), (D3, E)),
            "w1": normal(next(ks), (E, D3, FF3)), "w2": normal(next(ks), (E, FF3, D3)),
            "out": normal(next(ks), (D3, V3))}


MOE_OPT = optax.adam(1e-3)


def moe_step(params, opt_state, tokens, targets):
    def loss_fn(p):
        x = p["emb"][tokens]                                                # [B, S, D]
        probs = jax.nn.softmax(x @ p["router"], axis=-1)                    # [B, S, E]
        gates, idx = lax.top_k(probs, 2)                                    # [B, S, 2]
        gates = gates / gates.sum(-1, keepdims=True)
        combine = (jax.nn.one_hot(idx, E) * gates[..., None]).sum(-2)      # [B, S, E]
        h = jax.nn.gelu(jnp.einsum("bsd,edf->bsef", x, p["w1"]))
        y = jnp.einsum("bsef,efd->bsed", h, p["w2"])
        x = x + jnp.einsum("bsed,bse->bsd", y, combine)
        frac = jax.nn.one_hot(idx[..., 0], E).mean((0, 1))
        aux = E * jnp.sum(frac * probs.mean((0, 1)))
        ce = optax.softmax_cross_entropy_with_integer_labels(x @ p["out"], targets).mean()
        return ce + 0.01 * aux
    loss, g = jax.value_and_grad(loss_fn)(params)
    upd, opt_state = MOE_OPT.update(g, opt_state, params)
    return loss, optax.apply_updates(params, upd), opt_state


def moe_args(dims, concrete):
    init = with_opt(init_moe, MOE_OPT)
    b, s = dims["B"], dims["S"]
    if concrete:
        p, st = init(key(0))
        return p, st, jax.random.randint(key(1), (b, s), 0, V3), jax.random.randint(key(2), (b, s), 0, V3)
    p, st = jax.eval_shape(init, key(0))
    return p, st, SDS((b, s), jnp.int32), SDS((b, s), jnp.int32)


# e) Whisper-style front end: log-mel frames [B, 2T, 80] (an even count: the stride-2
#    convolution's gradient needs a static padding), conv1d k=3 then conv1d k=3 stride 2 (GELU), sinusoidal positions, one pre-LN block, mean pooling, a classifier, AdamW
MEL = 80


def init_whisper(k):
    ks = iter(jax.random.split(k, 32))
    return {"c1": normal(next(ks), (3, MEL, D3), 0.1), "c1b": jnp.zeros(D3),
            "c2": normal(next(ks), (3, D3, D3), 0.1), "c2b": jnp.zeros(D3),
            "blk": init_block(ks), "ln_g": jnp.ones(D3), "ln_b": jnp.zeros(D3),
            "head": normal(next(ks), (D3, NC3))}


WHISPER_OPT = optax.adamw(1e-3)


def sinusoids(n, d):
    inv = jnp.exp(-math.log(10000.0) * jnp.arange(d // 2) / (d // 2 - 1))
    t = jnp.arange(n, dtype=jnp.float32)[:, None] * inv[None, :]
    return jnp.concatenate([jnp.sin(t), jnp.cos(t)], axis=1)


def whisper_step(params, opt_state, mel, labels):
    def loss_fn(p):
        dn = ("NWC", "WIO", "NWC")
        x = jax.nn.gelu(lax.conv_general_dilated(mel, p["c1"], (1,), [(1, 1)], dimension_numbers=dn) + p["c1b"])
        x = jax.nn.gelu(lax.conv_general_dilated(x, p["c2"], (2,), [(1, 1)], dimension_numbers=dn) + p["c2b"])
        x = x + sinusoids(x.shape[1], D3)
        x = pre_ln_block(p["blk"], x)
        x = layer_norm(x, p["ln_g"], p["ln_b"]).mean(1)
        return optax.softmax_cross_entropy_with_integer_labels(x @ p["head"], labels).mean()
    loss, g = jax.value_and_grad(loss_fn)(params)
    upd, opt_state = WHISPER_OPT.update(g, opt_state, params)
    return loss, optax.apply_updates(params, upd), opt_state


def whisper_args(dims, concrete):
    init = with_opt(init_whisper, WHISPER_OPT)
    b, t = dims["B"], dims["T"]
    if concrete:
        p, st = init(key(0))
        return p, st, jax.random.normal(key(1), (b, 2 * t, MEL)), jax.random.randint(key(2), (b,), 0, NC3)
    p, st = jax.eval_shape(init, key(0))
    return p, st, SDS((b, 2 * t, MEL), jnp.float32), SDS((b,), jnp.int32)


# f) CLIP: an image tower over flattened patches and a text tower (one block, mean over the
#    padded sequence), L2-normalized embeddings, [B, B] logits with a learned temperature,
#    a symmetric cross-entropy, AdamW
CPATCH, CIMG = 4, 16


def init_clip(k):
    ks = iter(jax.random.split(k, 48))
    npatch = (CIMG // CPATCH) ** 2
    return {"pe": normal(next(ks), (CPATCH * CPATCH * 3, D3), 0.1), "ppos": normal(next(ks), (npatch, D3)),
            "iblk": init_block(ks), "iproj": normal(next(ks), (D3, D3)),
            "tok": normal(next(ks), (V3, D3)), "tpos": normal(next(ks), (NPOS3, D3)),
            "tblk": init_block(ks), "tproj": normal(next(ks), (D3, D3)),
            "logit_scale": jnp.array(math.log(1 / 0.07), jnp.float32)}


CLIP_OPT = optax.adamw(1e-3, weight_decay=0.1)


def clip_step(params, opt_state, images, tokens):
    def loss_fn(p):
        b, s = tokens.shape
        n = CIMG // CPATCH
        x = images.reshape(b, n, CPATCH, n, CPATCH, 3).transpose(0, 1, 3, 2, 4, 5)
        x = x.reshape(b, n * n, CPATCH * CPATCH * 3) @ p["pe"] + p["ppos"]
        img = pre_ln_block(p["iblk"], x).mean(1) @ p["iproj"]
        t = pre_ln_block(p["tblk"], p["tok"][tokens] + p["tpos"][:s]).mean(1) @ p["tproj"]
        img = img / jnp.linalg.norm(img, axis=-1, keepdims=True)
        t = t / jnp.linalg.norm(t, axis=-1, keepdims=True)
        logits = jnp.exp(p["logit_scale"]) * img @ t.T                   # [B, B]
        labels = jnp.arange(b)
        return (optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
                + optax.softmax_cross_entropy_with_integer_labels(logits.T, labels).mean()) / 2
    loss, g = jax.value_and_grad(loss_fn)(params)
    upd, opt_state = CLIP_OPT.update(g, opt_state, params)
    return loss, optax.apply_updates(params, upd), opt_state


def clip_args(dims, concrete):
    init = with_opt(init_clip, CLIP_OPT)
    b, s = dims["B"], dims["S"]
    if concrete:
        p, st = init(key(0))
        return p, st, jax.random.normal(key(1), (b, CIMG, CIMG, 3)), jax.random.randint(key(2), (b, s), 0, V3)
    p, st = jax.eval_shape(init, key(0))
    return p, st, SDS((b, CIMG, CIMG, 3), jnp.float32), SDS((b, s), jnp.int32)


ALL = {
    "jx3_vit_patchconv_adamw": (vit_step, "B", (), vit_args, {"B": 4}),
    "jx3_bert_padmask_mlm": (bert_step, "B, S", (f"S <= {NPOS3}",), bert_args, {"B": 3, "S": 12}),
    "jx3_t5_encdec_two_syms": (t5_step, "B, S, T", (), t5_args, {"B": 2, "S": 10, "T": 7}),
    "jx3_moe_top2_dense": (moe_step, "B, S", (), moe_args, {"B": 2, "S": 9}),
    "jx3_whisper_conv1d": (whisper_step, "B, T", (), whisper_args, {"B": 2, "T": 15}),
    "jx3_clip_bb_logits": (clip_step, "B, S", (f"S <= {NPOS3}",), clip_args, {"B": 4, "S": 11}),
}

if __name__ == "__main__":
    for n in sys.argv[1:] or list(ALL):
        export(n, *ALL[n])
