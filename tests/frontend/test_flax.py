"""Flax models built from code with random init, read by msc.from_flax (linen: module and
variables; nnx: the module) and run through generated PyTorch (codegen.torch) and the written
ONNX (onnxruntime) against JAX on CPU, in float32.

Tolerance: the largest difference is at most ``TOL`` (1e-4) times the largest magnitude of
JAX's output (a relative error over the whole output, so a logit near 0 does not decide it).
Each model also checks its weight names (Flax's pytree paths, ``params/Dense_0/kernel``, nnx
``layers/0/linear/kernel``), its roles (batch statistics are buffers), its input names (the
call's signature) and the text round trip.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("jax", reason="the jax extra (jax, jaxlib) is not installed")
pytest.importorskip("flax", reason="flax is not installed (the flax extra)")

import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from flax import nnx  # noqa: E402

import msc  # noqa: E402
from tests.tflite_cases import run_onnx, run_torch  # noqa: E402

TOL = 1e-4
RNG = np.random.default_rng(0)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def ids(*shape, vocab=32):
    return RNG.integers(0, vocab, shape).astype(np.int32)


def rel_err(got: list[np.ndarray], ref: list[np.ndarray]) -> float:
    """max |got - ref| / max |ref| over every output (the worst one)."""
    assert len(got) == len(ref), (len(got), len(ref))
    worst = 0.0
    for a, b in zip(got, ref):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        assert a.shape == b.shape, (a.shape, b.shape)
        assert np.abs(b).max() > 0, "JAX's output is all zeros: the comparison proves nothing"
        worst = max(worst, float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30)))
    return worst


def errors(g: msc.Graph, ref: Any, inputs: list[np.ndarray]) -> dict[str, float]:
    refs = [np.asarray(r) for r in jax.tree_util.tree_leaves(ref)]
    return {run.__name__: rel_err(run(g, inputs), refs) for run in (run_torch, run_onnx)}


def flax_paths(tree: Any) -> dict[str, str]:
    """Flax's own names for the leaves of a linen variables pytree or an nnx state, each with
    the role msc should give it: linen's ``params`` and nnx ``Param`` are parameters, the rest
    (batch statistics) buffers."""
    out = {}

    def is_var(x: Any) -> bool:
        return isinstance(x, nnx.Variable)

    for path, leaf in jax.tree_util.tree_flatten_with_path(tree, is_leaf=is_var)[0]:
        keys = [str(getattr(k, "key", getattr(k, "name", ""))) for k in path]
        param = isinstance(leaf, nnx.Param) if is_var(leaf) else keys[0] == "params"
        out["/".join(keys)] = "parameter" if param else "buffer"
    return out


def check(g: msc.Graph, paths: dict[str, str], ref: Any, inputs: list[np.ndarray]) -> dict:
    named = {n: w.role for n, w in g.weights.items() if w.role}
    assert named == paths
    assert msc.structural_equal(msc.from_text(msc.to_text(g)), g, names=True, weights="types")
    errs = errors(g, ref, inputs)
    assert max(errs.values()) <= TOL, errs
    return errs


# ---------------------------------------------------------------- a CNN
class CNN(nn.Module):
    classes: int = 5

    @nn.compact
    def __call__(self, x):
        x = nn.Conv(8, (3, 3))(x)
        x = nn.BatchNorm(use_running_average=True)(x)
        x = nn.relu(x)
        x = nn.max_pool(x, (2, 2), (2, 2))
        x = nn.Conv(16, (3, 3), strides=(2, 2))(x)
        x = nn.BatchNorm(use_running_average=True)(x)
        x = nn.relu(x)
        x = nn.avg_pool(x, (2, 2), (2, 2))
        x = x.reshape(x.shape[0], -1)
        return nn.Dense(self.classes)(x)


class NnxCNN(nnx.Module):
    def __init__(self, rngs: nnx.Rngs, classes: int = 5):
        self.conv1 = nnx.Conv(3, 8, (3, 3), rngs=rngs)
        self.bn1 = nnx.BatchNorm(8, use_running_average=True, rngs=rngs)
        self.conv2 = nnx.Conv(8, 16, (3, 3), strides=(2, 2), rngs=rngs)
        self.bn2 = nnx.BatchNorm(16, use_running_average=True, rngs=rngs)
        self.head = nnx.Linear(64, classes, rngs=rngs)

    def __call__(self, x):
        x = nnx.relu(self.bn1(self.conv1(x)))
        x = nnx.max_pool(x, (2, 2), (2, 2))
        x = nnx.relu(self.bn2(self.conv2(x)))
        x = nnx.avg_pool(x, (2, 2), (2, 2))
        return self.head(x.reshape(x.shape[0], -1))


def randomize_stats(variables):
    """Batch statistics that are not 0 and 1 (a mean near 0, a variance near 1, so the
    activations stay alive), so a wrong one shows."""

    def stat(path, v):
        key = getattr(path[-1], "key", None)
        if key == "mean":
            return jnp.asarray(RNG.uniform(-0.2, 0.2, v.shape), v.dtype)
        if key == "var":
            return jnp.asarray(RNG.uniform(0.5, 1.5, v.shape), v.dtype)
        return v

    return jax.tree_util.tree_map_with_path(stat, variables)


def test_cnn_linen():
    x = f32(2, 16, 16, 3)
    model = CNN()
    variables = randomize_stats(model.init(jax.random.key(0), x))
    g = msc.from_flax(model, variables, x)
    assert [v.name for v in g.inputs] == ["x"]
    assert g.weights["batch_stats/BatchNorm_0/mean"].role == "buffer"
    assert g.weights["params/Conv_0/kernel"].role == "parameter"
    check(g, flax_paths(variables), model.apply(variables, x), [x])


def test_cnn_nnx():
    x = f32(2, 16, 16, 3)
    model = NnxCNN(nnx.Rngs(0))
    for bn in (model.bn1, model.bn2):
        bn.mean.set_value(jnp.asarray(RNG.uniform(-0.2, 0.2, bn.mean.shape), jnp.float32))
        bn.var.set_value(jnp.asarray(RNG.uniform(0.5, 1.5, bn.var.shape), jnp.float32))
    g = msc.from_flax(model, x)
    assert [v.name for v in g.inputs] == ["x"]
    assert g.weights["bn1/mean"].role == "buffer"
    assert g.weights["conv1/kernel"].role == "parameter"
    check(g, flax_paths(nnx.state(model)), model(x), [x])


def test_cnn_dynamic_batch():
    """dynamic= keeps the batch symbolic: the graph runs at other batch sizes."""
    x = f32(2, 16, 16, 3)
    model = CNN()
    variables = model.init(jax.random.key(0), x)
    g = msc.from_flax(model, variables, x, dynamic={"x": {0: msc.SymDim("batch", 1, 64)}})
    assert g.inputs[0].type.shape[0] == msc.SymDim("batch", 1, 64)
    for n in (1, 5):
        xn = f32(n, 16, 16, 3)
        errs = errors(g, model.apply(variables, xn), [xn])
        assert max(errs.values()) <= TOL, (n, errs)


# ---------------------------------------------------------------- a ResNet-style net
class Block(nn.Module):
    features: int
    stride: int = 1

    @nn.compact
    def __call__(self, x):
        y = nn.Conv(self.features, (3, 3), (self.stride, self.stride), use_bias=False)(x)
        y = nn.relu(nn.BatchNorm(use_running_average=True)(y))
        y = nn.Conv(self.features, (3, 3), use_bias=False)(y)
        y = nn.BatchNorm(use_running_average=True)(y)
        if x.shape[-1] != self.features or self.stride != 1:
            x = nn.Conv(self.features, (1, 1), (self.stride, self.stride), name="proj")(x)
        return nn.relu(x + y)


class ResNet(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Conv(8, (3, 3), name="stem")(x))
        for i, (f, s) in enumerate(((8, 1), (8, 1), (16, 2), (16, 1))):
            x = Block(f, s, name=f"block{i}")(x)
        return nn.Dense(10, name="head")(jnp.mean(x, axis=(1, 2)))


def test_resnet_linen():
    x = f32(2, 16, 16, 3)
    model = ResNet()
    variables = randomize_stats(model.init(jax.random.key(1), x))
    g = msc.from_flax(model, variables, x)
    assert "params/block2/proj/kernel" in g.weights
    check(g, flax_paths(variables), model.apply(variables, x), [x])


# ---------------------------------------------------------------- a transformer encoder
class EncoderLayer(nn.Module):
    heads: int = 4

    @nn.compact
    def __call__(self, x):
        d = x.shape[-1]
        h = nn.LayerNorm()(x)
        x = x + nn.MultiHeadDotProductAttention(self.heads, name="attn")(h, h)
        h = nn.LayerNorm()(x)
        h = nn.Dense(4 * d, name="fc1")(h)
        return x + nn.Dense(d, name="fc2")(nn.gelu(h))


class Encoder(nn.Module):
    vocab: int = 32
    dim: int = 16
    layers: int = 2

    @nn.compact
    def __call__(self, tokens):
        x = nn.Embed(self.vocab, self.dim, name="embed")(tokens)
        pos = self.param("pos", nn.initializers.normal(0.02), (16, self.dim))
        x = x + pos[: tokens.shape[1]]
        for i in range(self.layers):
            x = EncoderLayer(name=f"layer{i}")(x)
        return nn.LayerNorm(name="final_norm")(x)


class NnxEncoderLayer(nnx.Module):
    def __init__(self, dim: int, heads: int, rngs: nnx.Rngs):
        self.norm1 = nnx.LayerNorm(dim, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(heads, dim, decode=False, rngs=rngs)
        self.norm2 = nnx.LayerNorm(dim, rngs=rngs)
        self.fc1 = nnx.Linear(dim, 4 * dim, rngs=rngs)
        self.fc2 = nnx.Linear(4 * dim, dim, rngs=rngs)

    def __call__(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h)
        return x + self.fc2(nnx.gelu(self.fc1(self.norm2(x))))


class NnxEncoder(nnx.Module):
    def __init__(self, rngs: nnx.Rngs, vocab: int = 32, dim: int = 16, layers: int = 2):
        self.embed = nnx.Embed(vocab, dim, rngs=rngs)
        self.layers = nnx.List([NnxEncoderLayer(dim, 4, rngs) for _ in range(layers)])
        self.norm = nnx.LayerNorm(dim, rngs=rngs)

    def __call__(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


def test_encoder_linen():
    tokens = ids(2, 8)
    model = Encoder()
    variables = model.init(jax.random.key(2), tokens)
    g = msc.from_flax(model, variables, tokens)
    assert [v.name for v in g.inputs] == ["tokens"]
    assert "params/layer1/attn/query/kernel" in g.weights
    # nodes sit in their linen scope, under the root as the weights name it
    modules = {n.provenance.module for n in g.nodes}
    assert {"layer0/attn/query", "layer1/fc2", "final_norm"} <= modules
    # Flax's LayerNorm (a one-pass variance, the scale on the inverse deviation) is one op
    assert [n.op for n in g.nodes].count("layer_norm") == 5
    check(g, flax_paths(variables), model.apply(variables, tokens), [tokens])


def test_encoder_nnx():
    tokens = ids(2, 8)
    model = NnxEncoder(nnx.Rngs(3))
    g = msc.from_flax(model, tokens)
    assert "layers/1/attn/query/kernel" in g.weights
    check(g, flax_paths(nnx.state(model)), model(tokens), [tokens])


def test_encoder_dynamic_batch_and_sequence():
    tokens = ids(2, 8)
    model = Encoder()
    variables = model.init(jax.random.key(2), tokens)
    g = msc.from_flax(
        model, variables, tokens, dynamic={"tokens": {0: "batch", 1: msc.SymDim("seq", 1, 16)}}
    )
    assert [str(d) for d in g.inputs[0].type.shape] == ["batch", "seq"]
    for shape in ((1, 5), (3, 16)):
        t = ids(*shape)
        errs = errors(g, model.apply(variables, t), [t])
        assert max(errs.values()) <= TOL, (shape, errs)


# ---------------------------------------------------------------- a decoder with rotary
def rotary(x, base: float = 10000.0):
    """Rotary position embedding of [batch, seq, heads, head_dim] (halves rotated)."""
    seq, dim = x.shape[1], x.shape[-1]
    inv = 1.0 / base ** (jnp.arange(0, dim, 2, dtype=jnp.float32) / dim)
    ang = jnp.arange(seq, dtype=jnp.float32)[:, None] * inv[None, :]
    cos, sin = jnp.cos(ang)[None, :, None, :], jnp.sin(ang)[None, :, None, :]
    x1, x2 = x[..., : dim // 2], x[..., dim // 2 :]
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


class CausalSelfAttention(nn.Module):
    heads: int = 4

    @nn.compact
    def __call__(self, x):
        b, s, d = x.shape
        hd = d // self.heads
        qkv = nn.Dense(3 * d, use_bias=False, name="qkv")(x).reshape(b, s, 3, self.heads, hd)
        q, k, v = rotary(qkv[:, :, 0]), rotary(qkv[:, :, 1]), qkv[:, :, 2]
        att = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(hd).astype(x.dtype)
        mask = jnp.tril(jnp.ones((s, s), bool))
        att = jax.nn.softmax(jnp.where(mask, att, jnp.finfo(x.dtype).min), axis=-1)
        y = jnp.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, s, d)
        return nn.Dense(d, use_bias=False, name="out")(y)


class DecoderLayer(nn.Module):
    @nn.compact
    def __call__(self, x):
        d = x.shape[-1]
        x = x + CausalSelfAttention(name="attn")(nn.RMSNorm(name="norm1")(x))
        h = nn.RMSNorm(name="norm2")(x)
        h = nn.silu(nn.Dense(2 * d, use_bias=False, name="gate")(h)) * nn.Dense(
            2 * d, use_bias=False, name="up"
        )(h)
        return x + nn.Dense(d, use_bias=False, name="down")(h)


class Decoder(nn.Module):
    vocab: int = 32
    dim: int = 16

    @nn.compact
    def __call__(self, tokens):
        embed = nn.Embed(self.vocab, self.dim, name="embed")
        x = embed(tokens)
        for i in range(2):
            x = DecoderLayer(name=f"layer{i}")(x)
        return embed.attend(nn.RMSNorm(name="norm")(x))  # logits tied to the embedding


def test_decoder_rotary_linen():
    tokens = ids(2, 8)
    model = Decoder()
    variables = model.init(jax.random.key(4), tokens)
    g = msc.from_flax(model, variables, tokens)
    assert [n.op for n in g.nodes].count("rms_norm") == 5  # Flax's RMSNorm, one op each
    check(g, flax_paths(variables), model.apply(variables, tokens), [tokens])


# ---------------------------------------------------------------- a Whisper-style model
def sinusoids(length: int, channels: int) -> np.ndarray:
    inc = np.log(10000) / (channels // 2 - 1)
    inv = np.exp(-inc * np.arange(channels // 2))
    t = np.arange(length)[:, None] * inv[None, :]
    return np.concatenate([np.sin(t), np.cos(t)], axis=1).astype(np.float32)


class WhisperEncoder(nn.Module):
    dim: int = 16

    @nn.compact
    def __call__(self, mel):
        x = nn.gelu(nn.Conv(self.dim, (3,), padding=1, name="conv1")(mel))
        x = nn.gelu(nn.Conv(self.dim, (3,), strides=(2,), padding=1, name="conv2")(x))
        x = x + sinusoids(x.shape[1], self.dim)
        for i in range(2):
            x = EncoderLayer(name=f"layer{i}")(x)
        return nn.LayerNorm(name="norm")(x)


class CrossDecoderLayer(nn.Module):
    heads: int = 4

    @nn.compact
    def __call__(self, x, memory):
        d = x.shape[-1]
        causal = nn.make_causal_mask(jnp.ones(x.shape[:2], jnp.int32))
        h = nn.LayerNorm(name="norm1")(x)
        x = x + nn.MultiHeadDotProductAttention(self.heads, name="self_attn")(h, h, mask=causal)
        h = nn.LayerNorm(name="norm2")(x)
        x = x + nn.MultiHeadDotProductAttention(self.heads, name="cross_attn")(h, memory)
        h = nn.gelu(nn.Dense(4 * d, name="fc1")(nn.LayerNorm(name="norm3")(x)))
        return x + nn.Dense(d, name="fc2")(h)


class Whisper(nn.Module):
    vocab: int = 32
    dim: int = 16

    @nn.compact
    def __call__(self, mel, tokens):
        memory = WhisperEncoder(self.dim, name="encoder")(mel)
        embed = nn.Embed(self.vocab, self.dim, name="embed")
        pos = self.param("pos", nn.initializers.normal(0.02), (16, self.dim))
        x = embed(tokens) + pos[: tokens.shape[1]]
        for i in range(2):
            x = CrossDecoderLayer(name=f"decoder{i}")(x, memory)
        return embed.attend(nn.LayerNorm(name="norm")(x))


def test_whisper_style_linen():
    mel, tokens = f32(2, 20, 8), ids(2, 6)
    model = Whisper()
    variables = model.init(jax.random.key(5), mel, tokens)
    g = msc.from_flax(model, variables, mel, tokens)
    assert [v.name for v in g.inputs] == ["mel", "tokens"]
    check(g, flax_paths(variables), model.apply(variables, mel, tokens), [mel, tokens])


# ---------------------------------------------------------------- call options
class DropoutNet(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool = True):
        x = nn.Dense(8)(x)
        x = nn.BatchNorm(use_running_average=not train)(x)
        return nn.Dense(3)(nn.Dropout(0.5, deterministic=not train)(nn.relu(x)))


class NnxDropoutNet(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.fc = nnx.Linear(4, 8, rngs=rngs)
        self.drop = nnx.Dropout(0.5, rngs=rngs)
        self.out = nnx.Linear(8, 3, rngs=rngs)

    def __call__(self, x):
        return self.out(self.drop(nnx.relu(self.fc(x))))

    def logits(self, x):
        return self.fc(x)


def test_linen_call_kwargs_and_method():
    """kwargs= passes what is not an input (train=False: running statistics, no dropout)."""
    x = f32(3, 4)
    model = DropoutNet()
    variables = randomize_stats(model.init(jax.random.key(6), x, train=False))
    g = msc.from_flax(model, variables, x, kwargs={"train": False})
    assert [v.name for v in g.inputs] == ["x"]
    check(g, flax_paths(variables), model.apply(variables, x, train=False), [x])


def test_nnx_rng_state_is_no_weight():
    """An nnx model in eval mode: its dropout's random state is closed over, not a weight;
    method= reads another method."""
    x = f32(3, 4)
    model = NnxDropoutNet(nnx.Rngs(7))
    model.eval()
    g = msc.from_flax(model, x)
    assert sorted(g.weights) == ["fc/bias", "fc/kernel", "out/bias", "out/kernel"]
    check(g, flax_paths(nnx.state(model, nnx.Param)), model(x), [x])
    g = msc.from_flax(model, x, method="logits")
    assert sorted(n for n, w in g.weights.items() if w.uses) == ["fc/bias", "fc/kernel"]


def test_not_a_flax_module():
    with pytest.raises(TypeError, match="flax.linen or flax.nnx"):
        msc.from_flax(lambda x: x, f32(2))


@pytest.mark.slow  # two Flax models exported at symbolic shapes: ~14 s
def test_decoder_and_whisper_dynamic_sequence():
    """A symbolic batch and sequence through rotary positions (jnp.arange of the length), a
    causal mask (jnp.tril) and a position table sliced to the length; run at other sizes."""
    seq = msc.SymDim("seq", 1, 16)
    model = Decoder()
    variables = model.init(jax.random.key(4), ids(2, 8))
    g = msc.from_flax(model, variables, ids(2, 8), dynamic={"tokens": {0: "batch", 1: seq}})
    for shape in ((1, 3), (3, 11)):
        t = ids(*shape)
        errs = errors(g, model.apply(variables, t), [t])
        assert max(errs.values()) <= TOL, (shape, errs)
    model = Whisper()
    mel, tokens = f32(2, 20, 8), ids(2, 6)
    variables = model.init(jax.random.key(5), mel, tokens)
    dyn = {"mel": {0: "batch"}, "tokens": {0: "batch", 1: seq}}
    g = msc.from_flax(model, variables, mel, tokens, dynamic=dyn)
    assert [str(v.type) for v in g.inputs] == ["f32[batch, 20, 8]", "i32[batch, seq{1..16}]"]
    for b, s in ((1, 2), (3, 9)):
        mel, tokens = f32(b, 20, 8), ids(b, s)
        errs = errors(g, model.apply(variables, mel, tokens), [mel, tokens])
        assert max(errs.values()) <= TOL, ((b, s), errs)
