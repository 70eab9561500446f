"""Emitters for the later op families (tensor, vision, transformer, signal): the ones torch
computes with one call, and the declared gaps with their reasons.

# NOTE: an op is emitted here only where the torch call computes the canonical semantics
# (msc/ops docs); the others are declared ``unsupported`` with the reason, so generate() lists
# them all at once and docs/ops.md shows them.
"""

from __future__ import annotations

import ast

from codegen.torch.code import call, expr
from codegen.torch.core import Arg, NodeEmit
from codegen.torch.emitters.common import fn_nd
from codegen.torch.registry import emitter
from msc.errors import ConversionError


@emitter("swiglu")
def swiglu(e: NodeEmit, a: Arg, b: Arg, *, alpha: float) -> ast.expr:
    if alpha == 1.0:
        return expr("F.silu(a) * b", a=a, b=b)
    return expr("a * torch.sigmoid(a * s) * b", a=a, b=b, s=alpha)


@emitter("bitcast")
def bitcast(e: NodeEmit, x: Arg, *, to) -> ast.expr:
    return expr("x.view(d)", x=x, d=to)


@emitter("det")
def det(e: NodeEmit, x: Arg) -> ast.expr:
    return call("torch.linalg.det", x)


@emitter("range")
def range_(e: NodeEmit, start: Arg, limit: Arg, delta: Arg) -> ast.expr:
    def item(a: Arg):
        return a.s if a.is_scalar else expr("a.item()", a=a)

    return call("torch.arange", item(start), item(limit), item(delta), dtype=start.dtype)


@emitter("affine_grid")
def affine_grid(e: NodeEmit, theta: Arg, *, size, align_corners: bool) -> ast.expr:
    return call("F.affine_grid", theta, list(size), align_corners=align_corners)


@emitter("grid_sample")
def grid_sample(e, x, grid, *, mode: str, padding_mode: str, align_corners: bool) -> ast.expr:
    tmode = {"linear": "bilinear", "nearest": "nearest", "cubic": "bicubic"}[mode]
    return call(
        "F.grid_sample", x, grid, mode=tmode, padding_mode=padding_mode, align_corners=align_corners
    )


@emitter("max_unpool")
def max_unpool(e, x, indices, *, kernel, stride, padding, output_size) -> ast.expr:
    n = len(kernel)
    fn = fn_nd("F.max_unpool", n)
    if fn is None or (padding and tuple(padding[:n]) != tuple(padding[n:])):
        raise ConversionError("max_unpool: torch takes 1-3 spatial dims and symmetric padding")
    kw = {"stride": tuple(stride)} if stride else {}
    if padding and any(padding):
        kw["padding"] = tuple(padding[:n])
    if output_size is not None:
        kw["output_size"] = tuple(output_size)
    return call(fn, x, indices, tuple(kernel), **kw)


@emitter("col2im")
def col2im(e, x, *, image_shape, block_shape, dilation, padding, stride) -> ast.expr:
    n = len(block_shape)
    if n != 2 or (padding and tuple(padding[:n]) != tuple(padding[n:])):
        raise ConversionError("col2im: torch's fold takes 2-d blocks and symmetric padding")
    kw = {}
    if dilation:
        kw["dilation"] = tuple(dilation)
    if padding:
        kw["padding"] = tuple(padding[:n])
    if stride:
        kw["stride"] = tuple(stride)
    return call("F.fold", x, tuple(image_shape), tuple(block_shape), **kw)
