"""Forward+loss ONNX models (params as initializers) for ORT training artifacts, written with
nn.Modules. Method of /work/main/examples/export/onnx/forward_export.py (dynamo export,
onnxscript optimizer with params temporarily marked as inputs, dim_params renamed).
Run: /work/venv-onnx/bin/python /tmp/trial/ort/fwd_export.py [names]
Writes /tmp/trial/ort/out/fwd_<name>.onnx (+ .data.npz with the trace data, .params.txt)"""
from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxscript
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.export import Dim

sys.path.insert(0, "/work/main/examples/export/onnx")
from onnx_common import rename_dim_params  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
OUT.mkdir(exist_ok=True)
V, D, H, NPOS = 64, 32, 4, 64


class Attn(nn.Module):
    def __init__(self, sdpa):
        super().__init__()
        self.sdpa = sdpa
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.reshape(b, s, H, d // H).transpose(1, 2) for t in (q, k, v))
        if self.sdpa:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / (d // H) ** 0.5)
            mask = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~mask, float("-inf"))
            a = torch.softmax(att, dim=-1) @ v
        return self.proj(a.transpose(1, 2).reshape(b, s, d))


class TFM(nn.Module):
    def __init__(self, sdpa=False, n_layer=2):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, D), nn.Embedding(NPOS, D)
        self.blocks = nn.ModuleList()
        for _ in range(n_layer):
            self.blocks.append(nn.ModuleDict({
                "ln1": nn.LayerNorm(D), "attn": Attn(sdpa), "ln2": nn.LayerNorm(D),
                "mlp": nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))}))
        self.lnf = nn.LayerNorm(D)
        self.head = nn.Linear(D, V)
        self.loss = nn.CrossEntropyLoss()

    def forward(self, tokens, targets):
        s = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(s))
        for b in self.blocks:
            x = x + b["attn"](b["ln1"](x))
            x = x + b["mlp"](b["ln2"](x))
        logits = self.head(self.lnf(x))
        return self.loss(logits.reshape(-1, V), targets.reshape(-1))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.c2, self.bn2 = nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(16 * 4 * 4, 10)
        self.loss = nn.CrossEntropyLoss()

    def forward(self, x, y):
        h = self.pool(F.relu(self.bn1(self.c1(x))))
        h = self.pool(F.relu(self.bn2(self.c2(h))))
        return self.loss(self.fc(torch.flatten(h, 1)), y)


class RNN(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.rnn = (nn.LSTM if kind == "lstm" else nn.GRU)(D, D, batch_first=True)
        self.fc = nn.Linear(D, 10)
        self.loss = nn.CrossEntropyLoss()

    def forward(self, tokens, y):
        out, _ = self.rnn(self.emb(tokens))
        return self.loss(self.fc(out[:, -1]), y)


def tok_data(b, s):
    g = torch.Generator().manual_seed(5)
    return (torch.randint(0, V, (b, s), generator=g), torch.randint(0, V, (b, s), generator=g))


def cnn_data(b):
    g = torch.Generator().manual_seed(5)
    return torch.randn(b, 3, 16, 16, generator=g), torch.randint(0, 10, (b,), generator=g)


def rnn_data(b, s):
    g = torch.Generator().manual_seed(5)
    return torch.randint(0, V, (b, s), generator=g), torch.randint(0, 10, (b,), generator=g)


BS = ({0: "batch", 1: "seq"}, {0: "batch", 1: "seq"})
MODELS = {
    "o_tfm_softmax": (lambda: TFM(False), lambda: tok_data(3, 11), BS, ("tokens", "targets"),
                      {"batch": 2, "seq": 16}, "eval"),
    "o_tfm_sdpa": (lambda: TFM(True), lambda: tok_data(3, 11), BS, ("tokens", "targets"),
                   {"batch": 2, "seq": 16}, "eval"),
    "o_cnn_bn_train": (CNN, lambda: cnn_data(5), ({0: "batch"}, {0: "batch"}), ("x", "y"),
                       {"batch": 4}, "train"),
    "o_cnn_bn_eval": (CNN, lambda: cnn_data(5), ({0: "batch"}, {0: "batch"}), ("x", "y"),
                      {"batch": 4}, "eval"),
    "o_lstm": (lambda: RNN("lstm"), lambda: rnn_data(3, 7), ({0: "batch", 1: "seq"}, {0: "batch"}),
               ("tokens", "y"), {"batch": 2, "seq": 5}, "eval"),
    "o_gru": (lambda: RNN("gru"), lambda: rnn_data(3, 7), ({0: "batch", 1: "seq"}, {0: "batch"}),
              ("tokens", "y"), {"batch": 2, "seq": 5}, "eval"),
}


def export_forward(name):
    mk, data_fn, data_dims, data_names, ref_b, mode = MODELS[name]
    torch.manual_seed(0)
    model = mk()
    model.train(mode == "train")
    data = data_fn()
    syms = {s for d in data_dims for s in d.values()}
    dims = {s: Dim(s, min=1, max=NPOS) if s == "seq" else Dim(s, min=1) for s in syms}
    dyn = tuple({ax: dims[s] for ax, s in d.items()} for d in data_dims)
    prog = torch.onnx.export(model, data, dynamo=True, dynamic_shapes=dyn,
                             input_names=list(data_names), output_names=["loss"],
                             optimize=False)
    g = prog.model.graph
    names = [n for n, _ in model.named_parameters()]
    params = [g.initializers[n] for n in names if n in g.initializers]
    missing = [n for n in names if n not in g.initializers]
    for v in params:
        g.inputs.append(v)
    onnxscript.optimizer.optimize(prog.model)
    for v in params:
        g.inputs.remove(v)
    proto = ir.serde.serialize_model(prog.model)
    mapping = {}
    by_name = {vi.name: vi for vi in proto.graph.input}
    for dname, d in zip(data_names, data_dims):
        dim = by_name[dname].type.tensor_type.shape.dim
        for ax, sym in d.items():
            if dim[ax].dim_param:
                mapping[dim[ax].dim_param] = sym
    rename_dim_params(proto, {k: v for k, v in mapping.items() if k != v})
    for node in proto.graph.node:
        keep = [p for p in node.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
        del node.metadata_props[:]
        node.metadata_props.extend(keep)
    path = OUT / f"fwd_{name}.onnx"
    path.write_bytes(proto.SerializeToString(deterministic=True))
    kept = [t.name for t in proto.graph.initializer if t.name in names]
    # reference data at ref binding + eager loss/grads
    torch.manual_seed(0)
    if name.startswith("o_cnn"):
        rdata = cnn_data(ref_b["batch"])
    elif name in ("o_lstm", "o_gru"):
        rdata = rnn_data(ref_b["batch"], ref_b["seq"])
    else:
        rdata = tok_data(ref_b["batch"], ref_b["seq"])
    model.zero_grad()
    loss = model(*rdata)
    loss.backward()
    grads = {n: p.grad.numpy() for n, p in model.named_parameters() if p.grad is not None}
    np.savez(OUT / f"fwd_{name}.ref.npz", **{f"data_{i}": d.numpy() for i, d in enumerate(rdata)},
             loss=loss.detach().numpy(), **{f"grad:{n}": g for n, g in grads.items()})
    (OUT / f"fwd_{name}.meta.json").write_text(json.dumps(
        {"params": kept, "missing_params": missing, "data_names": list(data_names),
         "ref_binding": ref_b, "mode": mode}))
    ops = sorted({(n.domain or "ai.onnx") + "::" + n.op_type for n in proto.graph.node})
    print(f"OK fwd {name}: {len(proto.graph.node)} nodes; params kept {len(kept)}/{len(names)} "
          f"missing {missing}; ops {ops}")


if __name__ == "__main__":
    for n in sys.argv[1:] or list(MODELS):
        try:
            export_forward(n)
        except Exception:
            print(f"EXPORT FAILED fwd {n}")
            tb = traceback.format_exc()
            print(tb[-2500:])
            (OUT / f"fwd_{n}.export_error.txt").write_text(tb)
