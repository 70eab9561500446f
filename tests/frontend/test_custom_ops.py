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
