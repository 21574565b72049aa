"""Ebb from Python: compile a training step with symbolic shapes once, then ask, for any batch
and sequence length, what its peak memory is, which evictions (recompute or swap) fit it under a
device budget, and which batches of a set of sequence lengths fit at all.

Units: bytes for memory, microseconds (``_us``) and milliseconds (``_ms``) for time, FLOPs.
Bindings are dicts of symbol values, e.g. ``{"B": 8, "S": 512}``. Budgets are bytes (int) or
text: ``"40GiB"``, ``"50%"`` (of the program-order peak at the bindings), ``"50%scheduled"``.

    >>> import ebb
    >>> plan = ebb.compile("tests/fixtures/jax/gpt2_tiny_adamw.mlir", device="h100-sxm-pcie5")
    >>> plan.peak_bytes(B=8, S=256)                       # no decisions
    >>> plan.finalize({"B": 8, "S": 256}, budget="50%")   # the `ebb plan --json` report
    >>> ebb.pack(plan, [120, 900, 33, 4000], budget="40GiB")

Errors are exceptions: :class:`EbbError` and its subclasses :class:`ImportFailed`,
:class:`PlanError`, :class:`ShapeError`, :class:`InfeasibleBudget` (which carries
``smallest_feasible_bytes``) and :class:`DeviceUnavailable`; an unknown device or profile
name is a ``ValueError`` listing the choices.
"""

from __future__ import annotations

import json
import operator
import os
import sys
import tempfile
from typing import Iterable, Mapping, Sequence, Union

import numpy as np

from ._ebb import Tensor  # noqa: F401  (re-exported)
from ._ebb import (  # noqa: F401  (re-exported)
    DeviceUnavailable,
    EbbError,
    ImportFailed,
    InfeasibleBudget,
    PlanError,
    ShapeError,
    __version__,
)
from . import _ebb

Budget = Union[int, str]

__all__ = [
    "Plan",
    "Runtime",
    "compile",
    "load",
    "pack",
    "EbbError",
    "ImportFailed",
    "PlanError",
    "ShapeError",
    "InfeasibleBudget",
    "DeviceUnavailable",
    "Tensor",
]


def _int(v: object, what: str) -> int:
    """``v`` as an int when it is one (a Python or numpy integer); :class:`ShapeError` for
    anything else (a float such as 8.9 is refused, never truncated; so is a bool)."""
    if isinstance(v, (bool, np.bool_)):
        raise ShapeError(f"{what} is {v!r}, a bool; it must be an integer")
    try:
        return operator.index(v)
    except TypeError:
        raise ShapeError(f"{what} is {v!r} ({type(v).__name__}); it must be an integer") from None


def _bind(bind: Mapping[str, int] | None, kw: Mapping[str, int]) -> dict[str, int]:
    out = dict(bind or {})
    out.update(kw)
    for k in out:
        if not isinstance(k, str):
            raise ShapeError(f"binding name {k!r} ({type(k).__name__}) is not a string")
    return {k: _int(v, f"binding {k}") for k, v in out.items()}


class Plan:
    """A compiled symbolic plan: every memory figure at any bindings, finalized decisions
    under a budget, and the batch-packing oracle. Made by :func:`compile` or :func:`load`."""

    def __init__(self, inner: _ebb.Plan):
        self._p = inner

    @property
    def symbols(self) -> list[str]:
        """Names of the symbolic dimensions (``["B", "S"]``)."""
        return self._p.symbols

    @property
    def device(self) -> str | None:
        """The device profile recorded at compile time, if any."""
        return self._p.device

    def save(self, path: str | os.PathLike) -> None:
        """Writes the plan as JSON (atomically), for :func:`load` or ``ebb plan``."""
        self._p.save(os.fspath(path))

    def peak_bytes(self, bind: Mapping[str, int] | None = None, **kw: int) -> int:
        """Peak bytes of the plan's schedule at the bindings, without decisions (bytes)."""
        return self._p.peak_bytes(_bind(bind, kw))

    def program_order_peak_bytes(self, bind: Mapping[str, int] | None = None, **kw: int) -> int:
        """Peak bytes executing the graph in program order (what the exporter's order
        costs), bytes."""
        return self._p.program_order_peak_bytes(_bind(bind, kw))

    def lower_bound_bytes(self, bind: Mapping[str, int] | None = None, **kw: int) -> int:
        """A lower bound on any schedule's peak with any decisions: persistent bytes plus the
        largest single op's operands and results, bytes."""
        return self._p.lower_bound_bytes(_bind(bind, kw))

    def finalize(
        self,
        bind: Mapping[str, int],
        budget: Budget | None = None,
        device: str | None = None,
        kinds: str = "both",
    ) -> dict:
        """Finalizes the plan at ``bind`` under ``budget`` and returns the ``ebb plan --json``
        report: peaks (bytes), the decisions (each ``candidate``, ``kind``, ``value``,
        ``evict_after``, ``back_before``, ``bytes``), modelled times (µs) and the arena size.
        The decisions are proven by Ebb's independent plan checker.

        ``device``: a profile name (``cpu``, ``a100-40g-pcie4``, ``h100-sxm-pcie5``,
        ``h200-pcie5``, ``custom:flops=…,hbm=…,link=…``); default the plan's, else ``cpu``.
        ``kinds``: ``recompute``, ``swap`` or ``both``.

        Raises :class:`InfeasibleBudget` (with ``smallest_feasible_bytes``) and
        :class:`ShapeError`."""
        return json.loads(self._p.finalize_json(_bind(bind, {}), budget, device, kinds))

    def budget_curve(
        self,
        bind: Mapping[str, int],
        points: int = 16,
        device: str | None = None,
        kinds: str = "both",
    ) -> dict:
        """The budget curve at ``bind`` (``ebb plan --budget-curve --json``'s report): for
        ``points`` budgets from the smallest feasible to the scheduled peak (plus the smallest
        budget whose arena fits and the arena without decisions), each point's
        ``budget_bytes``, ``peak_bytes_planned``, ``arena_bytes``, ``added_us`` (modelled,
        µs), ``added_fraction``, ``recompute_decisions`` and ``swap_decisions``.

        A larger budget never adds more time, and a point's arena never exceeds its budget:
        each point runs the decisions finalize finds at ``decided_at_bytes`` (a budget at most
        its own; ``None``: no budget), the ones adding the least time among those whose arena
        fits. To run a point, finalize (or ``Runtime(budget=...)``) at ``decided_at_bytes``.
        ``own`` is finalize's result at the point's own budget. ``device`` and ``kinds`` as
        :meth:`finalize`.

        Raises :class:`ShapeError`."""
        return json.loads(self._p.budget_curve_json(_bind(bind, {}), points, device, kinds))

    def input_specs(self, bind: Mapping[str, int] | None = None, **kw: int) -> list[tuple[str, np.dtype, tuple[int, ...]]]:
        """``(name, dtype, shape)`` of every step input at the bindings, in the order
        :meth:`Runtime.step` takes them."""
        return [(n, _np_dtype(d), tuple(s)) for n, d, s in self._p.input_specs(_bind(bind, kw))]


def compile(
    model: str | os.PathLike,
    device: str | None = None,
    fusion: bool = True,
    donate: str = "auto",
    unroll: bool = True,
) -> Plan:
    """Imports and compiles a training step into a symbolic plan.

    ``model``: a path to a ``.mlir`` (StableHLO, MLIR generic form, as ``jax.export`` with
    symbolic shapes gives through :func:`ebb.jax.export`) or ``.onnx`` file, or MLIR text.
    ``device`` is recorded in the plan; ``fusion`` plans fused groups (default; ``False``
    materializes every op result); ``donate``: ``auto`` (default: every input with an output
    of its type, i.e. parameters and optimizer state, as JAX's ``donate_argnums``), ``keep``
    (what the model carries), ``none``, or a comma-separated list of inputs whose buffers may
    be reused.
    ``unroll``: unroll ``while`` loops with a constant trip count (a ``lax.scan`` over layers)
    so that their iterations are planned like straight-line code; ``False`` keeps them as
    loops, planned whole.

    Raises :class:`ImportFailed` (file, op, location) for a model Ebb cannot import."""
    text = os.fspath(model)
    if isinstance(model, str) and not os.path.exists(text) and ("func.func" in text or text.lstrip().startswith(("module", '"builtin.module"'))):
        with tempfile.TemporaryDirectory(prefix="ebb-") as d:
            path = os.path.join(d, "step.mlir")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            return Plan(_ebb.Plan.compile_file(path, device, fusion, donate, unroll))
    return Plan(_ebb.Plan.compile_file(text, device, fusion, donate, unroll))


def load(path: str | os.PathLike) -> Plan:
    """Reads a plan written by ``ebb compile`` or :meth:`Plan.save`, verified against its
    embedded graph. Raises :class:`PlanError` for a plan that does not verify."""
    return Plan(_ebb.Plan.load(os.fspath(path)))


def _np_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes  # ships with jax

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


class Runtime:
    """Executes the step under a memory budget: each :meth:`step` finalizes the plan at its
    bindings (cached per shape), performs the evictions, recomputes and swaps, and returns the
    outputs with the step's report.

    ``budget``: bytes (int) or text, as everywhere: ``"2GiB"``, ``"50%"`` (of the step's
    program-order peak at each step's bindings), ``"50%scheduled"`` (of the plan's scheduled
    peak there).

    ``device`` selects the executor:

    - ``"cpu"`` (default): generated kernels on the host; ``"reference"``: the interpreter;
    - ``"simt"``: the GPU executor on a simulated device (the GPU kernels run on the host,
      streams on threads, every step's command sequence checked for hazards);
    - ``"cuda"``: the GPU executor on CUDA device 0 (NVIDIA driver and cuBLAS loaded at run
      time; where they are missing the constructor raises :class:`DeviceUnavailable` naming
      the cause);
    - a device profile name (``"h100-sxm-pcie5"``, ``"custom:…"``): the CPU executor with
      decisions priced on that profile, as in versions where ``device`` only priced.

    ``profile`` prices the decisions (the names of :meth:`Plan.finalize`'s ``device``). When
    it is not given: the profile ``device`` names (``"cpu"`` prices on the measured ``cpu``
    profile), else the plan's recorded profile, else ``h100-sxm-pcie5`` for ``simt`` and
    ``cuda`` and the measured ``cpu`` for the CPU executors. An unknown ``device`` or
    ``profile`` is a ``ValueError`` listing the choices. ``kinds``: ``recompute``, ``swap``
    or ``both``.
    """

    def __init__(
        self,
        plan: Plan,
        budget: Budget | None = None,
        device: str | None = None,
        kinds: str = "both",
        profile: str | None = None,
    ):
        self._rt = _ebb.Runtime(plan._p, budget, device, kinds, profile)

    @property
    def executor(self) -> str:
        """The executor: ``cpu``, ``reference``, ``simt`` or ``cuda``."""
        return self._rt.executor

    def prepare_atlas(self, samples: Sequence[Mapping[str, int]]) -> int:
        """Prepares a plan atlas for this runtime's budget, device and kinds from full
        finalizes at ``samples`` (shapes spread over the range the trainer meets, e.g. a
        geometric grid of sequence lengths; each a ``{symbol: value}`` mapping). Later steps
        at new shapes replay the nearest sample's decisions and arena layout order, checked
        exactly (searching on where the replay runs out), instead of searching from nothing:
        a bounded finalize. Their decisions may differ from the full search's; the planned
        peak stays within the budget and is proven as always. Under a fractional budget
        (``"50%"``, resolved to other bytes at each shape) each sample is finalized under its
        own bytes and a later shape takes the entry whose budget is the same share of its
        peak (within 2 points). :attr:`atlas_hits` counts the steps served so.

        Returns the atlas's number of entries: 0 where the samples need no decisions or the
        plan has several schedule variants (an atlas serves plans of one). Costs one full
        finalize per sample, now. Raises :class:`EbbError` for samples that do not bind the
        plan's symbols."""
        return self._rt.prepare_atlas([_bind(s, {}) for s in samples])

    @property
    def atlas_hits(self) -> int:
        """How many finalizes at new shapes took the plan atlas's fast path (see
        :meth:`prepare_atlas`)."""
        return self._rt.atlas_hits

    def step(self, bind: Mapping[str, int], inputs: Sequence[object]) -> tuple[list, dict]:
        """Runs one step. ``inputs`` in the step's input order (:meth:`Plan.input_specs`),
        each a tensor of any DLPack producer (numpy >= 1.22, torch, JAX, CuPy: anything with
        ``__dlpack__``) or a Python scalar.

        Inputs: contiguous host tensors are read in place, without a copy, and never written
        (a donated input the step updates in place is copied first); strided ones are
        gathered into a copy. With ``device="cuda"`` a CUDA
        tensor of device 0 (contiguous; ``x.contiguous()`` otherwise) is copied device to
        device into its arena offset, ordered after the producer's pending work through
        DLPack's ``stream`` argument; host tensors are uploaded. The other executors refuse
        CUDA tensors. numpy arrays DLPack cannot carry (ml_dtypes' ``bfloat16``, non-native
        byte order) are converted value for value.

        Outputs, with the report (``measured_peak_bytes``, ``peak_bytes_planned``, decision
        counts, ``wall_ms``, ``finalize_us``, …):

        - on the host executors (``cpu``, ``reference``, ``simt``): numpy arrays that share
          the output's memory (``bfloat16`` as ml_dtypes' type); ``torch.from_dlpack(out)``
          takes them without a copy, ``jax.dlpack.from_dlpack(out)`` too where the address
          is aligned as XLA requires (it copies otherwise);
        - with ``device="cuda"``: :class:`Tensor` objects on CUDA device 0, each owning a
          device allocation that holds a copy of the output, ready when ``step`` returns
          (no stream to wait for). ``torch.from_dlpack(out)``/``jax.dlpack.from_dlpack(out)``
          take it without a copy (allocations are 256-byte aligned); the allocation is freed when the last object using it
          (the :class:`Tensor` and every tensor made from it) is gone, independent of the
          :class:`Runtime`.
        """
        args = []
        for i, x in enumerate(inputs):
            if not hasattr(x, "__dlpack__"):
                if not np.isscalar(x):
                    raise EbbError(f"input {i} is a {type(x).__name__}, not a DLPack tensor (numpy, torch, JAX)")
                x = np.asarray(x)
            if isinstance(x, np.ndarray) and not _dlpack_dtype(x.dtype):
                args.append(_raw(x, i))
            else:
                args.append(x)
        outs, report = self._rt.step(_bind(bind, {}), args)
        if self._rt.executor != "cuda":
            outs = [_to_numpy(t) for t in outs]
        return outs, json.loads(report)


def _dlpack_dtype(dtype: np.dtype) -> bool:
    """Whether numpy exports ``dtype`` through DLPack as Ebb reads it (native byte order,
    a type DLPack has)."""
    native = dtype.byteorder in "=|" or (dtype.byteorder == "<") == (sys.byteorder == "little")
    # numpy exports bool through DLPack from 1.25 on.
    kinds = "biuf" if _NUMPY_DLPACK_BOOL else "iuf"
    return native and dtype.fields is None and dtype.kind in kinds


_NUMPY_DLPACK_BOOL = tuple(int(p) for p in np.__version__.split(".")[:2] if p.isdigit()) >= (1, 25)


def _raw(a: np.ndarray, i: int) -> tuple[bytes, str, list[int]]:
    """``a`` as little-endian C-order bytes with its dtype name (the types DLPack lacks)."""
    if a.dtype.kind not in "biuf" and a.dtype.name != "bfloat16" or a.dtype.fields is not None:
        raise EbbError(
            f"input {i} has dtype {a.dtype.str} ({a.dtype.name}); Ebb takes bool, int8/16/32/64, "
            "uint8/32/64, float16/32/64 and bfloat16 arrays"
        )
    # The bytes cross the boundary little-endian: a big-endian array (`>f4`) is converted,
    # value for value, never reinterpreted.
    if a.dtype.byteorder == ">" or (a.dtype.byteorder == "=" and sys.byteorder == "big"):
        a = a.astype(a.dtype.newbyteorder("<"))
    # C order, 0-d kept 0-d (np.ascontiguousarray would make it 1-d).
    a = np.asarray(a, order="C")
    return (a.tobytes(), a.dtype.name, list(a.shape))


def _to_numpy(t: Tensor) -> np.ndarray:
    """A host output as a numpy array sharing its memory (bfloat16 through its bits)."""
    if t.dtype == "bfloat16":
        return np.from_dlpack(t.as_bits()).view(_np_dtype("bfloat16"))
    return np.from_dlpack(t)


def pack(
    plan: Plan,
    lengths: Iterable[int],
    budget: Budget,
    device: str | None = None,
    kinds: str = "both",
    max_added: float = 0.1,
    bucket_width: int = 64,
    batch_symbol: str = "B",
    seq_symbol: str = "S",
    fixed: Mapping[str, int] | None = None,
) -> dict:
    """Packs sequence lengths into batches that fit ``budget`` (bytes or ``"40GiB"``) on
    ``device`` after the runtime's decisions, whose modelled added time stays within
    ``max_added`` of the step (0.1 = 10%).

    Returns the ``ebb pack --json`` report: ``packings[0]`` is Ebb's (``batches``: each with
    ``indices`` into ``lengths``, ``batch``/``seq`` bindings, ``tokens``, ``padding_tokens``
    and ``cost``: ``peak_bytes``, decision counts, ``added_us``, ``step_us``), then the
    fixed-token and bucket baselines with and without decisions; ``gain_vs_fixed_tokens``;
    ``finalizes``; ``ebb_ms``.

    Raises :class:`InfeasibleBudget` when a sequence does not fit alone and
    :class:`ShapeError` for a length above the sequence symbol's range."""
    return json.loads(
        plan._p.pack_json(
            [_int(x, f"length {i}") for i, x in enumerate(lengths)],
            budget,
            device,
            kinds,
            float(max_added),
            _int(bucket_width, "bucket_width"),
            batch_symbol,
            seq_symbol,
            _bind(fixed, {}),
        )
    )
