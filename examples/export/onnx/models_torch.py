"""PyTorch mirrors of the models in `examples/export/models.py`, written as pure functions.

Parameters live in nested dicts/lists of tensors laid out exactly like the JAX fixtures (dense
weights are `[in, out]` and applied as `x @ w + b`; GPT uses a tied embedding), and are flattened
in JAX's pytree order (dict keys sorted), so `torch_mlp_sgd` lines up input-for-input with the
JAX `mlp_sgd` fixture. Initial values come from fixed `torch.Generator` seeds (not JAX's PRNG).

Two kinds of step are defined for every model:
  * `*_functional_step(flat_inputs) -> flat_outputs`: forward, `torch.autograd.grad` and the
    optimizer update written out in plain tensor ops; this is what is traced and exported.
    The loss is decomposed (log_softmax, one-hot compare, mean) instead of `F.cross_entropy`,
    whose ONNX lowering (onnxscript `nll_loss_forward`) fixes `total_weight = 1`.
  * `eager_reference_step(...)`: the same training step the ordinary way (`F.cross_entropy`,
    `loss.backward()`, `torch.optim.SGD` / `torch.optim.AdamW`), used to check the export.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

# ----------------------------------------------------------------------------------------------
# Pytree helpers (JAX flattening order: dict keys sorted, lists in order)
# ----------------------------------------------------------------------------------------------


def flatten(tree, prefix=""):
    """[(path, tensor)] in JAX's pytree order; paths look like JAX keystr: `[0]['w']`."""
    if isinstance(tree, dict):
        out = []
        for k in sorted(tree):
            out += flatten(tree[k], f"{prefix}['{k}']")
        return out
    if isinstance(tree, (list, tuple)):
        out = []
        for i, v in enumerate(tree):
            out += flatten(v, f"{prefix}[{i}]")
        return out
    return [(prefix, tree)]


def unflatten(like, leaves):
    """Rebuild a tree shaped like `like` from an iterator of leaves (JAX order)."""
    it = iter(leaves)

    def go(t):
        if isinstance(t, dict):
            return {k: go(t[k]) for k in sorted(t)}
        if isinstance(t, (list, tuple)):
            return [go(v) for v in t]
        return next(it)

    return go(like)


# ----------------------------------------------------------------------------------------------
# Loss and optimizers
# ----------------------------------------------------------------------------------------------


def cross_entropy(logits, labels):
    """Mean softmax cross-entropy with integer labels, in basic ops.

    logits: f32[N, C], labels: i64[N] -> f32[]. The one-hot is an `arange == label` compare so
    the backward pass is plain elementwise math (no gather / scatter, no nll_loss)."""
    logp = torch.log_softmax(logits, dim=-1)
    classes = torch.arange(logits.shape[-1], device=logits.device)
    onehot = (labels.unsqueeze(-1) == classes).to(logits.dtype)
    return -(logp * onehot).sum(-1).mean()


@dataclass(frozen=True)
class AdamW:
    """Hyper-parameters of the AdamW update, the same as the JAX fixtures' `optax.adamw`
    (and `torch.optim.AdamW`, whose update is the same math)."""

    lr: float = 1e-3
    b1: float = 0.9
    b2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.1

    def torch_optimizer(self, params):
        return torch.optim.AdamW(params, lr=self.lr, betas=(self.b1, self.b2), eps=self.eps,
                                 weight_decay=self.weight_decay, foreach=False)

    def update(self, p, g, m, v, step):
        """One AdamW update written like torch.optim.AdamW (single-tensor path).

        step is the f32[] count *before* this update; returns (new_p, new_m, new_v)."""
        t = step + 1.0
        p = p * (1.0 - self.lr * self.weight_decay)
        m = m * self.b1 + g * (1.0 - self.b1)
        v = v * self.b2 + (g * g) * (1.0 - self.b2)
        bc1 = 1.0 - torch.pow(self.b1, t)
        bc2 = 1.0 - torch.pow(self.b2, t)
        denom = torch.sqrt(v) / torch.sqrt(bc2) + self.eps
        p = p - (self.lr / bc1) * (m / denom)
        return p, m, v


ADAMW = AdamW()

# ----------------------------------------------------------------------------------------------
# MLP (examples/export/models.py: MLP_SIZES, MLP_LR)
# ----------------------------------------------------------------------------------------------

MLP_SIZES = (64, 256, 256, 10)
MLP_LR = 0.05


def init_mlp(seed=0, sizes=MLP_SIZES):
    g = torch.Generator().manual_seed(seed)
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        w = torch.randn(fan_in, fan_out, generator=g) * math.sqrt(2.0 / fan_in)
        params.append({"w": w, "b": torch.zeros(fan_out)})
    return params


def mlp_forward(params, x, act=torch.relu):
    h = x
    for i, layer in enumerate(params):
        h = h @ layer["w"] + layer["b"]
        if i + 1 < len(params):
            h = act(h)
    return h


def mlp_loss(params, x, y):
    return cross_entropy(mlp_forward(params, x), y)


# ----------------------------------------------------------------------------------------------
# GPT (examples/export/models.py: GPTConfig, GPT_TINY)
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GPTConfig:
    n_layer: int
    d_model: int
    n_head: int
    vocab: int
    n_pos: int
    dropout: float = 0.0  # F.dropout on the attention probabilities and both residual branches

    @property
    def d_ff(self):
        return 4 * self.d_model


GPT_TINY = GPTConfig(n_layer=2, d_model=64, n_head=4, vocab=256, n_pos=512)
GPT_TINY_DROPOUT = GPTConfig(n_layer=2, d_model=64, n_head=4, vocab=256, n_pos=512, dropout=0.1)


def init_gpt(cfg: GPTConfig, seed=0):
    g = torch.Generator().manual_seed(seed)
    d, f = cfg.d_model, cfg.d_ff
    std = 0.02
    res_std = std / math.sqrt(2 * cfg.n_layer)

    def randn(*shape, scale):
        return torch.randn(*shape, generator=g) * scale

    def ln():
        return {"g": torch.ones(d), "b": torch.zeros(d)}

    wte = randn(cfg.vocab, d, scale=0.02)
    wpe = randn(cfg.n_pos, d, scale=0.01)
    blocks = []
    for _ in range(cfg.n_layer):
        blocks.append({
            "ln1": ln(),
            "attn": {"w_qkv": randn(d, 3 * d, scale=std), "b_qkv": torch.zeros(3 * d),
                     "w_out": randn(d, d, scale=res_std), "b_out": torch.zeros(d)},
            "ln2": ln(),
            "mlp": {"w_fc": randn(d, f, scale=std), "b_fc": torch.zeros(f),
                    "w_proj": randn(f, d, scale=res_std), "b_proj": torch.zeros(d)},
        })
    return {"wte": wte, "wpe": wpe, "blocks": blocks, "ln_f": ln()}


def layer_norm(x, p, eps=1e-5):
    return F.layer_norm(x, (x.shape[-1],), p["g"], p["b"], eps)


def attention(x, p, n_head, rate=0.0):
    b, s, d = x.shape
    dh = d // n_head
    qkv = x @ p["w_qkv"] + p["b_qkv"]  # [B, S, 3D]
    q, k, v = qkv.split(d, dim=-1)
    q = q.reshape(b, s, n_head, dh).transpose(1, 2)  # [B, H, S, Dh]
    k = k.reshape(b, s, n_head, dh).transpose(1, 2)
    v = v.reshape(b, s, n_head, dh).transpose(1, 2)
    att = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(dh))  # [B, H, S, S]
    pos = torch.arange(s, device=x.device)
    mask = pos.unsqueeze(1) >= pos.unsqueeze(0)  # causal: key <= query (iota compare)
    att = torch.where(mask, att, torch.finfo(att.dtype).min)
    att = torch.softmax(att, dim=-1)
    if rate:
        att = F.dropout(att, rate, training=True)
    y = (att @ v).transpose(1, 2).reshape(b, s, d)
    return y @ p["w_out"] + p["b_out"]


def mlp_block(x, p):
    h = F.gelu(x @ p["w_fc"] + p["b_fc"], approximate="tanh")
    return h @ p["w_proj"] + p["b_proj"]


def block(x, p, n_head, rate=0.0):
    """Pre-LayerNorm transformer block (dropout at `rate`, in training mode, when non-zero)."""
    drop = (lambda t: F.dropout(t, rate, training=True)) if rate else (lambda t: t)
    x = x + drop(attention(layer_norm(x, p["ln1"]), p["attn"], n_head, rate))
    x = x + drop(mlp_block(layer_norm(x, p["ln2"]), p["mlp"]))
    return x


def gpt_forward(params, tokens, cfg: GPTConfig):
    s = tokens.shape[1]
    x = params["wte"][tokens] + params["wpe"][:s]  # [B, S, D]
    for p in params["blocks"]:
        x = block(x, p, cfg.n_head, cfg.dropout)
    x = layer_norm(x, params["ln_f"])
    return x @ params["wte"].t()  # tied embedding: [B, S, V]


def gpt_loss(params, tokens, targets, cfg: GPTConfig):
    logits = gpt_forward(params, tokens, cfg)
    return cross_entropy(logits.reshape(-1, cfg.vocab), targets.reshape(-1))


# ----------------------------------------------------------------------------------------------
# CNN (NCHW): conv3x3 3->8 + relu + max pool 2x2, conv3x3 8->16 + relu + global average pool
# (adaptive_avg_pool2d), dense 16->10. No batch norm: the dynamo exporter writes F.batch_norm in
# training mode as ReduceMean statistics fed to an inference-form BatchNormalization, whose ONNX
# Runtime gradient then disagrees with eager PyTorch (conv1.b's gradient, exactly 0 in eager).
# ----------------------------------------------------------------------------------------------

CNN_IMAGE = (3, 16, 16)


def init_cnn(seed=0):
    g = torch.Generator().manual_seed(seed)

    def he(shape, fan_in):
        return torch.randn(*shape, generator=g) * math.sqrt(2.0 / fan_in)

    # Conv biases start at 0.01: the exporter's optimizer drops an all-zero Conv bias
    # initializer (and with it the parameter) even when it is marked as a graph input.
    return {
        "conv1": {"w": he((8, 3, 3, 3), 27), "b": torch.full((8,), 0.01)},
        "conv2": {"w": he((16, 8, 3, 3), 72), "b": torch.full((16,), 0.01)},
        "dense": {"w": he((16, 10), 16), "b": torch.zeros(10)},
    }


def init_cnn_bn(seed=0):
    """init_cnn with batch norm after the first convolution, whose bias is dropped (batch
    norm cancels it: its true gradient is 0, and a relative check of it measures noise)."""
    p = init_cnn(seed)
    del p["conv1"]["b"]
    p["bn1"] = {"scale": torch.ones(8), "bias": torch.zeros(8)}
    return p


def cnn_forward(params, x):
    if "bn1" in params:
        h = F.conv2d(x, params["conv1"]["w"], None, padding=1)
        h = F.batch_norm(h, None, None, params["bn1"]["scale"], params["bn1"]["bias"],
                         training=True, eps=1e-5)
        return _cnn_tail(params, h)
    h = F.conv2d(x, params["conv1"]["w"], params["conv1"]["b"], padding=1)
    return _cnn_tail(params, h)


def _cnn_tail(params, h):
    h = F.max_pool2d(torch.relu(h), 2)  # [B, 8, 8, 8]
    h = F.conv2d(h, params["conv2"]["w"], params["conv2"]["b"], padding=1)
    h = F.adaptive_avg_pool2d(torch.relu(h), 1)  # [B, 16, 1, 1]
    return h.flatten(1) @ params["dense"]["w"] + params["dense"]["b"]


# ----------------------------------------------------------------------------------------------
# Top-2 mixture-of-experts router (torch.topk: ONNX TopK)
# ----------------------------------------------------------------------------------------------

MOE_D = 16  # model width
MOE_EXPERTS = 4
MOE_CLASSES = 10


def init_moe(seed=0):
    """Params in JAX pytree order (keys sorted): experts [E, D, D], gate [D, E], head."""
    g = torch.Generator().manual_seed(seed)
    d, e, c = MOE_D, MOE_EXPERTS, MOE_CLASSES
    return {
        "experts": torch.randn(e, d, d, generator=g) * math.sqrt(2.0 / d),
        "gate": torch.randn(d, e, generator=g) * 0.5,
        "head": {"b": torch.zeros(c), "w": torch.randn(d, c, generator=g) * math.sqrt(1.0 / d)},
    }


def moe_forward(params, x):
    """x: f32[N, D] -> logits f32[N, C]. The router's softmax picks the top 2 of E experts per
    row (torch.topk), their probabilities renormalized to sum to 1 weight the chosen experts'
    outputs (each expert a D x D dense layer; all experts are evaluated and the chosen ones
    gathered), then relu and a dense head."""
    probs = torch.softmax(x @ params["gate"], dim=-1)  # [N, E]
    top, idx = torch.topk(probs, 2, dim=-1)  # [N, 2] values and int64 indices
    gates = top / top.sum(-1, keepdim=True)
    outs = torch.einsum("nd,edf->nef", x, params["experts"])  # [N, E, D]
    chosen = torch.gather(outs, 1, idx.unsqueeze(-1).expand(-1, -1, outs.shape[-1]))
    h = torch.relu((gates.unsqueeze(-1) * chosen).sum(1))  # [N, D]
    return h @ params["head"]["w"] + params["head"]["b"]
