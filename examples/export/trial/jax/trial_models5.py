"""Fifth batch of JAX trial models: layer kinds not in batches 1-4 — a GRU language model
(`lax.scan` over S), a ResNet-style CNN with BatchNorm whose running statistics are threaded
through the step (SGD with momentum and weight decay), a graph network (message passing by
`jnp.take` gathers and `jax.ops.segment_sum` over a symbolic edge count into a symbolic node
count), a WaveNet-style stack of dilated causal 1-D convolutions with gated activations, a
Perceiver-style cross-attention from a fixed latent array to a symbolic-length input, and a
DLRM-style model (embedding bags by gather + sum, a pairwise feature-interaction dot); plain JAX
+ optax at widths of 64-128.
/work/main/.venv-jax/bin/python /tmp/trial/jax/trial_models5.py [names]"""
import math
import sys

import jax
import jax.numpy as jnp
import optax
from jax import lax

from harness import export
from trial_models import key, layer_norm, normal, with_opt
from trial_models4 import ce, step_of

SDS = jax.ShapeDtypeStruct
NC5, V5 = 10, 512


# a) GRU language model over a symbolic length: embedding -> one GRU layer (`lax.scan` over S,
#    fused input projection outside the scan) -> tied-free head; next-token loss; AdamW with
#    global-norm clipping
GE, GH = 64, 128


def init_gru(k):
    ks = iter(jax.random.split(k, 8))
    return {"emb": normal(next(ks), (V5, GE), 0.1), "wx": normal(next(ks), (GE, 3 * GH), 0.1),
            "wh": normal(next(ks), (GH, 3 * GH), 0.1), "bx": jnp.zeros(3 * GH), "bh": jnp.zeros(3 * GH),
            "head": normal(next(ks), (GH, V5), 0.1)}


GRU_OPT = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3, weight_decay=0.01))


def gru_loss(p, tokens, targets):
    b = tokens.shape[0]
    xs = jnp.swapaxes(p["emb"][tokens], 0, 1) @ p["wx"] + p["bx"]            # [S, B, 3GH]

    def cell(h, xz):
        hz = h @ p["wh"] + p["bh"]
        xr, xu, xn = jnp.split(xz, 3, -1)
        hr, hu, hn = jnp.split(hz, 3, -1)
        r, u = jax.nn.sigmoid(xr + hr), jax.nn.sigmoid(xu + hu)
        n = jnp.tanh(xn + r * hn)
        h = (1.0 - u) * n + u * h
        return h, h
    hs = lax.scan(cell, jnp.zeros((b, GH)), xs)[1]                          # [S, B, GH]
    return ce(jnp.swapaxes(hs, 0, 1) @ p["head"], targets)


def tokens_args(init_fn, opt):
    def make(dims, concrete):
        init = with_opt(init_fn, opt)
        b, s = dims["B"], dims["S"]
        if concrete:
            p, st = init(key(0))
            return p, st, jax.random.randint(key(1), (b, s), 0, V5), jax.random.randint(key(2), (b, s), 0, V5)
        p, st = jax.eval_shape(init, key(0))
        return p, st, SDS((b, s), jnp.int32), SDS((b, s), jnp.int32)
    return make


# b) ResNet-style CNN on 32x32 images: a 3x3 stem, two basic blocks (3x3 conv -> BatchNorm ->
#    ReLU -> 3x3 conv -> BatchNorm, residual; the second strided with a 1x1 projection), global
#    average pool; BatchNorm running means/variances are inputs and outputs of the step; SGD
#    with momentum and decoupled weight decay
RC = 64
BN_MOM = 0.9


def init_resnet(k):
    ks = iter(jax.random.split(k, 16))
    conv = lambda kh, ci, co: normal(next(ks), (kh, kh, ci, co), math.sqrt(2.0 / (kh * kh * ci)))
    bn = lambda c: {"g": jnp.ones(c), "b": jnp.zeros(c)}
    return {"stem": conv(3, 3, RC), "bn0": bn(RC),
            "blocks": [{"c1": conv(3, RC, RC), "bn1": bn(RC), "c2": conv(3, RC, RC), "bn2": bn(RC)},
                       {"c1": conv(3, RC, 2 * RC), "bn1": bn(2 * RC), "c2": conv(3, 2 * RC, 2 * RC),
                        "bn2": bn(2 * RC), "proj": conv(1, RC, 2 * RC), "bnp": bn(2 * RC)}],
            "head": normal(next(ks), (2 * RC, NC5))}


def init_bn_stats():
    st = lambda c: {"mean": jnp.zeros(c), "var": jnp.ones(c)}
    return {"bn0": st(RC), "blocks": [{"bn1": st(RC), "bn2": st(RC)},
                                      {"bn1": st(2 * RC), "bn2": st(2 * RC), "bnp": st(2 * RC)}]}


RESNET_OPT = optax.chain(optax.add_decayed_weights(5e-4), optax.sgd(0.1, momentum=0.9, nesterov=True))


def batch_norm(x, p, st, eps=1e-5):
    mu = x.mean((0, 1, 2))
    var = x.var((0, 1, 2))
    y = (x - mu) * lax.rsqrt(var + eps) * p["g"] + p["b"]
    new = {"mean": BN_MOM * st["mean"] + (1 - BN_MOM) * lax.stop_gradient(mu),
           "var": BN_MOM * st["var"] + (1 - BN_MOM) * lax.stop_gradient(var)}
    return y, new


def resnet_loss(p, stats, images, labels):
    dn = ("NHWC", "HWIO", "NHWC")
    conv = lambda x, w, s=1: lax.conv_general_dilated(x, w, (s, s), "SAME", dimension_numbers=dn)
    x, s0 = batch_norm(conv(images, p["stem"]), p["bn0"], stats["bn0"])
    x = jax.nn.relu(x)
    new_blocks = []
    for i, (blk, st) in enumerate(zip(p["blocks"], stats["blocks"])):
        stride = 1 if i == 0 else 2
        h, n1 = batch_norm(conv(x, blk["c1"], stride), blk["bn1"], st["bn1"])
        h, n2 = batch_norm(conv(jax.nn.relu(h), blk["c2"]), blk["bn2"], st["bn2"])
        ns = {"bn1": n1, "bn2": n2}
        if "proj" in blk:
            x, ns["bnp"] = batch_norm(conv(x, blk["proj"], stride), blk["bnp"], st["bnp"])
        x = jax.nn.relu(x + h)
        new_blocks.append(ns)
    return ce(x.mean((1, 2)) @ p["head"], labels), {"bn0": s0, "blocks": new_blocks}


def resnet_step(params, stats, opt_state, images, labels):
    (loss, stats), g = jax.value_and_grad(resnet_loss, has_aux=True)(params, stats, images, labels)
    upd, opt_state = RESNET_OPT.update(g, opt_state, params)
    return loss, optax.apply_updates(params, upd), stats, opt_state


def resnet_args(dims, concrete):
    init = with_opt(init_resnet, RESNET_OPT)
    b = dims["B"]
    if concrete:
        p, st = init(key(0))
        return (p, init_bn_stats(), st, jax.random.normal(key(1), (b, 32, 32, 3)),
                jax.random.randint(key(2), (b,), 0, NC5))
    p, st = jax.eval_shape(init, key(0))
    return p, jax.eval_shape(init_bn_stats), st, SDS((b, 32, 32, 3), jnp.float32), SDS((b,), jnp.int32)


# c) graph network: N nodes with features, E directed edges (src, dst), three rounds of message
#    passing (messages from `jnp.take` of sender states and an edge MLP, summed into receivers by
#    `jax.ops.segment_sum` with N segments, degree-normalized), a node-classification loss; Adam
GF, GD = 32, 96


def init_gnn(k):
    ks = iter(jax.random.split(k, 16))
    layers = [{"wm": normal(next(ks), (2 * GD, GD), 0.1), "bm": jnp.zeros(GD),
               "wu": normal(next(ks), (2 * GD, GD), 0.1), "bu": jnp.zeros(GD),
               "ln_g": jnp.ones(GD), "ln_b": jnp.zeros(GD)} for _ in range(3)]
    return {"enc": normal(next(ks), (GF, GD), 0.1), "layers": layers, "out": normal(next(ks), (GD, NC5), 0.1)}


GNN_OPT = optax.adam(3e-3)


def gnn_loss(p, feats, src, dst, labels):
    n = feats.shape[0]
    h = jax.nn.relu(feats @ p["enc"])                                       # [N, GD]
    deg = jax.ops.segment_sum(jnp.ones(src.shape, jnp.float32), dst, num_segments=n)
    for ly in p["layers"]:
        hs, hd = jnp.take(h, src, axis=0), jnp.take(h, dst, axis=0)          # [E, GD]
        m = jax.nn.relu(jnp.concatenate([hs, hd], -1) @ ly["wm"] + ly["bm"])
        agg = jax.ops.segment_sum(m, dst, num_segments=n) / jnp.maximum(deg, 1.0)[:, None]
        h = h + jax.nn.relu(jnp.concatenate([h, agg], -1) @ ly["wu"] + ly["bu"])
        h = layer_norm(h, ly["ln_g"], ly["ln_b"])
    return ce(h @ p["out"], labels)


def gnn_args(dims, concrete):
    init = with_opt(init_gnn, GNN_OPT)
    n, e = dims["N"], dims["E"]
    if concrete:
        p, st = init(key(0))
        return (p, st, jax.random.normal(key(1), (n, GF)), jax.random.randint(key(2), (e,), 0, n),
                jax.random.randint(key(3), (e,), 0, n), jax.random.randint(key(4), (n,), 0, NC5))
    p, st = jax.eval_shape(init, key(0))
    return (p, st, SDS((n, GF), jnp.float32), SDS((e,), jnp.int32), SDS((e,), jnp.int32),
            SDS((n,), jnp.int32))


# d) WaveNet-style stack over a symbolic length T: a causal 1x1 input projection, six gated
#    residual layers of dilated causal conv1d (kernel 2, dilations 1..32, left padding) with
#    tanh * sigmoid gates, residual and skip 1x1 convs, a per-step 256-way softmax over
#    quantized samples; Adam
WR, WS, WQ = 64, 64, 256
DILS = (1, 2, 4, 8, 16, 32)


def init_wavenet(k):
    ks = iter(jax.random.split(k, 32))
    layers = [{"wf": normal(next(ks), (2, WR, WR), 0.1), "wg": normal(next(ks), (2, WR, WR), 0.1),
               "bf": jnp.zeros(WR), "bg": jnp.zeros(WR), "wr": normal(next(ks), (1, WR, WR), 0.1),
               "ws": normal(next(ks), (1, WR, WS), 0.1)} for _ in DILS]
    return {"emb": normal(next(ks), (WQ, WR), 0.1), "layers": layers,
            "o1": normal(next(ks), (WS, WS), 0.1), "o2": normal(next(ks), (WS, WQ), 0.1)}


WAVENET_OPT = optax.adam(1e-3)


def causal_conv(x, w, dil):
    """x [B, T, C], w [K, C, O]: causal (left-padded) dilated convolution, output [B, T, O]."""
    pad = (w.shape[0] - 1) * dil
    return lax.conv_general_dilated(x, w, (1,), [(pad, 0)], rhs_dilation=(dil,),
                                    dimension_numbers=("NWC", "WIO", "NWC"))


def wavenet_loss(p, samples, targets):
    x = p["emb"][samples]                                                   # [B, T, WR]
    skip = 0.0
    for ly, d in zip(p["layers"], DILS):
        z = jnp.tanh(causal_conv(x, ly["wf"], d) + ly["bf"]) * jax.nn.sigmoid(causal_conv(x, ly["wg"], d) + ly["bg"])
        skip = skip + causal_conv(z, ly["ws"], 1)
        x = x + causal_conv(z, ly["wr"], 1)
    logits = jax.nn.relu(jax.nn.relu(skip) @ p["o1"]) @ p["o2"]
    return ce(logits, targets)


def wavenet_args(dims, concrete):
    init = with_opt(init_wavenet, WAVENET_OPT)
    b, t = dims["B"], dims["T"]
    if concrete:
        p, st = init(key(0))
        return p, st, jax.random.randint(key(1), (b, t), 0, WQ), jax.random.randint(key(2), (b, t), 0, WQ)
    p, st = jax.eval_shape(init, key(0))
    return p, st, SDS((b, t), jnp.int32), SDS((b, t), jnp.int32)


# e) Perceiver-style: a learned latent array [32, 128] cross-attends to a symbolic-length input
#    [B, S, 64] (with a key padding mask from lengths), two latent self-attention blocks, mean
#    pool and a classifier; LAMB
PL, PD, PI, PH = 32, 128, 64, 4


def init_perceiver(k):
    ks = iter(jax.random.split(k, 32))
    attn = lambda dq, dkv: {"wq": normal(next(ks), (dq, PD)), "wk": normal(next(ks), (dkv, PD)),
                            "wv": normal(next(ks), (dkv, PD)), "wo": normal(next(ks), (PD, PD)),
                            "n_g": jnp.ones(dq), "n_b": jnp.zeros(dq)}
    mlp = lambda: {"w1": normal(next(ks), (PD, 2 * PD)), "w2": normal(next(ks), (2 * PD, PD)),
                   "n_g": jnp.ones(PD), "n_b": jnp.zeros(PD)}
    return {"latents": normal(next(ks), (PL, PD), 1.0), "inp": normal(next(ks), (PI, PI), 0.1),
            "cross": attn(PD, PI), "cross_mlp": mlp(),
            "selfs": [{"attn": attn(PD, PD), "mlp": mlp()} for _ in range(2)],
            "head": normal(next(ks), (PD, NC5))}


PERCEIVER_OPT = optax.lamb(1e-3)


def mha(a, q_in, kv_in, mask):
    b = q_in.shape[0]
    hd = PD // PH
    q = (q_in @ a["wq"]).reshape(b, -1, PH, hd)
    k = (kv_in @ a["wk"]).reshape(b, -1, PH, hd)
    v = (kv_in @ a["wv"]).reshape(b, -1, PH, hd)
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(hd)
    if mask is not None:
        s = jnp.where(mask[:, None, None, :], s, -1e9)
    o = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1), v).reshape(b, -1, PD)
    return o @ a["wo"]


def mlp_block(m, x):
    return jax.nn.gelu(layer_norm(x, m["n_g"], m["n_b"]) @ m["w1"]) @ m["w2"]


def perceiver_loss(p, inputs, lengths, labels):
    b, s, _ = inputs.shape
    x = inputs @ p["inp"]
    mask = jnp.arange(s)[None, :] < lengths[:, None]                        # [B, S]
    lat = jnp.broadcast_to(p["latents"], (b, PL, PD))
    c = p["cross"]
    lat = lat + mha(c, layer_norm(lat, c["n_g"], c["n_b"]), x, mask)
    lat = lat + mlp_block(p["cross_mlp"], lat)
    for blk in p["selfs"]:
        a = blk["attn"]
        h = layer_norm(lat, a["n_g"], a["n_b"])
        lat = lat + mha(a, h, h, None)
        lat = lat + mlp_block(blk["mlp"], lat)
    return ce(lat.mean(1) @ p["head"], labels)


def perceiver_args(dims, concrete):
    init = with_opt(init_perceiver, PERCEIVER_OPT)
    b, s = dims["B"], dims["S"]
    if concrete:
        p, st = init(key(0))
        return (p, st, jax.random.normal(key(1), (b, s, PI)),
                jnp.maximum(1, s - 3 * jnp.arange(b, dtype=jnp.int32)), jax.random.randint(key(2), (b,), 0, NC5))
    p, st = jax.eval_shape(init, key(0))
    return p, st, SDS((b, s, PI), jnp.float32), SDS((b,), jnp.int32), SDS((b,), jnp.int32)


# f) DLRM-style click model: 13 dense features through a bottom MLP, 8 sparse features each an
#    embedding bag of a fixed 4 indices into its own table (gather + sum), the pairwise dot
#    interaction of the 9 vectors (upper triangle by a static index gather), a top MLP and a
#    sigmoid binary cross-entropy; Adagrad
DD, DS, DB, DT, DEMB = 13, 8, 4, 1000, 64


def init_dlrm(k):
    ks = iter(jax.random.split(k, 16))
    nint = (DS + 1) * DS // 2
    return {"tables": normal(next(ks), (DS, DT, DEMB), 0.1),
            "b1": normal(next(ks), (DD, 128), 0.1), "b2": normal(next(ks), (128, DEMB), 0.1),
            "t1": normal(next(ks), (DEMB + nint, 128), 0.1), "t2": normal(next(ks), (128, 64), 0.1),
            "t3": normal(next(ks), (64, 1), 0.1)}


DLRM_OPT = optax.adagrad(1e-2)


def dlrm_loss(p, dense, sparse, clicks):
    x = jax.nn.relu(jax.nn.relu(dense @ p["b1"]) @ p["b2"])                  # [B, DEMB]
    tbl = jnp.arange(DS)[None, :, None]                                     # [1, DS, 1]
    bags = p["tables"][tbl, sparse].sum(2)                                  # [B, DS, DEMB]
    z = jnp.concatenate([x[:, None], bags], 1)                              # [B, DS+1, DEMB]
    inter = jnp.einsum("bid,bjd->bij", z, z)
    iu, ju = jnp.triu_indices(DS + 1, 1)
    feats = jnp.concatenate([x, inter[:, iu, ju]], -1)
    logit = (jax.nn.relu(jax.nn.relu(feats @ p["t1"]) @ p["t2"]) @ p["t3"])[:, 0]
    return optax.sigmoid_binary_cross_entropy(logit, clicks).mean()


def dlrm_args(dims, concrete):
    init = with_opt(init_dlrm, DLRM_OPT)
    b = dims["B"]
    if concrete:
        p, st = init(key(0))
        return (p, st, jax.random.normal(key(1), (b, DD)), jax.random.randint(key(2), (b, DS, DB), 0, DT),
                jax.random.bernoulli(key(3), 0.3, (b,)).astype(jnp.float32))
    p, st = jax.eval_shape(init, key(0))
    return p, st, SDS((b, DD), jnp.float32), SDS((b, DS, DB), jnp.int32), SDS((b,), jnp.float32)


ALL = {
    "jx5_gru_lm": (step_of(gru_loss, GRU_OPT), "B, S", (), tokens_args(init_gru, GRU_OPT), {"B": 3, "S": 9}),
    "jx5_resnet_bn_sgdwd": (resnet_step, "B", (), resnet_args, {"B": 3}),
    "jx5_gnn_segsum": (step_of(gnn_loss, GNN_OPT), "N, E", (), gnn_args, {"N": 13, "E": 40}),
    "jx5_wavenet_dilated": (step_of(wavenet_loss, WAVENET_OPT), "B, T", (), wavenet_args, {"B": 2, "T": 70}),
    "jx5_perceiver_xattn": (step_of(perceiver_loss, PERCEIVER_OPT), "B, S", (), perceiver_args, {"B": 3, "S": 11}),
    "jx5_dlrm_embag": (step_of(dlrm_loss, DLRM_OPT), "B", (), dlrm_args, {"B": 5}),
}

if __name__ == "__main__":
    for n in sys.argv[1:] or list(ALL):
        export(n, *ALL[n])
