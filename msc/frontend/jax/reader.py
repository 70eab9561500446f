"""Reading a StableHLO module: MLIR text, MLIR bytecode, serialized ``jax.export`` bytes or an
``Exported``, parsed by the MLIR Python bindings jaxlib bundles (the stablehlo and chlo
dialects registered in JAX's own context). Nothing in the input is run.

# NOTE: invariants
# - Parsing goes through ``jax._src.interpreters.mlir.make_ir_context`` (the dialect
#   registration jaxlib does for itself): a jaxlib internal, so the jax extra pins jax and a
#   test checks the pin.
# - Every parse failure is a BadModelError naming what was read.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from msc.errors import BadModelError, Unsupported
from msc.ir import DType, TensorType

__all__ = ["parse_module", "ShloOp", "tensor_type", "dtype_of", "JAX_VERSION"]

JAX_VERSION = "0.10.2"


def _mlir():
    try:
        from jax._src.interpreters import mlir
        from jax._src.lib.mlir import ir
    except ImportError as e:  # pragma: no cover - the extra is missing
        raise BadModelError(f"reading StableHLO needs jax (the jax extra): {e}") from None
    return mlir, ir


def input_dims(exported: Any) -> list[list[int | str]]:
    """The input shapes an ``Exported`` declares, a symbolic dim as its text (``b``)."""
    return [[d if isinstance(d, int) else str(d) for d in a.shape] for a in exported.in_avals]


def parse_module(source: Any) -> tuple[Any, Any, list | None]:
    """The module (and its context, and the input shapes with symbolic dims when the source
    is a jax.export artifact) of MLIR text or bytecode, serialized jax.export bytes, or an
    ``Exported``."""
    mlir, ir = _mlir()
    dims = None
    if hasattr(source, "mlir_module_serialized") and hasattr(source, "in_avals"):
        dims = input_dims(source)
        source = source.mlir_module()
    elif isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
        if not data.startswith(b"ML\xefR"):
            try:
                from jax import export

                exported = export.deserialize(bytearray(data))
                dims = input_dims(exported)
                source = exported.mlir_module()
            except Exception as e:  # a corrupt flatbuffer raises anything
                try:
                    source = data.decode("utf-8")
                except UnicodeDecodeError:
                    raise BadModelError(
                        f"not a jax.export artifact, MLIR bytecode or MLIR text: {e}"
                    ) from None
        else:
            source = data
    if not isinstance(source, str | bytes):
        raise TypeError(f"from_stablehlo takes text, bytes or an Exported, not {type(source)}")
    ctx = mlir.make_ir_context()
    try:
        with ctx:
            module = ir.Module.parse(source, context=ctx)
    except Exception as e:
        msg = str(e).strip().splitlines()
        raise BadModelError(f"not a valid StableHLO module: {' '.join(msg)[:300]}") from None
    return module, ctx, dims


_ELEM = {"i1": DType.BOOL, "bf16": DType.BFLOAT16}


def dtype_of(elem: Any) -> DType:
    s = str(elem)
    if s in _ELEM:
        return _ELEM[s]
    if s.startswith("ui"):
        s = "u" + s[2:]
    try:
        return DType(s)
    except ValueError:
        raise Unsupported(f"element type {s}, which msc does not hold") from None


def tensor_type(t: Any) -> TensorType:
    _, ir = _mlir()
    try:
        rt = ir.RankedTensorType(t)
    except Exception:
        raise Unsupported(f"type {t} (msc reads ranked tensors)") from None
    dims: list[Any] = []
    for d in rt.shape:
        dims.append(None if ir.ShapedType.is_dynamic_size(d) else int(d))
    return TensorType(dtype_of(rt.element_type), dims)


class ShloOp:
    """One operation, its attributes read as Python values."""

    def __init__(self, op: Any) -> None:
        self.op = op.operation
        self.name = self.op.name

    def has(self, key: str) -> bool:
        return key in self.op.attributes

    def raw(self, key: str) -> Any:
        return self.op.attributes[key]

    def attr(self, key: str, default: Any = None) -> Any:
        if key not in self.op.attributes:
            return default
        return attr_value(self.op.attributes[key])

    @property
    def out_types(self) -> list[TensorType]:
        return [tensor_type(r.type) for r in self.op.results]


def attr_value(a: Any) -> Any:
    _, ir = _mlir()
    for cls, conv in (
        (ir.DenseI64ArrayAttr, lambda x: [int(v) for v in x]),
        (ir.DenseBoolArrayAttr, lambda x: [bool(v) for v in x]),
        (ir.BoolAttr, lambda x: bool(x.value)),
        (ir.IntegerAttr, lambda x: int(x.value)),
        (ir.FloatAttr, lambda x: float(x.value)),
        (ir.StringAttr, lambda x: str(x.value)),
        (ir.FlatSymbolRefAttr, lambda x: str(x.value)),
        (ir.DenseElementsAttr, dense_array),
        (ir.ArrayAttr, lambda x: [attr_value(v) for v in x]),
    ):
        if isinstance(a, cls):
            return conv(a)
    return a


def dense_array(a: Any) -> np.ndarray:
    _, ir = _mlir()
    t = tensor_type(a.type)
    dt = t.dtype
    if dt is DType.BOOL:
        if a.is_splat:
            return np.full(t.shape, bool(ir.BoolAttr(a.get_splat_value()).value))
        # the bindings give an i1 element as a Python int, or (older ones) as an IntegerAttr
        items = (a[i] for i in range(len(a)))
        flat = [bool(v if isinstance(v, int) else ir.IntegerAttr(v).value) for v in items]
        return np.array(flat, dtype=bool).reshape(t.shape)
    if dt is DType.BFLOAT16:
        raise Unsupported("a bf16 constant")
    shape = tuple(int(d) for d in t.shape)
    arr = np.array(a)
    if arr.size == 1 and int(np.prod(shape)) != 1 or a.is_splat:
        arr = np.full(shape, arr.reshape(-1)[0])
    arr = arr.reshape(shape)
    return np.array(arr, dtype=dt.to_numpy(), order="C")
