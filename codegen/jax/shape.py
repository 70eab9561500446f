"""JAX emitters of shape ops: reshape, transpose, expand, slice (static and at run-time
starts), concat, pad, split, squeeze, flatten, gather, index, index_put, gather_elements,
arange, tile, flip."""

from __future__ import annotations

from codegen.jax.core import Held, JaxCodegen, _scalar, dtype_expr, need
from codegen.jax.registry import emitter


def _as_rank(e: JaxCodegen, node) -> Held:
    """A size reshaped (squeeze, unsqueeze, reshape): its elements, as a 0-d or 1-d value."""
    v = e.size(node.inputs[0])
    if node.outputs[0].type.rank == 0:
        return Held(v[0] if isinstance(v, list) else v)  # type: ignore[arg-type]
    return Held(v if isinstance(v, list) else [v])  # type: ignore[list-item]


@emitter("reshape")
def reshape(e: JaxCodegen, node, x, shape=None):
    if e.on_sizes(node):
        return _as_rank(e, node)
    return f"jnp.reshape({x}, {e.shape_of(node.outputs[0], unknown='-1')})"


@emitter("flatten")
def flatten(e: JaxCodegen, node, x):
    return f"jnp.reshape({x}, {e.shape_of(node.outputs[0], unknown='-1')})"


@emitter("transpose")
def transpose(e: JaxCodegen, node, x):
    return f"jnp.transpose({x}, {tuple(node.attrs['perm'])!r})"


@emitter("expand")
def expand(e: JaxCodegen, node, x, shape=None):
    return f"jnp.broadcast_to({x}, {e.shape_of(node.outputs[0])})"


@emitter("squeeze")
def squeeze(e: JaxCodegen, node, x, axes=None):
    if e.on_sizes(node):
        return _as_rank(e, node)
    if axes is not None:
        need(node, "axes")
    ax = node.attrs.get("axes")
    return f"jnp.squeeze({x})" if ax is None else f"jnp.squeeze({x}, {tuple(ax)!r})"


@emitter("unsqueeze")
def unsqueeze(e: JaxCodegen, node, x, axes=None):
    if e.on_sizes(node):
        return _as_rank(e, node)
    need(node, "axes")
    return f"jnp.expand_dims({x}, {tuple(node.attrs['axes'])!r})"


def _nonneg(v) -> bool:
    """``v`` is known to hold no negative number (a clamp from 0, sums and reshapes of such)."""
    p = v.producer
    if p is None:
        return False
    if p.op == "constant":
        return bool((p.attrs["value"] >= 0).all())
    if p.op == "clamp":
        lo = p.inputs[1] if len(p.inputs) > 1 else None
        return lo is not None and _nonneg(lo)
    if p.op in ("reshape", "concat", "add", "cast", "squeeze", "unsqueeze"):
        return all(i is not None and _nonneg(i) for i in p.inputs)
    return False


def _dynamic_slice(e: JaxCodegen, node, x, starts):
    """A slice at run-time starts whose result has a static size: ``lax.dynamic_slice`` (a
    negative start counts from the end, as in a Python slice)."""
    from msc.errors import Unsupported

    out = node.outputs[0].type.shape
    shape = node.inputs[0].type.shape
    axes = node.attrs.get("axes")
    if node.attrs.get("steps") or len(node.inputs) > 3 and any(node.inputs[3:]):
        raise Unsupported("a run-time slice with steps or run-time axes")
    if axes is None or not all(isinstance(d, int) for d in out):
        raise Unsupported("a run-time slice of a size JAX does not know statically")
    rank = len(out)
    axes = [a % rank for a in axes]
    at = []
    for a in range(rank):
        if a not in axes:
            at.append("0")
            continue
        s = f"{starts}[{axes.index(a)}]"
        if not _nonneg(node.inputs[1]):
            s = f"jnp.where({s} < 0, {s} + {shape[a]}, {s})"
        at.append(s)
    return f"lax.dynamic_slice({x}, ({', '.join(at)},), {tuple(out)!r})"


def _python_slice(e: JaxCodegen, node, x) -> str | None:
    """A slice at run-time starts and ends that are sizes (``w[:seq_len]``): a subscript."""
    ins = node.inputs
    starts, ends = e.size(ins[1]), e.size(ins[2]) if len(ins) > 2 else None
    axes = node.attrs.get("axes")
    steps = e.size(ins[4]) if len(ins) > 4 and ins[4] is not None else ["1"] * len(axes or ())
    if len(ins) > 3 and ins[3] is not None or axes is None or starts is None or ends is None:
        return None
    starts, ends = (v if isinstance(v, list) else [v] for v in (starts, ends))
    if steps is None or not len(starts) == len(ends) == len(axes) == len(steps):
        return None
    rank = node.inputs[0].type.rank
    parts = [":"] * rank
    for a, s, t, st in zip(axes, starts, ends, steps):
        t = "" if t.lstrip("-").isdigit() and abs(int(t)) >= 2**62 else t
        parts[a % rank] = f"{'' if s == '0' else s}:{t}" + ("" if st == "1" else f":{st}")
    while parts[-1] == ":":
        parts.pop()
    return f"{x}[{', '.join(parts)}]"


@emitter("slice")
def slice_(e: JaxCodegen, node, x, *rest):
    if e.on_sizes(node) and node.attrs.get("starts") is not None:
        v, a = e.size(node.inputs[0]), node.attrs
        st = (a.get("steps") or [1])[0]
        return Held(v[slice(a["starts"][0], a["ends"][0], st)])  # type: ignore[index]
    if node.attrs.get("starts") is None and rest and rest[0] is not None:
        sub = _python_slice(e, node, x)
        if sub is not None:
            return sub
        return _dynamic_slice(e, node, x, rest[0])
    for k in ("starts", "ends"):
        need(node, k)
    starts, ends = node.attrs["starts"], node.attrs["ends"]
    rank = node.inputs[0].type.rank
    axes = node.attrs.get("axes") or list(range(len(starts)))
    steps = node.attrs.get("steps") or [1] * len(starts)
    parts = [":"] * rank
    big = 2**62
    for a, s, t, st in zip(axes, starts, ends, steps):
        a = a % rank
        s_ = "" if (s == 0 and st > 0) else str(s)
        t_ = "" if abs(t) >= big else str(t)
        parts[a] = f"{s_}:{t_}" + ("" if st == 1 else f":{st}")
    while parts and parts[-1] == ":":
        parts.pop()
    return f"{x}[{', '.join(parts) or '...'}]" if parts else x


@emitter("concat")
def concat(e: JaxCodegen, node, *xs):
    if e.on_sizes(node):  # a shape put together from sizes: one tuple
        return Held([d for v in node.inputs for d in e.size(v)])  # type: ignore[union-attr]
    return f"jnp.concatenate([{', '.join(xs)}], axis={node.attrs['axis']})"


@emitter("pad")
def pad(e: JaxCodegen, node, x, pads=None, value=None):
    need(node, "pads")
    p = node.attrs["pads"]
    n = len(p) // 2
    widths = tuple((p[i], p[n + i]) for i in range(n))
    if any(v < 0 for v in p):
        # a crop: lax.pad takes negative edges
        cfg = tuple((lo, hi, 0) for lo, hi in widths)
        fill = value if value is not None else _scalar(node.attrs.get("value", 0.0))
        return f"lax.pad({x}, jnp.asarray({fill}, {x}.dtype), {cfg!r})"
    mode = node.attrs.get("mode", "constant")
    if mode == "constant":
        fill = value if value is not None else _scalar(node.attrs.get("value", 0.0))
        return f"jnp.pad({x}, {widths!r}, constant_values={fill})"
    jmode = {"reflect": "reflect", "edge": "edge", "wrap": "wrap"}[mode]
    return f"jnp.pad({x}, {widths!r}, mode={jmode!r})"


@emitter("split")
def split(e: JaxCodegen, node, x, sizes=None):
    axis = node.attrs["axis"]
    dims = [o.type.shape[axis] for o in node.outputs]
    if not all(isinstance(d, int) for d in dims):
        from msc.errors import Unsupported

        raise Unsupported("a split into pieces of symbolic size")
    cuts, acc = [], 0
    for d in dims[:-1]:
        acc += d
        cuts.append(acc)
    return f"jnp.split({x}, {cuts!r}, axis={axis})"


@emitter("flip")
def flip(e: JaxCodegen, node, x):
    return f"jnp.flip({x}, {tuple(node.attrs['axes'])!r})"


@emitter("tile")
def tile(e: JaxCodegen, node, x, repeats=None):
    need(node, "repeats")
    return f"jnp.tile({x}, {tuple(node.attrs['repeats'])!r})"


@emitter("gather")
def gather(e: JaxCodegen, node, x, indices):
    v, i = e.size(node.inputs[0]), e.size(node.inputs[1])
    if e.on_sizes(node) and isinstance(v, list) and node.attrs["axis"] in (0, -1):
        return Held(v[int(i)] if isinstance(i, str) else [v[int(k)] for k in i])  # type: ignore[index]
    return f"jnp.take({x}, {indices}, axis={node.attrs['axis']})"


@emitter("embedding")
def embedding(e: JaxCodegen, node, weight, indices):
    # the source refuses an index out of [0, rows): "clip" (a bare gather) agrees on every one
    # it takes, and re-exports as the gather alone (no wrap or fill around it)
    return f'jnp.take({weight}, {indices}, axis=0, mode="clip")'


@emitter("arange")
def arange(e: JaxCodegen, node):
    a = node.attrs
    dt = dtype_expr(a["dtype"])
    start, end, step = a["start"], a["end"], a["step"]
    if a["dtype"].is_floating:
        return f"jnp.arange({_scalar(start)}, {_scalar(end)}, {_scalar(step)}, dtype={dt})"
    return f"jnp.arange({int(start)}, {int(end)}, {int(step)}, dtype={dt})"


@emitter("full")
def full(e: JaxCodegen, node, shape_in=None):
    a = node.attrs
    shape = e.shape_of(node.outputs[0])
    return f"jnp.full({shape}, {_scalar(a['value'])}, dtype={dtype_expr(a['dtype'])})"


@emitter("full_like")
def full_like(e: JaxCodegen, node, x):
    dt = node.attrs.get("dtype")
    kw = "" if dt is None else f", dtype={dtype_expr(dt)}"
    return f"jnp.full_like({x}, {_scalar(node.attrs['value'])}{kw})"


@emitter("trilu")
def trilu(e: JaxCodegen, node, x, k=None):
    if k is not None:
        need(node, "k")
    fn = "jnp.triu" if node.attrs["upper"] else "jnp.tril"
    return f"{fn}({x}, {int(node.attrs.get('k') or 0)})"


@emitter("shape")
def shape(e: JaxCodegen, node, x):
    s, t = node.attrs.get("start", 0), node.attrs.get("end")
    dims = node.inputs[0].type.shape
    if dims is None:
        return f"jnp.asarray({x}.shape[{s}:{'' if t is None else t}], dtype=jnp.int64)"
    # Python ints under jax.jit: a static dim as its literal, a symbol by its name
    at = range(len(dims))[s:t]
    return Held([e.dim(dims[i]) or f"{x}.shape[{i}]" for i in at])


def _at(node, indices: list, axes_of: list[int]) -> str:
    """The subscript ``:, i, j`` putting each index tensor at its axis."""
    rank = node.inputs[0].type.rank
    at = {a % rank: i for a, i in zip(axes_of, indices)}
    return ", ".join(at.get(a, ":") for a in range(max(at) + 1))


@emitter("index")
def index(e: JaxCodegen, node, x, *indices):
    return f"{x}[{_at(node, list(indices), node.attrs['axes'])}]"


@emitter("index_put")
def index_put(e: JaxCodegen, node, x, values, *indices):
    how = "add" if node.attrs["accumulate"] else "set"
    if node.inputs[0].producer is None and node.inputs[0].name not in e.graph.weights:
        x = f"jnp.asarray({x})"  # an input may come as a numpy array, which has no .at
    return f"{x}.at[{_at(node, list(indices), node.attrs['axes'])}].{how}({values})"


def _sort_order(node):
    """The sort / argsort node whose order ``node`` (a gather_elements) reorders its ``x``
    by: ascending along the same axis, ``x`` shaped as the key. None otherwise."""
    x, idx = node.inputs
    p = idx.producer
    if p is None or p.op not in ("sort", "argsort") or idx is not p.outputs[-1]:
        return None
    key, a = p.inputs[0], p.attrs
    if a["descending"] or x.type.shape is None or x.type.shape != key.type.shape:
        return None
    rank = len(x.type.shape)
    return p if a["axis"] % rank == node.attrs["axis"] % rank else None


@emitter("gather_elements")
def gather_elements(e: JaxCodegen, node, x, indices):
    p = _sort_order(node)
    if p is not None:  # x sorted along with the key (lax.sort of both; the order unwritten)
        axis = p.attrs["axis"] % node.inputs[0].type.rank
        stable = bool(p.attrs["stable"])
        key = e.ref(p.inputs[0])
        return f"lax.sort(({key}, {x}), dimension={axis}, is_stable={stable!r}, num_keys=1)[1]"
    # indices the source does not count from the end (torch.gather's) are not wrapped
    wrap = "" if node.attrs.get("negative_indices") else ", wrap_negative_indices=False"
    return f"jnp.take_along_axis({x}, {indices}, axis={node.attrs['axis']}{wrap})"
