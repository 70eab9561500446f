"""The one op-conversion table of the PyTorch frontend, and the context converters build with.

# NOTE: invariants
# - Converters are keyed by ATen overload (``"aten.conv2d.default"``) or, for Python operators
#   on symbolic ints, by ``"operator.mul"``. Both torch.export graphs and fx graphs reach the
#   same functions; fx calls are normalized to these keys first (see fx.py).
# - A converter's signature mirrors the ATen schema: it is called as ``fn(ctx, **bound)`` with
#   the arguments bound by name to the schema (defaults filled in), so reading it tells you the
#   op. Tensors arrive as msc ``Value``s, symbolic ints as 0-d i64 ``Value``s, the rest as
#   Python values (ints, floats, lists, torch dtypes).
# - In-place variants (``aten.relu_.default``) and ``.out`` variants reuse the functional
#   converter; the translator rebinds the mutated input to the result.
# - A converter that cannot translate a particular use raises ``Unsupported(reason)``; the
#   translator collects every such case before failing.
# - Nodes a converter builds are held in ``ctx.nodes`` until it returns, so the translator can
#   give the final value the source node's name; intermediate values get positional names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from msc.errors import Unsupported
from msc.frontend.torch.dtypes import to_msc, to_torch
from msc.ir import DType, Graph, Provenance, TensorType, Value
from msc.ir.builder import Builder
from msc.ir.registry import Registry

__all__ = [
    "Unsupported",
    "ConverterRegistry",
    "CONVERTERS",
    "COMPLEX_CONVERTERS",
    "converter",
    "complex_converter",
    "Ctx",
    "aten_op",
]


Converter = Callable[..., Any]


class ConverterRegistry:
    """Converters by source-op key; registering a key twice is an error."""

    def __init__(self) -> None:
        self._fns: Registry[str, Converter] = Registry("converter")

    def register(self, *keys: str) -> Callable[[Converter], Converter]:
        """Decorator: ``@converter("aten.relu.default", ...)``."""
        return self._fns(*keys)

    def lookup(self, key: str) -> tuple[Converter | None, bool]:
        """(converter, is_inplace_or_out) for ``key``; in-place/out variants fall back to the
        functional converter."""
        fn = self._fns.get(key)
        if fn is not None:
            return fn, False
        parts = key.split(".")
        if len(parts) == 3 and parts[0] == "aten":
            _, name, overload = parts
            if name.endswith("_") and not name.startswith("_"):
                fn = self._fns.get(f"aten.{name[:-1]}.{overload}")
                if fn is not None:
                    return fn, True
            if overload == "out":
                for ov in ("default", "Tensor"):
                    fn = self._fns.get(f"aten.{name}.{ov}")
                    if fn is not None:
                        return fn, True
        return None, False

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.lookup(key)[0] is not None

    def keys(self) -> list[str]:
        return list(self._fns)


CONVERTERS = ConverterRegistry()
converter = CONVERTERS.register

# Converters for a node that reads or produces a complex tensor (carried in the real layout
# [..., 2], see signal.py): the translator looks such a node up here, never in CONVERTERS.
COMPLEX_CONVERTERS = ConverterRegistry()
complex_converter = COMPLEX_CONVERTERS.register


# Namespaces whose converters are called with arguments bound to the op's schema.
_SCHEMA_NAMESPACES = ("aten", "quantized_decomposed")


def aten_op(key: str) -> torch._ops.OpOverload | None:
    """The OpOverload for ``"aten.name.overload"`` (or another namespace converters bind by
    schema, e.g. ``quantized_decomposed``), or None."""
    parts = key.split(".")
    if len(parts) != 3 or parts[0] not in _SCHEMA_NAMESPACES:
        return None
    packet = getattr(getattr(torch.ops, parts[0]), parts[1], None)
    return getattr(packet, parts[2], None) if packet is not None else None


def bind(schema: torch.FunctionSchema, args: Sequence[Any], kwargs: dict[str, Any]) -> dict:
    """Bind call arguments to an ATen schema by name, filling defaults. Raises TypeError."""
    params = list(schema.arguments)
    positional = [p for p in params if not p.kwarg_only]
    if len(args) > len(positional):
        raise TypeError(f"{schema.name}: {len(args)} positional args, takes {len(positional)}")
    out = {p.name: a for p, a in zip(positional, args)}
    names = {p.name for p in params}
    for k, v in kwargs.items():
        if k not in names:
            raise TypeError(f"{schema.name}: unexpected argument {k!r}")
        if k in out:
            raise TypeError(f"{schema.name}: argument {k!r} given twice")
        out[k] = v
    for p in params:
        if p.name in out:
            continue
        if p.has_default_value():
            out[p.name] = p.default_value
        elif str(p.type).startswith("Optional["):
            out[p.name] = None
        else:
            raise TypeError(f"{schema.name}: missing argument {p.name!r}")
    return out


_KIND = {
    "default": ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT,
    "int_to_float": ELEMENTWISE_TYPE_PROMOTION_KIND.INT_TO_FLOAT,
    "bool_to_long": ELEMENTWISE_TYPE_PROMOTION_KIND.BOOL_TO_LONG,
}

Operand = Value | int | float | bool | None


class Ctx(Builder):
    """What a converter builds with: the graph, the source node, helpers for constants,
    casts and PyTorch's type promotion."""

    def __init__(self, graph: Graph, registry: ConverterRegistry = CONVERTERS) -> None:
        super().__init__()
        self.graph = graph
        self.registry = registry
        self.node_name = ""
        self.module = ""
        self.stack: tuple[tuple[str, str], ...] = ()  # (path, type) of the modules around
        self.source_op = ""
        # id(Value) -> the sympy expression of a symbolic-int value (export only).
        self.sym_exprs: dict[int, Any] = {}
        # id(Value) -> the torch shape (ints and SymInts) recorded for a tensor value.
        self.torch_shapes: dict[int, tuple] = {}
        # The torch value recorded for the node being converted (a FakeTensor, ...), and the
        # translator's map from a torch size to a graph dim (an int, a SymDim or None).
        self.meta: Any = None
        self.dim_of: Callable[[Any], Any] = lambda d: d if isinstance(d, int) else None
        # ids of the node's input Values that are complex tensors in the real layout [..., 2].
        self.complex_ids: set[int] = set()

    # ------------------------------------------------------------------ building
    def _current_name(self) -> str:
        return self.node_name

    def _current_provenance(self) -> Provenance:
        return Provenance("torch", self.source_op, self.node_name, self.module, self.stack)

    def node(
        self, op: str, inputs: Sequence[Value | None], attrs: dict[str, Any] | None = None
    ) -> tuple[Value, ...]:
        return self.add(op, inputs, attrs).outputs

    def call(self, key: str, *args: Any, **kwargs: Any) -> Any:
        """Run the converter for ``key`` on already-translated arguments (used by fx
        normalization and by converters that reuse others)."""
        fn, _ = self.registry.lookup(key)
        if fn is None:
            raise Unsupported(f"no converter for {key}")
        if not self.source_op:
            self.source_op = key
        op = aten_op(key)
        if op is None:
            return fn(self, *args, **kwargs)
        return fn(self, **bind(op._schema, args, kwargs))

    def tensor(self, x: Value | int | float | bool, dtype: DType | None = None) -> Value:
        """``x`` as a Value of ``dtype`` (a constant for a Python scalar)."""
        if isinstance(x, Value):
            return x if dtype is None else self.cast(x, dtype)
        if dtype is None:
            dtype = scalar_dtype(x)
        return self.const(x, dtype)

    # ------------------------------------------------------------------ dtypes
    def result_dtype(self, *xs: Operand, kind: str = "default") -> DType:
        """The dtype PyTorch computes for an elementwise op on ``xs`` (its type promotion:
        dimensioned tensors over 0-d ones over Python scalars, by category)."""
        proxies: list[Any] = []
        for x in xs:
            if x is None:
                continue
            if isinstance(x, Value):
                shape = () if x.type.shape == () else (1,)
                proxies.append(torch.empty(shape, dtype=to_torch(x.dtype), device="meta"))
            elif isinstance(x, bool | int | float | complex):
                proxies.append(x)
            else:
                raise Unsupported(f"operand of type {type(x).__name__}")
        _, result = elementwise_dtypes(*proxies, type_promotion_kind=_KIND[kind])
        return to_msc(result)

    def promote(self, *xs: Operand, kind: str = "default") -> list[Value | None]:
        """``xs`` cast to the dtype PyTorch computes in (scalars become constants)."""
        dt = self.result_dtype(*xs, kind=kind)
        return [None if x is None else self.tensor(x, dt) for x in xs]

    # ------------------------------------------------------------------ shapes
    def shape(self, v: Value) -> tuple:
        if v.type.shape is None:
            raise Unsupported(f"value {v.name!r} has unknown rank")
        return v.type.shape

    def rank(self, v: Value) -> int:
        return len(self.shape(v))

    def is_sym(self, x: Any) -> bool:
        return isinstance(x, Value) and id(x) in self.sym_exprs

    def ints(self, xs: Any, what: str = "sizes") -> list[int]:
        """A static int list (a symbolic entry is an Unsupported use)."""
        if isinstance(xs, int | Value):
            xs = [xs]
        out = []
        for x in xs:
            if isinstance(x, Value):
                raise Unsupported(f"{what} depend on a symbolic size ({x.name})")
            out.append(int(x))
        return out

    def shape_tensor(self, xs: Sequence[Value | int]) -> Value:
        """A 1-d i64 tensor from ints and symbolic (0-d i64) values."""
        parts = []
        run: list[int] = []
        for x in xs:
            if isinstance(x, Value):
                if run:
                    parts.append(self.const(run, DType.INT64))
                    run = []
                x = self.cast(x, DType.INT64)
                parts.append(self.op("reshape", x, shape=[1]))
            else:
                run.append(int(x))
        if run:
            parts.append(self.const(run, DType.INT64))
        return parts[0] if len(parts) == 1 else self.op("concat", *parts, axis=0)

    def mark_sym(self, v: Value, expr: Any) -> Value:
        self.sym_exprs[id(v)] = expr
        return v


def scalar_dtype(x: Any) -> DType:
    """The dtype PyTorch gives a Python scalar on its own (bool, int64, default float)."""
    if isinstance(x, bool):
        return DType.BOOL
    if isinstance(x, int):
        return DType.INT64
    if isinstance(x, float):
        return to_msc(torch.get_default_dtype())
    raise Unsupported(f"scalar of type {type(x).__name__}")


def dims_tuple(v: Any, n: int) -> tuple[int, ...]:
    """An int-or-list argument (``stride=2`` or ``[2, 2]``) as ``n`` ints."""
    if isinstance(v, int):
        return (v,) * n
    v = tuple(int(x) for x in v)
    if len(v) == 1 and n > 1:
        return v * n
    return v


def type_of(v: Value) -> TensorType:
    return v.type
