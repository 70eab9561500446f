"""The safe reader of legacy Keras ``.h5`` / ``.hdf5`` model files (Keras 2, and Keras 3's
``model.save("m.h5")``).

Such a file is one HDF5 file: the attribute ``model_config`` (the model's config as JSON, in
Keras 2's format or Keras 3's), ``keras_version`` and ``backend``, and the group
``model_weights`` with one group per layer, its attribute ``weight_names`` listing the layer's
weights in Keras' legacy order (trainable first) and each stored under its name
(``model_weights/dense/dense/kernel:0``).

Reading it, in order:

1. ``model_config`` is parsed as JSON (``__tuple__`` and ``TensorShape`` objects read as
   lists, nothing else interpreted), bounded in size and nesting.
2. Every class that loading would run code for is refused by name: Lambda layers (a Keras 2
   Lambda holds marshalled Python bytecode), classes from modules outside Keras, and any class
   name Keras 3 does not itself define (a custom object, looked up by name among the objects
   registered in the process).
3. The weights' metadata (shapes, never values) are mapped onto the layout
   ``msc.frontend.keras.limits`` checks (``vars/0``, ``cell/vars/1``, ``query_dense/vars/0``)
   and every layer's size keys are checked against them; the bytes the datasets declare are
   at most the file's size.
4. Keras builds the model from the config (its legacy deserializer, ``safe_mode`` on) inside a
   ``StatelessScope`` that makes variables without allocating them; each layer's variables
   must have the shapes of the weights the file stores under that layer's name, or nothing is
   allocated. Then the variables are made and the stored values assigned, by layer name.

# NOTE: invariants
# - Nothing in the file runs: Keras sees a config whose every class is Keras' own, parsed by
#   msc's JSON reading (not Keras' decoder, which builds TensorFlow objects when TF is there).
# - No variable is allocated before its shape is known to be one the file stores.
# - Weight names are Keras 3's variable paths (``dense/kernel``), as for a .keras file.
# - Each refusal is one BadModelError naming the file and the layer (class and name).
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from msc.errors import BadModelError, MscError
from msc.frontend.keras.limits import MAX_OBJECTS, config_dicts, size_problems, too_deep

__all__ = ["LEGACY_SUFFIXES", "load_legacy", "read_legacy", "keras_class_names"]

LEGACY_SUFFIXES = (".h5", ".hdf5")
# model_config is read whole; a larger one is not a model msc reads (as a .keras config.json)
CONFIG_LIMIT = 64 << 20
# a weight name's parts: ``<layer>/<sublayer>/.../<variable>:0``
MAX_NAME_PARTS = 16

# a sublayer's name in a legacy weight name -> the attribute limits.py's rules read it by
# (a Keras 2 / 3 MultiHeadAttention names its projections query, key, value,
# attention_output; .keras files store them as query_dense, ...)
SUBLAYER_ATTRS = {
    "query": "query_dense",
    "key": "key_dense",
    "value": "value_dense",
    "attention_output": "output_dense",
}

# config keys Keras 2 wrote that Keras 3 dropped, with the value under which dropping one
# changes nothing (an RNN's time_major: Keras 3 takes batch-major inputs only)
KERAS2_ONLY = {"time_major": False}

# a layer config's keys that hold another layer (Keras 3 deserializes them its new way)
WRAPPED = ("layer", "backward_layer", "cell")

_KERAS_NAMES: set[str] = set()


def keras_class_names() -> set[str]:
    """The class names Keras 3 itself defines for a config to name: its layers, models,
    initializers, regularizers, constraints and dtype policies, and the markers its configs
    hold (``__keras_tensor__``, a functional model's argument)."""
    if _KERAS_NAMES:
        return _KERAS_NAMES
    from msc.frontend.keras.loading import CODE_LAYERS, keras_module

    keras = keras_module()
    names = {"Functional", "__keras_tensor__"}
    for module in (
        keras.layers,
        keras.models,
        keras.initializers,
        keras.regularizers,
        keras.constraints,
        keras.dtype_policies,
    ):
        names |= {n for n in dir(module) if isinstance(getattr(module, n, None), type)}
    _KERAS_NAMES.update(names - {"Lambda", "Layer", *CODE_LAYERS})
    return _KERAS_NAMES


def _as_data(obj: dict) -> Any:
    """A JSON object of a legacy config as data: Keras' tuple and TensorShape encodings are
    lists, tf.keras 2's dtype ``Policy`` (mixed precision) its name, as Keras 3 names a
    policy; anything else stays a dict."""
    cls = obj.get("class_name")
    if cls in ("__tuple__", "TensorShape") and isinstance(obj.get("items"), list):
        return obj["items"]
    inner = obj.get("config")
    if cls == "Policy" and isinstance(inner, dict) and isinstance(inner.get("name"), str):
        return inner["name"]
    return obj


def _attr(node: Any, name: str, limit: int = CONFIG_LIMIT) -> Any:
    """An HDF5 attribute of at most ``limit`` bytes (None when absent). HDF5 stores an
    attribute's bytes uncompressed, so reading one holds no more than the file's size."""
    if name not in node.attrs:
        return None
    value = node.attrs[name]
    size = len(value) if isinstance(value, bytes | str) else getattr(value, "nbytes", 0)
    if size > limit:
        raise BadModelError(f"attribute {name!r} of {size} bytes")
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _names(node: Any, name: str) -> list[str]:
    """A list-of-names attribute (``weight_names``, ``layer_names``), as Keras writes it (in
    chunks ``name0``, ``name1``, ... when it is long)."""
    if name in node.attrs:
        chunks = [name]
    else:
        chunks = []
        while f"{name}{len(chunks)}" in node.attrs:
            chunks.append(f"{name}{len(chunks)}")
    out: list[str] = []
    for c in chunks:
        value = _attr(node, c, 16 << 20)
        for n in np.atleast_1d(value) if value is not None else ():
            if isinstance(n, bytes):
                n = n.decode("utf-8", "replace")
            if not isinstance(n, str):
                raise BadModelError(f"{node.name}: {name} holds {type(n).__name__}, not names")
            out.append(n)
    return out


def _refused(config: Any) -> list[str]:
    """Every class in a legacy config that loading would run code for (the .keras rules, and
    any class name, without a Keras module beside it, that is not Keras' own)."""
    from msc.frontend.keras.loading import _refused_classes

    found = _refused_classes(config, 0)
    ours = keras_class_names()

    for obj in config_dicts(config):
        cls = obj.get("class_name")
        if isinstance(cls, str) and "module" not in obj and cls not in ours:
            if cls not in ("Lambda", "TFOpLambda", "__lambda__"):  # named above
                inner = obj.get("config")
                name = inner.get("name") if isinstance(inner, dict) else None
                label = f"{cls} {name!r}" if isinstance(name, str) else cls
                found.append(
                    f"{label} (not a class Keras 3 defines: a custom object, or a layer "
                    "Keras 3 dropped)"
                )
    return found


def _groups(stored: dict[str, list[tuple[str, tuple[int, ...]]]]) -> dict[str, list[dict]]:
    """The legacy weights (``stored``: layer group -> [(weight name, shape)]) in the layout
    limits.py's rules read: for every layer or sublayer a weight name passes through, the
    weight's path below it (``vars/<i>``, ``cell/vars/<i>``, ``query_dense/vars/<i>``).

    A Keras 2 RNN stores its cell's weights as its own (``lstm_1/kernel:0``), a newer one
    under the cell (``lstm/lstm_cell/kernel:0``): both read as ``cell/vars/<i>``. A
    Bidirectional's halves (``forward_lstm``) are also found by the wrapped layer's name."""
    groups: dict[str, list[dict]] = {}
    for layer, weights in stored.items():
        owned: dict[str, dict[str, tuple[int, ...]]] = {}  # owner -> path -> shape
        counts: dict[tuple[str, str], int] = {}
        for weight, shape in weights:
            parts = weight.split(":")[0].split("/")[:MAX_NAME_PARTS]
            # from the layer's own name on (Keras 3 writes a Sequential's ``seq/fc/kernel``); a
            # nested model's weights are named by its layers (``dense/kernel:0``)
            at = parts.index(layer) if layer in parts[:-1] else None
            owners = parts[at:-1] if at is not None else [layer, *parts[:-1]]
            for k, owner in enumerate(owners):
                below = owners[k + 1 :]
                i = counts.get((owner, "/".join(below)), 0)
                counts[(owner, "/".join(below))] = i + 1
                paths = owned.setdefault(owner, {})
                if not shape:
                    continue
                attrs = [SUBLAYER_ATTRS.get(b, b) for b in below]
                if below and below[-1].endswith("_cell"):
                    attrs[-1] = "cell"
                paths["/".join([*attrs, "vars", str(i)])] = tuple(shape)
                if not below:
                    paths[f"cell/vars/{i}"] = tuple(shape)
        for owner, paths in owned.items():
            groups.setdefault(owner, []).append(paths)
            for half in ("forward_", "backward_"):
                if owner.startswith(half) and owner != layer:
                    groups.setdefault(owner[len(half) :], []).append(paths)
    return groups


def _wrapped(config: Any, groups: dict[str, list[dict]]) -> None:
    """A wrapper's inner layer (``TimeDistributed(Dense)``: a ``layer`` in its config) whose
    weights the file stores as the wrapper's own is found by the wrapper's group."""

    for obj in config_dicts(config):
        outer = obj.get("config")
        layer = outer.get("layer") if isinstance(outer, dict) else None
        if isinstance(layer, dict) and isinstance(layer.get("config"), dict):
            name, wrapper = layer["config"].get("name"), outer.get("name")
            if isinstance(name, str) and name not in groups and wrapper in groups:
                groups[name] = groups[wrapper]


def _keras3_form(config: Any) -> list[str]:
    """Rewrite, in place, what Keras 2 wrote and Keras 3's legacy reader builds wrongly or not
    at all; each layer that cannot be, as a problem:

    - a Sequential's config as a bare list of layers (Keras 2.2) is a dict with ``layers``;
    - a Sequential's first layer stating ``batch_input_shape`` becomes an InputLayer of that
      shape before it (Keras 3 would take the batch as one more input dim); elsewhere a
      layer's ``batch_input_shape`` is dropped (Keras 2 ignored it there too);
    - ``KERAS2_ONLY`` keys are dropped where they hold the value Keras 3 assumes;
    - a wrapped layer (``WRAPPED``: a TimeDistributed's ``layer``, a Bidirectional's) names
      its module, ``keras.layers``: Keras 3 reads it with its new deserializer, which finds
      no class without one (every class name was checked to be Keras' own before this).
    """
    problems: list[str] = []
    stack = [config]
    while stack:
        obj = stack.pop()
        if isinstance(obj, list):
            stack.extend(obj)
            continue
        if not isinstance(obj, dict):
            continue
        cls, inner = obj.get("class_name"), obj.get("config")
        if cls == "Sequential" and isinstance(inner, list):
            inner = obj["config"] = {"name": "sequential", "layers": inner}
        layers = inner.get("layers") if cls == "Sequential" and isinstance(inner, dict) else None
        if isinstance(layers, list) and layers and isinstance(layers[0], dict):
            first = layers[0].get("config")
            if (
                layers[0].get("class_name") != "InputLayer"
                and isinstance(first, dict)
                and first.get("batch_input_shape") is not None
            ):
                dtype = first.get("dtype") if isinstance(first.get("dtype"), str) else "float32"
                layers.insert(0, {"class_name": "InputLayer", "config": {
                    "batch_input_shape": first["batch_input_shape"], "dtype": dtype,
                    "name": f"{first.get('name')}_input"}})  # fmt: skip
        if isinstance(cls, str) and isinstance(inner, dict):
            if cls != "InputLayer":
                inner.pop("batch_input_shape", None)
            for key in WRAPPED:
                wrapped = inner.get(key)
                if isinstance(wrapped, dict) and "module" not in wrapped:
                    wrapped["module"] = "keras.layers"
            for key, same in KERAS2_ONLY.items():
                if key in inner and inner[key] == same:
                    del inner[key]
                elif key in inner:
                    problems.append(f"{cls} {inner.get('name')!r} {key}={str(inner[key])[:20]} "
                                    "(not in Keras 3)")  # fmt: skip
        stack.extend(obj.values())
    return problems


def read_legacy(f: Any, path: str) -> tuple[dict, dict[str, list[tuple[str, Any]]]]:
    """An open legacy Keras HDF5 file, checked as data: its config and, per layer group, its
    weights [(name, dataset)] in the file's order. Raises BadModelError for a file loading
    would run code for or whose sizes are beyond what it stores."""
    import h5py

    text = _attr(f, "model_config")
    if text is None:
        raise BadModelError(
            f"{path}: no model_config attribute (a weights-only file: build the model in "
            "Python, load_weights, and pass the object to msc.from_keras)"
        )
    try:
        config = json.loads(text, object_hook=_as_data)
    except RecursionError:
        raise BadModelError(f"{path}: model_config nests too deeply") from None
    if too_deep(config):
        raise BadModelError(f"{path}: model_config nests deeper than msc reads")
    if not isinstance(config, dict) or not isinstance(config.get("config"), dict | list):
        raise BadModelError(f"{path}: model_config is not a Keras model's config")
    refused = _refused(config)
    if refused:
        raise BadModelError(
            f"{path}: refused, loading it would run code that is not Keras': "
            + "; ".join(refused)
            + " (build the model in Python and pass the object to msc.from_keras)"
        )
    root = f.get("model_weights")
    if not isinstance(root, h5py.Group):
        raise BadModelError(f"{path}: no model_weights group")
    found: list[tuple[str, Any]] = []
    f.visititems(lambda name, obj: found.append((name, obj)) if len(found) <= MAX_OBJECTS else 1)
    if len(found) > MAX_OBJECTS:
        raise BadModelError(f"{path}: more than {MAX_OBJECTS} groups and datasets")
    declared = sum(
        math.prod(o.shape or ()) * o.dtype.itemsize for _, o in found if isinstance(o, h5py.Dataset)
    )
    if declared > os.path.getsize(path):
        raise BadModelError(
            f"{path}: refused, its datasets declare {declared} bytes of weights, more than the "
            f"file holds ({os.path.getsize(path)})"
        )
    stored: dict[str, list[tuple[str, Any]]] = {}
    for layer, group in root.items():
        if not isinstance(group, h5py.Group) or layer == "top_level_model_weights":
            continue
        weights = []
        for name in _names(group, "weight_names"):
            ds = group.get(name)
            if not isinstance(ds, h5py.Dataset):
                raise BadModelError(f"{path}: layer {layer!r} lists weight {name!r}, not stored")
            weights.append((name, ds))
        stored[layer] = weights
    groups = _groups({k: [(n, ds.shape) for n, ds in w] for k, w in stored.items()})
    _wrapped(config, groups)
    too_big = size_problems(config, groups, build_configs=False)
    if too_big:
        raise BadModelError(
            f"{path}: refused, a layer's config asks for sizes beyond the weights the file "
            "stores or msc's budget: " + "; ".join(too_big)
        )
    unsupported = _keras3_form(config)  # after the checks: they read what the file states
    if unsupported:
        raise BadModelError(f"{path}: Keras 3 cannot build it: " + "; ".join(unsupported))
    return config, stored


def load_legacy(path: str | os.PathLike) -> Any:
    """A legacy Keras ``.h5`` / ``.hdf5`` model file as a Keras 3 model (see the module's
    docstring for what is checked, and when)."""
    import h5py

    from msc.frontend.keras.loading import keras_module

    path = os.fspath(path)
    keras = keras_module()
    try:
        with h5py.File(path, "r") as f:
            config, stored = read_legacy(f, path)
            return _build(keras, config, stored, path)
    except BadModelError as e:
        if str(e).startswith(f"{path}: "):
            raise
        raise BadModelError(f"{path}: {e}") from None  # an attribute's or a name list's
    except (OSError, KeyError, ValueError, UnicodeDecodeError, TypeError, RuntimeError) as e:
        # h5py's errors on a damaged file (OSError, KeyError, RuntimeError), json's ValueError
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise BadModelError(f"{path}: not a readable Keras .h5 model ({msg[:300]})") from None


def _build(keras: Any, config: dict, stored: dict[str, list[tuple[str, Any]]], path: str) -> Any:
    """Keras' model from the checked config, its variables compared with the stored weights
    before they are allocated, then set from them by layer name."""
    # Keras' legacy deserializer (what keras.saving.load_model runs for an .h5 file), given
    # msc's parsed config rather than the file: no public API takes a config in Keras 2's form
    try:
        from keras.src.backend.common import global_state
        from keras.src.backend.common.variables import initialize_all_variables
        from keras.src.legacy.saving import saving_options, saving_utils
        from keras.src.saving import serialization_lib
    except ImportError as e:
        raise MscError(
            f"reading legacy .h5 files needs Keras 3's legacy loader, which keras "
            f"{keras.__version__} does not have where msc looks ({e})"
        ) from None

    pending = global_state.get_global_attribute("uninitialized_variables", [], set_to_default=True)
    before = len(pending)
    try:
        with (
            keras.StatelessScope(initialize_variables=False),
            saving_options.keras_option_scope(use_legacy_config=True),
            serialization_lib.SafeModeScope(True),
        ):
            model = saving_utils.model_from_config(config, custom_objects={})
        problems = _shape_problems(model, stored)
    except Exception as e:  # noqa: BLE001 - whatever Keras raises on this config is the file's
        del pending[before:]  # never allocated: a later initialization must not make them
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise BadModelError(f"{path}: Keras could not build it: {msg[:400]}") from None
    if problems:
        del pending[before:]
        raise BadModelError(
            f"{path}: refused, a layer would build weights the file does not store: "
            + "; ".join(problems[:8])
        )
    initialize_all_variables()
    for layer in model.layers:
        variables = layer.trainable_weights + layer.non_trainable_weights
        for v, (name, ds) in zip(variables, stored.get(layer.name, [])):
            v.assign(np.asarray(ds[()], dtype=v.dtype))
            v._path = _weight_name(name, layer.name)
        if variables and hasattr(layer, "finalize_state"):
            layer.finalize_state()  # as Keras' loader: a Normalization takes its mean from them
    return model


def _weight_name(stored: str, layer: str) -> str:
    """A weight's name from the file's, from its layer's name on and without the ``:0``
    (``dense/kernel:0`` is ``dense/kernel``; Keras 3 writes a Sequential's as
    ``seq/fc/kernel``, read ``fc/kernel``): as a .keras file's weights are named."""
    parts = stored.split(":")[0].split("/")
    return "/".join(parts[parts.index(layer) :] if layer in parts[:-1] else parts)


def _shape_problems(model: Any, stored: dict[str, list[tuple[str, Any]]]) -> list[str]:
    """Each layer whose variables (Keras' legacy order: trainable first) are not, in number
    and shape, the weights the file stores under the layer's name."""
    problems = []
    for layer in model.layers:
        variables = layer.trainable_weights + layer.non_trainable_weights
        want = [tuple(v.shape) for v in variables]
        have = [tuple(ds.shape) for _, ds in stored.get(layer.name, [])]
        if want != have:
            label = f"{type(layer).__name__} {layer.name!r}"
            problems.append(f"{label} builds {want[:6]}, the file stores {have[:6]}")
    return problems
