"""Second batch of JAX trial models. /work/main/.venv-jax/bin/python /tmp/trial/jax/trial_models2.py [names]"""
import sys
import jax, jax.numpy as jnp, optax
from jax import lax
from harness import export
from trial_models import normal, key, layer_norm, with_opt, D, NC, V

SDS = jax.ShapeDtypeStruct


# a) RNN (GRU-like cell) by lax.scan over the symbolic sequence axis S, adam
def init_rnn(k):
    ks = jax.random.split(k, 4)
    return {"emb": normal(ks[0], (V, D), 0.3), "wx": normal(ks[1], (D, 3 * D), 0.2),
            "wh": normal(ks[2], (D, 3 * D), 0.2), "out": normal(ks[3], (D, NC), 0.2)}

RNN_OPT = optax.adam(1e-3)

def rnn_step(params, opt_state, tokens, y):
    def loss_fn(p):
        x = p["emb"][tokens]  # [B,S,D]
        def cell(h, xt):
            gx, gh = xt @ p["wx"], h @ p["wh"]
            r = jax.nn.sigmoid(gx[:, :D] + gh[:, :D]); z = jax.nn.sigmoid(gx[:, D:2*D] + gh[:, D:2*D])
            n = jnp.tanh(gx[:, 2*D:] + r * gh[:, 2*D:])
            h = (1 - z) * n + z * h
            return h, h
        h0 = jnp.zeros((tokens.shape[0], D))
        h, hs = lax.scan(cell, h0, jnp.swapaxes(x, 0, 1))
        return optax.softmax_cross_entropy_with_integer_labels(h @ p["out"], y).mean()
    loss, g = jax.value_and_grad(loss_fn)(params)
    upd, opt_state = RNN_OPT.update(g, opt_state, params)
    return loss, optax.apply_updates(params, upd), opt_state

def rnn_args(dims, concrete):
    init = with_opt(init_rnn, RNN_OPT); b, s = dims["B"], dims["S"]
    if concrete:
        p, st = init(key(0))
        return p, st, jax.random.randint(key(1), (b, s), 0, V), jax.random.randint(key(2), (b,), 0, NC)
    p, st = jax.eval_shape(init, key(0))
    return p, st, SDS((b, s), jnp.int32), SDS((b,), jnp.int32)


# b) gradient accumulation over 4 microbatches with lax.fori_loop (dynamic_slice on 4*m batch)
def init_mlp(k):
    k1, k2 = jax.random.split(k)
    return {"w1": normal(k1, (32, 64), 0.2), "b1": jnp.zeros(64), "w2": normal(k2, (64, NC), 0.2)}

def accum_step(params, x, y):
    nmb = 4
    mb = x.shape[0] // nmb
    def loss_fn(p, xb, yb):
        return optax.softmax_cross_entropy_with_integer_labels(
            jax.nn.relu(xb @ p["w1"] + p["b1"]) @ p["w2"], yb).mean()
    def body(i, carry):
        gacc, lacc = carry
        xb = lax.dynamic_slice_in_dim(x, i * mb, mb); yb = lax.dynamic_slice_in_dim(y, i * mb, mb)
        l, g = jax.value_and_grad(loss_fn)(params, xb, yb)
        return jax.tree_util.tree_map(jnp.add, gacc, g), lacc + l
    g0 = jax.tree_util.tree_map(jnp.zeros_like, params)
    g, l = lax.fori_loop(0, nmb, body, (g0, 0.0))
    gnorm = optax.global_norm(g)
    return l / nmb, gnorm, jax.tree_util.tree_map(lambda a, b: a - 0.05 * b / nmb, params, g)

def accum_args(dims, concrete):
    m = dims["m"]
    if concrete:
        return init_mlp(key(0)), jax.random.normal(key(1), (4 * m, 32)), jax.random.randint(key(2), (4 * m,), 0, NC)
    return jax.eval_shape(init_mlp, key(0)), SDS((4 * m, 32), jnp.float32), SDS((4 * m,), jnp.int32)


# c) dropout from a new-style typed key (jax.random.key) split per step; key is an input and output
def drop_step(params, rng, x, y):
    rng, sub = jax.random.split(rng)
    def loss_fn(p):
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        keep = jax.random.bernoulli(sub, 0.9, h.shape)
        h = jnp.where(keep, h / 0.9, 0.0)
        return optax.softmax_cross_entropy_with_integer_labels(h @ p["w2"], y).mean()
    loss, g = jax.value_and_grad(loss_fn)(params)
    return loss, jax.tree_util.tree_map(lambda a, b: a - 0.05 * b, params, g), rng

def drop_args(dims, concrete):
    b = dims["B"]
    if concrete:
        return init_mlp(key(0)), jax.random.key(3), jax.random.normal(key(1), (b, 32)), jax.random.randint(key(2), (b,), 0, NC)
    return (jax.eval_shape(init_mlp, key(0)), jax.eval_shape(lambda: jax.random.key(3)),
            SDS((b, 32), jnp.float32), SDS((b,), jnp.int32))


# d) misc: cumsum along a static axis, argsort, linalg.norm, checkpoint_name + save_only_these_names,
#    nanmean, stop_gradient
from jax.ad_checkpoint import checkpoint_name

def misc2_step(params, x, y):
    def loss_fn(p):
        def blk(h):
            z = checkpoint_name(h @ p["w1"], "proj")
            return jnp.tanh(z) @ p["w2"]
        blk = jax.checkpoint(blk, policy=jax.checkpoint_policies.save_only_these_names("proj"))
        h = blk(x)                                   # [B, NC]
        c = jnp.cumsum(h, axis=1)                    # static axis
        order = jnp.argsort(lax.stop_gradient(h), axis=1)
        hs = jnp.take_along_axis(h, order, axis=1)
        n = jnp.linalg.norm(hs, axis=1)
        return jnp.nanmean(c[:, -1] ** 2) + optax.softmax_cross_entropy_with_integer_labels(hs, y).mean() + 1e-3 * n.mean()
    loss, g = jax.value_and_grad(loss_fn)(params)
    return loss, jax.tree_util.tree_map(lambda a, b: a - 0.05 * b, params, g)

def misc2_args(dims, concrete):
    b = dims["B"]
    if concrete:
        return init_mlp(key(0)), jax.random.normal(key(1), (b, 32)), jax.random.randint(key(2), (b,), 0, NC)
    return jax.eval_shape(init_mlp, key(0)), SDS((b, 32), jnp.float32), SDS((b,), jnp.int32)


ALL = {
    "jx_rnn_scan_over_S": (rnn_step, "B, S", (), rnn_args, {"B": 3, "S": 6}),
    "jx_grad_accum_fori": (accum_step, "m", (), accum_args, {"m": 2}),
    "jx_typed_key_dropout": (drop_step, "B", (), drop_args, {"B": 8}),
    "jx_misc_cumsum_static_argsort_names": (misc2_step, "B", (), misc2_args, {"B": 5}),
}
if __name__ == "__main__":
    for n in sys.argv[1:] or list(ALL):
        export(n, *ALL[n])


# d2) misc2 without the named-checkpoint policy (isolates cumsum static axis, argsort, norm, nanmean)
def misc3_step(params, x, y):
    def loss_fn(p):
        h = jnp.tanh(x @ p["w1"]) @ p["w2"]
        c = jnp.cumsum(h, axis=1)
        order = jnp.argsort(lax.stop_gradient(h), axis=1)
        hs = jnp.take_along_axis(h, order, axis=1)
        n = jnp.linalg.norm(hs, axis=1)
        return jnp.nanmean(c[:, -1] ** 2) + optax.softmax_cross_entropy_with_integer_labels(hs, y).mean() + 1e-3 * n.mean()
    loss, g = jax.value_and_grad(loss_fn)(params)
    return loss, jax.tree_util.tree_map(lambda a, b: a - 0.05 * b, params, g)

if __name__ == "__main__":
    export("jx_misc_cumsum_static_argsort_nockpt", misc3_step, "B", (), misc2_args, {"B": 5})
