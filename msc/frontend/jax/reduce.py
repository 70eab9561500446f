"""StableHLO reduce with its body recognized (add, max, min, multiply, and, or)."""

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
    value = ctx.op("reduce_max" if kind == "argmax" else "reduce_min", x, None, axes=axes)
    index = ctx.op(kind, x, axis=axes[0], keepdims=False)
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
