"""Reading a TVMScript file without running the Python in it.

TVMScript is Python source that TVM's parser evaluates piece by piece: decorators, annotations,
every expression of a function body, a class body's statements, and even the strings that
stand for shapes (``R.Tensor(("n", 4))``) go through ``eval``, with Python's builtins and the
``tvm`` package in reach. A model file is untrusted input (DESIGN.md, "Security model"), so
``parse_script`` first checks the file's syntax tree (``ast.parse``: nothing evaluated) against
the subset of TVMScript that TVM's printer and ``codegen.relax`` write, and only then hands the
same text to TVM's parser, with nothing but the ``I``, ``R`` and ``T`` namespaces (and no
builtins) in scope. What the subset allows:

- at the top: a module docstring, ``from __future__ import annotations``, the imports of the
  script namespaces (``from tvm.script import relax as R``, ``from typing import TypeVar``;
  blanked before TVM reads the text), symbolic dims (``n = TypeVar("n")``),
  classes decorated ``@I.ir_module`` (no bases) and functions decorated ``@R.function`` or
  ``@T.prim_func`` (plain or called with constant keywords), without defaults or ``*args``;
- statements: assignments, ``if`` / ``for`` / ``while`` / ``with`` / ``assert`` / ``return``
  and expressions; no imports, ``try``, ``del``, ``global``, nested classes;
- calls only of an ``R.`` / ``T.`` / ``I.`` name (checked to be a function or class of TVM,
  reached through TVM's op namespaces only, never a module such as ``R.ir.tvm``), of a function
  of the module (``cls.f(x)``), and ``float("inf" | "-inf" | "nan")``; no lambdas,
  comprehensions, f-strings, starred keywords, or names and attributes starting with ``_``;
- names read must be the script namespaces or names the file binds (assignments, parameters,
  functions, shape variables named in strings);
- every string that reads as a Python expression may hold names, numbers, arithmetic and
  attribute access only (no calls, subscripts or lambdas).

Anything else is refused with an MscError naming the file and line, unless the caller passes
``trusted=True`` (``--trust-code``), which hands the file to TVM as it is: only for files from
a trusted source.

# NOTE: the check and TVM read the same text (the script imports are blanked in place, so line
# numbers stay), and the check runs before TVM sees any of it: a refused decorator never runs,
# even where the rest of the file would not parse.
"""

from __future__ import annotations

import ast
import gc
import types
from collections.abc import Iterator
from typing import Any, TypeVar

from msc.errors import MscError

__all__ = ["parse_script", "check_script", "ScriptRefused", "NONFINITE"]

# float() spellings TVMScript needs for non-finite constants (TVM's printer writes
# R.const("-inf", ...), which its parser refuses; codegen.relax writes float("-inf")).
NONFINITE = frozenset({"inf", "-inf", "+inf", "nan", "-nan", "+nan"})

_IMPORTS = {("ir", "I"), ("relax", "R"), ("tirx", "T"), ("tir", "T")}
_DECORATORS = {("I", "ir_module"), ("R", "function"), ("T", "prim_func")}
# Modules an R./T./I. name may pass through: TVM's Relax op families (R.nn.conv2d, ...).
_OP_MODULES = "tvm.relax.op."
_EXPR_NODES = (
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.IfExp,
    ast.Tuple,
    ast.List,
    ast.Dict,
    ast.Subscript,
    ast.Slice,
    ast.Starred,
)
_OPERATORS = (ast.operator, ast.unaryop, ast.boolop, ast.cmpop, ast.expr_context)
# What a string TVM may evaluate (a shape "n * 2", a TIR index) may hold.
_STRING_NODES = (
    ast.Expression,
    ast.Name,
    ast.Attribute,
    ast.Constant,
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.Tuple,
    *_OPERATORS,
)


class ScriptRefused(MscError):
    """A TVMScript file holds a construct outside the subset msc reads without running it."""


def _namespaces() -> dict[str, Any]:
    from tvm.script.parser import ir, relax, tirx

    return {"I": ir, "R": relax, "T": tirx}


def _chain(node: ast.expr) -> list[str] | None:
    """``R.nn.conv2d`` as ["R", "nn", "conv2d"]; None for anything but names and attributes."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def _from_tvm(obj: Any) -> bool:
    if isinstance(obj, types.ModuleType):
        return False
    mod = getattr(obj, "__module__", None)
    if not isinstance(mod, str):
        mod = type(obj).__module__
    if mod == "functools" and hasattr(obj, "func"):  # T.alloc_local and friends: partials
        return _from_tvm(obj.func)
    return mod == "tvm" or mod.startswith("tvm.")


class _Checker:
    """One file's check; ``refuse`` raises at the first construct outside the subset."""

    def __init__(self, text: str, origin: str) -> None:
        self.text = text
        self.origin = origin
        self.ns = _namespaces()
        self.bound: set[str] = set()
        self.classes: set[str] = set()
        self.blank: list[tuple[int, int]] = []  # the script imports' lines

    # -------------------------------------------------------------- reporting
    def refuse(self, node: ast.AST | None, what: str) -> None:
        line = getattr(node, "lineno", None)
        where = f"{self.origin}:{line}" if line else self.origin
        raise ScriptRefused(
            f"{where}: {what}: not part of the TVMScript msc reads without running it "
            "(pass --trust-code to run the file as Python, only if you trust it)"
        )

    # -------------------------------------------------------------- driver
    def run(self) -> str:
        try:
            tree = ast.parse(self.text, filename=self.origin)
        except SyntaxError as e:
            raise ScriptRefused(
                f"{self.origin}:{e.lineno}: not a TVMScript module: invalid Python syntax ({e.msg})"
            ) from None
        except (ValueError, RecursionError, MemoryError) as e:
            raise ScriptRefused(f"{self.origin}: not a TVMScript module: {e}") from None
        if not any(isinstance(s, ast.ClassDef | ast.FunctionDef) for s in tree.body):
            raise ScriptRefused(
                f"{self.origin}: not a TVMScript module (no @I.ir_module class or @R.function)"
            )
        try:
            self._collect(tree)
            for stmt in tree.body:
                self.top(stmt)
        except RecursionError:
            raise ScriptRefused(f"{self.origin}: expressions nested too deeply") from None
        lines = self.text.splitlines(keepends=True)
        for first, last in self.blank:
            for i in range(first - 1, last):
                lines[i] = "\n"
        return "".join(lines)

    def _collect(self, tree: ast.Module) -> None:
        """The names the file binds, and the classes (and their aliases) calls may go
        through."""
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.bound.add(node.id)
            elif isinstance(node, ast.FunctionDef | ast.ClassDef):
                self.bound.add(node.name)
                if isinstance(node, ast.ClassDef):
                    self.classes.add(node.name)
            elif isinstance(node, ast.arg):
                self.bound.add(node.arg)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                self.bound.update(_string_names(node.value))
        for node in ast.walk(tree):  # cls = Module
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Name)
                and node.value.id in self.classes
            ):
                self.classes.update(t.id for t in node.targets if isinstance(t, ast.Name))

    # -------------------------------------------------------------- statements
    def top(self, s: ast.stmt) -> None:
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
            self.expr(s.value)
        elif isinstance(s, ast.ImportFrom):
            self.import_from(s)
        elif isinstance(s, ast.ClassDef):
            self.class_def(s)
        elif isinstance(s, ast.FunctionDef):
            self.function(s)
        elif isinstance(s, ast.Assign) and _is_type_var(s):
            return  # a symbolic dim of the module (TVM's printer: n = TypeVar("n"))
        else:
            self.refuse(s, f"a top-level {type(s).__name__} statement")

    def import_from(self, s: ast.ImportFrom) -> None:
        names = [(a.name, a.asname) for a in s.names]
        if s.module == "__future__" and names == [("annotations", None)] and not s.level:
            return
        script = s.module == "tvm.script" and all(n in _IMPORTS for n in names)
        if not s.level and (script or (s.module == "typing" and names == [("TypeVar", None)])):
            self.blank.append((s.lineno, s.end_lineno or s.lineno))
            return
        self.refuse(s, f"an import of {s.module or '.'}")

    def class_def(self, s: ast.ClassDef) -> None:
        if s.bases or s.keywords:
            self.refuse(s, f"class {s.name} with base classes or keywords")
        self.decorators(s, {("I", "ir_module")})
        for b in s.body:
            if isinstance(b, ast.FunctionDef):
                self.function(b)
            elif isinstance(b, ast.Expr | ast.Assign | ast.Pass):
                self.stmt(b)
            else:
                self.refuse(b, f"a {type(b).__name__} statement in a class body")

    def decorators(self, s: ast.ClassDef | ast.FunctionDef, allowed: set) -> None:
        if len(s.decorator_list) != 1:
            self.refuse(s, f"{s.name} without exactly one TVMScript decorator")
        d = s.decorator_list[0]
        call = d if isinstance(d, ast.Call) else None
        chain = _chain(call.func if call else d)
        if chain is None or len(chain) != 2 or tuple(chain) not in allowed:
            self.refuse(d, f"decorator {ast.unparse(d)[:60]!r}")
        if call is not None:
            if call.args:
                self.refuse(d, "a decorator with positional arguments")
            for k in call.keywords:
                if k.arg is None or not isinstance(k.value, ast.Constant):
                    self.refuse(d, "a decorator argument that is not a constant keyword")

    def function(self, s: ast.FunctionDef) -> None:
        self.decorators(s, _DECORATORS)
        a = s.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.kw_defaults:
            self.refuse(s, f"function {s.name} with defaults, *args or keyword-only parameters")
        if getattr(s, "type_params", None):
            self.refuse(s, f"function {s.name} with type parameters")
        for arg in a.posonlyargs + a.args:
            self.name_ok(arg, arg.arg)
            if arg.arg in self.classes or arg.arg in self.ns:
                self.refuse(arg, f"a parameter named {arg.arg}, as a namespace or the module")
            if arg.annotation is not None:
                self.expr(arg.annotation)
        if s.returns is not None:
            self.expr(s.returns)
        self.body(s.body)

    def body(self, stmts: list[ast.stmt]) -> None:
        for s in stmts:
            self.stmt(s)

    def stmt(self, s: ast.stmt) -> None:
        if isinstance(s, ast.FunctionDef):
            self.function(s)
        elif isinstance(s, ast.Assign):
            alias = isinstance(s.value, ast.Name) and s.value.id in self.classes  # cls = Module
            for t in s.targets:
                self.target(t, alias)
            self.expr(s.value)
        elif isinstance(s, ast.AnnAssign):
            self.target(s.target)
            self.expr(s.annotation)
            if s.value is not None:
                self.expr(s.value)
        elif isinstance(s, ast.AugAssign):
            self.target(s.target)
            self.expr(s.value)
        elif isinstance(s, ast.Expr | ast.Return):
            if s.value is not None:
                self.expr(s.value)
        elif isinstance(s, ast.If | ast.While):
            self.expr(s.test)
            self.body(s.body)
            self.body(s.orelse)
        elif isinstance(s, ast.For):
            if s.orelse:
                self.refuse(s, "a for loop with an else branch")
            self.target(s.target)
            self.expr(s.iter)
            self.body(s.body)
        elif isinstance(s, ast.With):
            for item in s.items:
                self.expr(item.context_expr)
                if item.optional_vars is not None:
                    self.target(item.optional_vars)
            self.body(s.body)
        elif isinstance(s, ast.Assert):
            self.expr(s.test)
            if s.msg is not None:
                self.expr(s.msg)
        elif not isinstance(s, ast.Pass | ast.Break | ast.Continue):
            self.refuse(s, f"a {type(s).__name__} statement")

    def target(self, t: ast.expr, alias: bool = False) -> None:
        if isinstance(t, ast.Name):
            self.name_ok(t, t.id)
            if t.id in self.ns or t.id == "float" or (t.id in self.classes and not alias):
                self.refuse(t, f"an assignment to {t.id}")
        elif isinstance(t, ast.Tuple | ast.List):
            for e in t.elts:
                self.target(e)
        elif isinstance(t, ast.Subscript):  # a TIR buffer store
            self.expr(t.value)
            self.expr(t.slice)
        else:
            self.refuse(t, f"an assignment to a {type(t).__name__}")

    # -------------------------------------------------------------- expressions
    def name_ok(self, node: ast.AST, name: str) -> None:
        if name.startswith("_"):
            self.refuse(node, f"the name {name!r}")

    def expr(self, e: ast.expr) -> None:
        if isinstance(e, ast.Constant):
            if isinstance(e.value, str):
                self.string(e)
            elif isinstance(e.value, bytes):
                self.refuse(e, "a bytes literal")
            return
        if isinstance(e, ast.Name):
            self.name_ok(e, e.id)
            if e.id == "metadata" and e.id not in self.bound:
                line = getattr(e, "lineno", "?")
                raise ScriptRefused(
                    f"{self.origin}:{line}: not a self-contained TVMScript module: it reads "
                    "constants from metadata the file does not hold (TVM's printer leaves "
                    "them out)"
                )
            if e.id not in self.ns and e.id not in self.bound:
                self.refuse(e, f"the name {e.id!r}, which the file does not define")
            return
        if isinstance(e, ast.Attribute):
            self.attribute(e)
            return
        if isinstance(e, ast.Call):
            self.call(e)
            return
        if not isinstance(e, _EXPR_NODES):
            self.refuse(e, f"a {type(e).__name__} expression")
        for child in ast.iter_child_nodes(e):
            if isinstance(child, ast.expr):
                self.expr(child)
            elif not isinstance(child, _OPERATORS):
                self.refuse(child, f"a {type(child).__name__}")

    def attribute(self, e: ast.Attribute) -> None:
        chain = _chain(e)
        if chain is not None and chain[0] in self.ns:
            self.resolve(e, chain)
            return
        self.name_ok(e, e.attr)
        self.expr(e.value)

    def resolve(self, node: ast.expr, chain: list[str]) -> Any:
        """The object ``R.a.b`` names, refused unless every step is TVM's own: op-family
        modules on the way, a function, class or value of TVM at the end."""
        obj = self.ns[chain[0]]
        for i, part in enumerate(chain[1:], 1):
            self.name_ok(node, part)
            if i > 1 and isinstance(obj, types.ModuleType):
                if not obj.__name__.startswith(_OP_MODULES):
                    self.refuse(node, f"{'.'.join(chain)}")
            elif i > 1 and not _from_tvm(obj):
                self.refuse(node, f"{'.'.join(chain)}")
            try:
                obj = getattr(obj, part)
            except Exception:
                line = getattr(node, "lineno", "?")
                raise ScriptRefused(
                    f"{self.origin}:{line}: not a TVMScript module: TVMScript has no "
                    f"{'.'.join(chain[: i + 1])}"
                ) from None
        if isinstance(obj, types.ModuleType):
            if not obj.__name__.startswith(_OP_MODULES):
                self.refuse(node, f"{'.'.join(chain)}")
        elif not _from_tvm(obj):
            self.refuse(node, f"{'.'.join(chain)}")
        return obj

    def call(self, e: ast.Call) -> None:
        f = e.func
        chain = _chain(f)
        if isinstance(f, ast.Name) and f.id == "float":
            arg = e.args[0] if len(e.args) == 1 and not e.keywords else None
            if not (isinstance(arg, ast.Constant) and arg.value in NONFINITE):
                self.refuse(e, "a float() call other than float('inf' | '-inf' | 'nan')")
            return
        if chain is None:
            self.refuse(e, f"a call of {ast.unparse(f)[:60]!r}")
        elif chain[0] in self.ns:
            self.resolve(f, chain)
        elif len(chain) == 2 and chain[0] in self.classes:
            self.name_ok(f, chain[1])  # a function of the module: cls.f(x)
        else:
            self.refuse(e, f"a call of {'.'.join(chain)!r}")
        for a in e.args:
            self.expr(a)
        for k in e.keywords:
            if k.arg is None:
                self.refuse(e, "a ** argument")
            self.expr(k.value)

    def string(self, c: ast.Constant) -> None:
        """A string TVM may evaluate as an expression (a shape, a TIR index): names, numbers,
        arithmetic and attribute access only."""
        tree = _string_tree(c.value)
        if tree is None:
            return
        for node in ast.walk(tree):
            if isinstance(node, ast.Name | ast.Attribute):
                name = node.id if isinstance(node, ast.Name) else node.attr
                if name.startswith("_"):
                    self.refuse(c, f"the string {c.value[:40]!r}")
            elif not isinstance(node, _STRING_NODES):
                self.refuse(c, f"the string {c.value[:40]!r}, an expression with a call")


def _is_type_var(s: ast.Assign) -> bool:
    """``n = TypeVar("n")``: the form TVM's printer declares a module's symbolic dims in."""
    v = s.value
    return (
        len(s.targets) == 1
        and isinstance(s.targets[0], ast.Name)
        and not s.targets[0].id.startswith("_")
        and s.targets[0].id not in ("I", "R", "T", "TypeVar", "float")
        and isinstance(v, ast.Call)
        and isinstance(v.func, ast.Name)
        and v.func.id == "TypeVar"
        and not v.keywords
        and len(v.args) == 1
        and isinstance(v.args[0], ast.Constant)
        and v.args[0].value == s.targets[0].id
    )


def _string_tree(s: str) -> ast.Expression | None:
    if len(s) > 10_000:
        return None
    try:
        return ast.parse(s.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _string_names(s: str) -> Iterator[str]:
    tree = _string_tree(s)
    if tree is not None:
        yield from (n.id for n in ast.walk(tree) if isinstance(n, ast.Name))


def check_script(text: str, origin: str = "<script>") -> str:
    """Check ``text`` against the TVMScript subset msc reads without running it.

    Returns:
        The text TVM's parser may read: ``text`` with the script imports blanked.

    Raises:
        ScriptRefused: the first construct outside the subset, with its line.
    """
    return _Checker(text, origin).run()


def parse_script(text: str, origin: str = "<script>", *, trusted: bool = False) -> Any:
    """The IRModule (or function) of a TVMScript text, parsed without running its Python.

    Args:
        text: the TVMScript source.
        origin: the file name errors name.
        trusted: skip the check and let TVM evaluate the file as Python (``--trust-code``).

    Raises:
        ScriptRefused: a construct outside the subset (see the module docstring).
        MscError: TVM's parser refuses the text (its first line as the reason).
    """
    import tvm

    if trusted:
        source, scope = text, None
    else:
        source = check_script(text, origin)
        scope = {**_namespaces(), "TypeVar": TypeVar, "__builtins__": {"float": float}}
    try:
        return tvm.script.from_source(source, extra_vars=scope)
    except Exception as e:  # TVM's DiagnosticError and whatever its parser lets through
        lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
        why = next((ln for ln in lines if ln.startswith("error:")), lines[0] if lines else "")
        why = f"{type(e).__name__}: {why}"
    # The parser's half-built function goes with the exception's frames: freed here, where the
    # caller still captures TVM's "BlockBuilder destroyed with remaining blocks" warning.
    gc.collect()
    raise MscError(f"{origin}: not a TVMScript module: {why}")
