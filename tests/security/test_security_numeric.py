"""Numeric comparison that cannot be fooled: NaN and infinities, and tolerances.

Before: a NaN or an infinity in the reference output matched anything (every comparison with
NaN is false, so "err > limit" never fired), and ``--atol nan`` made any two models match.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from msc.analysis.verify import compare
from msc.errors import MscError
from tests.security import run_cli

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    ("a", "b", "ok"),
    [
        ([1.0, NAN], [1.0, 2.0], False),  # NaN where the reference is finite
        ([1.0, 2.0], [1.0, NAN], False),  # finite where the reference is NaN
        ([1.0, NAN], [1.0, NAN], True),  # NaN facing NaN at the same position: a match
        ([NAN, 1.0], [1.0, NAN], False),  # NaNs at different positions
        ([INF], [INF], True),
        ([INF], [-INF], False),
        ([1e30], [INF], False),  # finite against an infinite reference
        ([INF], [1e30], False),
        ([NAN], [INF], False),
        ([-0.0], [0.0], True),
    ],
)
def test_non_finite_values_compare_by_position_and_sign(a, b, ok):
    c = compare("y", np.array(a, np.float32), np.array(b, np.float32), 1e-4, 1e-5)
    assert c.ok is ok
    if not ok:
        assert c.mismatched >= 1
    assert np.isfinite(c.max_abs)  # the statistics ignore the non-finite positions


def test_non_finite_mismatches_are_counted_in_the_note():
    c = compare("y", np.array([NAN, 1, INF]), np.array([0, 1, 5]), 1e-4, 1e-5)
    assert not c.ok and c.mismatched == 2 and "2 NaN/inf" in c.note


def test_integers_and_bools_must_be_equal():
    assert compare("i", np.array([3, 4]), np.array([3, 4]), 0.5, 10).ok
    assert not compare("i", np.array([3, 4]), np.array([3, 5]), 0.5, 10).ok
    assert not compare("b", np.array([True]), np.array([False]), 0.5, 10).ok


@pytest.mark.parametrize("tol", [NAN, INF, -1.0])
def test_tolerances_must_be_finite_and_not_negative(tol):
    x = np.zeros(2, np.float32)
    with pytest.raises(MscError, match="finite number >= 0"):
        compare("y", x, x, tol, 1e-5)
    with pytest.raises(MscError, match="finite number >= 0"):
        compare("y", x, x, 1e-4, tol)


def _model(path, ops):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [64])
    nodes, cur = [], "x"
    for i, op in enumerate(ops):
        out = "y" if i == len(ops) - 1 else f"t{i}"
        nodes.append(helper.make_node(op, [cur], [out]))
        cur = out
    m = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)]
    )
    m.ir_version = 8  # what onnxruntime of any supported version loads
    onnx.save(m, path)
    return str(path)


def test_verify_sees_nan_on_either_side(tmp_path):
    nan_model = _model(tmp_path / "log.onnx", ["Log"])  # random normal inputs: NaN for x < 0
    finite = _model(tmp_path / "logabs.onnx", ["Abs", "Log"])
    for a, b in ((nan_model, finite), (finite, nan_model)):
        code, out, err = run_cli("verify", a, b)
        assert code == 1, out + err
        assert "MISMATCH" in out and "NaN/inf" in out
    code, out, _ = run_cli("verify", nan_model, nan_model)
    assert code == 0, out


@pytest.mark.parametrize(
    ("flag", "value"), [("--atol", "nan"), ("--rtol", "-1"), ("--atol", "inf")]
)
def test_cli_refuses_bad_tolerances(tmp_path, flag, value):
    m = _model(tmp_path / "m.onnx", ["Relu"])
    code, _, err = run_cli("verify", m, m, flag, value)
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("msc: error: ") and flag in lines[0]
