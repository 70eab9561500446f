"""The TFLite importer: one subgraph of a ``TfModel`` into an msc Graph, one converter per
operator.

# NOTE: invariants
# - Each TFLite tensor is one msc value of the same dtype (a quantized int8 tensor stays an
#   int8 value). Converters see float views: ``ctx.value(t)`` dequantizes a quantized tensor
#   (once per tensor), and an output tensor that is quantized gets a ``quantize`` to its scale
#   and zero point after the converter. Quantization so stays quantize / dequantize ops.
# - Names are kept: a value is named after its tensor, a weight after its constant tensor,
#   graph inputs and outputs after the signature's names when the model has a signature.
#   Values made in between get positional names no tensor of the model uses.
# - Constant tensors become weights (file regions of the .tflite, mapped when used) only where
#   a converter needs a tensor; a converter that needs the values (a RESHAPE target, PAD
#   amounts) reads them with ``ctx.array``.
# - Every unsupported op is collected with its tensor names; ``UnsupportedOpsError`` is raised
#   once after the whole subgraph was walked. Ops downstream of one are not converted.
# - A resource variable (VAR_HANDLE, named by its shared_name) is state kept between runs: a
#   graph input holds its value before the run (after the model's own inputs, named after the
#   variable) when the subgraph reads it before assigning it, and a graph output its value
#   after (after the model's own outputs, in the state inputs' order). READ_VARIABLE and
#   ASSIGN_VARIABLE make no nodes; CALL_ONCE's init subgraph gives the first run's values
#   (``initial_state``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from msc.errors import BadModelError, Unsupported, UnsupportedOp, UnsupportedOpsError
from msc.frontend.tflite.coverage import reason
from msc.frontend.tflite.reader import (
    TfModel,
    TfOperator,
    TfSubgraph,
    TfTensor,
    option_defaults,
)
from msc.frontend.tflite.registry import (
    COMPLEX_READERS,
    CONVERTERS,
    HANDLED,
    ConverterRegistry,
)
from msc.ir import DType, Graph, Node, Provenance, SymDim, TensorType, Value, Weight
from msc.ir.builder import Builder
from msc.ir.graph import GraphError
from msc.ir.tensor import FileRegion, Packed
from msc.ir.types import MAX_DIM
from msc.ops.custom import custom_op
from msc.ops.infer import InferError
from msc.ops.schema import OpError

__all__ = [
    "Importer",
    "Ctx",
    "DTYPES",
    "ACTIVATIONS",
    "IMPORT_ARRAY_LIMIT",
    "complex_part",
    "is_complex",
    "value_type",
]

# The schema's TensorType codes msc holds (RESOURCE and VARIANT are handles, not data).
DTYPES = {
    0: DType.FLOAT32,
    1: DType.FLOAT16,
    2: DType.INT32,
    3: DType.UINT8,
    4: DType.INT64,
    5: DType.STRING,
    6: DType.BOOL,
    7: DType.INT16,
    8: DType.COMPLEX64,
    9: DType.INT8,
    10: DType.FLOAT64,
    11: DType.COMPLEX128,
    12: DType.UINT64,
    15: DType.UINT32,
    16: DType.UINT16,
    17: DType.INT4,
    18: DType.BFLOAT16,
}

# fused_activation_function codes -> (op, attrs) applied after the op.
ACTIVATIONS: dict[int, tuple[str, dict[str, Any]] | None] = {
    0: None,
    1: ("relu", {}),
    2: ("hardtanh", {"min": -1.0, "max": 1.0}),
    3: ("hardtanh", {"min": 0.0, "max": 6.0}),
    4: ("tanh", {}),
}

# Ops of resource variables, read by the importer itself (their tensors are handles).
STATE_OPS = frozenset({"CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"})

# Arrays built at import (a densified sparse weight) hold at most this many elements.
IMPORT_ARRAY_LIMIT = 1 << 28
_QUANTIZED = (DType.INT8, DType.UINT8, DType.INT16, DType.INT32, DType.INT4, DType.UINT16)


def tensor_type(t: TfTensor, symbols: dict[tuple[int, int], SymDim] | None = None) -> TensorType:
    """The msc type of a tensor: its static shape, with the -1 dims of its shape_signature as
    symbols (``symbols`` maps (input position, axis) to the symbol to use)."""
    dt = DTYPES.get(t.type)
    if dt is None:
        raise Unsupported(f"tensor {t.name!r} has type {t.type_name}, which msc does not hold")
    if not t.has_rank:
        return TensorType(dt, None)
    dims: list[Any] = []
    for axis, d in enumerate(t.shape):
        if d > MAX_DIM:
            raise BadModelError(f"tensor {t.name!r} has a dim of {d}")
        if t.signature is not None and t.signature[axis] == -1:
            dims.append(symbols.get((t.index, axis)) if symbols else None)
        else:
            dims.append(int(d))
    return TensorType(dt, dims)


_COMPLEX = {DType.COMPLEX64: DType.FLOAT32, DType.COMPLEX128: DType.FLOAT64}


def value_type(t: TfTensor, symbols: dict[tuple[int, int], SymDim] | None = None) -> TensorType:
    """The type of the msc value that holds tensor ``t``: its ``tensor_type``, but a complex
    tensor as msc's real layout, floats with a trailing (real, imaginary) dim of 2."""
    ty = tensor_type(t, symbols)
    if ty.dtype not in _COMPLEX:
        return ty
    return TensorType(_COMPLEX[ty.dtype], None if ty.shape is None else [*ty.shape, 2])


def is_complex(t: TfTensor | None) -> bool:
    return t is not None and DTYPES.get(t.type) in _COMPLEX


def complex_part(ctx: Builder, v: Value, i: int) -> Value:
    """The real (``i`` 0) or imaginary (1) part of a complex value in msc's real layout."""
    r = v.type.rank
    part = ctx.op("slice", v, starts=[i], ends=[i + 1], axes=[r - 1], steps=[1])
    return ctx.op("squeeze", part, axes=[r - 1])


class Ctx(Builder):
    """What a converter builds with: canonical nodes (``ctx.op``), the float view of an input
    (``ctx.value``), a constant input's values (``ctx.array``), the operator and its tensors."""

    def __init__(self, imp: Importer) -> None:
        super().__init__()
        self.imp = imp
        self.operator: TfOperator | None = None

    def _current_name(self) -> str:
        op = self.operator
        if op is None or not op.outputs or op.outputs[0] < 0:
            return ""
        return self.imp.sg.tensors[op.outputs[0]].name

    def _current_provenance(self) -> Provenance | None:
        op = self.operator
        if op is None:
            return None
        name = self._current_name()
        return Provenance("tflite", op.op, name, _module_of(name))

    # ------------------------------------------------------------ inputs
    def is_const(self, t: TfTensor | None) -> bool:
        return t is not None and self.imp.has_data(t)

    def array(self, t: TfTensor | None, what: str = "") -> np.ndarray:
        """The values of a constant input as stored (a quantized one as its integers);
        Unsupported when it is computed at run time."""
        if t is None or not self.imp.has_data(t):
            name = "an absent input" if t is None else repr(t.name)
            raise Unsupported(f"{what or 'this input'} ({name}) must be a constant")
        return self.imp.array(t)

    def raw(self, t: TfTensor) -> Value:
        """The tensor's value as the model holds it (quantized tensors as their integers)."""
        return self.imp.raw(t)

    def value(self, t: TfTensor) -> Value:
        """The tensor's value for float computation: dequantized when it is quantized."""
        return self.imp.float_view(t)

    def moved(self, t: TfTensor) -> Value:
        """What a kernel that only moves data (RESHAPE, SQUEEZE, EXPAND_DIMS) reads: LiteRT
        copies the integers, so when its output is quantized to the same type with other
        parameters than ``t`` they are moved as integers (the output reinterprets them);
        otherwise the float view."""
        o = self.out()
        qi, qo = t.quant, o.quant
        if qi is None or qo is None or self.dtype(t) is not self.dtype(o):
            return self.value(t)
        same = qi.scale.size == qo.scale.size and bool(np.all(qi.scale == qo.scale))
        zi = qi.zero_point if qi.zero_point.size else np.zeros(qi.scale.size, np.int64)
        zo = qo.zero_point if qo.zero_point.size else np.zeros(qo.scale.size, np.int64)
        same = same and zi.size == zo.size and bool(np.all(zi == zo))
        return self.value(t) if same else self.raw(t)

    def out(self, i: int = 0) -> TfTensor:
        """The operator's output tensor ``i`` as declared."""
        assert self.operator is not None
        return self.imp.sg.tensors[self.operator.outputs[i]]

    def out_type(self, i: int = 0) -> TensorType:
        return tensor_type(self.out(i), self.imp.symbols)

    def dtype(self, t: TfTensor) -> DType:
        return tensor_type(t).dtype

    def as_out(self, v: Value, i: int = 0) -> Value:
        """``v`` cast to the dtype of output ``i`` (an index op's i32 or i64)."""
        want = tensor_type(self.out(i)).dtype
        return v if v.dtype is want else self.op("cast", v, to=want)


def _module_of(name: str) -> str:
    """The scope of a TFLite tensor name (``model/block_1/conv/Conv2D;...`` -> its path
    before the op name), as a dotted module path; "" when the name has none."""
    first = name.split(";", 1)[0]
    if "/" not in first:
        return ""
    parts = [p for p in first.split("/")[:-1] if p]
    return ".".join(parts)


class Importer:
    def __init__(
        self,
        model: TfModel,
        subgraph: int = 0,
        registry: ConverterRegistry = CONVERTERS,
        custom_ops: str = "error",
        name: str = "",
    ) -> None:
        self.model = model
        self.sg: TfSubgraph = model.subgraphs[subgraph]
        self.registry = registry
        self.custom_ops = custom_ops
        self.graph = Graph(name or self.sg.name or "main")
        self.ctx = Ctx(self)
        self.values: dict[int, Value] = {}  # tensor index -> raw value
        self.floats: dict[int, Value] = {}  # tensor index -> dequantized value
        self.weights: dict[int, Any] = {}
        self.poisoned: set[int] = set()
        self.unsupported: list[UnsupportedOp] = []
        self.symbols: dict[tuple[int, int], SymDim] = {}
        self._names = {t.name for t in self.sg.tensors}
        self._taken: set[str] = set()
        self._counter = 0
        self._weight_names: set[str] = set()
        self.signature = next((s for s in model.signatures if s.subgraph == subgraph), None)
        self.variables: dict[int, str] = {}  # resource tensor index -> variable name
        self.state: dict[str, Value] = {}  # variable -> its value at this point of the run
        self.assigned: dict[str, TfTensor] = {}  # variable -> the tensor last assigned to it
        self.state_inputs: list[str] = []  # the variables read before they are assigned

    # ------------------------------------------------------------ data
    def has_data(self, t: TfTensor) -> bool:
        if t.sparsity is not None:
            return True
        if t.buffer <= 0 or t.index in self.values and not isinstance(self.values[t.index], Weight):
            return False
        # a constant with no elements (an empty shape list) has an empty buffer
        return self.model.buffers[t.buffer][1] > 0 or (t.has_rank and 0 in t.shape)

    def array(self, t: TfTensor) -> np.ndarray:
        """A constant tensor's values in memory (a copy: they outlive the file's mapping)."""
        if t.sparsity is not None:
            from msc.frontend.tflite.quant import densify

            return densify(self, t)
        dt = tensor_type(t).dtype
        shape = tuple(int(d) for d in t.shape)
        raw = self.model.buffer_bytes(t.buffer)
        return decode(raw, dt, shape, t.name)

    def _weight_data(self, t: TfTensor, dt: DType) -> Any:
        shape = tuple(int(d) for d in t.shape)
        path = self.model.path
        off, size = self.model.buffers[t.buffer]
        if (
            path is not None
            and t.sparsity is None
            and dt not in (DType.STRING, DType.INT4)
            and size == int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        ):
            return FileRegion.at(path, off, size, dt, shape)
        arr = self.array(t)
        return Packed.of(arr) if dt is DType.INT4 else arr

    # ------------------------------------------------------------ values
    def _fresh(self) -> str:
        while True:
            name = str(self._counter)
            self._counter += 1
            if name not in self._names and name not in self._taken:
                return name

    def _unique(self, name: str) -> str:
        if name and name not in self._taken:
            return name
        base = name or "t"
        k = 1
        while f"{base}_{k}" in self._taken or f"{base}_{k}" in self._names:
            k += 1
        return f"{base}_{k}"

    def raw(self, t: TfTensor) -> Value:
        v = self.values.get(t.index)
        if v is not None:
            return v
        if not self.has_data(t):
            if t.is_variable:
                raise Unsupported(f"tensor {t.name!r} is a variable (state kept between runs)")
            raise Unsupported(f"tensor {t.name!r} is read before anything writes it")
        dt = tensor_type(t).dtype
        name = t.name or f"const_{t.index}"
        if name in self._weight_names:
            name = f"{name}_{t.index}"
        self._weight_names.add(name)
        w = self.graph.add_weight(name, self._weight_data(t, dt), TensorType(dt, t.shape))
        self.values[t.index] = w
        return w

    def float_view(self, t: TfTensor) -> Value:
        v = self.floats.get(t.index)
        if v is not None:
            return v
        raw = self.raw(t)
        q = t.quant
        if q is not None and raw.dtype is DType.INT64 and q.scale.size and self.has_data(t):
            v = self._dequantize_int64(t)  # an int16 kernel's bias: no int64 dequantize
        elif q is None or raw.dtype not in _QUANTIZED:
            return raw
        else:
            v = self._dequantize(raw, t)
        self.floats[t.index] = v
        return v

    def _qparams(self, t: TfTensor) -> tuple[Value, Value | None, int]:
        q = t.quant
        assert q is not None
        if q.custom:
            raise Unsupported(f"tensor {t.name!r} uses a custom quantization scheme")
        dt = tensor_type(t).dtype
        per_channel = q.scale.size > 1
        scale = q.scale if per_channel else q.scale.reshape(())
        zp = q.zero_point if q.zero_point.size else np.zeros(q.scale.size, np.int64)
        zp = zp if per_channel else zp.reshape(())
        if np.any(zp) or dt not in (DType.INT32,):
            zpv = self.ctx.const(zp.astype(dt.to_numpy()), dt)
        else:
            zpv = None
        axis = q.axis if per_channel else 1
        if per_channel and t.has_rank and not 0 <= axis < max(len(t.shape), 1):
            raise BadModelError(f"tensor {t.name!r}: quantized dimension {axis} out of range")
        return self.ctx.const(scale.astype(np.float32), DType.FLOAT32), zpv, axis

    def _dequantize_int64(self, t: TfTensor) -> Value:
        q = t.quant
        assert q is not None
        arr = self.array(t).astype(np.float64)
        zp = q.zero_point if q.zero_point.size else np.zeros(q.scale.size, np.int64)
        if q.scale.size > 1:
            if not 0 <= q.axis < arr.ndim or arr.shape[q.axis] != q.scale.size:
                raise BadModelError(
                    f"tensor {t.name!r}: {q.scale.size} scales for its quantized dimension"
                )
            shape = [1] * arr.ndim
            shape[q.axis] = q.scale.size
            real = (arr - zp.reshape(shape)) * q.scale.astype(np.float64).reshape(shape)
        else:
            real = (arr - float(zp.reshape(-1)[0])) * float(q.scale.reshape(-1)[0])
        return self.ctx.const(real.astype(np.float32), DType.FLOAT32)

    def _dequantize(self, raw: Value, t: TfTensor) -> Value:
        scale, zp, axis = self._qparams(t)
        return self.ctx.op("dequantize", raw, scale, zp, axis=axis)

    def _quantize(self, v: Value, t: TfTensor) -> Value:
        scale, zp, axis = self._qparams(t)
        dt = tensor_type(t).dtype
        if zp is None:
            zp = self.ctx.const(np.zeros(scale.shape, dt.to_numpy()), dt)
        return self.ctx.op("quantize", v, scale, zp, dtype=dt, axis=axis)

    # ------------------------------------------------------------ the walk
    def _inputs(self) -> None:
        sg = self.sg
        names = {}
        if self.signature is not None:
            names = {i: n for n, i in self.signature.inputs}
        # -1 dims: named as the msc_symbols metadata says (a file msc wrote), else axis 0 of
        # every input is one batch symbol and the others are per input and axis
        given = self._symbol_names()
        for i in sg.inputs:
            t = sg.tensors[i]
            for axis, d in enumerate(t.signature or ()):
                if d == -1:
                    key = given.get(names.get(i, t.name), {}).get(str(axis))
                    if key is None:
                        key = "batch" if axis == 0 else f"{names.get(i, t.name)}_{axis}"
                    self.symbols[(i, axis)] = SymDim(_symbol(key))
        for i in sg.inputs:
            t = sg.tensors[i]
            try:
                ty = tensor_type(t, self.symbols)
            except Unsupported as e:
                raise BadModelError(f"input {t.name!r}: {e}") from None
            name = self._unique(names.get(i) or t.name or f"input_{i}")
            self._taken.add(name)
            v = self.graph.add_input(name, ty)
            self.values[i] = v
        self._state_inputs()

    def _symbol_names(self) -> dict[str, dict[str, str]]:
        """The msc_symbols metadata ({input name: {axis: symbol}}), when the file has a
        well-formed one: at most 64 KiB of JSON, identifiers of at most 64 characters. Any
        other is ignored (it only names dims: the file's -1s stand without it)."""
        index = self.model.metadata.get("msc_symbols")
        if index is None or not 0 <= index < len(self.model.buffers):
            return {}
        raw = bytes(self.model.buffer_bytes(index))
        if len(raw) > 1 << 16:
            return {}
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return {}
        if not isinstance(data, dict):
            return {}
        out: dict[str, dict[str, str]] = {}
        for name, axes in data.items():
            if not isinstance(axes, dict):
                return {}
            for axis, sym in axes.items():
                ok = isinstance(sym, str) and sym.isidentifier() and len(sym) <= 64
                if not (ok and isinstance(axis, str) and axis.isdigit()):
                    return {}
            out[str(name)] = dict(axes)
        return out

    def _state_inputs(self) -> None:
        """A graph input for each resource variable the subgraph reads before assigning it."""
        written: set[str] = set()
        for op in self.sg.operators:
            if op.op not in STATE_OPS or not _state_op_shape(op):
                continue  # another op, or a malformed one _state_op reports
            if op.op == "VAR_HANDLE":
                t = self.sg.tensors[op.outputs[0]]
                key = op.options.get("shared_name") or t.name
                self.variables[op.outputs[0]] = f"{op.options.get('container') or ''}{key}"
            elif op.op in ("READ_VARIABLE", "ASSIGN_VARIABLE"):
                var = self.variables.get(op.inputs[0])
                if var is None or var in written or var in self.state:
                    continue
                if op.op == "ASSIGN_VARIABLE":
                    written.add(var)
                    continue
                t = self.sg.tensors[op.outputs[0]]
                try:
                    ty = tensor_type(t, self.symbols)
                except Unsupported as e:
                    raise BadModelError(f"variable {var!r}: {e}") from None
                name = self._unique(var)
                self._taken.add(name)
                self.state[var] = self.graph.add_input(name, ty)
                self.state_inputs.append(var)

    def _state_op(self, op: TfOperator) -> None:
        """CALL_ONCE, VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE: no nodes (see the NOTE)."""
        if not _state_op_shape(op):
            raise Unsupported(f"{len(op.inputs)} inputs and {len(op.outputs)} outputs")
        if op.op in ("CALL_ONCE", "VAR_HANDLE"):
            return
        var = self.variables.get(op.inputs[0])
        if var is None:
            raise Unsupported("a resource that no VAR_HANDLE of the subgraph made")
        if op.op == "READ_VARIABLE":
            if var not in self.state:
                raise Unsupported(f"variable {var!r} is read before it has a value")
            t = self.sg.tensors[op.outputs[0]]
            v = self.state[var]
            _check_type(v, tensor_type(t, self.symbols), t)
            self.values[t.index] = v
            return
        t = self.sg.tensors[op.inputs[1]]
        self.state[var] = self.raw(t)
        self.assigned[var] = t

    def run(self) -> Graph:
        self._inputs()
        for op in self.sg.operators:
            self._convert(op)
        if self.unsupported:
            raise UnsupportedOpsError(self.unsupported, what="TFLite model")
        self._outputs()
        return self.graph

    def _outputs(self) -> None:
        names = {}
        if self.signature is not None:
            names = {i: n for n, i in self.signature.outputs}
        outs = []
        for i in self.sg.outputs:
            t = self.sg.tensors[i]
            try:
                v = self.raw(t)
            except Unsupported as e:
                raise BadModelError(f"output {t.name!r}: {e}") from None
            want = names.get(i)
            if want and v.producer is not None and v.name == t.name and want not in self._taken:
                self._taken.discard(v.name)
                self.graph._taken.discard(v.name)
                v.name = want
                self._taken.add(want)
                self.graph._taken.add(want)
            outs.append(v)
        # the state after the run: the read variables in their inputs' order, then the others
        order = [k for k in self.state_inputs if k in self.assigned]
        order += [k for k in self.assigned if k not in self.state_inputs]
        for k in order:
            outs.append(self.raw(self.assigned[k]))
        self.graph.set_outputs(outs)

    def _convert(self, op: TfOperator) -> None:
        sg = self.sg
        ins = [None if i < 0 else sg.tensors[i] for i in op.inputs]
        outs = [sg.tensors[i] for i in op.outputs if i >= 0]
        if any(t is not None and t.index in self.poisoned for t in ins):
            self.poisoned.update(t.index for t in outs)
            return
        if not op.custom and op.op in STATE_OPS:
            try:
                self._state_op(op)
            except Unsupported as e:
                self.poisoned.update(t.index for t in outs)
                name = outs[0].name if outs else f"operator {op.index}"
                self.unsupported.append(UnsupportedOp(op.op, name, _module_of(name), str(e)))
            return
        ctx = self.ctx
        ctx.operator = op
        ctx.nodes = []
        conv = None if op.custom else self.registry.get(op.op)
        if op.custom:
            conv = self.registry.get(op.op) if op.op in self.registry else None
        try:
            if conv is None:
                raise Unsupported("no converter" if op.custom else reason(op.op))
            results = self._call(conv, op, ins)
            self._finish(op, outs, results)
        except (Unsupported, InferError, OpError, GraphError) as e:
            ctx.nodes = []
            self._refused(op, ins, outs, str(e))
        ctx.operator = None

    def _call(self, conv: Any, op: TfOperator, ins: list[TfTensor | None]) -> list[Value]:
        opts = dict(op.options)
        # a fused activation is its own node after the op, unless the converter reads it (a
        # recurrent cell's is its cell and output activation, not one on its output)
        act = 0
        if "fused_activation_function" not in conv.options:
            act = opts.pop("fused_activation_function", 0)
        for key in HANDLED:
            if key not in conv.options:
                opts.pop(key, None)
        defaults = option_defaults(op.options_type)
        extra = sorted(k for k in opts if k not in conv.options and opts[k] != defaults.get(k))
        if extra:
            shown = ", ".join(f"{k}={opts[k]!r}" for k in extra)
            raise Unsupported(f"options msc does not read: {shown}")
        kw = {k: v for k, v in opts.items() if k in conv.options}
        n = len(ins)
        if n < conv.required or (conv.variadic and n == 0):
            raise Unsupported(f"{n} inputs; the op takes at least {max(conv.required, 1)}")
        if any(t is None for t in ins[: conv.required]):
            raise Unsupported("a required input is absent (-1)")
        if not conv.variadic and n > conv.n_inputs:
            if any(t is not None for t in ins[conv.n_inputs :]):
                raise Unsupported(f"{n} inputs; msc reads {conv.n_inputs}")
            ins = ins[: conv.n_inputs]
        if conv.op not in COMPLEX_READERS and any(is_complex(t) for t in ins):
            raise Unsupported(
                "a complex input (msc reads complex tensors only in RFFT2D's consumers)"
            )
        result = conv.fn(self.ctx, *ins, **kw)
        values = list(result) if isinstance(result, tuple | list) else [result]
        if act:
            spec = ACTIVATIONS.get(act)
            if spec is None:
                raise Unsupported(f"fused activation {act} (SIGN_BIT)")
            values[0] = self.ctx.op(spec[0], values[0], **spec[1])
        return values

    def _finish(self, op: TfOperator, outs: list[TfTensor], values: list[Value]) -> None:
        if len(values) != len(outs):
            raise Unsupported(f"the converter gave {len(values)} outputs for {len(outs)}")
        final = []
        for t, v in zip(outs, values):
            if t.quant is not None and tensor_type(t).dtype in _QUANTIZED and v.dtype.is_floating:
                v = self._quantize(v, t)
            want = value_type(t, self.symbols)
            _check_type(v, want, t)
            final.append(v)
        # names: each output tensor's value is named after it (when it is a new value)
        for t, v in zip(outs, final):
            if v.producer is not None and v.name is None and v.producer in self.ctx.nodes:
                v.name = self._unique(t.name)
                self._taken.add(v.name)
            if t.quant is not None and v.dtype.is_floating:
                self.floats[t.index] = v
            self.values[t.index] = v
        for node in self.ctx.nodes:
            for o in node.outputs:
                if o.name is None:
                    o.name = self._fresh()
            self.graph.add_node(node)
        self.ctx.nodes = []

    def _refused(self, op: TfOperator, ins: list, outs: list[TfTensor], why: str) -> None:
        if self.custom_ops == "keep" and not why.startswith("tensor "):
            try:
                self._keep(op, ins, outs)
                return
            except (Unsupported, OpError, GraphError) as e:  # e.g. an op with no outputs
                why = f"{why}; cannot keep it as a custom node: {e}"
        self.poisoned.update(t.index for t in outs)
        name = outs[0].name if outs else f"operator {op.index}"
        label = op.op if not op.custom else f"CUSTOM {op.op}"
        self.unsupported.append(UnsupportedOp(label, name, _module_of(name), why))

    def _keep(self, op: TfOperator, ins: list, outs: list[TfTensor]) -> None:
        """The operator as a custom node ``tflite::<op>@<version>``: its tensors as the model
        holds them, its options as attributes, custom options as bytes."""
        ctx = self.ctx
        ctx.nodes = []
        attrs: dict[str, Any] = {}
        for k, v in op.options.items():
            if v is not None and not (isinstance(v, list) and not v):
                attrs[k] = v
        if op.custom_options is not None:
            attrs["custom_options"] = op.custom_options
        values = [None if t is None else ctx.raw(t) for t in ins]
        types = [tensor_type(t, self.symbols) for t in outs]
        name = re.sub(r"[@:]", "_", op.op) or "CUSTOM"
        node = Node(
            custom_op("tflite", name, max(op.version, 0)),
            values,
            attrs,
            output_types=types,
            name=outs[0].name if outs else "",
            provenance=Provenance("tflite", op.op, outs[0].name if outs else ""),
        )
        ctx.nodes.append(node)
        self._finish(op, outs, list(node.outputs))


def _state_op_shape(op: TfOperator) -> bool:
    """The inputs and outputs a resource variable op has (none absent)."""
    n_in, n_out = {
        "CALL_ONCE": (0, 0),
        "VAR_HANDLE": (0, 1),
        "READ_VARIABLE": (1, 1),
        "ASSIGN_VARIABLE": (2, 0),
    }[op.op]
    ok = len(op.inputs) == n_in and len(op.outputs) == n_out
    return ok and all(i >= 0 for i in (*op.inputs, *op.outputs))


def _symbol(name: str) -> str:
    return name


def _check_type(v: Value, want: TensorType, t: TfTensor) -> None:
    """The value a converter made for tensor ``t`` has its dtype and (where both are
    static) its dims: a mismatch is a converter that misread the op, never silently kept."""
    got = v.type
    if not isinstance(got, TensorType):
        return
    if got.dtype is not want.dtype:
        raise Unsupported(f"made {got.dtype.short} for tensor {t.name!r} of {want.dtype.short}")
    if got.shape is None or want.shape is None:
        return
    if len(got.shape) != len(want.shape):
        if t.has_rank and t.shape:
            raise Unsupported(f"made {got} for tensor {t.name!r} of {want}")
        return
    for a, b in zip(got.shape, want.shape):
        if isinstance(a, int) and isinstance(b, int) and a != b:
            raise Unsupported(f"made {got} for tensor {t.name!r} of {want}")


def decode(raw: memoryview | bytes, dt: DType, shape: Sequence[int], name: str) -> np.ndarray:
    """A constant buffer's bytes as an array (little-endian; int4 packed two per byte, low
    nibble first; strings in TFLite's offset-table format)."""
    n = int(np.prod(shape, dtype=np.int64))
    if n > IMPORT_ARRAY_LIMIT:
        raise Unsupported(f"constant {name!r} of {n} elements is larger than msc reads at import")
    if n == 0:  # writers give an empty constant a placeholder byte or nothing
        return np.zeros(shape, dt.to_numpy())
    if dt is DType.STRING:
        return _strings(bytes(raw), shape, name)
    if dt is DType.INT4:
        packed = np.frombuffer(raw, np.uint8)
        if packed.size != (n + 1) // 2:
            raise BadModelError(f"constant {name!r}: {packed.size} bytes for {n} int4 values")
        lo = (packed & 0x0F).astype(np.int8)
        hi = (packed >> 4).astype(np.int8)
        vals = np.stack([lo, hi], axis=1).reshape(-1)[:n]
        vals = np.where(vals > 7, vals - 16, vals).astype(np.int8)
        return vals.view(DType.INT4.to_numpy()).reshape(shape)
    npdt = dt.to_numpy().newbyteorder("<")
    if len(raw) != n * npdt.itemsize:
        raise BadModelError(
            f"constant {name!r}: {len(raw)} bytes for {dt.short}{list(shape)} "
            f"({n * npdt.itemsize} expected)"
        )
    return np.frombuffer(raw, npdt, count=n).reshape(shape).copy()


def _strings(raw: bytes, shape: Sequence[int], name: str) -> np.ndarray:
    """TFLite's string tensor: int32 count, count + 1 int32 offsets, then the bytes."""
    try:
        count = int.from_bytes(raw[:4], "little")
        if count != int(np.prod(shape, dtype=np.int64)) or 4 * (count + 2) > len(raw):
            raise ValueError
        offs = np.frombuffer(raw, "<i4", count=count + 1, offset=4)
        items = []
        for a, b in zip(offs[:-1], offs[1:]):
            if not 0 <= a <= b <= len(raw):
                raise ValueError
            items.append(raw[a:b].decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise BadModelError(f"string constant {name!r} is malformed") from None
    return np.array(items, dtype=object).reshape(shape)
