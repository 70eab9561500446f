"""Generated PyTorch as a drop-in for its source module: the source's own state_dict loads
with ``strict=True`` (tied names present and tied, non-persistent buffers with their values,
unused weights kept), and module layouts the source allows (an ``nn.Sequential`` subclass).

Numeric tolerance: outputs equal the source's within rtol=atol=1e-5 (float32).
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="codegen.torch emits PyTorch code")

import codegen.torch as ct  # noqa: E402
import msc  # noqa: E402

TOL = 1e-5


def _load_saved(directory, name="msc_dropin_model"):
    spec = importlib.util.spec_from_file_location(name, directory / "model.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _close(got, want):
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=TOL, atol=TOL)


class _Stack(torch.nn.Sequential):
    def __init__(self) -> None:
        super().__init__(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))


def test_sequential_subclass_children_are_attributes_of_the_root():
    # The root holder's children are "0", "1": the class is a plain nn.Module, so self[0]
    # (written as for an nn.ModuleList) raised TypeError: 'Model' object is not subscriptable.
    src = _Stack().eval()
    x = torch.randn(3, 4)
    g = msc.from_torch(src, (x,))
    m = ct.to_module(g)
    assert list(m.state_dict()) == list(src.state_dict())
    with torch.no_grad():
        _close(m(x), src(x))
    m.load_state_dict(src.state_dict(), strict=True)


# ---------------------------------------------------------------- the source's state_dict
def _saved_class(g, tmp_path, name):
    """The generated class from a saved directory, built with ``Model()`` as a user would: the
    model's class is the file's last (the classes of its blocks come first)."""
    pytest.importorskip("safetensors", reason="the saved module reads safetensors")
    ct.save(g, tmp_path / name)
    mod = _load_saved(tmp_path / name, f"msc_dropin_{name}")
    classes = [
        v for v in vars(mod).values() if isinstance(v, type) and issubclass(v, torch.nn.Module)
    ]
    return classes[-1]


def _hf_models():
    transformers = pytest.importorskip("transformers", reason="the sources are HF models")
    torch.manual_seed(0)
    small = dict(vocab_size=64, num_hidden_layers=2, intermediate_size=64)
    bert = transformers.BertConfig(
        hidden_size=32, num_attention_heads=2, max_position_embeddings=64, **small
    )
    gpt2 = transformers.GPT2Config(
        vocab_size=64, n_embd=32, n_layer=2, n_head=2, n_positions=64, use_cache=False
    )
    llama = transformers.LlamaConfig(
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        use_cache=False,
        tie_word_embeddings=True,
        **small,
    )
    return {
        "bert": (
            transformers.BertForMaskedLM(bert),
            [("bert.embeddings.word_embeddings.weight", "cls.predictions.decoder.weight")],
        ),
        "gpt2": (
            transformers.GPT2LMHeadModel(gpt2),
            [("transformer.wte.weight", "lm_head.weight")],
        ),
        "llama": (
            transformers.LlamaForCausalLM(llama),
            [("model.embed_tokens.weight", "lm_head.weight")],
        ),
    }


@pytest.mark.parametrize("arch", ["bert", "gpt2", "llama"])
def test_generated_module_loads_the_sources_state_dict_strictly(arch, tmp_path):
    # From a saved .pt2 (no module to ask which names are tied), the generated module had one
    # name of a tied weight (no bert.embeddings.word_embeddings), and Model() left the
    # non-persistent buffers (position_ids, rotary inv_freq) as torch.empty, so loading the
    # source's state_dict and running gave an index error or garbage.
    import io

    import transformers.modeling_outputs  # noqa: F401  (registers ModelOutput with pytree)

    hf, ties = _hf_models()[arch]
    hf.eval()
    ids = torch.randint(0, 64, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.int64)
    batch, seq = torch.export.Dim("batch", min=1, max=8), torch.export.Dim("seq", min=2, max=32)
    dims = {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}}
    with torch.no_grad():
        ep = torch.export.export(hf, (ids,), {"attention_mask": mask}, dynamic_shapes=dims)
    buf = io.BytesIO()
    torch.export.save(ep, buf)
    buf.seek(0)
    g = msc.from_exported_program(torch.export.load(buf))

    ids2 = torch.randint(0, 64, (3, 5))
    mask2 = torch.ones(3, 5, dtype=torch.int64)
    mask2[0, 3:] = 0
    with torch.no_grad():
        want = hf(ids2, attention_mask=mask2).logits
    for gen in (ct.to_module(g), _saved_class(g, tmp_path, arch)()):
        gen.load_state_dict(hf.state_dict(), strict=True)
        gen.eval()
        for a, b in ties:
            assert gen.get_parameter(a) is gen.get_parameter(b), (a, b)
        with torch.no_grad():
            got = gen(ids2, mask2)
        _close(got["logits"] if isinstance(got, dict) else got.logits, want)


class _Buffers(torch.nn.Module):
    """A non-persistent buffer of each kind the generated __init__ writes: a ramp, a
    repeated value, a short literal, and one too large and irregular to write as code."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)
        self.pooler = torch.nn.Linear(4, 4)  # its output is not returned: unused state
        g = torch.Generator().manual_seed(0)
        self.register_buffer("ramp", torch.arange(3, 30, 3).reshape(1, 9), persistent=False)
        self.register_buffer("ones", torch.ones(2, 4), persistent=False)
        self.register_buffer("freq", torch.tensor([1.0, 0.1, 0.01, 1e-3]), persistent=False)
        self.register_buffer("table", torch.randn(100, 4, generator=g), persistent=False)

    def forward(self, x, i):
        y = self.proj(x) * self.freq + self.ones.sum()
        return y + self.table[i] + self.ramp[0, i % 9].unsqueeze(-1)


def test_non_persistent_buffers_have_their_values_without_load(tmp_path):
    src = _Buffers().eval()
    x, i = torch.randn(2, 4), torch.tensor([5, 97])
    g = msc.from_torch(src, (x, i))
    source = ct.generate(g)
    assert "torch.arange(3, 30, 3" in source and "torch.ones" not in source
    assert "torch.full((2, 4), 1.0" in source and "torch.tensor([1.0, 0.1" in source
    gen = _saved_class(g, tmp_path, "buffers")()  # the table is read from model.safetensors
    gen.load_state_dict(src.state_dict(), strict=True)  # the pooler is kept: unused state
    with torch.no_grad():
        _close(gen(x, i), src(x, i))
    dropped = ct.to_module(g, drop_unused=True)
    assert "pooler.weight" not in dropped.state_dict()
