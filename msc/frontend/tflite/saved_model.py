"""TensorFlow SavedModels, through TensorFlow's own TFLite converter (the ``[tensorflow]`` extra).

msc has no GraphDef frontend: a SavedModel's raw op set, function libraries and checkpoint
bundles are TensorFlow's to interpret. ``from_saved_model`` asks TensorFlow's TFLite converter
for the signature's .tflite bytes and reads them with ``from_tflite``; the converter freezes
the variables into constants named after the ops that read them (``Conv2D1``), so each weight
that equals one of the SavedModel's variables (in the layout TFLite keeps it) takes back the
variable's name.

# NOTE: security
# TensorFlow loads the SavedModel's graph to convert it, and TensorFlow's own guidance is that a
# SavedModel is a program. So a SavedModel is read only when asked for by name (this function,
# or ``--trust-code`` in the CLI), as unpickling is.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from msc.errors import MscError
from msc.ir import Graph

__all__ = [
    "from_saved_model",
    "is_saved_model",
    "saved_model_bytes",
    "signature_function",
    "signature_of",
]

_EXTRA = "pip install 'msc-graph-hub[tensorflow]'"


def is_saved_model(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a SavedModel directory (it holds saved_model.pb or .pbtxt)."""
    p = Path(path)
    return p.is_dir() and any((p / f).is_file() for f in ("saved_model.pb", "saved_model.pbtxt"))


def _tensorflow():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # its C++ INFO / WARNING lines
    try:
        with _quiet():  # absl's and oneDNN's notes when it starts
            import tensorflow as tf
    except ImportError:
        raise MscError(f"reading a TensorFlow SavedModel needs TensorFlow ({_EXTRA})") from None
    tf.get_logger().setLevel("ERROR")
    return tf


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    from msc.io.native import native_stderr_captured

    with native_stderr_captured():
        yield


def _meta_graph(path: str | os.PathLike):
    """The SavedModel's first MetaGraphDef, parsed as data (saved_model.pb, or .pbtxt): its
    signatures and object graph, without TensorFlow loading the model."""
    _tensorflow()
    from google.protobuf import message, text_format
    from tensorflow.core.protobuf import saved_model_pb2

    root = Path(path)
    sm = saved_model_pb2.SavedModel()
    try:
        if (root / "saved_model.pb").is_file():
            sm.ParseFromString((root / "saved_model.pb").read_bytes())
        else:
            text_format.Parse((root / "saved_model.pbtxt").read_text(encoding="utf-8"), sm)
    except (message.DecodeError, text_format.ParseError, UnicodeDecodeError) as e:
        raise MscError(f"{path}: not a readable SavedModel: {_first(e)}") from None
    if not sm.meta_graphs:
        raise MscError(f"{path}: the SavedModel holds no graph")
    return sm.meta_graphs[0]


def signature_of(path: str | os.PathLike, signature: str | None = None) -> str:
    """The signature key to convert: ``signature`` when the model has it, else
    ``serving_default``, else its only one; an MscError listing the keys otherwise. Read
    from saved_model.pb as data (TensorFlow's own ``__saved_model_init_op`` is no signature)."""
    keys = sorted(k for k in _meta_graph(path).signature_def if not k.startswith("__"))
    if signature is not None:
        if signature not in keys:
            have = ", ".join(keys) or "none"
            raise MscError(f"{path}: no signature {signature!r} (it has {have})")
        return signature
    if "serving_default" in keys:
        return "serving_default"
    if len(keys) == 1:
        return keys[0]
    if not keys:
        raise MscError(f"{path}: the SavedModel has no signature to convert")
    raise MscError(
        f"{path}: the SavedModel has {len(keys)} signatures ({', '.join(keys)}); name one as "
        f"{path}:<signature>"
    )


def signature_function(path: str | os.PathLike, signature: str) -> Callable[..., dict]:
    """The SavedModel's signature as a function of numpy arrays by input name, giving numpy
    arrays by output name (TensorFlow runs it)."""
    tf = _tensorflow()
    with _quiet():
        loaded = tf.saved_model.load(os.fspath(path))  # its variables live as long as it

    def run(**inputs: np.ndarray) -> dict[str, np.ndarray]:
        with _quiet():
            outs = loaded.signatures[signature](**{k: tf.constant(v) for k, v in inputs.items()})
        return {k: np.asarray(v) for k, v in outs.items()}

    return run


def saved_model_bytes(path: str | os.PathLike, signature: str) -> bytes:
    """The .tflite bytes TensorFlow's converter makes of ``signature`` (float, builtin ops
    only: an op TFLite has no builtin for is refused, with the converter's list)."""
    tf = _tensorflow()
    conv = tf.lite.TFLiteConverter.from_saved_model(os.fspath(path), signature_keys=[signature])
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    with _quiet():
        try:
            return bytes(conv.convert())
        except Exception as e:
            why = _ops_or_first(e)
            raise MscError(f"{path}: TensorFlow's TFLite converter failed: {why}") from None


def from_saved_model(
    path: str | os.PathLike,
    *,
    signature: str | None = None,
    custom_ops: str = "error",
    name: str = "",
) -> Graph:
    """Translate a TensorFlow SavedModel's signature (default ``serving_default``) into an msc
    Graph, through TensorFlow's TFLite converter and ``from_tflite``. Needs TensorFlow (the
    ``[tensorflow]`` extra), which loads the model's graph: only for models you trust.

    Input and output names are the signature's; weights are named after the variables they
    hold (``dense/kernel``) where one matches, else after the converter's constants."""
    from msc.frontend.tflite import from_tflite

    key = signature_of(path, signature)
    data = saved_model_bytes(path, key)
    g = from_tflite(data, custom_ops=custom_ops, name=name or Path(path).name)
    _variable_names(g, path)
    return g


def _variable_names(g: Graph, path: str | os.PathLike) -> None:
    """Rename each weight whose values are one variable's (as stored, or in the layouts the
    converter writes: a matrix transposed, a conv kernel HWIO as OHWI, a depthwise kernel
    HWCM as 1HW(C*M)) after that variable, when exactly one variable matches."""
    by_digest: dict[tuple, set[str]] = {}
    for var, digests in _variable_digests(path).items():
        for d in digests:
            by_digest.setdefault(d, set()).add(var)
    taken = set(g.weights)
    order = list(g.weights)
    renamed: dict[str, str] = {}
    for w in list(g.weights.values()):
        names = by_digest.get(_digest(w.numpy()), set())
        if len(names) != 1:
            continue
        new = names.pop()
        if new in taken or new in renamed.values():
            continue
        renamed[w.name] = new
    for old, new in renamed.items():
        w = g.weights.pop(old)
        nw = g.add_weight(new, w.numpy(), w.type, role=w.role, aliases=w.aliases)
        w.replace_all_uses_with(nw)
    if renamed:
        g.weights = {renamed.get(k, k): g.weights[renamed.get(k, k)] for k in order}


def _digest(a: np.ndarray) -> tuple:
    return a.dtype.str, a.shape, hashlib.sha256(np.ascontiguousarray(a).tobytes()).digest()


def _layouts(v: np.ndarray) -> list[np.ndarray]:
    forms = [v]
    if v.ndim == 2:
        forms.append(v.T)
    if v.ndim == 4:
        forms.append(np.transpose(v, (3, 0, 1, 2)))  # HWIO -> OHWI (CONV_2D)
        forms.append(v.reshape(1, v.shape[0], v.shape[1], -1))  # HWCM -> 1HW(C*M) (depthwise)
        forms.append(np.transpose(v, (2, 0, 1, 3)))  # HWOI -> OHWI (TRANSPOSE_CONV)
    return forms


def _variable_digests(path: str | os.PathLike) -> dict[str, set[tuple]]:
    """The digests of the SavedModel's variables in each layout ``_layouts`` gives, by their
    TensorFlow names (``dense/kernel``, no ``:0``), read from its checkpoint through the
    object graph one variable at a time (no copy of the weights is kept); empty when it has
    none."""
    tf = _tensorflow()
    prefix = Path(path) / "variables" / "variables"
    if not Path(str(prefix) + ".index").is_file():
        return {}
    nodes = _meta_graph(path).object_graph_def.nodes
    paths: dict[int, str] = {0: ""}
    todo = [0] if nodes else []
    while todo:  # breadth first: each node's shortest path, as the checkpoint keys it
        i = todo.pop(0)
        for child in nodes[i].children:
            if child.node_id not in paths and 0 <= child.node_id < len(nodes):
                paths[child.node_id] = f"{paths[i]}/{child.local_name}".lstrip("/")
                todo.append(child.node_id)
    found: list[tuple[str, str, set[tuple]]] = []  # (name, object path, digests)
    with _quiet():
        try:
            reader = tf.train.load_checkpoint(str(prefix))
        except Exception:
            return {}
        stored = reader.get_variable_to_shape_map()
        for i, p in sorted(paths.items()):
            node = nodes[i]
            key = f"{p}/.ATTRIBUTES/VARIABLE_VALUE"
            if node.WhichOneof("kind") == "variable" and key in stored:
                v = np.asarray(reader.get_tensor(key))
                found.append(
                    (node.variable.name.removesuffix(":0"), p, {_digest(f) for f in _layouts(v)})
                )
    # a variable's own name where it names one value (Keras': ``sequential/conv1/kernel``,
    # which its export lists twice), else its object path (a tf.Module's attributes are all
    # ``Variable``: ``encoder/w``)
    values: dict[str, list[set[tuple]]] = {}
    for name, _, d in found:
        values.setdefault(name, []).append(d)
    out: dict[str, set[tuple]] = {}
    for name, p, d in found:
        one = bool(name) and all(u == d for u in values[name])
        out.setdefault(name if one else p, d)
    return out


def _first(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__


def _ops_or_first(e: BaseException) -> str:
    """The converter's list of ops it could not convert, else its first line."""
    text = str(e)
    ops = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("tf.")]
    if ops:
        return "ops TFLite has no builtin for: " + "; ".join(dict.fromkeys(ops))
    return _first(e)
