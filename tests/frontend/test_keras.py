"""The Keras layer table (its rows in tests/keras_cases.py): each built-in layer in a small
functional model, read by msc.from_keras and run through generated PyTorch and through ONNX
(onnxruntime) against Keras itself on the torch backend; then small whole models, the round
trip Keras -> msc -> codegen.keras -> Keras, and a saved .keras file through the CLI."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
keras = pytest.importorskip("keras", reason="the keras extra (keras 3) is not installed")

import msc  # noqa: E402
from msc.errors import UnsupportedOpsError  # noqa: E402
from tests.keras_cases import (  # noqa: E402
    ATOL,
    CASES,
    EXCLUDED,
    RNG,
    L,
    array_for,
    build_model,
    f32,
    is_gap,
    keras_run,
    layer_of,
    public_layer_classes,
    randomize,
    row,
    steps_of,
    table_classes,
)
from tests.tflite_cases import close, run_onnx, run_torch  # noqa: E402


@pytest.mark.parametrize("name,make,shapes", CASES, ids=[row(c)[0] for c in CASES])
def test_layer(name, make, shapes):
    model = build_model(make, shapes)
    arrays = [array_for(s) for s in shapes]
    ref = keras_run(model, arrays)
    g = msc.from_keras(model)
    msc.from_text(msc.to_text(g))
    why = close(run_torch(g, arrays), ref, ATOL, 1e-5)
    assert not why, f"{name} via torch: {why}"
    why = close(run_onnx(g, arrays), ref, ATOL, 1e-5)
    assert not why, f"{name} via onnx: {why}"


def test_every_keras_layer_has_a_row_or_a_reason():
    """Complete by construction: each public layer class of keras.layers is built by a row of
    the table (passing, or a strict xfail with its reason) or is excluded with its reason."""
    classes = public_layer_classes()
    ok, gaps = table_classes()
    by_name = {cls.__name__: cls for cls in classes}
    missing = sorted(
        names[0] for cls, names in classes.items()
        if cls not in ok | gaps and cls.__name__ not in EXCLUDED
    )  # fmt: skip
    assert not missing, f"keras.layers classes with no table row and no reason: {missing}"
    stale = sorted(n for n in EXCLUDED if n not in by_name)
    assert not stale, f"EXCLUDED names no class of keras.layers: {stale}"
    both = sorted(n for n in EXCLUDED if by_name[n] in ok | gaps)
    assert not both, f"excluded and in the table: {both}"
    assert all(len(why) > 20 for why in EXCLUDED.values())
    # a class with a passing row is supported; its xfail rows are configurations it refuses
    from msc.frontend.keras import supported_layers

    top = {type(layer_of(step)) for c in CASES if not is_gap(c) for step in steps_of(row(c)[1]())}
    unread = sorted(c.__name__ for c in top if c.__name__ not in supported_layers())
    assert not unread, f"passing rows of classes without a converter: {unread}"


def test_embedding():
    keras.utils.set_random_seed(0)
    ids = keras.Input((5,), dtype="int32", name="ids")
    model = keras.Model(ids, L.Embedding(11, 4, name="emb")(ids))
    arrays = [RNG.integers(0, 11, (2, 5)).astype(np.int32)]
    g = msc.from_keras(model)
    assert list(g.weights) == ["emb/embeddings"]
    ref = keras_run(model, arrays)
    for run in (run_torch, run_onnx):
        assert not close(run(g, arrays), ref, ATOL, 1e-5)


def _check(model, arrays, atol=ATOL):
    ref = keras_run(model, arrays)
    g = msc.from_keras(model)
    assert msc.structural_equal(msc.from_text(msc.to_text(g)), g, names=True, weights="types")
    for target, run in (("torch", run_torch), ("onnx", run_onnx)):
        why = close(run(g, arrays), ref, atol, 1e-5)
        assert not why, f"via {target}: {why}"
    return g


def small_cnn():
    keras.utils.set_random_seed(1)
    inp = keras.Input((16, 16, 3), name="image")
    x = L.Conv2D(8, 3, padding="same", name="block1_conv1")(inp)
    x = L.BatchNormalization(name="block1_bn")(x)
    x = L.ReLU(name="block1_relu")(x)
    skip = x
    x = L.DepthwiseConv2D(3, padding="same", name="block2_dw")(x)
    x = L.Conv2D(8, 1, name="block2_pw", activation="relu6")(x)
    x = L.Add(name="block2_add")([x, skip])
    x = L.MaxPooling2D(2, name="pool")(x)
    x = L.GlobalAveragePooling2D(name="gap")(x)
    x = L.Dropout(0.2, name="drop")(x)
    out = L.Dense(5, activation="softmax", name="predictions")(x)
    return randomize(keras.Model(inp, out, name="small_cnn"))


def mlp():
    keras.utils.set_random_seed(2)
    return randomize(
        keras.Sequential(
            [
                keras.Input((12,)),
                L.Dense(16, activation="gelu", name="fc1"),
                L.LayerNormalization(name="ln"),
                L.Dense(3, name="fc2"),
            ],
            name="mlp",
        )
    )


def test_functional_cnn():
    g = _check(small_cnn(), [f32(2, 16, 16, 3)])
    assert "block1_conv1/kernel" in g.weights
    assert [v.name for v in g.inputs] == ["image"]
    assert g.outputs[0].name == "predictions"


def test_sequential_mlp():
    g = _check(mlp(), [f32(3, 12)])
    assert list(g.weights)[:2] == ["mlp/fc1/kernel", "mlp/fc1/bias"]  # the variables' paths


def test_nested_and_shared():
    keras.utils.set_random_seed(3)
    inner = keras.Sequential([L.Dense(4, name="d"), L.ReLU(name="r")], name="inner")
    shared = L.Dense(4, name="shared")
    inp = keras.Input((6,), name="x")
    y = shared(inner(inp))
    z = shared(y)
    model = randomize(keras.Model(inp, L.Add(name="sum")([y, z])))
    g = _check(model, [f32(2, 6)])
    assert "inner/d/kernel" in g.weights and "inner/d" in {
        v.name for n in g.nodes for v in n.outputs
    }
    assert sum(1 for w in g.weights if w.startswith("shared/")) == 2  # one copy, two calls


def test_unsupported_layers_reported_at_once():
    inp = keras.Input(batch_shape=(2, 4, 5))
    a = L.LSTM(3, stateful=True, name="lstm_a")(inp)
    b = L.Flatten()(L.LayerNormalization(rms_scaling=True, name="unit")(inp))
    with pytest.raises(UnsupportedOpsError) as e:  # two branches: both reported
        msc.from_keras(keras.Model(inp, L.Concatenate()([a, b])))
    text = str(e.value)
    assert "lstm_a" in text and "LSTM" in text and "stateful=True" in text
    assert "unit" in text and "LayerNormalization" in text and "rms_scaling" in text


# ---------------------------------------------------------------- Keras -> msc -> Keras
# Table rows that codegen.keras does not write back yet, each with why: strict xfails, so a
# row that starts passing must leave this list.
ROUND_TRIP_GAPS: dict[str, str] = {}

ROUND_TRIP = [
    ("small_cnn", small_cnn, [(16, 16, 3)]),
    ("mlp", mlp, [(12,)]),
    *[
        pytest.param(
            name,
            lambda make=make, shapes=shapes: build_model(make, shapes),
            shapes,
            marks=[pytest.mark.xfail(reason=ROUND_TRIP_GAPS[name], strict=True)]
            if name in ROUND_TRIP_GAPS
            else [],
            id=name,
        )  # fmt: skip
        for name, make, shapes in (c for c in CASES if not is_gap(c))
    ],
]


@pytest.mark.parametrize("name,make,shapes", ROUND_TRIP, ids=[row(c)[0] for c in ROUND_TRIP])
def test_round_trip(name, make, shapes):
    import codegen.keras

    model = make()
    arrays = [array_for(s, 3 if name == "mlp" else 2) for s in shapes]
    ref = keras_run(model, arrays)
    g = msc.from_keras(model)
    src = codegen.keras.generate(g)
    assert "import msc" not in src and max(len(line) for line in src.splitlines()) < 100
    back = codegen.keras.to_model(g)
    why = close(keras_run(back, arrays), ref, ATOL, 1e-5)
    assert not why, why
    # re-import: the generated model reads back into a graph that computes the same
    g2 = msc.from_keras(back)
    why = close(run_torch(g2, arrays), ref, ATOL, 1e-5)
    assert not why, f"re-import: {why}"


# ---------------------------------------------------------------- a saved .keras file, via the CLI
def _cli(*args: str) -> tuple[int, str]:
    import contextlib
    import io

    from msc.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(args))
    return code, out.getvalue()


def test_keras_file_through_the_cli(tmp_path):
    f = tmp_path / "cnn.keras"
    small_cnn().save(f)
    code, text = _cli("inspect", str(f))
    assert code == 0 and "block1_conv1" in text and "(keras)" in text
    code, text = _cli("convert", str(f), "-o", str(tmp_path / "cnn.onnx"))
    assert code == 0, text
    code, text = _cli("convert", str(f), "-o", str(tmp_path / "cnn_keras"), "--to", "keras")
    assert code == 0, text
    assert (tmp_path / "cnn_keras" / "model.py").is_file()
    assert (tmp_path / "cnn_keras" / "model.weights.npz").is_file()
    code, text = _cli("verify", str(f), str(tmp_path / "cnn_keras"))
    assert code == 0 and "result: match" in text, text
    code, text = _cli("verify", str(f), str(tmp_path / "cnn.onnx"))
    assert code == 0 and "result: match" in text, text


# ---------------------------------------------------------------- other sources -> Keras
@pytest.mark.parametrize("name", ["cnn", "transformer"])
def test_torch_examples_to_keras(name):
    import torch

    import codegen.keras
    from msc.examples import example_module

    module, args, _ = example_module(name)
    g = msc.from_torch(module, args)
    with torch.no_grad():
        ref = module(*args)
    ref = [np.asarray(r) for r in (ref if isinstance(ref, tuple | list) else [ref])]
    arrays = [np.asarray(a) for a in args]
    try:
        back = codegen.keras.to_model(g)
    except UnsupportedOpsError as e:
        pytest.xfail(f"not written for Keras yet: {sorted({o.op for o in e.ops})}")
    why = close(keras_run(back, arrays), ref, 1e-4, 1e-4)
    assert not why, why
    why = close(run_torch(msc.from_keras(back), arrays), ref, 1e-4, 1e-4)  # re-import
    assert not why, f"re-import: {why}"


def test_weight_operand_round_trip():
    import codegen.keras

    keras.utils.set_random_seed(4)
    inp = keras.Input((5, 5, 8), name="x")
    from keras.src.applications.convnext import LayerScale

    y = LayerScale(0.5, 8, name="scale")(inp)
    model = randomize(keras.Model(inp, L.Add(name="res")([inp, y])))
    arrays = [f32(2, 5, 5, 8)]
    ref = keras_run(model, arrays)
    g = msc.from_keras(model)
    src = codegen.keras.generate(g)
    assert "class SourceWeight" in src
    back = codegen.keras.to_model(g)
    assert not close(keras_run(back, arrays), ref, ATOL, 1e-5)
    assert not close(run_torch(msc.from_keras(back), arrays), ref, ATOL, 1e-5)


def tiny_transformer():
    keras.utils.set_random_seed(5)
    ids = keras.Input((7,), dtype="int32", name="ids")
    x = L.Embedding(20, 16, name="tok")(ids)
    a = L.MultiHeadAttention(2, 8, name="mha")(x, x)
    x = L.LayerNormalization(name="ln1")(L.Add(name="res1")([x, a]))
    f = L.Dense(32, activation="gelu", name="ffn1")(x)
    x = L.LayerNormalization(name="ln2")(L.Add(name="res2")([x, L.Dense(16, name="ffn2")(f)]))
    out = L.Dense(3, name="head")(L.GlobalAveragePooling1D(name="pool")(x))
    return randomize(keras.Model(ids, out, name="tiny_transformer"))


def test_transformer_all_ways():
    import codegen.keras

    model = tiny_transformer()
    arrays = [RNG.integers(0, 20, (2, 7)).astype(np.int32)]
    ref = keras_run(model, arrays)
    g = _check(model, arrays, atol=1e-4)
    back = codegen.keras.to_model(g)
    assert not close(keras_run(back, arrays), ref, 1e-4, 1e-4)
    assert not close(run_torch(msc.from_keras(back), arrays), ref, 1e-4, 1e-4)


class Subclassed(keras.Model):
    def __init__(self):
        super().__init__()
        self.conv = L.Conv2D(4, 3, padding="same")
        self.fc = L.Dense(3)

    def call(self, x):
        return self.fc(keras.ops.mean(keras.ops.relu(self.conv(x)), axis=(1, 2)))


def test_subclassed_model_goes_through_torch():
    from msc.errors import ConversionError

    model = Subclassed()
    x = f32(2, 8, 8, 3)
    ref = keras_run(model, [x])
    with pytest.raises(ConversionError, match="subclassed"):
        msc.from_keras(model)
    g = msc.from_keras(model, [x])
    assert not close(run_torch(g, [x]), ref, ATOL, 1e-5)


def test_softmax_with_an_explicit_mask():
    """Softmax(x, mask=m): masked positions get Keras' -1e9 before the softmax."""
    x = keras.Input((3, 5), name="x")
    m = keras.Input((3, 5), dtype="bool", name="m")
    model = keras.Model([x, m], L.Softmax(name="sm")(x, mask=m))
    mask = RNG.uniform(size=(2, 3, 5)) < 0.6
    mask[0, 0] = False  # a row masked whole
    arrays = [f32(2, 3, 5), mask]
    ref = keras_run(model, arrays)
    g = msc.from_keras(model)
    for run in (run_torch, run_onnx):
        assert not close(run(g, arrays), ref, ATOL, 1e-5)
