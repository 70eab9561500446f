"""Representative transformers causal-LM architectures from tiny random configs: exported,
translated, and run through generated PyTorch and ONNX (onnxruntime) with logits equal to
eager. The whole sweep is bench/hf_causal_lm.py; these cover what stopped models before:
mixture-of-experts (transformers' grouped_mm_fallback op), repeat_interleave, complex rotary
embeddings (view_as_complex / polar)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="transformers builds the models from configs")

_SPEC = importlib.util.spec_from_file_location(
    "hf_causal_lm", Path(__file__).resolve().parents[2] / "bench" / "hf_causal_lm.py"
)
hf = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(hf)  # type: ignore[union-attr]


@pytest.mark.parametrize("model_type", ["mixtral", "cohere", "llama4_text"])
def test_architecture_converts(model_type: str) -> None:
    rec = hf.run_one(model_type)
    assert rec["status"] == "ok", rec
