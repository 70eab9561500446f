"""Plain, early errors for options and outputs that do not make sense (issue: paper cuts).

Before: ``-o out.tflite`` wrote a PyTorch folder named out.tflite, ``-o`` equal to the source
overwrote it without a word, and ``inspect --dynamic`` on an ONNX file was ignored silently.
"""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from tests.security import run_cli


@pytest.fixture
def model(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    m = helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    m.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    return path


def _error(code: int, err: str, *words: str) -> None:
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("msc: error: "), err
    for w in words:
        assert w in lines[0], err


def test_unknown_output_suffix_is_refused(model, tmp_path):
    code, _, err = run_cli("convert", str(model), "-o", str(tmp_path / "out.tflite"))
    _error(code, err, ".tflite", "--to")
    assert not (tmp_path / "out.tflite").exists()
    code, out, err = run_cli(
        "convert", str(model), "-o", str(tmp_path / "out.tflite"), "--to", "torch"
    )
    assert code == 0, out + err  # said explicitly: a PyTorch directory by that name


def test_output_equal_to_the_source_needs_force(model):
    before = model.read_bytes()
    code, _, err = run_cli("convert", str(model), "-o", str(model))
    _error(code, err, "--force")
    assert model.read_bytes() == before
    code, out, err = run_cli("convert", str(model), "-o", str(model), "--force")
    assert code == 0, out + err


def test_dynamic_that_does_not_apply_is_an_error(model):
    code, _, err = run_cli("inspect", str(model), "--dynamic", "x:0=batch")
    _error(code, err, "--dynamic")


@pytest.mark.parametrize("item", ["x:0=batch{1..64", "x=batch", "x:a=batch", "x:0=1batch"])
def test_malformed_dynamic_is_an_error(model, item):
    code, _, err = run_cli("inspect", str(model), "--dynamic", item)
    _error(code, err, "--dynamic")
