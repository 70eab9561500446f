"""Reading a ``.keras`` file safely, for the Keras importer: its config.json checked as data
(no Lambda layer, no class outside Keras but msc's own ``MSC_LAYERS`` with checked configs, no
code-holding layer unless trusted by name), its size keys against the weights it stores
(limits.py), then loaded by Keras itself with ``safe_mode=True`` on the torch backend, msc's
own layer classes registered for the load only.
"""

from __future__ import annotations

import json
import os
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from msc.errors import BadModelError, MscError
from msc.frontend.keras.legacy import LEGACY_SUFFIXES, load_legacy
from msc.frontend.keras.limits import config_dicts, size_problems, stored_weights, too_deep
from msc.ir import DType

__all__ = ["load_keras", "keras_module", "msc_layers", "MSC_LAYERS", "CODE_LAYERS", "DTYPES"]

DTYPES = {
    "float16": DType.FLOAT16,
    "bfloat16": DType.BFLOAT16,
    "float32": DType.FLOAT32,
    "float64": DType.FLOAT64,
    "int8": DType.INT8,
    "int16": DType.INT16,
    "int32": DType.INT32,
    "int64": DType.INT64,
    "uint8": DType.UINT8,
    "bool": DType.BOOL,
}

# config.json of a .keras file is read whole; a larger one is not a model msc reads.
CONFIG_LIMIT = 64 << 20


def keras_module():
    """Keras, imported on the torch backend unless the user chose one (no TensorFlow)."""
    os.environ.setdefault("KERAS_BACKEND", "torch")
    try:
        import keras
    except ImportError as e:
        raise MscError(
            f"reading Keras models needs keras (pip install 'msc-graph-hub[keras]'): {e}"
        ) from None
    return keras


# msc's own layers that codegen.keras writes, by the name they are registered under
# (``@keras.saving.register_keras_serializable(package="msc")``): a .keras file naming one is
# read with msc's implementation (``msc_layers``), never with code the file points at. Each
# entry: the class name and the keys its config may hold.
MSC_LAYERS = {
    "msc>SourceWeight": ("SourceWeight", {"name", "shape", "value_dtype", "trainable", "dtype"}),
    "msc>Sized": ("Sized", {"name", "op", "shape", "value_dtype", "trainable", "dtype"}),
}
# what msc's Sized layer computes, by its ``op``
SIZED_OPS = ("reshape", "broadcast_to", "slice", "arange", "size")
SIZED_TERMS = 8  # terms in a size, and sizes multiplied in a term
# a SourceWeight's rank; its bytes are bounded by the file's weights (its value is stored there)
MAX_RANK = 16


def _msc_layer_problems(obj: dict, key: str, label: str, weight_bytes: int) -> list[str]:
    """Why a config entry naming msc's layer ``key`` is not one msc wrote (none: it is)."""
    cls, keys = MSC_LAYERS[key]
    inner = obj.get("config")
    if obj.get("class_name") != cls or obj.get("registered_name") != key:
        return [f"{label} (names msc's {key!r} but is not class {cls!r} registered as it)"]
    if not isinstance(inner, dict):
        return [f"{label} (msc's {key!r} without a config)"]
    extra = sorted(str(k) for k in inner if k not in keys)
    if extra:
        return [f"{label} (msc's {key!r} with unknown config keys {extra})"]
    shape, dtype = inner.get("shape"), inner.get("value_dtype")
    if not isinstance(inner.get("name"), str) or not isinstance(inner.get("trainable", True), bool):
        return [f"{label} (msc's {key!r} with a name or trainable flag of the wrong type)"]
    if key == "msc>Sized":
        return _sized_problems(inner, label)
    if not isinstance(dtype, str) or dtype not in DTYPES:
        return [f"{label} (msc's {key!r} with value_dtype {str(dtype)[:40]!r}, not one of msc's)"]
    if (
        not isinstance(shape, list)
        or len(shape) > MAX_RANK
        or not all(type(d) is int and d >= 0 for d in shape)
    ):
        return [f"{label} (msc's {key!r} with shape {str(shape)[:60]}: not a list of sizes)"]
    nbytes = int(np.prod(shape, dtype=object)) * np.dtype(DTYPES[dtype].to_numpy()).itemsize
    if nbytes > weight_bytes:
        return [f"{label} (msc's {key!r} of {nbytes} bytes, more than the file's weights hold)"]
    return []


def sized_size_ok(size: Any, rank: int) -> bool:
    """A size of msc's Sized layer: an int within the budget, or at most SIZED_TERMS terms
    [c, [[tensor, axis], ...]] of small ints."""
    from msc.frontend.keras.limits import BUDGET

    def small(v: Any, lo: int, hi: int) -> bool:
        return type(v) is int and lo <= v <= hi

    if type(size) is int:
        return -1 <= size <= BUDGET
    return (
        isinstance(size, list)
        and 0 < len(size) <= SIZED_TERMS
        and all(
            isinstance(t, list) and len(t) == 2 and small(t[0], -BUDGET, BUDGET)
            and isinstance(t[1], list) and len(t[1]) <= SIZED_TERMS
            and all(isinstance(p, list) and len(p) == 2 and small(p[0], 0, 64)
                    and small(p[1], 0, rank) for p in t[1])
            for t in size
        )
    )  # fmt: skip


def _sized_problems(inner: dict, label: str) -> list[str]:
    """Why a config naming msc's Sized layer is not one codegen.keras wrote (none: it is)."""
    op, shape, dtype = inner.get("op"), inner.get("shape"), inner.get("value_dtype")
    if op not in SIZED_OPS:
        return [f"{label} (msc's 'msc>Sized' with op {str(op)[:40]!r}, not one of {SIZED_OPS})"]
    if dtype is not None and (not isinstance(dtype, str) or dtype not in DTYPES):
        return [f"{label} (msc's 'msc>Sized' with value_dtype {str(dtype)[:40]!r})"]
    if (
        not isinstance(shape, list)
        or len(shape) > 2 * MAX_RANK
        or not all(sized_size_ok(d, MAX_RANK) for d in shape)
    ):
        return [f"{label} (msc's 'msc>Sized' with shape {str(shape)[:60]}: not a list of sizes)"]
    return []


# Keras' own layers that wrap code rather than describe it: a torch module (pickled in the
# config), a TensorFlow SavedModel (a path), a JAX / Flax function. Keras refuses the first two
# in safe mode; msc refuses all four by name before Keras sees the file.
CODE_LAYERS = ("TorchModuleWrapper", "TFSMLayer", "JaxLayer", "FlaxLayer")


def _refused_classes(config: Any, weight_bytes: int, trust_code: bool = False) -> list[str]:
    """Every class in a .keras config that loading would run code for: Lambda layers (a
    marshalled Python function) and classes outside Keras (custom objects), but for msc's own
    layers (``MSC_LAYERS``) as codegen.keras writes them; their weights may hold at most
    ``weight_bytes``. ``trust_code``: classes of installed packages (KerasHub's) are let
    through, to be built by Keras from the package; Lambda and code-wrapping layers are not."""
    found: list[str] = []

    for obj in config_dicts(config):
        cls = obj.get("class_name")
        if isinstance(cls, str):
            module = obj.get("module")
            inner = obj.get("config")
            name = inner.get("name") if isinstance(inner, dict) else None
            label = f"{cls} {name!r}" if isinstance(name, str) else cls
            # every name Keras may look the class (or function) up by
            names = [cls, obj.get("registered_name", cls), inner]
            ours = sorted({n for n in names if isinstance(n, str) and n in MSC_LAYERS})
            if ours:
                found.extend(_msc_layer_problems(obj, ours[0], label, weight_bytes))
            elif cls in CODE_LAYERS:
                found.append(f"{label} (wraps code or a pickle the file holds or names)")
            elif (
                cls in ("Lambda", "TFOpLambda", "__lambda__")
                or cls == "function"
                and (not isinstance(module, str) or not module.startswith("keras"))
            ):
                found.append(f"{label} (runs Python stored in the file)")
            elif trust_code:
                continue
            elif isinstance(module, str) and not module.startswith("keras"):
                found.append(f"{label} (custom object from module {module!r})")
            elif obj.get("registered_name") not in (None, cls) and "module" in obj:
                found.append(f"{label} (registered custom object {obj['registered_name']!r})")
    return found


_MSC_LAYER_CLASSES: dict[str, type] = {}


def msc_layers() -> dict[str, type]:
    """msc's implementation of each of ``MSC_LAYERS`` (the layers codegen.keras writes into
    its source), by registered name: what ``load_keras`` rebuilds them with."""
    if _MSC_LAYER_CLASSES:
        return _MSC_LAYER_CLASSES
    keras = keras_module()

    class SourceWeight(keras.layers.Layer):
        """A weight used as an operand (codegen.keras' SourceWeight): its value, whatever the
        tensor it is called on."""

        def __init__(self, shape, value_dtype, **kwargs):
            super().__init__(**kwargs)
            self.value = self.add_weight(
                shape=tuple(shape),
                dtype=value_dtype,
                initializer="zeros",
                trainable=False,
                name="value",
            )

        def call(self, x):
            return keras.ops.convert_to_tensor(self.value)

    class Sized(keras.layers.Layer):
        """An op with sizes read when the model runs (codegen.keras' Sized): ``shape`` holds
        ints and sums of terms [c, [[i, axis], ...]] over the sizes of the tensors it is
        called with; ``op`` one of SIZED_OPS."""

        def __init__(self, op, shape, value_dtype=None, **kwargs):
            super().__init__(**kwargs)
            self.op, self.shape, self.value_dtype = op, shape, value_dtype

        def sizes(self, tensors):
            out = []
            for size in self.shape:
                if isinstance(size, list):
                    total = 0
                    for c, axes in size:
                        term = c
                        for i, axis in axes:
                            term = term * keras.ops.shape(tensors[i])[axis]
                        total = total + term
                    size = total
                out.append(size)
            return out

        def call(self, x, *others):
            shape, o = self.sizes((x, *others)), keras.ops
            if self.op == "arange":
                return o.arange(*shape, dtype=self.value_dtype)
            if self.op == "size":
                return o.convert_to_tensor(shape[0], dtype=self.value_dtype)
            if self.op == "slice":
                return o.slice(x, shape[: len(shape) // 2], shape[len(shape) // 2 :])
            if self.op == "broadcast_to":
                return o.broadcast_to(x, shape)
            return o.reshape(x, shape)

        def compute_output_spec(self, x, *others):
            shape = [d if isinstance(d, int) else None for d in self.shape]
            shape = {"arange": [None], "size": [], "slice": shape[len(shape) // 2 :]}.get(
                self.op, shape
            )
            dtype = self.value_dtype if self.op in ("arange", "size") else x.dtype
            return keras.KerasTensor(shape, dtype=dtype)

        def get_config(self):
            config = super().get_config()
            config.update(op=self.op, shape=self.shape, value_dtype=self.value_dtype)
            return config

    _MSC_LAYER_CLASSES["msc>SourceWeight"] = SourceWeight
    _MSC_LAYER_CLASSES["msc>Sized"] = Sized
    return _MSC_LAYER_CLASSES


_REGISTRY_LOCK = threading.Lock()


@contextmanager
def _msc_classes_registered(keras: Any) -> Iterator[None]:
    """msc's classes registered under ``MSC_LAYERS``' names while Keras loads a file: Keras
    prefers what is registered globally to the ``custom_objects`` it is given, and a generated
    model.py imported in this process registers its own SourceWeight. Restored afterwards."""
    registry = keras.saving.get_custom_objects()  # Keras' global registry itself
    with _REGISTRY_LOCK:
        before = {k: registry[k] for k in MSC_LAYERS if k in registry}
        registry.update(msc_layers())
        try:
            yield
        finally:
            for k in MSC_LAYERS:
                registry.pop(k, None)
            registry.update(before)


def load_keras(path: str | os.PathLike, *, trust_code: bool = False) -> Any:
    """A ``.keras`` file as a Keras model: its config checked as data, then loaded by Keras
    with ``safe_mode=True`` (no Lambda, no custom objects but msc's own layers, built with
    msc's implementation; nothing in the file runs). A legacy ``.h5`` / ``.hdf5`` model file
    (Keras 2's format) is read by msc.frontend.keras.legacy, checked the same way.

    ``trust_code`` (the CLI's ``--trust-code``): a class the config names from an installed
    package (a KerasHub model saved with ``model.save``) is built by Keras from that package,
    which imports and runs it. Lambda
    layers and layers wrapping code stay refused (safe mode stays on)."""
    path = os.fspath(path)
    if path.lower().endswith(LEGACY_SUFFIXES):
        return load_legacy(path)
    try:
        with zipfile.ZipFile(path) as z:
            info = z.getinfo("config.json")
            if info.file_size > CONFIG_LIMIT:
                raise BadModelError(f"{path}: config.json of {info.file_size} bytes")
            config = json.loads(z.read(info).decode("utf-8"))
            if too_deep(config):
                raise BadModelError(f"{path}: config.json nests deeper than msc reads")
            # what the weights may expand to: as declared, at most 50x the file (plus 16 MiB)
            weight_bytes = min(
                z.getinfo("model.weights.h5").file_size, 50 * os.path.getsize(path) + (16 << 20)
            )
            refused = _refused_classes(config, weight_bytes, trust_code)
            if refused:
                raise BadModelError(
                    f"{path}: refused, loading it would run code that is not Keras': "
                    + "; ".join(refused)
                    + " (build the model in Python and pass the object to msc.from_keras"
                    + ("" if trust_code else ", or pass --trust-code if you trust the file")
                    + ")"
                )
            # the sizes the config asks for, against the weights the file holds (limits.py)
            groups, declared = stored_weights(z)
            if declared > weight_bytes:
                raise BadModelError(
                    f"{path}: refused, model.weights.h5 declares {declared} bytes of weights, "
                    f"more than the file holds ({weight_bytes})"
                )
            too_big = size_problems(config, groups)
            if too_big:
                raise BadModelError(
                    f"{path}: refused, a layer's config asks for sizes beyond the weights the "
                    "file stores or msc's budget: " + "; ".join(too_big)
                )
    except BadModelError:
        raise
    except RecursionError:
        raise BadModelError(f"{path}: config.json nests too deeply") from None
    except (OSError, KeyError, zipfile.BadZipFile, ValueError, UnicodeDecodeError) as e:
        raise BadModelError(
            f"{path}: not a readable .keras file ({type(e).__name__}: {e})"
        ) from None
    keras = keras_module()
    try:
        with _msc_classes_registered(keras):
            return keras.saving.load_model(
                path, custom_objects=msc_layers(), compile=False, safe_mode=True
            )
    except Exception as e:  # noqa: BLE001 - anything keras raises on a bad file is the file's
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise BadModelError(f"{path}: Keras could not load it: {msg}") from None
