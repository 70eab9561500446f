"""Converters of the signal family: complex tensors, the FFT family, stft, window functions.

# NOTE: complex tensors
# - msc graphs have no complex arithmetic (nor does ONNX), so a complex torch tensor of shape S
#   travels as a real tensor of shape [*S, 2] (real, imaginary): the ONNX layout msc's dft and
#   stft already use (msc/ops/signal.py). complex64 is carried as float32, complex128 as
#   float64. The translator checks every result against that layout of what torch recorded
#   (``translate.real_layout``), weights and constants are stored in it (``tensor_to_numpy``),
#   and a complex graph input or output is one in it (``torch.view_as_real`` of the tensor).
# - A node that reads or produces a complex tensor is converted by ``COMPLEX_CONVERTERS``
#   (registry.py), whose converters know which inputs are complex (``ctx.complex_ids``) and see
#   ``ctx.meta`` in the real layout. Complex arithmetic becomes real arithmetic on the pairs
#   (exact formulas: (a+bi)(c+di) = (ac-bd) + (ad+bc)i, |z| = sqrt(a^2+b^2), ...);
#   view_as_complex / view_as_real are the identity; shape ops reuse the real converters with
#   their dims counted in the complex tensor and the trailing pair dim appended.
# - Conjugation is materialized (``_conj`` negates the imaginary part), so torch's lazy
#   conjugate / negative views (``_conj``, ``_neg_view`` in decomposed graphs) compose exactly.
# FFT family: every transform is a chain of canonical 1-D ``dft`` nodes (forward unscaled, the
# inverse divided by its length, as ONNX DFT) and one scale for torch's norm mode; a signal
# length ``n`` / ``s`` trims or zero-pads the input first. Window functions are constants
# computed by torch itself (msc has no window ops; a window is data, not computation).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from msc.frontend.torch.dtypes import to_msc
from msc.frontend.torch.registry import (
    CONVERTERS,
    Ctx,
    Unsupported,
    complex_converter,
    converter,
)
from msc.ir import DType, Value


# ------------------------------------------------------------------------- helpers
def _both(*keys: str):
    """Register an op that always reads or makes a complex tensor in both tables (the real
    one lists it as supported; the translator calls it through the complex one)."""

    def register(fn):
        converter(*keys)(fn)
        complex_converter(*keys)(fn)
        return fn

    return register


def _is_c(ctx: Ctx, v: Any) -> bool:
    return isinstance(v, Value) and id(v) in ctx.complex_ids


def _out_dtype(ctx: Ctx) -> DType:
    meta = ctx.meta[0] if isinstance(ctx.meta, list | tuple) else ctx.meta
    if not isinstance(meta, torch.Tensor):
        raise Unsupported("no recorded result type")
    return to_msc(meta.dtype)


def _cdim(d: int, r: int) -> int:
    """A dim of a complex tensor of rank ``r`` as the same dim of its real layout."""
    return d + r if d < 0 else d


def _last(ctx: Ctx, x: Value) -> int:
    return ctx.rank(x) - 1


def _part(ctx: Ctx, x: Value, i: int) -> Value:
    """Real (0) or imaginary (1) part of complex ``x`` as [..., 1]."""
    return ctx.op("slice", x, starts=[i], ends=[i + 1], axes=[_last(ctx, x)], steps=[1])


def _parts(ctx: Ctx, x: Any, dt: DType) -> tuple[Value, Value | None]:
    """(real, imaginary or None) of an operand, each [..., 1] (or 0-d for a scalar)."""
    if _is_c(ctx, x):
        x = ctx.cast(x, dt)
        return _part(ctx, x, 0), _part(ctx, x, 1)
    if isinstance(x, complex):
        return ctx.const(x.real, dt), ctx.const(x.imag, dt)
    if isinstance(x, Value):
        return ctx.op("unsqueeze", ctx.cast(x, dt), axes=[ctx.rank(x)]), None
    if isinstance(x, bool | int | float):
        return ctx.const(float(x), dt), None
    raise Unsupported(f"complex operand of type {type(x).__name__}")


def _pair(ctx: Ctx, re: Value, im: Value | None) -> Value:
    """The complex tensor with parts ``re``, ``im`` ([..., 1], broadcast to one shape)."""
    if im is None:
        im = ctx.op("full_like", re, value=0.0)
    elif re.type.shape != im.type.shape:
        re, im = (
            ctx.op("add", re, ctx.op("full_like", im, value=0.0)),
            ctx.op("add", im, ctx.op("full_like", re, value=0.0)),
        )
    return ctx.op("concat", re, im, axis=-1 if re.type.shape is None else len(re.type.shape) - 1)


def _bin(ctx: Ctx, op: str, a: Value | None, b: Value | None) -> Value | None:
    """a op b for add/sub/mul where None is an exact zero."""
    if op == "mul":
        return None if a is None or b is None else ctx.op("mul", a, b)
    if b is None:
        return a
    if a is None:
        return b if op == "add" else ctx.op("neg", b)
    return ctx.op(op, a, b)


def _squeeze_last(ctx: Ctx, v: Value) -> Value:
    return ctx.op("squeeze", v, axes=[_last(ctx, v)])


# ------------------------------------------------------------------ complex views
@_both("aten.view_as_complex.default", "aten.view_as_real.default")
def view_as_complex(ctx: Ctx, self: Value) -> Value:
    # [..., 2] real and complex [...] share one layout: the identity.
    return self


@complex_converter(
    "aten.clone.default",
    "aten.alias.default",
    "aten.contiguous.default",
    "aten.detach.default",
    "aten.lift_fresh_copy.default",
    "aten.lift_fresh.default",
    "aten.resolve_conj.default",  # conjugation is materialized: nothing is left to resolve
    "aten.resolve_neg.default",
)
def _identity(ctx: Ctx, self: Value, **_: Any) -> Value:
    return self


@_both("aten.real.default", "aten.imag.default")
def real(ctx: Ctx, self: Value) -> Value:
    if not _is_c(ctx, self):
        if ctx.source_op == "aten.imag.default":
            raise Unsupported("imag of a real tensor")
        return self
    return _squeeze_last(ctx, _part(ctx, self, int(ctx.source_op == "aten.imag.default")))


@complex_converter("aten.abs.default")
def abs_(ctx: Ctx, self: Value) -> Value:
    re, im = _part(ctx, self, 0), _part(ctx, self, 1)
    sq = ctx.op("add", ctx.op("mul", re, re), ctx.op("mul", im, im))
    return _squeeze_last(ctx, ctx.op("sqrt", sq))


@_both("aten.angle.default")
def angle(ctx: Ctx, self: Value) -> Value:
    if _is_c(ctx, self):
        return _squeeze_last(ctx, ctx.op("atan2", _part(ctx, self, 1), _part(ctx, self, 0)))
    # a real number's angle: pi below zero, else 0 (NaN stays NaN), in float
    dt = _out_dtype(ctx)
    x = ctx.cast(self, dt)
    neg = ctx.op("lt", x, ctx.const(0.0, dt))
    a = ctx.op("where", neg, ctx.const(math.pi, dt), ctx.const(0.0, dt))
    return ctx.op("where", ctx.op("isnan", x), x, a) if dt.is_floating else a


@_both("aten.polar.default")
def polar(ctx: Ctx, abs: Value, angle: Value) -> Value:
    dt = _out_dtype(ctx)
    (m, _), (a, _) = _parts(ctx, abs, dt), _parts(ctx, angle, dt)
    return _pair(ctx, ctx.op("mul", m, ctx.op("cos", a)), ctx.op("mul", m, ctx.op("sin", a)))


@_both("aten.complex.default")
def complex_(ctx: Ctx, real: Value, imag: Value) -> Value:
    dt = _out_dtype(ctx)
    return _pair(ctx, _parts(ctx, real, dt)[0], _parts(ctx, imag, dt)[0])


# (a real tensor's conjugate, itself, is elementwise.py's)
@complex_converter(
    "aten._conj.default",
    "aten.conj.default",
    "aten.conj_physical.default",
    "aten._conj_physical.default",
)
def conj(ctx: Ctx, self: Value) -> Value:
    if not _is_c(ctx, self):
        return self
    return _pair(ctx, _part(ctx, self, 0), ctx.op("neg", _part(ctx, self, 1)))


# torch's negative view: in a decomposed graph it undoes a lazy conjugation through
# view_as_real (``imag(conj(z))`` reads ``-view_as_real(conj(conj(z)))[..., 1]``); it only
# ever arises from complex tensors, so it lives here with them.
@converter("aten._neg_view.default")
@complex_converter("aten._neg_view.default", "aten.neg.default")
def neg_view(ctx: Ctx, self: Value) -> Value:
    return ctx.op("neg", self)


# ------------------------------------------------------------------ arithmetic
def _arith(op: str):
    def convert(ctx: Ctx, self: Any, other: Any, *, alpha: Any = 1) -> Value:
        dt = _out_dtype(ctx)
        one_real = not (_is_c(ctx, self) and _is_c(ctx, other))
        if op == "mul" and one_real and not any(isinstance(v, complex) for v in (self, other)):
            return _scaled(ctx, "mul", *((self, other) if _is_c(ctx, self) else (other, self)))
        (ar, ai), (br, bi) = _parts(ctx, self, dt), _parts(ctx, other, dt)
        if op == "mul":
            return _pair(
                ctx,
                _bin(ctx, "sub", _bin(ctx, "mul", ar, br), _bin(ctx, "mul", ai, bi)),
                _bin(ctx, "add", _bin(ctx, "mul", ar, bi), _bin(ctx, "mul", ai, br)),
            )
        if alpha != 1:
            if isinstance(alpha, complex):
                raise Unsupported("a complex alpha")
            k = ctx.const(float(alpha), dt)
            br, bi = ctx.op("mul", br, k), _bin(ctx, "mul", bi, k)
        return _pair(ctx, _bin(ctx, op, ar, br), _bin(ctx, op, ai, bi))

    return convert


complex_converter("aten.mul.Tensor", "aten.mul.Scalar")(_arith("mul"))
complex_converter("aten.add.Tensor", "aten.add.Scalar")(_arith("add"))
complex_converter("aten.sub.Tensor", "aten.sub.Scalar")(_arith("sub"))


@complex_converter("aten.rsub.Scalar", "aten.rsub.Tensor")
def rsub(ctx: Ctx, self: Any, other: Any, alpha: Any = 1) -> Value:
    return _arith("sub")(ctx, other, self, alpha=alpha)


def _scaled(ctx: Ctx, op: str, z: Any, k: Any) -> Value:
    """Complex ``z`` times / divided by a real tensor or scalar ``k``: both parts at once."""
    dt = _out_dtype(ctx)
    return ctx.op(op, ctx.cast(z, dt), _parts(ctx, k, dt)[0])


@complex_converter("aten.div.Tensor", "aten.div.Scalar")
def div(ctx: Ctx, self: Any, other: Any) -> Value:
    dt = _out_dtype(ctx)
    if not _is_c(ctx, other) and not isinstance(other, complex):  # by a real: both parts
        return _scaled(ctx, "div", self, other)
    (ar, ai), (br, bi) = _parts(ctx, self, dt), _parts(ctx, other, dt)
    # (a / b) = a * conj(b) / |b|^2
    den = ctx.op("add", ctx.op("mul", br, br), ctx.op("mul", bi, bi))
    re = _bin(ctx, "add", _bin(ctx, "mul", ar, br), _bin(ctx, "mul", ai, bi))
    im = _bin(ctx, "sub", _bin(ctx, "mul", ai, br), _bin(ctx, "mul", ar, bi))
    return _pair(ctx, ctx.op("div", re, den), ctx.op("div", im, den))


def _retype(ctx: Ctx, self: Value, **_: Any) -> Value:
    """A dtype change into, out of or between complex dtypes (torch drops the imaginary part
    going to a real dtype)."""
    dt = _out_dtype(ctx)
    want_rank = len(ctx.meta.shape)
    if _is_c(ctx, self) and want_rank == ctx.rank(self):
        return ctx.cast(self, dt)
    if _is_c(ctx, self):
        return ctx.cast(_squeeze_last(ctx, _part(ctx, self, 0)), dt)
    return _pair(ctx, _parts(ctx, self, dt)[0], None)


complex_converter(
    "aten._to_copy.default",
    "aten.to.dtype",
    "aten.to.dtype_layout",
    "aten.to.device",
    "aten.to.other",
    "aten.type_as.default",
)(_retype)


# ------------------------------------------------------------------ shape ops
def _dims(v: Any, r: int) -> Any:
    return [_cdim(d, r) for d in v] if isinstance(v, list | tuple) else _cdim(v, r)


# aten key -> how its arguments change for the real layout, given the complex rank r.
_SHAPE_ARGS = {
    "aten.view.default": lambda a, r: {**a, "size": [*a["size"], 2]},
    "aten._unsafe_view.default": lambda a, r: {**a, "size": [*a["size"], 2]},
    "aten.reshape.default": lambda a, r: {**a, "shape": [*a["shape"], 2]},
    "aten.expand.default": lambda a, r: {**a, "size": [*a["size"], 2]},
    "aten.repeat.default": lambda a, r: {**a, "repeats": [*a["repeats"], 1]},
    "aten.slice.Tensor": lambda a, r: {**a, "dim": _cdim(a["dim"], r)},
    "aten.select.int": lambda a, r: {**a, "dim": _cdim(a["dim"], r)},
    "aten.narrow.default": lambda a, r: {**a, "dim": _cdim(a["dim"], r)},
    "aten.index_select.default": lambda a, r: {**a, "dim": _cdim(a["dim"], r)},
    "aten.unsqueeze.default": lambda a, r: {**a, "dim": _cdim(a["dim"], r + 1)},
    "aten.squeeze.dim": lambda a, r: {**a, "dim": _cdim(a["dim"], r)},
    "aten.squeeze.dims": lambda a, r: {**a, "dim": _dims(a["dim"], r)},
    "aten.permute.default": lambda a, r: {**a, "dims": [*_dims(a["dims"], r), r]},
    "aten.transpose.int": lambda a, r: {
        **a,
        "dim0": _cdim(a["dim0"], r),
        "dim1": _cdim(a["dim1"], r),
    },  # fmt: skip
    "aten.flatten.using_ints": lambda a, r: {
        **a,
        "start_dim": _cdim(a["start_dim"], r),
        "end_dim": _cdim(a["end_dim"], r),
    },  # fmt: skip
    "aten.unflatten.int": lambda a, r: {**a, "dim": _cdim(a["dim"], r)},
    "aten.flip.default": lambda a, r: {**a, "dims": _dims(a["dims"], r)},
    "aten.roll.default": lambda a, r: {**a, "dims": _dims(a["dims"], r)} if a["dims"] else None,
    "aten.unbind.int": lambda a, r: {**a, "dim": _cdim(a["dim"], r)},
    "aten.split.Tensor": lambda a, r: {**a, "dim": _cdim(a["dim"], r)},
    "aten.split_with_sizes.default": lambda a, r: {**a, "dim": _cdim(a["dim"], r)},
    "aten.chunk.default": lambda a, r: {**a, "dim": _cdim(a["dim"], r)},
    "aten.constant_pad_nd.default": lambda a, r: {**a, "pad": [0, 0, *a["pad"]]},
    "aten.pad.default": lambda a, r: {**a, "pad": [0, 0, *a["pad"]]},
    "aten.sum.dim_IntList": lambda a, r: {**a, "dim": _dims(a["dim"] or list(range(r)), r)},
    "aten.mean.dim": lambda a, r: {**a, "dim": _dims(a["dim"] or list(range(r)), r)},
}


def _real_converter(key: str):
    """The real converter of ``key``, called with arguments bound to its schema."""
    fn = CONVERTERS.lookup(key)[0]
    if fn is None:
        raise Unsupported(f"no converter for {key}")
    return fn


def _shape_op(key: str):
    def convert(ctx: Ctx, **args: Any) -> Any:
        x = args.get("self")
        if not _is_c(ctx, x):
            raise Unsupported("a complex result from a real input")
        new = _SHAPE_ARGS[key](args, ctx.rank(x) - 1)
        if new is None:
            raise Unsupported("this use on a complex tensor")
        return _real_converter(key)(ctx, **new)

    return convert


for _key in _SHAPE_ARGS:
    complex_converter(_key)(_shape_op(_key))


@complex_converter("aten.squeeze.default")
def squeeze(ctx: Ctx, self: Value) -> Value:
    return _real_converter("aten.squeeze.dims")(ctx, self=self, dim=list(range(ctx.rank(self) - 1)))


@complex_converter("aten.cat.default", "aten.stack.default")
def cat(ctx: Ctx, tensors: list[Value], dim: int = 0) -> Value:
    dt = _out_dtype(ctx)
    xs = [ctx.cast(t, dt) if _is_c(ctx, t) else _pair(ctx, _parts(ctx, t, dt)[0], None)
          for t in tensors]  # fmt: skip
    r = ctx.rank(xs[0]) - 1 + (ctx.source_op == "aten.stack.default")
    return _real_converter(ctx.source_op)(ctx, tensors=xs, dim=_cdim(dim, r))


@complex_converter("aten.where.self")
def where(ctx: Ctx, condition: Value, self: Any, other: Any) -> Value:
    dt = _out_dtype(ctx)
    a, b = (x if _is_c(ctx, x) else _pair(ctx, _parts(ctx, x, dt)[0], None) for x in (self, other))
    c = ctx.op("unsqueeze", condition, axes=[ctx.rank(condition)])
    return ctx.op("where", c, ctx.cast(a, dt), ctx.cast(b, dt))


# ------------------------------------------------------------------ FFT
def _size(ctx: Ctx, x: Value, axis: int) -> int:
    n = ctx.shape(x)[axis]
    if not isinstance(n, int):
        raise Unsupported("an FFT over a dim of symbolic size")
    return n


def _resize(ctx: Ctx, x: Value, axis: int, n: int | None) -> Value:
    """``x`` trimmed or zero-padded to ``n`` along ``axis`` (torch's signal length)."""
    if n is None:
        return x
    have = _size(ctx, x, axis)
    if have > n:
        return ctx.op("slice", x, starts=[0], ends=[n], axes=[axis], steps=[1])
    if have < n:
        pads = [0] * (2 * ctx.rank(x))
        pads[ctx.rank(x) + axis] = n - have
        return ctx.op("pad", x, pads=pads, mode="constant", value=0.0)
    return x


def _norm_mode(norm: str | None, forward: bool) -> int:
    """torch's norm string as its normalization code: 0 none, 1 1/sqrt(n), 2 1/n."""
    if norm not in (None, "backward", "ortho", "forward"):
        raise Unsupported(f"fft norm {norm!r}")
    if norm == "ortho":
        return 1
    return (0 if forward else 2) if norm in (None, "backward") else (2 if forward else 0)


def _fft(
    ctx: Ctx,
    x: Value,
    dims: list[int],
    sizes: list[int | None] | None,
    *,
    kind: str,  # "c2c", "r2c" (onesided on the last dim), "c2r" (onesided inverse, last dim)
    inverse: bool,
    mode: int,
    onesided: bool = True,
    conj_in: bool = False,
    conj_out: bool = False,
) -> Value:
    """torch's n-dim FFT of ``x`` (complex: real layout; else real) over ``dims`` (of the
    complex shape, non-negative) as 1-D dft nodes, scaled for normalization ``mode``."""
    dt = _out_dtype(ctx)
    sizes = sizes or [None] * len(dims)
    if _is_c(ctx, x):
        y = ctx.cast(x, dt)
        if conj_in:
            y = _pair(ctx, _part(ctx, y, 0), ctx.op("neg", _part(ctx, y, 1)))
    else:
        y = ctx.op("unsqueeze", ctx.cast(x, dt), axes=[ctx.rank(x)])
        if kind == "c2r":  # a onesided inverse takes (real, imaginary) pairs (ONNX DFT)
            y = _pair(ctx, y, None)
    total = 1
    order = list(zip(dims, sizes))
    if kind == "r2c":  # the onesided transform first, on the real signal
        order = order[-1:] + order[:-1]
    for i, (d, n) in enumerate(order):
        last = (kind == "r2c" and i == 0) or (kind == "c2r" and i == len(order) - 1)
        if last and kind == "c2r":
            n = n if n is not None else 2 * (_size(ctx, y, d) - 1)
            y = _resize(ctx, y, d, n // 2 + 1)
            y = ctx.op("dft", y, axis=d, inverse=True, onesided=True, length=n)
            total *= n
            continue
        y = _resize(ctx, y, d, n)
        total *= _size(ctx, y, d)
        y = ctx.op("dft", y, axis=d, inverse=inverse, onesided=last and onesided, length=None)
    if kind == "c2r":
        y = _squeeze_last(ctx, y)
    elif conj_out:
        y = _pair(ctx, _part(ctx, y, 0), ctx.op("neg", _part(ctx, y, 1)))
    scale = (1.0, 1.0 / math.sqrt(total), 1.0 / total)[mode]
    if inverse:  # each inverse dft divided by its length already
        scale *= total
    if scale != 1.0:
        y = ctx.op("mul", y, ctx.const(scale, dt))
    return y


def _rank(ctx: Ctx, x: Value) -> int:
    return ctx.rank(x) - 1 if _is_c(ctx, x) else ctx.rank(x)


def _fft_1d(kind: str, forward: bool, hermitian: bool = False):
    """aten.fft_<name>(self, n, dim, norm): ``kind`` the transform on a real/complex input
    ("c2c" takes a real input too), ``forward`` what the norm mode counts it as. hfft is
    irfft of the conjugate and ihfft the conjugate of rfft, each in its own norm."""

    def convert(ctx: Ctx, self: Value, n: Any = None, dim: int = -1, norm=None) -> Value:
        if isinstance(n, Value):
            raise Unsupported("a symbolic signal length")
        d = _cdim(dim, _rank(ctx, self))
        return _transform(ctx, self, [d], [n], kind, forward, hermitian, norm)

    return convert


def _transform(
    ctx: Ctx, x: Value, dims: list[int], sizes: Any, kind: str, forward: bool, hermitian: bool,
    norm: str | None,
) -> Value:  # fmt: skip
    return _fft(
        ctx,
        x,
        dims,
        sizes,
        kind=kind,
        inverse=kind == "c2r" or (kind == "c2c" and not forward),
        mode=_norm_mode(norm, forward),
        onesided=kind == "r2c",
        conj_in=hermitian and kind == "c2r",
        conj_out=hermitian and kind == "r2c",
    )


_ONE_D = {
    "fft": ("c2c", True, False),
    "ifft": ("c2c", False, False),
    "rfft": ("r2c", True, False),
    "irfft": ("c2r", False, False),
    "hfft": ("c2r", True, True),
    "ihfft": ("r2c", False, True),
}
for _name, (_kind, _fwd, _herm) in _ONE_D.items():
    _both(f"aten.fft_{_name}.default")(_fft_1d(_kind, _fwd, _herm))


def _nd_dims(ctx: Ctx, x: Value, s: Any, dim: Any) -> tuple:
    r = _rank(ctx, x)
    if any(isinstance(v, Value) for v in (s if isinstance(s, list | tuple) else [s])):
        raise Unsupported("a symbolic signal size")
    if dim is None:
        dims = list(range(r - len(s), r)) if s is not None else list(range(r))
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
    dims = [_cdim(d, r) for d in dims]
    if s is not None and len(s) != len(dims):
        raise Unsupported("fft: s and dim differ in length")
    return dims, list(s) if s is not None else None


def _fft_nd(kind: str, forward: bool, hermitian: bool, last2: bool):
    """aten.fft_<name>2 / fft_<name>n (self, s, dim, norm), as _fft_1d over several dims."""

    def convert(ctx: Ctx, self: Value, s: Any = None, dim: Any = None, norm=None) -> Value:
        if last2 and dim is None:
            dim = [-2, -1]
        dims, sizes = _nd_dims(ctx, self, s, dim)
        return _transform(ctx, self, dims, sizes, kind, forward, hermitian, norm)

    return convert


for _name, (_kind, _fwd, _herm) in _ONE_D.items():
    for _suffix in ("2", "n"):
        _both(f"aten.fft_{_name}{_suffix}.default")(_fft_nd(_kind, _fwd, _herm, _suffix == "2"))


def _shift(sign: int):
    """fftshift (sign 1) / ifftshift (sign -1): a roll by half of each dim."""

    def convert(ctx: Ctx, self: Value, dim: Any = None) -> Value:
        r = _rank(ctx, self)
        dims = list(range(r)) if dim is None else [dim] if isinstance(dim, int) else list(dim)
        dims = [_cdim(d, r) for d in dims]
        shifts = [sign * (_size(ctx, self, d) // 2) for d in dims]
        roll = _real_converter("aten.roll.default")
        return roll(ctx, self=self, shifts=shifts, dims=dims)

    return convert


_both("aten.fft_fftshift.default")(_shift(1))
_both("aten.fft_ifftshift.default")(_shift(-1))


def _norm_code(normalization: int) -> int:
    if normalization not in (0, 1, 2):
        raise Unsupported(f"fft normalization {normalization}")
    return normalization


@_both("aten._fft_r2c.default")
def fft_r2c(ctx: Ctx, self: Value, dim: list[int], normalization: int, onesided: bool) -> Value:
    dims = [_cdim(d, ctx.rank(self)) for d in dim]
    return _fft(ctx, self, dims, None, kind="r2c", inverse=False,
                mode=_norm_code(normalization), onesided=onesided)  # fmt: skip


@_both("aten._fft_c2r.default")
def fft_c2r(ctx: Ctx, self: Value, dim: list[int], normalization: int, last_dim_size: Any) -> Value:
    if isinstance(last_dim_size, Value):
        raise Unsupported("a symbolic signal length")
    dims = [_cdim(d, _rank(ctx, self)) for d in dim]
    sizes = [None] * (len(dims) - 1) + [last_dim_size]
    return _fft(ctx, self, dims, sizes, kind="c2r", inverse=True, mode=_norm_code(normalization))


@_both("aten._fft_c2c.default")
def fft_c2c(ctx: Ctx, self: Value, dim: list[int], normalization: int, forward: bool) -> Value:
    dims = [_cdim(d, _rank(ctx, self)) for d in dim]
    return _fft(ctx, self, dims, None, kind="c2c", inverse=not forward,
                mode=_norm_code(normalization))  # fmt: skip


# ------------------------------------------------------------------ stft, istft
_PAD_MODES = {"reflect": "reflect", "constant": "constant", "replicate": "edge", "circular": "wrap"}


def _window(ctx: Ctx, window: Value | None, win_length: int | None, n_fft: int, dt: DType):
    """The analysis window as n_fft values (torch centers a shorter one in zeros), or None for
    the rectangular window."""
    n = win_length if win_length is not None else n_fft
    if window is None and n == n_fft:
        return None
    w = ctx.cast(window, dt) if window is not None else ctx.const([1.0] * n, dt)
    if n < n_fft:
        left = (n_fft - n) // 2
        w = ctx.op("pad", w, pads=[left, n_fft - n - left], mode="constant", value=0.0)
    return w


def _stft(
    ctx: Ctx, self: Value, n_fft: int, hop_length, win_length, window, normalized, onesided,
    align_to_window, center: bool = False, pad_mode: str = "reflect",
) -> Value:  # fmt: skip
    if align_to_window:
        raise Unsupported("stft with align_to_window")
    dt = _out_dtype(ctx)
    hop = hop_length if hop_length is not None else n_fft // 4
    is_c = _is_c(ctx, self)
    x = (
        ctx.cast(self, dt)
        if is_c
        else ctx.op("unsqueeze", ctx.cast(self, dt), axes=[ctx.rank(self)])
    )
    batched = ctx.rank(x) == 3
    if not batched:
        x = ctx.op("unsqueeze", x, axes=[0])
    if center:
        if pad_mode not in _PAD_MODES:
            raise Unsupported(f"stft pad_mode {pad_mode!r}")
        p = n_fft // 2
        x = ctx.op("pad", x, pads=[0, p, 0, 0, p, 0], mode=_PAD_MODES[pad_mode], value=0.0)
    one = onesided if onesided is not None else not is_c and not _is_c(ctx, window)
    w = _window(ctx, window, win_length, n_fft, dt)
    y = ctx.op("stft", x, w, frame_step=hop, frame_length=n_fft, onesided=bool(one))
    y = ctx.op("transpose", y, perm=[0, 2, 1, 3])  # [B, frames, bins, 2] -> [B, bins, frames, 2]
    if normalized:
        y = ctx.op("mul", y, ctx.const(n_fft**-0.5, dt))
    return y if batched else ctx.op("squeeze", y, axes=[0])


@_both("aten.stft.default")
def stft(ctx: Ctx, self: Value, n_fft: int, hop_length=None, win_length=None, window=None,
         normalized=False, onesided=None, return_complex=None,
         align_to_window=None) -> Value:  # fmt: skip
    return _stft(ctx, self, n_fft, hop_length, win_length, window, normalized, onesided,
                 align_to_window)  # fmt: skip


@_both("aten.stft.center")
def stft_center(ctx: Ctx, self: Value, n_fft: int, hop_length=None, win_length=None,
                window=None, center=True, pad_mode="reflect", normalized=False, onesided=None,
                return_complex=None, align_to_window=None) -> Value:  # fmt: skip
    return _stft(ctx, self, n_fft, hop_length, win_length, window, normalized, onesided,
                 align_to_window, center, pad_mode)  # fmt: skip


def _overlap_add(ctx: Ctx, frames: Value, hop: int, n_fft: int) -> Value:
    """Sum of frames [B, T, n_fft] placed hop apart: [B, n_fft + hop * (T - 1)]."""
    t, k = _size(ctx, frames, 1), n_fft // hop
    parts = ctx.op("reshape", frames, shape=[-1, t, k, hop])
    total = None
    for i in range(k):
        p = ctx.op("slice", parts, starts=[i], ends=[i + 1], axes=[2], steps=[1])
        p = ctx.op("squeeze", p, axes=[2])
        p = ctx.op("pad", p, pads=[0, i, 0, 0, k - 1 - i, 0], mode="constant", value=0.0)
        total = p if total is None else ctx.op("add", total, p)
    return ctx.op("reshape", total, shape=[-1, (t + k - 1) * hop])


@_both("aten.istft.default")
def istft(ctx: Ctx, self: Value, n_fft: int, hop_length=None, win_length=None, window=None,
          center=True, normalized=False, onesided=None, length=None,
          return_complex=False) -> Value:  # fmt: skip
    if return_complex:
        raise Unsupported("istft with return_complex=True")
    if isinstance(length, Value):
        raise Unsupported("istft with a symbolic length")
    dt = _out_dtype(ctx)
    hop = hop_length if hop_length is not None else n_fft // 4
    if n_fft % hop:
        raise Unsupported("istft with a hop that does not divide n_fft")
    x = ctx.cast(self, dt)
    batched = ctx.rank(x) == 4
    if not batched:
        x = ctx.op("unsqueeze", x, axes=[0])
    x = ctx.op("transpose", x, perm=[0, 2, 1, 3])  # [B, frames, bins, 2]
    bins = _size(ctx, x, 2)
    one = onesided if onesided is not None else bins != n_fft
    if one:
        x = _resize(ctx, x, 2, n_fft // 2 + 1)
        y = ctx.op("dft", x, axis=2, inverse=True, onesided=True, length=n_fft)
    else:
        y = _part(ctx, ctx.op("dft", x, axis=2, inverse=True, onesided=False, length=None), 0)
    y = ctx.op("squeeze", y, axes=[3])  # [B, T, n_fft]
    if normalized:  # torch's inverse in the "ortho" norm
        y = ctx.op("mul", y, ctx.const(math.sqrt(n_fft), dt))
    w = _window(ctx, window, win_length, n_fft, dt)
    if w is None:
        w = ctx.const([1.0] * n_fft, dt)
    t = _size(ctx, y, 1)
    y = _overlap_add(ctx, ctx.op("mul", y, w), hop, n_fft)
    w2 = ctx.op("reshape", ctx.op("mul", w, w), shape=[1, 1, n_fft])
    env = _overlap_add(
        ctx,
        _real_converter("aten.expand.default")(ctx, self=w2, size=[1, t, n_fft], implicit=False),
        hop,
        n_fft,
    )
    total = n_fft + hop * (t - 1)
    start = n_fft // 2 if center else 0
    end = start + length if length is not None else (total - n_fft // 2 if center else total)
    stop = min(end, total)
    y = ctx.op("slice", y, starts=[start], ends=[stop], axes=[1], steps=[1])
    env = ctx.op("slice", env, starts=[start], ends=[stop], axes=[1], steps=[1])
    y = ctx.op("div", y, env)
    if end > total:
        y = ctx.op("pad", y, pads=[0, 0, 0, end - total], mode="constant", value=0.0)
    return y if batched else ctx.op("squeeze", y, axes=[0])


# ------------------------------------------------------------------ windows
_WINDOWS = {
    "hann_window": ("default", "periodic"),
    "hamming_window": ("default", "periodic", "periodic_alpha", "periodic_alpha_beta"),
    "blackman_window": ("default", "periodic"),
    "bartlett_window": ("default", "periodic"),
    "kaiser_window": ("default", "periodic", "beta"),
}


def _window_fn(ctx: Ctx, window_length: Any, **kw: Any) -> Value:
    """A window function as a constant: torch computes its values (the same ones the source
    program would), msc keeps them as data."""
    if isinstance(window_length, Value):
        raise Unsupported("a window of symbolic length")
    kw = {k: v for k, v in kw.items() if k not in ("layout", "device", "pin_memory")}
    op = getattr(getattr(torch.ops.aten, ctx.source_op.split(".")[1]), ctx.source_op.split(".")[2])
    t = op(window_length, **kw)
    return ctx.const(t.numpy(), to_msc(t.dtype))


for _name, _overloads in _WINDOWS.items():
    converter(*(f"aten.{_name}.{o}" for o in _overloads))(_window_fn)
