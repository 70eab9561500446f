"""PyTorch models -> readable JAX (issue 33): the seven model families of the hierarchy table
(a ResNet-style CNN, BERT, GPT-2, Llama, ViT, Whisper, Mixtral; tiny transformers configs,
random weights) exported by torch.export, written by codegen.jax and run under jax.jit on CPU
against eager PyTorch (atol 1e-4), weights keyed by their state_dict names.

Static shapes here; the same models with a symbolic batch and sequence are
tests/codegen/test_codegen_jax_symbolic.py."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax", reason="the jax extra (jax, jaxlib) is not installed")
pytest.importorskip("transformers", reason="tiny transformers model configs")

import codegen.jax  # noqa: E402
import msc  # noqa: E402
from tests.codegen.test_torch_hierarchy_models import MODELS  # noqa: E402

SLOW = {"whisper", "moe"}  # the largest exports


@pytest.mark.parametrize(
    "name", [pytest.param(m, marks=[pytest.mark.slow] if m in SLOW else []) for m in MODELS]
)
def test_model_to_jax_agrees_with_eager(name):
    model, inputs = MODELS[name][0]()
    g = msc.from_torch(model, (), example_kwargs=inputs)
    fn, params = codegen.jax.to_function(g)
    # keyed by the source's names: every parameter (a tied one once, under its first name)
    assert {k for k, _ in model.named_parameters()} <= set(params)
    args = [np.asarray(v) for v in inputs.values()]
    got = jax.tree_util.tree_leaves(jax.jit(fn)(params, *args))
    with torch.no_grad():
        ref = model(**inputs)
    ref = [ref] if torch.is_tensor(ref) else [r for r in ref.values() if torch.is_tensor(r)]
    assert len(got) == len(ref)
    for a, r in zip(got, ref):
        np.testing.assert_allclose(np.asarray(a), r.numpy(), atol=1e-4, rtol=1e-4)
