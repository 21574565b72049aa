"""From a JAX function to an Ebb plan, without touching MLIR: :func:`export` runs
``jax.export`` with symbolic shapes and hands Ebb the StableHLO module in MLIR generic form
(the pretty form that ``Exported.mlir_module()`` prints does not parse without JAX's dialects).

    >>> import jax.numpy as jnp, ebb.jax
    >>> def step(w, x):
    ...     return jnp.tanh(x @ w).sum()
    >>> plan = ebb.jax.export(step, ebb.jax.spec((64, 64)), ebb.jax.spec("B, 64"), symbolic="B")
    >>> plan.peak_bytes(B=128)

Argument specs are pytrees whose leaves are :func:`spec` objects (shapes with symbol names or
expressions such as ``"B, 8*h, 8*w, 3"``), ``jax.ShapeDtypeStruct`` or arrays (static shapes).
Requires ``jax`` (``pip install ebb[jax]``).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from typing import Any, Callable, Sequence, Union

from . import Plan, compile as _compile

Shape = Union[str, Sequence[Union[int, str]]]


@dataclasses.dataclass(frozen=True)
class Spec:
    """A symbolic argument spec: ``shape`` as ``"B, S"`` or ``("B", 768)``; ``dtype`` a numpy
    or JAX dtype (default float32)."""

    shape: Shape
    dtype: Any = "float32"


def spec(shape: Shape, dtype: Any = "float32") -> Spec:
    """An argument spec with symbolic dimensions, resolved by :func:`export`."""
    return Spec(shape, dtype)


def generic_text(exported) -> str:
    """The StableHLO module of a ``jax.export.Exported`` in MLIR generic form, with debug
    locations (what ``ebb import`` and :func:`ebb.compile` read)."""
    from jax._src.interpreters import mlir as jm
    from jax._src.lib.mlir import ir

    with jm.make_ir_context():
        m = ir.Module.parse(exported.mlir_module())
        return m.operation.get_asm(print_generic_op_form=True, enable_debug_info=True)


def export(
    fn: Callable,
    *arg_specs: Any,
    symbolic: str | None = None,
    constraints: Sequence[str] = (),
    device: str | None = None,
    fusion: bool = True,
    donate: str = "auto",
    platform: str = "cpu",
) -> Plan:
    """Exports ``fn`` at ``arg_specs`` with symbolic shapes and compiles it into a plan.

    ``symbolic`` declares the symbol names in order (``"B, S"``); ``constraints`` are
    ``jax.export`` constraints (``"S <= 1024"``); names used in specs but not declared are
    declared on first use. ``device``, ``fusion`` and ``donate`` are :func:`ebb.compile`'s.
    The module keeps every argument (JAX's flattened order is the plan's input order).

    Raises :class:`ebb.ImportFailed` when the exported module uses an op Ebb does not
    import, and JAX's own errors for specs it rejects."""
    import jax
    from jax import export as jexport

    scope = jexport.SymbolicScope(tuple(constraints))
    if symbolic:
        jexport.symbolic_shape(symbolic, scope=scope)

    def resolve(leaf):
        if isinstance(leaf, Spec):
            shape = leaf.shape
            if not isinstance(shape, str):
                shape = ", ".join(str(d) for d in shape)
            dims = jexport.symbolic_shape(shape, scope=scope) if shape.strip() else ()
            return jax.ShapeDtypeStruct(tuple(dims), leaf.dtype)
        if isinstance(leaf, jax.ShapeDtypeStruct):
            return leaf
        return jax.ShapeDtypeStruct(tuple(leaf.shape), leaf.dtype)

    specs = jax.tree_util.tree_map(resolve, arg_specs, is_leaf=lambda x: isinstance(x, Spec))
    exported = jexport.export(jax.jit(fn), platforms=[platform])(*specs)
    kept = tuple(exported.module_kept_var_idx)
    if kept != tuple(range(len(exported.in_avals))):
        # Ebb's input order is the module's: a dropped argument would shift every later one.
        raise ValueError(
            f"jax.export dropped unused arguments {sorted(set(range(len(exported.in_avals))) - set(kept))}; "
            "use every argument in the step"
        )
    with tempfile.TemporaryDirectory(prefix="ebb-jax-") as d:
        path = os.path.join(d, f"{getattr(fn, '__name__', 'step')}.mlir")
        with open(path, "w", encoding="utf-8") as f:
            f.write(generic_text(exported))
        return _compile(path, device=device, fusion=fusion, donate=donate)
