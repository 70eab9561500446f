"""TFLite emitters for quantize and dequantize: the quantized tensor carries the node's scale
and zero point (per tensor, or per channel along ``axis``), written as TFLite's QUANTIZE and
DEQUANTIZE ops; and the quantized kernels: a float op between dequantize and quantize written
as LiteRT's integer kernel (``plan`` / ``emit_fused``, called by the writer before emitters).

# NOTE: invariants
# - A kernel is fused only when its every float input is a constant-parameter dequantize (a
#   bias may be a float constant), its one use (through a relu / relu6 / relu_n1_to_1) is a
#   per-tensor quantize, and LiteRT has the kernel: kernels that only move integers need the
#   same quantization in and out, softmax / logistic / tanh LiteRT's fixed output scales.
# - conv / linear biases are int32 (int64 for int16 activations) with scale input x filter,
#   per channel when the filter is.
# - Anything else raises Unsupported inside ``emit_fused``; the writer rolls back and writes
#   DEQUANTIZE -> float op -> QUANTIZE, which LiteRT runs too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codegen.tflite.registry import Emit, Ref, emitter
from msc.errors import Unsupported
from msc.ir.dtype import DType
from msc.ir.graph import Node, Value
from msc.ir.types import TensorType
from msc.ops.nn import kernel_perm
from msc.ops.rewrite import constant_value


def _params(e: Emit, scale: Ref, zero_point: Ref | None, block_size: int):
    e.require(block_size == 0, "block-wise quantization (TFLite scales per tensor or channel)")
    s = e.const_value(scale)
    e.require(s is not None, "a scale computed at run time")
    zp = np.zeros(1, np.int64) if zero_point is None else e.const_value(zero_point)
    e.require(zp is not None, "a zero point computed at run time")
    return np.asarray(s, np.float32), np.asarray(zp, np.int64)


# The integer types TFLite's DEQUANTIZE kernel reads; a constant of another (an int32 bias)
# is dequantized at write time.
KERNEL_TYPES = {DType.INT8, DType.UINT8, DType.INT16}


@emitter("dequantize")
def dequantize(e: Emit, x: Ref, scale: Ref, zero_point: Ref | None = None, *, axis, block_size):
    s, zp = _params(e, scale, zero_point, block_size)
    c = e.const_value(x)
    if c is not None and x.dtype not in KERNEL_TYPES:
        shape = [1] * x.rank
        if s.size > 1:
            shape[axis % x.rank] = s.size
        zp = zp.reshape(()) if zp.size == 1 else zp.reshape(shape)
        real = (c.astype(np.float64) - zp) * (s.reshape(()) if s.size == 1 else s.reshape(shape))
        return e.const(real.astype(e.out_type().dtype.to_numpy()))
    e.w.set_quant(x, s, zp, axis)
    return e.op("DEQUANTIZE", [x], e.out_type())


@emitter("quantize")
def quantize(
    e: Emit, x: Ref, scale: Ref, zero_point: Ref | None = None, *, dtype, axis, block_size, saturate
):
    s, zp = _params(e, scale, zero_point, block_size)
    e.require(s.size == 1, "per-channel quantization of a computed tensor")
    y = e.op("QUANTIZE", [x], e.out_type())
    e.w.set_quant(y, s, zp, axis)
    return y


# ---------------------------------------------------------------- quantized kernels
# A float op between dequantize and quantize (the QDQ form every frontend reads quantized
# models into) is written as TFLite's quantized kernel on the integer tensors, the scales and
# zero points on them; anything the pattern does not fit keeps DEQUANTIZE -> float op ->
# QUANTIZE, which LiteRT runs too.

# canonical ops whose TFLite kernel has a quantized form LiteRT runs
KERNELS = frozenset(
    """conv linear gemm add sub mul max_pool avg_pool reshape flatten squeeze unsqueeze softmax
    sigmoid tanh concat transpose""".split()
)
# kernels that copy integers through unchanged: input and output quantized alike
SAME_SCALE = frozenset(
    "max_pool avg_pool reshape flatten squeeze unsqueeze concat transpose".split()
)
# kernels whose output scale and zero point are fixed by LiteRT
_UNIT = {DType.INT8: (1 / 256, -128), DType.UINT8: (1 / 256, 0), DType.INT16: (1 / 32768, 0)}
FIXED = {
    "softmax": _UNIT,
    "sigmoid": _UNIT,
    "tanh": {DType.INT8: (1 / 128, 0), DType.UINT8: (1 / 128, 128), DType.INT16: (1 / 32768, 0)},
}
WEIGHTED = frozenset({"conv", "linear", "gemm"})  # a filter and a bias quantized by its scales
ACTIVATION_OF = frozenset("CONV_2D DEPTHWISE_CONV_2D FULLY_CONNECTED ADD SUB MUL".split())
# the TFLite ops that only move integers (their output carries their input's quantization)
MOVERS = frozenset("PAD TRANSPOSE RESHAPE EXPAND_DIMS SQUEEZE".split())
ACTIVATIONS = frozenset({DType.INT8, DType.UINT8, DType.INT16})


@dataclass
class Fused:
    """``node`` written as a quantized kernel: ``inputs`` are the integer values with their
    (scale, zero point, axis), ``act`` the fused activation code, ``q`` the quantize whose
    output the kernel writes."""

    node: Node
    # per input: (integer value, scale, zero point, axis, transpose after it or None), or
    # the value itself (a float bias, an integer operand), or None
    inputs: list[tuple[Value, np.ndarray, np.ndarray, int, list[int] | None] | Value | None]
    act: int
    q: Node
    scale: np.ndarray
    zero_point: np.ndarray
    skipped: list[Node]  # the activation and the quantize, written by the kernel


def _activation(node: Node) -> int:
    """The fused_activation_function code of relu, relu6 or relu_n1_to_1 (as hardtanh, or a
    clamp between constants as ONNX's Clip reads), else 0."""
    if node.op == "relu":
        return 1
    if node.op == "hardtanh":
        lo, hi = node.attrs["min"], node.attrs["max"]
    elif node.op == "clamp" and len(node.inputs) == 3:
        lo_v, hi_v = (constant_value(v) for v in node.inputs[1:])
        if lo_v is None or hi_v is None or lo_v.size != 1 or hi_v.size != 1:
            return 0
        lo, hi = float(lo_v.reshape(-1)[0]), float(hi_v.reshape(-1)[0])
    else:
        return 0
    return {(-1.0, 1.0): 2, (0.0, 6.0): 3}.get((lo, hi), 0)


def _node_params(w, node: Node) -> tuple[np.ndarray, np.ndarray] | None:
    """The constant (scale, zero point) of a quantize / dequantize node, else None."""
    if node.attrs.get("block_size", 0):
        return None
    s = constant_value(node.inputs[1])
    if s is None:
        return None
    z = node.inputs[2] if len(node.inputs) > 2 else None
    zp = np.zeros(1, np.int64) if z is None else constant_value(z)
    if zp is None:
        return None
    s, zp = np.asarray(s, np.float32).reshape(-1), np.asarray(zp, np.int64).reshape(-1)
    return s, np.broadcast_to(zp, s.shape).copy() if zp.size == 1 else zp


def _only_use(v: Value, outputs: set[int]) -> Node | None:
    uses = v.uses
    if len(uses) != 1 or id(v) in outputs:
        return None
    return uses[0][0]


def plan(w, node: Node, outputs: set[int]) -> Fused | None:
    """How to write ``node`` as a quantized kernel, or None when it is not one: every float
    input dequantized (a float bias is quantized at write time), its one use (after a relu or
    relu6 LiteRT fuses) a per-tensor quantize."""
    if node.op not in KERNELS or len(node.outputs) != 1:
        return None
    user = _only_use(node.output, outputs)
    act, skipped = 0, []
    if user is not None and _activation(user):
        act = _activation(user)
        skipped.append(user)
        user = _only_use(user.output, outputs)
    if user is None or user.op != "quantize" or user.output.dtype not in ACTIVATIONS:
        return None
    out = _node_params(w, user)
    if out is None or out[0].size != 1:
        return None
    ins: list = []
    for k, v in enumerate(node.inputs):
        if v is None or not v.dtype.is_floating:
            ins.append(v)
        elif _dequantized(w, v) is not None:
            ins.append(_dequantized(w, v))
        elif node.op in WEIGHTED and k == 2 and constant_value(v) is not None:
            ins.append(v)  # a float bias: quantized at write time
        else:
            return None
    first = ins[0]
    if not isinstance(first, tuple) or first[0].dtype not in ACTIVATIONS or first[1].size != 1:
        return None
    if first[0].dtype is not user.output.dtype:  # LiteRT's kernels keep the activation type
        return None
    if act and node.op not in ("conv", "linear", "gemm", "add", "sub", "mul"):
        return None
    return Fused(node, ins, act, user, *out, [*skipped, user])


def _dequantized(w, v: Value) -> tuple | None:
    """(integer value, scale, zero point, axis, permutation or None) when ``v`` is a
    dequantize (a layout change's transpose after it included), else None."""
    p, perm = v.producer, None
    if p is not None and p.op == "transpose" and p.inputs[0].producer is not None:
        perm, p = list(p.attrs["perm"]), p.inputs[0].producer
    if p is None or p.op != "dequantize":
        return None
    got = _node_params(w, p)
    if got is None:
        return None
    return (p.inputs[0], *got, p.attrs["axis"] % max(p.output.type.rank, 1), perm)


class _QEmit(Emit):
    """An Emit whose output type is the quantized one, and whose constants derived from a
    quantized constant (a permuted filter) keep its quantization."""

    def __init__(self, writer, node, out: TensorType) -> None:
        super().__init__(writer, node)
        self._out = out

    def out_type(self, i: int = 0) -> TensorType:
        return self._out

    def transpose(self, x: Ref, perm) -> Ref:
        y = super().transpose(x, perm)
        t = self.w.tensors[x.index]
        if y is not x and t.scale is not None and self.const_value(y) is not None:
            axis = list(perm).index(t.quantized_dimension) if len(t.scale) > 1 else 0
            self.w.set_quant(y, np.asarray(t.scale), np.asarray(t.zero_point), axis)
        return y


def emit_fused(w, f: Fused) -> Ref:
    """Write ``f`` (see ``plan``); Unsupported when LiteRT has no kernel for it, after which
    the caller rolls back and writes the float op between DEQUANTIZE and QUANTIZE."""
    node, qdt = f.node, f.q.output.dtype
    refs: list[Ref | None] = []
    for v in f.inputs:
        if v is None:
            refs.append(None)
        elif isinstance(v, tuple):
            x, s, zp, axis, perm = v
            r = w.ref(x)
            if x.dtype in ACTIVATIONS:
                w.set_quant(r, s, zp, axis)
            if perm is not None:
                r = _QEmit(w, node, node.output.type).transpose(r, perm)
            refs.append(r)
        else:
            refs.append(w.ref(v))
    x_in = f.inputs[0]
    s_in = float(x_in[1][0])
    s_out, zp_out = float(f.scale[0]), int(f.zero_point[0])
    if node.op in SAME_SCALE:
        for v in f.inputs:
            if isinstance(v, tuple):
                e_same = np.isclose(float(v[1][0]), s_out, rtol=1e-6) and int(v[2][0]) == zp_out
                if v[1].size != 1 or not e_same:
                    raise Unsupported(f"{node.op} whose input and output quantization differ")
    if node.op in FIXED:
        want = FIXED[node.op].get(qdt)
        if want is None or not np.isclose(s_out, want[0], rtol=1e-5) or zp_out != want[1]:
            raise Unsupported(f"quantized {node.op} with another output scale than LiteRT's")
    for v in f.inputs[1:] if node.op not in WEIGHTED else ():
        if isinstance(v, tuple) and v[0].dtype in ACTIVATIONS and v[0].dtype is not qdt:
            raise Unsupported("operands quantized to different types")
        if isinstance(v, tuple) and v[1].size != 1:
            raise Unsupported(f"a per-channel operand of {node.op}")
    out_t = TensorType(qdt, node.output.type.shape)
    e = _QEmit(w, node, out_t)
    op, attrs = node.op, dict(node.attrs)
    if op == "gemm":  # ONNX's Gemm: a linear when unscaled, b the filter
        if attrs["alpha"] != 1.0 or attrs["beta"] != 1.0 or attrs["trans_a"]:
            raise Unsupported("a quantized gemm with scaling or a transposed a")
        if refs[1] is not None and not attrs["trans_b"]:
            refs[1] = e.transpose(refs[1], [1, 0])
        op, attrs = "linear", {}
    if op in WEIGHTED:
        refs = _weighted(w, f, refs, s_in)
    mark = len(w.ops)
    em = w.emitters.get(op)
    if em is None:
        raise Unsupported(f"no emitter for {op}")
    y = em.fn(e, *refs, **attrs)
    w.set_quant(y, f.scale, f.zero_point, 0)
    new = w.ops[mark:]
    _spread(w, new)
    if f.act:
        main = [op for op in new if op.op in ACTIVATION_OF]
        if len(main) != 1:
            raise Unsupported("no operator to fuse the activation into")
        main[0].options["fused_activation_function"] = f.act
    for op in new:
        for i in [*op.inputs, *op.outputs]:
            t = w.tensors[i] if i >= 0 else None
            if t is not None and w.types[i].dtype in ACTIVATIONS and t.scale is None:
                raise Unsupported(f"{op.op} on an integer tensor without its quantization")
        if op.op in ("DEQUANTIZE", "QUANTIZE", "PADV2", "CAST"):
            raise Unsupported(f"a {op.op} inside the quantized kernel")
    return y


def _spread(w, ops) -> None:
    """Give the tensors that ops only moving integers make the quantization of what they
    move (forward from the input, backward from the output)."""
    for seq in (ops, list(reversed(ops))):
        for op in seq:
            if op.op not in MOVERS or not op.inputs or not op.outputs:
                continue
            a, b = w.tensors[op.inputs[0]], w.tensors[op.outputs[0]]
            src, dst = (a, b) if seq is ops else (b, a)
            if src.scale is not None and dst.scale is None and len(src.scale) == 1:
                dst.scale, dst.zero_point = list(src.scale), list(src.zero_point or [0])


def _weighted(w, f: Fused, refs: list, s_in: float) -> list:
    """conv / linear: the filter's scales per output channel, the bias as int32 (int64 for
    int16 activations) quantized by input scale x filter scale, as LiteRT requires."""
    wt, t = refs[1], w.tensors[refs[1].index]
    if wt.dtype not in (DType.INT8, DType.UINT8, DType.INT16) or t.scale is None:
        raise Unsupported("a quantized kernel with a filter that is not quantized")
    if wt.dtype is DType.INT8 and any(t.zero_point or ()):
        raise Unsupported("an int8 filter with a zero point other than 0")
    # LiteRT's kernels: uint8 activations with a uint8 filter quantized per tensor, int8 and
    # int16 activations with an int8 filter (per tensor or per channel)
    x_dt = f.inputs[0][0].dtype
    if x_dt is DType.UINT8 and (wt.dtype is not DType.UINT8 or len(t.scale) != 1):
        raise Unsupported("uint8 activations with an int8 or per-channel filter")
    if x_dt is not DType.UINT8 and wt.dtype is not DType.INT8:
        raise Unsupported(f"{x_dt.short} activations with a {wt.dtype.short} filter")
    if w.const_value(wt.index) is None:
        raise Unsupported("a quantized kernel with a run-time filter")
    s_w = np.asarray(t.scale, np.float32)
    o = 0
    if f.node.op == "conv":  # the filter's output-channel axis
        o = kernel_perm(f.node.attrs.get("kernel_layout", "OIHW"), wt.rank).index(0)
    cout = int(wt.shape[o])
    if s_w.size not in (1, cout) or s_w.size > 1 and t.quantized_dimension != o:
        raise Unsupported("filter scales along another axis than the output channels")
    prod = (np.float64(s_in) * s_w.astype(np.float64)).astype(np.float32)
    zeros = np.zeros(prod.size, np.int64)  # the bias's scales: per tensor as the filter's
    bdt = np.int64 if f.inputs[0][0].dtype is DType.INT16 else np.int32
    b = f.inputs[2] if len(f.inputs) > 2 else None
    if b is None:
        real = np.zeros(cout, np.float64) if f.node.op == "conv" else None
    elif isinstance(b, tuple):
        raw = w.const_value(refs[2].index)
        if raw is None:
            raise Unsupported("a run-time bias")
        real = ((raw.astype(np.float64) - b[2]) * b[1].astype(np.float64)).reshape(-1)
        same = b[1].size == prod.size and np.allclose(b[1], prod, rtol=1e-6, atol=0)
        if raw.dtype == bdt and raw.ndim == 1 and not np.any(b[2]) and same:
            w.set_quant(refs[2], prod, zeros, 0)
            return refs
    else:
        real = np.asarray(w.const_value(refs[2].index), np.float64).reshape(-1)
    if real is None:
        return refs
    if real.size != cout:
        raise Unsupported("a bias of another size than the output channels")
    q = np.round(real / np.broadcast_to(prod.astype(np.float64), (cout,)))
    info = np.iinfo(bdt)
    q = np.clip(q, info.min, info.max).astype(bdt)
    r = w.const_tensor(q)
    w.set_quant(r, prod, zeros, 0)
    refs = list(refs) + [None] * (3 - len(refs))
    refs[2] = r
    return refs
