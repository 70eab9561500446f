"""Custom ops from real producers: a torch.library op through torch -> msc -> PyTorch and
ONNX, and an onnxruntime com.microsoft op through ONNX -> msc -> ONNX (run in onnxruntime)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

import codegen.onnx
import codegen.torch
import msc
from msc.errors import UnsupportedOpsError
from tests.security import run_cli

ort = pytest.importorskip("onnxruntime", reason="onnxruntime runs the ONNX models")


@torch.library.custom_op("msc_test::scale_add", mutates_args=())
def scale_add(x: torch.Tensor, y: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    return x * alpha + y


@scale_add.register_fake
def _(x, y, alpha=1.0):
    return torch.empty_like(x)


@torch.library.custom_op("msc_test::split_sum", mutates_args=())
def split_sum(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x.sum(0), x.sum(1)


@split_sum.register_fake
def _(x):
    return x.new_empty(x.shape[1]), x.new_empty(x.shape[0])


class UsesLibraryOps(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = torch.ops.msc_test.scale_add(self.lin(x), x, alpha=2.5)
        a, b = torch.ops.msc_test.split_sum(torch.relu(y))
        return a, b * 2


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return UsesLibraryOps().eval(), torch.randn(3, 4)


def test_error_mode_reports_every_library_op_at_once(model):
    m, x = model
    with pytest.raises(UnsupportedOpsError) as e:
        msc.from_torch(m, (x,))
    ops = {o.op for o in e.value.ops}
    assert ops == {"msc_test.scale_add.default", "msc_test.split_sum.default"}
    assert "custom_ops='keep'" in str(e.value)


def test_torch_library_op_to_pytorch_calls_the_op(model):
    m, x = model
    g = msc.from_torch(m, (x,), custom_ops="keep")
    kept = [n for n in g.nodes if "::" in n.op]
    assert [n.op for n in kept] == ["msc_test::scale_add@1", "msc_test::split_sum@1"]
    assert kept[0].attrs == {"alpha": 2.5}
    assert kept[0].provenance.op == "msc_test.scale_add.default"
    src = codegen.torch.generate(g)
    assert "torch.ops.msc_test.scale_add.default(" in src
    out = codegen.torch.to_module(g)(x)
    want = m(x)
    for a, b in zip(out, want):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    # The text format and msc.save keep it.
    text = msc.to_text(g)
    assert msc.to_text(msc.from_text(text)) == text


def test_torch_codegen_refuses_a_bytes_attribute_of_a_registered_op(model):
    """No torch schema argument takes bytes (an ONNX custom node's binary string): the node
    is refused by name, and the blob never becomes code."""
    m, x = model
    g = msc.from_torch(m, (x,), custom_ops="keep")
    node = next(n for n in g.nodes if n.op == "msc_test::scale_add@1")
    node.attrs = {"alpha": b'\x00");__import__("os")#'}
    with pytest.raises(UnsupportedOpsError) as e:
        codegen.torch.generate(g)
    assert "msc_test::scale_add@1" in str(e.value)
    assert "attribute(s) ['alpha'] hold binary data (bytes)" in str(e.value)


def test_torch_library_op_to_onnx_is_a_node_in_its_domain(model, tmp_path):
    m, x = model
    g = msc.from_torch(m, (x,), custom_ops="keep")
    proto = codegen.onnx.to_model(g)
    domains = {o.domain: o.version for o in proto.opset_import}
    assert domains["msc_test"] == 1
    kept = [n for n in proto.graph.node if n.domain == "msc_test"]
    assert [n.op_type for n in kept] == ["scale_add", "split_sum"]
    assert helper.get_attribute_value(kept[0].attribute[0]) == pytest.approx(2.5)
    onnx.checker.check_model(proto)
    # ... and the ONNX file reads back, kept, to the same graph; to PyTorch it calls the op.
    back = msc.from_onnx(proto, custom_ops="keep")
    assert [n.op for n in back.nodes if "::" in n.op] == [n.op for n in g.nodes if "::" in n.op]
    out = codegen.torch.to_module(back)(x)
    for a, b in zip(out, m(x)):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def _inverse_model() -> onnx.ModelProto:
    """com.microsoft Inverse (onnxruntime's contrib op; no canonical msc op) between
    standard ops, with the value_info onnxruntime-made models carry."""
    nodes = [
        helper.make_node("Add", ["x", "eye"], ["a"], name="shift"),
        helper.make_node("Inverse", ["a"], ["inv"], domain="com.microsoft", name="inv"),
        helper.make_node("Relu", ["inv"], ["y"], name="relu"),
    ]
    eye = helper.make_tensor("eye", TensorProto.FLOAT, [3, 3], (np.eye(3) * 3).ravel().tolist())
    g = helper.make_graph(
        nodes,
        "inverse",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3, 3])],
        initializer=[eye],
        value_info=[
            helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 3, 3]),
            helper.make_tensor_value_info("inv", TensorProto.FLOAT, ["batch", 3, 3]),
        ],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(g, opset_imports=opsets, ir_version=8)


def _run(proto: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    return ort.InferenceSession(proto.SerializeToString()).run(None, {"x": x})[0]


def test_com_microsoft_op_through_onnx_runs_in_onnxruntime():
    src = _inverse_model()
    with pytest.raises(UnsupportedOpsError, match="com.microsoft"):
        msc.from_onnx(src)
    g = msc.from_onnx(src, custom_ops="keep")
    (node,) = [n for n in g.nodes if "::" in n.op]
    assert node.op == "com.microsoft::Inverse@1" and node.name == "inv"
    out = codegen.onnx.to_model(g, opset=17)
    assert {o.domain: o.version for o in out.opset_import}["com.microsoft"] == 1
    x = np.random.default_rng(0).random((2, 3, 3), dtype=np.float32)
    np.testing.assert_allclose(_run(out, x), _run(src, x), rtol=1e-6, atol=1e-6)
    assert msc.structural_equal(g, msc.from_onnx(out, custom_ops="keep"))


def test_com_microsoft_op_to_pytorch_names_the_op_and_domain():
    g = msc.from_onnx(_inverse_model(), custom_ops="keep")
    with pytest.raises(UnsupportedOpsError) as e:
        codegen.torch.generate(g)
    assert "com.microsoft::Inverse@1" in str(e.value)
    assert "domain 'com.microsoft'" in str(e.value)


def test_no_model_text_becomes_code():
    """A custom op's names reach generated code only as identifiers of a registered op."""
    g = msc.from_onnx(_inverse_model(), custom_ops="keep")
    node = next(n for n in g.nodes if "::" in n.op)
    for hostile in ("os::system@1", "builtins::eval@1", "a b::c@1", "aten::__import__@1"):
        node.op = hostile
        with pytest.raises(UnsupportedOpsError):
            codegen.torch.generate(g)


def test_cli_keeps_custom_ops_and_inspect_lists_them(tmp_path):
    path = tmp_path / "inv.onnx"
    onnx.save(_inverse_model(), path)
    code, out, err = run_cli("inspect", str(path))
    assert code == 2 and "com.microsoft" in err
    code, out, err = run_cli("inspect", str(path), "--custom-ops", "keep")
    assert code == 0, err
    assert "custom ops" in out and "com.microsoft::Inverse@1  x1" in out
    code, out, err = run_cli(
        "convert",
        str(path),
        "-o",
        str(tmp_path / "out.onnx"),
        "--custom-ops",
        "keep",
        "--opset",
        "17",
    )
    assert code == 0, err
    x = np.random.default_rng(1).random((4, 3, 3), dtype=np.float32)
    np.testing.assert_allclose(
        _run(onnx.load(tmp_path / "out.onnx"), x), _run(_inverse_model(), x), rtol=1e-6
    )


def _flex_model() -> onnx.ModelProto:
    """FlexAttention (ai.onnx.preview, no onnxruntime kernel) whose score_mod graph adds an
    initializer of its own."""
    f32 = TensorProto.FLOAT
    score_mod = helper.make_graph(
        [helper.make_node("Add", ["scores", "bias"], ["out"])],
        "score_mod_bias",
        [helper.make_tensor_value_info("scores", f32, ["B", "H", "L", "S"])],
        [helper.make_tensor_value_info("out", f32, ["B", "H", "L", "S"])],
        [helper.make_tensor("bias", f32, [], [0.5])],
    )
    node = helper.make_node(
        "FlexAttention", ["q", "k", "v"], ["y"], domain="ai.onnx.preview", score_mod=score_mod
    )
    io = [helper.make_tensor_value_info(n, f32, [1, 2, 3, 4]) for n in ("q", "k", "v", "y")]
    g = helper.make_graph([node], "flex", io[:3], io[3:])
    opsets = [helper.make_opsetid("", 26), helper.make_opsetid("ai.onnx.preview", 1)]
    return helper.make_model(g, opset_imports=opsets)


def test_custom_node_keeps_its_graph_attribute_self_contained():
    """A graph attribute becomes an msc subgraph; written back, the subgraph holds the weights
    it reads (the op may run it on its own) and the model does not hold them twice; onnx's
    reference evaluator gives the same outputs on both models."""
    from onnx.reference import ReferenceEvaluator

    model = _flex_model()
    g = msc.from_onnx(model, custom_ops="keep")
    (node,) = g.nodes
    assert node.op == "ai.onnx.preview::FlexAttention@1"
    assert [n.op for n in node.attrs["score_mod"].nodes] == ["add"]
    assert msc.to_text(msc.from_text(msc.to_text(g))) == msc.to_text(g)
    out = codegen.onnx.to_model(g)
    onnx.checker.check_model(out)
    (flex,) = out.graph.node
    assert flex.domain == "ai.onnx.preview" and not out.graph.initializer
    assert [t.name for t in flex.attribute[0].g.initializer] == ["bias__score_mod_bias"]
    msc.assert_structural_equal(g, msc.from_onnx(out, custom_ops="keep"))
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal((1, 2, 3, 4)).astype(np.float32) for n in "qkv"}
    (want,) = ReferenceEvaluator(model).run(None, feeds)
    (got,) = ReferenceEvaluator(out).run(None, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_keep_keeps_a_node_its_converter_refuses():
    """Dropout with training_mode computed at run time has a converter that cannot take it:
    "keep" keeps the node as an ai.onnx custom op (named by the opset that last changed
    Dropout, whatever the model's opset), and onnxruntime runs the regenerated model."""
    f32 = TensorProto.FLOAT
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y"])
    ins = [
        helper.make_tensor_value_info("x", f32, [2, 3]),
        helper.make_tensor_value_info("r", f32, []),
        helper.make_tensor_value_info("t", TensorProto.BOOL, []),
    ]
    g = helper.make_graph([node], "d", ins, [helper.make_tensor_value_info("y", f32, [2, 3])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    with pytest.raises(UnsupportedOpsError):
        msc.from_onnx(model)
    kept = msc.from_onnx(model, custom_ops="keep")
    assert [n.op for n in kept.nodes] == ["ai.onnx::Dropout@13"]
    out = codegen.onnx.to_model(kept)
    assert [n.op_type for n in out.graph.node] == ["Dropout"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    feeds = {"x": x, "r": np.array(0.5, np.float32), "t": np.array(False)}
    (y,) = ort.InferenceSession(out.SerializeToString()).run(None, feeds)
    np.testing.assert_array_equal(y, x)
    msc.assert_structural_equal(kept, msc.from_onnx(out, custom_ops="keep"))


def test_default_domain_custom_op_is_refused_at_an_opset_that_changed_it():
    g = msc.Graph("g")
    x = g.add_input("x", msc.TensorType(msc.DType.FLOAT32, (2,)))
    n = g.add_node("ai.onnx::Relu@6", [x], {}, output_types=[x.type])
    g.set_outputs([n.outputs[0]])
    assert codegen.onnx.to_model(g).opset_import[0].version == 12  # the default: where it is
    codegen.onnx.to_model(g, opset=12)  # Relu changed at 13: still version 6's op at 12
    with pytest.raises(UnsupportedOpsError, match="from 6 to 12"):
        codegen.onnx.to_model(g, opset=13)
