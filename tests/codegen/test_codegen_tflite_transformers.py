"""A transformer with a symbolic batch and sequence -> .tflite (issue 31): a tiny GPT-2 (random
weights) exported by torch.export with ``input_ids`` / ``attention_mask`` keywords and
dynamic batch and sequence, saved as .pt2, converted by ``msc convert`` with its check (the
.tflite read back equivalent to the source graph, no real change allowed; outputs in LiteRT
against the source's), then the written file run by LiteRT at two (batch, seq) sizes other
than the export's against eager PyTorch: atol 1e-4, rtol 1e-4 (the largest difference
measured is under 1e-7). The attention mask pads the end of one row, so the mask is read."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers", reason="tiny transformers model configs")
pytest.importorskip("tflite", reason="the tflite extra (tflite, flatbuffers) is not installed")
pytest.importorskip("ai_edge_litert", reason="LiteRT (ai-edge-litert) is not installed")

from msc.analysis.convert import convert  # noqa: E402
from tests.tflite_cases import quiet  # noqa: E402

EXAMPLE = (2, 8)  # the export's (batch, seq)
SIZES = [(1, 5), (3, 11)]  # where LiteRT runs the written file


def _gpt2():
    cfg = transformers.GPT2Config(
        vocab_size=64, n_embd=32, n_layer=2, n_head=2, n_positions=32, use_cache=False
    )
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(cfg).eval()


def _inputs(batch: int, seq: int) -> dict:
    gen = torch.Generator().manual_seed(batch * 100 + seq)
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[-1, seq - 2 :] = 0  # the last row padded at its end: every query keeps a key
    return {"input_ids": torch.randint(0, 64, (batch, seq), generator=gen), "attention_mask": mask}


def _litert(path, feeds: dict) -> np.ndarray:
    from ai_edge_litert.interpreter import Interpreter

    with quiet():
        it = Interpreter(model_path=str(path))
        details = {d["name"]: d for d in it.get_input_details()}
        assert set(details) == set(feeds), details
        for name, a in feeds.items():
            it.resize_tensor_input(details[name]["index"], list(a.shape))
        it.allocate_tensors()
        for name, a in feeds.items():
            it.set_tensor(details[name]["index"], a)
        it.invoke()
        (out,) = it.get_output_details()
        return np.array(it.get_tensor(out["index"]))


@pytest.mark.slow  # ~15 s: the export, the conversion with its check, two LiteRT runs
def test_dynamic_gpt2_pt2_converts_to_tflite_equivalent_and_runs_at_other_sizes(tmp_path):
    model = _gpt2()
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq", max=32)
    dims = {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}}
    ep = torch.export.export(model, (), _inputs(*EXAMPLE), dynamic_shapes=dims)
    src, out = tmp_path / "gpt2.pt2", tmp_path / "gpt2.tflite"
    torch.export.save(ep, src)
    report = convert(src, out, to="tflite")
    # the attention (a bool mask as where(-inf)) and the mask's index (GATHER_ND of wrapped
    # run-time coordinates) read back as the source's ops: equivalent, nothing allowed
    assert report.ok and report.checked and report.equivalent, (report.verdict, report.changes)
    assert report.verdict.startswith(("equal", "equivalent")), report.verdict
    assert report.numeric is not None and report.numeric.ok
    for b, s in SIZES:
        feeds = _inputs(b, s)
        got = _litert(out, {k: v.numpy() for k, v in feeds.items()})
        with torch.no_grad():
            want = model(**feeds).logits.numpy()
        assert got.shape == want.shape == (b, s, 64)
        np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)
