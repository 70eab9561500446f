"""Every canonical op through the ONNX codegen, run in onnxruntime, against numpy/torch.

One row per op case: inputs (arrays; some as weights), attributes, a reference, a tolerance,
and the first opset at which the case must convert (below it, the codegen must raise
UnsupportedOpsError). Each row runs at several opsets, so emitter variants and the
decompositions used at old opsets are all exercised. Every model passes
``onnx.checker.check_model(full_check=True)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime runs the generated models")
torch = pytest.importorskip("torch", reason="torch is the reference for many ops")
F = torch.nn.functional

import codegen.onnx as conx  # noqa: E402
from msc.errors import UnsupportedOpsError  # noqa: E402
from msc.ir import DType, Graph, SymDim, TensorType  # noqa: E402
from msc.ops import registry as ops  # noqa: E402
from msc.ops.decompose import registry as rules  # noqa: E402
from msc.ops.special import POLYNOMIALS  # noqa: E402

RNG = np.random.default_rng(0)
DEFAULT = conx.default_opset()
OPSETS = sorted({11, 13, 17, 18, DEFAULT})


def f32(*shape, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def i64(*shape, lo=-5, hi=5):
    return RNG.integers(lo, hi, shape).astype(np.int64)


def i32(*shape, lo=-5, hi=5):
    return RNG.integers(lo, hi, shape).astype(np.int32)


def boolean(*shape):
    return RNG.integers(0, 2, shape).astype(bool)


def t(fn):
    """A reference through torch: numpy in, numpy out."""

    def ref(*xs):
        out = fn(*[None if x is None else torch.from_numpy(np.ascontiguousarray(x)) for x in xs])
        outs = out if isinstance(out, (tuple, list)) else [out]
        return [o.numpy() for o in outs]

    return ref


@dataclass
class Case:
    op: str
    inputs: list
    attrs: dict = field(default_factory=dict)
    ref: Callable[..., Any] | None = None
    rtol: float = 1e-5
    atol: float = 1e-6
    since: int = 11  # the first opset the case must convert at
    weights: tuple[int, ...] = ()  # input positions held as weights
    id: str = ""
    sym: dict = field(default_factory=dict)  # input position -> {dim: SymDim name}

    def __post_init__(self):
        self.id = self.id or self.op


def C(op, inputs, attrs=None, ref=None, **kw) -> Case:
    return Case(op, inputs, attrs or {}, ref, **kw)


X = f32(2, 3, 4)
POS = f32(2, 3, 4, lo=0.1, hi=3.0)
UNIT = f32(2, 3, 4, lo=-0.95, hi=0.95)
SPECIAL = np.array([1.0, -np.inf, np.inf, np.nan, 0.0, -2.5], np.float32)
HALVES = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.4, -0.6], np.float32)
IMG = f32(2, 4, 6, 6)
A = f32(3, 4)
B = f32(4, 5)
NUM = np.array([-7, -6, -1, 0, 3, 7, 8, -8], np.int32)
DEN = np.array([2, -4, 3, 5, -2, 3, 3, -3], np.int32)

UNARY_REFS = {
    "abs": (X, np.abs),
    "neg": (X, np.negative),
    "exp": (X, np.exp),
    "exp2": (X, np.exp2),
    "log": (POS, np.log),
    "log2": (POS, np.log2),
    "log10": (POS, np.log10),
    "log1p": (np.concatenate([POS.ravel(), [1e-7, -1e-7, 0.3]]).astype(np.float32), np.log1p),
    "expm1": (np.concatenate([X.ravel(), [1e-7, -1e-7, -30.0]]).astype(np.float32), np.expm1),
    "sqrt": (POS, np.sqrt),
    "rsqrt": (POS, lambda x: 1 / np.sqrt(x)),
    "reciprocal": (POS, np.reciprocal),
    "sin": (X, np.sin),
    "cos": (X, np.cos),
    "tan": (UNIT, np.tan),
    "asin": (UNIT, np.arcsin),
    "acos": (UNIT, np.arccos),
    "atan": (X, np.arctan),
    "sinh": (X, np.sinh),
    "cosh": (X, np.cosh),
    "tanh": (X, np.tanh),
    "asinh": (X, np.arcsinh),
    "acosh": (POS + 1, np.arccosh),
    "atanh": (UNIT, np.arctanh),
    "erf": (X, t(torch.erf)),
    "erfinv": (
        np.concatenate([UNIT.ravel(), [0.999, -0.9999, 0.0, 1.0, -1.0]]).astype(np.float32),
        t(torch.erfinv),
    ),
    "floor": (X, np.floor),
    "ceil": (X, np.ceil),
    "round": (HALVES, np.round),
    "trunc": (HALVES, np.trunc),
    "sign": (np.append(X.ravel(), 0.0).astype(np.float32), np.sign),
    "sigmoid": (X, t(torch.sigmoid)),
    "relu": (X, t(torch.relu)),
    "silu": (X, t(F.silu)),
    "mish": (X, t(F.mish)),
    "selu": (X, t(F.selu)),
    "softsign": (X, t(F.softsign)),
    "log_sigmoid": (X, t(F.logsigmoid)),
    "hardswish": (f32(2, 3, 4, lo=-4, hi=4), t(F.hardswish)),
    "identity": (X, lambda x: x),
}

CASES: list[Case] = [C(op, [x], ref=ref) for op, (x, ref) in UNARY_REFS.items()]
CASES += [
    C("abs", [i32(5)], ref=np.abs, id="abs_i32"),
    C("bitwise_not", [i32(6)], ref=np.invert, since=18),
    C("bitwise_not", [boolean(6)], ref=np.logical_not, id="bitwise_not_bool"),
    C("gelu", [X], {"approximate": "none"}, t(F.gelu)),
    C(
        "gelu",
        [X],
        {"approximate": "tanh"},
        t(lambda x: F.gelu(x, approximate="tanh")),
        id="gelu_tanh",
    ),
    C("elu", [X], {"alpha": 0.7}, t(lambda x: F.elu(x, 0.7))),
    C("celu", [X], {"alpha": 1.3}, t(lambda x: F.celu(x, 1.3))),
    C("leaky_relu", [X], {"negative_slope": 0.2}, t(lambda x: F.leaky_relu(x, 0.2))),
    C("hardsigmoid", [f32(2, 3, 4, lo=-4, hi=4)], {}, t(F.hardsigmoid)),
    C("hardtanh", [X], {"min": -0.5, "max": 1.0}, t(lambda x: F.hardtanh(x, -0.5, 1.0))),
    C("softplus", [X * 10], {}, t(F.softplus)),
    C(
        "softplus",
        [X * 10],
        {"beta": 2.0, "threshold": 5.0},
        t(lambda x: F.softplus(x, 2.0, 5.0)),
        id="softplus_beta",
    ),
    C("hardshrink", [X], {"lambd": 0.5}, t(lambda x: F.hardshrink(x, 0.5))),
    C("softshrink", [X], {"lambd": 0.5}, t(lambda x: F.softshrink(x, 0.5))),
    C("threshold", [X], {"threshold": 0.1, "value": -3.0}, t(lambda x: F.threshold(x, 0.1, -3.0))),
    C(
        "shrink",
        [X],
        {"bias": 0.3, "lambd": 0.5},
        lambda x: np.where(x < -0.5, x + 0.3, np.where(x > 0.5, x - 0.3, 0)).astype(np.float32),
    ),
    C(
        "thresholded_relu",
        [X],
        {"alpha": 0.5},
        lambda x: np.where(x > 0.5, x, 0).astype(np.float32),
    ),
    C("isnan", [SPECIAL], ref=np.isnan),
    C("isinf", [SPECIAL], ref=np.isinf),
    C("isfinite", [SPECIAL], ref=np.isfinite),
    C("logical_not", [boolean(5)], ref=np.logical_not),
]

SP = torch.special
# Special functions: their float64 decompositions (msc.ops.decompose.special) against torch.
SPECIAL_REFS = {
    "erfc": (f32(4, 5, lo=-4, hi=9), torch.special.erfc),
    "erfcx": (f32(4, 5, lo=-3, hi=30), torch.special.erfcx),
    "ndtri": (f32(4, 5, lo=0.02, hi=0.98), torch.special.ndtri),
    "log_ndtr": (f32(4, 5, lo=-30, hi=6), torch.special.log_ndtr),
    "lgamma": (np.append(f32(19, lo=-6, hi=30), [-2.0, 1.0, 2.0]).astype(np.float32), torch.lgamma),
    "digamma": (np.append(f32(19, lo=-6, hi=30), [0.0, 1.0]).astype(np.float32), torch.digamma),
    "i0": (f32(4, 5, lo=-12, hi=12), torch.special.i0),
    "i0e": (f32(4, 5, lo=-12, hi=12), torch.special.i0e),
    "i1": (f32(4, 5, lo=-12, hi=12), torch.special.i1),
    "i1e": (f32(4, 5, lo=-12, hi=12), torch.special.i1e),
    "modified_bessel_i0": (f32(4, 5, lo=-12, hi=12), torch.special.modified_bessel_i0),
    "modified_bessel_i1": (f32(4, 5, lo=-12, hi=12), torch.special.modified_bessel_i1),
    "modified_bessel_k0": (f32(4, 5, lo=0.05, hi=15), torch.special.modified_bessel_k0),
    "modified_bessel_k1": (f32(4, 5, lo=0.05, hi=15), torch.special.modified_bessel_k1),
    "scaled_modified_bessel_k0": (f32(4, 5, lo=0.05, hi=40), SP.scaled_modified_bessel_k0),
    "scaled_modified_bessel_k1": (f32(4, 5, lo=0.05, hi=40), SP.scaled_modified_bessel_k1),
    "bessel_j0": (f32(4, 5, lo=-25, hi=25), torch.special.bessel_j0),
    "bessel_j1": (f32(4, 5, lo=-25, hi=25), torch.special.bessel_j1),
    "bessel_y0": (f32(4, 5, lo=0.05, hi=25), torch.special.bessel_y0),
    "bessel_y1": (f32(4, 5, lo=0.05, hi=25), torch.special.bessel_y1),
    "spherical_bessel_j0": (np.append(f32(19, lo=-9, hi=9), 0.0).astype(np.float32),
                            torch.special.spherical_bessel_j0),
}  # fmt: skip
# A&S's approximations are good to ~2e-7 of the (scaled) function: compared at 2e-6.
CASES += [C(op, [x], ref=t(fn), rtol=2e-6, atol=2e-6) for op, (x, fn) in SPECIAL_REFS.items()]

XB = f32(3, 1, 4)
BINARY_REFS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "atan2": np.arctan2,
    "fmod": np.fmod, "remainder": np.remainder, "floor_divide": np.floor_divide,
}  # fmt: skip
NONZERO = np.where(np.abs(XB) < 0.3, 0.7, XB).astype(np.float32)
CASES += [
    C(op, [X[:, None, :1, :].repeat(3, 1)[0], NONZERO], ref=fn) for op, fn in BINARY_REFS.items()
]
CASES += [
    C(
        "atan2",
        [np.array([0, 1, -1, 0, 2], np.float32), np.array([0, 0, -1, -2, -3], np.float32)],
        ref=np.arctan2,
        id="atan2_quadrants",
    ),
    C("div", [NUM, DEN], ref=lambda a, b: np.trunc(a / b).astype(np.int32), id="div_i32"),
    C("floor_divide", [NUM, DEN], ref=np.floor_divide, id="floor_divide_i32"),
    C("remainder", [NUM, DEN], ref=np.remainder, id="remainder_i32"),
    C("fmod", [NUM, DEN], ref=np.fmod, id="fmod_i32"),
    C("pow", [POS, f32(4, lo=-2, hi=2)], ref=np.power),
    C("pow", [NUM, np.abs(DEN)], ref=np.power, id="pow_i32", since=12),
    C("maximum", [NUM, DEN], ref=np.maximum, id="maximum_i32", since=12),
    C("bitwise_and", [NUM, DEN], ref=np.bitwise_and, since=18),
    C("bitwise_or", [NUM, DEN], ref=np.bitwise_or, since=18),
    C("bitwise_xor", [NUM, DEN], ref=np.bitwise_xor, since=18),
    C("bitwise_and", [boolean(6), boolean(6)], ref=np.logical_and, id="bitwise_and_bool"),
    C("bitshift_left", [NUM.astype(np.uint8), np.abs(DEN).astype(np.uint8)], ref=np.left_shift),
    C("bitshift_right", [NUM.astype(np.uint32), np.abs(DEN).astype(np.uint32)], ref=np.right_shift),
    C(
        "bitshift_left",
        [NUM.astype(np.int64), np.abs(DEN).astype(np.int64)],
        ref=np.left_shift,
        id="bitshift_left_i64",
        since=12,
    ),
    C(
        "bitshift_right",
        [NUM.astype(np.int64), np.abs(DEN).astype(np.int64)],
        ref=np.right_shift,
        id="bitshift_right_i64",
        since=12,
    ),
    C("logical_and", [boolean(6), boolean(6)], ref=np.logical_and),
    C("logical_or", [boolean(6), boolean(6)], ref=np.logical_or),
    C("logical_xor", [boolean(6), boolean(6)], ref=np.logical_xor),
    C("prelu", [IMG, f32(4, 1, 1)], ref=lambda x, s: np.where(x >= 0, x, s * x), weights=(1,)),
]
TIES_A = np.array([1, 2, 3, 4, 2, 2], np.float32)
TIES_B = np.array([2, 2, 2, 1, 3, 2], np.float32)
for _op, _fn in {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
                 "gt": np.greater, "ge": np.greater_equal}.items():  # fmt: skip
    CASES.append(C(_op, [TIES_A, TIES_B], ref=_fn))
CASES.append(C("lt", [NUM, DEN], ref=np.less, id="lt_i32"))

S_MIN, S_MAX = np.array(-0.5, np.float32), np.array(0.8, np.float32)
CASES += [
    C("where", [boolean(2, 3, 4), X, f32(3, 4)], ref=np.where),
    C("clamp", [X, S_MIN, S_MAX], ref=lambda x, a, b: np.clip(x, a, b), weights=(1, 2)),
    C(
        "clamp",
        [X, f32(4, lo=-1, hi=0), None],
        ref=lambda x, a, b: np.maximum(x, a),
        id="clamp_tensor_min",
    ),
    C(
        "clamp",
        [NUM, np.array(-2, np.int32), np.array(3, np.int32)],
        ref=lambda x, a, b: np.clip(x, a, b),
        id="clamp_i32",
        since=12,
    ),
    C("cast", [X * 3], {"to": DType.INT32}, lambda x: np.trunc(x).astype(np.int32)),
    C("cast", [X], {"to": DType.FLOAT16}, lambda x: x.astype(np.float16), id="cast_f16"),
    C("cast", [i64(5)], {"to": DType.FLOAT32}, lambda x: x.astype(np.float32), id="cast_i64_f32"),
    C(
        "cast",
        [np.array([0, 1.5, -2, 0], np.float32)],
        {"to": DType.BOOL},
        lambda x: x.astype(bool),
        id="cast_bool",
    ),
]

# ----------------------------------------------------------------------------------- nn
W_CONV = f32(6, 2, 3, 3)
CASES += [
    C("matmul", [f32(2, 3, 4), B], ref=np.matmul),
    C("matmul", [f32(4), f32(2, 4, 3)], ref=np.matmul, id="matmul_vec"),
    C("linear", [A, f32(5, 4), f32(5)], ref=lambda x, w, b: x @ w.T + b, weights=(1, 2)),
    C(
        "linear",
        [f32(2, 3, 4), f32(5, 4), None],
        ref=lambda x, w, b: x @ w.T,
        weights=(1,),
        id="linear_3d",
    ),
    C(
        "gemm",
        [f32(4, 3), B, f32(5)],
        {"alpha": 0.5, "beta": 2.0, "trans_a": True},
        ref=lambda a, b, c: 0.5 * a.T @ b + 2.0 * c,
    ),
    C("gemm", [A, f32(5, 4), None], {"trans_b": True}, ref=lambda a, b, c: a @ b.T, id="gemm_noc"),
    C(
        "einsum",
        [f32(2, 3, 4), f32(2, 4, 5)],
        {"equation": "bij,bjk->bik"},
        ref=lambda a, b: np.einsum("bij,bjk->bik", a, b),
        since=12,
    ),
    C(
        "conv",
        [IMG, W_CONV, f32(6)],
        {"stride": [2, 1], "padding": [1, 0, 1, 2], "dilation": [1, 2], "groups": 2},
        t(lambda x, w, b: F.conv2d(F.pad(x, (0, 2, 1, 1)), w, b, (2, 1), 0, (1, 2), 2)),
        weights=(1, 2),
        rtol=1e-4,
        atol=1e-5,
    ),
    C(
        "conv",
        [f32(2, 3, 9), f32(4, 3, 3), None],
        {"padding": [1, 1]},
        t(lambda x, w, b: F.conv1d(x, w, None, 1, 1)),
        weights=(1,),
        rtol=1e-4,
        atol=1e-5,
        id="conv1d",
    ),
    C(
        "conv_transpose",
        [IMG, f32(4, 3, 3, 3), f32(3)],
        {"stride": [2, 2], "padding": [1, 1, 1, 1], "output_padding": [1, 0]},
        t(lambda x, w, b: F.conv_transpose2d(x, w, b, 2, 1, (1, 0))),
        weights=(1, 2),
        rtol=1e-4,
        atol=1e-5,
    ),
    C(
        "max_pool",
        [IMG],
        {"kernel": [3, 3], "stride": [2, 2], "padding": [1, 1, 1, 1]},
        t(lambda x: F.max_pool2d(x, 3, 2, 1)),
    ),
    C(
        "max_pool",
        [f32(2, 4, 7, 7)],
        {"kernel": [2, 2], "stride": [2, 2], "ceil_mode": True, "dilation": [1, 1]},
        t(lambda x: F.max_pool2d(x, 2, 2, ceil_mode=True)),
        id="max_pool_ceil",
    ),
    C(
        "max_pool",
        [IMG],
        {"kernel": [2, 2], "return_indices": True},
        t(lambda x: F.max_pool2d(x, 2, return_indices=True)),
        id="max_pool_indices",
    ),
    C(
        "avg_pool",
        [IMG],
        {"kernel": [3, 3], "stride": [1, 1], "padding": [1, 1, 1, 1], "count_include_pad": False},
        t(lambda x: F.avg_pool2d(x, 3, 1, 1, count_include_pad=False)),
    ),
    C(
        "avg_pool",
        [IMG],
        {"kernel": [2, 2], "divisor_override": 3},
        t(lambda x: F.avg_pool2d(x, 2, divisor_override=3)),
        id="avg_pool_divisor",
    ),
    C(
        "lp_pool",
        [np.abs(IMG)],
        {"kernel": [2, 2], "p": 2.0},
        t(lambda x: F.lp_pool2d(x, 2.0, 2)),
        rtol=1e-4,
    ),
    C(
        "adaptive_avg_pool",
        [IMG],
        {"output_size": [1, 1]},
        t(lambda x: F.adaptive_avg_pool2d(x, 1)),
    ),
    C(
        "adaptive_avg_pool",
        [IMG],
        {"output_size": [3, 2]},
        t(lambda x: F.adaptive_avg_pool2d(x, (3, 2))),
        id="adaptive_avg_pool_even",
    ),
    C(
        "adaptive_avg_pool",
        [f32(2, 3, 5, 7)],
        {"output_size": [3, 4]},
        t(lambda x: F.adaptive_avg_pool2d(x, (3, 4))),
        id="adaptive_avg_pool_uneven",
    ),
    C(
        "adaptive_max_pool",
        [f32(2, 3, 5, 7)],
        {"output_size": [3, 4]},
        t(lambda x: F.adaptive_max_pool2d(x, (3, 4))),
        id="adaptive_max_pool_uneven",
    ),
    C(
        "adaptive_max_pool",
        [IMG],
        {"output_size": [3, 3], "return_indices": True},
        t(lambda x: F.adaptive_max_pool2d(x, 3, return_indices=True)),
        id="adaptive_max_pool_indices",
    ),
    C(
        "batch_norm",
        [IMG, f32(4), f32(4), f32(4), f32(4, lo=0.5, hi=2)],
        {"eps": 1e-3},
        t(lambda x, w, b, m, v: F.batch_norm(x, m, v, w, b, eps=1e-3)),
        weights=(1, 2, 3, 4),
        rtol=1e-4,
        atol=1e-5,
    ),
    C(
        "batch_norm",
        [IMG, None, None, f32(4), f32(4, lo=0.5, hi=2)],
        {},
        t(lambda x, w, b, m, v: F.batch_norm(x, m, v)),
        weights=(3, 4),
        rtol=1e-4,
        atol=1e-5,
        id="batch_norm_noaffine",
    ),
    C(
        "layer_norm",
        [X, f32(4), f32(4)],
        {"eps": 1e-5},
        t(lambda x, w, b: F.layer_norm(x, (4,), w, b)),
        weights=(1, 2),
        rtol=1e-4,
        atol=1e-5,
    ),
    C(
        "layer_norm",
        [X, None, None],
        {"axis": 1, "eps": 1e-12},
        t(lambda x, w, b: F.layer_norm(x, (3, 4), eps=1e-12)),
        rtol=1e-4,
        atol=1e-5,
        id="layer_norm_noaffine",
    ),
    C(
        "rms_norm",
        [X, f32(4)],
        {"eps": 1e-6},
        t(lambda x, w: F.rms_norm(x, (4,), w, 1e-6)),
        weights=(1,),
        rtol=1e-4,
        atol=1e-5,
    ),
    C(
        "group_norm",
        [IMG, f32(4), f32(4)],
        {"num_groups": 2},
        t(lambda x, w, b: F.group_norm(x, 2, w, b)),
        weights=(1, 2),
        rtol=1e-4,
        atol=1e-5,
    ),
    C(
        "instance_norm",
        [IMG, f32(4), f32(4)],
        {},
        t(lambda x, w, b: F.instance_norm(x, weight=w, bias=b)),
        weights=(1, 2),
        rtol=1e-4,
        atol=1e-5,
    ),
    C(
        "lrn",
        [IMG],
        {"size": 3, "alpha": 1e-2},
        t(lambda x: F.local_response_norm(x, 3, 1e-2)),
        rtol=1e-4,
        atol=1e-5,
    ),
    C("softmax", [X], {"axis": 1}, t(lambda x: torch.softmax(x, 1))),
    C("softmax", [X], {"axis": -1}, t(lambda x: torch.softmax(x, -1)), id="softmax_last"),
    C("log_softmax", [X], {"axis": 0}, t(lambda x: torch.log_softmax(x, 0))),
]
Q, K, V = f32(2, 4, 5, 8), f32(2, 4, 6, 8), f32(2, 4, 6, 3)
MASK = boolean(5, 6)
MASK[:, 0] = True
sdpa = F.scaled_dot_product_attention
CASES += [
    C("attention", [Q, K, V, None], {}, t(lambda q, k, v, m: sdpa(q, k, v)), rtol=1e-4, atol=1e-5),
    C(
        "attention",
        [Q, K, V, MASK],
        {"scale": 0.3},
        t(lambda q, k, v, m: sdpa(q, k, v, m, scale=0.3)),
        rtol=1e-4,
        atol=1e-5,
        id="attention_bool_mask",
    ),
    C(
        "attention",
        [Q, K, V, f32(5, 6)],
        {},
        t(lambda q, k, v, m: sdpa(q, k, v, m)),
        rtol=1e-4,
        atol=1e-5,
        id="attention_float_mask",
    ),
    C(
        "attention",
        [Q, f32(2, 4, 5, 8), f32(2, 4, 5, 3), None],
        {"is_causal": True},
        t(lambda q, k, v, m: sdpa(q, k, v, is_causal=True)),
        rtol=1e-4,
        atol=1e-5,
        id="attention_causal",
    ),
    C(
        "attention",
        [Q, f32(2, 2, 6, 8), f32(2, 2, 6, 3), None],
        {"enable_gqa": True},
        t(lambda q, k, v, m: sdpa(q, k, v, enable_gqa=True)),
        rtol=1e-4,
        atol=1e-5,
        id="attention_gqa",
    ),
    C(
        "attention",
        [f32(2, 5, 8), f32(2, 6, 8), f32(2, 6, 3), None],
        {},
        t(lambda q, k, v, m: sdpa(q, k, v)),
        rtol=1e-4,
        atol=1e-5,
        id="attention_3d",
    ),
    C("embedding", [f32(10, 4), i64(2, 3, lo=0, hi=10)], {}, lambda w, i: w[i], weights=(0,)),
    C(
        "resize",
        [IMG],
        {
            "scales": [2.0, 2.0],
            "mode": "nearest",
            "coordinate_transformation_mode": "asymmetric",
            "nearest_mode": "floor",
        },
        t(lambda x: F.interpolate(x, scale_factor=2, mode="nearest")),
    ),
    C(
        "resize",
        [IMG],
        {"sizes": [9, 4], "mode": "linear"},
        t(lambda x: F.interpolate(x, size=(9, 4), mode="bilinear")),
        rtol=1e-4,
        atol=1e-5,
        id="resize_linear",
    ),
    C(
        "resize",
        [IMG],
        {"scales": [2.0, 2.0], "mode": "cubic"},
        t(lambda x: F.interpolate(x, scale_factor=2, mode="bicubic")),
        rtol=1e-4,
        atol=1e-4,
        id="resize_cubic",
    ),
    C(
        "pixel_shuffle",
        [f32(2, 8, 3, 3)],
        {"upscale_factor": 2},
        t(lambda x: F.pixel_shuffle(x, 2)),
    ),
    C(
        "pixel_shuffle",
        [f32(8, 3, 3)],
        {"upscale_factor": 2},
        t(lambda x: F.pixel_shuffle(x, 2)),
        id="pixel_shuffle_3d",
    ),
    C(
        "depth_to_space",
        [f32(1, 8, 2, 3)],
        {"blocksize": 2, "mode": "DCR"},
        lambda x: x.reshape(1, 2, 2, 2, 2, 3).transpose(0, 3, 4, 1, 5, 2).reshape(1, 2, 4, 6),
    ),
    C(
        "space_to_depth",
        [f32(1, 2, 4, 6)],
        {"blocksize": 2},
        lambda x: x.reshape(1, 2, 2, 2, 3, 2).transpose(0, 3, 5, 1, 2, 4).reshape(1, 8, 2, 3),
    ),
]

# ------------------------------------------------------------------------------ reduce
NP_REDUCE = {
    "reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max, "reduce_min": np.min,
    "reduce_prod": np.prod,
    "reduce_l1": lambda x, axis, keepdims: np.sum(np.abs(x), axis=axis, keepdims=keepdims),
    "reduce_l2": lambda x, axis, keepdims: np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdims)),
    "reduce_sum_square": lambda x, axis, keepdims: np.sum(x * x, axis=axis, keepdims=keepdims),
    "reduce_log_sum": lambda x, axis, keepdims: np.log(np.sum(x, axis=axis, keepdims=keepdims)),
    "reduce_log_sum_exp": lambda x, axis, keepdims: np.log(
        np.sum(np.exp(x), axis=axis, keepdims=keepdims)),
}  # fmt: skip
for _op, _fn in NP_REDUCE.items():
    _x = POS if _op == "reduce_log_sum" else X
    CASES.append(
        C(
            _op,
            [_x],
            {"axes": [1, -1], "keepdims": True},
            lambda x, fn=_fn: fn(x, axis=(1, 2), keepdims=True),
            rtol=1e-5,
            atol=1e-5,
        )
    )
    CASES.append(
        C(
            _op,
            [_x],
            {},
            lambda x, fn=_fn: np.asarray(fn(x, axis=None, keepdims=False)),
            rtol=1e-5,
            atol=1e-5,
            id=f"{_op}_all",
        )
    )
# integer types onnxruntime's kernels do not reduce (reduced as i64 and cast back): a u8 sum
# that wraps, as numpy's (and torch's, JAX's) u8 sum does
_U8 = RNG.integers(0, 255, (2, 3, 40)).astype(np.uint8)
for _op, _x in (("reduce_sum", _U8), ("reduce_prod", i32(2, 3, 4).astype(np.int16))):
    CASES.append(
        C(
            _op,
            [_x],
            {"axes": [2], "keepdims": False},
            lambda x, fn=NP_REDUCE[_op]: fn(x, axis=2, dtype=x.dtype),
            id=f"{_op}_{_x.dtype}",
        )
    )
CASES.append(C("reduce_max", [i32(2, 3, 4).astype(np.int16)], {"axes": [0], "keepdims": True},
               lambda x: np.max(x, axis=0, keepdims=True), id="reduce_max_int16"))  # fmt: skip
VALS = RNG.permutation(24).astype(np.float32).reshape(2, 3, 4)
# Equal values across the k-th place: torch.topk picks among them freely (it gives other
# indices than a stable order for these rows, largest and smallest).
TIES = np.array([[1, 3, 3, 0, 3, 3, 1, 0], [2] * 8, [0, 5, 1, 5, 1, 1, 0, 5]], np.float32)


def _stable_topk(k, axis, largest=True):
    """ONNX TopK: the first k of a stable argsort (equal values in index order)."""

    def ref(x):
        idx = np.take(np.argsort(-x if largest else x, axis, kind="stable"), np.arange(k), axis)
        return [np.take_along_axis(x, idx, axis), idx]

    return ref


CASES += [
    C("reduce_any", [boolean(3, 4)], {"axes": [1]}, lambda x: np.any(x, axis=1)),
    C(
        "reduce_all",
        [boolean(3, 4)],
        {"axes": [0], "keepdims": True},
        lambda x: np.all(x, axis=0, keepdims=True),
    ),
    C(
        "var",
        [X],
        {"axes": [1, 2], "correction": 1.0},
        lambda x: np.var(x, axis=(1, 2), ddof=1),
        rtol=1e-4,
    ),
    C("argmax", [VALS], {"axis": 1}, lambda x: np.argmax(x, 1)),
    C("argmin", [VALS], {"axis": -1, "keepdims": True}, lambda x: np.argmin(x, -1)[..., None]),
    C("argmax", [VALS], {}, lambda x: np.asarray(np.argmax(x)), id="argmax_flat"),
    C(
        "argmax",
        [np.array([1, 3, 3, 0], np.float32)],
        {"axis": 0, "select_last_index": True},
        lambda x: np.asarray(2),
        id="argmax_last",
        since=12,
    ),
    C("max_dim", [VALS], {"axis": 2}, lambda x: [np.max(x, 2), np.argmax(x, 2)]),
    C(
        "min_dim",
        [VALS],
        {"axis": 0, "keepdims": True},
        lambda x: [np.min(x, 0, keepdims=True), np.argmin(x, 0)[None]],
    ),
    C("cumsum", [X], {"axis": 1}, lambda x: np.cumsum(x, 1), atol=1e-5),
    C(
        "cumsum",
        [X],
        {"axis": 2, "exclusive": True, "reverse": True},
        t(lambda x: torch.flip(torch.cumsum(torch.flip(x, [2]), 2) - torch.flip(x, [2]), [2])),
        atol=1e-5,
        id="cumsum_excl_rev",
    ),
    C("cumprod", [X], {"axis": 2}, lambda x: np.cumprod(x, 2), atol=1e-5),
    C("topk", [VALS], {"k": 2, "axis": 1}, t(lambda x: torch.topk(x, 2, 1))),
    C(
        "topk",
        [VALS],
        {"k": 3, "largest": False},
        t(lambda x: torch.topk(x, 3, -1, largest=False)),
        id="topk_small",
    ),
    C("topk", [TIES], {"k": 3, "axis": 1, "stable": True}, _stable_topk(3, 1), id="topk_stable"),
    C(
        "topk",
        [TIES],
        {"k": 3, "largest": False, "stable": True},
        _stable_topk(3, -1, largest=False),
        id="topk_stable_small",
    ),
    C(
        "topk",
        [np.ascontiguousarray(TIES.T)],
        {"k": 3, "axis": 0, "stable": True},
        _stable_topk(3, 0),
        id="topk_stable_axis0",
    ),
    C("sort", [VALS], {"axis": 1}, t(lambda x: torch.sort(x, 1))),
    C(
        "sort",
        [VALS],
        {"descending": True},
        t(lambda x: torch.sort(x, -1, descending=True)),
        id="sort_desc",
    ),
    C("argsort", [VALS], {"axis": 0}, lambda x: np.argsort(x, 0)),
    # bools (ONNX TopK takes none): ordered as i32, stable as TopK is
    C(
        "argsort",
        [boolean(3, 8)],
        {"axis": 1, "stable": True},
        lambda x: np.argsort(x, 1, kind="stable"),
        id="argsort_bool",
    ),
    C(
        "sort",
        [boolean(3, 8)],
        {"axis": 1, "descending": True},
        lambda x: [np.sort(x, 1)[:, ::-1], np.argsort(~x, 1, kind="stable")],
        id="sort_bool",
    ),
]

# ------------------------------------------------------------------------------- shape
Y = f32(2, 3, 4, 5)
IDX = np.array([[0, 2], [-1, 1]], np.int64)
# Indices into X's dim 1 (size 3) in [-3, 3), negative ones counted from the end (ONNX's).
ND_NEG = np.array([[-2, 1], [1, -1]], np.int64)  # index tuples into Y's dims 0 and 1
NEG = np.array([[[-1, 0, -3, 2], [1, -2, 2, -3]], [[0, -3, -2, 1], [2, 2, -1, 0]]], np.int64)
CASES += [
    C("reshape", [Y], {"shape": [6, -1]}, lambda x: x.reshape(6, -1)),
    C(
        "reshape",
        [f32(2, 0, 3)],
        {"shape": [0, 5]},
        lambda x: x.reshape(0, 5),
        since=14,
        id="reshape_zero",
    ),
    C("transpose", [Y], {"perm": [2, 0, 3, 1]}, lambda x: x.transpose(2, 0, 3, 1)),
    C("squeeze", [f32(2, 1, 3, 1)], {"axes": [1]}, lambda x: x.squeeze(1)),
    C("squeeze", [f32(2, 1, 3, 1)], {}, lambda x: x.squeeze(), id="squeeze_all"),
    C("unsqueeze", [X], {"axes": [0, -1]}, lambda x: x[None, ..., None]),
    C("flatten", [Y], {"start_axis": 1, "end_axis": 2}, lambda x: x.reshape(2, 12, 5)),
    C("flatten", [Y], {}, lambda x: x.reshape(-1), id="flatten_all"),
    C(
        "flatten",
        [Y],
        {"start_axis": 1, "end_axis": 2},
        lambda x: x.reshape(2, 12, 5),
        sym={0: {0: "batch"}},
        id="flatten_sym_batch",
    ),
    C(
        "flatten",
        [Y],
        {"start_axis": 0, "end_axis": 1},
        lambda x: x.reshape(6, 4, 5),
        sym={0: {3: "w"}},
        id="flatten_sym_trailing",
    ),
    C(
        "slice",
        [Y],
        {"starts": [1, 0], "ends": [3, 2**63 - 1], "axes": [1, 3], "steps": [1, 2]},
        lambda x: x[:, 1:3, :, ::2],
    ),
    C(
        "slice",
        [Y],
        {"starts": [-1], "ends": [-(2**63)], "axes": [2], "steps": [-2]},
        lambda x: x[:, :, ::-2],
        id="slice_reverse",
    ),
    C("concat", [X, f32(2, 1, 4), f32(2, 2, 4)], {"axis": 1}, lambda *xs: np.concatenate(xs, 1)),
    C("split", [Y], {"axis": 3, "sizes": [1, 3, 1]}, lambda x: np.split(x, [1, 4], 3)),
    C("gather", [Y, IDX], {"axis": 1}, lambda x, i: np.take(x, i, 1)),
    C(
        "gather_elements",
        [X, i64(2, 2, 4, lo=0, hi=3)],
        {"axis": 1},
        lambda x, i: np.take_along_axis(x, i, 1),
    ),
    C(
        "gather_elements",
        [X, NEG],
        {"axis": 1, "negative_indices": True},
        lambda x, i: np.take_along_axis(x, i % 3, 1),
        id="gather_elements_negative",
    ),
    C("gather_nd", [Y, np.array([[0, 1], [1, 2]], np.int64)], {}, lambda x, i: x[i[:, 0], i[:, 1]]),
    C(
        "gather_nd",
        [Y, ND_NEG],
        {},
        lambda x, i: x[i[:, 0], i[:, 1]],
        id="gather_nd_negative",
    ),
    C(
        "gather_nd",
        [Y, ND_NEG],
        {},
        lambda x, i: x[i[:, 0], i[:, 1]],
        sym={0: {1: "s"}},
        id="gather_nd_negative_sym",
    ),
    C(
        "gather_nd",
        [Y, np.array([[1], [2]], np.int64)],
        {"batch_dims": 1},
        lambda x, i: np.stack([x[0, 1], x[1, 2]]),
        id="gather_nd_batch",  # before opset 12: through msc.ops.decompose's gather_nd
    ),
    C(
        "scatter_elements",
        [X, np.array([[[0, 1, 2, 0]]] * 2, np.int64), f32(2, 1, 4)],
        {"axis": 1},
        t(lambda x, i, u: x.scatter(1, i, u)),
    ),
    C(
        "scatter_elements",
        [X, np.array([[[0, 1, 2, 0]]] * 2, np.int64), f32(2, 1, 4)],
        {"axis": 1, "reduction": "add"},
        t(lambda x, i, u: x.scatter_add(1, i, u)),
        since=16,
        id="scatter_elements_add",
    ),
    C(
        "scatter_elements",
        [
            X,
            np.array([[[0, -2, 2, -3]]] * 2, np.int64),
            np.arange(8, dtype=np.float32).reshape(2, 1, 4),
        ],
        {"axis": 1, "negative_indices": True},
        t(lambda x, i, u: x.scatter(1, i % 3, u)),
        id="scatter_elements_negative",
    ),
    C(
        "scatter_elements",
        [X, NEG, np.arange(16, dtype=np.float32).reshape(2, 2, 4)],
        {"axis": 1, "reduction": "add", "negative_indices": True},
        t(lambda x, i, u: x.scatter_add(1, i % 3, u)),
        since=16,
        id="scatter_elements_add_negative",
    ),
    C(
        "scatter_nd",
        [Y, np.array([[1, 0], [0, 2]], np.int64), f32(2, 4, 5)],
        {},
        lambda x, i, u: _scatter_nd(x, i, u),
    ),
    C(
        "scatter_nd",
        [Y, ND_NEG, np.arange(40, dtype=np.float32).reshape(2, 4, 5)],
        {},
        lambda x, i, u: _scatter_nd(x, i, u),
        id="scatter_nd_negative",
    ),
    C("index", [Y, IDX], {"axes": [2]}, lambda x, i: x[:, :, i]),
    C(
        "index",
        [Y, IDX, np.array([1, 0], np.int64)],
        {"axes": [1, 2]},
        lambda x, i, j: x[:, i, j],
        id="index_adjacent",
    ),
    C(
        "index",
        [Y, IDX, np.array([1, 0], np.int64)],
        {"axes": [1, 3]},
        lambda x, i, j: x[:, i, :, j],
        id="index_apart",
    ),
    C(
        "index_put",
        [Y, f32(2, 1, 4), np.array([0, 2], np.int64), np.array([1, -1], np.int64)],
        {"axes": [1, 3]},
        lambda x, v, i, j: _ip(x, v, i, j),
        id="index_put_apart",
    ),
    C(
        "index_put",
        [Y, f32(5), np.array([0, 2], np.int64), np.array([1, -1], np.int64)],
        {"axes": [1, 2]},
        lambda x, v, i, j: _ip_adj(x, v, i, j),
        id="index_put_adjacent",
    ),
    C(
        "index_put",
        [X, f32(4), np.array([0, 2, 0], np.int64)],
        {"axes": [1], "accumulate": True},
        lambda x, v, i: _ip_acc(x, v, i),
        since=16,
    ),
    C(
        "pad",
        [X],
        {"pads": [0, 1, 2, 0, 0, 1], "value": 1.5},
        lambda x: np.pad(x, [(0, 0), (1, 0), (2, 1)], constant_values=1.5),
    ),
    C(
        "pad",
        [X],
        {"pads": [0, 0, 2, 0, 0, 1], "mode": "reflect"},
        lambda x: np.pad(x, [(0, 0), (0, 0), (2, 1)], mode="reflect"),
        id="pad_reflect",
    ),
    C(
        "pad",
        [X],
        {"pads": [0, 1, 1, 0, 1, 1], "mode": "edge"},
        lambda x: np.pad(x, [(0, 0), (1, 1), (1, 1)], mode="edge"),
        id="pad_edge",
    ),
    C(
        "pad",
        [X],
        {"pads": [0, 0, 2, 0, 0, 1], "mode": "wrap"},
        lambda x: np.pad(x, [(0, 0), (0, 0), (2, 1)], mode="wrap"),
        id="pad_wrap",
    ),
    C(
        "pad",
        [X],
        {"pads": [0, 0, -3, 0, 0, 2], "mode": "edge"},
        lambda x: x[:, :, np.clip(np.arange(x.shape[2] - 1) + 3, 0, x.shape[2] - 1)],
        id="pad_edge_negative",
    ),
    C(
        "pad",
        [X],
        {"pads": [0, -1, 1, 0, 0, -1]},
        lambda x: np.pad(x[:, 1:, :-1], [(0, 0), (0, 0), (1, 0)]),
        id="pad_negative",
    ),
    C("expand", [f32(3, 1)], {"shape": [2, -1, 4]}, lambda x: np.broadcast_to(x, (2, 3, 4))),
    C("tile", [f32(2, 3)], {"repeats": [2, 1, 3]}, lambda x: np.tile(x, (2, 1, 3))),
    C("flip", [X], {"axes": [0, 2]}, lambda x: x[::-1, :, ::-1]),
    C("roll", [X], {"shifts": [1, -2], "axes": [1, 2]}, lambda x: np.roll(x, (1, -2), (1, 2))),
    C("roll", [X], {"shifts": [5], "axes": []}, lambda x: np.roll(x, 5), id="roll_flat"),
    C("trilu", [X], {"upper": True, "k": 1}, lambda x: np.triu(x, 1)),
    C("trilu", [X], {"upper": False, "k": -1}, lambda x: np.tril(x, -1), id="tril"),
    C("shape", [Y], {}, lambda x: np.array(x.shape, np.int64)),
    C(
        "shape",
        [Y],
        {"start": 1, "end": -1},
        lambda x: np.array(x.shape[1:-1], np.int64),
        id="shape_slice",
    ),
    C(
        "constant",
        [],
        {"value": np.arange(6, dtype=np.float32).reshape(2, 3)},
        lambda: np.arange(6, dtype=np.float32).reshape(2, 3),
    ),
    C(
        "arange",
        [],
        {"start": 1.0, "end": 4.0, "step": 0.5, "dtype": DType.FLOAT32},
        lambda: np.arange(1.0, 4.0, 0.5, dtype=np.float32),
    ),
    C(
        "arange",
        [],
        {"end": 7.0, "step": 2.0, "dtype": DType.INT64},
        lambda: np.arange(0, 7, 2, dtype=np.int64),
        id="arange_i64",
    ),
    C(
        "full",
        [],
        {"shape": [2, 3], "value": 1.25, "dtype": DType.FLOAT32},
        lambda: np.full((2, 3), 1.25, np.float32),
    ),
    C(
        "full_like",
        [X],
        {"value": 7.0, "dtype": DType.INT64},
        lambda x: np.full(x.shape, 7, np.int64),
    ),
    C(
        "one_hot",
        [i64(2, 3, lo=0, hi=4)],
        {"depth": 4, "dtype": DType.FLOAT32},
        lambda i: np.eye(4, dtype=np.float32)[i],
    ),
    C(
        "one_hot",
        [i64(5, lo=0, hi=3)],
        {"depth": 3, "axis": 0},
        lambda i: np.eye(3, dtype=np.int64)[i].T,
        id="one_hot_axis0",
    ),
    C("nonzero", [np.array([[0, 1.5, 0], [2, 0, 3]], np.float32)], {}, lambda x: np.argwhere(x)),
]


def _scatter_nd(x, i, u):
    y = x.copy()
    for k in range(i.shape[0]):
        y[tuple(i[k])] = u[k]
    return y


def _ip(x, v, i, j):
    y = x.copy()
    y[:, i, :, j] = v
    return y


def _ip_adj(x, v, i, j):
    y = x.copy()
    y[:, i, j] = v
    return y


def _ip_acc(x, v, i):
    y = x.copy()
    np.add.at(y, (slice(None), i), v)
    return y


# Quantization: ONNX QuantizeLinear / DequantizeLinear semantics (round half to even, saturate).
_QX = np.array([[-3.0, -0.25, 0.25, 0.75, 1.25, 200.0]] * 2, np.float32)
_QS = np.array([0.5, 0.25, 0.5, 0.5, 0.5, 0.5], np.float32)
_QZ = np.array([1, -2, 0, 3, 0, 1], np.int8)
_QB = np.array([[0.5, 0.25], [0.125, 1.0]], np.float32)  # block_size 3 along axis 1
_QBZ = np.array([[1, 0], [-1, 2]], np.int8)


def _qref(x, s, z, lo, hi, dtype):
    return np.clip(np.round(x / s) + z.astype(np.float32), lo, hi).astype(dtype)


CASES += [
    C(
        "quantize",
        [_QX, np.array(0.5, np.float32), np.array(3, np.uint8)],
        {"dtype": DType.UINT8},
        ref=lambda x, s, z: _qref(x, s, z, 0, 255, np.uint8),
        weights=(1, 2),
        id="quantize_tensor_u8",
    ),
    C(
        "quantize",
        [_QX, _QS, _QZ],
        {"dtype": DType.INT8, "axis": 1},
        ref=lambda x, s, z: _qref(x, s, z, -128, 127, np.int8),
        weights=(1, 2),
        id="quantize_axis_i8",
    ),
    C(
        "quantize",
        [_QX, _QB, _QBZ],
        {"dtype": DType.INT8, "axis": 1, "block_size": 3},
        ref=lambda x, s, z: _qref(x, np.repeat(s, 3, 1), np.repeat(z, 3, 1), -128, 127, np.int8),
        weights=(1, 2),
        id="quantize_block_i8",
    ),
    C(
        "dequantize",
        [_QZ.reshape(1, 6).repeat(2, 0), _QS, np.array([0, 1, 2, 3, 4, 5], np.int8)],
        {"axis": 1},
        ref=lambda x, s, z: ((x.astype(np.float32) - z) * s).astype(np.float32),
        weights=(1, 2),
        id="dequantize_axis_i8",
    ),
    C(
        "dequantize",
        [np.array([[0, 7, 250, 3, 128, 1]] * 2, np.uint8), _QB],
        {"axis": 1, "block_size": 3},
        ref=lambda x, s: (x.astype(np.float32) * np.repeat(s, 3, 1)).astype(np.float32),
        weights=(1,),
        id="dequantize_block_u8",
    ),
]


# Linear algebra: ONNX has Det alone; msc.ops.decompose.linalg unrolls LU with partial
# pivoting, substitutions, Cholesky and Householder QR over the (static) matrix size, in
# float64. Compared with torch (LAPACK) at 1e-5; pivots and signs follow LAPACK's choices.
def _spd(*shape):
    a = f32(*shape)
    return (a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(np.float32)


LA = torch.linalg
_SQ, _SQB, _RHS = f32(4, 4), f32(2, 5, 5), f32(4, 2)
_CHOL = np.linalg.cholesky(_spd(4, 4).astype(np.float64)).astype(np.float32)
_LU, _PIV = (t.numpy() for t in LA.lu_factor(torch.from_numpy(_SQ)))
_LA = dict(rtol=1e-5, atol=1e-5)
CASES += [
    C("inverse", [_SQB], ref=t(LA.inv), **_LA),
    C("solve", [_SQ, _RHS], {"left": True}, ref=t(LA.solve), **_LA),
    C("solve", [_SQB, f32(2, 5)], ref=t(LA.solve), id="solve_vector", **_LA),
    C("solve", [_SQ, f32(3, 4)], {"left": False}, ref=t(lambda a, b: LA.solve(a, b, left=False)),
      id="solve_right", **_LA),
    C("solve_triangular", [_SQ, _RHS], {"upper": False},
      ref=t(lambda a, b: LA.solve_triangular(a, b, upper=False)), **_LA),
    C("solve_triangular", [_SQ, f32(3, 4)], {"upper": True, "left": False, "unitriangular": True},
      ref=t(lambda a, b: LA.solve_triangular(a, b, upper=True, left=False, unitriangular=True)),
      id="solve_triangular_right_unit", **_LA),
    C("cholesky", [_spd(2, 4, 4)], ref=t(LA.cholesky), **_LA),
    C("cholesky", [_spd(3, 3)], {"upper": True}, ref=t(lambda a: LA.cholesky(a, upper=True)),
      id="cholesky_upper", **_LA),
    C("cholesky_solve", [_RHS, _CHOL], ref=t(torch.cholesky_solve), **_LA),
    C("cholesky_inverse", [_CHOL], ref=t(torch.cholesky_inverse), **_LA),
    C("slogdet", [_SQB], ref=t(LA.slogdet), **_LA),
    C("slogdet", [f32(2, 0, 0)], ref=t(LA.slogdet), id="slogdet_empty", **_LA),
    C("lu_factor", [_SQ], ref=t(LA.lu_factor), **_LA),
    C("lu_factor", [f32(5, 3)], ref=t(LA.lu_factor), id="lu_factor_tall", **_LA),
    C("lu_solve", [_LU, _PIV, _RHS], ref=t(LA.lu_solve), **_LA),
    C("lu_solve", [_LU, _PIV, _RHS], {"adjoint": True},
      ref=t(lambda lu, p, b: LA.lu_solve(lu, p, b, adjoint=True)), id="lu_solve_adjoint", **_LA),
    C("lu_solve", [_LU, _PIV, f32(3, 4)], {"left": False},
      ref=t(lambda lu, p, b: LA.lu_solve(lu, p, b, left=False)), id="lu_solve_right", **_LA),
    C("qr", [f32(5, 3)], ref=t(LA.qr), **_LA),
    C("qr", [f32(2, 3, 5)], {"mode": "complete"}, ref=t(lambda a: LA.qr(a, mode="complete")),
      id="qr_complete_wide", **_LA),
    C("householder_product", [f32(5, 3), f32(3)], ref=t(LA.householder_product), **_LA),
]  # fmt: skip

# Orthogonal polynomials of a tensor degree: their recurrence in a loop to the largest degree
# (msc.ops.decompose.special), degrees 0..9 and a negative one (0) and a fractional one (trunc).
_DEG = np.array([[0.0, 1.0, 2.0, 3.7, 9.0, -1.0]], np.float32)
_XP = np.linspace(-1.4, 1.4, 24, dtype=np.float32).reshape(4, 6)
CASES += [
    C(op, [(_XP + 1) / 2 if op.startswith("shifted") else _XP, _DEG],
      ref=t(getattr(torch.special, op)), rtol=1e-5, atol=1e-5)
    for op in POLYNOMIALS
]  # fmt: skip

# Hurwitz zeta (Euler-Maclaurin, Cephes' scheme) and polygamma through it; special values
# (x = 1, x < 1, non-positive integer q) as torch gives them.
_ZX = np.array([1.5, 2.0, 3.3, 1.0, 0.5, 7.0, 12.0, 2.0, 3.0], np.float32)
_ZQ = np.array([0.3, 1.0, 2.5, 1.0, 1.0, 0.1, 30.0, -2.5, -3.0], np.float32)
_PG = np.array([0.2, 1.0, 3.7, 10.0, -1.5, 25.0, -8.4784, -20.3, -0.5735], np.float32)
CASES += [C("zeta", [_ZX, _ZQ], ref=t(torch.special.zeta), rtol=1e-5, atol=1e-6)] + [
    C("polygamma", [_PG], {"n": n}, ref=t(lambda x, n=n: torch.polygamma(n, x)), rtol=1e-5,
      atol=1e-6, id=f"polygamma_{n}")
    for n in (1, 2, 3)
]  # fmt: skip


# Recurrent ops: ONNX's equations in numpy (the reference for their decompositions, which
# unroll the steps, and for the ONNX RNN / GRU / LSTM nodes written here).
_RNN_ACTS = {
    "sigmoid": lambda v, a, b: 1 / (1 + np.exp(-v)),
    "tanh": lambda v, a, b: np.tanh(v),
    "relu": lambda v, a, b: np.maximum(v, 0),
    "affine": lambda v, a, b: a * v + b,
    "leaky_relu": lambda v, a, b: np.where(v >= 0, v, a * v),
    "hard_sigmoid": lambda v, a, b: np.clip(a * v + b, 0, 1),
}


def _recurrent_ref(op, hidden_size, direction="forward", activations=(), activation_alpha=(),
                   activation_beta=(), clip=None, layout=0, linear_before_reset=False,
                   input_forget=False):  # fmt: skip
    n_act = {"rnn": 1, "gru": 2, "lstm": 3}[op]
    H = hidden_size

    def ref(x, w, r, b=None, lens=None, h0=None, c0=None, p=None):
        assert lens is None
        if layout == 1:
            x = x.transpose(1, 0, 2)
            h0 = None if h0 is None else h0.transpose(1, 0, 2)
            c0 = None if c0 is None else c0.transpose(1, 0, 2)
        T, B = x.shape[:2]
        ys, hs, cs = [], [], []
        for d in range(2 if direction == "bidirectional" else 1):
            k = slice(d * n_act, (d + 1) * n_act)
            fs = list(zip(activations[k], activation_alpha[k], activation_beta[k]))

            def f(i, v, clipped=True, fs=fs):
                v = np.clip(v, -clip, clip) if clip is not None and clipped else v
                return _RNN_ACTS[fs[i][0]](v, fs[i][1], fs[i][2])

            G = w.shape[1] // H
            wb, rb = (np.zeros(G * H, np.float32),) * 2 if b is None else np.split(b[d], 2)
            h = np.zeros((B, H), np.float32) if h0 is None else h0[d]
            c = np.zeros((B, H), np.float32) if c0 is None else c0[d]
            y = np.zeros((T, B, H), np.float32)
            rev = direction == "reverse" or d == 1
            for t in reversed(range(T)) if rev else range(T):
                gx = x[t] @ w[d].T + wb
                if op == "rnn":
                    h = f(0, gx + h @ r[d].T + rb)
                elif op == "gru":
                    gh = h @ r[d].T + rb
                    z = f(0, gx[:, :H] + gh[:, :H])
                    rr = f(0, gx[:, H : 2 * H] + gh[:, H : 2 * H])
                    if linear_before_reset:
                        hh = f(1, gx[:, 2 * H :] + rr * gh[:, 2 * H :])
                    else:
                        hh = f(1, gx[:, 2 * H :] + (rr * h) @ r[d][2 * H :].T + rb[2 * H :])
                    h = (1 - z) * hh + z * h
                else:
                    g = gx + h @ r[d].T + rb
                    gi, go, gf, gc = np.split(g, 4, axis=1)
                    pi, po, pf = np.split(p[d], 3) if p is not None else (0, 0, 0)
                    i = f(0, gi + pi * c)
                    fg = 1 - i if input_forget else f(0, gf + pf * c)
                    c = fg * c + i * f(1, gc)
                    h = f(0, go + po * c) * f(2, c, False)
                y[t] = h
            ys.append(y)
            hs.append(h)
            cs.append(c)
        y, yh, yc = np.stack(ys, 1), np.stack(hs), np.stack(cs)
        if layout == 1:
            y, yh, yc = y.transpose(2, 0, 1, 3), yh.transpose(1, 0, 2), yc.transpose(1, 0, 2)
        return [a.astype(np.float32) for a in ((y, yh, yc) if op == "lstm" else (y, yh))]

    return ref


def _rc(op, *, nd=1, states=False, bias=True, peep=False, layout=0, id, **attrs):
    """A recurrent case: x [5 steps, batch 2, input 3] (time first), hidden 4."""
    G, H = {"rnn": 1, "gru": 3, "lstm": 4}[op], 4
    n_act = {"rnn": 1, "gru": 2, "lstm": 3}[op]
    attrs.setdefault("activations", ["sigmoid", "tanh", "tanh"][:n_act] * nd if op != "rnn"
                     else ["tanh"] * nd)  # fmt: skip
    acts = attrs["activations"]
    attrs.setdefault("activation_alpha", [{"affine": 0.5, "leaky_relu": 0.1,
                     "hard_sigmoid": 0.2}.get(a, 0.0) for a in acts])  # fmt: skip
    attrs.setdefault("activation_beta", [0.3 if a == "affine" else 0.5 if a == "hard_sigmoid"
                     else 0.0 for a in acts])  # fmt: skip
    attrs.update(hidden_size=H, layout=layout)
    attrs.setdefault("direction", "bidirectional" if nd == 2 else "forward")
    x = f32(5, 2, 3) if layout == 0 else f32(2, 5, 3)
    s = (lambda: f32(nd, 2, H)) if layout == 0 else (lambda: f32(2, nd, H))
    ins = [x, f32(nd, G * H, 3, lo=-1, hi=1), f32(nd, G * H, H, lo=-1, hi=1),
           f32(nd, 2 * G * H, lo=-1, hi=1) if bias else None, None,
           s() if states else None]  # fmt: skip
    if op == "lstm":
        ins += [s() if states else None, f32(nd, 3 * H, lo=-1, hi=1) if peep else None]
    while ins[-1] is None:
        ins.pop()
    weights = (1, 2, 3, 7) if op == "lstm" else (1, 2, 3)
    return C(op, ins, attrs, ref=_recurrent_ref(op, **attrs), rtol=1e-5, atol=1e-5,
             weights=tuple(i for i in weights if i < len(ins)), id=id)  # fmt: skip


CASES += [
    _rc("lstm", states=True, peep=True, id="lstm_states_peepholes"),
    _rc("lstm", nd=2, layout=1, clip=0.9, input_forget=True, id="lstm_bidirectional_batch_first"),
    _rc("lstm", direction="reverse", bias=False, id="lstm_reverse_no_bias"),
    _rc("gru", direction="reverse", states=True, id="gru_reverse"),
    _rc("gru", nd=2, layout=1, linear_before_reset=True, id="gru_bidirectional_linear_first"),
    _rc("rnn", activations=["relu"], bias=False, id="rnn_relu_no_bias"),
    _rc("rnn", nd=2, states=True, activations=["affine", "hard_sigmoid"], id="rnn_bidirectional"),
]

_ids = [c.id for c in CASES]
assert len(_ids) == len(set(_ids)), sorted({i for i in _ids if _ids.count(i) > 1})


def build(case: Case) -> tuple[Graph, dict]:
    g = Graph(case.id)
    ins, feeds = [], {}
    for i, arr in enumerate(case.inputs):
        if arr is None:
            ins.append(None)
            continue
        name = f"in{i}"
        if i in case.weights:
            ins.append(g.add_weight(name, arr))
            continue
        shape = [
            SymDim(case.sym[i][d]) if d in case.sym.get(i, {}) else s
            for d, s in enumerate(arr.shape)
        ]
        ins.append(g.add_input(name, TensorType(DType.from_numpy(arr.dtype), shape)))
        feeds[name] = arr
    node = g.add_node(case.op, ins, case.attrs, name=f"{case.op}_node")
    g.set_outputs(node.outputs)
    return g.validate(), feeds


def run(model, feeds) -> list[np.ndarray]:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def check_outputs(got, want, g: Graph, rtol: float, atol: float, what: str) -> None:
    assert len(got) == len(want), what
    for k, (a, b, v) in enumerate(zip(got, want, g.outputs)):
        b = np.asarray(b)
        assert a.dtype == b.dtype, f"{what} output {k}: dtype {a.dtype} != {b.dtype}"
        assert a.shape == b.shape, f"{what} output {k}: shape {a.shape} != {b.shape}"
        if v.type.shape is not None:  # msc's inferred shape agrees with what ran
            for d_got, d_typed in zip(a.shape, v.type.shape):
                assert not isinstance(d_typed, int) or d_typed == d_got, f"{what}: type {v.type}"
        if a.dtype.kind in "fc":
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
        else:
            np.testing.assert_array_equal(a, b, err_msg=what)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_op(case: Case) -> None:
    g, feeds = build(case)
    want = case.ref(*case.inputs)
    want = list(want) if isinstance(want, (list, tuple)) else [want]
    # The default opset for this graph (lowered where onnxruntime lacks the newest kernels).
    default = conx.choose_opset(g)[0]
    for opset in sorted({o for o in OPSETS if o != DEFAULT} | {default}):
        what = f"{case.id} at opset {opset}"
        if opset < case.since:
            with pytest.raises(UnsupportedOpsError) as err:
                conx.to_model(g, opset)
            assert case.op in str(err.value), what
            continue
        model = conx.to_model(g, opset)
        onnx.checker.check_model(model, full_check=True)
        check_outputs(run(model, feeds), want, g, case.rtol, case.atol, what)


def test_if_branches_read_outer_values() -> None:
    g = Graph("if")
    cond = g.add_input("cond", TensorType(DType.BOOL, ()))
    x = g.add_input("x", TensorType(DType.FLOAT32, (2, 3)))
    w = g.add_weight("w", f32(3))
    then_g, else_g = Graph("then"), Graph("else")
    then_g.set_outputs([then_g.op("add", then_g.op("relu", x), w), x])
    else_g.set_outputs([else_g.op("neg", x), else_g.op("mul", x, w)])
    node = g.add_node("if", [cond], {"then_branch": then_g, "else_branch": else_g}, name="branch")
    g.set_outputs(node.outputs)
    xv, wv = f32(2, 3), w.numpy()
    for opset in OPSETS:
        model = conx.to_model(g, opset)
        onnx.checker.check_model(model, full_check=True)
        for c, want in ((True, [np.maximum(xv, 0) + wv, xv]), (False, [-xv, xv * wv])):
            got = run(model, {"cond": np.array(c), "x": xv})
            check_outputs(got, want, g, 1e-6, 1e-6, f"if {c} at opset {opset}")


DEDICATED = {"if": test_if_branches_read_outer_values}


# The op families this table covers: ops defined there, and ops whose emitters live in the
# codegen's modules of those families. The other families (control: tests/frontend/
# test_onnx_control.py; signal, tensor, transformer, vision, recurrent: the ONNX backend cases
# in tests/frontend/test_onnx_extra_ops.py) have their own tests.
FAMILIES = ("msc.ops.elementwise", "msc.ops.nn", "msc.ops.reduce", "msc.ops.shape")
EMITTERS = tuple(f"codegen.onnx.{m}" for m in ("elementwise", "nn", "reduce", "shape"))


def _covered_here(op: str) -> bool:
    if ops.get(op).infer_fn.__module__ in FAMILIES:
        return True
    return any(
        (em := conx.EMITTERS.lookup(op, v)) is not None and em.fn.__module__ in EMITTERS
        for v in conx.EMITTERS.versions(op)
    )


def test_every_canonical_op_has_a_case() -> None:
    mine = {op for op in ops.names() if _covered_here(op)}
    missing = sorted(mine - {c.op for c in CASES} - set(DEDICATED))
    assert not missing, f"ops without an ONNX codegen test case: {missing}"


def test_every_foundation_op_converts_at_the_default_opset() -> None:
    gaps = [
        op
        for op in ops.names()
        if ops.get(op).infer_fn.__module__ in FAMILIES
        and conx.EMITTERS.lookup(op, DEFAULT) is None
        and op not in rules
    ]
    assert not gaps, gaps
