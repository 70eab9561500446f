"""Keras emitters of shape ops: transpose (``layers.Permute`` when the batch axis stays),
reshape / flatten (``layers.Reshape`` / ``layers.Flatten``), concat, pad."""

from __future__ import annotations

from codegen.keras.model import Emit
from codegen.keras.registry import emitter
from msc.errors import Unsupported
from msc.ir.graph import Value
from msc.ir.symexpr import add, product


@emitter("transpose")
def transpose(e: Emit, node):
    perm = [int(p) for p in node.attrs["perm"]]
    if perm == list(range(len(perm))):  # nothing moves (a layout change's leftover)
        return e.arg(0)
    integer = e.type(0).dtype.is_integer  # a Permute layer types its output int32 when built
    if perm and perm[0] == 0 and len(perm) > 1 and not integer:
        return f"{e.layer('Permute', tuple(perm[1:]))}({e.arg(0)})"
    return f"ops.transpose({e.arg(0)}, {tuple(perm)!r})"


def _batch_kept(e: Emit, shape: list) -> bool:
    t = e.type(0)
    b = t.shape[0] if t.shape else None
    if not shape:
        return False
    out = e.node.outputs[0].type.shape
    if shape[0] == -1:  # -1 keeps the batch only when the output's first dim is the input's
        return out is not None and len(out) > 0 and out[0] == b
    return isinstance(b, int) and shape[0] == b


@emitter("reshape")
def reshape(e: Emit, node):
    out = node.outputs[0].type.shape
    shape = node.attrs.get("shape")
    if shape is None or not all(isinstance(d, int) for d in out or ()):
        if out is None:
            raise Unsupported("a shape computed at run time")
        if list(out) == list(e.type(0).shape or ()):  # the same shape: nothing to do
            return e.arg(0)
        if sum(not isinstance(d, int) for d in out) > 1:  # sizes read when the model runs
            return e.sized("reshape", list(out), e.arg(0))
        shape = [d if isinstance(d, int) else -1 for d in out]
    shape = [int(d) for d in shape]
    if 0 in shape:  # ONNX's "copy this dim"
        src = e.type(0).shape
        shape = [src[i] if d == 0 else d for i, d in enumerate(shape)]
        if not all(isinstance(d, int) for d in shape[1:]):
            raise Unsupported("a 0 (copy) dim of a symbolic size")
    if _batch_kept(e, shape) and -1 not in shape[1:]:
        return f"{e.layer('Reshape', tuple(shape[1:]))}({e.arg(0)})"
    return f"ops.reshape({e.arg(0)}, {tuple(shape)!r})"


@emitter("flatten")
def flatten(e: Emit, node):
    r = e.type(0).rank
    start = int(node.attrs.get("start_axis", 0)) % max(r, 1)
    end = int(node.attrs.get("end_axis", -1)) % max(r, 1)
    if start == 1 and end == r - 1:
        return f"{e.layer('Flatten')}({e.arg(0)})"
    out = node.outputs[0].type.shape
    if out is None or not all(isinstance(d, int) for d in out[1:]):
        raise Unsupported("flattening dims of symbolic size")
    return f"ops.reshape({e.arg(0)}, {(-1, *out[1:])!r})"


@emitter("concat")
def concat(e: Emit, node):
    xs = ", ".join(e.arg(i) for i in range(len(node.inputs)))
    if not node.outputs[0].type.dtype.is_floating:  # the layer types it with its float policy
        return f"ops.concatenate([{xs}], axis={int(node.attrs['axis'])})"
    return f"{e.layer('Concatenate', axis=int(node.attrs['axis']))}([{xs}])"


@emitter("pad")
def pad(e: Emit, node):
    a = node.attrs
    if a.get("pads") is None or len(node.inputs) > 1 and node.inputs[1] is not None:
        raise Unsupported("pads computed at run time")
    mode = a.get("mode", "constant")
    pads = [int(p) for p in a["pads"]]
    n = len(pads) // 2
    width = [[pads[i], pads[n + i]] for i in range(n)]
    if mode in ("reflect", "edge", "wrap"):  # numpy's names, as keras.ops.pad takes them
        if min(pads) < 0:
            raise Unsupported(f"a crop with mode={mode!r}")
        return f"ops.pad({e.arg(0)}, {width!r}, mode={mode!r})"
    if mode != "constant":
        raise Unsupported(f"mode={mode!r}")
    if 3 <= n <= 5 and float(a.get("value", 0.0)) == 0.0 and min(pads) >= 0:
        # zeros around the spatial dims only: Keras' ZeroPadding layer
        for fmt, outer in (("channels_last", (0, n - 1)), ("channels_first", (0, 1))):
            if all(width[i] == [0, 0] for i in outer):
                pairs = tuple(tuple(w) for i, w in enumerate(width) if i not in outer)
                pad = pairs[0] if n == 3 else pairs
                layer = e.layer(f"ZeroPadding{n - 2}D", pad, data_format=fmt)
                return f"{layer}({e.arg(0)})"
    return f"ops.pad({e.arg(0)}, {width!r}, constant_values={float(a.get('value', 0.0))!r})"


@emitter("split")
def split(e: Emit, node):
    a = node.attrs
    sizes = a.get("sizes")
    if sizes is None or (len(node.inputs) > 1 and node.inputs[1] is not None):
        raise Unsupported("sizes computed at run time")
    cuts, total = [], 0
    for s in list(sizes)[:-1]:
        total += int(s)
        cuts.append(total)
    return f"ops.split({e.arg(0)}, {cuts!r}, axis={int(a['axis'])!r})"


END = 1 << 62  # an end at or past this is "to the end" (torch writes 2**63 - 1)


def _python_slices(starts, ends, axes, shape) -> list[str]:
    """The slice as Python's ``x[:, 1:]`` items (up to the last axis it cuts)."""
    r = len(shape)
    items = [":"] * r
    for st, en, ax in zip(starts, ends, axes):
        st, en, ax = int(st), int(en), int(ax) % r
        lo = "" if st == 0 else str(st)
        hi = "" if en >= END else str(en)
        items[ax] = f"{lo}:{hi}"
    while items and items[-1] == ":":
        items.pop()
    return items or [":"]


def _sized_slice(e: Emit, node):
    """A slice whose bounds are sizes (``x[:, :seq_len]``): its starts constants, steps 1, its
    sizes the output's dims, read when the model runs."""
    a, r = node.attrs, e.type(0).rank
    starts = e.const(1) if a.get("starts") is None else a["starts"]
    axes = a.get("axes")
    if axes is None and len(node.inputs) > 3 and node.inputs[3] is not None:
        axes = e.const(3)
    steps = a.get("steps")
    if steps is None and len(node.inputs) > 4 and node.inputs[4] is not None:
        steps = e.const(4)
    if starts is None or (len(node.inputs) > 3 and node.inputs[3] is not None and axes is None):
        raise Unsupported("bounds computed at run time")
    axes = [int(x) % r for x in (range(len(starts)) if axes is None else axes)]
    if any(int(x) != 1 for x in (steps if steps is not None else [])) or any(
        int(x) < 0 for x in starts
    ):
        raise Unsupported("a slice of symbolic bounds with a step or a start from the end")
    begin = [0] * r
    for st, ax in zip(starts, axes):
        begin[ax] = int(st)
    return e.sized("slice", [*begin, *node.outputs[0].type.shape], e.arg(0))


@emitter("slice")
def slice_(e: Emit, node):
    a = node.attrs
    if any(v is not None for v in node.inputs[1:]):
        return _sized_slice(e, node)
    shape = e.type(0).shape
    r = len(shape)
    starts, ends = list(a["starts"]), list(a["ends"])
    axes = list(a.get("axes") or range(len(starts)))
    steps = list(a.get("steps") or [1] * len(starts))
    if any(int(s) != 1 for s in steps):
        raise Unsupported("steps other than 1")
    begin, size = [0] * r, [-1] * r
    out = node.outputs[0].type.shape
    static = all(isinstance(d, int) for d in shape)
    if not static and len(axes) == 1 and int(starts[0]) >= 0 and isinstance(out[axes[0] % r], int):
        ax, st = int(axes[0]) % r, int(starts[0])  # a known number of items: the ones it keeps
        return f"ops.take({e.arg(0)}, np.arange({st}, {st + out[ax]}), axis={ax})"
    if any(not isinstance(shape[int(ax) % r], int) for ax in axes):  # a symbolic dim cut
        # Python's slicing: keras.ops' GetItem reads the sizes when the model runs
        return f"{e.arg(0)}[{', '.join(_python_slices(starts, ends, axes, shape))}]"
    for st, en, ax in zip(starts, ends, axes):
        ax = int(ax) % r
        dim = shape[ax]
        st, en = int(st), int(en)
        st = max(0, min(dim, st + dim if st < 0 else st))
        en = max(0, min(dim, en + dim if en < 0 else en))
        begin[ax], size[ax] = st, max(en - st, 0)
    cut = [ax for ax in range(r) if size[ax] != -1]
    if 3 <= r <= 5 and cut and all(1 <= ax <= r - 2 for ax in cut):
        # spatial dims of a channels_last tensor: Keras' Cropping layer
        pairs = tuple(
            (begin[ax], shape[ax] - begin[ax] - size[ax]) if size[ax] != -1 else (0, 0)
            for ax in range(1, r - 1)
        )
        crop = pairs[0] if r == 3 else pairs
        return f"{e.layer(f'Cropping{r - 2}D', crop)}({e.arg(0)})"
    full = [shape[ax] if size[ax] == -1 else size[ax] for ax in range(r)]
    if not all(isinstance(d, int) for d in full):
        if len(cut) != 1:
            raise Unsupported("a slice of several axes of a tensor with symbolic dims")
        ax = cut[0]  # one axis: the indices it keeps (keras.ops.slice needs every size)
        idx = f"np.arange({begin[ax]}, {begin[ax] + size[ax]})"
        return f"ops.take({e.arg(0)}, {idx}, axis={ax})"
    return f"ops.slice({e.arg(0)}, {tuple(begin)!r}, {tuple(full)!r})"


@emitter("squeeze")
def squeeze(e: Emit, node):
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        raise Unsupported("axes computed at run time")
    axes = node.attrs.get("axes")
    shape = e.type(0).shape
    if axes is not None and shape is not None:
        r = len(shape)
        axes = sorted(int(a) % r for a in axes)
        if any(shape[a] != 1 for a in axes):  # a size-1 dim Keras cannot see (x[:, :1])
            items = ["0" if a in axes else ":" for a in range(max(axes) + 1)]
            return f"{e.arg(0)}[{', '.join(items)}]"  # indexing drops it where Keras can
    axis = "None" if axes is None else repr(tuple(axes))
    return f"ops.squeeze({e.arg(0)}, axis={axis})"


@emitter("unsqueeze")
def unsqueeze(e: Emit, node):
    if len(node.inputs) > 1 and node.inputs[1] is not None or node.attrs.get("axes") is None:
        raise Unsupported("axes computed at run time")
    axes = tuple(int(a) for a in node.attrs["axes"])
    return f"ops.expand_dims({e.arg(0)}, {axes[0] if len(axes) == 1 else axes!r})"


@emitter("flip")
def flip(e: Emit, node):
    axes = tuple(int(a) for a in node.attrs["axes"])
    return f"ops.flip({e.arg(0)}, axis={axes if len(axes) > 1 else axes[0]!r})"


@emitter("expand")
def expand(e: Emit, node):
    """Each axis that grows from 1 as ``ops.repeat`` (a symbolic batch stays as it is)."""
    src = list(e.type(0).shape)
    out = list(node.outputs[0].type.shape)
    if len(src) != len(out) or any(
        a != b and not isinstance(b, int) for a, b in zip(src, out)
    ):  # to sizes read when the model runs
        return e.sized("broadcast_to", out, e.arg(0))
    y = e.arg(0)
    for ax, (a, b) in enumerate(zip(src, out)):
        if a == b:
            continue
        if a != 1 or not isinstance(b, int):
            raise Unsupported(f"axis {ax} from {a} to {b}")
        y = f"ops.repeat({y}, {b}, axis={ax})"
    return y


def _number(v: float, dt) -> str:
    return repr(bool(v)) if dt.name == "BOOL" else repr(v if dt.is_floating else int(v))


@emitter("arange")
def arange(e: Emit, node):
    from codegen.keras.model import dtype_name

    a, dt = node.attrs, node.attrs["dtype"]
    start, end, step = (_number(a[k], dt) for k in ("start", "end", "step"))
    return f"ops.arange({start}, {end}, {step}, dtype={dtype_name(dt)!r})"


@emitter("full")
def full(e: Emit, node):
    from codegen.keras.model import dtype_name

    a = node.attrs
    if a.get("shape") is None:
        raise Unsupported("a shape computed at run time")
    shape = tuple(int(d) for d in a["shape"])
    value, dt = _number(a["value"], a["dtype"]), dtype_name(a["dtype"])
    return f"ops.full({shape!r}, {value}, dtype={dt!r})"


@emitter("full_like")
def full_like(e: Emit, node):
    from codegen.keras.model import dtype_name

    dt = node.attrs.get("dtype") or node.inputs[0].dtype
    value = _number(node.attrs["value"], dt)
    return f"ops.full_like({e.arg(0)}, {value}, dtype={dtype_name(dt)!r})"


@emitter("gather")
def gather(e: Emit, node):
    return f"ops.take({e.arg(0)}, {e.arg(1)}, axis={int(node.attrs['axis'])})"


@emitter("tile")
def tile(e: Emit, node):
    repeats = node.attrs.get("repeats")
    if repeats is None:
        raise Unsupported("repeats computed at run time")
    return f"ops.tile({e.arg(0)}, {tuple(int(r) for r in repeats)!r})"


# Ops that move or repeat an index tensor's entries without changing any of them.
_MOVES = ("unsqueeze", "squeeze", "reshape", "expand", "transpose", "flatten")


def _within(e: Emit, v: Value, dim) -> bool:
    """Every entry of the index ``v`` lies in [0, ``dim``): a range counting up from a
    non-negative start to at most ``dim`` (``arange(seq_len)`` indexing a ``seq_len`` axis),
    seen through moves of its entries and additions of a constant (``arange(seq_len) + 0``,
    GPT-2's past length). Such an index needs no wrap."""
    shift = 0
    for _ in range(8):
        p = v.producer if v is not None else None
        if p is not None and p.op == "add" and len(p.inputs) == 2:
            c = [e.cg.folded.get(id(u)) for u in p.inputs]
            k = 1 if c[1] is not None and c[1].size == 1 else 0
            if c[k] is None or c[k].size != 1 or not isinstance(c[k].item(), int):
                return False
            shift, v = shift + c[k].item(), p.inputs[1 - k]
        elif p is not None and p.op in _MOVES:
            v = p.inputs[0]
        else:
            break
    if p is None or p.op != "range":
        return False
    start, step = (e.cg.folded.get(id(p.inputs[i])) for i in (0, 2))
    (n,) = p.outputs[0].type.shape or (None,)
    if start is None or step is None or start.size != 1 or step.size != 1 or n is None:
        return False
    start, step = start.item(), step.item()
    if not (isinstance(start, int) and isinstance(step, int)) or step < 1:
        return False
    start += shift
    if start < 0:
        return False
    if isinstance(n, int) and isinstance(dim, int):
        return n == 0 or start + (n - 1) * step < dim
    return step == 1 and add(n, start) == dim  # its last entry is dim - 1


@emitter("index")
def index(e: Emit, node):
    """Advanced indexing as one take: the indexed dims (moved to the front first when they are
    not adjacent, as numpy's result puts them) flattened into one, the index tensors combined
    into a flat index in Horner form (``i1 + i0 * d1``), each wrapped into its dim (a negative
    index counts from the end) unless it is known to lie in it."""
    shape = e.type(0).shape
    if shape is None:
        raise Unsupported("indexing a tensor of unknown rank")
    r = len(shape)
    axes = [int(a) % r for a in node.attrs["axes"]]
    x = e.arg(0)
    if axes != list(range(axes[0], axes[0] + len(axes))):
        perm = axes + [d for d in range(r) if d not in axes]
        x = e.stmt(f"ops.transpose({x}, {tuple(perm)!r})", f"{node.name or 'index'}_moved")
        shape, axes = [shape[d] for d in perm], list(range(len(axes)))
    first, dims = axes[0], [shape[a] for a in axes]
    flat_shape = (*shape[:first], -1, *shape[axes[-1] + 1 :])
    if all(isinstance(d, int) for d in flat_shape):
        flat = f"ops.reshape({x}, {flat_shape!r})"
    else:  # sizes read when the model runs
        flat = e.sized("reshape", [*shape[:first], product(dims), *shape[axes[-1] + 1 :]], x,
                       part="flat")  # fmt: skip
    x = e.stmt(flat, f"{node.name or 'index'}_flat")
    sizes: dict[int, str] = {}

    def size(k: int) -> str:  # dim k of the indexed ones, as a literal or read when run
        if k not in sizes:
            d = dims[k]
            sizes[k] = str(d) if isinstance(d, int) else e.stmt(
                e.sized("size", [d], value_dtype="int64", part=f"size{k}"),
                f"{node.name or 'index'}_size{k}",
            )  # fmt: skip
        return sizes[k]

    at = ""
    for k, d in enumerate(dims):
        v = node.inputs[k + 1]
        i = f"ops.cast({e.arg(k + 1)}, 'int64')"
        if not _within(e, v, d):
            i = f"{i} % {size(k)}"
        lin = f"({at})" if " + " in at or " % " in at else at
        at = i if k == 0 else f"{i} + {lin} * {size(k)}"
    at = e.stmt(at, f"{node.name or 'index'}_at")
    return f"ops.take({x}, {at}, axis={first})"


@emitter("one_hot")
def one_hot(e: Emit, node):
    from codegen.keras.model import dtype_name

    a = node.attrs
    if len(node.inputs) > 1 and node.inputs[1] is not None or a.get("depth") is None:
        raise Unsupported("a depth computed at run time")
    dt = dtype_name(a["dtype"])
    return f"ops.one_hot({e.arg(0)}, {int(a['depth'])}, axis={int(a['axis'])}, dtype={dt!r})"


@emitter("gather_elements")
def gather_elements(e: Emit, node):
    return f"ops.take_along_axis({e.arg(0)}, {e.arg(1)}, axis={int(node.attrs['axis'])})"
