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


# ------------------------------------------------------------------------------ ONNX
ONNX_DIFFERENT: dict[str, str] = {
    "leaky_relu": "TVM's ONNX frontend rounds the alpha attribute through float32 "
    "(0.20000000298...); msc keeps ONNX's attribute value as a double",
    "cast": "TVM's ONNX frontend wraps float -> int32 casts in a finite/modulo guard; msc's cast "
    "is the plain astype (float-to-int overflow is undefined in ONNX)",
    "batch_norm": "TVM's ONNX frontend writes momentum 0.9 and binds the unused mean/var outputs "
    "(inference mode ignores both)",
    "layer_norm": "TVM's ONNX frontend binds LayerNormalization's result and then copies it to "
    "the output; msc binds the output directly as for every other op",
    "gemm": "msc reads a Gemm of an [out, in] weight as linear, written x W^T + b; TVM's ONNX "
    "frontend writes Gemm's C + A B^T, the bias first (the same sum)",
}


def _onnx_cases() -> dict:
    pytest.importorskip("onnx")
    from tests.codegen.relax_onnx_cases import cases

    return cases()


ONNX_CASES = _onnx_cases()


def _compare_onnx(name: str):
    from tvm.relax.frontend.onnx import from_onnx

    model = ONNX_CASES[name]
    ours = _detach(cr.to_module(msc.from_onnx(model)))
    theirs = _detach(from_onnx(model, keep_params_in_input=True))
    return ours, theirs


@pytest.mark.parametrize("name", sorted(ONNX_CASES))
def test_structurally_equal_to_tvm_onnx_frontend(name: str) -> None:
    reason = ONNX_DIFFERENT.get(name)
    ours, theirs = _compare_onnx(name)
    if reason is None:
        tvm.ir.assert_structural_equal(ours, theirs)
        return
    mismatch = tvm_ffi.get_first_structural_mismatch(ours, theirs)
    assert mismatch is not None, f"{name} now matches TVM; drop it from ONNX_DIFFERENT ({reason})"
