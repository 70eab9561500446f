"""Shapes that are expressions over symbols, from real producers: torch.export programs whose
sizes are ``2*s0`` and ``s0 + 1``, and transformers models exported with dynamic batch and
sequence, converted once and run at other sizes through both codegens."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper
from torch.export import Dim

import codegen.onnx
import codegen.torch
import msc
from msc.ir import SymDim, SymExpr
from tests.torch_cases import MODEL_CASES, MissingDependency, ints, r

ort = pytest.importorskip("onnxruntime", reason="onnxruntime runs the ONNX models")


class Grows(torch.nn.Module):
    def forward(self, x):
        doubled = torch.cat([x, x], 0)  # 2*n
        longer = torch.nn.functional.pad(x, (0, 0, 1, 0))  # n + 1
        return doubled.relu(), longer * 2


def _grows():
    n = Dim("n", min=2, max=100)
    return msc.from_torch(Grows(), (torch.randn(3, 4),), dynamic_shapes=({0: n},))


def test_torch_export_expressions_are_kept():
    g = _grows()
    n = SymDim("n", 2, 100)
    assert g.inputs[0].type.shape == (n, 4)
    doubled, longer = (v.type.shape[0] for v in g.outputs)
    assert isinstance(doubled, SymExpr) and str(doubled) == "2*n{2..100}"
    assert isinstance(longer, SymExpr) and str(longer) == "n{2..100} + 1"


def test_expressions_survive_text_and_save(tmp_path):
    g = _grows()
    text = msc.to_text(g)
    assert "f32[2*n{2..100}, 4]" in text and "f32[n{2..100} + 1, 4]" in text
    assert msc.structural_equal(g, msc.from_text(text), weights="types")
    msc.save(g, tmp_path / "g")
    back = msc.load(tmp_path / "g")
    assert [v.type for v in back.outputs] == [v.type for v in g.outputs]


def test_generated_pytorch_documents_the_expressions():
    src = " ".join(codegen.torch.generate(_grows()).split())  # the docstring wraps at 100
    assert "Outputs: f32[2*n{2..100}, 4], f32[n{2..100} + 1, 4]." in src


def test_expressions_are_onnx_dim_params_and_read_back():
    g = _grows()
    proto = codegen.onnx.to_model(g)
    params = [
        [d.dim_param or d.dim_value for d in o.type.tensor_type.shape.dim]
        for o in proto.graph.output
    ]
    assert params == [["2*n", 4], ["n + 1", 4]]
    back = msc.from_onnx(proto)
    # The ranges come back from msc's metadata, inside the expressions too.
    assert [v.type for v in back.outputs] == [v.type for v in g.outputs]
    sess = ort.InferenceSession(proto.SerializeToString())
    outs = sess.run(None, {"x": np.ones((7, 4), np.float32)})
    assert [o.shape for o in outs] == [(14, 4), (8, 4)]


def test_foreign_dim_params_stay_names():
    """Only msc's exact spelling reads as an expression; other exporters' names stay symbols."""
    dims = ["batch-size", "s0+1", "2*s0", "unk__3"]
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)],
    )
    m = msc.from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    shape = m.inputs[0].type.shape
    assert shape[0] == SymDim("batch-size") and shape[1] == SymDim("s0+1")
    assert isinstance(shape[2], SymExpr) and shape[2].name == "2*s0"
    assert shape[3] == SymDim("unk__3")


# ---------------------------------------------------------------------------- transformers
def _inputs(case: str, batch: int, seq: int) -> tuple:
    if case == "vit":
        return (r(batch, 3, 16, 16, seed=batch),)
    ids = ints(batch, seq, high=100, seed=seq)
    if case == "bert":
        return ids, torch.ones(batch, seq, dtype=torch.int64)
    return (ids,)


def _first(out):
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, dict):
        return next(iter(out.values()))
    return out[0]


@pytest.mark.parametrize("case", ["bert", "gpt2", "llama", "t5_encoder", "vit"])
def test_transformer_with_dynamic_batch_and_sequence_runs_at_other_sizes(case):
    try:
        model, args = MODEL_CASES[case]()[:2]
    except MissingDependency as e:
        pytest.skip(str(e))
    batch, seq = Dim("batch", min=1, max=16), Dim("seq", min=2, max=32)
    if case == "vit":
        dyn: tuple = ({0: batch},)
    else:
        dyn = tuple({0: batch, 1: seq} for _ in args)
    g = msc.from_torch(model, args, dynamic_shapes=dyn)
    assert isinstance(g.inputs[0].type.shape[0], SymDim)
    module = codegen.torch.to_module(g)
    sess = ort.InferenceSession(codegen.onnx.to_model(g).SerializeToString())
    for b, s in ((1, 5), (3, 17)):
        ins = _inputs(case, b, s)
        with torch.no_grad():
            want = _first(model(*ins))
            got = _first(module(*ins))
        feeds = {i.name: t.numpy() for i, t in zip(sess.get_inputs(), ins)}
        from_onnx = sess.run(None, feeds)[0]
        assert got.shape == want.shape and from_onnx.shape == tuple(want.shape)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(from_onnx, want.numpy(), rtol=1e-4, atol=1e-5)


class Positions(torch.nn.Module):
    """BERT's position ids: a buffer cut to the input's (symbolic) length."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("pos", torch.arange(16).reshape(1, 16))

    def forward(self, ids):
        return ids * 100 + self.pos[:, : ids.shape[1]]


def test_a_slice_to_a_symbolic_end_is_a_slice_and_reimports_as_one():
    """x[:, :n] to a symbolic n is msc's slice with the bound a run-time input (it clamps as
    torch does), as an ONNX Slice of a computed end reads: no gather of a range, no
    normalisation of a bound that cannot be negative. The generated PyTorch writes the same
    subscript, and torch.export of it reads back as the graph it came from."""
    seq = Dim("seq", min=2, max=16)
    ids = torch.randint(0, 9, (2, 5))
    g = msc.from_torch(Positions(), (ids,), dynamic_shapes=({1: seq},))
    ops = [n.op for n in g.nodes]
    assert "slice" in ops and not {"gather", "range", "where", "clamp"} & set(ops), ops
    (sl,) = [n for n in g.nodes if n.op == "slice"]
    assert sl.outputs[0].type.shape == (1, SymDim("seq", 2, 16))
    src = codegen.torch.generate(g)
    assert "_msc_slice_rt" not in src and "self.pos[:, :ids.shape[1]]" in src, src
    module = codegen.torch.to_module(g)
    for n in (2, 9, 16):
        x = torch.randint(0, 9, (3, n))
        assert torch.equal(module(x), Positions()(x))
    again = codegen.torch.constants_as_nodes(
        msc.from_torch(module, (ids,), dynamic_shapes=({1: seq},)), g
    )
    same = msc.structural_equal(codegen.torch.as_generated(g), again)
    assert same, same.diff
