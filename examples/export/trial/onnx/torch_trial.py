"""torch.onnx.export(dynamo=True) train steps written with nn.Modules (issue #14 trial).
Method as /work/main/examples/export/onnx/torch_steps.py: make_fx(tracing_mode="symbolic") of the
functional step (functional_call, autograd.grad, AdamW/SGD update), wrapped in an nn.Module,
torch.onnx.export(dynamo=True, dynamic_shapes), exporter symbols renamed to batch/seq.
Run: /work/venv-onnx/bin/python /tmp/trial/onnx/torch_trial.py [names]"""
from __future__ import annotations

import sys
import traceback
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch._decomp import get_decompositions
from torch.export import Dim
from torch.fx.experimental.proxy_tensor import make_fx

sys.path.insert(0, "/work/main/examples/export/onnx")
from onnx_common import rename_dim_params, save_model, write_npz, rel_err  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
OUT.mkdir(exist_ok=True)
LR, B1, B2, EPS, WD = 1e-3, 0.9, 0.95, 1e-8, 0.1


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.GELU(),
                                 nn.Linear(64, 10))

    def forward(self, x):
        return self.net(x)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        h = self.pool(F.relu(self.bn(self.conv(x))))
        return self.fc(h.flatten(1))


class Block(nn.Module):
    def __init__(self, d, h, p):
        super().__init__()
        self.h, self.p = h, p
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.h, d // self.h).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.p if self.training else 0.0)
        x = x + self.drop(self.proj(a.transpose(1, 2).reshape(b, s, d)))
        return x + self.drop(self.fc2(F.gelu(self.fc1(self.ln2(x)))))


class GPT(nn.Module):
    def __init__(self, vocab=64, d=32, h=4, n_layer=2, n_pos=64, p=0.1):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(n_pos, d)
        self.blocks = nn.ModuleList([Block(d, h, p) for _ in range(n_layer)])
        self.lnf = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.drop = nn.Dropout(p)

    def forward(self, tokens):
        s = tokens.shape[1]
        pos = torch.arange(s, device=tokens.device)
        x = self.drop(self.wte(tokens) + self.wpe(pos))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.lnf(x))


def adamw(p, g, m, v, step):
    t = step + 1.0
    p = p * (1.0 - LR * WD)
    m = m * B1 + g * (1.0 - B1)
    v = v * B2 + (g * g) * (1.0 - B2)
    denom = torch.sqrt(v) / torch.sqrt(1.0 - torch.pow(B2, t)) + EPS
    return p - (LR / (1.0 - torch.pow(B1, t))) * (m / denom), m, v


def make_step(model, loss_fn, opt, bufs_out=True):
    names = [n for n, _ in model.named_parameters()]
    bnames = [n for n, _ in model.named_buffers()]
    n, nb = len(names), len(bnames)

    def step(*args):
        params = list(args[:n])
        bufs = list(args[n:n + nb])
        rest = args[n + nb:]
        if opt == "adamw":
            m, v, t = list(rest[:n]), list(rest[n:2 * n]), rest[2 * n]
            rest = rest[2 * n + 1:]
        leaves = [p.detach().requires_grad_(True) for p in params]
        bufs_c = [b.clone() for b in bufs]
        with torch.enable_grad():
            state = {**dict(zip(names, leaves)), **dict(zip(bnames, bufs_c))}
            out = torch.func.functional_call(model, state, (rest[0],))
            loss = loss_fn(out, rest[1])
            grads = torch.autograd.grad(loss, leaves)
        newb = [b for b in bufs_c if b.dtype.is_floating_point] if bufs_out else []
        if opt == "sgd":
            return (loss.detach(), *[p - 0.05 * g for p, g in zip(params, grads)], *newb)
        upd = [adamw(p, g, mi, vi, t) for p, g, mi, vi in zip(params, grads, m, v)]
        return (loss.detach(), *[u[0] for u in upd], *[u[1] for u in upd],
                *[u[2] for u in upd], t + 1.0, *newb)
    return step, names, bnames


class _Step(nn.Module):
    def __init__(self, gm):
        super().__init__()
        self.gm = gm

    def forward(self, *args):
        return tuple(self.gm(*args))


def flat_inputs(model, opt, data):
    ps = [p.detach().clone() for p in model.parameters()]
    bs = [b.detach().clone() for b in model.buffers()]
    extra = []
    if opt == "adamw":
        extra = [torch.randn_like(p).abs() * 1e-3 for p in ps] + \
                [torch.rand_like(p) * 1e-4 for p in ps] + [torch.tensor(3.0)]
    return ps + bs + extra + list(data)


def export(name, model, loss_fn, opt, data_fn, data_dims, trace_b, ref_b, n_pos=None,
           decompose=(), dropout_zero_for_ref=False, sdpa_math=False):
    try:
        torch.manual_seed(0)
        model.train()
        step, names, bnames = make_step(model, loss_fn, opt)
        example = flat_inputs(model, opt, data_fn(trace_b))
        kw = {"decomposition_table": get_decompositions(
            [getattr(torch.ops.aten, o) for o in decompose])} if decompose else {}
        if sdpa_math:  # user workaround: force the math SDPA backend while tracing
            from torch.nn.attention import SDPBackend, sdpa_kernel
            with sdpa_kernel(SDPBackend.MATH):
                gm = make_fx(step, tracing_mode="symbolic", **kw)(*example)
        else:
            gm = make_fx(step, tracing_mode="symbolic", **kw)(*example)
        syms = sorted({s for d in data_dims for s in d.values()})
        dims = {s: Dim(s, min=1, max=n_pos) if (s == "seq" and n_pos) else Dim(s, min=1)
                for s in syms}
        nd = len(data_dims)
        spec = [None] * (len(example) - nd) + [{a: dims[s] for a, s in d.items()}
                                              for d in data_dims]
        prog = torch.onnx.export(_Step(gm).eval(), tuple(example), dynamo=True,
                                 dynamic_shapes=(tuple(spec),), optimize=opt != "adamw",
                                 verbose=False)
        mp = prog.model_proto
        mapping = {}
        for vi, d in zip(list(mp.graph.input)[-nd:], data_dims):
            for ax, s in d.items():
                dp = vi.type.tensor_type.shape.dim[ax].dim_param
                if dp:
                    mapping[dp] = s
        rename_dim_params(mp, {k: v for k, v in mapping.items() if k != v})
        path = OUT / f"{name}.onnx"
        save_model(mp, path)
        # reference: ORT on the file, eager step compared
        ins = flat_inputs(model, opt, data_fn(ref_b))
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        feeds = {i.name: a.numpy() for i, a in zip(sess.get_inputs(), ins)}
        got = sess.run(None, feeds)
        torch.manual_seed(1)
        want = [t.detach().numpy() for t in step(*ins)]
        errs = [rel_err(g, w) for g, w in zip(got, want)]
        arrays = {f"in_{i}": a.numpy() for i, a in enumerate(ins)}
        arrays.update({f"out_{i}": a for i, a in enumerate(got)})
        write_npz(OUT / f"{name}.ref0.npz", arrays)
        print(f"OK {name}: {len(mp.graph.node)} nodes, {len(ins)} in, {len(got)} out; ORT vs "
              f"eager max rel {max(errs):.3g} (out {int(np.argmax(errs))}), loss ort "
              f"{float(got[0]):.6f} eager {float(want[0]):.6f}; bind {ref_b}")
    except Exception:
        print(f"EXPORT FAILED {name}")
        tb = traceback.format_exc()
        print(tb[-3000:])
        (OUT / f"{name}.export_error.txt").write_text(tb)


def ce(out, y):
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))


def mlp_data(b):
    g = torch.Generator().manual_seed(1)
    return torch.randn(b["batch"], 32, generator=g), torch.randint(0, 10, (b["batch"],), generator=g)


def cnn_data(b):
    g = torch.Generator().manual_seed(1)
    return torch.randn(b["batch"], 3, 16, 16, generator=g), torch.randint(0, 10, (b["batch"],), generator=g)


def gpt_data(b):
    g = torch.Generator().manual_seed(1)
    sh = (b["batch"], b["seq"])
    return torch.randint(0, 64, sh, generator=g), torch.randint(0, 64, sh, generator=g)


NLL = ("nll_loss_forward", "nll_loss_backward")
ALL = {
    # F.cross_entropy as written (no decompositions): what a user would do
    "t_mlp_ce_adamw": lambda: export("t_mlp_ce_adamw", MLP(), ce, "adamw", mlp_data,
                                     ({0: "batch"}, {0: "batch"}), {"batch": 5}, {"batch": 8}),
    # with the repo's nll_loss decomposition (the exporter's nll_loss_backward scales wrongly)
    "t_mlp_ce_dec_adamw": lambda: export("t_mlp_ce_dec_adamw", MLP(), ce, "adamw", mlp_data,
                                         ({0: "batch"}, {0: "batch"}), {"batch": 5},
                                         {"batch": 8}, decompose=NLL),
    "t_cnn_bn_maxpool_sgd": lambda: export("t_cnn_bn_maxpool_sgd", CNN(), ce, "sgd", cnn_data,
                                           ({0: "batch"}, {0: "batch"}), {"batch": 5},
                                           {"batch": 4}, decompose=NLL),
    "t_gpt_sdpa_gelu_nodrop_adamw": lambda: export(
        "t_gpt_sdpa_gelu_nodrop_adamw", GPT(p=0.0), ce, "adamw", gpt_data,
        ({0: "batch", 1: "seq"}, {0: "batch", 1: "seq"}), {"batch": 3, "seq": 11},
        {"batch": 2, "seq": 16}, n_pos=64, decompose=NLL),
    # a user's workaround: decompose SDPA into math ops before export
    "t_gpt_sdpa_math_gelu_nodrop_adamw": lambda: export(
        "t_gpt_sdpa_math_gelu_nodrop_adamw", GPT(p=0.0), ce, "adamw", gpt_data,
        ({0: "batch", 1: "seq"}, {0: "batch", 1: "seq"}), {"batch": 3, "seq": 11},
        {"batch": 2, "seq": 16}, n_pos=64,
        decompose=NLL, sdpa_math=True),
    "t_gpt_sdpa_gelu_drop_adamw": lambda: export(
        "t_gpt_sdpa_gelu_drop_adamw", GPT(p=0.1), ce, "adamw", gpt_data,
        ({0: "batch", 1: "seq"}, {0: "batch", 1: "seq"}), {"batch": 3, "seq": 11},
        {"batch": 2, "seq": 16}, n_pos=64, decompose=NLL),
}

if __name__ == "__main__":
    for n in sys.argv[1:] or list(ALL):
        ALL[n]()
