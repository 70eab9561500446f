"""Keras 2 era ``.h5`` model files written by hand with h5py (no download, no TensorFlow), in
the layout tf.keras 2.x writes: the attributes ``model_config`` (Keras 2's config format:
class names without a module, ``batch_input_shape``, old-style ``inbound_nodes``),
``keras_version`` "2.x" and ``backend`` "tensorflow"; the group ``model_weights`` with one
group per layer, its ``weight_names`` (``dense/kernel:0``) and each weight under its name."""

from __future__ import annotations

import base64
import json
import marshal
from pathlib import Path

import numpy as np

RNG = np.random.default_rng(7)


def _init(cls: str = "GlorotUniform") -> dict:
    return {"class_name": cls, "config": {"seed": None} if cls != "Zeros" else {}}


def conv2d(name: str, filters: int, k: int, **kw) -> dict:
    return {"class_name": "Conv2D", "config": {
        "name": name, "trainable": True, "dtype": "float32", "filters": filters,
        "kernel_size": {"class_name": "__tuple__", "items": [k, k]},
        "strides": [1, 1], "padding": kw.get("padding", "same"),
        "data_format": "channels_last", "dilation_rate": [1, 1], "groups": 1,
        "activation": kw.get("activation", "relu"), "use_bias": True,
        "kernel_initializer": _init(), "bias_initializer": _init("Zeros"),
        "kernel_regularizer": None, "bias_regularizer": None, "activity_regularizer": None,
        "kernel_constraint": None, "bias_constraint": None}}  # fmt: skip


def batch_norm(name: str) -> dict:
    return {"class_name": "BatchNormalization", "config": {
        "name": name, "trainable": True, "dtype": "float32", "axis": [3], "momentum": 0.99,
        "epsilon": 0.001, "center": True, "scale": True,
        "beta_initializer": _init("Zeros"), "gamma_initializer": {"class_name": "Ones",
                                                                   "config": {}},
        "moving_mean_initializer": _init("Zeros"),
        "moving_variance_initializer": {"class_name": "Ones", "config": {}},
        "beta_regularizer": None, "gamma_regularizer": None, "beta_constraint": None,
        "gamma_constraint": None}}  # fmt: skip


def simple(cls: str, name: str, **config) -> dict:
    return {"class_name": cls, "config": {"name": name, "trainable": True, "dtype": "float32",
                                          **config}}  # fmt: skip


def dense(name: str, units: int, activation: str = "linear") -> dict:
    return simple("Dense", name, units=units, activation=activation, use_bias=True,
                  kernel_initializer=_init(), bias_initializer=_init("Zeros"),
                  kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                  kernel_constraint=None, bias_constraint=None)  # fmt: skip


def rnn(cls: str, name: str, units: int, **kw) -> dict:
    extra = {"recurrent_activation": "sigmoid"} if cls in ("LSTM", "GRU") else {}
    if cls == "GRU":
        extra["reset_after"] = kw.pop("reset_after", True)
    if cls == "LSTM":
        extra["unit_forget_bias"] = True
    return simple(cls, name, units=units, activation="tanh", use_bias=True,
                  return_sequences=kw.pop("return_sequences", False), return_state=False,
                  go_backwards=False, stateful=False, unroll=False, time_major=False,
                  kernel_initializer=_init(), recurrent_initializer=_init("Orthogonal"),
                  bias_initializer=_init("Zeros"), dropout=0.0, recurrent_dropout=0.0,
                  implementation=2, **extra, **kw)  # fmt: skip


def functional(name: str, layers: list[tuple[dict, list[str]]], inputs, outputs) -> dict:
    """A Keras 2 functional config: each layer with the names of the layers it is called on
    (inbound_nodes as ``[[["conv2d", 0, 0, {}]]]``)."""
    entries = []
    for entry, calls in layers:
        entry = dict(entry, name=entry["config"]["name"])
        entry["inbound_nodes"] = [[[c, 0, 0, {}] for c in calls]] if calls else []
        entries.append(entry)
    return {"class_name": "Functional", "config": {
        "name": name, "layers": entries, "input_layers": [[n, 0, 0] for n in inputs],
        "output_layers": [[n, 0, 0] for n in outputs]}}  # fmt: skip


def input_layer(name: str, shape: list) -> dict:
    return {"class_name": "InputLayer", "config": {
        "batch_input_shape": [None, *shape], "dtype": "float32", "sparse": False,
        "ragged": False, "name": name}}  # fmt: skip


def cnn() -> tuple[dict, dict[str, list[tuple[str, np.ndarray]]], list[int]]:
    """A small CNN as tf.keras 2 writes a functional model: its config, its weights per layer
    ([(weight name, value)]) and its input shape (no batch)."""
    f = np.float32
    layers = [
        (input_layer("input_1", [8, 8, 3]), []),
        (conv2d("conv2d", 4, 3), ["input_1"]),
        (batch_norm("batch_normalization"), ["conv2d"]),
        (simple("MaxPooling2D", "max_pooling2d", pool_size=[2, 2], padding="valid",
                strides=[2, 2], data_format="channels_last"), ["batch_normalization"]),
        (conv2d("conv2d_1", 6, 3, padding="valid"), ["max_pooling2d"]),
        (simple("GlobalAveragePooling2D", "global_average_pooling2d",
                data_format="channels_last", keepdims=False), ["conv2d_1"]),
        (dict(dense("dense", 5, "softmax")), ["global_average_pooling2d"]),
    ]  # fmt: skip
    # tf.keras 2's mixed-precision API writes a layer's dtype as a Policy object
    layers[-1][0]["config"]["dtype"] = {"class_name": "Policy", "config": {"name": "float32"}}
    weights = {
        "conv2d": [("conv2d/kernel:0", RNG.normal(0, 0.3, (3, 3, 3, 4)).astype(f)),
                   ("conv2d/bias:0", RNG.normal(0, 0.1, 4).astype(f))],
        "batch_normalization": [
            ("batch_normalization/gamma:0", RNG.uniform(0.5, 1.5, 4).astype(f)),
            ("batch_normalization/beta:0", RNG.normal(0, 0.1, 4).astype(f)),
            ("batch_normalization/moving_mean:0", RNG.normal(0, 0.1, 4).astype(f)),
            ("batch_normalization/moving_variance:0", RNG.uniform(0.5, 1.5, 4).astype(f))],
        "conv2d_1": [("conv2d_1/kernel:0", RNG.normal(0, 0.3, (3, 3, 4, 6)).astype(f)),
                     ("conv2d_1/bias:0", RNG.normal(0, 0.1, 6).astype(f))],
        "dense": [("dense/kernel:0", RNG.normal(0, 0.3, (6, 5)).astype(f)),
                  ("dense/bias:0", RNG.normal(0, 0.1, 5).astype(f))],
    }  # fmt: skip
    return functional("model", layers, ["input_1"], ["dense"]), weights, [8, 8, 3]


def recurrent() -> tuple[dict, dict[str, list[tuple[str, np.ndarray]]], list[int]]:
    """An LSTM and a GRU as a tf.keras 2 Sequential model: the first layer carries the
    ``batch_input_shape``; the cells' weights are named ``lstm/lstm_cell/kernel:0``."""
    f = np.float32
    layers = [
        rnn("LSTM", "lstm", 6, return_sequences=True, batch_input_shape=[None, 5, 4]),
        rnn("GRU", "gru", 3),
        dense("dense", 2),
    ]

    def w(*shape):
        return RNG.normal(0, 0.4, shape).astype(f)

    weights = {
        "lstm": [("lstm/lstm_cell/kernel:0", w(4, 24)),
                 ("lstm/lstm_cell/recurrent_kernel:0", w(6, 24)),
                 ("lstm/lstm_cell/bias:0", w(24))],
        "gru": [("gru/gru_cell/kernel:0", w(6, 9)),
                ("gru/gru_cell/recurrent_kernel:0", w(3, 9)),
                ("gru/gru_cell/bias:0", w(2, 9))],
        "dense": [("dense/kernel:0", w(3, 2)), ("dense/bias:0", w(2))],
    }  # fmt: skip
    config = {"class_name": "Sequential", "config": {"name": "sequential", "layers": layers}}
    return config, weights, [5, 4]


def wrappers() -> tuple[dict, dict[str, list[tuple[str, np.ndarray]]], list[int]]:
    """TimeDistributed(Dense) then Bidirectional(LSTM) as tf.keras 2 writes them: the wrapped
    layer's config without a module, its weights under the wrapper's name
    (``time_distributed/kernel:0``, ``bidirectional/forward_lstm/lstm_cell/kernel:0``)."""
    f = np.float32

    def w(*shape):
        return RNG.normal(0, 0.4, shape).astype(f)

    td = simple("TimeDistributed", "time_distributed", layer=dense("dense", 3))
    bi = simple("Bidirectional", "bidirectional", layer=rnn("LSTM", "lstm", 2),
                merge_mode="concat")  # fmt: skip
    layers = [(input_layer("input_1", [5, 4]), []), (td, ["input_1"]),
              (bi, ["time_distributed"])]  # fmt: skip
    halves = [
        (f"bidirectional/{d}_lstm/lstm_cell/{n}:0", w(*shape))
        for d in ("forward", "backward")
        for n, shape in (("kernel", (3, 8)), ("recurrent_kernel", (2, 8)), ("bias", (8,)))
    ]
    weights = {
        "time_distributed": [("time_distributed/kernel:0", w(4, 3)),
                             ("time_distributed/bias:0", w(3))],
        "bidirectional": halves,
    }  # fmt: skip
    return functional("model", layers, ["input_1"], ["bidirectional"]), weights, [5, 4]


def lambda_layer(name: str, fn) -> dict:
    """A Keras 2 Lambda layer: ``fn``'s bytecode marshalled and base64'd, as Keras 2's
    func_dump stores it."""
    code = base64.b64encode(marshal.dumps(fn.__code__)).decode("ascii")
    return simple("Lambda", name, function=[code, None, None], function_type="lambda",
                  module="__main__", output_shape=None, output_shape_type="raw",
                  output_shape_module=None, arguments={})  # fmt: skip


def write(path: Path, config: dict, weights: dict[str, list[tuple[str, np.ndarray]]],
          version: str = "2.12.0") -> Path:  # fmt: skip
    """``config`` and ``weights`` as a Keras 2 ``.h5`` file (every layer of the config gets a
    group, those without weights an empty one)."""
    import h5py

    names = [entry["config"]["name"] for entry in _layers(config)]
    with h5py.File(path, "w") as f:
        f.attrs["keras_version"] = version.encode()
        f.attrs["backend"] = b"tensorflow"
        f.attrs["model_config"] = json.dumps(config).encode()
        root = f.create_group("model_weights")
        root.attrs["layer_names"] = np.array([n.encode() for n in names])
        root.attrs["backend"] = b"tensorflow"
        root.attrs["keras_version"] = version.encode()
        for name in names:
            g = root.create_group(name)
            ws = weights.get(name, [])
            g.attrs["weight_names"] = np.array([n.encode() for n, _ in ws])
            for n, value in ws:
                g.create_dataset(n, data=value)
    return path


def _layers(config: dict) -> list[dict]:
    layers = config["config"]["layers"] if isinstance(config["config"], dict) else config["config"]
    return list(layers)
