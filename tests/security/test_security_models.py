"""Models that are valid but odd: custom ops named after Python's internals, symbolic dims
whose names are any string, rank-0 inputs. Each converts, or is refused with one error line.

Before: a custom op in domain ``__class__`` or with an attribute its registered schema lacks
was an AttributeError / ValueError traceback; a dim_param with a blank, ``=`` or braces failed
msc's own re-import ("bad --dynamic ..."); a rank-0 input made the check fail ("A takes x
f32[], B takes x f32[1]").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.security import one_error, run_cli


def _save(path: Path, nodes, inputs, outputs, inits=(), domains=()) -> Path:
    m = helper.make_model(
        helper.make_graph(nodes, "g", inputs, outputs, list(inits)),
        opset_imports=[helper.make_opsetid("", 17)] + [helper.make_opsetid(d, 1) for d in domains],
    )
    m.ir_version = 8
    onnx.save(m, path)
    return path


def _vi(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


@pytest.mark.parametrize(
    ("domain", "op", "attrs", "why"),
    [
        ("__class__", "__init__.__code__", {}, "not a torch.library op name"),
        ("__class__.__init__.__code__", "X", {}, "not a torch.library op name"),
        ("aten", "__dict__", {}, "not a torch.library op name"),
        ("aten", "relu", {"bogus": 1}, "do not fit the registered schema"),
        ("aten", "nonexistent_op", {}, "not a registered torch.library op"),
    ],
)
def test_custom_ops_that_are_no_torch_op_are_one_error(tmp_path, domain, op, attrs, why):
    node = helper.make_node(op, ["x"], ["y"], domain=domain, **attrs)
    f = _save(tmp_path / "m.onnx", [node], [_vi("x", [2])], [_vi("y", [2])], domains=[domain])
    out = tmp_path / "out"
    code, _, err = run_cli("convert", str(f), "-o", str(out), "--custom-ops", "keep")
    one_error(code, err, why)
    assert not out.exists()


@pytest.mark.parametrize("dim", ["batch size", "a=b", "n{1}", "x:0=y", "2", "-1", "{..}", " "])
def test_any_dim_param_converts_to_torch_and_back(tmp_path, dim):
    f = _save(
        tmp_path / "m.onnx",
        [helper.make_node("Relu", ["x"], ["y"])],
        [_vi("x", [dim, 3])],
        [_vi("y", [dim, 3])],
    )
    out = tmp_path / "out"
    code, stdout, err = run_cli("convert", str(f), "-o", str(out))
    assert code == 0, stdout + err
    assert "structurally equal" in stdout and "outputs match" in stdout
    code, stdout, err = run_cli("verify", str(f), str(out))
    assert code == 0, stdout + err


def test_rank0_input_and_weight_convert_to_torch(tmp_path):
    c = numpy_helper.from_array(np.array(2.5, np.float32), "c")
    f = _save(
        tmp_path / "m.onnx",
        [helper.make_node("Mul", ["x", "c"], ["y"])],
        [_vi("x", [])],
        [_vi("y", [])],
        [c],
    )
    code, stdout, err = run_cli("convert", str(f), "-o", str(tmp_path / "out"))
    assert code == 0, stdout + err
    assert "outputs match" in stdout
