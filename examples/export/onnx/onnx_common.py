"""Helpers shared by the ONNX fixture exporters (both venvs): deterministic npz, relative
error, dim_param renaming, value and op descriptions for the metadata JSON."""

from __future__ import annotations

import io
import json
import re
import sys
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np
import onnx

# ----------------------------------------------------------------------------------------------
# Shared helpers (both venvs)
# ----------------------------------------------------------------------------------------------


def write_npz(path: Path, arrays: dict):
    """np.savez_compressed equivalent with fixed zip timestamps (deterministic bytes)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, arr in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(arr), allow_pickle=False)  # keeps 0-d
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, buf.getvalue())


def rel_err(got, want, mask=None) -> float:
    """max |got - want| / max(max |want|, 1e-30): one relative error per tensor. With a boolean
    `mask` (same shape) only the selected elements count in the numerator."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    if got.shape != want.shape:
        raise AssertionError(f"shape {got.shape} vs {want.shape}")
    diff = np.abs(got - want)
    if mask is not None:
        diff = diff[mask]
    if diff.size == 0:
        return 0.0
    return float(np.max(diff) / max(float(np.max(np.abs(want))), 1e-30))


def _dtype_name(elem_type: int) -> str:
    return str(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)))


def _shape(vi) -> list:
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    return [d.dim_param if d.HasField("dim_param") else
            (d.dim_value if d.HasField("dim_value") else None) for d in t.shape.dim]


def describe_values(values, paths=None) -> list[dict]:
    out = []
    for i, vi in enumerate(values):
        rec = {"name": vi.name, "dtype": _dtype_name(vi.type.tensor_type.elem_type),
               "shape": _shape(vi)}
        if paths is not None:
            rec["path"] = paths[i]
        out.append(rec)
    return out


def op_counts(model: onnx.ModelProto) -> Counter:
    """Node counts by "domain::op_type" ("" domain written as ai.onnx), subgraphs and
    model-local functions included."""
    counts: Counter = Counter()

    def visit(graph):
        for node in graph.node:
            counts[f"{node.domain or 'ai.onnx'}::{node.op_type}"] += 1
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    visit(attr.g)
                for g in attr.graphs:
                    visit(g)

    visit(model.graph)
    for fn in model.functions:
        for node in fn.node:
            counts[f"{node.domain or 'ai.onnx'}::{node.op_type}"] += 1
    return counts


def rename_dim_params(model: onnx.ModelProto, mapping: dict[str, str]):
    """Rewrite every dim_param of the model's value infos, replacing exporter symbols (e.g.
    `s71`) by our names (`batch`) token-wise, so derived expressions such as `4*s71` become
    `4*batch`."""
    if not mapping:
        return
    pat = re.compile(r"\b(" + "|".join(re.escape(k) for k in sorted(mapping, key=len,
                                                                      reverse=True)) + r")\b")

    def fix(vi):
        t = vi.type.tensor_type
        if t.HasField("shape"):
            for d in t.shape.dim:
                if d.HasField("dim_param"):
                    d.dim_param = pat.sub(lambda m: mapping[m.group(1)], d.dim_param)

    g = model.graph
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        fix(vi)
    for fn in model.functions:
        for vi in fn.value_info:
            fix(vi)


def dim_params(model: onnx.ModelProto) -> list[str]:
    """Every distinct dim_param string of the graph's value infos (sorted)."""
    seen = set()
    g = model.graph
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        for d in (_shape(vi) or []):
            if isinstance(d, str):
                seen.add(d)
    return sorted(seen)


def model_meta(model: onnx.ModelProto) -> dict:
    return {
        "ir_version": model.ir_version,
        "producer_name": model.producer_name,
        "producer_version": model.producer_version,
        "opset_import": {(o.domain or "ai.onnx"): o.version for o in model.opset_import},
        "initializers": [{"name": t.name, "dtype": _dtype_name(t.data_type),
                          "shape": list(t.dims)} for t in model.graph.initializer],
        "nodes": len(model.graph.node),
    }


# Gradient ops ONNX Runtime training registers in the ai.onnx domain (not in the ONNX standard,
# so the checker does not know them).
ORT_ONNX_DOMAIN_GRADS = {"MaxPoolGrad", "ConvGrad", "AveragePoolGrad", "BatchNormalizationGrad"}


def save_model(model: onnx.ModelProto, path: Path) -> int:
    if not any(n.domain in ("", "ai.onnx") and n.op_type in ORT_ONNX_DOMAIN_GRADS
               for n in model.graph.node):
        onnx.checker.check_model(model)
    data = model.SerializeToString(deterministic=True)
    path.write_bytes(data)
    return len(data)


def write_meta(out_dir: Path, name: str, meta: dict):
    (out_dir / f"{name}.json").write_text(json.dumps(meta, indent=1) + "\n")


def versions(*mods) -> dict:
    import importlib

    out = {"python": "%d.%d" % sys.version_info[:2], "numpy": np.__version__,
           "onnx": onnx.__version__}
    for m in mods:
        try:
            mod = importlib.import_module(m)
            out[m] = mod.__version__
        except ImportError:
            pass
    return out


def zero_dropout(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    """A copy of `model` whose Dropout ratios are all 0 (the references of a model with
    dropout: the masks are random numbers of each runtime's own), and the names of the ratio
    values it changed (initializers or Constant outputs)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    names = sorted({n.input[1] for n in m.graph.node
                    if n.op_type == "Dropout" and len(n.input) > 1 and n.input[1]})
    done = []
    for t in m.graph.initializer:
        if t.name in names:
            t.CopyFrom(onnx.numpy_helper.from_array(
                np.zeros_like(onnx.numpy_helper.to_array(t)), t.name))
            done.append(t.name)
    for n in m.graph.node:
        if n.op_type == "Constant" and n.output[0] in names:
            for a in n.attribute:
                if a.name == "value":
                    a.t.CopyFrom(onnx.numpy_helper.from_array(
                        np.zeros_like(onnx.numpy_helper.to_array(a.t)), a.t.name))
                    done.append(n.output[0])
    assert sorted(done) == names, (done, names)
    return m, names
