"""The JAX / StableHLO op table: jax.numpy / jax.nn / jax.lax functions with a small sample
each, exported by jax.export, read by msc and run through generated PyTorch and through ONNX
(onnxruntime) against JAX on CPU (atol 1e-5 unless the row says otherwise); then an MLP and a
small CNN written as pure JAX functions over a params pytree, and the pin of jax."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="the jax extra (jax, jaxlib) is not installed")

import jax.numpy as jnp  # noqa: E402

import msc  # noqa: E402
from msc.errors import BadModelError, UnsupportedOpsError  # noqa: E402
from tests.tflite_cases import close, run_onnx, run_torch  # noqa: E402

RNG = np.random.default_rng(0)


def f32(*shape, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


@dataclass
class Case:
    id: str
    fn: Callable[..., Any]
    args: list[np.ndarray]
    atol: float = 1e-5
    rtol: float = 1e-5
    params: Any = None
    marks: list = field(default_factory=list)


X = f32(2, 3, 4)
Y = f32(2, 3, 4)
POS = f32(2, 3, 4, lo=0.1, hi=3.0)
IMG = f32(2, 6, 6, 3)
KER = f32(3, 3, 3, 4, lo=-0.5, hi=0.5)
TIES = RNG.integers(0, 3, (2, 3, 4)).astype(np.float32)
IDX2 = np.array([1, 0], np.int32)
IDX3 = np.array([2, 0, 1], np.int32)
IDX_ALONG = RNG.integers(0, 4, (2, 3, 2)).astype(np.int32)


def _extremes(dt) -> np.ndarray:
    """Every bit pattern's corner (min, -1, 0, 1, max) and random ones of an integer type."""
    info = np.iinfo(dt)
    corners = [info.min, info.min + 1, 0, 1, info.max, info.max - 1, max(info.min, -1)]
    rand = RNG.integers(info.min, info.max, 17, dtype=dt, endpoint=True)
    return np.concatenate([np.array(corners, dt), rand])


SIGNED = np.array([1.5, -0.0, 0.0, -np.inf, np.inf, np.nan, -2.0, 3.0], np.float32)
INTS = RNG.integers(-9, 9, (2, 3, 4)).astype(np.int32)
INTS_ZEROS = RNG.integers(-3, 3, (2, 3, 4)).astype(np.int32)

UNARY = {
    "exp": jnp.exp,
    "tanh": jnp.tanh,
    "negative": jnp.negative,
    "abs": jnp.abs,
    "floor": jnp.floor,
    "ceil": jnp.ceil,
    "sin": jnp.sin,
    "cos": jnp.cos,
    "sign": jnp.sign,
    "expm1": jnp.expm1,
    "round": jnp.round,
    "square": jnp.square,
    "relu": jax.nn.relu,
    "sigmoid": jax.nn.sigmoid,
    "silu": jax.nn.silu,
    "gelu_tanh": lambda x: jax.nn.gelu(x, approximate=True),
    "gelu_erf": lambda x: jax.nn.gelu(x, approximate=False),
    "softplus": jax.nn.softplus,
    "leaky_relu": jax.nn.leaky_relu,
    "elu": jax.nn.elu,
    "relu6": jax.nn.relu6,
    "hard_tanh": jax.nn.hard_tanh,
    "softmax": jax.nn.softmax,
    "log_softmax": jax.nn.log_softmax,
    "logsumexp": jax.nn.logsumexp,
    "isfinite": jnp.isfinite,
    "erf": jax.lax.erf,
    "clip": lambda x: jnp.clip(x, -1.0, 0.5),
    "lax_clamp": lambda x: jax.lax.clamp(-0.5, x, 1.0),
}
POSITIVE = {
    "log": jnp.log,
    "sqrt": jnp.sqrt,
    "rsqrt": jax.lax.rsqrt,
    "log1p": jnp.log1p,
    "cbrt": jnp.cbrt,
}
BINARY = {
    "add": jnp.add,
    "subtract": jnp.subtract,
    "multiply": jnp.multiply,
    "divide": jnp.divide,
    "maximum": jnp.maximum,
    "minimum": jnp.minimum,
    "where": lambda a, b: jnp.where(a > b, a, b),
    "greater_equal": lambda a, b: (a >= b).astype(jnp.float32),
    "equal": lambda a, b: a == jnp.round(b),
    "fmod": jnp.fmod,
    "arctan2": jnp.arctan2,
}


LN_W, LN_B = f32(4), f32(4)


def _layer_norm(x, w, b):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / jnp.sqrt(v + 1e-5) * w + b


def _rms_norm(x, w):
    return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w


def _flax_layer_norm(x, w, b):
    """As flax.linen.LayerNorm spells it: a one-pass variance guarded at 0, the scale on the
    inverse deviation."""
    m = x.mean(-1)
    var = jnp.maximum(0.0, (x * x).mean(-1) - m * m)
    return (x - m[..., None]) * (jax.lax.rsqrt(var[..., None] + 1e-6) * w) + b


def _flax_rms_norm(x, w):
    """As flax.linen.RMSNorm spells it: a zero mean subtracted, the scale on the inverse
    deviation."""
    var = (x * x).mean(-1, keepdims=True)
    return (x - jnp.zeros(x.shape[:-1])[..., None]) * (jax.lax.rsqrt(var + 1e-6) * w)


def _scan_step(c, x):
    c = c * 0.5 + x
    return c, c * 2.0


CASES = [
    *[Case(k, f, [X]) for k, f in UNARY.items()],
    *[Case(k, f, [POS], atol=1e-5, rtol=1e-5) for k, f in POSITIVE.items()],
    *[Case(k, f, [X, Y]) for k, f in BINARY.items()],
    Case("power", jnp.power, [POS, Y], atol=1e-4, rtol=1e-5),
    # bits: bitcast_convert, and TOTALORDER compares through the floats' ordered bits (-0 < 0,
    # NaN after inf: jnp.searchsorted's scan)
    Case("bitcast_f32_i32", lambda a: jax.lax.bitcast_convert_type(a, jnp.int32), [SIGNED]),
    Case("bitcast_i32_f32", lambda i: jax.lax.bitcast_convert_type(i, jnp.float32), [INTS]),
    Case("signbit", jnp.signbit, [SIGNED]),
    Case("copysign", jnp.copysign, [SIGNED[::-1].copy(), SIGNED]),
    Case("nextafter", jnp.nextafter, [X, Y]),
    Case("searchsorted_total_order", jnp.searchsorted, [np.sort(SIGNED), SIGNED[::-1].copy()]),
    Case("searchsorted_right", lambda a, v: jnp.searchsorted(a, v, "right"), [np.sort(X[0, 0]), X]),
    *[
        Case(f"bitwise_count_{dt.__name__}", jnp.bitwise_count, [_extremes(dt)])
        for dt in (np.int8, np.uint8, np.int16, np.int32)  # no i64 without jax_enable_x64
    ],
    # integer division by zero as StableHLO defines it (x / 0 = -1, x % 0 = x)
    Case("int_div_by_zero", jax.lax.div, [INTS, INTS_ZEROS]),
    Case("int_rem_by_zero", jax.lax.rem, [INTS, INTS_ZEROS]),
    Case("gcd", jnp.gcd, [INTS, INTS_ZEROS]),
    Case("logical_and", lambda a, b: jnp.logical_and(a > 0, b > 0), [X, Y]),
    Case("logical_or", lambda a, b: jnp.logical_or(a > 0, b > 0), [X, Y]),
    Case("logical_not", lambda a: jnp.logical_not(a > 0), [X]),
    Case("where_bool", lambda a, b: jnp.where(a > 0, a > b, b > 0), [X, Y]),
    Case("astype_int", lambda a: (a * 3).astype(jnp.int32), [X]),
    Case("broadcast_add", lambda a, b: a + b, [X, f32(4)]),
    Case("lax_clamp_arrays", lambda a, b: jax.lax.clamp(b - 1.0, a, b), [X, Y]),
    Case("scalar_mul", lambda a: a * 2.5 + 1.0, [X]),
    # a [n] -> [1, 1, n] reshape whose first user makes nothing bigger (Flax's batch norm:
    # rsqrt(var + eps) on the reshaped variance) keeps its reshape
    Case(
        "reshaped_then_scalar",
        lambda a, v: a * jax.lax.rsqrt(v.reshape(1, 1, 4) + 1.0),
        [X, POS[0, 0]],
    ),
    # shape
    Case("reshape", lambda a: a.reshape(6, 4), [X]),
    Case("transpose", lambda a: jnp.transpose(a, (2, 0, 1)), [X]),
    Case("swapaxes", lambda a: jnp.swapaxes(a, 1, 2), [X]),
    Case("slice", lambda a: a[:, 1:, ::2], [X]),
    Case("concatenate", lambda a, b: jnp.concatenate([a, b], axis=1), [X, Y]),
    Case("stack", lambda a, b: jnp.stack([a, b], axis=0), [X, Y]),
    Case("pad", lambda a: jnp.pad(a, ((0, 0), (1, 2), (0, 1))), [X]),
    Case("flip", lambda a: jnp.flip(a, axis=2), [X]),
    Case("expand_dims", lambda a: jnp.expand_dims(a, 1), [X]),
    Case("broadcast_to", lambda a: jnp.broadcast_to(a[:, :1], (2, 3, 4)), [X]),
    Case("arange", lambda a: a + jnp.arange(4, dtype=jnp.float32), [X]),
    Case("tril", lambda a: jnp.tril(a), [f32(4, 4)]),
    Case("split", lambda a: tuple(jnp.split(a, 2, axis=2)), [X]),
    Case("squeeze", lambda a: jnp.squeeze(a[:, :1], 1), [X]),
    Case("repeat", lambda a: jnp.repeat(a, 2, axis=1), [X]),
    Case("tile", lambda a: jnp.tile(a, (1, 2, 1)), [X]),
    # reduce
    Case("sum", lambda a: jnp.sum(a, axis=1), [X]),
    Case("sum_all", jnp.sum, [X], atol=1e-5),
    Case("mean", lambda a: jnp.mean(a, axis=(1, 2)), [X]),
    Case("max", lambda a: jnp.max(a, axis=-1), [X]),
    Case("min", lambda a: jnp.min(a, axis=0), [X]),
    Case("prod", lambda a: jnp.prod(a, axis=2), [X]),
    Case("var", lambda a: jnp.var(a, axis=-1), [X]),
    Case("all", lambda a: jnp.all(a > 0, axis=1), [X]),
    Case("any", lambda a: jnp.any(a > 0, axis=1), [X]),
    Case("argmax", lambda a: jnp.argmax(a, axis=1), [X]),
    Case("argmin", lambda a: jnp.argmin(a, axis=0), [X]),
    Case("cumsum", lambda a: jnp.cumsum(a, axis=1), [X]),
    Case("cumsum_reverse", lambda a: jax.lax.cumsum(a, axis=2, reverse=True), [X]),
    Case("cumprod", lambda a: jnp.cumprod(a, axis=0), [X]),
    Case("cummax", lambda a: jax.lax.cummax(a, axis=1), [X]),
    # linear
    Case("matmul", jnp.matmul, [f32(3, 4), f32(4, 5)]),
    Case("matmul_batched", jnp.matmul, [f32(2, 3, 4), f32(2, 4, 5)]),
    Case("matmul_3d_2d", jnp.matmul, [f32(2, 3, 4), f32(4, 5)]),
    Case("matvec", jnp.matmul, [f32(3, 4), f32(4)]),
    Case("dot_vectors", jnp.dot, [f32(4), f32(4)]),
    Case("vecmat_batched", jnp.vecmat, [f32(2, 3), f32(2, 3, 4)]),
    Case("einsum", lambda a, b: jnp.einsum("bij,bkj->bik", a, b), [X, Y]),
    Case("outer", jnp.outer, [f32(3), f32(4)]),
    # conv / pool
    Case(
        "conv_nhwc",
        lambda x, k: jax.lax.conv_general_dilated(
            x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        ),
        [IMG, KER],
        atol=1e-4,
    ),
    Case(
        "conv_nchw_strided",
        lambda x, k: jax.lax.conv_general_dilated(x, k, (2, 2), "VALID", rhs_dilation=(1, 1)),
        [f32(1, 3, 7, 7), f32(4, 3, 3, 3)],
        atol=1e-4,
    ),
    Case(
        "conv_depthwise",
        lambda x, k: jax.lax.conv_general_dilated(
            x,
            k,
            (1, 1),
            "SAME",
            dimension_numbers=("NHWC", "HWIO", "NHWC"),
            feature_group_count=3,
        ),
        [IMG, f32(3, 3, 1, 3)],
        atol=1e-4,
    ),
    Case(
        "max_pool",
        lambda x: jax.lax.reduce_window(
            x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"
        ),
        [IMG],
    ),
    Case(
        "avg_pool",
        lambda x: (
            jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME") / 9.0
        ),
        [IMG],
    ),
    # spelled-out norms (fused back into layer_norm / rms_norm)
    Case("layer_norm", lambda a: _layer_norm(a, LN_W, LN_B), [X], atol=1e-5),
    Case("rms_norm", lambda a: _rms_norm(a, LN_W), [X], atol=1e-5),
    Case("flax_layer_norm", lambda a: _flax_layer_norm(a, LN_W, LN_B), [X], atol=1e-5),
    Case("flax_rms_norm", lambda a: _flax_rms_norm(a, LN_W), [X], atol=1e-5),
    # gather / scatter / dynamic slices (indices in range: out of range, StableHLO clamps a
    # gather and drops a scatter update)
    Case("take", lambda a, i: jnp.take(a, i, axis=1), [X, IDX3]),
    Case("getitem", lambda a, i: a[i], [X, IDX2]),
    Case("getitem_2d", lambda a, i, j: a[i, j], [X, IDX2, np.array([2, 1], np.int32)]),
    Case("getitem_cols", lambda a, i, j: a[:, i, j], [X, np.array([2, 0], np.int32), IDX2]),
    Case("getitem_const", lambda a: a[:, jnp.array([2, 0, 2])], [X]),
    Case("take_along_axis", lambda a, i: jnp.take_along_axis(a, i, axis=2), [X, IDX_ALONG]),
    # the general gather: windows at run-time starts (clamped to fit), batching dims
    Case(
        "gather_windows",
        lambda a, s: jax.vmap(lambda r, i: jax.lax.dynamic_slice(r, (i, 1), (2, 3)))(a, s),
        [X, np.array([0, 5], np.int32)],
    ),
    Case(
        "gather_windows_batched",
        lambda a, s: jax.vmap(lambda r, i: jax.lax.dynamic_slice(r, (i,), (2,)), (0, 0))(a, s),
        [X[:, 0], np.array([3, -1], np.int32)],
    ),
    Case("at_set", lambda a, i: jnp.asarray(a).at[i].set(0.0), [X, IDX2]),
    Case("at_add", lambda a, i, u: jnp.asarray(a).at[:, i].add(u), [X, IDX2, f32(2, 2, 4)]),
    Case("at_set_2d", lambda a, i, u: jnp.asarray(a).at[i, :, 3].set(u), [X, IDX2, f32(2, 3)]),
    # the general scatter: windows (jnp.polyadd's whole-array one, x.at[:, 1:3]), a window
    # that does not fit skipped whole, batching dims (a vmapped .at[].set)
    Case("scatter_whole", jnp.polyadd, [X, Y]),
    Case("scatter_window", lambda a, u: jnp.asarray(a).at[:, 1:3].add(u), [X, f32(2, 2, 4)]),
    Case(
        "scatter_window_skipped",
        lambda a, i, u: jax.lax.scatter_add(
            a,
            i,
            u,
            jax.lax.ScatterDimensionNumbers((1,), (), (0,)),
            mode=jax.lax.GatherScatterMode.FILL_OR_DROP,
        ),
        [f32(6), np.array([[1], [4], [-1]], np.int32), f32(3, 3)],
    ),
    Case(
        "scatter_batched",
        lambda a, i, u: jax.vmap(lambda r, j, v: r.at[j].set(v))(a, i, u),
        [X, np.array([[2, 0], [1, 1]], np.int32), f32(2, 2, 4)],
    ),
    Case("bool_constant", lambda a: jnp.where(np.eye(4, dtype=bool), a, 0.0), [f32(4, 4)]),
    Case(
        "dynamic_slice",
        lambda a, s: jax.lax.dynamic_slice(a, (0, s, 1), (2, 2, 2)),
        [X, np.int32(1)],
    ),
    Case(
        "dynamic_slice_clamped",
        lambda a, s: jax.lax.dynamic_slice(a, (s, s, 0), (1, 2, 4)),
        [X, np.int32(5)],
    ),
    Case(
        "dynamic_update_slice",
        lambda a, u, s: jax.lax.dynamic_update_slice(a, u, (0, s, 1)),
        [X, f32(2, 2, 2), np.int32(1)],
    ),
    Case(
        "dynamic_update_slice_clamped",
        lambda a, u, s: jax.lax.dynamic_update_slice(a, u, (0, s, 0)),
        [X, f32(2, 2, 4), np.int32(7)],
    ),
    # sort (the comparator JAX writes for floats: -0 as 0, NaN last), top_k
    Case("sort", lambda a: jnp.sort(a, axis=1), [X]),
    Case("sort_int", lambda a: jnp.sort(a, axis=0), [RNG.integers(-5, 5, (4, 3)).astype(np.int32)]),
    Case("sort_descending", lambda a: jnp.sort(a, axis=-1, descending=True), [X]),
    Case("argsort", lambda a: jnp.argsort(a, axis=-1), [X]),
    Case("argsort_ties", lambda a: jnp.argsort(a, axis=-1, stable=True), [TIES]),
    Case("argsort_descending", lambda a: jnp.argsort(a, axis=1, descending=True), [TIES]),
    Case("sort_pair", lambda a, b: jax.lax.sort((a, b), dimension=1, num_keys=1), [X, Y]),
    Case("sort_by_second", lambda a, b: jax.lax.sort((b, a), dimension=2)[1], [X, Y]),
    # several keys (a lexicographic comparator): stable argsorts from the last key up
    Case("lexsort", lambda a, b: jnp.lexsort((a, b), axis=1), [INTS_ZEROS, INTS]),
    Case(
        "sort_two_keys",
        lambda a, b, c: jax.lax.sort((a, b, c), dimension=2, num_keys=2),
        [TIES, np.floor(Y), X],
    ),
    Case("top_k", lambda a: jax.lax.top_k(a, 2), [X]),
    Case("top_k_ties", lambda a: jax.lax.top_k(a, 3), [TIES]),
    # control flow
    Case("fori_loop", lambda a: jax.lax.fori_loop(0, 3, lambda i, c: c * 1.5 + i, a), [X]),
    Case(
        "fori_loop_two",
        lambda a, b: jax.lax.fori_loop(1, 4, lambda i, c: (c[0] + c[1], c[1] * 0.5), (a, b)),
        [X, Y],
    ),
    Case(
        "while_loop",
        lambda a: jax.lax.while_loop(lambda c: jnp.sum(c) < 50.0, lambda c: c * 1.5 + 1.0, a),
        [POS],
        atol=1e-4,
    ),
    Case(
        "while_loop_counter",
        lambda a, n: jax.lax.while_loop(
            lambda c: c[0] < n, lambda c: (c[0] + 1, jnp.sin(c[1])), (0, a)
        )[1],
        [X, np.int32(4)],
    ),
    Case("cond", lambda a: jax.lax.cond(a.sum() > 0, lambda v: v * 2, lambda v: v - 1, a), [X]),
    Case("cond_false", lambda a: jax.lax.cond(a.sum() < 0, jnp.sin, jnp.cos, a), [POS]),
    Case(
        "cond_two_outputs",
        lambda a, b: jax.lax.cond(a[0, 0, 0] > b[0, 0, 0], lambda: (a, b + 1), lambda: (b, a)),
        [X, Y],
    ),
    Case("scan", lambda a: jax.lax.scan(_scan_step, jnp.zeros((3, 4), jnp.float32), a), [X]),
    *[
        Case(
            f"switch_{k}",
            lambda a, i: jax.lax.switch(i, [lambda v: v * 2, lambda v: v - 1, jnp.sin], a),
            [X, np.int32(k)],
        )
        for k in (0, 1, 2, 7)
    ],
]

# Rows that do not convert yet, each with why (checked both ways: a listed row that starts
# converting fails, so the list stays true).
EXPECTED_MISSES: dict[str, str] = {}


def _reference(case: Case) -> list[np.ndarray]:
    out = case.fn(*case.args)
    out = list(out) if isinstance(out, tuple | list) else [out]
    return [np.asarray(o) for o in out]


def _outcome(case: Case) -> str:
    """ "" when both targets agree with JAX, else what went wrong."""
    try:
        g = msc.from_jax(case.fn, *case.args)
    except UnsupportedOpsError as e:
        return f"unsupported: {e}"
    ref = _reference(case)
    for run in (run_torch, run_onnx):
        got = run(g, [np.asarray(a) for a in case.args])
        bad = close(got, ref, case.atol, case.rtol)
        if bad:
            return f"{run.__name__}: {bad}"
    return ""


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_op(case: Case):
    why = _outcome(case)
    if case.id in EXPECTED_MISSES:
        assert why, f"{case.id} converts now; drop it from EXPECTED_MISSES"
        return
    assert not why, why


def _mlp(p, x):
    h = jax.nn.gelu(x @ p["fc1"]["kernel"] + p["fc1"]["bias"])
    h = (h - h.mean(-1, keepdims=True)) * jax.lax.rsqrt(h.var(-1, keepdims=True) + 1e-5)
    return jax.nn.softmax(h @ p["fc2"]["kernel"] + p["fc2"]["bias"])


def _cnn(p, x):
    dn = ("NHWC", "HWIO", "NHWC")
    y = jax.lax.conv_general_dilated(x, p["conv1"]["w"], (1, 1), "SAME", dimension_numbers=dn)
    y = jax.nn.relu(y + p["conv1"]["b"])
    y = jax.lax.reduce_window(y, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    y = jax.lax.conv_general_dilated(y, p["conv2"]["w"], (2, 2), "SAME", dimension_numbers=dn)
    y = jax.nn.silu(y + p["conv2"]["b"]).mean(axis=(1, 2))
    return y @ p["head"]["kernel"] + p["head"]["bias"]


MLP_PARAMS = {
    "fc1": {"kernel": f32(8, 16, lo=-0.5, hi=0.5), "bias": f32(16)},
    "fc2": {"kernel": f32(16, 4, lo=-0.5, hi=0.5), "bias": f32(4)},
}
CNN_PARAMS = {
    "conv1": {"w": f32(3, 3, 3, 8, lo=-0.3, hi=0.3), "b": f32(8)},
    "conv2": {"w": f32(3, 3, 8, 8, lo=-0.3, hi=0.3), "b": f32(8)},
    "head": {"kernel": f32(8, 5, lo=-0.5, hi=0.5), "bias": f32(5)},
}


@pytest.mark.parametrize(
    "fn, params, x",
    [(_mlp, MLP_PARAMS, f32(3, 8)), (_cnn, CNN_PARAMS, f32(2, 8, 8, 3))],
    ids=["mlp", "cnn"],
)
def test_models_agree(fn, params, x):
    g = msc.from_jax(fn, x, params=params)
    # weights are named by their pytree paths, the input by the signature
    assert [v.name for v in g.inputs] == ["x"]
    assert sorted(g.weights) == sorted(f"{a}.{b}" for a, sub in params.items() for b in sub)
    assert msc.structural_equal(msc.from_text(msc.to_text(g)), g, names=True, weights="types")
    ref = [np.asarray(fn(params, x))]
    for run in (run_torch, run_onnx):
        bad = close(run(g, [x]), ref, 1e-4, 1e-4)
        assert not bad, f"{run.__name__}: {bad}"


def test_jax_pin():
    """StableHLO is parsed through jaxlib internals: the versions the extra pins are the ones
    the frontend is tested with."""
    import jaxlib

    from msc.frontend.jax import JAX_VERSION

    assert jax.__version__ == JAX_VERSION
    assert jaxlib.__version__ == JAX_VERSION
    from jax._src.interpreters import mlir  # the registration the reader uses

    assert callable(mlir.make_ir_context)


def test_custom_call_refused_by_name_unless_kept():
    text = """
    func.func public @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
      %0 = stablehlo.custom_call @my_kernel(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
      %1 = stablehlo.custom_call @other_kernel(%0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
      %2 = stablehlo.exponential %arg0 : tensor<2x3xf32>
      %3 = stablehlo.rng_bit_generator_missing %2 : tensor<2x3xf32>
      return %1 : tensor<2x3xf32>
    }
    """
    with pytest.raises(BadModelError):
        msc.from_stablehlo(text)  # an unregistered op does not parse
    text = text.replace("      %3 = stablehlo.rng_bit_generator_missing %2 : tensor<2x3xf32>\n", "")
    with pytest.raises(UnsupportedOpsError) as e:
        msc.from_stablehlo(text)
    assert "my_kernel" in str(e.value)
    assert "other_kernel" not in str(e.value)  # downstream of a refused op, not reported
    g = msc.from_stablehlo(text, custom_ops="keep")
    ops = [n.op for n in g.nodes]
    assert sum("my_kernel" in str(o) for o in ops) == 1


def test_shape_assertion_dropped_and_all_unsupported_at_once():
    text = """
    func.func public @main(%arg0: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
      %c = stablehlo.constant dense<true> : tensor<i1>
      stablehlo.custom_call @shape_assertion(%c) {error_message = "x", has_side_effect = true}
        : (tensor<i1>) -> ()
      %0 = stablehlo.custom_call @k1(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
      %1 = stablehlo.custom_call @k2(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
      return %0, %1 : tensor<2x3xf32>, tensor<2x3xf32>
    }
    """
    with pytest.raises(UnsupportedOpsError) as e:
        msc.from_stablehlo(text)
    assert "k1" in str(e.value) and "k2" in str(e.value)
    assert "shape_assertion" not in str(e.value)


def test_symbolic_batch_kept():
    """jax.export's symbolic dims become msc's symbols; the graph runs at other sizes."""
    from jax import export

    (b,) = export.symbolic_shape("b")
    w = f32(3, 4)

    def fn(x):
        return jax.nn.softmax(jax.nn.relu(x @ w), -1)

    exp = export.export(jax.jit(fn))(jax.ShapeDtypeStruct((b, 3), jnp.float32))
    g = msc.from_stablehlo(exp.serialize())
    assert str(g.inputs[0].type.shape[0]) == "b"
    assert g.inputs[0].name == "x"
    for n in (1, 5):
        x = f32(n, 3)
        for run in (run_torch, run_onnx):
            assert not close(run(g, [x]), [np.asarray(fn(x))], 1e-5, 1e-5), run.__name__


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "symbolic"])
def test_a_sort_written_as_a_full_length_topk_converts_with_its_check(tmp_path, dynamic):
    """jnp.sort / jnp.argsort written to ONNX as TopK of k = the axis' length (a Gather of
    Shape at a symbolic length) read back as topk; diff counts a topk of the whole axis as the
    sort: ONNX's TopK orders ties by index (lower first, either direction), as a stable sort
    does and as JAX does here (ties included below)."""
    import onnxruntime as ort
    from jax import export

    from msc.analysis.convert import convert

    def fn(x):
        return jnp.sort(x, axis=0) * 2.0, jnp.argsort(x, axis=-1, descending=True)

    shape = export.symbolic_shape("b, n") if dynamic else (4, 6)
    exp = export.export(jax.jit(fn))(jax.ShapeDtypeStruct(shape, jnp.float32))
    src = tmp_path / "f.jaxexport"
    src.write_bytes(exp.serialize())
    r = convert(src, tmp_path / "f.onnx", to="onnx")
    assert r.ok and r.equivalent, r.verdict
    assert "topk of the whole axis -> sort x2 (B)" in r.verdict, r.verdict
    ties = np.array([[1, 3, 3, 1, 2, 3], [0] * 6, [5, 1, 5, 1, 5, 1], [2, 2, 1, 1, 3, 3]])
    x = ties.astype(np.float32)
    s = ort.InferenceSession(str(tmp_path / "f.onnx"))
    got = s.run(None, {s.get_inputs()[0].name: x})
    for a, b in zip(got, fn(x), strict=True):
        np.testing.assert_array_equal(a, np.asarray(b))


def test_symbolic_reshape_reads_as_a_reshape():
    """A flatten under a symbolic batch is stablehlo.dynamic_reshape; two run-time sizes in
    one result take the shape operand."""
    from jax import export

    b, s = export.symbolic_shape("b, s")

    def flat(x):
        return x.reshape(x.shape[0], -1) * 2.0

    def merge(x):
        return x.reshape(x.shape[0] * x.shape[1], 4).reshape(x.shape[0], x.shape[1] * 4)

    for fn, spec, sizes in (
        (flat, (b, 3, 4), [(1, 3, 4), (5, 3, 4)]),
        (merge, (b, s, 4), [(2, 3, 4), (1, 7, 4)]),
    ):
        exp = export.export(jax.jit(fn))(jax.ShapeDtypeStruct(spec, jnp.float32))
        assert "dynamic_reshape" in exp.mlir_module()
        g = msc.from_stablehlo(exp.serialize())
        assert "reshape" in {n.op for n in g.nodes}
        for shape in sizes:
            x = f32(*shape)
            assert not close(run_torch(g, [x]), [np.asarray(fn(x))], 1e-6, 1e-6), shape


def test_bitcast_between_widths_and_complex_reported_at_once():
    """A bitcast to another width (which changes the shape) and a complex number map onto
    nothing msc holds: both are reported in one error, each with why."""

    def fn(a, k):
        return jax.lax.bitcast_convert_type(a, jnp.uint8), jnp.sort_complex(k).real

    with pytest.raises(UnsupportedOpsError) as e:
        msc.from_jax(fn, X, Y)
    msg = str(e.value)
    assert "stablehlo.bitcast_convert" in msg and "from f32 to u8 (another width)" in msg
    assert "stablehlo.convert" in msg and "complex<f32>" in msg


def test_control_flow_reads_as_loop_and_if():
    """fori_loop is a counted loop, while_loop a loop on its condition, cond an if on the
    predicate itself (no index compare), switch a chain of ifs."""
    fori = msc.from_jax(lambda a: jax.lax.fori_loop(0, 3, lambda i, c: c * 2.0, a), X)
    (node,) = [n for n in fori.nodes if n.op == "loop"]
    trips = node.inputs[0].producer
    assert trips.op == "constant" and int(trips.attrs["value"]) == 3 and node.inputs[1] is None
    cond = msc.from_jax(lambda a: jax.lax.cond(a.sum() > 0, jnp.sin, jnp.cos, a), X)
    (node,) = [n for n in cond.nodes if n.op == "if"]
    assert node.inputs[0].producer.op == "gt"
    assert "sin" in {n.op for n in node.attrs["then_branch"].nodes}
    switch = msc.from_jax(
        lambda a, i: jax.lax.switch(i, [jnp.sin, jnp.cos, jnp.tanh], a), X, np.int32(0)
    )
    assert [n.op for n in switch.nodes].count("if") == 1
    assert msc.structural_equal(msc.from_text(msc.to_text(switch)), switch, names=True)


def test_running_sums_read_as_cumsum():
    """jnp.cumsum (a reduce_window as long as the axis) is a cumsum, not a pool."""
    for fn, op, reverse in (
        (lambda a: jnp.cumsum(a, axis=1), "cumsum", False),
        (lambda a: jax.lax.cumsum(a, axis=2, reverse=True), "cumsum", True),
        (lambda a: jnp.cumprod(a, axis=0), "cumprod", False),
    ):
        g = msc.from_jax(fn, X)
        (node,) = [n for n in g.nodes if n.op == op]
        assert node.attrs["reverse"] is reverse


@pytest.mark.parametrize(
    "fn, op",
    [
        (jax.nn.softmax, "softmax"),
        (lambda a: jax.nn.softmax(a, axis=1), "softmax"),
        (jax.nn.log_softmax, "log_softmax"),
        (jax.nn.sigmoid, "sigmoid"),
        (jax.nn.silu, "silu"),
        (lambda a: jax.nn.gelu(a, approximate=True), "gelu"),
        (lambda a: _layer_norm(a, LN_W, LN_B), "layer_norm"),
        (lambda a: _rms_norm(a, LN_W), "rms_norm"),
        (lambda a: _flax_layer_norm(a, LN_W, LN_B), "layer_norm"),
        (lambda a: _flax_rms_norm(a, LN_W), "rms_norm"),
        (lambda a: jnp.mean(a, axis=(1, 2), keepdims=True), "reduce_mean"),
    ],
    ids=[
        "softmax",
        "softmax_axis1",
        "log_softmax",
        "sigmoid",
        "silu",
        "gelu_tanh",
        "layer_norm",
        "rms_norm",
        "flax_layer_norm",
        "flax_rms_norm",
        "mean",
    ],
)
def test_jax_spellings_read_as_the_op(fn, op):
    """What JAX spells out (softmax as exp over a sum, logistic as 1 / (1 + exp(-x)), a mean as
    a sum over the count, keepdims as a reshape, x - mean computed twice) reads as one op."""
    g = msc.from_jax(fn, X)
    ops = [n.op for n in g.nodes if n.op != "constant"]
    assert ops == [op], ops


def test_symbolic_slice_reads_as_a_slice():
    """``pos[a : a + n]`` and ``x[:, :, 0]`` with ``n`` a symbolic dim are stablehlo.dynamic_gather
    (the window's length a run-time value): read as a slice; ``jnp.arange(n)`` is a
    dynamic_iota; from_jax's dynamic= makes ``n`` symbolic."""
    pos = f32(16, 4)

    def head(p, t):
        return t + p[: t.shape[1]]

    def shifted(p, t):
        return t * p[3 : t.shape[1] + 3]

    def column(p, t):  # x[:, :, 0] under a symbolic dim: a window with a collapsed dim
        return t[:, :, 0] + p[1 : t.shape[1] + 1, 2]

    def positions(p, t):  # jnp.arange of a symbolic size: stablehlo.dynamic_iota
        return t + jnp.arange(t.shape[1], dtype=jnp.float32)[None, :, None]

    for fn in (head, shifted, column, positions):
        g = msc.from_jax(fn, f32(2, 5, 4), params=pos, dynamic={"t": {1: msc.SymDim("n", 1, 12)}})
        assert "slice" in {n.op for n in g.nodes} or fn is positions
        assert str(g.inputs[0].type.shape[1]) == "n"
        for n in (1, 7, 12):
            t = f32(2, n, 4)
            for run in (run_torch, run_onnx):
                assert not close(run(g, [t]), [np.asarray(fn(pos, t))], 1e-6, 1e-6), (n, run)


def test_symbolic_window_from_zero_and_iota_read_as_the_source_wrote_them():
    """``p[:n]`` at a symbolic ``n`` (a dynamic_gather from constant zero starts) is one slice
    of the dim it cuts, with no start clamp (a window no longer than its dim fits from 0),
    and ``jnp.arange(n)`` (a 1-d dynamic_iota) is a range: what torch.export and ONNX write."""
    pos = f32(16, 4)

    def head(p, t):
        return t + p[: t.shape[1]]

    def positions(p, t):
        return t + jnp.arange(t.shape[1], dtype=jnp.float32)[None, :, None]

    dyn = {"t": {1: msc.SymDim("n", 1, 12)}}
    g = msc.from_jax(head, f32(2, 5, 4), params=pos, dynamic=dyn)
    ops = [n.op for n in g.nodes]
    assert not {"minimum", "maximum", "clamp"} & set(ops), ops
    (cut,) = [n for n in g.nodes if n.op == "slice" and n.inputs[0].type.shape == (16, 4)]
    assert list(cut.attrs["axes"]) == [0] and str(cut.outputs[0].type.shape[0]) == "n"
    g = msc.from_jax(positions, f32(2, 5, 4), params=pos, dynamic=dyn)
    ops = [n.op for n in g.nodes]
    assert "range" in ops and "cumsum" not in ops, ops
    for n in (1, 12):
        t = f32(2, n, 4)
        assert not close(run_torch(g, [t]), [np.asarray(positions(pos, t))], 1e-6, 1e-6)


def test_symbolic_running_sums_splits_and_index_grids_read_back():
    """What the transformers masks written as JAX lower to at a symbolic length, read with the
    length kept: ``jnp.cumsum`` (a custom_call @stablehlo.dynamic_reduce_window, onto cumsum),
    ``jnp.split`` (stablehlo.real_dynamic_slice, onto slice) and indexing by ``jnp.arange``
    grids (a gather from a symbolic operand)."""

    def running(p, t):
        return jnp.cumsum(t, axis=1) + jnp.cumsum(t[:, ::-1], axis=1)[:, ::-1] * p[0, 0]

    def split(p, t):
        a, b = jnp.split(t, [1], axis=-1)
        return b * a

    def grid(p, t):
        n = t.shape[1]
        rows = jnp.arange(t.shape[0])[:, None, None]
        return t[rows, jnp.arange(n)[None, :, None], jnp.arange(4)[None, None, :]] + p[0, 1]

    pos = f32(16, 4)
    for fn in (running, split, grid):
        g = msc.from_jax(fn, f32(2, 5, 4), params=pos, dynamic={"t": {1: msc.SymDim("n", 1, 12)}})
        assert str(g.outputs[0].type.shape[1]) == "n", (fn.__name__, g.outputs[0].type)
        if fn is running:
            assert [n.op for n in g.nodes].count("cumsum") >= 2  # (and the reversal's iota)
        for n in (1, 7, 12):
            t = f32(2, n, 4)
            assert not close(run_torch(g, [t]), [np.asarray(fn(pos, t))], 1e-5, 1e-5), (fn, n)


def test_unused_params_keep_their_positions():
    """A params leaf the function does not read (a head another method uses) stays a weight,
    and the weights after it keep their names (jax.jit drops unused arguments by default)."""
    params = {"a": f32(4), "b": f32(3, 4), "c": f32(4)}
    g = msc.from_jax(lambda p, x: x * p["a"] + p["c"], X, params=params)
    assert {n: tuple(w.type.shape) for n, w in g.weights.items()} == {
        "a": (4,),
        "b": (3, 4),
        "c": (4,),
    }
    assert not g.weights["b"].uses
    ref = X * params["a"] + params["c"]
    assert not close(run_torch(g, [X]), [ref], 1e-6, 1e-6)


def test_dynamic_names_inputs():
    """dynamic= takes the inputs by their signature names (a ShapeDtypeStruct too); a name
    that is no input is an error listing the inputs."""
    spec = jax.ShapeDtypeStruct((2, 3, 4), jnp.float32)
    g = msc.from_jax(lambda a, b: a * b, spec, Y, dynamic={"a": {0: "n"}, "b": {0: "n"}})
    assert [str(v.type.shape[0]) for v in g.inputs] == ["n", "n"]
    with pytest.raises(ValueError, match=r"\['a', 'b'\]"):
        msc.from_jax(lambda a, b: a * b, X, Y, dynamic={"x": {0: "n"}})


def test_name_scopes_are_module_paths():
    """JAX's name stack (jax.named_scope, Flax linen's module names) is each node's module
    path; jit / vmap / einsum specs in it are not."""

    def fn(a, b):
        with jax.named_scope("block"):
            with jax.named_scope("inner"):
                c = jnp.einsum("bij,bkj->bik", a, b)
            return jax.vmap(jnp.tanh)(c)

    g = msc.from_jax(fn, X, Y)
    assert {n.op: n.provenance.module for n in g.nodes} == {
        "einsum": "block/inner",
        "tanh": "block",
    }


def test_outputs_keep_their_pytree_structure():
    """A dict / nested output is the graph's output_tree (the generated PyTorch returns the
    same structure), its leaves named by their keys; one array or a flat tuple needs none."""
    import torch

    import codegen.torch

    def fn(a, b):
        return {"logits": a * 2.0, "aux": (b + 1.0, None, [a - b])}

    g = msc.from_jax(fn, X, Y)
    assert g.output_tree == {
        "dict": [
            ["aux", {"tuple": [{"leaf": 0}, {"const": None}, {"list": [{"leaf": 1}]}]}],
            ["logits", {"leaf": 2}],
        ]
    }
    assert g.outputs[2].name == "logits"
    assert msc.structural_equal(msc.from_text(msc.to_text(g)), g, names=True)
    out = codegen.torch.to_module(g)(torch.from_numpy(X), torch.from_numpy(Y))
    ref = fn(X, Y)
    assert sorted(out) == ["aux", "logits"] and out["aux"][1] is None
    np.testing.assert_allclose(out["aux"][2][0].numpy(), ref["aux"][2][0], rtol=1e-6)
    np.testing.assert_allclose(out["logits"].numpy(), ref["logits"], rtol=1e-6)
    assert msc.from_jax(lambda a: a + 1.0, X).output_tree is None
    assert msc.from_jax(lambda a: (a, a * 2.0), X).output_tree is None
    assert msc.from_jax(lambda a: (a,), X).output_tree == {"tuple": [{"leaf": 0}]}


@pytest.mark.parametrize("full", [False, True], ids=["reduced", "full"])
def test_lapack_svd_reads_as_svd(full):
    """jnp.linalg.svd (LAPACK's gesdd as a custom_call on CPU) reads as msc's svd: PyTorch
    agrees on the singular values and the product (U and V's signs are free); ONNX has no
    SVD and says so."""
    import codegen.onnx

    def fn(a):
        u, s, vt = jnp.linalg.svd(a, full_matrices=full)
        k = s.shape[-1]
        return s, (u[..., :k] * s[..., None, :]) @ vt[..., :k, :], jnp.polyfit(a[0, :3, 0], s[0], 1)

    a = f32(2, 5, 3)
    g = msc.from_jax(fn, a)
    assert "svd" in {n.op for n in g.nodes}
    ref = [np.asarray(o) for o in fn(a)]
    assert not close(run_torch(g, [a]), ref, 1e-4, 1e-4)
    with pytest.raises(UnsupportedOpsError, match="svd"):
        codegen.onnx.to_model(g)
