"""Representative transformers architectures from tiny random configs: exported, translated,
and run through generated PyTorch and ONNX (onnxruntime) with logits equal to eager, and
torch.onnx's file of each read back by msc.from_onnx. The whole sweep, task by task, is
bench/hf_models.py; these cover what stopped models before: mixture-of-experts (transformers'
grouped_mm_fallback op), repeat_interleave, complex rotary embeddings (view_as_complex /
polar), and a vision model built from its own per-stage config."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="transformers builds the models from configs")

_SPEC = importlib.util.spec_from_file_location(
    "hf_models", Path(__file__).resolve().parents[2] / "bench" / "hf_models.py"
)
hf = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(hf)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("task", "model_type"),
    [
        ("causal-lm", "mixtral"),
        ("causal-lm", "cohere"),
        ("causal-lm", "llama4_text"),
        ("image-classification", "convnext"),
    ],
)
def test_architecture_converts(task: str, model_type: str) -> None:
    rec = hf.run_one(model_type, task)
    assert rec["status"] == "ok", rec
    assert rec["from_onnx"] in ("ok", hf.NO_ONNX), rec
