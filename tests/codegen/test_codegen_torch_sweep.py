"""The ONNX files torch.onnx writes for dynamic transformers, through generated PyTorch.

Each architecture, from a tiny config, is exported by torch.onnx both ways (dynamo=True and the
TorchScript-based dynamo=False) with dynamic batch and sequence dims, read by msc.from_onnx,
generated as PyTorch (codegen.torch.to_module) and run at several batch and sequence sizes
against onnxruntime on the same file. torch.onnx writes ``x.expand(b, -1, -1)`` as a two-way
Expand to a target of ones, replaces -1 and 0 in shapes with Where/Equal, and computes every
size from Shape nodes: what one-way ``tensor.expand`` and size-specialized code got wrong.

Numeric tolerance: |a - b| <= 1e-4 + 1e-4 |b| (float32; T5's unscaled attention sums reach a
few units). The dynamo exports take ~3-10 s each and are marked slow.
"""

from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="codegen.torch emits PyTorch code")
transformers = pytest.importorskip("transformers", reason="the models come from transformers")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime runs the source file")
pytest.importorskip("onnx", reason="torch.onnx writes ONNX")

import codegen.torch as ct  # noqa: E402
import msc  # noqa: E402
from msc.analysis.model import flatten  # noqa: E402

TOL = 1e-4
SIZES = [(1, 1), (2, 3), (3, 9), (1, 17)]  # (batch, seq)
TEXT = ("input_ids", "attention_mask")
SEQ2SEQ = ("input_ids", "attention_mask", "decoder_input_ids")


def _model(arch: str):
    torch.manual_seed(0)
    t = transformers
    if arch == "bert":
        cfg = t.BertConfig(
            vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=64,
        )  # fmt: skip
        return t.BertForMaskedLM(cfg), TEXT
    if arch == "gpt2":
        cfg = t.GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=2, n_positions=64)
        cfg.use_cache = False
        return t.GPT2LMHeadModel(cfg), TEXT
    if arch == "llama":
        cfg = t.LlamaConfig(
            vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, intermediate_size=64, max_position_embeddings=64,
            use_cache=False,
        )  # fmt: skip
        return t.LlamaForCausalLM(cfg), TEXT
    if arch == "t5":
        cfg = t.T5Config(
            vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
            use_cache=False,
        )  # fmt: skip
        return t.T5ForConditionalGeneration(cfg), SEQ2SEQ
    if arch == "bart":
        cfg = t.BartConfig(
            vocab_size=64, d_model=32, encoder_layers=1, decoder_layers=1,
            encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
            decoder_ffn_dim=64, max_position_embeddings=64, use_cache=False,
        )  # fmt: skip
        return t.BartForConditionalGeneration(cfg), SEQ2SEQ
    cfg = t.ViTConfig(
        image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64,
    )  # fmt: skip
    return t.ViTForImageClassification(cfg), ("pixel_values",)


def export(arch: str, how: str, path) -> None:
    """torch.onnx's file of ``arch`` (``how``: "dynamo" or "legacy"), batch and seq dynamic."""
    model, names = _model(arch)
    model.eval()
    if names == ("pixel_values",):
        example = {"pixel_values": torch.randn(2, 3, 32, 32)}
        axes = {"pixel_values": {0: "batch"}}
    else:
        example = {
            n: torch.randint(0, 64, (2, 8)) if "ids" in n else torch.ones(2, 8, dtype=torch.int64)
            for n in names
        }
        axes = {n: {0: "batch", 1: "seq"} for n in names}
    quiet = contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO())
    with quiet[0], quiet[1], warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        if how == "dynamo":
            dims = {"batch": torch.export.Dim("batch", max=16), "seq": torch.export.Dim("seq")}
            shapes = {n: {a: dims[d] for a, d in ax.items()} for n, ax in axes.items()}
            torch.onnx.export(
                model, (), path, kwargs=example, dynamo=True, dynamic_shapes=shapes,
                external_data=False,
            )  # fmt: skip
        else:
            torch.onnx.export(
                model, (), path, kwargs=example, dynamo=False, input_names=list(names),
                dynamic_axes=axes,
            )  # fmt: skip


def feeds(sess, batch: int, seq: int, rng) -> dict[str, np.ndarray]:
    out = {}
    for i in sess.get_inputs():
        if i.name == "pixel_values":
            out[i.name] = rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)
        elif "mask" in i.name:
            m = np.ones((batch, seq), np.int64)
            m[0, seq // 2 + 1 :] = 0  # padding in the first row
            out[i.name] = m
        elif "ids" in i.name:
            out[i.name] = rng.integers(0, 64, (batch, seq)).astype(np.int64)
        else:  # torch.onnx (legacy) makes Llama's logits_to_keep a 0-d input: keep all
            out[i.name] = np.array(0, np.int64)
    return out


ARCHS = ["bert", "gpt2", "llama", "t5", "bart", "vit"]
CASES = [pytest.param(a, "legacy", id=f"{a}-legacy") for a in ARCHS] + [
    pytest.param(a, "dynamo", id=f"{a}-dynamo", marks=pytest.mark.slow) for a in ARCHS
]


@pytest.mark.parametrize(("arch", "how"), CASES)
def test_torch_onnx_transformers_through_generated_pytorch(arch, how, tmp_path):
    path = tmp_path / f"{arch}_{how}.onnx"
    export(arch, how, path)
    sess = ort.InferenceSession(str(path))
    g = msc.from_onnx(path)
    module = ct.to_module(g)
    rng = np.random.default_rng(0)
    for batch, seq in SIZES if arch != "vit" else [(1, 0), (3, 0)]:  # an image fixes seq
        feed = feeds(sess, batch, seq, rng)
        want = sess.run(None, feed)
        with torch.no_grad():
            got = flatten(module(*[torch.from_numpy(feed[v.name]) for v in g.inputs]))
        assert len(got) == len(want)
        for a, b in zip(got, want):
            a = a.detach().numpy()
            assert a.shape == b.shape, (batch, seq, a.shape, b.shape)
            np.testing.assert_allclose(a, b, rtol=TOL, atol=TOL, err_msg=f"{batch}x{seq}")
