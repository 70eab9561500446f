"""The emitter registry and the context an emitter writes ONNX nodes through.

An emitter turns one canonical node into ONNX nodes for one range of opsets. Its signature
mirrors the op's schema; inputs arrive as ``Ref`` (an ONNX value name that also carries the
msc ``TensorType`` when known, ``None`` for an absent optional input)::

    @emitter("softmax", since=13)
    def softmax(e: Emit, x: Ref, *, axis: int) -> Ref:
        return e.op("Softmax", x, axis=axis)

An emitter returns the Ref (or a tuple of Refs) holding each output; the driver renames them
to the node's output names. It raises ``Unsupported`` for a case its opset cannot express,
and the driver then tries the op's decomposition.

# NOTE: invariants
# - Emitters are found by the newest ``since`` <= the target opset (one per op and since).
# - Emitters never touch the msc graph; they only append ONNX nodes to their ``Emit``.
# - Helper constants are ``Constant`` nodes, never initializers, so the initializers of a
#   model written node for node (``optimize=False``) are exactly the graph's weights; the
#   optimization pass (``codegen.onnx.optimize``) then makes them initializers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper

from msc.errors import Unsupported
from msc.ir.dtype import DType
from msc.ir.registry import VersionedRegistry
from msc.ir.types import TensorType

__all__ = [
    "Emitter",
    "EmitterRegistry",
    "Emit",
    "Ref",
    "Unsupported",
    "tensor_proto",
    "ONNX_DTYPE",
    "onnx_attr",
]


ONNX_DTYPE: dict[DType, int] = {
    DType.BOOL: onnx.TensorProto.BOOL,
    DType.INT8: onnx.TensorProto.INT8,
    DType.INT16: onnx.TensorProto.INT16,
    DType.INT32: onnx.TensorProto.INT32,
    DType.INT64: onnx.TensorProto.INT64,
    DType.UINT8: onnx.TensorProto.UINT8,
    DType.UINT16: onnx.TensorProto.UINT16,
    DType.UINT32: onnx.TensorProto.UINT32,
    DType.UINT64: onnx.TensorProto.UINT64,
    DType.FLOAT16: onnx.TensorProto.FLOAT16,
    DType.BFLOAT16: onnx.TensorProto.BFLOAT16,
    DType.FLOAT32: onnx.TensorProto.FLOAT,
    DType.FLOAT64: onnx.TensorProto.DOUBLE,
    DType.COMPLEX64: onnx.TensorProto.COMPLEX64,
    DType.COMPLEX128: onnx.TensorProto.COMPLEX128,
    DType.FLOAT8_E4M3FN: onnx.TensorProto.FLOAT8E4M3FN,
    DType.FLOAT8_E4M3FNUZ: onnx.TensorProto.FLOAT8E4M3FNUZ,
    DType.FLOAT8_E5M2: onnx.TensorProto.FLOAT8E5M2,
    DType.FLOAT8_E5M2FNUZ: onnx.TensorProto.FLOAT8E5M2FNUZ,
    DType.FLOAT8_E8M0: onnx.TensorProto.FLOAT8E8M0,
    DType.FLOAT4_E2M1: onnx.TensorProto.FLOAT4E2M1,
    DType.INT4: onnx.TensorProto.INT4,
    DType.UINT4: onnx.TensorProto.UINT4,
    DType.INT2: onnx.TensorProto.INT2,
    DType.UINT2: onnx.TensorProto.UINT2,
    DType.STRING: onnx.TensorProto.STRING,
}


_PACKED = {
    onnx.TensorProto.INT4,
    onnx.TensorProto.UINT4,
    onnx.TensorProto.INT2,
    onnx.TensorProto.UINT2,
    onnx.TensorProto.FLOAT4E2M1,
}


def tensor_proto(
    arr: np.ndarray, name: str = "", target: onnx.TensorProto | None = None
) -> onnx.TensorProto:
    """A TensorProto (``target`` if given) holding ``arr`` as raw little-endian bytes (a str
    tensor as string_data, the one form ONNX has for it)."""
    t = onnx.TensorProto() if target is None else target
    t.name = name
    t.data_type = ONNX_DTYPE[DType.from_numpy(arr.dtype)]
    t.dims.extend(int(d) for d in arr.shape)
    if t.data_type == onnx.TensorProto.STRING:  # ONNX strings: UTF-8 bytes in string_data
        t.string_data.extend(x.encode("utf-8") for x in np.asarray(arr).reshape(-1).tolist())
        return t
    if t.data_type in _PACKED:  # ONNX packs 4-/2-bit types; msc holds one per byte
        from onnx import numpy_helper

        t.raw_data = numpy_helper.from_array(np.asarray(arr)).raw_data
        return t
    a = np.ascontiguousarray(arr)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    t.raw_data = a.reshape(-1).view(np.uint8).tobytes()
    return t


class Ref(str):
    """An ONNX value name, with the msc type of the value when it is known."""

    type: TensorType | None

    def __new__(cls, name: str, type: TensorType | None = None) -> Ref:
        r = super().__new__(cls, name)
        r.type = type
        return r

    @property
    def dtype(self) -> DType:
        if self.type is None:
            raise Unsupported(f"the dtype of {str(self)!r} is unknown")
        return self.type.dtype

    @property
    def shape(self):
        if self.type is None or self.type.shape is None:
            raise Unsupported(f"the rank of {str(self)!r} is unknown")
        return self.type.shape

    @property
    def rank(self) -> int:
        return len(self.shape)

    def static_shape(self, what: str = "") -> tuple[int, ...]:
        s = self.shape
        if not all(isinstance(d, int) for d in s):
            raise Unsupported(f"{what or 'this emitter'} needs a static shape, got {list(s)}")
        return tuple(s)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Emitter:
    op: str
    since: int
    fn: Callable[..., Any]


class EmitterRegistry:
    """Emitters by canonical op and first opset; registering (op, since) twice is an error."""

    def __init__(self) -> None:
        self._by_op: VersionedRegistry[str, Emitter] = VersionedRegistry("ONNX emitter")

    def register(self, op: str, since: int, fn: Callable[..., Any]) -> None:
        from msc.ops import registry as ops

        if op not in ops:
            raise ValueError(f"emitter for unknown canonical op {op!r}")
        self._by_op.register(op, since, Emitter(op, since, fn))

    def __call__(self, *ops: str, since: int = 1) -> Callable[[Callable[..., Any]], Any]:
        """Decorator: register the function for each of ``ops`` from opset ``since``."""

        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            for op in ops:
                self.register(op, since, fn)
            return fn

        return deco

    def lookup(self, op: str, opset: int) -> Emitter | None:
        """The emitter with the newest ``since`` <= opset, or None."""
        return self._by_op.lookup(op, opset)

    def versions(self, op: str) -> list[int]:
        return self._by_op.versions(op)

    def __contains__(self, op: object) -> bool:
        return op in self._by_op

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_op)


def onnx_attr(key: str, value: Any) -> onnx.AttributeProto:
    """An ONNX attribute for a plain value (number, string, bytes, list, tensor)."""
    if isinstance(value, bytes):  # binary data (a custom node's blob): a STRING, byte for byte
        attr = onnx.AttributeProto(name=key, type=onnx.AttributeProto.STRING)
        attr.s = value
        return attr
    if isinstance(value, np.ndarray):
        return helper.make_attribute(key, tensor_proto(value))
    if isinstance(value, (list, tuple)):
        value = list(value)
        if value and all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value
        ):
            return helper.make_attribute(
                key, [int(v) for v in value], attr_type=onnx.AttributeProto.INTS
            )
        if value and all(isinstance(v, (int, float, np.number)) for v in value):
            return helper.make_attribute(
                key, [float(v) for v in value], attr_type=onnx.AttributeProto.FLOATS
            )
    if isinstance(value, bool):
        value = int(value)
    return helper.make_attribute(key, value)


class Emit:
    """Where an emitter writes: ONNX nodes for one msc node at one opset.

    Args:
        opset: the target default-domain opset.
        fresh: a function giving a new unique value name from a hint.
        base: the base of helper node names (the msc node's name or first output name).
    """

    def __init__(
        self,
        opset: int,
        fresh: Callable[[str], str],
        base: str,
        node: Any = None,
        subgraph: Callable[[Any, str], onnx.GraphProto] | None = None,
    ):
        self.opset = opset
        self._subgraph = subgraph
        self.nodes: list[onnx.NodeProto] = []
        self.node = node  # the msc node being emitted (read-only)
        self._fresh = fresh
        self._base = base
        self._k = 0

    def fresh(self, hint: str = "t") -> str:
        return self._fresh(f"{self._base}/{hint}")

    def op(
        self,
        op_type: str,
        *inputs: str | None,
        outputs: int = 1,
        types: Sequence[TensorType | None] | None = None,
        **attrs: Any,
    ) -> Any:
        """Append one ONNX node; return its output Ref (or a tuple when ``outputs`` > 1).

        ``None`` inputs become ONNX's empty name (an absent optional input); trailing ones are
        dropped. ``None`` attributes and empty lists are left out (ONNX defaults apply).
        """
        ins = ["" if i is None else str(i) for i in inputs]
        while ins and ins[-1] == "":
            ins.pop()
        self._k += 1
        outs = [
            self.fresh(f"{op_type}_{self._k}" + (f".{i}" if outputs > 1 else ""))
            for i in range(outputs)
        ]
        node = onnx.NodeProto()
        node.op_type = op_type
        node.name = f"{self._base}/{op_type}_{self._k}"
        node.input.extend(ins)
        node.output.extend(outs)
        for k in sorted(attrs):
            v = attrs[k]
            if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
                continue
            node.attribute.append(onnx_attr(k, v))
        self.nodes.append(node)
        tys = list(types) if types is not None else [None] * outputs
        refs = tuple(Ref(o, t) for o, t in zip(outs, tys))
        return refs[0] if outputs == 1 else refs

    def const(self, value: Any, dtype: DType | None = None) -> Ref:
        """A Constant node holding ``value`` (a numpy array, or a Python scalar/list)."""
        arr = np.asarray(value, dtype=None if dtype is None else dtype.to_numpy())
        if arr.dtype == np.float64 and dtype is None and not isinstance(value, np.ndarray):
            arr = arr.astype(np.float32)
        ref = self.op(
            "Constant", value=arr, types=[TensorType(DType.from_numpy(arr.dtype), arr.shape)]
        )
        return ref

    def ints(self, values: Sequence[int]) -> Ref:
        """A 1-d int64 Constant (axes, shapes, pads, sizes)."""
        return self.const(np.asarray(list(values), dtype=np.int64))

    def scalar(self, value: Any, dtype: DType) -> Ref:
        """A 0-d Constant of ``dtype``."""
        return self.const(np.asarray(value, dtype=dtype.to_numpy()))

    def cast(self, x: str, dtype: DType) -> Ref:
        return self.op("Cast", x, to=ONNX_DTYPE[dtype])

    def subgraph(self, graph: Any, name: str) -> onnx.GraphProto:
        """An msc subgraph (a branch) as a GraphProto in this model's namespace."""
        if self._subgraph is None:
            raise Unsupported("subgraphs are not available here")
        return self._subgraph(graph, name)

    def require(self, cond: bool, reason: str) -> None:
        if not cond:
            raise Unsupported(reason)


EMITTERS = EmitterRegistry()
emitter = EMITTERS
