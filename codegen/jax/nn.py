"""JAX emitters of network ops: matmul, einsum, linear, gemm, conv (channels first, as the
canonical op), pools, norms, softmax."""

from __future__ import annotations

import numpy as np

from codegen.jax.core import JaxCodegen, _scalar
from codegen.jax.registry import emitter
from msc.errors import Unsupported


@emitter("matmul")
def matmul(e: JaxCodegen, node, a, b):
    return f"{a} @ {b}"


@emitter("einsum")
def einsum(e: JaxCodegen, node, *xs):
    return f"jnp.einsum({node.attrs['equation']!r}, {', '.join(xs)})"


@emitter("linear")
def linear(e: JaxCodegen, node, x, w, b=None):
    y = f"{x} @ {w}.T"
    return y if b is None else f"{y} + {b}"


@emitter("gemm")
def gemm(e: JaxCodegen, node, a, b, c=None):
    at = node.attrs
    a_ = f"{a}.T" if at["trans_a"] else a
    b_ = f"{b}.T" if at["trans_b"] else b
    y = f"({a_} @ {b_})"
    if at["alpha"] != 1.0:
        y = f"{_scalar(at['alpha'])} * {y}"
    if c is not None:
        y = f"{y} + {c}" if at["beta"] == 1.0 else f"{y} + {_scalar(at['beta'])} * {c}"
    return y


def _pads(n: int, padding) -> tuple:
    p = list(padding) or [0] * (2 * n)
    return tuple((p[i], p[n + i]) for i in range(n))


@emitter("conv")
def conv(e: JaxCodegen, node, x, w, b=None):
    at = node.attrs
    n = node.inputs[0].type.rank - 2
    stride = tuple(at["stride"] or [1] * n)
    dil = tuple(at["dilation"] or [1] * n)
    y = (
        f"lax.conv_general_dilated({x}, {w}, {stride!r}, {_pads(n, at['padding'])!r}, "
        f"rhs_dilation={dil!r}, feature_group_count={at['groups']})"
    )
    if b is not None:
        y = f"{y} + {b}.reshape({(-1,) + (1,) * n!r})"
    return y


def _window(node, n):
    at = node.attrs
    if at.get("ceil_mode"):
        raise Unsupported("ceil_mode pooling")
    k = tuple(at["kernel"])
    s = tuple(at["stride"] or k)
    pads = ((0, 0), (0, 0)) + _pads(n, at["padding"])
    return (1, 1) + k, (1, 1) + s, pads


@emitter("max_pool")
def max_pool(e: JaxCodegen, node, x):
    if node.attrs.get("return_indices"):
        raise Unsupported("max_pool with indices")
    n = node.inputs[0].type.rank - 2
    k, s, p = _window(node, n)
    dil = (1, 1) + tuple(node.attrs.get("dilation") or [1] * n)
    return (
        f"lax.reduce_window({x}, -jnp.inf, lax.max, {k!r}, {s!r}, {p!r}, window_dilation={dil!r})"
    )


@emitter("avg_pool")
def avg_pool(e: JaxCodegen, node, x):
    n = node.inputs[0].type.rank - 2
    k, s, p = _window(node, n)
    total = f"lax.reduce_window({x}, 0.0, lax.add, {k!r}, {s!r}, {p!r})"
    div = node.attrs.get("divisor_override")
    if div:
        return f"{total} / {float(div)!r}"
    if node.attrs.get("count_include_pad", True) or not any(v for pr in p for v in pr):
        return f"{total} / {float(np.prod(k))!r}"
    count = f"lax.reduce_window(jnp.ones_like({x}), 0.0, lax.add, {k!r}, {s!r}, {p!r})"
    return f"{total} / {count}"


@emitter("adaptive_avg_pool")
def adaptive_avg_pool(e: JaxCodegen, node, x):
    shape = node.inputs[0].type.shape
    out = node.attrs["output_size"]
    n = len(shape) - 2
    if all(o == 1 for o in out):
        return f"jnp.mean({x}, axis={tuple(range(2, 2 + n))!r}, keepdims=True)"
    raise Unsupported("adaptive pooling to sizes above 1")


@emitter("batch_norm")
def batch_norm(e: JaxCodegen, node, x, w, b, mean, var):
    # x * scale + shift of the statistics (torch's CPU kernel computes it so): JAX re-exports
    # it as a MUL and an ADD of constants, which a diff reads as the batch_norm (folded into
    # the conv before it, as the source's is)
    n = node.inputs[0].type.rank
    r = f".reshape({(-1,) + (1,) * (n - 2)!r})"
    scale = e.fresh(f"{node.outputs[0].name}_scale", "scale")
    rsqrt = f"lax.rsqrt({var} + {_scalar(node.attrs['eps'])})"
    e.pre.append(f"{scale} = {rsqrt if w is None else f'{w} * {rsqrt}'}")
    shift = e.fresh(f"{node.outputs[0].name}_shift", "shift")
    e.pre.append(f"{shift} = {'-' if b is None else f'{b} -'} {mean} * {scale}")
    return f"{x} * {scale}{r} + {shift}{r}"


@emitter("layer_norm")
def layer_norm(e: JaxCodegen, node, x, w=None, b=None):
    rank = node.inputs[0].type.rank
    axis = node.attrs["axis"] % rank
    axes = tuple(range(axis, rank))
    eps = _scalar(node.attrs["eps"])
    # as msc.ops.decompose spells it (the mean once, a two-pass variance): the frontend's
    # fusion reads a re-export of this code as layer_norm again
    mean = e.fresh(f"{node.outputs[0].name}_mean", "mean")
    e.pre.append(f"{mean} = jnp.mean({x}, axis={axes!r}, keepdims=True)")
    var = f"jnp.mean(jnp.square({x} - {mean}), axis={axes!r}, keepdims=True)"
    y = f"({x} - {mean}) / jnp.sqrt({var} + {eps})"
    if w is not None:
        y = f"{y} * {w}"
    if b is not None:
        y = f"{y} + {b}"
    return y


@emitter("rms_norm")
def rms_norm(e: JaxCodegen, node, x, w=None):
    rank = node.inputs[0].type.rank
    axes = tuple(range(node.attrs["axis"] % rank, rank))
    eps = _scalar(node.attrs["eps"])
    y = f"{x} * lax.rsqrt(jnp.mean({x} * {x}, axis={axes!r}, keepdims=True) + {eps})"
    return y if w is None else f"{y} * {w}"


@emitter("softmax")
def softmax(e: JaxCodegen, node, x):
    return f"jax.nn.softmax({x}, axis={node.attrs['axis']})"


@emitter("log_softmax")
def log_softmax(e: JaxCodegen, node, x):
    return f"jax.nn.log_softmax({x}, axis={node.attrs['axis']})"
