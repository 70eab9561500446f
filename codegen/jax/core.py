"""The JAX code writer: an msc Graph as one pure function ``forward(params, *inputs)`` over a
params dict keyed by the graph's weight names, in jax.numpy / jax.lax / jax.nn.

# NOTE: invariants
# - Generated code imports only jax, numpy and (in ``load_params``) safetensors.
# - Every model-supplied string reaches the code through ``repr()`` (weight keys, einsum
#   equations) or a sanitized identifier (value names); the identifiers come from a fresh
#   namespace per emission, so ``a.b`` and ``a_b`` stay two names.
# - Ops without an emitter are lowered through msc.ops' decompositions first; what can be
#   written neither way is reported at once in one UnsupportedOpsError.
# - Sizes are Python values: under jax.jit a traced array's shape is Python ints (one trace
#   per shape), so a symbolic dim is read from an input's shape once (``batch =
#   input_ids.shape[0]``), shape arithmetic is Python arithmetic on such names (``held``
#   values: an expression, or a list of them for a 1-d size), and reshape / expand / full /
#   arange take sizes written from the graph's symbolic types. Nothing depends on the example
#   size of a symbolic dim. Statements only sizes read are dropped (``drop_unread``).
"""

from __future__ import annotations

import builtins
import keyword
import math
import re
from typing import Any

import numpy as np

from codegen.jax.registry import EMITTERS, EmitterRegistry
from msc.errors import Unsupported, UnsupportedOp, UnsupportedOpsError
from msc.io.marker import SOURCES
from msc.ir import DType
from msc.ir.dtype import shortest
from msc.ir.graph import Graph, Node, Value
from msc.ir.types import Func, SymDim, SymExpr

__all__ = ["JaxCodegen", "Held", "literal", "dtype_expr", "need", "drop_unread"]

RESERVED = {
    "jax", "jnp", "lax", "np", "os", "params", "forward", "load_params", "nest", "WEIGHTS_FILE"
}  # fmt: skip


def _fresh_namespace(reserved: set[str]) -> set[str]:
    """The names a function's locals may not take."""
    return set(reserved) | set(keyword.kwlist) | set(dir(builtins))


_INVALID = re.compile(r"[^0-9A-Za-z_]+")


def need(node: Node, key: str) -> None:
    """Unsupported unless the node holds ``key`` as an attribute (not a run-time input)."""
    if node.attrs.get(key) is None:
        raise Unsupported(f"{key} computed at run time (JAX needs it static)")


def dtype_expr(dt: DType) -> str:
    if dt is DType.BOOL:
        return "jnp.bool_"
    return f"jnp.{np.dtype(dt.to_numpy()).name}"


def _scalar(v: Any, dtype: np.dtype | None = None) -> str:
    """``v`` as a Python literal; a float of ``dtype`` (float32, float16) as the shortest
    decimal that rounds back to it there (``1e-06``)."""
    if isinstance(v, bool | np.bool_):
        return repr(bool(v))
    if isinstance(v, int | np.integer):
        return repr(int(v))
    f = float(v)
    if math.isnan(f):
        return "jnp.nan"
    if math.isinf(f):
        return "jnp.inf" if f > 0 else "-jnp.inf"
    return repr(f if dtype is None else shortest(f, dtype))


def literal(arr: np.ndarray) -> str:
    """A jnp expression of a small array, its values as literals."""
    dt = DType.from_numpy(arr.dtype)

    def nested(a: np.ndarray) -> str:
        if a.ndim == 0:
            return _scalar(a.item(), arr.dtype)
        return "[" + ", ".join(nested(x) for x in a) + "]"

    return f"jnp.asarray({nested(arr)}, dtype={dtype_expr(dt)})"


class Held:
    """What an emitter returns for a node computing a size: its Python value (an expression,
    or for a 1-d size the list of its elements' expressions); ``bind``: assign it to a name
    (arithmetic, read more than once) rather than write it where it is used."""

    __slots__ = ("value", "bind")

    def __init__(self, value: str | list[str], bind: bool = False) -> None:
        self.value = value
        self.bind = bind


_FUNCS = {"floordiv": "({} // {})", "mod": "({} % {})", "min": "min({}, {})", "max": "max({}, {})"}


class JaxCodegen:
    def __init__(
        self, graph: Graph, emitters: EmitterRegistry = EMITTERS, *, flat: bool = False
    ) -> None:
        self.emitters = emitters
        self.graph = self._lower(graph)
        self.flat = flat
        self._taken = _fresh_namespace(RESERVED)
        self.seen: set[str] = set()  # every local name of every function (codegen.jax.blocks)
        self.globals: set[str] = set()  # the block functions' names
        # Weights: ``params[name]`` (flat), else by their path in ``tree`` under ``base``
        # (the params subtree the current function is given; codegen.jax.blocks), or the
        # argument ``wargs`` names (a weight a block reads from outside its module).
        self.tree: Any = None
        self.base = ""
        self.wargs: dict[Value, str] = {}
        self.returned: set[Value] = set(self.graph.outputs)
        self.nested = False  # params is the tree (load_params nests it)
        self.names: dict[Value, str] = {}
        self.lines: list[str] = []
        self.pre: list[str] = []  # statements an emitter puts before its node's assignment
        self.held: dict[Value, str | list[str]] = {}  # sizes held as Python values
        self.symbols: dict[str, str] = {}  # symbolic dim name -> the name it is read into

    def _lower(self, graph: Graph) -> Graph:
        from msc.ops.decompose import decompose
        from msc.ops.decompose import registry as rules

        todo = [n for n in graph.nodes if n.op not in self.emitters]
        if todo:
            graph = decompose(graph, lambda n: n.op not in self.emitters and n.op in rules)
        missing = [n for n in graph.nodes if n.op not in self.emitters]
        if missing:
            raise UnsupportedOpsError(
                [UnsupportedOp(str(n.op), n.name or "", "", "no JAX emitter") for n in missing],
                what="graph (for JAX)",
            )
        return graph

    # ------------------------------------------------------------ names
    def fresh(self, source: str | None, fallback: str = "v") -> str:
        base = _INVALID.sub("_", source or "").strip("_") or fallback
        if base[0].isdigit():
            base = fallback + base
        name, k = base, 0
        while name in self._taken or name in self.globals or name.startswith("__"):
            k += 1
            name = f"{base}_{k}"
        self._taken.add(name)
        self.seen.add(name)
        return name

    def ref(self, v: Value | None) -> str | None:
        if v is None:
            return None
        if v.producer is None and v.name in self.graph.weights:
            if v in self.wargs:
                return self.wargs[v]
            if self.tree is None:
                return f"params[{v.name!r}]"
            return self.access(v.name)
        if v in self.held:  # a size used as an array
            return f"jnp.asarray({self.py(v)}, dtype={dtype_expr(v.type.dtype)})"
        return self.names[v]

    # ------------------------------------------------------------ sizes
    def size(self, v: Value | None) -> str | list[str] | None:
        """The Python value of ``v`` when the code knows it without running an array op: a
        held size, or a small integer constant (its literal). None otherwise."""
        if v is None:
            return None
        if v in self.held:
            return self.held[v]
        p = v.producer
        if p is not None and p.op == "constant" and v.type.dtype.is_integer:
            arr = np.asarray(p.attrs["value"])
            if arr.ndim == 0:
                return str(int(arr))
            if arr.ndim == 1 and arr.size <= 16:
                return [str(int(x)) for x in arr]
        return None

    def py(self, v: Value) -> str:
        """``v``'s Python value as one expression (a tuple for a 1-d size)."""
        s = self.size(v)
        if isinstance(s, list):
            return f"({s[0]},)" if len(s) == 1 else f"({', '.join(s)})"
        assert s is not None
        return s

    def on_sizes(self, node: Node) -> bool:
        """``node`` computes a size from sizes: integer, at most 1-d, every input a Python
        value and one of them a held size."""
        out = node.outputs
        if len(out) != 1 or not out[0].type.dtype.is_integer or out[0].type.rank > 1:
            return False
        ins = [v for v in node.inputs if v is not None]
        return any(v in self.held for v in ins) and all(self.size(v) is not None for v in ins)

    def dim(self, d: Any) -> str | None:
        """A dim of a graph type as a Python expression over the symbols the inputs' shapes
        give (``batch``, ``seq_len + 1``); None if some symbol is none of theirs."""
        if isinstance(d, bool) or d is None:
            return None
        if isinstance(d, int):
            return str(d)
        if isinstance(d, SymDim):
            return self.symbols.get(d.name)
        if isinstance(d, Func):
            args = [self.dim(a) for a in d.args]
            if d.op not in _FUNCS or None in args or len(args) != 2:
                return None
            args = [a if re.fullmatch(r"-?\w+", a) else f"({a})" for a in args]  # type: ignore[arg-type]
            return _FUNCS[d.op].format(*args)
        if isinstance(d, SymExpr):
            text = ""
            for mono, c in d.terms:  # the constant term last
                atoms = [self.dim(a) for a in mono]
                if None in atoms:
                    return None
                term = "*".join([*([str(abs(c))] if abs(c) != 1 or not mono else []), *atoms])
                sign = "-" if c < 0 else "+"
                text = f"{text} {sign} {term}" if text else term if c > 0 else f"-{term}"
            return text or "0"
        return None

    def shape_of(self, v: Value, unknown: str | None = None) -> str:
        """``v``'s shape as a Python tuple: static dims as ints, symbolic ones over the
        symbols; a dim the types cannot say is ``unknown`` (``-1`` for a reshape), at most
        one. Unsupported otherwise."""
        dims = [self.dim(d) for d in (v.type.shape or ())]
        if v.type.shape is None or dims.count(None) > (1 if unknown else 0):
            raise Unsupported("a size the graph's types do not give in terms of the inputs")
        items = [unknown if d is None else d for d in dims]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"  # type: ignore[arg-type]

    def access(self, path: str) -> str:
        """``params["encoder"]["layer"][0]``: the params subtree (or weight) of a module path
        (a weight name), from the current function's ``params`` (the subtree of ``base``)."""
        parts = path.split(".")
        node = self.tree
        if self.base:
            skip = self.base.split(".")
            assert parts[: len(skip)] == skip, (path, self.base)
            for k in skip:
                node = node[int(k)] if isinstance(node, list) else node[k]
            parts = parts[len(skip) :]
        text = "params"
        for k in parts:
            if isinstance(node, list):
                node = node[int(k)]
                text += f"[{int(k)}]"
            else:
                node = node[k]
                text += f"[{k!r}]"
        return text

    def _bind_symbols(self, inputs: list[Value] | None = None) -> list[tuple[list[str], list[str]]]:
        """``batch = input_ids.shape[0]`` for each symbol an input's shape holds first."""
        out = []
        for v in self.graph.inputs if inputs is None else inputs:
            for i, d in enumerate(v.type.shape or ()):
                if isinstance(d, SymDim) and d.name not in self.symbols:
                    name = self.fresh(d.name, "n")
                    self.symbols[d.name] = name
                    out.append(([f"{name} = {self.names[v]}.shape[{i}]"], [name]))
        return out

    # ------------------------------------------------------------ emission
    def generate(self) -> str:
        from codegen.jax.blocks import BlockWriter

        g = self.graph
        writer = None if self.flat else BlockWriter(self)
        if writer is not None and writer.tree is None:
            writer = None  # weight names that do not nest: the flat form
        if writer is not None:
            self.tree, self.nested = writer.tree, True
        args = [self.fresh(v.name, "x") for v in g.inputs]
        for v, a in zip(g.inputs, args):
            self.names[v] = a
        # (lines, names they assign, dropped when none is read)
        stmts: list[tuple[list[str], list[str]]] = self._bind_symbols()
        bad: list[UnsupportedOp] = []
        if writer is None:
            for node in g.nodes:
                self.statement(node, stmts, bad)
        else:
            writer.body(g.nodes, writer.part.top, stmts, bad)
            if not writer.functions:  # no block to write as a function: the flat form
                return JaxCodegen(g, self.emitters, flat=True).generate()
        if bad:
            raise UnsupportedOpsError(bad, what="graph (for JAX)")
        outs = [self.ref(v) for v in g.outputs]
        body = drop_unread(stmts, outs)
        ret = outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ")"
        if writer is not None:
            return self._module(body, args, ret, writer)
        head = [
            *self._head(
                "The params dict (weight name -> array) from ``path`` (default: the weights",
                "{k: jnp.asarray(v) for k, v in arrays}",
            ),
            "",
            "",
            f"def forward({', '.join(['params', *args])}):",
        ]
        return "\n".join(head + ["    " + line for line in body] + [f"    return {ret}", ""])

    def _head(self, doc: str, returned: str) -> list[str]:
        """The module's docstring, imports and ``load_params`` (``doc``: its docstring's first
        line; ``returned``: what it returns of ``arrays``, the file's weights)."""
        return [
            f'{SOURCES["jax"]}{self.graph.name!r}."""',
            "",
            "import os",
            "",
            "import jax",
            "import jax.numpy as jnp",
            "import numpy as np",
            "from jax import lax",
            "",
            'WEIGHTS_FILE = "weights.safetensors"',
            "",
            "",
            "def load_params(path=None):",
            f'    """{doc}',
            '    saved next to this file)."""',
            "    from safetensors.numpy import load_file",
            "",
            "    if path is None:",
            "        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), WEIGHTS_FILE)",
            "    arrays = load_file(path).items()",
            f"    return {returned}",
        ]

    def _module(self, body: list[str], args: list[str], ret: str, writer: Any) -> str:
        """The module of the block form: ``load_params`` nests the weights (``nest``), one
        function per block type, then ``forward``."""
        from codegen.jax.blocks import NEST_SOURCE

        head = [
            *self._head(
                "The params tree (``nest``) of the weights in ``path`` (default: the weights",
                "nest({k: jnp.asarray(v) for k, v in arrays})",
            ),
            "",
            "",
            *NEST_SOURCE.strip("\n").splitlines(),
        ]
        for fn in writer.functions:
            head += ["", "", *fn]
        head += ["", "", f"def forward({', '.join(['params', *args])}):"]
        return "\n".join(head + ["    " + line for line in body] + [f"    return {ret}", ""])

    def statement(
        self, node: Node, stmts: list[tuple[list[str], list[str]]], bad: list[UnsupportedOp]
    ) -> None:
        """Append ``node``'s statement to ``stmts`` (its lines, and the names it assigns when
        ``_drop_unread`` may drop it), or its error to ``bad``."""
        try:
            lines = self._node(node)
        except Unsupported as e:
            bad.append(UnsupportedOp(str(node.op), node.name or "", "", str(e)))
            for o in node.outputs:
                self.names[o] = "None"
            return
        used = all(o.uses for o in node.outputs) and not set(node.outputs) & self.returned
        stmts.append(
            (lines, [self.names[o] for o in node.outputs if o in self.names] if used else [])
        )

    def _node(self, node: Node) -> list[str]:
        fn = self.emitters.get(node.op)
        if fn is None:  # in a subgraph, which _lower does not reach
            raise Unsupported("no JAX emitter")
        args = [self.ref(v) for v in node.inputs]
        saved, self.pre = self.pre, []
        try:
            expr = fn(self, node, *args)
            pre = self.pre
        finally:
            self.pre = saved
        outs = node.outputs
        if isinstance(expr, Held):  # a size: a Python value, written where it is used
            if not expr.bind:
                self.held[outs[0]] = expr.value
                return pre
            name = self.fresh(_symbol_of(node) or outs[0].name)
            self.held[outs[0]] = name
            self.names[outs[0]] = name
            return [*pre, f"{name} = {expr.value}"]
        names = [self.fresh(o.name) for o in outs]
        for o, n in zip(outs, names):
            self.names[o] = n
        if len(outs) == 1:
            if isinstance(expr, tuple):
                expr = expr[0]
            return [*pre, f"{names[0]} = {expr}"]
        if isinstance(expr, tuple):
            return [*pre, *[f"{n} = {e}" for n, e in zip(names, expr)]]
        return [*pre, f"{', '.join(names)} = {expr}"]

    def body(self, graph: Graph, params: list[str]) -> tuple[list[str], list[str]]:
        """The lines computing a subgraph (its inputs bound to ``params``), and its outputs'
        expressions; it reads the enclosing function's values by name (a closure)."""
        for v, p in zip(graph.inputs, params):
            self.names[v] = p
        lines: list[str] = []
        for node in graph.nodes:
            lines.extend(self._node(node))
        return lines, [self.ref(v) for v in graph.outputs]  # type: ignore[misc]


_WORD = re.compile(r"[A-Za-z_][0-9A-Za-z_]*")


def drop_unread(stmts: list[tuple[list[str], list[str]]], outs: list[str]) -> list[str]:
    """The lines of ``stmts`` without the statements whose names no kept line reads (what
    only sizes used: constants and shape reads folded into Python values). A statement with
    no names listed is always kept (a node the graph leaves unused stays, as in the source)."""
    read = {w for o in outs for w in _WORD.findall(o)}
    kept: list[list[str]] = []
    for lines, names in reversed(stmts):
        if names and not read.intersection(names):
            continue
        kept.append(lines)
        for line in lines:
            read.update(_WORD.findall(line))
    return [line for lines in reversed(kept) for line in lines]


def _symbol_of(node: Node) -> str | None:
    """The symbol a node reads from a shape (``squeeze(shape(x)[i:i+1])``), to name it by."""
    p = node.inputs[0].producer if node.inputs and node.inputs[0] is not None else None
    if node.op != "squeeze" or p is None or p.op != "shape" or p.inputs[0].type.shape is None:
        return None
    dims = list(p.inputs[0].type.shape)[p.attrs.get("start", 0) : p.attrs.get("end")]
    return dims[0].name if len(dims) == 1 and isinstance(dims[0], SymDim) else None
