"""StableHLO linear algebra and network ops: dot_general (matmul or einsum by its dimension
numbers), convolution (any dimension numbers, feature groups) and reduce_window as pools.

The canonical conv and pools are channels first; an op in another layout (JAX's NHWC / HWIO)
gets transposes at its boundary, which msc.ops' transpose sinking cancels between ops.
"""

from __future__ import annotations

import string

import numpy as np

from msc.errors import Unsupported
from msc.frontend.jax.importer import Ctx
from msc.frontend.jax.reader import ShloOp
from msc.frontend.jax.registry import converter


def _perm_or_none(ctx: Ctx, x, perm: list[int]):
    return x if perm == list(range(len(perm))) else ctx.op("transpose", x, perm=perm)


@converter("stablehlo.dot_general")
def dot_general(ctx: Ctx, sop: ShloOp, a, b):
    from jaxlib.mlir.dialects import stablehlo as sh

    d = sh.DotDimensionNumbers(sop.raw("dot_dimension_numbers"))
    lb, rb = list(d.lhs_batching_dimensions), list(d.rhs_batching_dimensions)
    lc, rc = list(d.lhs_contracting_dimensions), list(d.rhs_contracting_dimensions)
    ra, rr = a.type.rank, b.type.rank
    nb = len(lb)
    # a plain (batched) matmul: batch dims lead both, one contraction on a's last axis and
    # b's second-to-last (or only) axis
    if (
        lb == list(range(nb))
        and rb == list(range(nb))
        and len(lc) == 1
        and lc[0] == ra - 1
        and ra == nb + 2
        and ((rr == nb + 2 and rc == [nb]) or (nb == 0 and rr == 1 and rc == [0]))
    ):
        return ctx.op("matmul", a, b)
    if nb == 0 and ra >= 2 and rr == 2 and lc == [ra - 1] and rc == [0]:
        return ctx.op("matmul", a, b)  # x @ w with x's leading dims kept (a dense layer)
    if (
        ra == nb + 1
        and lc == [ra - 1]
        and rr == nb + 2
        and rc == [nb]
        and rb == lb == list(range(nb))
    ):  # a batch of vectors times a batch of matrices (jnp.vecmat): matmul broadcasts a 2-d
        # left operand as one matrix, so the vector gets its row dim and loses it again
        if nb == 0:
            return ctx.op("matmul", a, b)
        row = ctx.op("unsqueeze", a, axes=[nb])
        return ctx.op("squeeze", ctx.op("matmul", row, b), axes=[nb])
    letters = iter(string.ascii_letters)
    la = [""] * ra
    lr = [""] * rr
    for i, j in zip(lb, rb):
        la[i] = lr[j] = next(letters)
    for i, j in zip(lc, rc):
        la[i] = lr[j] = next(letters)
    for i in range(ra):
        la[i] = la[i] or next(letters)
    for j in range(rr):
        lr[j] = lr[j] or next(letters)
    out = [la[i] for i in lb]
    out += [la[i] for i in range(ra) if i not in lb and i not in lc]
    out += [lr[j] for j in range(rr) if j not in rb and j not in rc]
    eq = f"{''.join(la)},{''.join(lr)}->{''.join(out)}"
    return ctx.op("einsum", a, b, equation=eq)


@converter("stablehlo.convolution")
def convolution(ctx: Ctx, sop: ShloOp, x, w):
    from jaxlib.mlir.dialects import stablehlo as sh

    d = sh.ConvDimensionNumbers(sop.raw("dimension_numbers"))
    n = len(d.input_spatial_dimensions)
    if sop.attr("batch_group_count", 1) != 1:
        raise Unsupported("batch_group_count > 1 (a weight gradient)")
    lhs_dil = sop.attr("lhs_dilation") or [1] * n
    if any(v != 1 for v in lhs_dil):
        raise Unsupported("lhs_dilation (a transposed convolution)")
    if any(sop.attr("window_reversal") or []):
        raise Unsupported("window_reversal")
    strides = sop.attr("window_strides") or [1] * n
    dil = sop.attr("rhs_dilation") or [1] * n
    pad = sop.attr("padding")
    pad = np.zeros((n, 2), np.int64) if pad is None else np.asarray(pad).reshape(n, 2)
    if (pad < 0).any():
        raise Unsupported("negative convolution padding")
    xin = [d.input_batch_dimension, d.input_feature_dimension, *d.input_spatial_dimensions]
    win = [
        d.kernel_output_feature_dimension,
        d.kernel_input_feature_dimension,
        *d.kernel_spatial_dimensions,
    ]
    xc = _perm_or_none(ctx, x, xin)
    wc = _perm_or_none(ctx, w, win)
    pads = [int(p) for p in pad[:, 0]] + [int(p) for p in pad[:, 1]]
    y = ctx.op(
        "conv",
        xc,
        wc,
        None,
        stride=list(strides),
        padding=pads,
        dilation=list(dil),
        groups=sop.attr("feature_group_count", 1),
    )
    yout = [d.output_batch_dimension, d.output_feature_dimension, *d.output_spatial_dimensions]
    inv = [yout.index(i) for i in range(n + 2)]
    return _perm_or_none(ctx, y, inv)


def body_op(sop: ShloOp) -> str | None:
    """The one binary op a reduce body applies to its two arguments, or None."""
    region = sop.op.regions[0]
    block = region.blocks[0]
    ops = list(block.operations)
    args = list(block.arguments)
    if len(ops) != 2 or len(args) != 2 or ops[1].operation.name != "stablehlo.return":
        return None
    op = ops[0].operation
    if list(op.operands) not in (args, args[::-1]) or list(ops[1].operands) != list(op.results):
        return None
    return op.name


def _cumulative(ctx: Ctx, sop: ShloOp, x, init, kind: str | None):
    """A running sum / product (jnp.cumsum, lax.cumprod): a window as long as one axis,
    padded by all but one before it (after it, reversed), stride 1; else None."""
    if kind not in ("stablehlo.add", "stablehlo.multiply") or x.type.shape is None:
        return None
    shape, r = x.type.shape, x.type.rank
    win = sop.attr("window_dimensions")
    pad = sop.attr("padding")
    pad = np.zeros((r, 2), np.int64) if pad is None else np.asarray(pad).reshape(r, 2)
    for key in ("window_strides", "base_dilations", "window_dilations"):
        if any(v != 1 for v in (sop.attr(key) or [1] * r)):
            return None
    axes = [i for i in range(r) if win[i] != 1 or pad[i].any()]
    if len(axes) != 1 or not isinstance(shape[axes[0]], int):
        return None
    a = axes[0]
    n = shape[a]
    if win[a] != n or sorted(pad[a].tolist()) != [0, n - 1]:
        return None
    ident = 0.0 if kind == "stablehlo.add" else 1.0
    p = init.producer
    while p is not None and p.op == "identity":  # a broadcast of the scalar to itself
        p = p.inputs[0].producer
    if p is None or p.op != "constant" or float(p.attrs["value"].reshape(-1)[0]) != ident:
        return None
    op = "cumsum" if kind == "stablehlo.add" else "cumprod"
    return ctx.op(op, x, axis=a, reverse=bool(pad[a, 1] and n > 1))


def _func_body_op(ctx: Ctx, sop: ShloOp) -> str | None:
    """The one binary op the function a custom_call names (``called_computations``) applies
    to its two arguments, or None."""
    names = [str(a).lstrip("@").strip('"') for a in sop.raw("called_computations")]
    fn = ctx.imp.funcs.get(names[0]) if len(names) == 1 else None
    if fn is None:
        return None
    block = fn.regions[0].blocks[0]
    ops, args = [o.operation for o in block.operations], list(block.arguments)
    if len(ops) != 2 or len(args) != 2 or ops[1].name not in ("func.return", "stablehlo.return"):
        return None
    if list(ops[0].operands) not in (args, args[::-1]):
        return None
    return ops[0].name if list(ops[1].operands) == list(ops[0].results) else None


@converter("custom_call:stablehlo.dynamic_reduce_window")
def dynamic_reduce_window(ctx: Ctx, sop: ShloOp, x, init, window, strides, base, dil, pad):
    """A reduce_window whose window and padding are computed from symbolic sizes (what
    jax.export writes for ``jnp.cumsum`` along a symbolic axis): a running sum / product when
    the window spans the axis, padded by all but one before it (after it: reversed)."""
    from msc.frontend.jax.shape import known_sizes
    from msc.ir import symexpr

    kind = _func_body_op(ctx, sop)
    r, shape = x.type.rank, x.type.shape
    win, pads = known_sizes(window), known_sizes(pad)
    ones = [known_sizes(v) for v in (strides, base, dil)]
    if kind not in ("stablehlo.add", "stablehlo.multiply") or shape is None or win is None:
        raise Unsupported("a dynamic_reduce_window other than a running sum or product")
    if pads is None or len(pads) != 2 * r or any(o is None or set(o) != {1} for o in ones):
        raise Unsupported("a dynamic_reduce_window with strides, dilations or unknown padding")
    rows = [(pads[2 * i], pads[2 * i + 1]) for i in range(r)]
    axes = [i for i in range(r) if win[i] != 1 or rows[i] != (0, 0)]
    n = shape[axes[0]] if len(axes) == 1 else None
    span = n is not None and win[axes[0]] == n
    if not span or sorted(map(str, rows[axes[0]])) != sorted(["0", str(symexpr.sub(n, 1))]):
        raise Unsupported(
            f"a dynamic_reduce_window other than a running sum or product (window {win} "
            f"over {shape})"
        )
    ident = 0.0 if kind == "stablehlo.add" else 1.0
    p = init.producer
    while p is not None and p.op == "identity":
        p = p.inputs[0].producer
    if p is None or p.op != "constant" or float(p.attrs["value"].reshape(-1)[0]) != ident:
        raise Unsupported("a running sum / product from a start other than 0 / 1")
    op = "cumsum" if kind == "stablehlo.add" else "cumprod"
    return ctx.op(op, x, axis=axes[0], reverse=rows[axes[0]][1] != 0)


@converter("stablehlo.reduce_window")
def reduce_window(ctx: Ctx, sop: ShloOp, x, init):
    kind = body_op(sop)
    running = _cumulative(ctx, sop, x, init, kind)
    if running is not None:
        return running
    if kind not in ("stablehlo.maximum", "stablehlo.add"):
        raise Unsupported(f"reduce_window applying {kind or 'a body msc does not recognize'}")
    r = x.type.rank
    win = sop.attr("window_dimensions")
    strides = sop.attr("window_strides") or [1] * r
    if any(v != 1 for v in (sop.attr("base_dilations") or [1] * r)):
        raise Unsupported("base_dilations")
    dil = sop.attr("window_dilations") or [1] * r
    pad = sop.attr("padding")
    pad = np.zeros((r, 2), np.int64) if pad is None else np.asarray(pad).reshape(r, 2)
    spatial = [i for i in range(r) if win[i] != 1 or strides[i] != 1 or pad[i].any() or dil[i] != 1]
    other = [i for i in range(r) if i not in spatial]
    if len(other) != 2 or not spatial:
        raise Unsupported(f"a window over axes {spatial} of a rank-{r} tensor")
    perm = other + spatial
    xc = _perm_or_none(ctx, x, perm)
    kernel = [win[i] for i in spatial]
    stride = [strides[i] for i in spatial]
    pads = [int(pad[i, 0]) for i in spatial] + [int(pad[i, 1]) for i in spatial]
    if kind == "stablehlo.maximum":
        y = ctx.op(
            "max_pool",
            xc,
            kernel=kernel,
            stride=stride,
            padding=pads,
            dilation=[dil[i] for i in spatial],
        )
        y = ctx.op("maximum", y, init)
    else:
        if any(dil[i] != 1 for i in spatial):
            raise Unsupported("a dilated sum window")
        y = ctx.op(
            "avg_pool",
            xc,
            kernel=kernel,
            stride=stride,
            padding=pads,
            count_include_pad=True,
        )
        y = ctx.op("mul", y, ctx.const(float(np.prod(kernel)), y.dtype))
        y = ctx.op("add", y, init)
    inv = [perm.index(i) for i in range(r)]
    return _perm_or_none(ctx, y, inv)
