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


@converter("stablehlo.reduce")
def reduce(ctx: Ctx, sop: ShloOp, *args):
    if len(args) != 2:
        raise Unsupported(f"a reduce of {len(args) // 2} operands together (argmax and kin)")
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
