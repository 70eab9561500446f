"""Legacy Keras ``.h5`` model files (issue 32): Keras 3's own ``model.save("m.h5")`` and Keras 2
era files written by hand with h5py (tests/keras2_files.py: Keras 2's config format, weight
names with ``:0``), read by msc.from_keras and run through generated PyTorch and ONNX against
Keras on the torch backend; and the CLI reading them."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
keras = pytest.importorskip("keras", reason="the keras extra (keras 3) is not installed")
pytest.importorskip("h5py", reason="the keras extra (h5py) is not installed")

import msc  # noqa: E402
from tests import keras2_files as k2  # noqa: E402
from tests.keras_cases import keras_run, randomize  # noqa: E402
from tests.tflite_cases import close, run_onnx, run_torch  # noqa: E402

L = keras.layers
ATOL = 1e-5
RNG = np.random.default_rng(3)


def _agrees(g, ref, arrays):
    for run in (run_torch, run_onnx):
        why = close(run(g, arrays), ref, ATOL, 1e-5)
        assert not why, f"{run.__name__}: {why}"


def _keras3_model():
    """Layers whose legacy weights sit in sublayers (an RNN's cell, a Bidirectional's halves,
    a TimeDistributed's layer, attention's projections) beside plain ones."""
    x = keras.Input((8,), name="x")
    img = keras.Input((6, 6, 2), name="img")
    seq = L.Reshape((4, 2), name="reshape")(x)
    pooled = L.GlobalAveragePooling2D(name="gap")(
        L.BatchNormalization(name="bn")(L.SeparableConv2D(4, 3, name="sep")(
            L.Conv2D(5, 3, padding="same", name="conv")(img))))  # fmt: skip
    outs = [
        L.Dense(3, name="fc")(L.Normalization(mean=0.5, variance=2.0, name="norm")(x)),
        pooled,
        L.LSTM(3, name="lstm")(seq),
        L.Bidirectional(L.GRU(2, name="g"), name="bi")(seq),
        L.TimeDistributed(L.Dense(2, name="inner"), name="td")(seq),
        L.MultiHeadAttention(2, 3, name="mha")(seq, seq),
        L.LayerNormalization(name="ln")(seq),
    ]
    return randomize(keras.Model([x, img], outs))


def test_keras3_h5_file_reads_as_the_model(tmp_path):
    model = _keras3_model()
    f = tmp_path / "k3.h5"
    model.save(f)
    g = msc.from_keras(f)
    arrays = [RNG.normal(size=(2, 8)).astype(np.float32),
              RNG.normal(size=(2, 6, 6, 2)).astype(np.float32)]  # fmt: skip
    _agrees(g, keras_run(model, arrays), arrays)
    # weights named by their layer, valued as stored
    for w in model.weights:
        np.testing.assert_array_equal(g.weights[w.path].numpy(), keras.ops.convert_to_numpy(w))
    assert {"fc/kernel", "lstm/lstm_cell/kernel", "mha/query/kernel"} <= set(g.weights)


def test_keras3_sequential_h5_weights_are_named_by_layer(tmp_path):
    model = randomize(keras.Sequential([keras.Input((4,)), L.Dense(3, name="fc")], name="seq"))
    f = tmp_path / "seq.hdf5"
    model.save(f.with_suffix(".h5"))
    f.with_suffix(".h5").rename(f)  # Keras writes .h5; msc reads .hdf5 the same
    g = msc.from_keras(f)
    assert sorted(g.weights) == ["fc/bias", "fc/kernel"]  # not seq/fc/kernel
    x = [RNG.normal(size=(2, 4)).astype(np.float32)]
    _agrees(g, keras_run(model, x), x)


def _reference(make, weights):
    """The model tests/keras2_files.py writes, built in Keras 3 code with the same weights:
    what the file means, independent of msc's reading of it."""
    model = make()
    for layer in model.layers:
        if layer.weights:
            layer.set_weights([v for _, v in weights[layer.name]])
    return model


def _ref_cnn():
    x = keras.Input((8, 8, 3))
    y = L.Conv2D(4, 3, padding="same", activation="relu", name="conv2d")(x)
    y = L.BatchNormalization(name="batch_normalization")(y)
    y = L.MaxPooling2D(name="max_pooling2d")(y)
    y = L.Conv2D(6, 3, activation="relu", name="conv2d_1")(y)
    y = L.GlobalAveragePooling2D(name="global_average_pooling2d")(y)
    return keras.Model(x, L.Dense(5, activation="softmax", name="dense")(y))


def _ref_recurrent():
    x = keras.Input((5, 4))
    y = L.LSTM(6, return_sequences=True, name="lstm")(x)
    y = L.GRU(3, name="gru")(y)
    return keras.Model(x, L.Dense(2, name="dense")(y))


def _ref_wrappers():
    x = keras.Input((5, 4))
    y = L.TimeDistributed(L.Dense(3, name="dense"), name="time_distributed")(x)
    return keras.Model(x, L.Bidirectional(L.LSTM(2, name="lstm"), name="bidirectional")(y))


KERAS2 = {
    "cnn": (k2.cnn, _ref_cnn),
    "recurrent": (k2.recurrent, _ref_recurrent),
    "wrappers": (k2.wrappers, _ref_wrappers),
}


@pytest.mark.parametrize("case", sorted(KERAS2))
def test_keras2_h5_file_agrees_with_keras(tmp_path, case):
    make, ref_make = KERAS2[case]
    config, weights, shape = make()
    f = k2.write(tmp_path / f"{case}.h5", config, weights)
    g = msc.from_keras(f)
    # named as the file names them, without the ``:0``
    assert sorted(g.weights) == sorted(n[:-2] for ws in weights.values() for n, _ in ws)
    x = [RNG.normal(size=(2, *shape)).astype(np.float32)]
    _agrees(g, keras_run(_reference(ref_make, weights), x), x)


def test_keras22_sequential_as_a_list_of_layers(tmp_path):
    """Keras 2.2 (2017) wrote a Sequential's config as the bare list of its layers."""
    config, weights, shape = k2.recurrent()
    config["config"] = config["config"]["layers"]
    f = k2.write(tmp_path / "old.h5", config, weights, version="2.2.4")
    x = [RNG.normal(size=(2, *shape)).astype(np.float32)]
    _agrees(msc.from_keras(f), keras_run(_reference(_ref_recurrent, weights), x), x)


def test_h5_through_the_cli(tmp_path):
    from tests.analysis.test_cli import run

    config, weights, _ = k2.cnn()
    f = k2.write(tmp_path / "cnn.h5", config, weights)
    assert "(keras)" in run("inspect", f).stdout
    onnx_file = tmp_path / "cnn.onnx"
    report = json.loads(run("convert", f, "-o", onnx_file, "--json").stdout)
    assert report["ok"], report
    verify = json.loads(run("verify", f, onnx_file, "--json").stdout)
    assert verify["ok"] and max(o["max_abs"] for o in verify["outputs"]) < 1e-5, verify
    assert "verdict: equivalent" in run("diff", f, onnx_file).stdout
