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
