"""New-user trial models (issue #14). Run:
/work/main/.venv-jax/bin/python /tmp/trial/jax/trial_models.py [names...]
Writes /tmp/trial/jax/out/<name>.mlir, .json, .ref0.npz"""
from __future__ import annotations

import math
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from harness import export

SDS = jax.ShapeDtypeStruct


def key(i):
    return jax.random.PRNGKey(i)


def normal(k, shape, scale=0.02):
    return jax.random.normal(k, shape, jnp.float32) * scale


def spec_or_value(init, dims, concrete):
    return init(key(0)) if concrete else jax.eval_shape(init, key(0))


def with_opt(init_params, opt):
    def init(k):
        p = init_params(k)
        return p, opt.init(p)
    return init


# ---------------------------------------------------------------------------------------------
# 1. transformer: dot_product_attention, gelu(erf), one_hot + softmax_cross_entropy,
#    chain(clip_by_global_norm, adamw(warmup_cosine)) -> int step count in the opt state
# ---------------------------------------------------------------------------------------------
V, D, H, L, NPOS = 64, 32, 4, 2, 64


def init_tfm(k):
    ks = iter(jax.random.split(k, 4 + 4 * L))
    p = {"wte": normal(next(ks), (V, D)), "wpe": normal(next(ks), (NPOS, D)), "blocks": [],
         "lnf_g": jnp.ones((D,)), "lnf_b": jnp.zeros((D,))}
    for _ in range(L):
        p["blocks"].append({
            "ln1_g": jnp.ones((D,)), "ln1_b": jnp.zeros((D,)),
            "wqkv": normal(next(ks), (D, 3 * D)), "bqkv": jnp.zeros((3 * D,)),
            "wo": normal(next(ks), (D, D)),
            "ln2_g": jnp.ones((D,)), "ln2_b": jnp.zeros((D,)),
            "w1": normal(next(ks), (D, 4 * D)), "w2": normal(next(ks), (4 * D, D))})
    return p


def layer_norm(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = jnp.var(x, axis=-1, keepdims=True)
    return (x - mu) * lax.rsqrt(var + eps) * g + b


def tfm_forward(p, tokens):
    b, s = tokens.shape
    x = p["wte"][tokens] + p["wpe"][:s]
    for blk in p["blocks"]:
        h = layer_norm(x, blk["ln1_g"], blk["ln1_b"])
        qkv = h @ blk["wqkv"] + blk["bqkv"]
        q, k_, v = jnp.split(qkv, 3, axis=-1)
        q = q.reshape(b, s, H, D // H)
        k_ = k_.reshape(b, s, H, D // H)
        v = v.reshape(b, s, H, D // H)
        a = jax.nn.dot_product_attention(q, k_, v, is_causal=True)
        x = x + a.reshape(b, s, D) @ blk["wo"]
        h = layer_norm(x, blk["ln2_g"], blk["ln2_b"])
        x = x + jax.nn.gelu(h @ blk["w1"], approximate=False) @ blk["w2"]
    x = layer_norm(x, p["lnf_g"], p["lnf_b"])
    return x @ p["wte"].T


TFM_SCHED = optax.warmup_cosine_decay_schedule(0.0, 1e-3, 10, 100, 1e-5)
TFM_OPT = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(TFM_SCHED, weight_decay=0.1))


def tfm_step(params, opt_state, tokens, targets):
    def loss_fn(p):
        logits = tfm_forward(p, tokens)
        return optax.softmax_cross_entropy(logits, jax.nn.one_hot(targets, V)).mean()
    loss, g = jax.value_and_grad(loss_fn)(params)
    upd, opt_state = TFM_OPT.update(g, opt_state, params)
    return loss, optax.apply_updates(params, upd), opt_state


def tokens_args(init, vocab):
    def make(dims, concrete):
        b, s = dims["B"], dims["S"]
        if concrete:
            p, st = init(key(0))
            t = jax.random.randint(key(1), (b, s), 0, vocab, jnp.int32)
            y = jax.random.randint(key(2), (b, s), 0, vocab, jnp.int32)
            return p, st, t, y
        p, st = jax.eval_shape(init, key(0))
        return p, st, SDS((b, s), jnp.int32), SDS((b, s), jnp.int32)
    return make


# ---------------------------------------------------------------------------------------------
# 2. MLP over embedding bag (jnp.take), layer norm via jnp.var, logsumexp, label smoothing, adam
# ---------------------------------------------------------------------------------------------
NC = 10


def init_emlp(k):
    k1, k2, k3 = jax.random.split(k, 3)
    return {"emb": normal(k1, (V, D), 1.0), "w1": normal(k2, (D, 64), 0.2), "b1": jnp.zeros(64),
            "g": jnp.ones(64), "beta": jnp.zeros(64), "w2": normal(k3, (64, NC), 0.2),
            "b2": jnp.zeros(NC)}


EMLP_OPT = optax.adam(1e-3)


def emlp_step(params, opt_state, ids, labels):
    def loss_fn(p):
        e = jnp.take(p["emb"], ids, axis=0).mean(axis=1)  # [B, D]
        h = e @ p["w1"] + p["b1"]
        h = layer_norm(h, p["g"], p["beta"])
        h = jax.nn.relu(h)
        logits = h @ p["w2"] + p["b2"]
        logp = logits - jax.nn.logsumexp(logits, axis=-1, keepdims=True)
        tgt = optax.smooth_labels(jax.nn.one_hot(labels, NC), 0.1)
        return -(tgt * logp).sum(-1).mean()
    loss, g = jax.value_and_grad(loss_fn)(params)
    upd, opt_state = EMLP_OPT.update(g, opt_state, params)
    return loss, optax.apply_updates(params, upd), opt_state


def emlp_args(dims, concrete):
    init = with_opt(init_emlp, EMLP_OPT)
    b, s = dims["B"], dims["S"]
    if concrete:
        p, st = init(key(0))
        return (p, st, jax.random.randint(key(1), (b, s), 0, V, jnp.int32),
                jax.random.randint(key(2), (b,), 0, NC, jnp.int32))
    p, st = jax.eval_shape(init, key(0))
    return p, st, SDS((b, s), jnp.int32), SDS((b,), jnp.int32)


# ---------------------------------------------------------------------------------------------
# 3. jax.checkpoint(policy=dots_saveable) + lax.scan over stacked layers, SGD
# ---------------------------------------------------------------------------------------------
NL = 4


def init_scan(k):
    k1, k2, k3 = jax.random.split(k, 3)
    return {"w1": normal(k1, (NL, D, 4 * D), 0.1), "w2": normal(k2, (NL, 4 * D, D), 0.1),
            "g": jnp.ones((NL, D)), "out": normal(k3, (D, NC), 0.1)}


def scan_remat_step(params, x, y):
    def loss_fn(p):
        @jax.checkpoint
        def _unused(h):
            return h

        def block(h, lp):
            z = layer_norm(h, lp["g"], 0.0)
            z = jax.nn.gelu(z @ lp["w1"]) @ lp["w2"]
            return h + z, None
        block = jax.checkpoint(block, policy=jax.checkpoint_policies.dots_saveable)
        h, _ = lax.scan(block, x, {"w1": p["w1"], "w2": p["w2"], "g": p["g"]})
        logits = h.mean(1) @ p["out"]
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
    loss, g = jax.value_and_grad(loss_fn)(params)
    return loss, jax.tree_util.tree_map(lambda a, b: a - 0.05 * b, params, g)


def scan_args(dims, concrete):
    b, s = dims["B"], dims["S"]
    if concrete:
        return (init_scan(key(0)), jax.random.normal(key(1), (b, s, D)),
                jax.random.randint(key(2), (b,), 0, NC, jnp.int32))
    return (jax.eval_shape(init_scan, key(0)), SDS((b, s, D), jnp.float32), SDS((b,), jnp.int32))


# ---------------------------------------------------------------------------------------------
# 4. bf16 compute, f32 master weights, dynamic loss scaling (isfinite + lax.cond + jnp.where)
# ---------------------------------------------------------------------------------------------
def init_mlp(k):
    k1, k2 = jax.random.split(k)
    return {"w1": normal(k1, (32, 64), 0.2), "b1": jnp.zeros(64),
            "w2": normal(k2, (64, NC), 0.2), "b2": jnp.zeros(NC)}


def bf16_step(params, mom, scale, good_steps, x, y):
    def loss_fn(p):
        pb = jax.tree_util.tree_map(lambda a: a.astype(jnp.bfloat16), p)
        h = jax.nn.relu(x.astype(jnp.bfloat16) @ pb["w1"] + pb["b1"])
        logits = (h @ pb["w2"] + pb["b2"]).astype(jnp.float32)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
        return loss * scale, loss
    (_, loss), g = jax.value_and_grad(loss_fn, has_aux=True)(params)
    g = jax.tree_util.tree_map(lambda a: a / scale, g)
    finite = jnp.all(jnp.array([jnp.all(jnp.isfinite(a)) for a in jax.tree_util.tree_leaves(g)]))

    def apply(args):
        p, m, gr = args
        m = jax.tree_util.tree_map(lambda a, b: 0.9 * a + b, m, gr)
        p = jax.tree_util.tree_map(lambda a, b: a - 0.05 * b, p, m)
        return p, m

    def skip(args):
        p, m, _ = args
        return p, m
    new_p, new_m = lax.cond(finite, apply, skip, (params, mom, g))
    grow = good_steps + 1 >= 4
    new_scale = jnp.where(finite, jnp.where(grow, scale * 2, scale), scale / 2)
    new_good = jnp.where(finite, jnp.where(grow, 0, good_steps + 1), 0)
    return loss, new_p, new_m, new_scale, new_good


def bf16_args(dims, concrete):
    b = dims["B"]
    if concrete:
        p = init_mlp(key(0))
        m = jax.tree_util.tree_map(jnp.zeros_like, p)
        return (p, m, jnp.float32(2.0 ** 15), jnp.int32(3), jax.random.normal(key(1), (b, 32)),
                jax.random.randint(key(2), (b,), 0, NC, jnp.int32))
    p = jax.eval_shape(init_mlp, key(0))
    return (p, p, SDS((), jnp.float32), SDS((), jnp.int32), SDS((b, 32), jnp.float32),
            SDS((b,), jnp.int32))


# ---------------------------------------------------------------------------------------------
# 5. conv net NHWC, avg_pool by reduce_window, sigmoid, log_softmax, momentum SGD
# ---------------------------------------------------------------------------------------------
def init_cnn(k):
    k1, k2, k3 = jax.random.split(k, 3)
    return {"c1": normal(k1, (3, 3, 3, 8), 0.3), "b1": jnp.zeros(8),
            "c2": normal(k2, (3, 3, 8, 16), 0.2), "b2": jnp.zeros(16),
            "fc": normal(k3, (16 * 4 * 4, NC), 0.1)}


def avg_pool(x, k=2):
    s = lax.reduce_window(x, 0.0, lax.add, (1, k, k, 1), (1, k, k, 1), "VALID")
    return s / (k * k)


CNN_OPT = optax.sgd(0.05, momentum=0.9)


def cnn_step(params, opt_state, x, y):
    dn = ("NHWC", "HWIO", "NHWC")

    def loss_fn(p):
        h = lax.conv_general_dilated(x, p["c1"], (1, 1), "SAME", dimension_numbers=dn) + p["b1"]
        h = avg_pool(jax.nn.sigmoid(h))
        h = lax.conv_general_dilated(h, p["c2"], (1, 1), "SAME", dimension_numbers=dn,
                                     rhs_dilation=(1, 1)) + p["b2"]
        h = avg_pool(jax.nn.sigmoid(h))
        logits = h.reshape(h.shape[0], -1) @ p["fc"]
        logp = jax.nn.log_softmax(logits)
        return -jnp.take_along_axis(logp, y[:, None], axis=1).mean()
    loss, g = jax.value_and_grad(loss_fn)(params)
    upd, opt_state = CNN_OPT.update(g, opt_state, params)
    return loss, optax.apply_updates(params, upd), opt_state


def cnn_args(dims, concrete):
    init = with_opt(init_cnn, CNN_OPT)
    b = dims["B"]
    if concrete:
        p, st = init(key(0))
        return (p, st, jax.random.normal(key(1), (b, 16, 16, 3)),
                jax.random.randint(key(2), (b,), 0, NC, jnp.int32))
    p, st = jax.eval_shape(init, key(0))
    return p, st, SDS((b, 16, 16, 3), jnp.float32), SDS((b,), jnp.int32)


# ---------------------------------------------------------------------------------------------
# 6a. rms norm + rotary embeddings (sin/cos, concatenate) + argmax accuracy output, adamw
# ---------------------------------------------------------------------------------------------
def rms_norm(x, g, eps=1e-6):
    return x * lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + eps) * g


def rope(x):  # x: [B, S, H, Dh]
    s, dh = x.shape[1], x.shape[-1]
    inv = 1.0 / (10000 ** (jnp.arange(0, dh // 2, dtype=jnp.float32) / (dh // 2)))
    t = jnp.arange(s, dtype=jnp.float32)
    ang = t[:, None] * inv[None, :]  # [S, Dh/2]
    sin, cos = jnp.sin(ang)[None, :, None, :], jnp.cos(ang)[None, :, None, :]
    x1, x2 = x[..., : dh // 2], x[..., dh // 2:]
    return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)


def init_rope(k):
    ks = jax.random.split(k, 5)
    return {"wte": normal(ks[0], (V, D)), "g1": jnp.ones(D), "wqkv": normal(ks[1], (D, 3 * D)),
            "wo": normal(ks[2], (D, D)), "g2": jnp.ones(D), "w_up": normal(ks[3], (D, 2 * 4 * D)),
            "w_down": normal(ks[4], (4 * D, D)), "gf": jnp.ones(D)}


def rope_forward(p, tokens):
    b, s = tokens.shape
    x = jnp.take(p["wte"], tokens, axis=0)
    h = rms_norm(x, p["g1"])
    q, k_, v = jnp.split(h @ p["wqkv"], 3, -1)
    q, k_, v = (a.reshape(b, s, H, D // H) for a in (q, k_, v))
    q, k_ = rope(q), rope(k_)
    att = jnp.einsum("bqhd,bkhd->bhqk", q, k_) / math.sqrt(D // H)
    mask = jnp.tril(jnp.ones((s, s), bool))
    att = jnp.where(mask, att, -1e9)
    att = jax.nn.softmax(att, -1)
    x = x + jnp.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, s, D) @ p["wo"]
    h = rms_norm(x, p["g2"])
    a, gate = jnp.split(h @ p["w_up"], 2, -1)
    x = x + (jax.nn.silu(gate) * a) @ p["w_down"]
    return rms_norm(x, p["gf"]) @ p["wte"].T


ROPE_OPT = optax.adamw(1e-3)


def rope_step(params, opt_state, tokens, targets):
    def loss_fn(p):
        logits = rope_forward(p, tokens)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()
        acc = (jnp.argmax(logits, -1) == targets).astype(jnp.float32).mean()
        return loss, acc
    (loss, acc), g = jax.value_and_grad(loss_fn, has_aux=True)(params)
    upd, opt_state = ROPE_OPT.update(g, opt_state, params)
    return (loss, acc), optax.apply_updates(params, upd), opt_state


# ---------------------------------------------------------------------------------------------
# 6b. cumsum, sort, top_k, segment_sum in the loss (MLP regression on sequences), SGD
# ---------------------------------------------------------------------------------------------
NSEG = 4


def init_misc(k):
    k1, k2 = jax.random.split(k)
    return {"w": normal(k1, (D, D), 0.2), "v": normal(k2, (D, 1), 0.2)}


def misc_step(params, x, seg, target):
    # x: [B, S, D], seg: i32[B] segment ids in [0, NSEG), target: [NSEG]
    def loss_fn(p):
        h = jnp.tanh(x @ p["w"])                       # [B,S,D]
        c = jnp.cumsum(h, axis=1) / (jnp.arange(h.shape[1]) + 1.0)[None, :, None]
        srt = jnp.sort(c, axis=-1)                      # [B,S,D]
        top, _ = lax.top_k(srt[:, -1, :], 4)            # [B,4]
        score = (srt.mean(1) @ p["v"])[:, 0] + top.sum(-1)  # [B]
        per_seg = jax.ops.segment_sum(score, seg, num_segments=NSEG)
        return jnp.mean((per_seg - target) ** 2)
    loss, g = jax.value_and_grad(loss_fn)(params)
    return loss, jax.tree_util.tree_map(lambda a, b: a - 0.05 * b, params, g)


def misc_args(dims, concrete):
    b, s = dims["B"], dims["S"]
    if concrete:
        return (init_misc(key(0)), jax.random.normal(key(1), (b, s, D)),
                jax.random.randint(key(2), (b,), 0, NSEG, jnp.int32),
                jax.random.normal(key(3), (NSEG,)))
    return (jax.eval_shape(init_misc, key(0)), SDS((b, s, D), jnp.float32), SDS((b,), jnp.int32),
            SDS((NSEG,), jnp.float32))


# ---------------------------------------------------------------------------------------------
# 7. explicit int step input with a schedule (inject_hyperparams-free), plus dot_product_attention
#    with a padding mask from lengths (int input) and gelu tanh; step: i32[]
# ---------------------------------------------------------------------------------------------
def sched_step(params, opt_state, step, tokens, lengths, targets):
    lr = optax.cosine_decay_schedule(1e-3, 100)(step)

    def loss_fn(p):
        b, s = tokens.shape
        x = p["wte"][tokens] + p["wpe"][:s]
        blk = p["blocks"][0]
        h = layer_norm(x, blk["ln1_g"], blk["ln1_b"])
        q, k_, v = jnp.split(h @ blk["wqkv"] + blk["bqkv"], 3, -1)
        q, k_, v = (a.reshape(b, s, H, D // H) for a in (q, k_, v))
        a = jax.nn.dot_product_attention(q, k_, v, query_seq_lengths=lengths,
                                         key_value_seq_lengths=lengths)
        x = x + a.reshape(b, s, D) @ blk["wo"]
        logits = layer_norm(x, p["lnf_g"], p["lnf_b"]) @ p["wte"].T
        valid = (jnp.arange(s)[None, :] < lengths[:, None]).astype(jnp.float32)
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, targets)
        return (ce * valid).sum() / valid.sum()
    loss, g = jax.value_and_grad(loss_fn)(params)
    upd, opt_state = SCHED_OPT.update(g, opt_state, params)
    upd = jax.tree_util.tree_map(lambda u: u * lr, upd)
    return loss, optax.apply_updates(params, upd), opt_state, step + 1


SCHED_OPT = optax.scale_by_adam()


def sched_args(dims, concrete):
    init = with_opt(init_tfm, SCHED_OPT)
    b, s = dims["B"], dims["S"]
    if concrete:
        p, st = init(key(0))
        return (p, st, jnp.int32(5), jax.random.randint(key(1), (b, s), 0, V, jnp.int32),
                jnp.maximum(1, s - jnp.arange(b, dtype=jnp.int32)),
                jax.random.randint(key(2), (b, s), 0, V, jnp.int32))
    p, st = jax.eval_shape(init, key(0))
    return (p, st, SDS((), jnp.int32), SDS((b, s), jnp.int32), SDS((b,), jnp.int32),
            SDS((b, s), jnp.int32))


ALL = {
    "jx_tfm_sdpa_erf_adamw_sched": (tfm_step, "B, S", (f"S <= {NPOS}",),
                                    tokens_args(with_opt(init_tfm, TFM_OPT), V), {"B": 2, "S": 16}),
    "jx_emb_mlp_adam_ls": (emlp_step, "B, S", (), emlp_args, {"B": 4, "S": 5}),
    "jx_scan_remat_dots": (scan_remat_step, "B, S", (), scan_args, {"B": 3, "S": 6}),
    "jx_bf16_lossscale": (bf16_step, "B", (), bf16_args, {"B": 8}),
    "jx_cnn_nhwc_avgpool": (cnn_step, "B", (), cnn_args, {"B": 4}),
    "jx_rope_rms_acc": (rope_step, "B, S", (), tokens_args(with_opt(init_rope, ROPE_OPT), V),
                        {"B": 2, "S": 12}),
    "jx_cumsum_sort_topk_segsum": (misc_step, "B, S", (), misc_args, {"B": 6, "S": 5}),
    "jx_sdpa_lengths_stepin": (sched_step, "B, S", (f"S <= {NPOS}",), sched_args,
                               {"B": 3, "S": 10}),
}

if __name__ == "__main__":
    todo = sys.argv[1:] or list(ALL)
    for n in todo:
        step, syms, cons, mk, bind = ALL[n]
        export(n, step, syms, cons, mk, bind)
