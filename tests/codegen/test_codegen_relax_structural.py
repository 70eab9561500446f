"""codegen.relax against TVM's own frontends, as TVM's MSC checked itself: for each small torch
module (tests/codegen/relax_struct_cases.py), ``to_module(msc.from_exported_program(ep))`` is
``tvm.ir.assert_structural_equal`` to ``tvm.relax.frontend.torch.from_exported_program(ep,
keep_params_as_input=True)``, both with their ``params`` detached.

Where TVM's frontend makes a different but equivalent choice that the canonical graph cannot
reproduce, the case is listed in DIFFERENT with the reason; the test fails when such a case
starts matching, so the list stays exact.
"""

from __future__ import annotations

import pytest

tvm = pytest.importorskip("tvm", reason="apache-tvm (the tvm extra) runs the Relax codegen")
torch = pytest.importorskip("torch", reason="the cases are torch modules")

import tvm_ffi  # noqa: E402
from tvm import relax  # noqa: E402
from tvm.relax.frontend.torch import from_exported_program  # noqa: E402

import codegen.relax as cr  # noqa: E402
import msc  # noqa: E402
from tests.codegen.relax_struct_cases import CASES  # noqa: E402

DIFFERENT: dict[str, str] = {
    "max_pool2d": "TVM converts max_pool2d_with_indices and keeps a zeros_like stand-in for the "
    "indices in a tuple; msc's max_pool has no unused indices output",
    "matmul": "torch's decomposition of a batched matmul adds no-op broadcast_to (expand) calls "
    "that TVM keeps; msc's graph holds the matmul alone",
    "attention": "TVM converts the decomposed math of scaled_dot_product_attention (matmuls, "
    "softmax, a -inf guard); msc keeps attention and emits nn.attention",
    "causal_attention": "TVM converts the decomposed math of scaled_dot_product_attention; msc "
    "keeps attention and emits nn.attention with a causal mask",
    "amax": "TVM's ExportedProgram frontend has no converter for aten.amax (msc emits R.max)",
}


def _detach(mod):
    return relax.frontend.detach_params(mod)[0]


def _compare(name: str):
    module, args = CASES[name]
    ep = torch.export.export(module.eval(), args)
    ours = _detach(cr.to_module(msc.from_exported_program(ep)))
    theirs = _detach(from_exported_program(ep, keep_params_as_input=True))
    return ours, theirs


def test_at_least_forty_cases_match() -> None:
    assert len(set(CASES) - set(DIFFERENT)) >= 40


@pytest.mark.parametrize("name", sorted(CASES))
def test_structurally_equal_to_tvm_torch_frontend(name: str) -> None:
    reason = DIFFERENT.get(name)
    if reason is None:
        ours, theirs = _compare(name)
        tvm.ir.assert_structural_equal(ours, theirs)
        return
    try:
        ours, theirs = _compare(name)
    except Exception:
        return  # TVM's frontend cannot convert it
    mismatch = tvm_ffi.get_first_structural_mismatch(ours, theirs)
    assert mismatch is not None, f"{name} now matches TVM; drop it from DIFFERENT ({reason})"
