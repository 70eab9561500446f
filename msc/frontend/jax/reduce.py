"""StableHLO reduce with its body recognized (add, max, min, multiply, and, or; JAX's argmax /
argmin), and sort with its comparator recognized (jnp.sort, argsort, lax.sort, lax.top_k)."""

from __future__ import annotations

from msc.errors import Unsupported
from msc.frontend.jax.importer import Ctx
from msc.frontend.jax.nn import body_op
from msc.frontend.jax.reader import ShloOp
from msc.frontend.jax.registry import converter
from msc.ir import DType

# body op -> (reduction, the binary op that folds in the init value)
BODIES = {
    "stablehlo.add": ("reduce_sum", "add"),
    "stablehlo.maximum": ("reduce_max", "maximum"),
    "stablehlo.minimum": ("reduce_min", "minimum"),
    "stablehlo.multiply": ("reduce_prod", "mul"),
    "stablehlo.and": ("reduce_all", "logical_and"),
    "stablehlo.or": ("reduce_any", "logical_or"),
}


# The body JAX writes for argmax / argmin (value and index reduced together; ties and NaN
# resolved toward the first index), op by op.
_ARG_BODY = [
    "stablehlo.compare",
    "stablehlo.compare",
    "stablehlo.or",
    "stablehlo.compare",
    "stablehlo.compare",
    "stablehlo.and",
    "stablehlo.or",
    "stablehlo.select",
    "stablehlo.select",
    "stablehlo.return",
]


def _arg_reduce(ctx: Ctx, sop: ShloOp, x, idx) -> tuple:
    """argmax / argmin: a two-operand reduce of (x, iota along the axis) with JAX's body."""
    axes = sop.attr("dimensions")
    src = sop.op.operands[1].owner
    if len(axes) != 1 or getattr(src, "name", "") != "stablehlo.iota":
        raise Unsupported("a reduce of two operands that is not argmax / argmin")
    if ShloOp(src).attr("iota_dimension") != axes[0]:
        raise Unsupported("a reduce of two operands that is not argmax / argmin")
    block = sop.op.regions[0].blocks[0]
    ops = [o.operation for o in block.operations]
    if [o.name for o in ops] != _ARG_BODY:
        raise Unsupported("a reduce of two operands with a body msc does not recognize")
    a = list(block.arguments)
    first = ops[0]
    direction = str(first.attributes["comparison_direction"]).split()[-1].rstrip(">")
    tie = str(ops[4].attributes["comparison_direction"]).split()[-1].rstrip(">")
    if list(first.operands) != [a[0], a[2]] or tie != "LT" or direction not in ("GT", "LT"):
        raise Unsupported("a reduce of two operands with a body msc does not recognize")
    kind = "argmax" if direction == "GT" else "argmin"
    bool_in = x.dtype is DType.BOOL  # jnp.argmax of a mask: torch and ONNX order uint8 only
    if bool_in:
        x = ctx.cast(x, DType.UINT8)
    value = ctx.op("reduce_max" if kind == "argmax" else "reduce_min", x, None, axes=axes)
    index = ctx.op(kind, x, axis=axes[0], keepdims=False)
    if bool_in:
        value = ctx.cast(value, DType.BOOL)
    return value, ctx.cast(index, ctx.out_type(1).dtype)


@converter("stablehlo.reduce")
def reduce(ctx: Ctx, sop: ShloOp, *args):
    if len(args) == 4:
        return _arg_reduce(ctx, sop, args[0], args[1])
    if len(args) != 2:
        raise Unsupported(f"a reduce of {len(args) // 2} operands together")
    x, init = args
    kind = body_op(sop)
    if kind not in BODIES:
        raise Unsupported(f"a reduce applying {kind or 'a body msc does not recognize'}")
    red, fold = BODIES[kind]
    if red in ("reduce_all", "reduce_any") and x.dtype is not DType.BOOL:
        raise Unsupported(f"a bitwise {kind} reduce of {x.dtype.value}")
    axes = sop.attr("dimensions")
    y = ctx.op(red, x, None, axes=axes, keepdims=False)
    # the init value is folded in (an identity init, as JAX writes, changes nothing)
    if init.producer is not None and init.producer.op == "constant":
        v = init.producer.attrs["value"]
        ident = {"add": 0, "mul": 1}.get(fold)
        if ident is not None and v.size == 1 and float(v.reshape(-1)[0]) == ident:
            return y
        if fold == "maximum" and v.dtype.kind == "f" and float(v.reshape(-1)[0]) == float("-inf"):
            return y
        if fold == "minimum" and v.dtype.kind == "f" and float(v.reshape(-1)[0]) == float("inf"):
            return y
        if fold in ("logical_and", "logical_or"):
            want = fold == "logical_and"
            if bool(v.reshape(-1)[0]) == want:
                return y
    return ctx.op(fold, y, init)


# ---------------------------------------------------------------- sort, top_k
def _direction(op) -> str:
    return str(op.attributes["comparison_direction"]).split()[-1].rstrip(">")


def _sort_source(v, args: list) -> int | None:
    """Which comparator argument ``v`` is, read through JAX's float canonicalization
    (``select(x == 0, 0, x)``, ``select(x != x, nan, x)``: -0 as 0, one NaN), else None."""
    for i, a in enumerate(args):
        if v == a:
            return i
    op = getattr(v.owner, "operation", None)
    if op is None or op.name != "stablehlo.select":
        return None
    pred, on_true, on_false = list(op.operands)
    if getattr(on_true.owner, "name", "") != "stablehlo.constant":
        return None
    src = _sort_source(on_false, args)
    p = pred.owner.operation if hasattr(pred.owner, "operation") else None
    if p is None or p.name != "stablehlo.compare":
        return None
    if any(_sort_source(o, args) not in (src, None) for o in p.operands):
        return None
    return src


def _comparator(sop: ShloOp) -> tuple[int, bool]:
    """(the operand sorted by, descending) of a one-key comparator: a ``<`` or ``>`` of one
    operand's two elements."""
    block = sop.op.regions[0].blocks[0]
    args = list(block.arguments)
    ops = [o.operation for o in block.operations]
    allowed = {"stablehlo.compare", "stablehlo.select", "stablehlo.constant", "stablehlo.return"}
    if any(o.name not in allowed for o in ops):
        raise Unsupported("a sort comparator that is not one key's < or > (lexicographic?)")
    last = ops[-2] if len(ops) >= 2 else None
    if last is None or last.name != "stablehlo.compare":
        raise Unsupported("a sort comparator that is not one key's < or >")
    if list(ops[-1].operands) != list(last.results):
        raise Unsupported("a sort comparator that is not one key's < or >")
    for o in ops[:-2]:  # the other compares only pick canonical values
        if o.name == "stablehlo.compare" and any(
            u.owner.name != "stablehlo.select" for u in o.results[0].uses
        ):
            raise Unsupported("a sort comparator of more than one comparison")
    i, j = (_sort_source(v, args) for v in last.operands)
    d = _direction(last)
    if i is None or j is None or i // 2 != j // 2 or i == j or d not in ("LT", "GT"):
        raise Unsupported("a sort comparator that is not one key's < or >")
    descending = (d == "GT") == (i < j)
    return i // 2, descending


def _key_compare(v, args: list, directions: tuple[str, ...]) -> tuple[int, str] | None:
    """(the key, the direction) when ``v`` is a compare of one key's two elements (through
    JAX's float canonicalization), the first element on the left; else None."""
    op = getattr(v.owner, "operation", None)
    if op is None or op.name != "stablehlo.compare" or _direction(op) not in directions:
        return None
    i, j = (_sort_source(u, args) for u in op.operands)
    if i is None or j is None or i // 2 != j // 2 or i == j:
        return None
    d = _direction(op)
    if i > j:
        d = {"LT": "GT", "GT": "LT"}.get(d, d)
    return i // 2, d


def _lexicographic(v, args: list) -> list[tuple[int, bool]] | None:
    """The keys, most significant first, each (operand, descending), of a comparator JAX
    writes for ``lax.sort(..., num_keys=n)`` / jnp.lexsort: ``k0 < k0' or (k0 == k0' and
    (k1 < k1' or ...))``; None for any other comparator."""
    one = _key_compare(v, args, ("LT", "GT"))
    if one is not None:
        return [(one[0], one[1] == "GT")]
    op = getattr(v.owner, "operation", None)
    if op is None or op.name != "stablehlo.or":
        return None
    first, tie = list(op.operands)
    head = _key_compare(first, args, ("LT", "GT"))
    inner = getattr(tie.owner, "operation", None)
    if head is None or inner is None or inner.name != "stablehlo.and":
        return None
    a, b = list(inner.operands)
    for eq, rest in ((a, b), (b, a)):
        same = _key_compare(eq, args, ("EQ",))
        if same is not None and same[0] == head[0]:
            tail = _lexicographic(rest, args)
            if tail is not None and head[0] not in [k for k, _ in tail]:
                return [(head[0], head[1] == "GT"), *tail]
    return None


def _lex_sort(ctx: Ctx, sop: ShloOp, xs: tuple, keys: list[tuple[int, bool]]) -> tuple:
    """A sort by several keys as stable argsorts from the least significant key up, each
    reordering the order so far; every operand is then gathered by the order."""
    axis = sop.attr("dimension")
    order = None
    for k, descending in reversed(keys):
        x = xs[k] if order is None else ctx.op("gather_elements", xs[k], order, axis=axis)
        step = ctx.op("argsort", x, axis=axis, descending=descending, stable=True)
        order = step if order is None else ctx.op("gather_elements", order, step, axis=axis)
    outs = []
    for k, v in enumerate(xs):
        if _is_iota(sop, k, axis):
            outs.append(ctx.cast(order, v.dtype))
        else:
            outs.append(ctx.op("gather_elements", v, order, axis=axis))
    return tuple(outs)


def _is_iota(sop: ShloOp, k: int, axis: int) -> bool:
    src = sop.op.operands[k].owner
    return (
        getattr(src, "name", "") == "stablehlo.iota" and ShloOp(src).attr("iota_dimension") == axis
    )


@converter("stablehlo.sort")
def sort(ctx: Ctx, sop: ShloOp, *xs):
    """jnp.sort / argsort / lax.sort with one key: sort (or argsort when only the order is
    used); every other operand is reordered by the indices (an iota along the axis is them).
    A lexicographic comparator (several keys) sorts by each key in turn (``_lex_sort``)."""
    try:
        key, descending = _comparator(sop)
    except Unsupported:
        block = sop.op.regions[0].blocks[0]
        ret = list(block.operations)[-1].operation
        keys = _lexicographic(ret.operands[0], list(block.arguments))
        if keys is None:
            raise
        return _lex_sort(ctx, sop, xs, keys)
    axis = sop.attr("dimension")
    stable = bool(sop.attr("is_stable", False))
    x = xs[key]
    key_used = bool(list(sop.op.results[key].uses))
    if key_used or len(xs) == 1:
        values, idx = ctx.multi("sort", x, axis=axis, descending=descending, stable=stable)
    else:
        values, idx = None, ctx.op("argsort", x, axis=axis, descending=descending, stable=stable)
    outs = []
    for k, v in enumerate(xs):
        if k == key:
            outs.append(values if values is not None else ctx.op("identity", x))
        elif _is_iota(sop, k, axis):
            outs.append(ctx.cast(idx, v.dtype))
        else:
            outs.append(ctx.op("gather_elements", v, idx, axis=axis))
    return tuple(outs)


@converter("composite:chlo.top_k")
def top_k(ctx: Ctx, sop: ShloOp, x):
    """lax.top_k: the k largest along the last axis, ties in index order."""
    from jax._src.lib.mlir import ir

    k = int(ir.IntegerAttr(sop.raw("composite_attributes")["k"]).value)
    values, idx = ctx.multi("topk", x, k=k, axis=-1, largest=True, sorted=True, stable=True)
    return values, ctx.cast(idx, ctx.out_type(1).dtype)
