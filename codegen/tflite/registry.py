"""The emitter registry and the context an emitter writes TFLite operators through.

An emitter turns one canonical node into TFLite operators. Its signature mirrors the op's
schema; inputs arrive as ``Ref`` (a tensor index of the subgraph being written, with the msc
``TensorType``; ``None`` for an absent optional input)::

    @emitter("softmax")
    def softmax(e: Emit, x: Ref, *, axis: int) -> Ref:
        e.require(axis in (-1, x.rank - 1), "softmax over a dim other than the last")
        return e.op("SOFTMAX", [x], e.out_type(), beta=1.0)

It returns the Ref (or a tuple of Refs) holding each output. It raises ``Unsupported`` for a
case TFLite cannot express, and the driver then tries the op's decomposition.

# NOTE: invariants
# - Emitters only append operators and tensors through their ``Emit``; they never touch the
#   msc graph.
# - A constant an emitter derives (a transposed filter, a shape) is a new constant tensor,
#   deduplicated by content with every other buffer of the model.
# - Options are passed by their schema names; ``e.op`` finds the op's options table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from msc.errors import Unsupported
from msc.ir.dtype import DType
from msc.ir.registry import Registry
from msc.ir.types import TensorType

__all__ = ["Emit", "Ref", "Emitter", "EmitterRegistry", "EMITTERS", "emitter", "TFL_TYPE"]

TFL_TYPE: dict[DType, int] = {
    DType.FLOAT32: 0,
    DType.FLOAT16: 1,
    DType.INT32: 2,
    DType.UINT8: 3,
    DType.INT64: 4,
    DType.STRING: 5,
    DType.BOOL: 6,
    DType.INT16: 7,
    DType.COMPLEX64: 8,
    DType.INT8: 9,
    DType.FLOAT64: 10,
    DType.COMPLEX128: 11,
    DType.UINT64: 12,
    DType.UINT32: 15,
    DType.UINT16: 16,
    DType.INT4: 17,
    DType.BFLOAT16: 18,
}

# The options table each builtin op writes (ops absent here take none).
OPTIONS_OF: dict[str, str] = {
    "CONV_2D": "Conv2DOptions",
    "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
    "CONV_3D": "Conv3DOptions",
    "CONV_3D_TRANSPOSE": "Conv3DOptions",
    "AVERAGE_POOL_2D": "Pool2DOptions",
    "MAX_POOL_2D": "Pool2DOptions",
    "L2_POOL_2D": "Pool2DOptions",
    "FULLY_CONNECTED": "FullyConnectedOptions",
    "SOFTMAX": "SoftmaxOptions",
    "CONCATENATION": "ConcatenationOptions",
    "ADD": "AddOptions",
    "SUB": "SubOptions",
    "MUL": "MulOptions",
    "DIV": "DivOptions",
    "L2_NORMALIZATION": "L2NormOptions",
    "LOCAL_RESPONSE_NORMALIZATION": "LocalResponseNormalizationOptions",
    "RESIZE_BILINEAR": "ResizeBilinearOptions",
    "RESIZE_NEAREST_NEIGHBOR": "ResizeNearestNeighborOptions",
    "RESHAPE": "ReshapeOptions",
    "SPACE_TO_DEPTH": "SpaceToDepthOptions",
    "DEPTH_TO_SPACE": "DepthToSpaceOptions",
    "GATHER": "GatherOptions",
    "MEAN": "ReducerOptions",
    "SUM": "ReducerOptions",
    "REDUCE_PROD": "ReducerOptions",
    "REDUCE_MAX": "ReducerOptions",
    "REDUCE_MIN": "ReducerOptions",
    "REDUCE_ANY": "ReducerOptions",
    "REDUCE_ALL": "ReducerOptions",
    "SQUEEZE": "SqueezeOptions",
    "SPLIT": "SplitOptions",
    "SPLIT_V": "SplitVOptions",
    "STRIDED_SLICE": "StridedSliceOptions",
    "CAST": "CastOptions",
    "ARG_MAX": "ArgMaxOptions",
    "ARG_MIN": "ArgMinOptions",
    "TRANSPOSE_CONV": "TransposeConvOptions",
    "SHAPE": "ShapeOptions",
    "PACK": "PackOptions",
    "UNPACK": "UnpackOptions",
    "ONE_HOT": "OneHotOptions",
    "LEAKY_RELU": "LeakyReluOptions",
    "MIRROR_PAD": "MirrorPadOptions",
    "BATCH_MATMUL": "BatchMatMulOptions",
    "CUMSUM": "CumsumOptions",
    "GELU": "GeluOptions",
    "TRANSPOSE": "TransposeOptions",
    "PAD": "PadOptions",
    "PADV2": "PadV2Options",
    "DEQUANTIZE": "DequantizeOptions",
    "QUANTIZE": "QuantizeOptions",
    "MAXIMUM": "MaximumMinimumOptions",
    "MINIMUM": "MaximumMinimumOptions",
    "SELECT_V2": "SelectV2Options",
    "SLICE": "SliceOptions",
    "TILE": "TileOptions",
    "EXPAND_DIMS": "ExpandDimsOptions",
    "GATHER_ND": "GatherNdOptions",
    "BROADCAST_TO": "BroadcastToOptions",
    "TOPK_V2": "TopKV2Options",
    "LOG_SOFTMAX": "LogSoftmaxOptions",
    "FILL": "FillOptions",
    "RANGE": "RangeOptions",
    "REVERSE_V2": "ReverseV2Options",
    "UNIDIRECTIONAL_SEQUENCE_LSTM": "UnidirectionalSequenceLSTMOptions",
    "UNIDIRECTIONAL_SEQUENCE_RNN": "SequenceRNNOptions",
}


@dataclass(frozen=True, slots=True)
class Ref:
    """A tensor of the subgraph being written, with its msc type."""

    index: int
    type: TensorType

    @property
    def dtype(self) -> DType:
        return self.type.dtype

    @property
    def shape(self) -> tuple:
        if self.type.shape is None:
            raise Unsupported("a tensor of unknown rank")
        return self.type.shape

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True, slots=True)
class Emitter:
    op: str
    fn: Callable[..., Any]


class EmitterRegistry:
    """Emitters by canonical op; registering an op twice is an error."""

    def __init__(self) -> None:
        self._by_op: Registry[str, Emitter] = Registry("TFLite emitter")

    def register(self, op: str, fn: Callable[..., Any]) -> None:
        from msc.ops import registry as ops

        if op not in ops:
            raise ValueError(f"emitter for unknown canonical op {op!r}")
        self._by_op.register(op, Emitter(op, fn))

    def __call__(self, *ops: str) -> Callable[[Callable[..., Any]], Any]:
        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            for op in ops:
                self.register(op, fn)
            return fn

        return deco

    def get(self, op: str) -> Emitter | None:
        return self._by_op.get(op)

    def __contains__(self, op: object) -> bool:
        return op in self._by_op

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_op)


EMITTERS = EmitterRegistry()
emitter = EMITTERS


_FOLD_LIMIT = 1 << 24  # elements: a larger constant stays computed


def fold_value(v: Any) -> np.ndarray | None:
    """``v``'s values when it is a weight, or computed from weights alone by the arranging
    ops below (static shapes only), else None."""
    from msc.ir.graph import Weight

    if isinstance(v, Weight):
        return np.asarray(v.numpy()) if v.has_data else None
    n = v.producer
    if n is None or n.op not in _FOLDS or not v.type.is_static:
        return None
    if int(np.prod(v.type.shape)) > _FOLD_LIMIT:
        return None
    ins = [None if u is None else fold_value(u) for u in n.inputs]
    if any(a is None for a, u in zip(ins, n.inputs) if u is not None):
        return None
    a = n.attrs
    try:
        if n.op == "split":
            if a.get("sizes") is None or len(ins) > 1:
                return None
            edges = np.cumsum([int(k) for k in a["sizes"]])[:-1]
            return np.split(ins[0], edges, axis=int(a["axis"]))[n.outputs.index(v)]
        out = _FOLDS[n.op](ins, a)
    except (KeyError, ValueError, TypeError, IndexError, AttributeError):
        return None
    if out is None:
        return None
    out = np.asarray(out)
    return out.reshape(v.type.shape) if out.size == int(np.prod(v.type.shape)) else None


def _slice(ins: list, a: dict) -> np.ndarray | None:
    if len(ins) > 1:
        return None
    x = ins[0]
    index = [slice(None)] * x.ndim
    steps = a.get("steps") or [1] * len(a["axes"])
    for st, en, ax, sp in zip(a["starts"], a["ends"], a["axes"], steps):
        index[int(ax) % x.ndim] = slice(int(st), int(en), int(sp))
    return x[tuple(index)]


_FOLDS: dict[str, Callable[[list, dict], Any]] = {
    "constant": lambda ins, a: a["value"],
    "full": lambda ins, a: None if ins else np.full(a["shape"], a["value"], a["dtype"].to_numpy()),
    "concat": lambda ins, a: np.concatenate(ins, axis=int(a["axis"])),
    "split": lambda ins, a: None,  # in fold_value (one output of several)
    "slice": _slice,
    "unsqueeze": lambda ins, a: ins[0] if len(ins) == 1 else None,  # reshaped to the type
    "squeeze": lambda ins, a: ins[0] if len(ins) == 1 else None,
    "reshape": lambda ins, a: ins[0],
    "transpose": lambda ins, a: np.transpose(ins[0], a["perm"]),
    "neg": lambda ins, a: -ins[0],
    "add": lambda ins, a: ins[0] + ins[1],
    "cast": lambda ins, a: ins[0].astype(a["to"].to_numpy()),
}


class Emit:
    """Where an emitter writes: TFLite operators for one msc node (see ``model.Writer``)."""

    def __init__(self, writer: Any, node: Any) -> None:
        self.w = writer
        self.node = node

    def require(self, cond: bool, reason: str) -> None:
        if not cond:
            raise Unsupported(reason)

    def out_type(self, i: int = 0) -> TensorType:
        return self.node.outputs[i].type

    def const_value(self, r: Ref | None) -> np.ndarray | None:
        """The values of a constant input (a weight or a constant node), else None."""
        return None if r is None else self.w.const_value(r.index)

    def folded(self, i: int) -> np.ndarray | None:
        """Input ``i``'s values when the msc graph computes it from weights alone through ops
        that only arrange or negate them (how frontends stack a cell's per-gate weights:
        split, concat, unsqueeze, slice, ...), else None. An emitter that takes them as
        constants writes its own tensors; what it read is dropped if nothing else reads it."""
        v = self.node.inputs[i] if i < len(self.node.inputs) else None
        return None if v is None else fold_value(v)

    def const(self, value: Any, dtype: DType | None = None) -> Ref:
        arr = np.asarray(value) if dtype is None else np.asarray(value, dtype.to_numpy())
        return self.w.const_tensor(arr)

    def ints(self, values: Sequence[int], dtype: DType = DType.INT32) -> Ref:
        return self.const(np.asarray(list(values), dtype.to_numpy()))

    def tensor(self, t: TensorType, name: str = "") -> Ref:
        return self.w.new_tensor(t, name)

    def op(
        self,
        name: str,
        inputs: Sequence[Ref | None],
        outputs: TensorType | Sequence[TensorType],
        **options: Any,
    ) -> Any:
        """Append builtin op ``name``; returns its output Ref (a tuple for several)."""
        many = not isinstance(outputs, TensorType)
        types = list(outputs) if many else [outputs]  # type: ignore[list-item]
        outs = [self.w.new_tensor(t) for t in types]
        self.w.add_op(name, inputs, outs, options, OPTIONS_OF.get(name, ""))
        return tuple(outs) if many else outs[0]

    def transpose(self, x: Ref, perm: Sequence[int]) -> Ref:
        """``x`` with its dims permuted: a constant is permuted at write time."""
        perm = [int(p) for p in perm]
        if perm == list(range(len(perm))):
            return x
        c = self.const_value(x)
        if c is not None:
            return self.const(np.ascontiguousarray(np.transpose(c, perm)))
        shape = [x.shape[p] for p in perm]
        return self.op("TRANSPOSE", [x, self.ints(perm)], TensorType(x.dtype, shape))

    def reshape(self, x: Ref, shape: Sequence[int], out: TensorType | None = None) -> Ref:
        c = self.const_value(x)
        if c is not None and all(d >= 0 for d in shape):
            return self.const(c.reshape(list(shape)))
        t = out or TensorType(x.dtype, [None if d < 0 else d for d in shape])
        return self.op("RESHAPE", [x, self.ints(shape)], t, new_shape=list(shape))

    def expand_dims(self, x: Ref, axis: int) -> Ref:
        shape = list(x.shape)
        shape.insert(axis, 1)
        return self.op("EXPAND_DIMS", [x, self.ints([axis])], TensorType(x.dtype, shape))

    def squeeze(self, x: Ref, axes: Sequence[int], out: TensorType) -> Ref:
        return self.op("SQUEEZE", [x], out, squeeze_dims=[int(a) for a in axes])

    def cast(self, x: Ref, to: DType) -> Ref:
        if x.dtype is to:
            return x
        return self.op(
            "CAST",
            [x],
            TensorType(to, x.type.shape),
            in_data_type=TFL_TYPE[x.dtype],
            out_data_type=TFL_TYPE[to],
        )
