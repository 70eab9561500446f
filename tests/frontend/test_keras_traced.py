"""Keras models whose layers are classes outside Keras (KerasHub's ``TransformerEncoder`` and
``PositionEmbedding``, a model's own layers): each such layer is traced on the torch backend
(msc.frontend.keras.traced) and its graph takes its place, with the layer's Keras variables as
weights and the graph's own symbolic dims. The layers here are written in the tests the way
KerasHub writes its own (keras.ops, sublayers, a position table that bounds the sequence), so
the tests need no KerasHub; bench/keras_hub_models.py runs KerasHub's backbones where it is
installed."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
keras = pytest.importorskip("keras", reason="the keras extra (keras 3) is not installed")

import msc  # noqa: E402
from msc.errors import BadModelError, UnsupportedOpsError  # noqa: E402
from msc.ir import SymDim  # noqa: E402
from tests.keras_cases import ATOL, RNG, f32, keras_run, randomize  # noqa: E402
from tests.security import one_error, run_cli  # noqa: E402
from tests.tflite_cases import close, run_onnx, run_torch  # noqa: E402

L = keras.layers
ops = keras.ops
VOCAB, WIDTH, MAX_LEN = 50, 16, 12


@keras.saving.register_keras_serializable(package="msc_tests")
class PositionEmbedding(L.Layer):
    """A learned table of ``length`` positions, cut to the input's sequence length."""

    def __init__(self, length, **kw):
        super().__init__(**kw)
        self.length = length

    def build(self, shape):
        self.table = self.add_weight(shape=(self.length, shape[-1]), name="embeddings")

    def call(self, x):
        seq = ops.shape(x)[1]
        return ops.broadcast_to(self.table[:seq, :], ops.shape(x))

    def compute_output_shape(self, shape):
        return shape

    def get_config(self):
        return {**super().get_config(), "length": self.length}


@keras.saving.register_keras_serializable(package="msc_tests")
class EncoderBlock(L.Layer):
    """Post-norm self-attention and a feed-forward, masked by a padding mask."""

    def __init__(self, heads, hidden, **kw):
        super().__init__(**kw)
        self.heads, self.hidden = heads, hidden

    def build(self, shape):
        width = shape[-1]
        self.attn = L.MultiHeadAttention(self.heads, width // self.heads, name="self_attention")
        self.attn.build(shape, shape)
        self.norm1 = L.LayerNormalization(name="attention_norm")
        self.norm1.build(shape)
        self.up = L.Dense(self.hidden, activation="gelu", name="intermediate")
        self.up.build(shape)
        self.down = L.Dense(width, name="output")
        self.down.build((*shape[:-1], self.hidden))
        self.norm2 = L.LayerNormalization(name="output_norm")
        self.norm2.build(shape)

    def call(self, x, padding_mask=None):
        mask = None
        if padding_mask is not None:
            m = ops.cast(padding_mask, "bool")
            mask = ops.logical_and(m[:, :, None], m[:, None, :])
        x = self.norm1(x + self.attn(x, x, attention_mask=mask))
        return self.norm2(x + self.down(self.up(x)))

    def compute_output_shape(self, shape):
        return shape

    def get_config(self):
        return {**super().get_config(), "heads": self.heads, "hidden": self.hidden}


@keras.saving.register_keras_serializable(package="msc_tests")
class RMSNormalization(L.Layer):
    """Not Keras' RMSNormalization (same class name): scales by (1 + scale), as Gemma's."""

    def build(self, shape):
        self.scale = self.add_weight(shape=(shape[-1],), name="scale", initializer="zeros")

    def call(self, x):
        ms = ops.mean(ops.square(x), axis=-1, keepdims=True)
        return x * ops.rsqrt(ms + 1e-6) * (1 + self.scale)


def encoder(layers=2):
    """A KerasHub-style backbone: inputs by name, custom layers, a pooled first token."""
    keras.utils.set_random_seed(3)
    ids = keras.Input((None,), dtype="int32", name="token_ids")
    pad = keras.Input((None,), dtype="int32", name="padding_mask")
    tok = L.Embedding(VOCAB, WIDTH, name="token_embedding")(ids)
    x = L.Add(name="embeddings_add")([tok, PositionEmbedding(MAX_LEN, name="position")(tok)])
    x = RMSNormalization(name="embeddings_norm")(x)
    for i in range(layers):
        x = EncoderBlock(2, 32, name=f"layer_{i}")(x, padding_mask=pad)
    pooled = L.Dense(WIDTH, activation="tanh", name="pooler")(x[:, 0, :])
    model = keras.Model({"token_ids": ids, "padding_mask": pad}, [pooled, x], name="encoder")
    return randomize(model)


def _feeds(batch=2, seq=7):
    ids = RNG.integers(0, VOCAB, (batch, seq)).astype(np.int32)
    pad = np.ones((batch, seq), np.int32)
    pad[-1, seq - 2 :] = 0
    return {"token_ids": ids, "padding_mask": pad}


def _ref(model, feeds):
    return [np.asarray(keras.ops.convert_to_numpy(o)) for o in model(feeds, training=False)]


def test_custom_layers_are_traced_and_agree_with_keras():
    model = encoder()
    g = msc.from_keras(model)
    for seq in (7, MAX_LEN):  # two lengths: the traced graph is not specialised to one
        feeds = _feeds(seq=seq)
        ref = _ref(model, feeds)
        arrays = [feeds[v.name] for v in g.inputs]
        for target, run in (("torch", run_torch), ("onnx", run_onnx)):
            why = close(run(g, arrays), ref, 1e-4, 1e-4)
            assert not why, f"seq {seq} via {target}: {why}"


def test_traced_weights_are_the_layers_variables_by_path():
    model = encoder(layers=1)
    g = msc.from_keras(model)
    used = {v.path for v in model.weights}
    assert set(g.weights) == used, set(g.weights) ^ used
    w = g.weights["layer_0/self_attention/query/bias"].numpy()
    layer = model.get_layer("layer_0").attn
    assert np.array_equal(w, keras.ops.convert_to_numpy(layer._query_dense.bias))


def test_traced_layers_keep_the_graphs_symbols():
    """The two inputs' sequence dims are one symbol (the layers add and mask across them), at
    most the position table's length; batch stays free."""
    g = msc.from_keras(encoder(layers=1))
    dims = {v.name: v.type.shape for v in g.inputs}
    assert dims["token_ids"] == dims["padding_mask"], dims
    batch, seq = dims["token_ids"]
    assert isinstance(seq, SymDim) and seq.max == MAX_LEN, seq
    assert isinstance(batch, SymDim) and batch.max is None, batch
    for n in g.nodes:
        for o in n.outputs:
            names = {d.name for d in o.type.shape or () if isinstance(d, SymDim)}
            assert names <= {batch.name, seq.name}, (n.name, o.type)


def test_a_class_with_a_keras_layers_name_is_not_read_as_that_layer():
    keras.utils.set_random_seed(4)
    inp = keras.Input((5, 8), name="x")
    norm = RMSNormalization(name="norm")
    model = keras.Model(inp, norm(inp))
    norm.scale.assign(RNG.uniform(-0.5, 0.5, (8,)).astype(np.float32))
    x = f32(2, 5, 8)
    g = msc.from_keras(model)
    assert {n.provenance.op for n in g.nodes} == {"RMSNormalization"}
    assert "rms_norm" not in {n.op for n in g.nodes}  # Keras' layer's converter was not used
    assert not close(run_torch(g, [x]), keras_run(model, [x]), ATOL, 1e-5)


def test_without_the_torch_frontend_such_a_layer_is_refused_by_name():
    from msc.frontend.keras import from_keras

    with pytest.raises(UnsupportedOpsError) as e:
        from_keras(encoder(layers=1))
    text = str(e.value)  # the first: what reads its output is not reached
    assert "PositionEmbedding" in text and "through PyTorch" in text, text


def test_untraceable_layer_is_reported_with_every_other():
    class DataDependent(L.Layer):
        def call(self, x):
            n = int(ops.convert_to_numpy(ops.sum(ops.cast(x > 0, "int32"))))  # a host read
            return x[:, :n]

        def compute_output_shape(self, shape):  # Keras does not call it to build the model
            return shape

    inp = keras.Input((6,), name="x")
    a = DataDependent(name="dd")(inp)
    b = PositionEmbedding(MAX_LEN, name="pos")(L.Reshape((6, 1))(inp))
    b = PositionEmbedding(4, name="short")(b)  # its table is shorter than the sequence
    model = keras.Model(inp, [a, b])
    with pytest.raises(UnsupportedOpsError) as e:
        msc.from_keras(model)
    text = str(e.value)
    assert "'dd'" in text and "'short'" in text and "torch.export" in text, text
    assert "'pos'" not in text, text


def test_get_item_with_ints_none_and_ellipsis():
    inp = keras.Input((4, 6), name="x")
    outs = [inp[:, 0], inp[:, -1, 2:], inp[..., None], inp[:, None, 1:3, -2], inp[..., 0]]
    model = keras.Model(inp, outs)
    x = f32(3, 4, 6)
    g = msc.from_keras(model)
    ref = keras_run(model, [x])
    for run in (run_torch, run_onnx):
        assert not close(run(g, [x]), ref, ATOL, 1e-5)


# ------------------------------------------------------------------------- .keras files
def test_a_file_naming_a_class_outside_keras_needs_trust(tmp_path):
    f = tmp_path / "encoder.keras"
    encoder(layers=1).save(f)
    with pytest.raises(BadModelError, match="--trust-code") as e:
        msc.from_keras(str(f))
    assert "EncoderBlock" in str(e.value)
    code, _, err = run_cli("inspect", str(f))
    one_error(code, err, "EncoderBlock", "--trust-code")
    g = msc.from_keras(str(f), trust_code=True)
    assert {"token_ids", "padding_mask"} == {v.name for v in g.inputs}


def test_a_trusted_file_converts_with_its_checks(tmp_path):
    """The CLI path: loaded with --trust-code (the classes are registered in this process),
    run by Keras with its inputs by name, written as PyTorch whose re-export reads back as the
    graph, and as ONNX."""
    f = tmp_path / "encoder.keras"
    model = encoder(layers=1)
    model.save(f)
    out = tmp_path / "enc_t"
    code, text, err = run_cli("convert", str(f), "-o", str(out), "--trust-code")
    assert code == 0, err
    assert "re-imported output is equivalent" in text + err, text + err
    code, text, err = run_cli("convert", str(f), "--to", "onnx", "-o", str(tmp_path / "e.onnx"),
                              "--trust-code")  # fmt: skip
    assert code == 0, err
    assert "re-imported output is equivalent" in text + err, text + err
