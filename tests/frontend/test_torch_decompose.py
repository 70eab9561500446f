"""PyTorch frontend: ops with no converter go through PyTorch's own decompositions."""

from __future__ import annotations

import onnxruntime as ort
import pytest
import torch
from torch import nn

import codegen.onnx
import codegen.torch
import msc
from msc.errors import UnsupportedOpsError
from msc.frontend.torch import decompose as dec


def run_onnx(model, inputs):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return sess.run(None, dict(zip(names, inputs)))


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.ln = nn.LayerNorm(4)

    def forward(self, x):
        return torch.logaddexp(self.ln(self.fc(x)), x)


class _Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blk = _Block()

    def forward(self, x):
        return self.blk(x)


def test_only_unconverted_ops_are_decomposed() -> None:
    torch.manual_seed(0)
    m, x = _Model().eval(), torch.randn(3, 4)
    g = msc.from_torch(m, (x,))
    ops = [n.op for n in g.nodes]
    # linear and layer_norm have converters: they keep their high-level form.
    assert ops[:2] == ["linear", "layer_norm"]
    # logaddexp has none: PyTorch's decomposition replaced it, and every node it produced
    # names it as the source op and the module it was called in.
    rest = g.nodes[2:]
    assert rest and {n.provenance.op for n in rest} == {"aten.logaddexp.default"}
    assert {n.provenance.module for n in rest} == {"blk"}
    want = m(x)
    assert torch.allclose(codegen.torch.to_module(g)(x), want, atol=1e-6)
    (got,) = run_onnx(codegen.onnx.to_model(g), [x.numpy()])
    assert torch.allclose(torch.from_numpy(got), want, atol=1e-5)


def test_decomposition_table_prefers_core_aten() -> None:
    logaddexp = torch.ops.aten.logaddexp.default
    assert dec.decomposition(logaddexp) is not None
    assert dec.overload("aten.logaddexp.default") is logaddexp
    assert dec.overload("not.an.op") is None and dec.overload("operator.add") is None
    # An op with neither a table entry nor a composite kernel has no decomposition.
    assert dec.decomposition(torch.ops.aten._local_scalar_dense.default) is None


def test_report_says_what_the_decomposition_did() -> None:
    class M(nn.Module):
        def forward(self, x):
            return torch.as_strided_scatter(x, torch.zeros(2), (2,), (1,)), x.view(torch.int32)

    with pytest.raises(UnsupportedOpsError) as info:
        msc.from_torch(M(), (torch.ones(3),))
    by_op = {o.op: o.reason for o in info.value.ops}
    # as_strided_scatter was decomposed, into a prim with neither converter nor decomposition.
    prim = by_op["prims.as_strided_scatter.default"]
    assert "decomposition of aten.as_strided_scatter.default" in prim
    assert "PyTorch has no decomposition for it" in prim
    # view.dtype has a converter that refuses; PyTorch has nothing to offer either.
    assert "no decomposition" in by_op["aten.view.dtype"]


def test_composite_library_op_is_decomposed() -> None:
    # A torch.library op with a CompositeImplicitAutograd (Python) kernel that torch.export
    # can trace: translated through that kernel, not kept opaque.
    lib = torch.library.Library("msc_test_dec", "FRAGMENT")
    lib.define("scale_shift(Tensor x, float a) -> Tensor")
    lib.impl("scale_shift", lambda x, a: x * a + 1.0, "CompositeImplicitAutograd")

    class M(nn.Module):
        def forward(self, x):
            return torch.ops.msc_test_dec.scale_shift(x, 3.0)

    x = torch.randn(2, 3)
    g = msc.from_torch(M(), (x,))
    assert {n.op for n in g.nodes} <= {"mul", "add", "constant"}
    assert torch.allclose(codegen.torch.to_module(g)(x), x * 3.0 + 1.0)
