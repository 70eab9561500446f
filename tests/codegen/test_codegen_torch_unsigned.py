"""codegen.torch on uint16 / uint32 / uint64, which torch holds but has few kernels for
(codegen/torch/unsigned.py).

Each case is a one-node ONNX model imported with msc.from_onnx, generated, run on edge values
(0, 1, the type's max, values around 2**(bits-1): for uint64 those >= 2**63, which int64 reads
as negative) and compared exactly with numpy, which computes these types natively.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="codegen.torch emits PyTorch code")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import codegen.torch as ct  # noqa: E402
import msc  # noqa: E402
from msc.errors import UnsupportedOpsError  # noqa: E402

UINTS = [np.uint16, np.uint32, np.uint64]


def edge(dt) -> np.ndarray:
    """Values where a signed stand-in goes wrong: 0, 1, max, around the top bit."""
    top = 1 << (np.iinfo(dt).bits - 1)
    m = int(np.iinfo(dt).max)
    return np.array([0, 1, 2, 7, top - 1, top, top + 1, m - 1, m, 12345], dtype=dt)


def other(dt) -> np.ndarray:
    """A second operand, never 0, paired with ``edge`` so that every order appears."""
    top = 1 << (np.iinfo(dt).bits - 1)
    m = int(np.iinfo(dt).max)
    return np.array([m, 1, top + 1, 3, top, top - 1, top, 2, m, 12345], dtype=dt)


def run(op: str, inputs: list[np.ndarray], n_out: int = 1, **attrs) -> list[np.ndarray]:
    """``op`` on ``inputs`` through ONNX -> msc -> generated torch, every input fed at run time."""
    names = [f"x{i}" for i in range(len(inputs))]
    ins = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
        for n, a in zip(names, inputs)
    ]
    outs = [
        helper.make_tensor_value_info(f"y{i}", TensorProto.UNDEFINED, None) for i in range(n_out)
    ]
    node = helper.make_node(op, names, [o.name for o in outs], **attrs)
    model = helper.make_model(
        helper.make_graph([node], op, ins, outs), opset_imports=[helper.make_opsetid("", 21)]
    )
    m = ct.to_module(msc.from_onnx(model))
    with torch.no_grad():
        got = m(*[torch.from_numpy(np.ascontiguousarray(a)) for a in inputs])
    return [t.numpy() for t in (got if isinstance(got, tuple | list) else [got])]


def same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


BINARY = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Div": np.floor_divide,  # of unsigned values: truncation
    "Mod": np.mod,
    "Max": np.maximum,
    "Min": np.minimum,
    "Less": np.less,
    "LessOrEqual": np.less_equal,
    "Greater": np.greater,
    "GreaterOrEqual": np.greater_equal,
    "Equal": np.equal,
    "BitwiseAnd": np.bitwise_and,
}


@pytest.mark.parametrize("dt", UINTS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", list(BINARY))
def test_binary(op, dt) -> None:
    a, b = edge(dt), other(dt)
    with np.errstate(over="ignore"):
        want = BINARY[op](a, b)
    same(run(op, [a, b])[0], want)
    if op in ("Div", "Mod"):
        a = np.where(a == 0, 5, a).astype(dt)  # a divisor now
    with np.errstate(over="ignore"):
        want = BINARY[op](b, a)
    same(run(op, [b, a])[0], want)


@pytest.mark.parametrize("dt", UINTS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift(direction, dt) -> None:
    a = edge(dt)
    bits = np.iinfo(dt).bits
    s = np.array([0, 1, bits - 1, 3, 1, bits - 1, 2, 0, 5, bits - 2], dtype=dt)
    want = np.left_shift(a, s) if direction == "LEFT" else np.right_shift(a, s)
    same(run("BitShift", [a, s], direction=direction)[0], want)


@pytest.mark.parametrize("dt", UINTS, ids=lambda d: np.dtype(d).name)
def test_bitwise_not_and_clip(dt) -> None:
    a = edge(dt)
    same(run("BitwiseNot", [a])[0], np.invert(a))
    lo, hi = np.array(2, dtype=dt), np.array(int(np.iinfo(dt).max) - 1, dtype=dt)
    same(run("Clip", [a, lo, hi])[0], np.clip(a, lo, hi))


@pytest.mark.parametrize("dt", UINTS, ids=lambda d: np.dtype(d).name)
def test_order_reductions(dt) -> None:
    x = np.stack([edge(dt), other(dt)])  # [2, 10]
    axes = np.array([1], dtype=np.int64)
    same(run("ReduceMax", [x, axes], keepdims=0)[0], x.max(1))
    same(run("ReduceMin", [x, axes], keepdims=0)[0], x.min(1))
    same(run("ArgMax", [x], axis=1, keepdims=0)[0], x.argmax(1))
    same(run("ArgMin", [x], axis=1, keepdims=0)[0], x.argmin(1))
    # Every value at least twice (max and the top bit 4 times in ``other``): ONNX TopK keeps the
    # lower index first among equal values (torch.topk does not for these rows), also for the
    # flipped int64 stand-in of uint64.
    k = np.array([6], dtype=np.int64)
    x = np.tile(np.stack([other(dt), edge(dt)]), (1, 2))
    for largest in (1, 0):
        values, indices = run("TopK", [x, k], n_out=2, axis=1, largest=largest)
        key = np.iinfo(dt).max - x if largest else x
        order = np.argsort(key, axis=1, kind="stable")[:, :6]
        same(indices, order)
        same(values, np.take_along_axis(x, order, 1))


@pytest.mark.parametrize("dt", UINTS, ids=lambda d: np.dtype(d).name)
def test_reduce_max_of_no_elements(dt) -> None:
    x = np.zeros((2, 0), dtype=dt)
    axes = np.array([1], dtype=np.int64)
    same(run("ReduceMax", [x, axes], keepdims=0)[0], np.zeros(2, dtype=dt))
    same(run("ReduceMin", [x, axes], keepdims=0)[0], np.full(2, np.iinfo(dt).max, dtype=dt))


@pytest.mark.parametrize("dt", UINTS, ids=lambda d: np.dtype(d).name)
def test_abs_sign_pow(dt) -> None:
    a = edge(dt)
    same(run("Abs", [a])[0], a)
    same(run("Sign", [a])[0], np.sign(a))
    # Pow of an unsigned base is not ONNX (its T has no uint): the frontend still maps it to
    # the canonical pow, which wraps modulo 2**bits as numpy's unsigned power does.
    e = np.array([0, 1, 2, 63, 64, 3, 2 ** (np.iinfo(dt).bits - 1), 5, 2, 7], dtype=dt)
    with np.errstate(over="ignore"):
        same(run("Pow", [a, e])[0], np.power(a, e))


def test_uint64_value_op_without_a_helper_is_refused_naming_the_node(monkeypatch) -> None:
    from codegen.torch import unsigned

    monkeypatch.delitem(unsigned.U64_HELPERS, "abs")  # as an op added to VALUE without one
    with pytest.raises(UnsupportedOpsError, match="uint64") as info:
        run("Abs", [edge(np.uint64)])
    assert "abs" in str(info.value)
    same(run("Abs", [edge(np.uint32)])[0], edge(np.uint32))  # uint32 -> int64 is exact


@pytest.mark.parametrize("dt", [np.float32, np.uint16, np.uint64], ids=lambda d: np.dtype(d).name)
def test_gather_and_scatter_elements(dt) -> None:
    data = np.arange(12, dtype=dt).reshape(3, 4)
    if dt is np.uint64:
        data += np.uint64(2**63)
    idx = np.array([[3, 0, 0, 3], [2, 2, 1, 1]], dtype=np.int64)
    same(run("GatherElements", [data, idx], axis=1)[0], np.take_along_axis(data[:2], idx, 1))
    upd = (np.arange(8).reshape(2, 4) + 100).astype(dt)
    idx_s = np.array([[3, 0, 2, 1], [2, 1, 3, 0]], dtype=np.int64)  # no position twice
    want = data.copy()
    np.put_along_axis(want[:2], idx_s, upd, 1)
    same(run("ScatterElements", [data, idx_s, upd], axis=1)[0], want)


@pytest.mark.parametrize("dt", UINTS, ids=lambda d: np.dtype(d).name)
def test_matmul_trilu_and_u16_u32_values(dt) -> None:
    a = np.stack([edge(dt), other(dt)])  # [2, 10]
    with np.errstate(over="ignore"):
        want = a @ a.T  # numpy's unsigned matmul wraps modulo 2**bits, as ONNX's
    same(run("MatMul", [a, np.ascontiguousarray(a.T)])[0], want)
    same(run("Trilu", [a], upper=0)[0], np.tril(a))


@pytest.mark.parametrize("dt", UINTS, ids=lambda d: np.dtype(d).name)
def test_sums_scans_pads_and_scatter_nd(dt) -> None:
    x = np.stack([edge(dt), other(dt)])  # [2, 10]
    axes = np.array([1], dtype=np.int64)
    with np.errstate(over="ignore"):
        same(run("ReduceSum", [x, axes], keepdims=0)[0], x.sum(1, dtype=dt))
        same(run("ReduceProd", [x, axes], keepdims=0)[0], x.prod(1, dtype=dt))
        same(run("CumSum", [x, np.array(1, np.int64)])[0], x.cumsum(1, dtype=dt))
    pads = np.array([0, 2, 0, 1], dtype=np.int64)
    same(run("Pad", [x, pads], mode="edge")[0], np.pad(x, ((0, 0), (2, 1)), mode="edge"))
    same(run("Pad", [x, pads], mode="reflect")[0], np.pad(x, ((0, 0), (2, 1)), mode="reflect"))
    same(run("NonZero", [x])[0], np.array(np.nonzero(x), dtype=np.int64))
    idx = np.array([[0], [1]], dtype=np.int64)
    upd = x[::-1].copy()  # the rows swapped
    same(run("ScatterND", [x, idx, upd])[0], upd)
    same(run("ScatterND", [x, idx, upd], reduction="max")[0], np.maximum(x, upd))
    same(run("ScatterND", [x, idx, upd], reduction="min")[0], np.minimum(x, upd))
