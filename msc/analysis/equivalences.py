"""Equivalent spellings exporters choose for one computation, for ``msc.analysis.canonical``.

Rules (``msc.rewrite`` matchers, each exact; a rule's label is what ``diff`` counts):

- a conv's or linear's all-zero constant bias, dropped (an untrained BatchNorm folds to it);
- arithmetic that does nothing (``x + 0`` of integers, ``x * 1``, ``x - 0``, ``x / 1``, a
  ``logical_and`` with true) by a constant of any kind (a weight too), dropped;
- the shape, view, indexing and sorting rules of ``msc.analysis.equivalences_index``
  (its module docstring lists them), as one run of ``RULES`` in this priority order, then
  the gather rules of ``msc.analysis.equivalences_gather`` (jnp.take's fill);
- ``attention(q, k, v, where(m, 0, -inf))`` -> ``attention(q, k, v, m)``: an additive float
  mask of 0 and -inf is the boolean mask it was made from;
- the guard ``where(reduce_max(mask) == -inf, 0, attention(..., mask))`` -> the attention:
  torch's scaled_dot_product_attention and ONNX Attention give 0 for a query row the mask
  hides everywhere, which is what the guard spells out;
- ``attention(q, k, v, M)`` of a constant M that is exactly the causal mask (top-left
  aligned, as ``msc.ops.fusions`` tests it) -> ``attention(q, k, v, is_causal=True)``: JAX
  lowers jax.nn.dot_product_attention's ``is_causal`` to that mask;
- a broadcasting op's operand's leading size-1 dims (a constant's, or those a view put in
  front), dropped where another operand has at least its rank (numpy's broadcasting aligns
  from the right): JAX's broadcast_in_dim reads back without them; a size read as a
  1-element vector (``shape(x)[1:2]``) squeezed to the scalar codegen.keras reads;
- a resize's attributes its mode ignores at their defaults, pytorch_half_pixel as
  half_pixel where every resized dim is more than 1, constant scales as the sizes they give
  where that is exact;
- ``clamp(x, lo, hi)`` by constant one-element bounds of a float ``x`` -> ``hardtanh``
  (ONNX's Clip takes its bounds as inputs);
- ``x * s + t`` of per-channel float constants (dim 1) -> ``batch_norm(x, s, t, 0, 1,
  eps=0)``: an inference BatchNorm as ``msc.ops.layout.fold_batch_norm`` writes it for a
  target without the op (codegen.tflite's MUL + ADD); as a batch_norm it folds into the conv
  or linear before it (``msc.ops.folds``), as the source's BatchNorm does;
- a ``batch_norm`` of constant statistics -> that normal form (scale ``gamma / sqrt(var +
  eps)``, shift ``beta - mean * scale``, in float64, rounded once: exact up to that rounding,
  as the fold into a conv is), so a BatchNorm no conv absorbed compares with its MUL + ADD;
- ``dequantize(move(q))`` -> ``move(dequantize(q))`` for a move that only rearranges
  elements (transpose, reshape, squeeze, unsqueeze, flatten) and a per-tensor scale, or a
  transpose and a per-axis scale (the axis read through the permutation): codegen.onnx writes
  the move on the integers (the QDQ form onnxruntime expects), frontends dequantize first.
- quantize / dequantize spelled out as their decompositions (``msc.ops.decompose.quant``):
  ``cast(clamp(round(x / s) + z, lo, hi))`` with [lo, hi] the integer type's range ->
  ``quantize(x, s, z)``, ``(cast(q) - z) * s`` -> ``dequantize(q, s, z)``, of constant s and z
  of one per-tensor or per-axis layout (int32 excluded: ``cast(i) * c`` of int32 positions is
  arithmetic). Generated PyTorch runs those decompositions op for op (torch has no
  QuantizeLinear), and any exporter may write the arithmetic; recognizing the spelling on
  whichever side has it, rather than lowering the op on both, keeps the other quantization
  rules (moves of integers) and a diff of two QDQ graphs at the op's level, and a changed
  scale or zero point stays a changed input of the op;
- a quantize's / dequantize's all-zero zero point -> none (``- 0`` spelled out is dropped as a
  no-op).

Graph passes: ``merge_duplicates`` (one node for computations that are the same op of the
same inputs: torch.export repeats an ``arange`` that torch.onnx computes once) and
``drop_dead`` (nodes nothing reads).

# NOTE: every rule is exact for the graphs it matches (the NOTE of msc.analysis.canonical);
# the conditions say why. Pure msc: no torch, no onnx.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from msc.analysis.equivalences_gather import RULES as GATHER_RULES
from msc.analysis.equivalences_index import RULES as INDEX_RULES
from msc.analysis.equivalences_index import _axes
from msc.analysis.shape_values import refines
from msc.ir import symexpr
from msc.ir.builder import Builder
from msc.ir.dtype import DType
from msc.ir.graph import Graph, Node, Value, Weight, dead_nodes
from msc.ir.types import TensorType
from msc.ops import registry
from msc.ops.elementwise import BINARY, COMPARISONS
from msc.ops.folds import batch_norm_scale, batch_norm_shift
from msc.ops.fusions import _is_causal_mask
from msc.ops.nn import exact_resize_scale
from msc.ops.quant import INT_RANGE
from msc.ops.rewrite import Match, constant_value

__all__ = ["RULES", "merge_duplicates", "drop_dead"]


# ------------------------------------------------------------------------------ no-op arithmetic
# op -> (neutral element, operand positions the constant may take)
_NEUTRAL = {"add": (0, (0, 1)), "sub": (0, (1,)), "mul": (1, (0, 1)), "div": (1, (1,))}


def _find_no_op_arithmetic(n: Node) -> Match | None:
    """``x op c`` that is ``x`` bit for bit: c every element the neutral value, no broadcast
    or promotion; a float ``x + 0.0`` only with -0.0 (``-0.0 + 0.0`` is +0.0)."""
    if n.op == "logical_and" and len(n.inputs) == 2:
        for x, c in (n.inputs, n.inputs[::-1]):
            v = constant_value(c)
            if x is not None and v is not None and v.size and v.all() and x.type == n.output.type:
                return Match(n, [n], {"x": x})
        return None
    rule = _NEUTRAL.get(n.op)
    if rule is None or len(n.inputs) != 2:
        return None
    neutral, slots = rule
    for slot in slots:
        x, c = n.inputs[1 - slot], n.inputs[slot]
        v = constant_value(c)
        if x is None or v is None or v.size == 0 or x.type != n.output.type:
            continue
        if x.type.dtype.is_complex or not np.all(v == neutral):
            continue
        if n.op == "add" and x.type.dtype.is_floating and not np.all(np.signbit(v)):
            continue
        return Match(n, [n], {"x": x})
    return None


_BIASED = ("conv", "conv_transpose", "linear")


def _find_zero_bias(n: Node) -> Match | None:
    """conv / linear with a constant all-zero bias is the op without one (a BatchNorm of
    untrained statistics folds to zeros, which torch.onnx then leaves out)."""
    if n.op not in _BIASED or len(n.inputs) < 3 or n.inputs[2] is None:
        return None
    c = constant_value(n.inputs[2])
    if c is None or c.size == 0 or np.any(c != 0):
        return None
    return Match(n, [n], {"x": n.inputs[0], "w": n.inputs[1]})  # type: ignore[dict-item]


def _without_bias(b: Builder, m: Match) -> Value:
    return b.op(m.root.op, m["x"], m["w"], **m.root.attrs)


# ------------------------------------------------------------------------------ attention masks
def _find_additive_bool_mask(n: Node) -> Match | None:
    """attention with mask where(m, 0, -inf) of a bool m: that mask is m (a constant of 0
    and -inf: the bool constant of where it is 0). With the dtype's
    lowest value for -inf (torch.onnx writes it) the scores it hides still weigh exactly 0
    (exp underflows) in every row that keeps a key; a row it hides everywhere averages the
    values where the bool mask gives 0: the rule's label says so."""
    if n.op != "attention" or len(n.inputs) < 4 or n.inputs[3] is None:
        return None
    q, k, v = n.inputs[:3]
    c = constant_value(n.inputs[3])
    if c is not None and c.dtype.kind == "f" and c.size:  # folded: a constant of 0 and -inf
        lowest = float(np.finfo(c.dtype).min)
        hidden = c != 0
        fills = set(np.unique(c[hidden]).astype(np.float64).tolist())
        if not hidden.any() or not fills <= {-np.inf, lowest} or len(fills) != 1:
            return None
        info = {"attrs": dict(n.attrs), "exact": fills == {-np.inf}, "const": ~hidden}
        return Match(n, [n], {"q": q, "k": k, "v": v}, info=info)  # type: ignore[dict-item]
    w = n.inputs[3].producer
    if (
        w is None
        or w.op != "where"
        or w.inputs[0] is None
        or w.inputs[0].type.dtype is not DType.BOOL
    ):
        return None
    zero, neg = constant_value(w.inputs[1]), constant_value(w.inputs[2])
    if zero is None or neg is None or zero.size != 1 or neg.size != 1:
        return None
    lowest = float(np.finfo(neg.dtype).min) if neg.dtype.kind == "f" else None
    fill = float(neg.reshape(-1)[0])
    if float(zero.reshape(-1)[0]) != 0.0 or fill not in (-np.inf, lowest):
        return None
    m = w.inputs[0]
    if w.output.type.shape != m.type.shape:
        return None  # where broadcast the mask: the bool one alone has another shape
    info = {"attrs": dict(n.attrs), "exact": fill == -np.inf}
    nodes = [w, n] if len(w.output.uses) == 1 else [n]
    return Match(n, nodes, {"q": q, "k": k, "v": v, "m": m}, info=info)  # type: ignore[dict-item]


def _bool_mask_attention(b: Builder, m: Match) -> Value:
    mask = m.values.get("m")
    if mask is None:
        mask = b.op("constant", value=m.info["const"])
    return b.op("attention", m["q"], m["k"], m["v"], mask, **m.info["attrs"])


def _find_causal_mask(n: Node) -> Match | None:
    """attention(q, k, v, M) of a constant M that is exactly causal attention's (query i sees
    keys j <= i, broadcast over the leading dims; ``msc.ops.fusions``' own test) ->
    attention(q, k, v, is_causal=True): JAX lowers ``is_causal`` to that constant mask."""
    if n.op != "attention" or n.attrs["is_causal"] or len(n.inputs) < 4 or n.inputs[3] is None:
        return None
    q, k, v, mask = n.inputs[:4]
    if not _is_causal_mask(mask, q, k):
        return None
    return Match(n, [n], {"q": q, "k": k, "v": v})


# Ops that broadcast their operands as numpy does (right-aligned); prelu's slope does not.
_BROADCASTING = (set(BINARY) - {"prelu"}) | set(COMPARISONS) | {"where"}


def _find_leading_ones(n: Node) -> Match | None:
    """A broadcasting op's operand of leading size-1 dims (a constant, or a view of x that
    only puts them in front of x's dims), where another operand has at least its rank:
    numpy's broadcasting aligns shapes from the right, so those dims change nothing ([1, 1,
    8, 8] and [8, 8] against [1, 4, 8, 8]). JAX's broadcast_in_dim reads back without the
    ones the code's expand_dims or reshape put there."""
    if n.op not in _BROADCASTING or any(v is None or v.type.rank is None for v in n.inputs):
        return None
    ranks = [v.type.rank for v in n.inputs]
    for i, v in enumerate(n.inputs):
        shape, c = v.type.shape, constant_value(v)
        if not shape or shape[0] != 1:
            continue
        if max((r for j, r in enumerate(ranks) if j != i), default=0) < len(shape):
            continue
        lead = next((k for k, d in enumerate(shape) if d != 1), len(shape))
        ins = {f"in{j}": u for j, u in enumerate(n.inputs)}
        if c is not None:
            return Match(n, [n], ins, info={"at": i, "value": c.reshape(c.shape[lead:])})
        p = v.producer  # a view that only puts the ones in front
        x = p.inputs[0] if p is not None and p.op in ("unsqueeze", "reshape") else None
        if x is not None and x.type.shape is not None and list(x.type.shape) == list(shape[lead:]):
            return Match(n, [n], {**ins, f"in{i}": x}, info={"at": i})
        if p is not None and p.op == "shape" and max(ranks) > 1:
            # a size read as a 1-element vector, against a tensor (not sizes): as a scalar
            # (a size codegen.keras reads when the model runs is one), squeezed
            return Match(n, [n], ins, info={"at": i, "squeeze": lead})
    return None


def _without_leading_ones(b: Builder, m: Match) -> Value:
    n = m.root
    ins = [m[f"in{j}"] for j in range(len(n.inputs))]
    at = m.info["at"]
    if "value" in m.info:
        ins[at] = b.const(m.info["value"], ins[at].type.dtype)
    elif "squeeze" in m.info:
        ins[at] = b.op("squeeze", ins[at], axes=list(range(m.info["squeeze"])))
    return b.op(n.op, *ins, **n.attrs)


def _find_masked_row_guard(n: Node) -> Match | None:
    """where(eq(reduce_max(mask, -1, keepdims), -inf), 0, attention(q, k, v, mask)): the
    attention's own value for a row the mask hides everywhere."""
    if n.op != "where" or len(n.inputs) != 3:
        return None
    cond, zero, y = n.inputs
    att = y.producer if y is not None else None
    eq = cond.producer if cond is not None else None
    if att is None or att.op != "attention" or eq is None or eq.op != "eq":
        return None
    z = constant_value(zero)
    if z is None or z.size != 1 or float(z.reshape(-1)[0]) != 0.0 or len(y.uses) != 1:
        return None
    top, ninf = eq.inputs
    if constant_value(top) is not None:
        top, ninf = ninf, top
    c = constant_value(ninf)
    red = top.producer if top is not None else None
    if c is None or c.size != 1 or float(c.reshape(-1)[0]) != -np.inf or red is None:
        return None
    if red.op != "reduce_max" or not red.attrs["keepdims"] or len(att.inputs) < 4:
        return None
    mask = att.inputs[3]
    rank = None if mask is None else mask.type.rank
    if red.inputs[0] is not mask or rank is None or _axes(red, rank) != [rank - 1]:
        return None
    if not refines(y.type, n.output.type):  # the guard's broadcast may know more dims
        return None
    return Match(n, [eq, red, n], {"y": y})


# ------------------------------------------------------------------------------ resize
def _resize_spelling(n: Node) -> dict:
    """A resize's attributes with those its mode ignores at their defaults, and
    pytorch_half_pixel as half_pixel where every resized dim is more than 1 (ONNX defines
    the two alike there: they differ only for an output of length 1)."""
    a = dict(n.attrs)
    default = {k: s.default for k, s in registry.get("resize").attrs.items()}
    if a["mode"] != "nearest":
        a["nearest_mode"] = default["nearest_mode"]
    if a["mode"] != "cubic":
        a["cubic_coeff_a"] = default["cubic_coeff_a"]
    if a["coordinate_transformation_mode"] != "tf_crop_and_resize":
        a["extrapolation_value"] = default["extrapolation_value"]
    sizes = _exact_sizes(n)
    if sizes is not None:
        a["sizes"], a["scales"] = sizes, None
    out = n.outputs[0].type.shape
    if (
        a["coordinate_transformation_mode"] == "pytorch_half_pixel"
        and out is not None
        and all(d is not None and symexpr.at_least(d, 2) for d in out[2:])
    ):
        a["coordinate_transformation_mode"] = "half_pixel"
    return a


def _exact_sizes(n: Node) -> list[int] | None:
    """A resize by constant ``scales`` as the ``sizes`` it gives, where each static spatial
    dim times its scale is an integer n whose n / dim rounds (float32) to the scale: ONNX
    then maps coordinates by the same scale either way (codegen.onnx writes sizes so when N
    or C is known only at run time)."""
    scales = n.attrs.get("scales")
    x = n.inputs[0].type if n.inputs else None
    if scales is None or n.attrs.get("sizes") is not None or not isinstance(x, TensorType):
        return None
    spatial = x.shape[2:] if x.shape is not None else None
    if spatial is None or len(spatial) != len(scales):
        return None
    out = []
    for d, s in zip(spatial, scales, strict=True):
        if not isinstance(d, int) or d <= 0:
            return None
        size = np.float32(d) * np.float32(s)
        if size != np.floor(size) or exact_resize_scale(d, int(size)) != float(np.float32(s)):
            return None
        out.append(int(size))
    return out


def _find_resize_spelling(n: Node) -> Match | None:
    if n.op != "resize" or _resize_spelling(n) == dict(n.attrs):
        return None
    ins = {f"in{i}": v for i, v in enumerate(n.inputs) if v is not None}
    return Match(n, [n], ins, info={"n": len(n.inputs)})  # type: ignore[arg-type]


def _respell_resize(b: Builder, m: Match) -> Value:
    ins = [m.values.get(f"in{i}") for i in range(m.info["n"])]
    return b.op("resize", *ins, **_resize_spelling(m.root))


# ------------------------------------------------------------------------------ batch norm
def _channel_vector(c: np.ndarray | None, x: TensorType) -> np.ndarray | None:
    """A float constant that broadcasts against ``x`` as one value per channel (dim 1, a
    static size over 1, every other dim 1), as a 1-d array; else None."""
    shape = x.shape
    if c is None or c.dtype.kind != "f" or shape is None or len(shape) < 2 or c.ndim > len(shape):
        return None
    channels = shape[1]
    full = (1,) * (len(shape) - c.ndim) + tuple(c.shape)
    if not isinstance(channels, int) or channels < 2 or full[1] != channels:
        return None
    if any(d != 1 for k, d in enumerate(full) if k != 1):
        return None
    return c.reshape(channels)


def _find_spelled_batch_norm(n: Node) -> Match | None:
    """``x * s + t`` with s and t one float constant per channel (dim 1): an inference
    batch_norm of mean 0, variance 1 and eps 0, the form ``msc.ops.layout.fold_batch_norm``
    writes for a target without a batch norm op (codegen.tflite's MUL + ADD). As a
    batch_norm it folds into the conv or linear before it as any BatchNorm does."""
    if n.op != "add" or len(n.inputs) != 2:
        return None
    for y, tv in (n.inputs, n.inputs[::-1]):
        mul = y.producer if y is not None else None
        if mul is None or mul.op != "mul" or len(mul.inputs) != 2 or len(y.uses) != 1:
            continue
        for x, sv in (mul.inputs, mul.inputs[::-1]):
            if x is None or constant_value(x) is not None:
                continue
            t = x.type
            if not t.dtype.is_floating or t != y.type or t != n.output.type:
                continue
            scale = _channel_vector(constant_value(sv), t)
            shift = _channel_vector(constant_value(tv), t)
            if scale is None or shift is None or scale.dtype != t.dtype.to_numpy():
                continue
            return Match(n, [mul, n], {"x": x}, info={"scale": scale, "shift": shift})
    return None


def _affine_batch_norm(b: Builder, m: Match) -> Value:
    s, t = m.info["scale"], m.info["shift"]
    dt = DType.from_numpy(s.dtype)
    mean, var = b.const(np.zeros_like(s), dt), b.const(np.ones_like(s), dt)
    return b.op("batch_norm", m["x"], b.const(s, dt), b.const(t, dt), mean, var, eps=0.0)


def _find_batch_norm_statistics(n: Node) -> Match | None:
    """batch_norm(x, gamma, beta, mean, var, eps) of constants, not yet of mean 0, variance 1
    and eps 0: that form with scale ``gamma / sqrt(var + eps)`` and shift ``beta - mean *
    scale`` (computed in float64, rounded once), so a BatchNorm no conv absorbed compares
    with its statistics folded into a MUL and an ADD."""
    if n.op != "batch_norm" or n.inputs[0] is None or len(n.inputs) < 5:
        return None
    gamma, beta, mean, var = (constant_value(v) if v is not None else None for v in n.inputs[1:5])
    if mean is None or var is None or mean.dtype.kind != "f" or mean.shape != var.shape:
        return None
    if any(v is not None and c is None for v, c in zip(n.inputs[1:3], (gamma, beta))):
        return None
    if n.attrs["eps"] == 0.0 and not np.any(mean) and np.all(var == 1):
        return None
    scale = batch_norm_scale(gamma, var, n.attrs["eps"])
    shift = batch_norm_shift(None, mean, scale, beta)
    dt = n.output.type.dtype.to_numpy()
    return Match(
        n, [n], {"x": n.inputs[0]}, info={"scale": scale.astype(dt), "shift": shift.astype(dt)}
    )


# ------------------------------------------------------------------------------ quantization
_MOVES = ("transpose", "reshape", "squeeze", "unsqueeze", "flatten")


def _find_dequantize_of_moved(n: Node) -> Match | None:
    """dequantize(move(q)) is move(dequantize(q)): the move only rearranges elements, and a
    per-tensor scale and zero point apply to each alike; a per-axis scale follows its axis
    through a transpose (axis a of the transposed integers is axis perm[a] of q)."""
    if n.op != "dequantize" or n.inputs[0] is None or n.attrs["block_size"]:
        return None
    move, scale = n.inputs[0].producer, n.inputs[1]
    if move is None or move.op not in _MOVES or move.inputs[0] is None or scale is None:
        return None
    if scale.type.shape is None or move.outputs[0].type.rank is None:
        return None
    axis = n.attrs["axis"]
    if not (len(scale.type.shape) <= 1 and scale.type.numel() == 1):
        if move.op != "transpose":
            return None
        axis = move.attrs["perm"][axis % move.outputs[0].type.rank]
    ins = {"q": move.inputs[0], "s": scale}
    if len(n.inputs) > 2 and n.inputs[2] is not None:
        ins["z"] = n.inputs[2]
    ins |= {f"m{i}": v for i, v in enumerate(move.inputs) if i and v is not None}
    nodes = [move, n] if len(move.outputs[0].uses) == 1 else [n]
    info = {"op": move.op, "attrs": dict(move.attrs), "n": len(move.inputs), "axis": axis}
    return Match(n, nodes, ins, info=info)  # type: ignore[arg-type]


def _move_dequantized(b: Builder, m: Match) -> Value:
    d = b.op("dequantize", m["q"], m["s"], m.values.get("z"), axis=m.info["axis"], block_size=0)
    ins = [m.values.get(f"m{i}") for i in range(1, m.info["n"])]
    return b.op(m.info["op"], d, *ins, **m.info["attrs"])


# ------------------------------------------------------------------------------ clamp by constants
def _find_constant_clamp(n: Node) -> Match | None:
    """``clamp(x, lo, hi)`` of a float ``x`` by constant one-element bounds of its dtype is
    ``hardtanh(x, lo, hi)``: ONNX's Clip takes its bounds as inputs (a ReLU6 is written
    ``Clip(x, 0, 6)``), the frontends that know the bounds give them as attributes."""
    if n.op != "clamp" or len(n.inputs) != 3 or n.inputs[0] is None:
        return None
    x = n.inputs[0]
    if not x.type.dtype.is_floating or x.type.dtype.is_complex:
        return None
    bounds = []
    for v in n.inputs[1:]:
        c = constant_value(v)
        if c is None or c.size != 1 or c.ndim > x.type.rank or v.type.dtype != x.type.dtype:
            return None
        bounds.append(float(c.reshape(())))
    if x.type != n.output.type or any(np.isnan(b) for b in bounds):
        return None
    if any(u.op == "cast" and not u.output.type.dtype.is_floating for u, _ in n.output.uses):
        return None  # the saturation of a spelled-out quantize (its own rule reads it)
    return Match(n, [n], {"x": x}, info={"min": bounds[0], "max": bounds[1]})


# The integer types whose spelled-out (de)quantization is recognized: an int32 ``cast(i) * c``
# (positions times a frequency) is arithmetic, not a quantized tensor.
_SPELLED_QUANT = {t: r for t, r in INT_RANGE.items() if t is not DType.INT32}


def _quant_layout(c: np.ndarray, out: tuple | None) -> tuple[int, int] | None:
    """(axis, elements) of a constant scale or zero point spelled to broadcast against a value
    of shape ``out`` (``msc.ops.decompose.quant``'s spread): one element is per tensor (axis
    -1), a shape of ones but one dim that is ``out``'s there is per axis; else None."""
    if out is None or c.ndim > len(out) or any(not isinstance(d, int) for d in out):
        return None
    shape = (1,) * (len(out) - c.ndim) + tuple(c.shape)
    wide = [k for k, d in enumerate(shape) if d != 1]
    if not wide:
        return (-1, 1)
    if len(wide) == 1 and shape[wide[0]] == out[wide[0]]:
        return (wide[0], shape[wide[0]])
    return None


def _quant_params(s: np.ndarray, z: np.ndarray | None, out: tuple | None, qt: DType) -> dict | None:
    """The scale and zero point of a spelled-out (de)quantization as the op takes them (a 0-d
    per-tensor or a 1-d per-axis scale; the zero point in the quantized type, of the scale's
    shape), or None: a scale that is not float or not of one layout, a zero point of another
    axis or not whole numbers in ``qt``'s range."""
    if s.dtype.kind != "f" or not s.size:
        return None
    ls = _quant_layout(s, out)
    lz = (-1, 1) if z is None else _quant_layout(z, out)
    if ls is None or lz is None or (lz[0] != -1 and lz != ls):
        return None
    axis, size = ls
    shape = () if axis == -1 else (size,)
    scale = s.reshape(shape)
    zp = None
    if z is not None:
        lo, hi = _SPELLED_QUANT[qt]
        zv = np.broadcast_to(z.reshape(() if lz[0] == -1 else (size,)), shape)
        if np.any(zv != np.round(zv)) or np.any(zv < lo) or np.any(zv > hi):
            return None
        zp = np.array(zv, dtype=qt.to_numpy())  # (ascontiguousarray makes a 0-d array 1-d)
    default = registry.get("dequantize").attrs["axis"].default
    return {"scale": scale, "zp": zp, "axis": default if axis == -1 else axis}


def _find_spelled_dequantize(n: Node) -> Match | None:
    """``(cast(q) - z) * s`` (or ``cast(q) * s``) of an integer q to s's float dtype, with a
    constant s and z of one per-tensor or per-axis layout: dequantize(q, s, z) by the op's
    definition, as ``msc.ops.decompose.quant`` spells it (generated PyTorch's helper; any
    exporter that writes the arithmetic)."""
    if n.op != "mul" or len(n.inputs) != 2:
        return None
    for d, sv in (n.inputs, n.inputs[::-1]):
        s = constant_value(sv)
        p = d.producer if d is not None else None
        if s is None or p is None or d.type != n.output.type:
            continue
        z, c, nodes = None, p, [p]
        if p.op == "sub" and p.inputs[0] is not None and p.inputs[0].producer is not None:
            z, c = constant_value(p.inputs[1]), p.inputs[0].producer
            if z is None:
                continue
            nodes = [c, p] if len(c.output.uses) == 1 else [p]
        if c.op != "cast" or c.inputs[0] is None or (p is not c and len(d.uses) != 1):
            continue
        q = c.inputs[0]
        if q.type.dtype not in _SPELLED_QUANT or c.output.type.dtype.to_numpy() != s.dtype:
            continue
        if p is c and len(c.output.uses) != 1:
            nodes = []
        params = _quant_params(s, z, n.output.type.shape, q.type.dtype)
        if params is None:
            continue
        return Match(n, [*nodes, n], {"q": q}, info=params)
    return None


def _dequantize(b: Builder, m: Match) -> Value:
    s, z = m.info["scale"], m.info["zp"]
    scale = b.const(s, DType.from_numpy(s.dtype))
    zp = None if z is None else b.const(z, DType.from_numpy(z.dtype))
    return b.op("dequantize", m["q"], scale, zp, axis=m.info["axis"], block_size=0)


def _producer(v: Value | None, op: str) -> Node | None:
    """``v``'s producer when it is an ``op`` that only ``v``'s one reader reads."""
    p = v.producer if v is not None else None
    return p if p is not None and p.op == op and len(v.uses) == 1 else None  # type: ignore[union-attr]


def _find_spelled_quantize(n: Node) -> Match | None:
    """``cast(clamp(round(x / s) + z, lo, hi))`` to an integer type whose range is [lo, hi]
    (constant s and z of one layout; no ``+ z`` for no zero point): quantize(x, s, z) by the
    op's definition (round half to even, saturating), as ``msc.ops.decompose.quant`` spells
    it."""
    qt = n.output.type.dtype if n.op == "cast" else None
    cl = _producer(n.inputs[0], "clamp") if qt in _SPELLED_QUANT else None
    if cl is None or len(cl.inputs) != 3:
        return None
    lo, hi = constant_value(cl.inputs[1]), constant_value(cl.inputs[2])
    if lo is None or hi is None or lo.size != 1 or hi.size != 1:
        return None
    if (float(lo.reshape(-1)[0]), float(hi.reshape(-1)[0])) != _SPELLED_QUANT[qt]:  # type: ignore[index]
        return None
    nodes, z = [cl, n], None
    r = _producer(cl.inputs[0], "add")
    if r is not None:
        nodes.insert(0, r)
        for y, zv in (r.inputs, r.inputs[::-1]):
            if constant_value(zv) is not None and _producer(y, "round") is not None:
                z, r = constant_value(zv), _producer(y, "round")
                break
        else:
            return None
    else:
        r = _producer(cl.inputs[0], "round")
    dv = _producer(r.inputs[0], "div") if r is not None else None
    s = constant_value(dv.inputs[1]) if dv is not None else None
    if s is None or dv.inputs[0] is None or dv.output.type != cl.output.type:  # type: ignore[union-attr]
        return None
    x = dv.inputs[0]  # type: ignore[union-attr]
    if x.type != dv.output.type or s.dtype != x.type.dtype.to_numpy():  # type: ignore[union-attr]
        return None
    params = _quant_params(s, z, x.type.shape, qt)  # type: ignore[arg-type, union-attr]
    if params is None:
        return None
    return Match(n, [dv, r, *nodes], {"x": x}, info=params | {"dtype": qt})  # type: ignore[list-item]


def _quantize(b: Builder, m: Match) -> Value:
    s, z = m.info["scale"], m.info["zp"]
    scale = b.const(s, DType.from_numpy(s.dtype))
    zp = None if z is None else b.const(z, DType.from_numpy(z.dtype))
    return b.op(
        "quantize", m["x"], scale, zp, dtype=m.info["dtype"], axis=m.info["axis"], block_size=0
    )


def _find_zero_zero_point(n: Node) -> Match | None:
    """quantize / dequantize with a constant zero point of zeros: the op without one (its
    default), whichever way a file spells it (a spelled-out ``- 0`` is dropped as a no-op)."""
    if n.op not in ("quantize", "dequantize") or len(n.inputs) < 3:
        return None
    z = constant_value(n.inputs[2])
    if z is None or np.any(z != 0) or n.inputs[0] is None or n.inputs[1] is None:
        return None
    return Match(n, [n], {"x": n.inputs[0], "s": n.inputs[1]})


def _keep(b: Builder, m: Match) -> Value:
    return m["x"]


# (label, matcher, replacement), in priority order
RULES = [
    ("no-op arithmetic dropped", _find_no_op_arithmetic, _keep),
    (lambda m: f"{m.root.op}'s all-zero bias dropped", _find_zero_bias, _without_bias),
    *INDEX_RULES,
    *GATHER_RULES,
    ("attention's fully-masked-row guard dropped", _find_masked_row_guard, lambda b, m: m["y"]),
    (
        lambda m: (
            "attention's 0/-inf float mask -> bool mask"
            if m.info["exact"]
            else "attention's 0/lowest float mask -> bool mask (but in rows it hides everywhere)"
        ),
        _find_additive_bool_mask,
        _bool_mask_attention,
    ),
    (
        "attention's causal constant mask -> is_causal",
        _find_causal_mask,
        lambda b, m: b.op(
            "attention", m["q"], m["k"], m["v"], None, **{**m.root.attrs, "is_causal": True}
        ),
    ),
    (
        "a broadcast operand's leading size-1 dims dropped",
        _find_leading_ones,
        _without_leading_ones,
    ),
    ("resize's attributes that do not apply normalized", _find_resize_spelling, _respell_resize),
    (
        "clamp by constant bounds -> hardtanh",
        _find_constant_clamp,
        lambda b, m: b.op("hardtanh", m["x"], min=m.info["min"], max=m.info["max"]),
    ),
    (
        "batch_norm spelled out as mul + add -> batch_norm",
        _find_spelled_batch_norm,
        _affine_batch_norm,
    ),
    (
        "batch_norm's statistics folded into its scale and shift",
        _find_batch_norm_statistics,
        _affine_batch_norm,
    ),
    ("quantize spelled out -> quantize", _find_spelled_quantize, _quantize),
    ("dequantize spelled out -> dequantize", _find_spelled_dequantize, _dequantize),
    (
        lambda m: f"{m.root.op}'s zero zero point dropped",
        _find_zero_zero_point,
        lambda b, m: b.op(m.root.op, m["x"], m["s"], **m.root.attrs),
    ),
    (
        "move of quantized integers -> move of the dequantized values",
        _find_dequantize_of_moved,
        _move_dequantized,
    ),
]


# ------------------------------------------------------------------------------ graph passes
def _key(n: Node) -> tuple | None:
    """What makes two nodes the same computation: op, attributes, inputs (by identity)."""
    if n.op in ("constant",) or "rand" in n.op or any(True for _ in n.subgraphs()):
        return None
    try:
        attrs = tuple(sorted((k, _hashable(v)) for k, v in n.attrs.items()))
    except TypeError:
        return None
    ins = tuple(_operand_key(v) for v in n.inputs)
    return (n.op, attrs, ins, len(n.outputs))


def _operand_key(v: Value | None) -> object:
    """An operand by identity; a small weight by its value (folded constants of one value
    are separate weights)."""
    if v is None:
        return None
    if isinstance(v, Weight) and v.has_data and v.type.numel() is not None and v.type.numel() <= 64:
        a = v.numpy()
        return ("weight", a.dtype.str, a.shape, a.tobytes())
    return id(v)


def _hashable(v: object) -> object:
    if isinstance(v, np.ndarray):
        return ("tensor", v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, list | tuple):
        return tuple(_hashable(x) for x in v)
    hash(v)
    return v


def merge_duplicates(g: Graph, done: Counter[str]) -> bool:
    """Nodes computing the same op of the same inputs become one (the first): exact for
    deterministic ops. Returns whether any merged."""
    seen: dict[tuple, Node] = {}
    outs = {id(v) for v in g.outputs}
    gone: list[Node] = []
    for n in g.nodes:
        k = _key(n)
        if k is None:
            continue
        first = seen.get(k)
        if first is None:
            seen[k] = n
            continue
        if any(id(v) in outs for v in n.outputs):
            continue
        if any(a.type != b.type for a, b in zip(first.outputs, n.outputs)):
            continue
        for a, b in zip(first.outputs, n.outputs):
            b.replace_all_uses_with(a)
        gone.append(n)
    if gone:
        g.remove_nodes(gone)
        done["duplicate computations merged"] += len(gone)
    return bool(gone)


def drop_dead(g: Graph) -> None:
    """Nodes nothing reads (what rewrites left of shape computations) go. Not counted."""
    dead = dead_nodes(g)
    if dead:
        g.remove_nodes(dead)
