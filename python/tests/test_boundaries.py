"""The package's boundaries under hostile use: a Runtime stepped from other threads, arrays in
the other byte order or of the wrong dtype, bindings and lengths that are not integers, symbols
the plan does not have, FIFOs given as plan or model files. Each is either handled exactly or
refused with an :class:`ebb.EbbError`, never a ``PanicException``, a hang or a silent
truncation. Inputs come from the fixtures and from seeded generators."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import ebb
from conftest import FIXTURES


def mlp_inputs():
    z = np.load(FIXTURES / "mlp_sgd.ref0.npz")
    n_in = sum(1 for k in z.files if k.startswith("in_"))
    return [z[f"in_{i}"] for i in range(n_in)]


@pytest.fixture(scope="module")
def mlp():
    return ebb.compile(FIXTURES / "mlp_sgd.mlir")


def test_a_runtime_steps_from_any_thread(mlp):
    rt = ebb.Runtime(mlp)
    inputs = mlp_inputs()
    want, _ = rt.step({"B": 8}, inputs)
    results, errors = [], []

    def step():
        try:
            outs, _ = rt.step({"B": 8}, inputs)
            results.append(outs)
        except BaseException as e:  # noqa: BLE001 (the test reports whatever was raised)
            errors.append(e)

    threads = [threading.Thread(target=step) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert errors == [] and len(results) == 4
    for outs in results:
        for a, b in zip(outs, want):
            assert a.tobytes() == b.tobytes()
    # A Runtime made on another thread steps here too.
    made = []
    t = threading.Thread(target=lambda: made.append(ebb.Runtime(mlp)))
    t.start()
    t.join()
    outs, _ = made[0].step({"B": 8}, inputs)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(outs, want))


def test_other_byte_orders_are_converted_and_wrong_dtypes_refused(mlp):
    rt = ebb.Runtime(mlp)
    inputs = mlp_inputs()
    want, _ = rt.step({"B": 8}, inputs)
    swapped = [x.astype(x.dtype.newbyteorder(">")) for x in inputs]
    assert all(s.dtype.byteorder == ">" for s in swapped if s.dtype.itemsize > 1)
    outs, _ = rt.step({"B": 8}, swapped)
    for a, b in zip(outs, want):
        assert a.dtype.byteorder in "=<|" and a.tobytes() == b.tobytes()
    # Non-contiguous views are taken by value too.
    strided = [np.asfortranarray(x) for x in inputs]
    outs, _ = rt.step({"B": 8}, strided)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(outs, want))
    rng = np.random.default_rng(5)
    for bad in (np.float64, np.int64, np.complex64, np.float16):
        k = int(rng.integers(len(inputs)))
        wrong = list(inputs)
        wrong[k] = inputs[k].astype(bad)
        with pytest.raises(ebb.EbbError, match=f"input {k}"):
            rt.step({"B": 8}, wrong)
    wrong = list(inputs)
    wrong[0] = np.array([object()] * 4)
    with pytest.raises(ebb.EbbError, match="input 0 has dtype"):
        rt.step({"B": 8}, wrong)


def test_bindings_and_lengths_must_be_integers(mlp, gpt2_tiny):
    for bad in (8.9, 8.0, "8", True, None):
        with pytest.raises(ebb.ShapeError, match="binding B"):
            mlp.peak_bytes(B=bad)
    assert mlp.peak_bytes(B=np.int64(8)) == mlp.peak_bytes(B=8)
    with pytest.raises(ebb.ShapeError, match="binding B"):
        ebb.Runtime(mlp).step({"B": 8.9}, mlp_inputs())
    with pytest.raises(ebb.ShapeError, match="length 1"):
        ebb.pack(gpt2_tiny, [120, 3.7, 64], budget="1GiB")
    with pytest.raises(ebb.ShapeError, match="bucket_width"):
        ebb.pack(gpt2_tiny, [120, 64], budget="1GiB", bucket_width=2.5)
    with pytest.raises(ebb.ShapeError, match="fixed symbol `Q` is not a symbol of the plan"):
        ebb.pack(gpt2_tiny, [120, 64], budget="1GiB", fixed={"Q": 3})


def test_fifos_are_refused_without_blocking(tmp_path):
    for name in ("p.plan.json", "m.mlir"):
        fifo = tmp_path / name
        os.mkfifo(fifo)
        with pytest.raises(ebb.EbbError, match="not a regular file"):
            if name.endswith(".json"):
                ebb.load(fifo)
            else:
                ebb.compile(fifo)
