"""Keras layers that are tensor contractions: EinsumDense and Dot."""

from __future__ import annotations

from msc.errors import Unsupported
from msc.frontend.keras.elementwise import activate
from msc.frontend.keras.importer import Ctx
from msc.frontend.keras.registry import converter
from msc.ir import Value

_LETTERS = "abcdefghijklmnopqrstuvwxyz"


@converter("EinsumDense")
def einsum_dense(ctx: Ctx, layer, x):
    """``einsum(equation, x, kernel) + bias``, then the activation (Keras' own order)."""
    if getattr(layer, "lora_enabled", False):
        raise Unsupported("lora_rank (merge the LoRA weights into the kernel first)")
    y = ctx.op("einsum", x, ctx.weight(layer.kernel), equation=str(layer.equation))
    if layer.bias is not None:
        y = ctx.op("add", y, ctx.weight(layer.bias))
    return activate(ctx, y, layer.activation)


def _l2_normalize(ctx: Ctx, x: Value, axis: int) -> Value:
    """Keras' ``ops.normalize(x, axis)``: x * min(rsqrt(sum(x^2)), 1 / epsilon)."""
    s = ctx.op("reduce_sum", ctx.op("mul", x, x), axes=[axis], keepdims=True)
    inv = ctx.op("minimum", ctx.op("rsqrt", s), ctx.f32(1.0 / 1e-7, x))
    return ctx.op("mul", x, inv)


@converter("Dot")
def dot(ctx: Ctx, layer, a, b):
    """Keras' batch_dot over ``axes``: the output holds a's other axes, then b's; a rank-2
    pair gives [batch, 1]."""
    axes = layer.axes if isinstance(layer.axes, list | tuple) else [layer.axes] * 2
    ra, rb = a.type.rank, b.type.rank
    ax = [int(axes[0]) % ra, int(axes[1]) % rb]
    if 0 in ax:
        raise Unsupported("a dot over the batch axis")
    if layer.normalize:
        a, b = _l2_normalize(ctx, a, ax[0]), _l2_normalize(ctx, b, ax[1])
    if ra + rb - 1 > len(_LETTERS):
        raise Unsupported("operands of too high a rank")
    sa = ["a"] + [_LETTERS[1 + i] for i in range(ra - 1)]
    sb = ["a"] + [_LETTERS[ra + i] for i in range(rb - 1)]
    sb[ax[1]] = sa[ax[0]]
    out = ["a"] + [c for i, c in enumerate(sa) if i not in (0, ax[0])]
    out += [c for i, c in enumerate(sb) if i not in (0, ax[1])]
    y = ctx.op("einsum", a, b, equation=f"{''.join(sa)},{''.join(sb)}->{''.join(out)}")
    if len(out) == 1:
        y = ctx.op("unsqueeze", y, axes=[1])
    return y
