"""JAX emitters of reductions: reduce_*, argmax/argmin, cumsum/cumprod, var, sort / argsort /
topk."""

from __future__ import annotations

from codegen.jax.core import JaxCodegen, need
from codegen.jax.registry import computes, emitter
from msc.ir import DType

REDUCE = {
    "reduce_sum": "jnp.sum",
    "reduce_mean": "jnp.mean",
    "reduce_max": "jnp.max",
    "reduce_min": "jnp.min",
    "reduce_prod": "jnp.prod",
    "reduce_all": "jnp.all",
    "reduce_any": "jnp.any",
}


def _axes(node) -> str:
    ax = node.attrs.get("axes")
    if ax is None:
        return "None"
    if not ax:
        return "None" if not node.attrs.get("noop_with_empty_axes") else "()"
    return repr(tuple(ax))


def _reduce(fn: str):
    def emit(e: JaxCodegen, node, x, axes=None):
        if axes is not None:
            need(node, "axes")
        if node.attrs.get("noop_with_empty_axes") and node.attrs.get("axes") == []:
            return x
        return f"{fn}({x}, axis={_axes(node)}, keepdims={bool(node.attrs['keepdims'])!r})"

    return emit


for _op, _fn in REDUCE.items():
    emitter(_op)(_reduce(_fn))


@emitter("reduce_sum_square")
def reduce_sum_square(e: JaxCodegen, node, x, axes=None):
    need(node, "axes")
    return f"jnp.sum({x} * {x}, axis={_axes(node)}, keepdims={bool(node.attrs['keepdims'])!r})"


@emitter("reduce_log_sum_exp")
def reduce_log_sum_exp(e: JaxCodegen, node, x, axes=None):
    need(node, "axes")
    keep = bool(node.attrs["keepdims"])
    return f"jax.nn.logsumexp({x}, axis={_axes(node)}, keepdims={keep!r})"


@emitter("var")
def var(e: JaxCodegen, node, x):
    ax = node.attrs.get("axes")
    axis = "None" if ax is None else repr(tuple(ax))
    keep = bool(node.attrs["keepdims"])
    return f"jnp.var({x}, axis={axis}, ddof={node.attrs['correction']!r}, keepdims={keep!r})"


def _arg(fn: str):
    def emit(e: JaxCodegen, node, x):
        if node.attrs.get("select_last_index"):
            from msc.errors import Unsupported

            raise Unsupported("select_last_index")
        ax = node.attrs.get("axis")
        keep = bool(node.attrs["keepdims"])
        return f"{fn}({x}, axis={ax!r}, keepdims={keep!r}).astype(jnp.int64)"

    return emit


emitter("argmax")(_arg("jnp.argmax"))
emitter("argmin")(_arg("jnp.argmin"))


def _cum(fn: str, lax_fn: str):
    def emit(e: JaxCodegen, node, x, axis=None):
        need(node, "axis")
        if node.attrs.get("exclusive"):
            from msc.errors import Unsupported

            raise Unsupported("an exclusive running sum")
        a = node.attrs["axis"] % node.inputs[0].type.rank
        if node.attrs.get("reverse"):
            return f"{lax_fn}({x}, axis={a}, reverse=True)"
        return f"{fn}({x}, axis={node.attrs['axis']})"

    return emit


emitter("cumsum")(_cum("jnp.cumsum", "lax.cumsum"))
emitter("cumprod")(_cum("jnp.cumprod", "lax.cumprod"))


def _sort_kw(node) -> str:
    a = node.attrs
    return f"axis={a['axis']}, descending={bool(a['descending'])!r}, stable={bool(a['stable'])!r}"


@emitter("sort")
def sort(e: JaxCodegen, node, x):
    return f"jnp.sort({x}, {_sort_kw(node)})", f"jnp.argsort({x}, {_sort_kw(node)})"


@emitter("argsort")
def argsort(e: JaxCodegen, node, x):
    return f"jnp.argsort({x}, {_sort_kw(node)})"


@emitter("topk")
@computes(stable=True)
def topk(e: JaxCodegen, node, x, k=None):
    """``lax.top_k``: the largest along the last axis, ties in index order (a stable topk);
    another axis is moved last and back, the smallest are the largest of ``-x``, and the
    int32 indices are widened where the graph's are int64 (as argmax's)."""
    need(node, "k")
    a = node.attrs
    rank = node.inputs[0].type.rank
    axis = a["axis"] % rank
    wide = node.outputs[1].type.dtype is DType.INT64
    src = x if axis == rank - 1 else f"jnp.moveaxis({x}, {axis}, -1)"
    if not a["largest"]:
        src = f"-{src}"
    call = f"lax.top_k({src}, {int(a['k'])})"
    if axis == rank - 1 and a["largest"] and not wide:
        return call
    values, idx = (e.fresh(f"{o.name}_top", "top") for o in node.outputs)
    e.pre.append(f"{values}, {idx} = {call}")
    if not a["largest"]:
        values = f"-{values}"
    if axis != rank - 1:
        values = f"jnp.moveaxis({values}, -1, {axis})"
        idx = f"jnp.moveaxis({idx}, -1, {axis})"
    if wide:
        idx = f"{idx}.astype(jnp.int64)"
    return values, idx
