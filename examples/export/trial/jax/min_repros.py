"""Minimal repros. /work/main/.venv-jax/bin/python /tmp/trial/jax/min_repros.py"""
import jax, jax.numpy as jnp, optax
from jax import lax
import harness
harness.OUT = harness.Path(__file__).resolve().parent / "min"
SDS = jax.ShapeDtypeStruct
D = 8

def take_step(emb, ids):
    def f(e):
        return jnp.take(e, ids, axis=0).sum()
    l, g = jax.value_and_grad(f)(emb)
    return l, emb - 0.1 * g

def index_step(emb, ids):
    def f(e):
        return e[ids].sum()
    l, g = jax.value_and_grad(f)(emb)
    return l, emb - 0.1 * g

def argmax_step(w, x):
    l = x @ w
    return jnp.argmax(l, -1), (jnp.argmax(l, -1) == 0).astype(jnp.float32).mean()

def cumsum_step(w, x):
    def f(w):
        return jnp.cumsum(x @ w, axis=1).sum()
    l, g = jax.value_and_grad(f)(w)
    return l, w - 0.1 * g

def scan_ckpt_policy(w, x):
    def f(w):
        def blk(h, wl):
            return jnp.tanh(h @ wl), None
        blk = jax.checkpoint(blk, policy=jax.checkpoint_policies.dots_saveable)
        h, _ = lax.scan(blk, x, w)
        return h.sum()
    l, g = jax.value_and_grad(f)(w)
    return l, w - 0.1 * g

def scan_ckpt_nopolicy(w, x):
    def f(w):
        def blk(h, wl):
            return jnp.tanh(h @ wl), None
        h, _ = lax.scan(jax.checkpoint(blk), x, w)
        return h.sum()
    l, g = jax.value_and_grad(f)(w)
    return l, w - 0.1 * g

def ckpt_policy_noscan(w, x):
    def f(w):
        blk = jax.checkpoint(lambda h, wl: jnp.tanh(h @ wl), policy=jax.checkpoint_policies.dots_saveable)
        h = x
        for i in range(3):
            h = blk(h, w[i])
        return h.sum()
    l, g = jax.value_and_grad(f)(w)
    return l, w - 0.1 * g

def segsum_sort_topk(w, x, seg):
    def f(w):
        s = x @ w  # [B, D]
        srt = jnp.sort(s, axis=-1)
        top, _ = lax.top_k(srt, 3)
        return jax.ops.segment_sum(top.sum(-1), seg, num_segments=4).sum()
    l, g = jax.value_and_grad(f)(w)
    return l, w - 0.1 * g

def mk_emb(dims, concrete):
    b, s = dims["B"], dims["S"]
    if concrete:
        return jax.random.normal(jax.random.PRNGKey(0), (16, D)), jax.random.randint(jax.random.PRNGKey(1), (b, s), 0, 16)
    return SDS((16, D), jnp.float32), SDS((b, s), jnp.int32)

def mk_wx(dims, concrete):
    b, s = dims["B"], dims["S"]
    if concrete:
        return jax.random.normal(jax.random.PRNGKey(0), (D, D)), jax.random.normal(jax.random.PRNGKey(1), (b, s, D))
    return SDS((D, D), jnp.float32), SDS((b, s, D), jnp.float32)

def mk_w3x(dims, concrete):
    b, s = dims["B"], dims["S"]
    if concrete:
        return jax.random.normal(jax.random.PRNGKey(0), (3, D, D)) * 0.3, jax.random.normal(jax.random.PRNGKey(1), (b, s, D))
    return SDS((3, D, D), jnp.float32), SDS((b, s, D), jnp.float32)

def mk_seg(dims, concrete):
    b = dims["B"]
    if concrete:
        return (jax.random.normal(jax.random.PRNGKey(0), (D, D)), jax.random.normal(jax.random.PRNGKey(1), (b, D)),
                jax.random.randint(jax.random.PRNGKey(2), (b,), 0, 4))
    return SDS((D, D), jnp.float32), SDS((b, D), jnp.float32), SDS((b,), jnp.int32)

BS = {"B": 3, "S": 5}
for name, step, mk, syms, bind in [
    ("m_take", take_step, mk_emb, "B, S", BS),
    ("m_index", index_step, mk_emb, "B, S", BS),
    ("m_argmax", argmax_step, mk_wx, "B, S", BS),
    ("m_cumsum_dynS", cumsum_step, mk_wx, "B, S", BS),
    ("m_scan_ckpt_policy", scan_ckpt_policy, mk_w3x, "B, S", BS),
    ("m_scan_ckpt_nopolicy", scan_ckpt_nopolicy, mk_w3x, "B, S", BS),
    ("m_ckpt_policy_noscan", ckpt_policy_noscan, mk_w3x, "B, S", BS),
    ("m_sort_topk_segsum", segsum_sort_topk, mk_seg, "B", {"B": 6}),
]:
    harness.export(name, step, syms, (), mk, bind)
