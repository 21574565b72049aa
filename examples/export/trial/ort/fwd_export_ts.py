"""ORT-docs style forward export: TorchScript exporter (dynamo=False), training=TRAINING,
do_constant_folding=False, dynamic_axes. /work/venv-onnx/bin/python /tmp/trial/ort/fwd_export_ts.py"""
import json, sys, traceback
import numpy as np, onnx, torch
sys.path.insert(0, "/tmp/trial/ort")
from fwd_export import MODELS, OUT, cnn_data, tok_data

for name in ["o_tfm_softmax", "o_cnn_bn_train"]:
    try:
        mk, data_fn, data_dims, data_names, ref_b, mode = MODELS[name]
        torch.manual_seed(0)
        model = mk(); model.train()
        data = data_fn()
        dyn = {n: {a: s for a, s in d.items()} for n, d in zip(data_names, data_dims)}
        p = OUT / f"fwd_{name}_ts.onnx"
        torch.onnx.export(model, data, str(p), dynamo=False, input_names=list(data_names),
                          output_names=["loss"], dynamic_axes=dyn, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          export_params=True)
        m = onnx.load(str(p))
        names = [n for n, _ in model.named_parameters()]
        kept = [t.name for t in m.graph.initializer if t.name in names]
        rdata = cnn_data(ref_b["batch"]) if "cnn" in name else tok_data(ref_b["batch"], ref_b["seq"])
        model.zero_grad(); loss = model(*rdata); loss.backward()
        np.savez(OUT / f"fwd_{name}_ts.ref.npz", **{f"data_{i}": d.numpy() for i, d in enumerate(rdata)},
                 loss=loss.detach().numpy(), **{f"grad:{n}": q.grad.numpy() for n, q in model.named_parameters()})
        (OUT / f"fwd_{name}_ts.meta.json").write_text(json.dumps({"params": kept, "data_names": list(data_names), "ref_binding": ref_b}))
        print(f"OK ts {name}: {len(m.graph.node)} nodes, params {len(kept)}/{len(names)}, ops {sorted({n.op_type for n in m.graph.node})}")
    except Exception:
        print(f"EXPORT FAILED ts {name}"); print(traceback.format_exc()[-2000:])
