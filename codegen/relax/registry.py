"""The emitter registry of the Relax codegen and the context an emitter writes through.

An emitter turns one canonical node into Relax calls. Its signature mirrors the op's schema;
inputs arrive as bound ``relax.Var``s (``None`` for an absent optional input, a list for a
variadic one) and attributes as the node's normalized values::

    @emitter("relu")
    def relu(e: Emit, x):
        return e.emit(relax.op.nn.relu(x))

It returns the expression (or a tuple of expressions) of the node's outputs; an emitter that
cannot express one particular node raises ``Unsupported`` and the builder tries the op's
decomposition in ``msc.ops.decompose``.

# NOTE: invariants
# - Keyed by canonical op name; registering an op twice, or an op with both an emitter and a
#   declared gap, is an error. A registry is an object; ``copy(without=...)`` scopes a test.
# - Emitters never touch the msc graph; they only emit bindings through their ``Emit``.
# - A shape, size or count computed at run time becomes dims only through ``Emit.ints``,
#   matched together with a validity flag: Relax's shape ops trust their dims, so a value that
#   does not fit stops the VM there, before any op reads memory by it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import tvm
from tvm import relax

from codegen.relax.symbolic import Values
from msc.errors import Unsupported
from msc.ir.dtype import DType
from msc.ir.registry import Registry
from msc.ir.types import TensorType

__all__ = [
    "EmitterRegistry",
    "EMITTERS",
    "emitter",
    "unsupported",
    "Emit",
    "Unsupported",
    "RELAX_DTYPE",
    "relax_dtype",
]

RELAX_DTYPE: dict[DType, str] = {
    DType.BOOL: "bool",
    DType.INT8: "int8",
    DType.INT16: "int16",
    DType.INT32: "int32",
    DType.INT64: "int64",
    DType.UINT8: "uint8",
    DType.UINT16: "uint16",
    DType.UINT32: "uint32",
    DType.UINT64: "uint64",
    DType.FLOAT16: "float16",
    DType.BFLOAT16: "bfloat16",
    DType.FLOAT32: "float32",
    DType.FLOAT64: "float64",
    DType.FLOAT8_E4M3FN: "float8_e4m3fn",
    DType.FLOAT8_E5M2: "float8_e5m2",
}


def relax_dtype(dt: DType) -> str:
    """The Relax spelling of an msc dtype.

    Raises:
        Unsupported: Relax has no such dtype here (complex, sub-byte, fnuz floats).
    """
    try:
        return RELAX_DTYPE[dt]
    except KeyError:
        raise Unsupported(f"Relax has no dtype for {dt.value}") from None


Fn = Callable[..., Any]


class EmitterRegistry:
    """Relax emitters by canonical op name, plus ops declared unsupported with a reason."""

    def __init__(self) -> None:
        self._fns: Registry[str, Fn] = Registry("relax emitter")
        self._gaps: Registry[str, str] = Registry("unsupported relax op")

    def __call__(self, *ops: str) -> Callable[[Fn], Fn]:
        """Decorator: ``@emitter("relu")`` (several ops may share one function)."""

        def deco(fn: Fn) -> Fn:
            for op in ops:
                self.register(op, fn)
            return fn

        return deco

    def register(self, op: str, fn: Fn) -> None:
        from msc.ops import registry as canonical

        if op not in canonical:
            raise ValueError(f"relax emitter for unknown canonical op {op!r}")
        if op in self._gaps:
            raise ValueError(f"relax op {op!r} is declared unsupported and given an emitter")
        self._fns.register(op, fn)

    def unsupported(self, op: str, reason: str) -> None:
        """Declare that ``op`` has no emitter (nor a decomposition that helps), and why."""
        if op in self._fns:
            raise ValueError(f"relax op {op!r} has an emitter and is declared unsupported")
        if not reason:
            raise ValueError(f"unsupported relax op {op!r} needs a reason")
        self._gaps.register(op, reason)

    def get(self, op: str) -> Fn | None:
        return self._fns.get(op)

    def reason(self, op: str) -> str:
        return self._gaps.get(op) or "no Relax emitter"

    def gaps(self) -> dict[str, str]:
        return dict(self._gaps.items())

    def __contains__(self, op: object) -> bool:
        return op in self._fns

    def __iter__(self) -> Iterator[str]:
        return iter(self._fns)

    def copy(self, without: tuple[str, ...] = ()) -> EmitterRegistry:
        """A copy (that lacks the emitters of ``without``, for tests)."""
        new = EmitterRegistry()
        new._fns, new._gaps = self._fns.without(*without), self._gaps.copy()
        return new


class Emit:
    """Where an emitter writes: bindings for one msc node in the current block.

    Attributes:
        bb: the ``relax.BlockBuilder`` (inside the function and, usually, a dataflow block).
        node: the msc node being emitted (read-only).
        in_types: the msc types of the node's inputs (None for an absent optional one).
        out_types: the msc types of the node's outputs.
    """

    def __init__(
        self,
        bb: relax.BlockBuilder,
        node: Any,
        in_types: Sequence[TensorType | None],
        out_types: Sequence[TensorType],
        dim: Callable[[Any], Any],
        branch: Callable[[Any, list], Any] | None = None,
        loop: Callable[..., list] | None = None,
        repeat: Callable[..., list] | None = None,
    ) -> None:
        self.bb = bb
        self.node = node
        self.in_types = list(in_types)
        self.out_types = list(out_types)
        self._dim = dim
        self._branch = branch
        self._loop = loop
        self._repeat = repeat
        self.known: list = []  # what ``values`` knows of unbound variables (RelaxBuilder's)

    @property
    def source_op(self) -> str:
        """The Relax op the node was read from (msc.from_relax), else "": a canonical op that
        Relax spells several ways is written back the way its source wrote it."""
        prov = self.node.provenance if self.node is not None else None
        return prov.op if prov is not None and prov.framework == "relax" else ""

    @property
    def out(self) -> TensorType:
        """The type of the first output."""
        return self.out_types[0]

    def emit(self, expr: relax.Expr) -> relax.Var:
        """Bind ``expr`` in the current block."""
        return self.bb.emit(expr)

    def const(self, value: Any, dtype: DType | str) -> relax.Constant:
        """A constant of ``dtype`` (a Python scalar makes a 0-d tensor)."""
        if isinstance(dtype, str):
            dtype = {v: k for k, v in RELAX_DTYPE.items()}[dtype]
        return relax.const(np.asarray(value, dtype=dtype.to_numpy()), relax_dtype(dtype))

    def dtype(self, x: relax.Expr) -> str:
        return str(x.ty.dtype)

    def out_dtype(self, x: relax.Expr) -> str | None:
        """The ``out_dtype`` of a conv or matmul: TVM's ONNX frontend leaves it unset, its
        torch frontend names the input's; both mean the same, and the node's source framework
        picks the spelling so each round trip is structurally exact."""
        if self.node is not None and self.node.provenance.framework == "onnx":
            return None
        return self.dtype(x)

    def shape(self, x: relax.Expr) -> list:
        """The Relax shape of ``x`` (PrimExprs; ints where static)."""
        sh = x.ty.shape
        if sh is None or not isinstance(sh, relax.ShapeExpr):
            raise Unsupported("an input of unknown shape")
        return [int(d) if hasattr(d, "value") else d for d in sh.values]

    def rank(self, x: relax.Expr) -> int:
        return int(x.ty.ndim)

    def dims(self, shape: Sequence[Any]) -> list:
        """msc dims (int, SymDim, SymExpr) as Relax PrimExprs."""
        return [self._dim(d) for d in shape]

    def branch(self, graph: Any, inputs: list) -> Any:
        """Emit an msc subgraph (a branch) as a ``relax.SeqExpr``."""
        if self._branch is None:
            raise Unsupported("subgraphs are not available here")
        return self._branch(graph, inputs)

    def loop(self, body: Any, trip, cond, carried: list, carried_types: list, **kw) -> list:
        """A recursive Relax function running an msc loop body (see RelaxBuilder.loop);
        its results: the carried values, then the stacked scan outputs."""
        if self._loop is None:
            raise Unsupported("loops are not available here")
        return self._loop(body, trip, cond, carried, carried_types, **kw)

    def repeat(self, trip, carried: list, carried_ty: list, scan_ty: list, extra: list,
               step: Callable[..., tuple]) -> list:  # fmt: skip
        """A loop of ``trip`` (a 0-d int64 tensor) steps as a recursive Relax function (see
        RelaxBuilder.repeat): ``step(i, carried, extra)`` emits one step on the function's
        parameters (``extra``: the values it reads, passed in) and returns the next carried
        values and the step's outputs. Returns the final carried values, then each output
        stacked over the steps, with their ranks only where shapes are not static."""
        if self._repeat is None:
            raise Unsupported("loops are not available here")

        def body(i, cond, c, x):
            new, ys = step(i, c, x)
            return cond, new, ys

        return self._repeat(
            trip, self.const(True, "bool"), carried, carried_ty, scan_ty, extra, body
        )

    # ------------------------------------------------------------ run-time shapes
    def ints(self, t: relax.Expr, *valid: relax.Expr) -> list:
        """The values of a 0-d or 1-d integer tensor as dims: ints when ``t`` is a constant,
        else fresh symbolic dims bound to its run-time values (``tensor_to_shape``, then
        ``match_cast``), which shapes, slices and aranges then take like any other dim.

        Relax's shape ops trust their dims (a reshape to more elements than x has reads past
        its buffer), so a run-time ``t`` must come with ``valid``: bool tensors, all true when
        the values fit the op. Whether they are is matched in the same ``match_cast`` as a
        leading 1, so the VM stops on a mismatch before any op uses the dims.

        Raises:
            Unsupported: ``t``'s length is not static (the number of dims must be).
        """
        if isinstance(t, tvm.ir.GenericConst):
            return [int(v) for v in t.value.numpy().reshape(-1)]
        known = self.known_ints(t, *valid)
        if known is not None:
            return known
        shape = self.shape(t)
        self.require(len(shape) <= 1, "a run-time shape / size input that is not 1-d")
        n = shape[0] if shape else 1
        self.require(isinstance(n, int), "a run-time shape / size input of run-time length")
        if not valid:
            raise AssertionError("a run-time shape needs its validity check")
        t = self.emit(relax.op.reshape(self.int64(t), [n]))
        bad = [self.emit(relax.op.sum(relax.op.astype(relax.op.logical_not(v), "int64")))
               for v in valid]  # fmt: skip
        total = bad[0]
        for b in bad[1:]:
            total = self.emit(relax.op.add(total, b))
        ok = self.emit(relax.op.astype(relax.op.equal(total, self.const(0, "int64")), "int64"))
        t = self.emit(relax.op.concat([self.emit(relax.op.reshape(ok, [1])), t], 0))
        dims = [self._dim(None) for _ in range(n)]
        one = tvm.tirx.IntImm("int64", 1)
        self.bb.match_cast(self.emit(relax.op.tensor_to_shape(t)), relax.ShapeType([one, *dims]))
        return dims

    def values(self) -> Values:
        """An evaluator of the integer tensors bound so far (codegen.relax.symbolic)."""
        return Values(self.bb, self.known)

    def known_ints(self, t: relax.Expr, *valid: relax.Expr) -> list | None:
        """The values of ``t`` as dims when they follow from shapes Relax knows (computed
        from ``shape_of`` with constants: codegen.relax.symbolic) and ``valid`` provably
        holds for them; else None."""
        values = self.values()
        dims = values.values(t)
        if dims is None or any(str(d.ty) != "int64" for d in dims):
            return None
        if not all(values.proven(v) for v in valid):
            return None
        return [int(d) if isinstance(d, tvm.tirx.IntImm) else d for d in dims]

    def check(self, *valid: relax.Expr) -> None:
        """Stop at run time unless the bool tensors ``valid`` are all true (see ``ints``)."""
        self.ints(self.emit(relax.op.zeros([0], "int64")), *valid)

    def int64(self, t: relax.Expr) -> relax.Expr:
        """``t`` as an int64 tensor."""
        return t if self.dtype(t) == "int64" else self.emit(relax.op.astype(t, "int64"))

    def sized(self, x: relax.Expr) -> relax.Expr:
        """``x`` with a shape of fresh symbolic dims when Relax knows its rank only (a result
        whose shape is computed at run time), so the ops after it can read its dims."""
        if isinstance(x.ty.shape, relax.ShapeExpr):
            return x
        self.require(int(x.ty.ndim) >= 0, "an input of unknown rank")
        dims = [self._dim(None) for _ in range(int(x.ty.ndim))]
        return self.bb.match_cast(x, relax.TensorType(dims, x.ty.dtype))

    def ranked(self, x: relax.Expr, rank: int) -> relax.Expr:
        """``x`` with ``rank`` fresh symbolic dims when Relax does not know its rank (a value
        from an If whose branches differ in rank); the VM checks the rank at run time."""
        if int(x.ty.ndim) >= 0:
            return x
        dims = [self._dim(None) for _ in range(rank)]
        return self.bb.match_cast(x, relax.TensorType(dims, x.ty.dtype))

    def broadcast(self, fn: Callable[..., relax.Expr], *xs: relax.Expr) -> relax.Var:
        """Bind ``fn(*xs)``, a broadcasting op, with ``xs`` unified first (see ``unify``)."""
        return self.emit(fn(*self.unify(*xs)))

    def unify(self, *xs: relax.Expr) -> list[relax.Expr]:
        """``xs``, operands of one broadcasting op, with their symbolic dims made to agree
        where Relax cannot tell that they broadcast.

        Relax infers a broadcast of two different symbols (``n`` against ``m``, each read from
        a different run-time shape), or of a symbol against a static size, as a result of
        unknown shape, and LegalizeOps then leaves the op to CodeGenVM, which cannot emit it
        (and TOPI's broadcast_to reads a symbol that is 1 at run time as the full size). The
        source model says they broadcast, so on each such axis:

        - against a static size k > 1, a symbol is 1 or k at run time: the operand is
          gathered to k there (index i, or 0 where it is 1), checked to be one of them;
        - against other symbols only, the operands are ``match_cast`` to the first symbol:
          the VM checks that they are equal at run time (a symbol that is 1 at run time
          stops there rather than broadcasting).
        """
        shapes = []
        for x in xs:
            sh = getattr(x.ty, "shape", None)
            if not isinstance(sh, relax.ShapeExpr):
                return list(xs)
            shapes.append(list(sh.values))
        rank = max(len(s) for s in shapes)
        pick: list[Any] = [None] * rank
        for s in shapes:
            for i, d in enumerate(s, rank - len(s)):
                if isinstance(d, tvm.tirx.IntImm):
                    if int(d) != 1:
                        pick[i] = d
                elif pick[i] is None:
                    pick[i] = d
        same = tvm.sym.Analyzer().can_prove_equal
        out = []
        for x, s in zip(xs, shapes):
            new, changed = list(s), False
            for i, d in enumerate(s, rank - len(s)):
                if isinstance(d, tvm.tirx.IntImm) or same(d, pick[i]):
                    continue
                if isinstance(pick[i], tvm.tirx.IntImm):
                    x = self._stretch(x, i - rank + len(s), int(pick[i]))
                    new[i - rank + len(s)] = pick[i]
                else:
                    new[i - rank + len(s)], changed = pick[i], True
            if changed:
                x = self.bb.match_cast(x, relax.TensorType(new, x.ty.dtype))
            out.append(x)
        return out

    def named_dim(self, d: Any) -> Any:
        """``d`` when it is static or a symbol, else a new symbol to ``match_cast`` it to
        (for ops whose TOPI form compares dims by identity)."""
        return d if isinstance(d, tvm.tirx.IntImm | tvm.tirx.Var) else self._dim(None)

    def agree(self, x: relax.Expr, dims: Sequence[Any]) -> relax.Expr:
        """``x`` with the dims that the op reading it requires equal to another operand's
        (``dims``; None keeps x's own): ``match_cast`` where Relax cannot prove them equal
        (each read from a different run-time shape), which the VM checks at run time."""
        x = self.sized(x)
        have = list(x.ty.shape.values)
        same = tvm.sym.Analyzer().can_prove_equal
        new = [h if d is None else d for h, d in zip(have, dims)]
        if all(same(h, d) for h, d in zip(have, new)):
            return x
        return self.bb.match_cast(x, relax.TensorType(new, x.ty.dtype))

    def _stretch(self, x: relax.Expr, axis: int, k: int) -> relax.Expr:
        """``x`` broadcast to ``k`` along ``axis``, whose run-time size must be 1 or k."""
        i64, op = "int64", relax.op
        have = self.emit(op.take(self.shape_tensor(x), self.const(axis, i64), axis=0))
        one = self.emit(op.equal(have, self.const(1, i64)))
        self.check(op.logical_or(one, op.equal(have, self.const(k, i64))))
        step = op.astype(op.logical_not(one), i64)
        idx = self.emit(op.multiply(op.arange(0, k, 1, i64), step))
        return self.emit(op.take(x, idx, axis=axis, mode="clip"))

    def shape_tensor(self, x: relax.Expr) -> relax.Expr:
        """The shape of ``x`` as a 1-d int64 tensor (a constant when static)."""
        dims = self.shape(x)
        if all(isinstance(d, int) for d in dims):
            return relax.const(np.asarray(dims, np.int64), "int64")
        return self.emit(relax.op.shape_to_tensor(relax.op.shape_of(x)))

    def axes_hit(self, axes: relax.Expr, r: int) -> tuple[relax.Expr, relax.Expr]:
        """Which of ``r`` dims the run-time 1-d ``axes`` name (negatives counted from the
        end), as an [r] bool tensor, and a 0-d bool that each axis names one dim, once."""
        i64 = "int64"
        a = self.emit(relax.op.reshape(self.int64(axes), [-1]))
        k = self.shape(a)[0]
        self.require(isinstance(k, int), "run-time axes of run-time length")
        a = self.emit(relax.op.where(relax.op.less(a, self.const(0, i64)),
                                     relax.op.add(a, self.const(r, i64)), a))  # fmt: skip
        dims = self.emit(relax.op.arange(0, r, 1, i64))
        eq = self.emit(relax.op.equal(self.emit(relax.op.reshape(a, [k, 1])), dims))  # [k, r]
        count = self.emit(relax.op.sum(relax.op.astype(eq, i64), [0]))  # [r]
        hit = self.emit(relax.op.greater(count, self.const(0, i64)))
        once = relax.op.equal(relax.op.sum(relax.op.astype(hit, i64)), self.const(k, i64))
        return hit, self.emit(once)

    def kept_dims(self, hit: relax.Expr, dims: relax.Expr, m: int) -> relax.Expr:
        """The ``m`` entries of the 1-d ``dims`` where the bool ``hit`` is false, in order."""
        i64 = "int64"
        keep = self.emit(relax.op.astype(relax.op.logical_not(hit), i64))
        pos = self.emit(relax.op.subtract(relax.op.cumsum(keep, 0), self.const(1, i64)))
        rows = self.emit(relax.op.reshape(self.emit(relax.op.arange(0, m, 1, i64)), [m, 1]))
        pick = relax.op.logical_and(relax.op.equal(rows, pos), relax.op.astype(keep, "bool"))
        pick = self.emit(relax.op.astype(pick, i64))  # [m, r]: row i marks the i-th kept
        return self.emit(relax.op.sum(relax.op.multiply(pick, dims), [1]))

    def require(self, cond: bool, reason: str) -> None:
        if not cond:
            raise Unsupported(reason)


EMITTERS = EmitterRegistry()
emitter = EMITTERS
unsupported = EMITTERS.unsupported
