"""Symbolic-dim expression repros. /work/main/.venv-jax/bin/python /tmp/trial/jax/min_repros2.py"""
import jax, jax.numpy as jnp
import harness
harness.OUT = harness.Path(__file__).resolve().parent / "min"
SDS = jax.ShapeDtypeStruct

def step(w, x, y):
    def f(w):
        l = x @ w
        return (jax.nn.log_softmax(l) * jax.nn.one_hot(y, 4)).sum()
    l, g = jax.value_and_grad(f)(w)
    return l, w - 0.1 * g

def mk_mul(dims, concrete):  # x:(4*m, 8) y:(4*m,)
    m = dims["m"]
    if concrete:
        return jnp.ones((8, 4)) * 0.1, jax.random.normal(jax.random.PRNGKey(1), (4 * m, 8)), jnp.arange(4 * m) % 4
    return SDS((8, 4), jnp.float32), SDS((4 * m, 8), jnp.float32), SDS((4 * m,), jnp.int32)

def step_flat(w, x, y):  # x: (B,S,8), y: (B*S,)
    def f(w):
        l = (x @ w).reshape(-1, 4)
        return (jax.nn.log_softmax(l) * jax.nn.one_hot(y, 4)).sum()
    l, g = jax.value_and_grad(f)(w)
    return l, w - 0.1 * g

def mk_flat(dims, concrete):
    b, s = dims["B"], dims["S"]
    if concrete:
        return jnp.ones((8, 4)) * 0.1, jax.random.normal(jax.random.PRNGKey(1), (b, s, 8)), jnp.arange(b * s) % 4
    return SDS((8, 4), jnp.float32), SDS((b, s, 8), jnp.float32), SDS((b * s,), jnp.int32)

def step_shift(emb, tokens):  # tokens: (B, S+1): inputs tokens[:, :-1], targets tokens[:, 1:]
    def f(e):
        l = e[tokens[:, :-1]] @ e.T
        return (jax.nn.log_softmax(l) * jax.nn.one_hot(tokens[:, 1:], 16)).sum()
    l, g = jax.value_and_grad(f)(emb)
    return l, emb - 0.1 * g

def mk_shift(dims, concrete):
    b, s = dims["B"], dims["S"]
    if concrete:
        return jax.random.normal(jax.random.PRNGKey(0), (16, 8)), jax.random.randint(jax.random.PRNGKey(1), (b, s + 1), 0, 16)
    return SDS((16, 8), jnp.float32), SDS((b, s + 1), jnp.int32)

harness.export("m_two_inputs_4m", step, "m", (), mk_mul, {"m": 2})
harness.export("m_labels_BxS", step_flat, "B, S", (), mk_flat, {"B": 2, "S": 3})
harness.export("m_tokens_S_plus_1", step_shift, "B, S", (), mk_shift, {"B": 2, "S": 5})
