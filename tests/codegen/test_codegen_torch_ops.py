"""Every canonical op case of the ONNX codegen's table (tests/codegen/test_codegen_onnx_ops.py: one
hand-built single-node graph per row, numpy/torch reference, stated tolerance) through
codegen.torch: the generated module must compute the row's reference within its tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="codegen.torch emits PyTorch code")
import codegen.torch as ct  # noqa: E402
import tests.codegen.test_codegen_onnx_ops as table  # noqa: E402

CASES = table.CASES


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_op_case(case) -> None:
    if case.op in ct.EMITTERS.gaps():
        pytest.skip(f"codegen.torch does not emit {case.op}: {ct.EMITTERS.reason(case.op)}")
    g, feeds = table.build(case)
    m = ct.to_module(g)
    args = [torch.from_numpy(np.ascontiguousarray(feeds[v.name])) for v in g.inputs]
    with torch.no_grad():
        out = m(*args)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    got = [o.numpy() for o in outs]
    want = case.ref(*case.inputs)
    want = list(want) if isinstance(want, (list, tuple)) else [want]
    table.check_outputs(got, want, g, case.rtol, case.atol, f"{case.id} via codegen.torch")
