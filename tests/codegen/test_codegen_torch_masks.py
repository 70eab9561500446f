"""Attention masks computed from no input (codegen.torch.prepare.constant_masks).

transformers builds a causal or an all-visible mask from ``arange``s when a model is called
without an attention_mask; the export keeps those nodes. The generated code computes such a
mask when it is generated: the causal triangle becomes ``is_causal=True``, a mask hiding
nothing is left out, anything else stays computed as before. Each case checks the code, the
outputs against eager (atol = rtol = 1e-5) and that the re-export reads back as generated.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import codegen.torch as ct  # noqa: E402
import msc  # noqa: E402


class ArangeMask(torch.nn.Module):
    """SDPA with a bool mask made from aranges: ``kind`` picks the rule."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def forward(self, q, k, v, pad=None):
        i = torch.arange(q.shape[-2])[:, None]
        j = torch.arange(k.shape[-2])[None, :]
        mask = {"causal": j <= i, "open": j >= 0, "band": (i - j).abs() <= 1}[self.kind]
        if pad is not None:
            mask = mask & pad
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask[None, None])


def _args(with_pad: bool = False):
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 6, 8) for _ in range(3))
    return (q, k, v, torch.tensor([True] * 5 + [False])) if with_pad else (q, k, v)


def _generated(kind: str, with_pad: bool = False) -> str:
    module, args = ArangeMask(kind).eval(), _args(with_pad)
    g = msc.from_torch(module, args)
    gen = ct.to_module(g)
    with torch.no_grad():
        np.testing.assert_allclose(gen(*args).numpy(), module(*args).numpy(), rtol=1e-5, atol=1e-5)
        again = msc.from_torch(gen, args)
    same = msc.structural_equal(ct.as_generated(g), again)
    assert same, same.diff
    return gen.msc_source


def test_a_causal_mask_from_aranges_is_sdpas_causal_flag():
    src = _generated("causal")
    assert "is_causal=True" in src
    assert "attn_mask" not in src and "arange" not in src  # the mask's nodes are gone too


def test_a_mask_that_hides_nothing_is_left_out():
    src = _generated("open")
    assert "attn_mask" not in src and "is_causal" not in src


def test_any_other_constant_mask_stays_computed():
    src = _generated("band")
    assert "attn_mask=" in src and "is_causal" not in src


def test_a_mask_an_input_feeds_stays_computed():
    src = _generated("causal", with_pad=True)
    assert "attn_mask=" in src and "is_causal" not in src
