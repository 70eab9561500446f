"""The enumerated JAX op table (issue 33): every public function of ``jax.numpy`` and
``jax.nn`` with one small sample, exported by ``jax.export``, read by ``msc.from_jax`` and run
through generated PyTorch and through ONNX (onnxruntime) against JAX on CPU.

Samples: ``SAMPLES`` gives the functions whose arguments cannot be guessed (a shape, an axis,
indices, equation strings); every other function is tried on ``GUESSES`` in order (one float
array, two, ints, bools, vectors, matrices) and the first call that ``jax.jit`` traces is its
sample. A function is not counted when no sample traces (it builds an array from Python
values, reads a file, or its output's shape depends on the values) or when its result does
not depend on the array's values (a shape or dtype query): ``outcome`` says which.

tests/frontend/test_jax_op_table.py checks every function against the committed results
(bench/results/jax_op_coverage.json), both ways; bench/jax_op_coverage.py writes those results
and docs/jax_op_coverage.md.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

ATOL = RTOL = 1e-4  # float32, after a different library's kernels (as the PyTorch table)

_RNG = np.random.default_rng(0)
F = _RNG.uniform(0.1, 0.9, (2, 3, 4)).astype(np.float32)  # inside every unary op's domain
F2 = _RNG.uniform(0.1, 0.9, (2, 3, 4)).astype(np.float32)
F3 = _RNG.uniform(0.1, 0.9, (2, 3, 4)).astype(np.float32)
I = _RNG.integers(1, 7, (2, 3, 4)).astype(np.int32)  # noqa: E741 - the int sample
I2 = _RNG.integers(1, 4, (2, 3, 4)).astype(np.int32)
B = _RNG.uniform(size=(2, 3, 4)) > 0.5
B2 = _RNG.uniform(size=(2, 3, 4)) > 0.5
V = _RNG.uniform(0.1, 0.9, (5,)).astype(np.float32)
V2 = _RNG.uniform(0.1, 0.9, (3,)).astype(np.float32)
M = _RNG.uniform(0.1, 0.9, (4, 4)).astype(np.float32)
M2 = _RNG.uniform(0.1, 0.9, (4, 4)).astype(np.float32)
IDX = np.array([2, 0, 1], np.int32)
Q = _RNG.uniform(-1, 1, (2, 5, 2, 4)).astype(np.float32)  # batch, seq, heads, head dim

GUESSES: list[tuple[np.ndarray, ...]] = [(F,), (F, F2), (I,), (I, I2), (B,), (B, B2), (V,), (V, V2)]
GUESSES += [(M,), (M, M2), (F, F2, F3)]


def _p(fn: Callable, *args: Any, **kwargs: Any) -> Callable:
    """``fn`` with its non-array arguments bound: the arrays stay the traced inputs."""
    return functools.wraps(fn)(functools.partial(fn, *args, **kwargs)) if args or kwargs else fn


def _samples() -> dict[str, tuple[Callable, tuple[np.ndarray, ...]]]:
    import jax
    import jax.nn as jnn
    import jax.numpy as jnp

    s: dict[str, tuple[Callable, tuple[np.ndarray, ...]]] = {
        # shapes, axes and counts the guesses cannot know
        "append": (lambda a, b: jnp.append(a, b, axis=1), (F, F2)),
        "apply_along_axis": (lambda a: jnp.apply_along_axis(jnp.sum, 1, a), (F,)),
        "apply_over_axes": (lambda a: jnp.apply_over_axes(jnp.sum, a, [0, 2]), (F,)),
        "array_split": (lambda a: tuple(jnp.array_split(a, 3, axis=2)), (F,)),
        "broadcast_arrays": (lambda a, b: tuple(jnp.broadcast_arrays(a, b)), (F, V2[:, None])),
        "broadcast_to": (lambda a: jnp.broadcast_to(a, (2, 2, 3, 4)), (F,)),
        "choose": (lambda i, a, b: jnp.choose(i, [a, b]), ((I % 2), F, F2)),
        "clip": (lambda a: jnp.clip(a, 0.3, 0.7), (F,)),
        "column_stack": (lambda a, b: jnp.column_stack([a, b]), (V, V)),
        "compress": (lambda a: jnp.compress(np.array([True, False, True]), a, axis=1), (F,)),
        "concat": (lambda a, b: jnp.concat([a, b], axis=1), (F, F2)),
        "concatenate": (lambda a, b: jnp.concatenate([a, b], axis=2), (F, F2)),
        "delete": (lambda a: jnp.delete(a, 1, axis=1), (F,)),
        "diagonal": (lambda a: jnp.diagonal(a, axis1=1, axis2=2), (F,)),
        "dsplit": (lambda a: tuple(jnp.dsplit(a, 2)), (F,)),
        "dstack": (lambda a, b: jnp.dstack([a, b]), (F, F2)),
        "einsum": (lambda a, b: jnp.einsum("bij,bkj->bik", a, b), (F, F2)),
        "expand_dims": (lambda a: jnp.expand_dims(a, 1), (F,)),
        "extract": (lambda a: jnp.extract(np.eye(4, dtype=bool), a, size=4), (M,)),
        "fill_diagonal": (lambda a: jnp.fill_diagonal(a, 0.5, inplace=False), (M,)),
        "flatnonzero": (lambda a: jnp.flatnonzero(a > 0.5, size=6), (F,)),
        "full_like": (lambda a: jnp.full_like(a, 2.5), (F,)),
        "hsplit": (lambda a: tuple(jnp.hsplit(a, 3)), (F,)),
        "hstack": (lambda a, b: jnp.hstack([a, b]), (F, F2)),
        "insert": (lambda a: jnp.insert(a, 1, 0.5, axis=2), (F,)),
        "moveaxis": (lambda a: jnp.moveaxis(a, 0, 2), (F,)),
        "nonzero": (lambda a: jnp.nonzero(a > 0.5, size=6), (F,)),
        "argwhere": (lambda a: jnp.argwhere(a > 0.5, size=6), (F,)),
        "pad": (lambda a: jnp.pad(a, ((0, 0), (1, 2), (0, 1))), (F,)),
        "partition": (lambda a: jnp.partition(a, 2, axis=2), (F,)),
        "argpartition": (lambda a: jnp.argpartition(a, 2, axis=2), (F,)),
        "permute_dims": (lambda a: jnp.permute_dims(a, (2, 0, 1)), (F,)),
        "place": (lambda a: jnp.place(a, a > 0.5, 0.0, inplace=False), (F,)),
        "put": (lambda a: jnp.put(a, np.array([0, 5]), 9.0, inplace=False), (F,)),
        "put_along_axis": (
            lambda a: jnp.put_along_axis(a, np.zeros((2, 3, 1), np.int32), 9.0, 2, inplace=False),
            (F,),
        ),
        "ravel_multi_index": (
            lambda i, j: jnp.ravel_multi_index((i, j), (7, 4), mode="clip"),
            (I, I2),
        ),
        "repeat": (lambda a: jnp.repeat(a, 2, axis=1), (F,)),
        "reshape": (lambda a: jnp.reshape(a, (6, 4)), (F,)),
        "resize": (lambda a: jnp.resize(a, (5, 6)), (F,)),
        "roll": (lambda a: jnp.roll(a, 1, axis=2), (F,)),
        "rollaxis": (lambda a: jnp.rollaxis(a, 2), (F,)),
        "rot90": (lambda a: jnp.rot90(a, axes=(1, 2)), (F,)),
        "searchsorted": (lambda a, v: jnp.searchsorted(a, v), (np.sort(V), F)),
        "select": (lambda a, b: jnp.select([a > 0.5, b > 0.5], [a, b], 0.0), (F, F2)),
        "split": (lambda a: tuple(jnp.split(a, 2, axis=2)), (F,)),
        "squeeze": (lambda a: jnp.squeeze(a, 1), (F[:, :1],)),
        "stack": (lambda a, b: jnp.stack([a, b], axis=1), (F, F2)),
        "swapaxes": (lambda a: jnp.swapaxes(a, 0, 2), (F,)),
        "take": (lambda a, i: jnp.take(a, i, axis=1), (F, IDX)),
        "take_along_axis": (
            lambda a, i: jnp.take_along_axis(a, i, axis=2),
            (F, I2 % 4),
        ),
        "tensordot": (lambda a, b: jnp.tensordot(a, b, axes=([1, 2], [1, 2])), (F, F2)),
        "tile": (lambda a: jnp.tile(a, (1, 2, 1)), (F,)),
        "transpose": (lambda a: jnp.transpose(a, (2, 0, 1)), (F,)),
        "unravel_index": (lambda i: jnp.stack(jnp.unravel_index(i, (3, 4))), (I,)),
        "unstack": (lambda a: tuple(jnp.unstack(a, axis=1)), (F,)),
        "vsplit": (lambda a: tuple(jnp.vsplit(a, 2)), (F,)),
        "vstack": (lambda a, b: jnp.vstack([a, b]), (F, F2)),
        "where": (lambda c, a, b: jnp.where(c, a, b), (B, F, F2)),
        "unique": (lambda a: jnp.unique(a, size=5, fill_value=0), (I,)),
        "unique_values": (lambda a: jnp.unique_values(a, size=5, fill_value=0), (I,)),
        "unique_counts": (lambda a: tuple(jnp.unique_counts(a, size=5, fill_value=0)), (I,)),
        "unique_inverse": (lambda a: tuple(jnp.unique_inverse(a, size=5, fill_value=0)), (I,)),
        "unique_all": (lambda a: tuple(jnp.unique_all(a, size=5, fill_value=0)), (I,)),
        "setdiff1d": (lambda a, b: jnp.setdiff1d(a, b, size=4, fill_value=0), (I[0, 0], I2[0, 0])),
        "intersect1d": (
            lambda a, b: jnp.intersect1d(a, b, size=4, fill_value=0),
            (I[0, 0], I2[0, 0]),
        ),
        "union1d": (lambda a, b: jnp.union1d(a, b, size=6, fill_value=0), (I[0, 0], I2[0, 0])),
        "setxor1d": (lambda a, b: jnp.setxor1d(a, b, size=6, fill_value=0), (I[0, 0], I2[0, 0])),
        "bincount": (lambda i: jnp.bincount(i.ravel(), length=7), (I,)),
        "histogram": (lambda a: jnp.histogram(a, bins=4, range=(0.0, 1.0))[0], (F,)),
        "histogram_bin_edges": (lambda a: jnp.histogram_bin_edges(a, bins=4), (F,)),
        "digitize": (lambda a: jnp.digitize(a, np.array([0.25, 0.5, 0.75], np.float32)), (F,)),
        "interp": (
            lambda a: jnp.interp(a, np.array([0.0, 0.5, 1.0]), np.array([1.0, 3.0, 2.0])),
            (F,),
        ),
        "polyfit": (lambda x, y: jnp.polyfit(x, y, 2), (V, V[::-1] * 2)),
        "trim_zeros": (lambda a: jnp.trim_zeros(a), (V,)),
        "ix_": (lambda a, b: tuple(jnp.ix_(a, b)), (V, V2)),
        "meshgrid": (lambda a, b: tuple(jnp.meshgrid(a, b)), (V, V2)),
        "block": (lambda a, b: jnp.block([[a, b]]), (M, M2)),
        "diag_indices_from": (lambda a: a[jnp.diag_indices_from(a)], (M,)),
        "tril_indices_from": (lambda a: a[jnp.tril_indices_from(a)], (M,)),
        "triu_indices_from": (lambda a: a[jnp.triu_indices_from(a)], (M,)),
        "gradient": (lambda a: tuple(jnp.gradient(a)), (F,)),
        "piecewise": (
            lambda a: jnp.piecewise(a, [a < 0.5, a >= 0.5], [lambda x: x * 2, lambda x: x - 1]),
            (F,),
        ),
        "vectorize": (lambda a, b: jnp.vectorize(lambda x, y: x * y + 1)(a, b), (F, F2)),
        "fromfunction": (lambda a: a + jnp.fromfunction(lambda i, j: i + j, (4, 4)), (M,)),
        "frexp": (lambda a: tuple(jnp.frexp(a)), (F,)),
        "modf": (lambda a: tuple(jnp.modf(a * 3)), (F,)),
        "divmod": (lambda a, b: tuple(jnp.divmod(a, b)), (F, F2)),
        "ldexp": (lambda a, i: jnp.ldexp(a, i), (F, I2)),
        "left_shift": (lambda a, b: jnp.left_shift(a, b), (I, I2)),
        "right_shift": (lambda a, b: jnp.right_shift(a, b), (I, I2)),
        "bitwise_left_shift": (lambda a, b: jnp.bitwise_left_shift(a, b), (I, I2)),
        "bitwise_right_shift": (lambda a, b: jnp.bitwise_right_shift(a, b), (I, I2)),
        "packbits": (lambda b: jnp.packbits(b, axis=2), (B,)),
        "unpackbits": (lambda a: jnp.unpackbits(a.astype(jnp.uint8), axis=2), (I,)),
        "lexsort": (lambda a, b: jnp.lexsort((a, b)), (I, I2)),
        "sort_complex": (lambda a: jnp.sort_complex(a).real, (V,)),
        "astype": (lambda a: jnp.astype(a * 5, jnp.int32), (F,)),
        "matrix_transpose": (jnp.matrix_transpose, (F,)),
        "matvec": (jnp.matvec, (F, F2[..., 0, :])),
        "vecmat": (jnp.vecmat, (F2[..., 0, :3], F)),
        "vecdot": (jnp.vecdot, (F, F2)),
        "trapezoid": (lambda a: jnp.trapezoid(a, axis=2), (F,)),
        "convolve": (jnp.convolve, (V, V2)),
        "correlate": (jnp.correlate, (V, V2)),
        "cross": (jnp.cross, (F[..., :3], F2[..., :3])),
        "kron": (jnp.kron, (M, M2[:2, :2])),
        "float_power": (jnp.float_power, (F, F2)),
        "logaddexp2": (jnp.logaddexp2, (F, F2)),
        "nextafter": (jnp.nextafter, (F, F2)),
        "spacing": (jnp.spacing, (F,)),
        "array": (lambda a: jnp.array(a, copy=True), (F,)),
        "asarray": (jnp.asarray, (F,)),
        "copy": (jnp.copy, (F,)),
        "isin": (lambda a, b: jnp.isin(a, b), (I, IDX)),
        # jax.nn
        "dot_product_attention": (jnn.dot_product_attention, (Q, Q[:, ::-1], Q * 0.5)),
        "one_hot": (lambda i: jnn.one_hot(i, 7), (I,)),
        "glu": (lambda a: jnn.glu(a, axis=-1), (F,)),
        "scaled_matmul": (
            lambda a, b, sa, sb: jnn.scaled_matmul(a, b, sa, sb),
            (
                F[:, :, :4],
                F2[:, :, :4],
                np.ones((2, 3, 1), np.float32),
                np.ones((2, 3, 1), np.float32),
            ),
        ),
        "leaky_relu": (lambda a: jnn.leaky_relu(a - 0.5, 0.1), (F,)),
        "celu": (lambda a: jnn.celu(a - 0.5), (F,)),
        "elu": (lambda a: jnn.elu(a - 0.5), (F,)),
        "selu": (lambda a: jnn.selu(a - 0.5), (F,)),
        "relu": (lambda a: jnn.relu(a - 0.5), (F,)),
        "relu6": (lambda a: jnn.relu6(a * 8 - 1), (F,)),
        "hard_tanh": (lambda a: jnn.hard_tanh(a * 3 - 1.5), (F,)),
        "gelu": (lambda a: jnn.gelu(a - 0.5, approximate=False), (F,)),
    }
    del jax
    return s


# jax.numpy / jax.nn names that are not array functions at all: printing, files, dtypes.
NOT_FUNCTIONS = {
    "array_repr": "formats an array as text",
    "array_str": "formats an array as text",
    "get_printoptions": "printing options",
    "printoptions": "printing options",
    "set_printoptions": "printing options",
    "load": "reads a file",
    "save": "writes a file",
    "savez": "writes a file",
    "fromfile": "reads a file",
    "from_dlpack": "imports another library's buffer",
    "frombuffer": "reads raw bytes",
    "fromstring": "parses a string",
    "fromiter": "consumes a Python iterator",
    "frompyfunc": "wraps a Python function as a ufunc",
    "einsum_path": "plans an einsum; computes nothing",
    "get_scaled_dot_general_config": "returns a configuration object",
}


def functions() -> list[str]:
    """Every public function of jax.numpy ("name") and jax.nn ("nn.name"), sorted."""
    import jax.nn as jnn
    import jax.numpy as jnp

    out = []
    for prefix, mod in (("", jnp), ("nn.", jnn)):
        for n in sorted(dir(mod)):
            o = getattr(mod, n)
            if n.startswith("_") or inspect.ismodule(o) or inspect.isclass(o) or not callable(o):
                continue
            out.append(prefix + n)
    return out


def _function(name: str) -> Callable:
    import jax.nn as jnn
    import jax.numpy as jnp

    return getattr(jnn, name[3:]) if name.startswith("nn.") else getattr(jnp, name)


def _leaves(out: Any) -> list[Any]:
    import jax

    return jax.tree_util.tree_leaves(out)


def sample(name: str) -> tuple[Callable, tuple[np.ndarray, ...]] | str:
    """(function, arrays) to convert, or why the function is not counted."""
    import jax

    key = name[3:] if name.startswith("nn.") else name
    if key in NOT_FUNCTIONS:
        return f"not counted: not an array function ({NOT_FUNCTIONS[key]})"
    fn = _function(name)
    if (getattr(fn, "__module__", None) or "").split(".")[0] == "numpy":
        return "not counted: NumPy's own function, re-exported; JAX does not trace it"
    table = _samples()
    tries = [table[key]] if key in table else [(fn, args) for args in GUESSES]
    first = ""
    for f, args in tries:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                jaxpr = jax.make_jaxpr(f)(*args)
                out = _leaves(jax.jit(f)(*args))
        except Exception as e:  # noqa: BLE001 - the next guess, or the reason it is not counted
            first = first or f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
            continue
        if not out or not all(hasattr(o, "shape") for o in out):
            first = first or "returns no array"
            continue
        used = {id(v) for eq in jaxpr.eqns for v in eq.invars if not hasattr(v, "val")}
        used |= {id(v) for v in jaxpr.jaxpr.outvars if not hasattr(v, "val")}
        if not any(id(v) in used for v in jaxpr.jaxpr.invars):
            return "not counted: the result does not depend on the array's values"
        return f, args
    return f"not counted: no sample traces ({first})"


def outcome(name: str) -> dict[str, Any]:
    """What the sample of ``name`` gives: ``{"counted": False, "reason": ...}`` when there is
    none, else ``{"counted": True, "pytorch": ok, "onnx": ok, "reason": ...}`` (the reason
    empty when both targets agree with JAX)."""
    import jax

    import msc
    from tests.tflite_cases import close, run_onnx, run_torch

    s = sample(name)
    if isinstance(s, str):
        return {"counted": False, "reason": s}
    fn, args = s
    ref = [np.asarray(o) for o in _leaves(jax.jit(fn)(*args))]
    r: dict[str, Any] = {"counted": True, "pytorch": False, "onnx": False, "reason": ""}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = msc.from_jax(fn, *args)
    except Exception as e:  # noqa: BLE001 - the table's reason
        r["reason"] = f"read: {type(e).__name__}: {_one_line(e)}"
        return r
    why = []
    for target, run in (("pytorch", run_torch), ("onnx", run_onnx)):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = run(g, [np.asarray(a) for a in args])
            bad = close(got, ref, ATOL, RTOL)
        except Exception as e:  # noqa: BLE001 - the table's reason
            bad = f"{type(e).__name__}: {_one_line(e)}"
        r[target] = not bad
        if bad:
            why.append(f"{'PyTorch' if target == 'pytorch' else 'ONNX'}: {bad}")
    r["reason"] = "; ".join(why)
    return r


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= 240 else text[:237] + "..."
