"""What each frontend produces from a few small models, pinned as text: a change in a frontend
shows as a reviewed diff of these files. Update with ``pytest --update-golden`` and read the
diff before committing it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import msc
from msc.examples import example_module, onnx_example

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "frontend"


def _torch_cnn() -> msc.Graph:
    module, args, dynamic = example_module("cnn")
    return msc.from_torch(module, args, dynamic_shapes=dynamic)


def _torch_transformer() -> msc.Graph:
    module, args, dynamic = example_module("transformer")
    return msc.from_torch(module, args, dynamic_shapes=dynamic)


def _torch_fx_mlp() -> msc.Graph:
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))
    gm = torch.fx.symbolic_trace(mlp)
    return msc.from_fx(gm, (torch.randn(3, 4),))


def _onnx_cnn() -> msc.Graph:
    return msc.from_onnx(onnx_example(seed=0))


CASES = {
    "torch_cnn": _torch_cnn,
    "torch_transformer": _torch_transformer,
    "torch_fx_mlp": _torch_fx_mlp,
    "onnx_cnn": _onnx_cnn,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_frontend_output_is_pinned(name, request):
    text = msc.to_text(CASES[name]())
    path = GOLDEN / f"{name}.msc"
    if request.config.getoption("--update-golden"):
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} is missing: run pytest --update-golden and review it"
    assert text == path.read_text(encoding="utf-8"), (
        f"the {name} frontend output changed: run pytest --update-golden and review the diff"
    )
