"""`ebb.Runtime(device=...)` selects the executor, and step inputs and outputs cross through
DLPack: the MLP SGD step (the JAX fixture's reference inputs) runs on the simulated GPU
(`device="simt"`) from torch tensors and numpy arrays, with outputs that torch, numpy and JAX
take without a copy, equal to the CPU executor's bit for bit (JAX arrays in and out:
test_runtime_steps.py, whose group imports JAX already); `device="cuda"` on a machine
without the NVIDIA driver is a `DeviceUnavailable` naming the cause; unknown names are
`ValueError`s listing the choices.

The same check on the GPT-2 tiny AdamW step compiles 82 simt kernels (about 7 s in a debug
build), so it runs only with `EBB_PY_SLOW=1`:
`EBB_PY_SLOW=1 cargo test -p ebb-python --test pytest pytest_torch`."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import ebb
from conftest import FIXTURES


def _reference(name: str):
    meta = json.loads((FIXTURES / f"{name}.json").read_text())
    ref = meta["refs"][0]
    with np.load(FIXTURES / ref["file"]) as z:
        n_in = sum(1 for k in z.files if k.startswith("in_"))
        inputs = [z[f"in_{i}"] for i in range(n_in)]
    return ref["bindings"], inputs


@pytest.fixture(scope="module")
def mlp() -> ebb.Plan:
    return ebb.compile(FIXTURES / "mlp_sgd.mlir")


def _cpu(plan: ebb.Plan, name: str):
    bind, inputs = _reference(name)
    outs, report = ebb.Runtime(plan, device="cpu").step(bind, inputs)
    assert report["executor"] == "jit"
    # Read in place, never written: the donated parameters the step updates are copies.
    assert all(x.tobytes() == y.tobytes() for x, y in zip(inputs, _reference(name)[1]))
    return bind, inputs, outs


SLOW = pytest.mark.skipif(not os.environ.get("EBB_PY_SLOW"), reason="EBB_PY_SLOW=1 runs it")


def test_device_names_select_the_executor_and_unknown_names_are_value_errors(mlp):
    assert ebb.Runtime(mlp).executor == "cpu"
    assert ebb.Runtime(mlp, device="simt").executor == "simt"
    assert ebb.Runtime(mlp, device="reference").executor == "reference"
    # A profile name as `device`: the CPU executor priced on it (the meaning before executors).
    assert ebb.Runtime(mlp, device="a100-40g-pcie4").executor == "cpu"
    assert ebb.Runtime(mlp, device="simt", profile="a100-40g-pcie4").executor == "simt"
    with pytest.raises(ValueError, match=r"unknown device `tpu`.*cpu, reference, simt, cuda"):
        ebb.Runtime(mlp, device="tpu")
    with pytest.raises(ValueError, match=r"profile: unknown device `h900`.*h100-sxm-pcie5"):
        ebb.Runtime(mlp, device="simt", profile="h900")


def test_cuda_without_a_driver_is_a_clean_exception(mlp):
    try:
        rt = ebb.Runtime(mlp, device="cuda")
    except ebb.DeviceUnavailable as e:
        msg = str(e)
        assert "NVIDIA driver" in msg or "CUDA device" in msg or "cuBLAS" in msg, msg
        assert isinstance(e, ebb.EbbError)
    else:  # a machine with a GPU
        assert rt.executor == "cuda"


@pytest.mark.parametrize("name", ["mlp_sgd", pytest.param("gpt2_tiny_adamw", marks=SLOW)])
def test_simt_steps_torch_and_numpy_tensors_bit_for_bit_as_the_cpu(name):
    torch = pytest.importorskip("torch")
    plan = ebb.compile(FIXTURES / f"{name}.mlir")
    bind, inputs, want = _cpu(plan, name)
    rt = ebb.Runtime(plan, device="simt")
    # torch tensors in (sharing the arrays' memory), one of them a strided view.
    tin = [torch.from_numpy(x) for x in inputs]
    k = next(i for i, x in enumerate(inputs) if x.ndim == 2 and x.shape[0] > 1 and x.shape[1] > 1)
    tin[k] = torch.from_numpy(np.ascontiguousarray(inputs[k].T)).T
    assert not tin[k].is_contiguous()
    outs, report = rt.step(bind, tin)
    assert report["executor"] == "simt" and report["device"]["hazards"] is not None
    assert report["measured_peak_bytes"] == report["peak_bytes_planned"]
    assert len(outs) == len(want)
    for i, (o, w) in enumerate(zip(outs, want)):
        assert o.shape == w.shape and o.dtype == w.dtype and o.tobytes() == w.tobytes(), f"out_{i}"
    # Outputs go to torch and numpy without a copy.
    big = max(outs, key=lambda o: o.size)
    t = torch.from_dlpack(big)
    assert t.data_ptr() == big.__array_interface__["data"][0]
    assert np.from_dlpack(big).__array_interface__["data"][0] == t.data_ptr()
    # numpy arrays in: the same outputs.
    outs2, _ = rt.step(bind, inputs)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(outs2, want))
    # Inputs are read in place and never written, though the step updates donated ones.
    assert all(torch.equal(a, torch.from_numpy(b)) for a, b in zip(tin, inputs))
    assert all(x.tobytes() == y.tobytes() for x, y in zip(inputs, _reference(name)[1]))
    # A type Ebb does not have is refused by input index.
    wrong = list(tin)
    wrong[0] = torch.zeros(tuple(inputs[0].shape), dtype=torch.complex64)
    with pytest.raises(ebb.EbbError, match="input 0 has DLPack dtype"):
        rt.step(bind, wrong)


def test_outputs_are_dlpack_tensors_that_own_their_memory(mlp):
    bind, inputs, want = _cpu(mlp, "mlp_sgd")
    rt = ebb.Runtime(mlp)
    raw, _ = rt._rt.step(bind, inputs)
    assert all(isinstance(t, ebb.Tensor) for t in raw)
    t = max(raw, key=lambda t: int(np.prod(t.shape)))
    assert t.__dlpack_device__() == (1, 0) and t.device == "cpu"
    a = np.from_dlpack(t)
    del raw, t
    rt.step(bind, inputs)  # a later step does not reuse the memory a kept output holds
    w = max(want, key=lambda w: w.size)
    assert a.tobytes() == w.tobytes()
