"""Every canonical op case of the ONNX codegen's table (tests/codegen/test_codegen_onnx_ops.py: one
hand-built single-node graph per row, numpy/torch reference, stated tolerance) through
codegen.torch: the generated module must compute the row's reference within its tolerance.
Beyond the table: what onnxruntime cannot check (an unsorted stable topk's choice among equal
values) and that the flags' extra work is emitted only when a flag is set.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="codegen.torch emits PyTorch code")
import codegen.torch as ct  # noqa: E402
import tests.codegen.test_codegen_onnx_ops as table  # noqa: E402
from msc.ir import DType, Graph, TensorType  # noqa: E402

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


# ---------------------------------------------------------------- beyond the table
def _one_node(op, inputs, attrs):
    g = Graph(op)
    ins = [
        g.add_input(f"in{i}", TensorType(DType.from_numpy(a.dtype), a.shape))
        for i, a in enumerate(inputs)
    ]
    g.set_outputs(g.add_node(op, ins, attrs).outputs)
    return g.validate()


@pytest.mark.parametrize("largest", [True, False])
def test_stable_unsorted_topk_picks_the_lower_indices_among_equal_values(largest) -> None:
    # ONNX leaves the order of an unsorted TopK open, not which equal values it keeps.
    x = table.TIES
    g = _one_node("topk", [x], {"k": 3, "largest": largest, "sorted": False, "stable": True})
    values, indices = ct.to_module(g)(torch.from_numpy(x))
    want = np.argsort(-x if largest else x, -1, kind="stable")[:, :3]
    np.testing.assert_array_equal(np.sort(indices.numpy(), -1), np.sort(want, -1))
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x, indices.numpy(), -1))


def test_flags_off_emit_the_plain_torch_calls() -> None:
    # Without the flags the source promises nothing more than torch does: no sort, no wrap.
    x, i = table.X, np.zeros((2, 2, 4), np.int64)
    src = ct.generate(_one_node("topk", [x], {"k": 2}))
    assert "torch.topk(" in src and "_msc_stable_topk" not in src
    for op, ins in (("gather_elements", [x, i]), ("scatter_elements", [x, i, x[:, :2]])):
        src = ct.generate(_one_node(op, ins, {"axis": 1}))
        assert "torch.where" not in src, src
        assert "torch.where" in ct.generate(
            _one_node(op, ins, {"axis": 1, "negative_indices": True})
        )
