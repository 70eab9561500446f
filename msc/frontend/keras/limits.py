"""The sizes a ``.keras`` file's config asks for, checked against what the file holds before
Keras builds anything.

Keras builds every layer of a loaded model from its config (``Dense(units=...)`` creates its
kernel, initialized, before the stored weights are read), so a config naming huge sizes is an
allocation the file never paid for. ``SIZES`` says, for each built-in layer class, which config
keys set sizes and what bounds them:

- ``Match(key, var, axes)``: the value is the shape, at ``axes``, of one of the layer's stored
  weights (``var``, its path under the layer's group in ``model.weights.h5``: ``vars/0``,
  ``cell/vars/1``): ``Dense.units`` is its kernel's last dim.
- ``Fits(key)``: each of the value's sizes is at most the elements the layer's stored weights
  hold (when the shape cannot be matched key by key: ``EinsumDense.output_shape``, some of
  whose dims are the kernel's and others the input's).
- ``Bounded(keys)``: a layer without weights; the product of the values' sizes is at most
  ``BUDGET`` elements (``Reshape.target_shape``, ``RepeatVector.n``).
- ``In(...)``: the input size ``build_config`` states at one axis (Keras builds the layer
  from it) is a stored weight's dim; ``Built(shape)``: the weights a layer shapes from its
  input alone (LayerNormalization at its axes, PReLU's alpha, Normalization's mean and
  variance) have a stored weight's shape.

The weights the file declares are bounded too: their bytes together are at most what the file
can hold (an HDF5 dataset may declare a shape it stores nothing for). A layer class not in the
table is read as before.

# NOTE: invariants
# - Read as data only: config.json's values and the HDF5 file's metadata (dataset shapes,
#   the ``name`` each layer's ``vars`` group carries); no dataset is read, nothing is built.
# - A layer's stored weights are found by the layer's name (the ``name`` attribute of a
#   ``vars`` group); a name stored more than once passes if any one of them matches.
# - Each problem names the layer (class and name) and the config key.
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["BUDGET", "EVERY", "SIZES", "Match", "Fits", "Bounded", "size_problems", "too_deep"]

# The most elements a size set by a layer without weights may ask for (a Reshape target, an
# Input's shape, a Resizing's height x width): 2**28, 1 GiB of float32.
BUDGET = 1 << 28
# groups and datasets in a weights file (ResNet-50 has some 1,500)
MAX_OBJECTS = 1 << 20


@dataclass(frozen=True)
class Match:
    """``config[key]`` is the shape of the stored weight ``var`` at ``axes`` (an int: one
    dim; a slice: several, as a conv's kernel_size). ``var`` lists the places Keras versions
    store it under the layer's group, the first found is read."""

    key: str
    var: tuple[str, ...]
    axes: int | slice


@dataclass(frozen=True)
class Fits:
    """Each of ``config[key]``'s sizes is at most the elements of the layer's stored weights."""

    key: str


@dataclass(frozen=True)
class Bounded:
    """The product of the sizes in ``config[k]`` for each of ``keys`` is at most ``BUDGET``
    (a -1 or None, a size Keras infers, counts as 1)."""

    keys: tuple[str, ...]


@dataclass(frozen=True)
class In:
    """The size of the layer's input at one axis, as its ``build_config`` states it (``shape``:
    the key of that input's shape, ``input_shape`` or ``shapes_dict/query_shape``; Keras builds
    the layer from it), is the stored weight ``var``'s dim ``var_axis`` (times ``config[scale]``:
    a grouped conv's kernel holds in/groups channels). The input's axis is the last (the first
    after the batch under ``data_format="channels_first"``), or ``config[axis_key]``."""

    shape: str
    var: tuple[str, ...]
    var_axis: int
    scale: str | None = None
    axis_key: str | None = None


@dataclass(frozen=True)
class Built:
    """The layer builds weights shaped by its input (``build_config``'s ``input_shape``) as
    ``shape(config, input_sizes)`` says (None: it builds none, as a LayerNormalization
    without center and scale): one of its stored weights must have that shape."""

    shape: Callable[[dict, list[int]], list[int] | None]


Rule = Match | Fits | Bounded | In | Built


def _axes(config: dict, sizes: list[int]) -> list[int]:
    """The input axes a normalization's ``axis`` (an int or a list) names."""
    axis = config.get("axis", -1)
    axes = axis if isinstance(axis, list) else [axis]
    if not axes or any(type(a) is not int or not -len(sizes) <= a < len(sizes) for a in axes):
        raise _NotASize(f"axis={str(axis)[:40]} (not an axis of the input)")
    return [a % len(sizes) for a in axes]


def _normalized(config: dict, sizes: list[int]) -> list[int] | None:
    """LayerNormalization's gamma / beta: the input's sizes at its axes."""
    if not (config.get("center", True) or config.get("scale", True)):
        return None
    return [sizes[a] for a in _axes(config, sizes)]


def _grouped(config: dict, sizes: list[int]) -> list[int] | None:
    """GroupNormalization's gamma / beta: the input's size at its (one) axis."""
    if not (config.get("center", True) or config.get("scale", True)):
        return None
    (a,) = _axes({"axis": config.get("axis", -1)}, sizes)
    return [sizes[a]]


def _alpha(config: dict, sizes: list[int]) -> list[int]:
    """PReLU's alpha: the input's sizes after the batch, 1 on its shared axes."""
    shared = config.get("shared_axes") or []
    shared = shared if isinstance(shared, list) else [shared]
    if any(type(a) is not int for a in shared):
        raise _NotASize(f"shared_axes={str(shared)[:40]} (not axes)")
    return [1 if i in shared else d for i, d in enumerate(sizes) if i > 0]


def _normalization(config: dict, sizes: list[int]) -> list[int] | None:
    """Normalization's mean and variance: the input's sizes at its axes (no axis: one scalar
    each, nothing to match). Given in the config instead, they are broadcast to those sizes
    when the layer is built, a tensor the budget bounds."""
    axis = config.get("axis", -1)
    if axis is None or axis == []:
        return None
    want = [sizes[a] for a in sorted(_axes({"axis": axis}, sizes))]
    if config.get("mean") is not None:
        if _product(want) > BUDGET:
            raise _NotASize(
                f"mean given, axis={str(axis)[:40]} on build_config input_shape="
                f"{str(sizes)[:60]} (broadcast to more than {BUDGET} elements)"
            )
        return None
    return want


_K = slice(0, -2)  # a conv kernel's spatial dims: [*kernel_size, in, out]


def _conv(out_axis: int, in_axis: int, scale: str | None = None) -> tuple[Rule, ...]:
    return (
        Match("filters", ("vars/0",), out_axis),
        Match("kernel_size", ("vars/0",), _K),
        In("input_shape", ("vars/0",), in_axis, scale),
    )


def _rnn(kernel: str, recurrent: str) -> tuple[Rule, ...]:
    return (Match("units", (recurrent,), 0), In("input_shape", (kernel,), 0))


def _sub(name: str) -> tuple[str, ...]:
    """A sublayer's first weight, under the attribute names Keras versions give it."""
    return (f"{name}/vars/0", f"_{name}/vars/0")


def _attention(*keys: tuple[str, str, int]) -> tuple[Rule, ...]:
    sizes = tuple(Match(key, _sub(sub), axis) for key, sub, axis in keys)
    inputs = tuple(
        In(f"shapes_dict/{t}_shape", _sub(f"{t}_dense"), 0) for t in ("query", "key", "value")
    )
    return sizes + inputs


SIZES: dict[str, tuple[Rule, ...]] = {
    # layers with weights: each size is a stored weight's dim
    "Dense": (Match("units", ("vars/0",), -1), In("input_shape", ("vars/0",), 0)),
    "EinsumDense": (Fits("output_shape"),),
    "Embedding": (Match("input_dim", ("vars/0",), 0), Match("output_dim", ("vars/0",), 1)),
    **{f"Conv{n}D": _conv(-1, -2, "groups") for n in (1, 2, 3)},
    **{f"Conv{n}DTranspose": _conv(-2, -1) for n in (1, 2, 3)},
    **{
        f"DepthwiseConv{n}D": (
            Match("depth_multiplier", ("vars/0",), -1),
            Match("kernel_size", ("vars/0",), _K),
            In("input_shape", ("vars/0",), -2),
        )
        for n in (1, 2)
    },
    **{
        f"SeparableConv{n}D": (
            In("input_shape", ("vars/0",), -2),
            Match("depth_multiplier", ("vars/0",), -1),
            Match("kernel_size", ("vars/0",), _K),
            Match("filters", ("vars/1",), -1),
        )
        for n in (1, 2)
    },
    **{
        f"ConvLSTM{n}D": (
            Match("filters", ("cell/vars/1",), -2),
            Match("kernel_size", ("cell/vars/0",), _K),
            In("input_shape", ("cell/vars/0",), -2),
        )
        for n in (1, 2, 3)
    },  # fmt: skip
    **{name: _rnn("cell/vars/0", "cell/vars/1") for name in ("SimpleRNN", "LSTM", "GRU")},
    **{name: _rnn("vars/0", "vars/1") for name in ("SimpleRNNCell", "LSTMCell", "GRUCell")},
    "BatchNormalization": (In("input_shape", ("vars/0",), 0, axis_key="axis"),),
    "LayerNormalization": (Built(_normalized),),
    "GroupNormalization": (Built(_grouped),),
    "PReLU": (Built(_alpha),),
    "Normalization": (Built(_normalization),),
    "MultiHeadAttention": _attention(
        ("num_heads", "query_dense", 1),
        ("key_dim", "query_dense", 2),
        ("value_dim", "value_dense", 2),
    ),  # fmt: skip
    "GroupQueryAttention": _attention(
        ("num_query_heads", "query_dense", 1),
        ("head_dim", "query_dense", 2),
        ("num_key_value_heads", "key_dense", 1),
    ),  # fmt: skip
    # layers (and recorded keras.ops calls) without weights: sizes within the budget
    "InputLayer": (Bounded(("batch_shape",)), Bounded(("batch_input_shape",))),
    "Reshape": (Bounded(("target_shape",)), Bounded(("newshape",))),
    "RepeatVector": (Bounded(("n",)),),
    **{f"UpSampling{n}D": (Bounded(("size",)),) for n in (1, 2, 3)},
    **{f"ZeroPadding{n}D": (Bounded(("padding",)),) for n in (1, 2, 3)},
    "Resizing": (Bounded(("height", "width")),),
    "CenterCrop": (Bounded(("height", "width")),),
    "RandomCrop": (Bounded(("height", "width")),),
    "CategoryEncoding": (Bounded(("num_tokens",)),),
    "TextVectorization": (Bounded(("max_tokens",)), Bounded(("output_sequence_length",))),
    "StringLookup": (Bounded(("max_tokens",)),),
    "IntegerLookup": (Bounded(("max_tokens",)),),
    "BroadcastTo": (Bounded(("shape",)),),
    "Tile": (Bounded(("repeats",)),),
    "Repeat": (Bounded(("repeats",)),),
}


# Sizes any layer's config may state, whatever its class: the input shape a Keras 2 config
# gives its first layer (Keras builds an InputLayer from it).
EVERY: tuple[Rule, ...] = (Bounded(("batch_input_shape",)), Bounded(("input_shape",)))


class _NotASize(Exception):
    pass


def _sizes(value: Any, key: str) -> list[int] | None:
    """The sizes in a config value (an int, or nested lists of ints; None and -1 are sizes
    Keras infers, kept as -1), None when the key is unset."""
    if value is None:
        return None
    out: list[int] = []

    def walk(v: Any, depth: int) -> None:
        if type(v) is int and v >= -1:
            out.append(v)
        elif v is None and depth:
            out.append(-1)
        elif isinstance(v, list | tuple) and depth < 3 and len(v) <= 64:
            for u in v:
                walk(u, depth + 1)
        else:
            raise _NotASize(f"{key}={str(value)[:60]} (not a size)")

    walk(value, 0)
    return out


def _product(sizes: list[int]) -> int:
    return math.prod(max(s, 1) for s in sizes)


def stored_weights(z: zipfile.ZipFile, member: str = "model.weights.h5") -> tuple[dict, int]:
    """The weights a .keras file stores, from the HDF5 metadata: {layer name: [{path under
    the layer's group: shape}]} (one dict per group carrying that name) and the bytes all
    datasets declare."""
    import h5py

    groups: dict[str, list[dict[str, tuple[int, ...]]]] = {}
    total = 0
    with z.open(member) as raw, h5py.File(raw, "r") as f:
        found: list[tuple[str, Any]] = []
        f.visititems(lambda name, obj: found.append((name, obj)))
        owners: dict[str, str] = {}  # a layer's group path -> its name
        for path, obj in found:
            if isinstance(obj, h5py.Group) and path.rsplit("/", 1)[-1] == "vars":
                name = obj.attrs.get("name")
                if isinstance(name, bytes):
                    name = name.decode("utf-8", "replace")
                if isinstance(name, str):
                    owners[path[: -len("vars")]] = name
        if len(found) > MAX_OBJECTS:
            raise ValueError(f"{member} holds more than {MAX_OBJECTS} groups and datasets")
        shapes: dict[str, dict[str, tuple[int, ...]]] = {owner: {} for owner in owners}
        for path, obj in found:
            if not isinstance(obj, h5py.Dataset):
                continue
            total += math.prod(obj.shape or ()) * obj.dtype.itemsize
            parts = path.split("/")
            for k in range(len(parts)):  # every layer group above it, the file's own too
                owner = "/".join(parts[:k]) + "/" if k else ""
                if owner in shapes and obj.shape:
                    shapes[owner]["/".join(parts[k:])] = tuple(obj.shape)
        for owner, name in owners.items():
            groups.setdefault(name, []).append(shapes[owner])
    return groups, total


def _stored_dims(groups: list[dict], var: tuple[str, ...], axes: int | slice) -> list[list]:
    """The dims at ``axes`` of the stored weight ``var`` in each group holding it."""
    found = []
    for g in groups:
        shape = next((g[v] for v in var if v in g), None)
        if shape is None:
            continue
        try:
            found.append(list(shape[axes]) if isinstance(axes, slice) else [shape[axes]])
        except IndexError:
            found.append([])
    return found


def _input_dim(rule: In, config: dict, build: Any) -> tuple[str, int | None]:
    """The input size ``rule`` reads from a layer's build_config, with what it is called."""
    shape: Any = build
    for part in rule.shape.split("/"):
        shape = shape.get(part) if isinstance(shape, dict) else None
    label = f"build_config {rule.shape}={str(shape)[:60]}"
    if shape is None:
        return label, None
    sizes = _sizes(shape, rule.shape)
    axis = config.get(rule.axis_key, -1) if rule.axis_key else -1
    if axis == -1 and config.get("data_format") == "channels_first":
        axis = 1
    if type(axis) is not int or not sizes or not -len(sizes) <= axis < len(sizes):
        raise _NotASize(f"{label} (no size at axis {str(axis)[:20]})")
    return label, sizes[axis]


def _check(rules: tuple[Rule, ...], entry: dict, groups: list[dict]) -> str | None:
    """Why the sizes in one layer's config entry are beyond its stored weights or the
    budget (``rules``: its class's)."""
    config, build = entry["config"], entry.get("build_config")
    for rule in rules:
        if isinstance(rule, Bounded):
            sizes = [s for k in rule.keys for s in (_sizes(config.get(k), k) or [])]
            if _product(sizes) > BUDGET:
                given = ", ".join(f"{k}={config.get(k)}" for k in rule.keys)
                return f"{given} (more than {BUDGET} elements)"
            continue
        if isinstance(rule, Built):
            why = _built(rule, config, build, groups)
            if why:
                return why
            continue
        if isinstance(rule, In):
            if not isinstance(build, dict):
                return "has no build_config (Keras would build it from the inputs it is given)"
            given, dim = _input_dim(rule, config, build)
            if dim is None:
                continue
            scale = _sizes(config.get(rule.scale, 1), rule.scale or "")[0] if rule.scale else 1
            sizes = [dim // max(scale, 1)]
            var, axes = rule.var, rule.var_axis
        else:
            sizes = _sizes(config.get(rule.key), rule.key)
            if sizes is None:
                continue
            given = f"{rule.key}={config.get(rule.key)}"
        if not groups:
            return f"{given} (the file stores no weights for it)"
        if isinstance(rule, Fits):
            held = max(sum(math.prod(s) for s in g.values()) for g in groups)
            if max(sizes, default=0) > held:
                return f"{given} (more than the {held} elements the file stores for it)"
            continue
        if isinstance(rule, Match):
            var, axes = rule.var, rule.axes
        stored = _stored_dims(groups, var, axes)
        # an int for several dims (kernel_size=3) is that size at each
        if not any(
            dims and dims == (sizes * len(dims) if len(sizes) == 1 else sizes) for dims in stored
        ):
            if not stored:
                return f"{given} (the file stores no {var[0]} for it)"
            return f"{given} (the file stores its {var[0]} with {stored[0]} there)"
    return None


def _built(rule: Built, config: dict, build: Any, groups: list[dict]) -> str | None:
    """Why the weights a ``Built`` layer would make from its stated input are not the ones
    the file stores for it."""
    if not isinstance(build, dict):
        return "has no build_config (Keras would build it from the inputs it is given)"
    shape = build.get("input_shape")
    label = f"build_config input_shape={str(shape)[:60]}"
    sizes = _sizes(shape, "input_shape") if shape is not None else None
    if not sizes:
        return f"{label} (not an input shape)"
    want = rule.shape(config, sizes)
    if want is None:
        return None
    held = {tuple(s) for g in groups for s in g.values()}
    if tuple(want) not in held:
        return f"{label} (builds weights of shape {want[:8]}, which the file does not store)"
    return None


def config_dicts(config: Any) -> Iterator[dict]:
    """Every dict nested in a Keras config (the config itself first), depth first: where
    layer and object entries (``class_name`` / ``config``) sit at any depth."""
    todo = [config]
    while todo:
        obj = todo.pop()
        if isinstance(obj, dict):
            yield obj
            todo.extend(reversed(list(obj.values())))
        elif isinstance(obj, list):
            todo.extend(reversed(obj))


def size_problems(
    config: Any, groups: dict[str, list[dict]], *, build_configs: bool = True
) -> list[str]:
    """Every layer in a .keras config whose size keys (``SIZES``, and ``EVERY`` for any
    class) ask for more than the file's stored weights (``groups``, from ``stored_weights``)
    or ``BUDGET``.

    ``build_configs=False``: the config may hold layers without a ``build_config`` (a legacy
    ``.h5`` file's top-level layers): their ``In`` and ``Built`` rules are skipped, as Keras
    builds such a layer from the tensors it is called on; the caller checks those weights
    (msc.frontend.keras.legacy compares every variable Keras would make before it makes it).
    """
    found: list[str] = []

    for obj in config_dicts(config):
        cls, inner = obj.get("class_name"), obj.get("config")
        if isinstance(cls, str) and isinstance(inner, dict):
            name = inner.get("name")
            label = f"{cls} {name!r}" if isinstance(name, str) else cls
            rules = SIZES.get(cls, ()) + EVERY
            if not build_configs and not isinstance(obj.get("build_config"), dict):
                rules = tuple(r for r in rules if not isinstance(r, In | Built))
            try:
                held = groups.get(name, []) if isinstance(name, str) else []
                why = _check(rules, obj, held)
            except _NotASize as e:
                why = str(e)
            if why:
                found.append(f"{label} {why}")
    return found


SIZES["GroupedQueryAttention"] = SIZES["GroupQueryAttention"]  # Keras' other name for it


# How deep a config's lists and dicts may nest: Keras' own nest some 10 levels (a functional
# model's layer, its config, an initializer's config, a node's arguments).
MAX_DEPTH = 64


def too_deep(obj: Any, limit: int = MAX_DEPTH) -> bool:
    """``obj`` (parsed JSON) nests lists and dicts deeper than ``limit`` (checked without
    recursion, before anything walks it)."""
    stack = [(obj, 0)]
    while stack:
        o, depth = stack.pop()
        if isinstance(o, dict | list | tuple):
            if depth >= limit:
                return True
            stack.extend((v, depth + 1) for v in (o.values() if isinstance(o, dict) else o))
    return False
