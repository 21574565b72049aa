"""Flax trial models: a linen CNN classifier (BatchNorm in training mode, Dropout, Dense) and an
NNX transformer classifier, trained by optax, exported by the same harness.
Needs flax beside the `.venv-jax` versions of jax and optax, in its own venv:
  python3 -m venv /work/venv-flax && /work/venv-flax/bin/pip install jax==0.10.2 jaxlib==0.10.2 \
      optax==0.2.8 numpy==2.4.6 flax
  /work/venv-flax/bin/python /tmp/trial/jax/trial_models_flax.py [names]"""
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from flax import nnx

from harness import export

SDS = jax.ShapeDtypeStruct
NC = 10


# a) linen: conv / BatchNorm (batch statistics, running averages returned) / ReLU / avg pool,
#    Dropout from a key input, Dense head; AdamW
class LinenCNN(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool):
        for ch in (32, 64):
            x = nn.Conv(ch, (3, 3))(x)
            x = nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)
            x = nn.relu(x)
            x = nn.avg_pool(x, (2, 2), (2, 2))
        x = x.reshape(x.shape[0], -1)
        x = nn.Dense(128)(x)
        x = nn.Dropout(0.1, deterministic=not train)(nn.relu(x))
        return nn.Dense(NC)(x)


LINEN = LinenCNN()
LINEN_OPT = optax.adamw(1e-3, weight_decay=1e-4)
IMG = 16


def linen_init(k):
    v = LINEN.init({"params": k}, jnp.zeros((1, IMG, IMG, 3)), train=False)
    return v["params"], v["batch_stats"], LINEN_OPT.init(v["params"])


def linen_step(params, batch_stats, opt_state, rng, x, y):
    rng, drop = jax.random.split(rng)

    def loss_fn(p):
        logits, upd = LINEN.apply({"params": p, "batch_stats": batch_stats}, x, train=True,
                                  rngs={"dropout": drop}, mutable=["batch_stats"])
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), upd
    (loss, upd), g = jax.value_and_grad(loss_fn, has_aux=True)(params)
    u, opt_state = LINEN_OPT.update(g, opt_state, params)
    return loss, optax.apply_updates(params, u), upd["batch_stats"], opt_state, rng


def linen_args(dims, concrete):
    b = dims["B"]
    if concrete:
        p, bs, st = linen_init(jax.random.PRNGKey(0))
        return (p, bs, st, jax.random.PRNGKey(3), jax.random.normal(jax.random.PRNGKey(1), (b, IMG, IMG, 3)),
                jax.random.randint(jax.random.PRNGKey(2), (b,), 0, NC))
    p, bs, st = jax.eval_shape(linen_init, jax.random.PRNGKey(0))
    return (p, bs, st, jax.eval_shape(lambda: jax.random.PRNGKey(3)), SDS((b, IMG, IMG, 3), jnp.float32),
            SDS((b,), jnp.int32))


# b) NNX: embedding, one pre-LN block (nnx.MultiHeadAttention, LayerNorm, Linear, GELU), mean
#    pooling, a Linear head; the model split into graph and state, the step a pure function of the
#    state; Adam
V, D = 256, 64


class NnxBlock(nnx.Module):
    def __init__(self, rngs):
        self.ln1, self.ln2 = nnx.LayerNorm(D, rngs=rngs), nnx.LayerNorm(D, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(num_heads=4, in_features=D, decode=False, rngs=rngs)
        self.fc1, self.fc2 = nnx.Linear(D, 4 * D, rngs=rngs), nnx.Linear(4 * D, D, rngs=rngs)

    def __call__(self, x, mask):
        x = x + self.attn(self.ln1(x), mask=mask)
        return x + self.fc2(nnx.gelu(self.fc1(self.ln2(x))))


class NnxClassifier(nnx.Module):
    def __init__(self, rngs):
        self.emb = nnx.Embed(V, D, rngs=rngs)
        self.blk = NnxBlock(rngs)
        self.head = nnx.Linear(D, NC, rngs=rngs)

    def __call__(self, tokens, lengths):
        s = tokens.shape[1]
        valid = jnp.arange(s)[None, :] < lengths[:, None]
        mask = nnx.make_attention_mask(valid, valid)
        x = self.blk(self.emb(tokens), mask)
        x = (x * valid[..., None]).sum(1) / jnp.maximum(lengths, 1)[:, None]
        return self.head(x)


GRAPH, _ = nnx.split(NnxClassifier(nnx.Rngs(0)))
NNX_OPT = optax.adam(1e-3)


def nnx_init(k):
    _, state = nnx.split(NnxClassifier(nnx.Rngs(k)))
    state = nnx.to_pure_dict(state)
    return state, NNX_OPT.init(state)


def nnx_step(state, opt_state, tokens, lengths, y):
    def loss_fn(s):
        model = nnx.merge(GRAPH, s)
        return optax.softmax_cross_entropy_with_integer_labels(model(tokens, lengths), y).mean()
    loss, g = jax.value_and_grad(loss_fn)(state)
    u, opt_state = NNX_OPT.update(g, opt_state, state)
    return loss, optax.apply_updates(state, u), opt_state


def nnx_args(dims, concrete):
    b, s = dims["B"], dims["S"]
    if concrete:
        st, o = nnx_init(0)
        return (st, o, jax.random.randint(jax.random.PRNGKey(1), (b, s), 0, V),
                jnp.maximum(1, s - jnp.arange(b, dtype=jnp.int32)), jax.random.randint(jax.random.PRNGKey(2), (b,), 0, NC))
    st, o = jax.eval_shape(lambda: nnx_init(0))
    return st, o, SDS((b, s), jnp.int32), SDS((b,), jnp.int32), SDS((b,), jnp.int32)


ALL = {
    "fx_linen_cnn_bn_dropout": (linen_step, "B", (), linen_args, {"B": 4}),
    "fx_nnx_tfm_padmask": (nnx_step, "B, S", (), nnx_args, {"B": 3, "S": 9}),
}

if __name__ == "__main__":
    for n in sys.argv[1:] or list(ALL):
        export(n, *ALL[n])
