"""Input-shape options and dim bindings: ``name=1,3,224,224``, ``name:0=batch``, ``batch=8``.

# NOTE: a binding maps symbol names to sizes. It comes from ``--input-shape`` (each symbolic dim
# of the named input takes the given size; a fixed dim must agree) or names a symbol directly
# (``batch=8``). ``specialize`` re-runs type inference with bound inputs so interior dims that
# inference could not keep symbolic (conv output sizes of a symbolic image) become numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from msc.errors import MscError
from msc.ir import symexpr
from msc.ir.dtype import DType
from msc.ir.graph import Graph, Node, Value
from msc.ir.types import Dim, SymDim, SymExpr, TensorType, ValueType, map_tensor, tensor_of

__all__ = [
    "InputShape",
    "parse_input_shape",
    "parse_dynamic",
    "DynamicDim",
    "bind",
    "specialize",
    "symbols",
    "concrete_shape",
    "dynamic_items",
    "retype",
]


@dataclass(frozen=True, slots=True)
class InputShape:
    """One ``--input-shape`` item: a name, its dims, and optionally a dtype (``ids=1,128:i64``)."""

    name: str
    shape: tuple[int, ...]
    dtype: DType | None = None


def parse_input_shape(text: str) -> InputShape:
    """Parse ``name=1,3,224,224`` (optionally ``:i64`` for the dtype; ``name=`` is a scalar)."""
    name, eq, rest = text.partition("=")
    if not eq or not name:
        raise MscError(f"bad --input-shape {text!r}: expected name=1,3,224,224[:dtype]")
    dims, _, dt = rest.partition(":")
    try:
        shape = tuple(int(d) for d in dims.replace("x", ",").split(",") if d.strip())
    except ValueError:
        raise MscError(f"bad --input-shape {text!r}: dims must be integers") from None
    if any(d < 0 for d in shape):
        raise MscError(f"bad --input-shape {text!r}: dims must be >= 0")
    dtype = None
    if dt:
        try:
            dtype = DType.from_short(dt)
        except ValueError:
            names = ", ".join(d.short for d in DType)
            raise MscError(f"bad --input-shape {text!r}: unknown dtype {dt!r} ({names})") from None
    return InputShape(name, shape, dtype)


class DynamicDim(NamedTuple):
    """One ``--dynamic`` item: input ``name``'s ``axis`` is the symbol ``sym``. Items msc
    makes itself (``dynamic_items``) travel as these, by value: a symbol's name is any
    string a model gives a dim (an ONNX dim_param may hold blanks, ``=``, braces), which the
    command-line spelling cannot always carry."""

    name: str
    axis: int
    sym: SymDim

    def __str__(self) -> str:
        rng = ""
        if self.sym.min is not None or self.sym.max is not None:
            lo = "" if self.sym.min is None else self.sym.min
            hi = "" if self.sym.max is None else self.sym.max
            rng = f"{{{lo}..{hi}}}"
        return f"{self.name}:{self.axis}={self.sym.name}{rng}"


def parse_dynamic(text: str | DynamicDim) -> DynamicDim:
    """Parse ``name:0=batch`` (or ``name:0=batch{1..64}`` with a range, as the text format
    writes it) into (input name, axis, symbol); a DynamicDim is returned as it is."""
    if isinstance(text, DynamicDim):
        return text
    lhs, eq, sym = text.partition("=")
    name, colon, ax = lhs.rpartition(":")
    lo = hi = None
    if "{" in sym and sym.endswith("}"):
        sym, _, rng = sym[:-1].partition("{")
        a, dots, b = rng.partition("..")
        try:
            lo, hi = (int(a) if a else None), (int(b) if b else None)
        except ValueError:
            dots = ""
        if not dots:
            raise MscError(
                f"bad --dynamic {text!r}: a range reads {{min..max}}, e.g. batch{{1..64}}"
            )
    # A symbol is any name a model file may give a dim (ONNX dim_params such as
    # ``p2o.DynamicDimension.0``), but not a number: a fixed size is --input-shape's.
    if (
        not eq
        or not colon
        or not name
        or not sym
        or sym.lstrip("+-").isdigit()
        or any(c.isspace() or c in "={}" for c in sym)
    ):
        raise MscError(f"bad --dynamic {text!r}: expected input:axis=symbol, e.g. x:0=batch")
    try:
        axis = int(ax)
    except ValueError:
        raise MscError(f"bad --dynamic {text!r}: the axis must be an integer") from None
    try:
        return DynamicDim(name, axis, SymDim(sym, lo, hi))
    except ValueError as e:
        raise MscError(f"bad --dynamic {text!r}: {e}") from None


def dynamic_items(g: Graph) -> list[DynamicDim]:
    """The ``--dynamic`` items that describe ``g``'s symbolic input dims (by value)."""
    out = []
    for v in g.inputs:
        if not isinstance(v.type, TensorType):
            continue  # a sequence or optional: its elements' dims are not the input's axes
        for i, d in enumerate(v.type.shape or ()):
            if isinstance(d, SymDim):
                out.append(DynamicDim(v.name, i, d))
    return out


def symbols(g: Graph) -> dict[str, SymDim]:
    """Every symbol in the graph's input and value types, by name."""
    out: dict[str, SymDim] = {}
    for v in g.values():
        for d in tensor_of(v.type).shape or ():
            if d is not None and not isinstance(d, int):
                for sym in sorted(symexpr.symbols(d), key=lambda x: x.name):
                    out.setdefault(sym.name, sym)
    return out


def bind(g: Graph, specs: Iterable[InputShape]) -> dict[str, int]:
    """Symbol sizes from input shapes (or direct ``symbol=size`` items). Raises MscError when a
    fixed dim disagrees, a rank differs, a size is out of a symbol's range, or a name is
    neither an input nor a symbol."""
    inputs = {v.name: v for v in g.inputs}
    syms = symbols(g)
    binding: dict[str, int] = {}

    def put(sym: SymDim | str, size: int, where: str) -> None:
        name = sym.name if isinstance(sym, SymDim) else sym
        s = syms.get(name)
        if s is not None and (
            (s.min is not None and size < s.min) or (s.max is not None and size > s.max)
        ):
            raise MscError(f"{where}: {name}={size} is outside its range {s.min}..{s.max}")
        if binding.get(name, size) != size:
            raise MscError(f"{where}: {name} is bound to both {binding[name]} and {size}")
        binding[name] = size

    for spec in specs:
        v = inputs.get(spec.name)
        if v is None:
            if spec.name in syms and len(spec.shape) == 1:
                put(spec.name, spec.shape[0], f"--input-shape {spec.name}")
                continue
            known = ", ".join(sorted(inputs)) or "none"
            raise MscError(
                f"--input-shape {spec.name}: no such input (inputs: {known}; symbols: "
                f"{', '.join(sorted(syms)) or 'none'})"
            )
        if not isinstance(v.type, TensorType):
            raise MscError(
                f"--input-shape {spec.name}: the input is {v.type}, not a tensor; give its "
                "symbols' sizes (symbol=size)"
            )
        shape = v.type.shape
        if shape is None:
            continue
        if len(shape) != len(spec.shape):
            raise MscError(
                f"--input-shape {spec.name}: rank {len(spec.shape)} given, the input is "
                f"{v.type} (rank {len(shape)})"
            )
        for i, (d, size) in enumerate(zip(shape, spec.shape)):
            if isinstance(d, SymDim):
                put(d, size, f"--input-shape {spec.name}")
            elif isinstance(d, int) and d != size:
                raise MscError(
                    f"--input-shape {spec.name}: dim {i} is fixed at {d} in the model, got {size}"
                )
    return binding


def _subst(t: ValueType, binding: Mapping[str, Dim]) -> ValueType:
    if not isinstance(t, TensorType):  # a sequence or optional: its element's dims
        return map_tensor(t, lambda x: _subst(x, binding))  # type: ignore[arg-type, return-value]
    if t.shape is None:
        return t
    return t.with_shape(bind_dim(d, binding) for d in t.shape)


def bind_dim(d: Dim, binding: Mapping[str, Dim]) -> Dim:
    """``d`` with bound symbols replaced by their sizes (an expression evaluated as far as the
    binding goes)."""
    if d is None or isinstance(d, int):
        return d
    out = symexpr.subs(d, binding)
    return out if not isinstance(out, int) or out >= 0 else None


def concrete_shape(t: TensorType, binding: Mapping[str, int], default: int = 2) -> tuple[int, ...]:
    """A runnable shape: bound symbols, else ``default`` clipped to the symbol's range.
    Raises MscError for an unknown rank or an unknown (unnamed) dim."""
    if t.shape is None:
        raise MscError(f"cannot make an input of unknown rank ({t}); give --input-shape")
    out: list[int] = []
    for d in t.shape:
        if isinstance(d, int):
            out.append(d)
        elif isinstance(d, SymDim):
            size = binding.get(d.name, default)
            if d.min is not None:
                size = max(size, d.min)
            if d.max is not None:
                size = min(size, d.max)
            out.append(size)
        elif isinstance(d, SymExpr):
            syms = {
                s.name: concrete_shape(TensorType(t.dtype, (s,)), binding, default)[0]
                for s in symexpr.symbols(d)
            }
            size = symexpr.subs(d, syms)
            if not isinstance(size, int) or size < 0:
                raise MscError(f"{d} is not a size for {syms}; give --input-shape")
            out.append(size)
        else:
            raise MscError(f"cannot make an input with an unknown dim ({t}); give --input-shape")
    return tuple(out)


def specialize(g: Graph, binding: Mapping[str, Dim]) -> Graph:
    """A copy of ``g`` with bound symbols replaced by sizes (or by other dims: a renamed
    symbol) and types re-inferred.

    Node types are re-inferred from the new input types; where inference cannot run (a subgraph
    attribute, an op whose inference fails), the original type with symbols substituted is
    kept, so the result is always a graph of the same shape as ``g``.
    """
    if not binding:
        return g
    return retype(g, {v.name: _subst(v.type, binding) for v in g.inputs}, binding)


def retype(
    g: Graph, input_types: Mapping[str, TensorType], binding: Mapping[str, Dim] | None = None
) -> Graph:
    """A copy of ``g`` with new input types and every node type re-inferred.

    With ``binding`` (specialising), a node whose inference fails keeps its old type with the
    bound symbols substituted. Without it (e.g. making a dim dynamic), a failure is an MscError
    naming the node, since the old type would be wrong.
    """
    out = Graph(g.name)
    out.meta = dict(g.meta)
    out.output_tree = g.output_tree
    vmap: dict[int, Value] = {}
    for v in g.inputs:
        vmap[id(v)] = out.add_input(v.name, input_types.get(v.name, v.type))
    for w in g.weights.values():
        data = w.storage  # shared, not read
        vmap[id(w)] = out.add_weight(w.name, data, type=w.type, role=w.role, aliases=w.aliases)
    for n in g.nodes:
        ins = [None if v is None else vmap.get(id(v), v) for v in n.inputs]
        kw: dict = {"name": n.name, "provenance": n.provenance}
        names = [v.name for v in n.outputs]
        node: Node | None = None
        err: Exception | None = None
        if not any(True for _ in n.subgraphs()):
            try:
                node = Node(n.op, ins, n.attrs, output_names=names, **kw)
            except (ValueError, TypeError) as e:
                err = e
        if node is None:
            if binding is None and err is not None:
                raise MscError(f"cannot re-type the graph: {err}") from None
            types = [_subst(v.type, binding or {}) for v in n.outputs]
            node = Node(n.op, ins, n.attrs, output_types=types, output_names=names, **kw)
        out.add_node(node)
        for a, b in zip(n.outputs, node.outputs):
            vmap[id(a)] = b
    out.set_outputs(vmap[id(v)] for v in g.outputs)
    return out
