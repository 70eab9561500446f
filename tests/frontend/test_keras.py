"""The Keras layer table: each built-in layer in a one-layer functional model with a small
config, read by msc.from_keras and run through generated PyTorch and through ONNX
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
from tests.tflite_cases import close, run_onnx, run_torch  # noqa: E402

L = keras.layers
RNG = np.random.default_rng(0)
ATOL = 1e-5


def f32(*shape):
    return RNG.uniform(-1, 1, shape).astype(np.float32)


def _randomize(model):
    """Non-trivial weights (BatchNorm statistics and biases included)."""
    for w in model.weights:
        shape = tuple(w.shape)
        v = RNG.uniform(0.5, 1.5, shape) if "variance" in w.path else RNG.uniform(-0.5, 0.5, shape)
        w.assign(v.astype(np.float32))
    return model


def keras_run(model, arrays):
    out = model(arrays if len(arrays) > 1 else arrays[0])
    out = out if isinstance(out, list | tuple) else [out]
    return [np.asarray(keras.ops.convert_to_numpy(o)) for o in out]


X4 = (6, 7, 3)
X3 = (9, 4)
CASES = [
    ("dense", lambda: L.Dense(5, activation="relu"), [(4,)]),
    ("dense_3d", lambda: L.Dense(5, use_bias=False), [X3]),
    ("conv2d_same_s2", lambda: L.Conv2D(4, 3, strides=2, padding="same"), [X4]),
    ("conv2d_valid_dil", lambda: L.Conv2D(4, 3, dilation_rate=2, activation="tanh"), [X4]),
    ("conv2d_groups", lambda: L.Conv2D(6, (3, 2), groups=3), [(6, 7, 6)]),
    ("conv1d_causal", lambda: L.Conv1D(3, 3, padding="causal"), [X3]),
    ("conv1d_same", lambda: L.Conv1D(3, 2, padding="same", strides=2), [X3]),
    ("depthwise2d", lambda: L.DepthwiseConv2D(3, depth_multiplier=2, padding="same"), [X4]),
    ("depthwise1d", lambda: L.DepthwiseConv1D(3), [X3]),
    ("separable2d", lambda: L.SeparableConv2D(5, 3, depth_multiplier=2), [X4]),
    ("separable1d", lambda: L.SeparableConv1D(5, 2, padding="same"), [X3]),
    ("maxpool2d", lambda: L.MaxPooling2D(2), [X4]),
    ("maxpool2d_same", lambda: L.MaxPooling2D(3, strides=2, padding="same"), [X4]),
    ("avgpool2d_same", lambda: L.AveragePooling2D(3, strides=1, padding="same"), [X4]),
    pytest.param(
        "avgpool2d_same_s2",
        lambda: L.AveragePooling2D(3, strides=2, padding="same"),
        [X4],
        marks=pytest.mark.xfail(
            reason="Keras' torch backend places the odd pixel of average pooling's 'same' "
            "padding differently from TensorFlow's definition (msc follows TensorFlow; "
            "generated PyTorch and ONNX agree with each other)",
            strict=True,
        ),
        id="avgpool2d_same_s2",
    ),
    ("maxpool1d", lambda: L.MaxPooling1D(2), [X3]),
    ("avgpool1d", lambda: L.AveragePooling1D(3, strides=1), [X3]),
    ("gap2d", lambda: L.GlobalAveragePooling2D(), [X4]),
    ("gap2d_keep", lambda: L.GlobalAveragePooling2D(keepdims=True), [X4]),
    ("gmp2d", lambda: L.GlobalMaxPooling2D(), [X4]),
    ("gap1d", lambda: L.GlobalAveragePooling1D(), [X3]),
    ("gmp1d", lambda: L.GlobalMaxPooling1D(), [X3]),
    ("batchnorm4d", lambda: L.BatchNormalization(), [X4]),
    ("batchnorm2d", lambda: L.BatchNormalization(epsilon=1e-5), [(5,)]),
    ("layernorm", lambda: L.LayerNormalization(), [X3]),
    ("layernorm_noscale", lambda: L.LayerNormalization(center=False, scale=False), [X3]),
    *[
        (f"act_{a}", lambda a=a: L.Activation(a), [X3])
        for a in [
            "relu",
            "sigmoid",
            "tanh",
            "softmax",
            "gelu",
            "silu",
            "elu",
            "selu",
            "softplus",
            "softsign",
            "relu6",
            "hard_sigmoid",
            "hard_silu",
            "log_softmax",
            "exponential",
            "leaky_relu",
        ]
    ],
    ("relu_max", lambda: L.ReLU(max_value=0.5), [X3]),
    ("relu_slope", lambda: L.ReLU(negative_slope=0.1), [X3]),
    ("leakyrelu", lambda: L.LeakyReLU(negative_slope=0.3), [X3]),
    ("elu_layer", lambda: L.ELU(alpha=0.7), [X3]),
    ("softmax_axis", lambda: L.Softmax(axis=1), [X3]),
    ("add", lambda: L.Add(), [X3, X3]),
    ("multiply", lambda: L.Multiply(), [X3, X3, X3]),
    ("subtract", lambda: L.Subtract(), [X3, X3]),
    ("maximum", lambda: L.Maximum(), [X3, X3]),
    ("average", lambda: L.Average(), [X3, X3]),
    ("concat", lambda: L.Concatenate(), [X3, (9, 2)]),
    ("concat_axis1", lambda: L.Concatenate(axis=1), [X3, (3, 4)]),
    ("flatten", lambda: L.Flatten(), [X4]),
    ("reshape", lambda: L.Reshape((6, -1)), [X3]),
    ("permute", lambda: L.Permute((2, 1)), [X3]),
    ("dropout", lambda: L.Dropout(0.5), [X3]),
    ("zeropad2d", lambda: L.ZeroPadding2D(((1, 2), (0, 1))), [X4]),
    ("zeropad1d", lambda: L.ZeroPadding1D(2), [X3]),
    ("cropping2d", lambda: L.Cropping2D(((1, 0), (2, 1))), [X4]),
    ("rescaling", lambda: L.Rescaling(1.0 / 255, offset=-0.5), [X4]),
    (
        "normalization",
        lambda: L.Normalization(mean=[0.1, -0.2, 0.3], variance=[0.5, 2.0, 1.5]),
        [X4],
    ),
    ("mha_self", lambda: L.MultiHeadAttention(2, 3), [X3]),
    ("conv2d_transpose", lambda: L.Conv2DTranspose(4, 3, strides=2), [X4]),
    ("conv1d_transpose", lambda: L.Conv1DTranspose(3, 2, strides=3, activation="relu"), [X3]),
    ("upsampling2d", lambda: L.UpSampling2D((2, 3)), [X4]),
    ("upsampling2d_bilinear", lambda: L.UpSampling2D(2, interpolation="bilinear"), [X4]),
    ("upsampling1d", lambda: L.UpSampling1D(2), [X3]),
    ("lstm", lambda: L.LSTM(5), [X3]),
    ("lstm_seq", lambda: L.LSTM(5, return_sequences=True), [X3]),
    ("gru", lambda: L.GRU(4, return_sequences=True), [X3]),
    ("gru_before", lambda: L.GRU(4, reset_after=False), [X3]),
    ("simple_rnn", lambda: L.SimpleRNN(3, activation="relu"), [X3]),
    ("lstm_state", lambda: L.LSTM(4, return_state=True), [X3]),
]


def _model(make, shapes):
    layer = make()
    keras.utils.set_random_seed(0)
    ins = [keras.Input(s, name=f"x{i}") for i, s in enumerate(shapes)]
    if isinstance(layer, L.MultiHeadAttention):
        out = layer(ins[0], ins[0])
    else:
        out = layer(ins if len(ins) > 1 else ins[0])
    return _randomize(keras.Model(ins, out))


@pytest.mark.parametrize(
    "name,make,shapes", CASES, ids=[c[0] if isinstance(c, tuple) else None for c in CASES]
)
def test_layer(name, make, shapes):
    model = _model(make, shapes)
    arrays = [f32(2, *s) for s in shapes]
    ref = keras_run(model, arrays)
    g = msc.from_keras(model)
    msc.from_text(msc.to_text(g))
    why = close(run_torch(g, arrays), ref, ATOL, 1e-5)
    assert not why, f"{name} via torch: {why}"
    why = close(run_onnx(g, arrays), ref, ATOL, 1e-5)
    assert not why, f"{name} via onnx: {why}"


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
    return _randomize(keras.Model(inp, out, name="small_cnn"))


def mlp():
    keras.utils.set_random_seed(2)
    return _randomize(
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
    model = _randomize(keras.Model(inp, L.Add(name="sum")([y, z])))
    g = _check(model, [f32(2, 6)])
    assert "inner/d/kernel" in g.weights and "inner/d" in {
        v.name for n in g.nodes for v in n.outputs
    }
    assert sum(1 for w in g.weights if w.startswith("shared/")) == 2  # one copy, two calls


def test_unsupported_layers_reported_at_once():
    inp = keras.Input(batch_shape=(2, 4, 5))
    a = L.LSTM(3, stateful=True, name="lstm_a")(inp)
    b = L.Flatten()(L.UnitNormalization(name="unit")(inp))
    with pytest.raises(UnsupportedOpsError) as e:  # two branches: both reported
        msc.from_keras(keras.Model(inp, L.Concatenate()([a, b])))
    text = str(e.value)
    assert "lstm_a" in text and "LSTM" in text and "stateful=True" in text
    assert "unit" in text and "UnitNormalization" in text


# ---------------------------------------------------------------- Keras -> msc -> Keras
# Table rows not written back to Keras, with why.
ROUND_TRIP_SKIP: dict[str, str] = {}

ROUND_TRIP = [
    ("small_cnn", small_cnn, [(2, 16, 16, 3)]),
    ("mlp", mlp, [(3, 12)]),
    *[
        (name, lambda make=make, shapes=shapes: _model(make, shapes), [(2, *s) for s in shapes])
        for name, make, shapes in (c for c in CASES if isinstance(c[0], str))
        if name not in ROUND_TRIP_SKIP
    ],
]


@pytest.mark.parametrize("name,make,shapes", ROUND_TRIP, ids=[c[0] for c in ROUND_TRIP])
def test_round_trip(name, make, shapes):
    import codegen.keras

    model = make()
    arrays = [f32(*s) for s in shapes]
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
    model = _randomize(keras.Model(inp, L.Add(name="res")([inp, y])))
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
    return _randomize(keras.Model(ids, out, name="tiny_transformer"))


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
