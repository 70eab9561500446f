"""Op schemas and the registry that holds them.

# NOTE: invariants
# - One schema per canonical op: named inputs (``x``, ``bias?`` optional, ``*xs`` variadic),
#   typed attributes with defaults, an output count, and a type-inference function whose
#   signature mirrors the op: ``def conv(x, weight, bias, *, stride, padding, ...)``.
# - Inference receives input TensorTypes (None for an absent optional input, a list for a
#   variadic one) and the normalized attributes; it returns one TensorType or a list of them.
# - Registering a name twice is an error. A registry is an object so tests can scope one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from msc.errors import MscError
from msc.ir.attrs import AttrKind, normalize
from msc.ir.registry import Registry
from msc.ir.types import TensorType

__all__ = ["Attr", "InputSpec", "OpSchema", "OpRegistry", "REQUIRED", "OpError"]


class OpError(MscError, TypeError):
    """A node does not fit its op's schema."""


Where = str | Callable[[], str]


def _where(where: Where) -> str:
    """The location for an error message, built only when an error needs it."""
    return where() if callable(where) else where


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


@dataclass(frozen=True, slots=True)
class Attr:
    """An attribute spec: kind, default (``REQUIRED`` if none), whether None is allowed."""

    kind: AttrKind
    default: Any = REQUIRED
    optional: bool = False
    doc: str = ""
    # printed only when not the default (attributes added to an op after graphs were written
    # with it, such as a conv's layouts: old text stays byte-identical)
    quiet: bool = False

    # Shorthands that read like the schema: Attr.int(1), Attr.ints(), Attr.float(1e-5, None).
    @staticmethod
    def int(default: Any = REQUIRED, optional: bool = False, doc: str = "") -> Attr:
        return Attr(AttrKind.INT, default, optional or default is None, doc)

    @staticmethod
    def float(default: Any = REQUIRED, optional: bool = False, doc: str = "") -> Attr:
        return Attr(AttrKind.FLOAT, default, optional or default is None, doc)

    @staticmethod
    def bool(default: Any = REQUIRED, doc: str = "") -> Attr:
        return Attr(AttrKind.BOOL, default, False, doc)

    @staticmethod
    def str(
        default: Any = REQUIRED, optional: bool = False, doc: str = "", quiet: bool = False
    ) -> Attr:
        return Attr(AttrKind.STR, default, optional or default is None, doc, quiet)

    @staticmethod
    def ints(default: Any = REQUIRED, optional: bool = False, doc: str = "") -> Attr:
        return Attr(AttrKind.INTS, default, optional or default is None, doc)

    @staticmethod
    def floats(default: Any = REQUIRED, optional: bool = False, doc: str = "") -> Attr:
        return Attr(AttrKind.FLOATS, default, optional or default is None, doc)

    @staticmethod
    def strs(default: Any = REQUIRED, optional: bool = False, doc: str = "") -> Attr:
        return Attr(AttrKind.STRS, default, optional or default is None, doc)

    @staticmethod
    def dtype(default: Any = REQUIRED, optional: bool = False, doc: str = "") -> Attr:
        return Attr(AttrKind.DTYPE, default, optional or default is None, doc)

    @staticmethod
    def tensor(default: Any = REQUIRED, optional: bool = False, doc: str = "") -> Attr:
        return Attr(AttrKind.TENSOR, default, optional or default is None, doc)

    @staticmethod
    def graph(default: Any = REQUIRED, optional: bool = False, doc: str = "") -> Attr:
        return Attr(AttrKind.GRAPH, default, optional or default is None, doc)

    @staticmethod
    def type(default: Any = REQUIRED, optional: bool = False, doc: str = "") -> Attr:
        return Attr(AttrKind.TYPE, default, optional or default is None, doc)

    def describe(self) -> str:
        s = self.kind.value + ("?" if self.optional else "")
        if self.default is not REQUIRED:
            s += f" = {self.default!r}"
        return s


@dataclass(frozen=True, slots=True)
class InputSpec:
    name: str
    optional: bool = False
    variadic: bool = False

    @staticmethod
    def parse(spec: str) -> InputSpec:
        if spec.startswith("*"):
            return InputSpec(spec[1:], variadic=True)
        if spec.endswith("?"):
            return InputSpec(spec[:-1], optional=True)
        return InputSpec(spec)

    def __str__(self) -> str:
        return ("*" if self.variadic else "") + self.name + ("?" if self.optional else "")


@dataclass(slots=True)
class OpSchema:
    name: str
    inputs: tuple[InputSpec, ...]
    attrs: dict[str, Attr]
    infer_fn: Callable[..., TensorType | Sequence[TensorType]]
    outputs: int | Callable[[Mapping[str, Any]], int] = 1
    category: str = "misc"
    doc: str = ""
    min_variadic: int = 1
    extra: dict[str, Any] = field(default_factory=dict)
    _variadic: bool = field(init=False, repr=False, default=False)
    _required: int = field(init=False, repr=False, default=0)
    _defaults: dict[str, Any] | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        self._variadic = any(s.variadic for s in self.inputs)
        self._required = sum(1 for s in self.inputs if not s.optional and not s.variadic)
        if all(a.default is not REQUIRED for a in self.attrs.values()):
            # The normalized defaults, shared by every node that sets no attribute (values
            # are immutable: numbers, strings, tuples, dtypes).
            self._defaults = self.normalize_attrs({}, where=f"op {self.name} (defaults)")

    # ------------------------------------------------------------ checking
    def check_inputs(self, inputs: Sequence[Any], *, where: Where = "") -> None:
        n = len(inputs)
        specs = self.inputs
        if not self._variadic and self._required <= n <= len(specs):
            # Fast path: the common fixed-arity case, checked without building lists.
            for i in range(n):
                if inputs[i] is None and not specs[i].optional:
                    break
            else:
                return
        where = _where(where) or f"op {self.name}"
        fixed = [s for s in self.inputs if not s.variadic]
        variadic = any(s.variadic for s in self.inputs)
        required = sum(1 for s in fixed if not s.optional)
        n = len(inputs)
        if variadic:
            if n < len(fixed) + self.min_variadic:
                raise OpError(
                    f"{where}: takes at least {len(fixed) + self.min_variadic} inputs, got {n}"
                )
        elif not required <= n <= len(fixed):
            want = f"{required}" if required == len(fixed) else f"{required} to {len(fixed)}"
            raise OpError(f"{where}: takes {want} inputs ({self.signature()}), got {n}")
        for i, (spec, v) in enumerate(zip(self._expand(n), inputs)):
            if v is None and not spec.optional:
                raise OpError(f"{where}: input {i} ({spec.name}) is required")

    def _expand(self, n: int) -> list[InputSpec]:
        out: list[InputSpec] = []
        for s in self.inputs:
            if s.variadic:
                out.extend([s] * (n - (len(self.inputs) - 1)))
            else:
                out.append(s)
        return out[:n] if len(out) >= n else out + [InputSpec("?", optional=True)] * (n - len(out))

    def normalize_attrs(self, attrs: Mapping[str, Any], *, where: Where = "") -> dict[str, Any]:
        if not attrs and self._defaults is not None:
            return dict(self._defaults)  # fast path: every attribute at its default
        where = _where(where) or f"op {self.name}"
        unknown = set(attrs) - set(self.attrs)
        if unknown:
            raise OpError(
                f"{where}: unknown attribute(s) {sorted(unknown)}; "
                f"{self.name} takes {sorted(self.attrs) or 'none'}"
            )
        out: dict[str, Any] = {}
        for name, spec in self.attrs.items():
            if name in attrs:
                value = attrs[name]
            elif spec.default is REQUIRED:
                raise OpError(f"{where}: attribute {name!r} ({spec.kind.value}) is required")
            else:
                value = spec.default
            if value is None:
                if not spec.optional:
                    raise OpError(f"{where}: attribute {name!r} may not be none")
                out[name] = None
                continue
            try:
                out[name] = normalize(spec.kind, value)
            except TypeError as e:
                raise OpError(f"{where}: attribute {name!r}: {e}") from None
        return out

    def num_outputs(self, attrs: Mapping[str, Any]) -> int:
        return self.outputs(attrs) if callable(self.outputs) else self.outputs

    def check_output_count(self, n: int, attrs: Mapping[str, Any], *, where: Where = "") -> None:
        want = self.num_outputs(attrs)
        if n != want:
            raise OpError(f"{_where(where) or self.name}: has {n} outputs, the op gives {want}")

    # ------------------------------------------------------------ inference
    def infer(self, node: Any) -> list[TensorType]:
        """Output types of ``node`` (anything with ``.inputs`` and ``.attrs``)."""
        types = [None if v is None else v.type for v in node.inputs]
        vi = next((i for i, s in enumerate(self.inputs) if s.variadic), None)
        if vi is None:
            call = types + [None] * (len(self.inputs) - len(types))
        else:
            after = len(self.inputs) - vi - 1
            call = types[:vi] + [types[vi : len(types) - after]] + types[len(types) - after :]
        try:
            out = self.infer_fn(*call, **node.attrs)
            return [out] if isinstance(out, TensorType) else list(out)
        except (AttributeError, TypeError):  # a sequence or optional type has no dtype, shape
            bad = _non_tensors(node)
            if bad:
                raise OpError(
                    f"{self.name} takes tensors; custom ops alone take sequences and "
                    f"optionals: {', '.join(bad)}"
                ) from None
            raise

    @property
    def family(self) -> str:
        """The op's family: the msc.ops module its schema is defined in (nn, shape, ...); its
        converters and emitters live in the module of the same name in every frontend and
        codegen."""
        return self.infer_fn.__module__.rsplit(".", 1)[1]

    def signature(self) -> str:
        ins = ", ".join(str(s) for s in self.inputs)
        ats = ", ".join(f"{k}: {a.describe()}" for k, a in self.attrs.items())
        return f"{self.name}({ins})" + (f" {{{ats}}}" if ats else "")


def _non_tensors(node: Any) -> list[str]:
    """``%name: type`` for each non-tensor value ``node`` reads or its subgraphs bind."""
    from msc.ir.graph import Graph

    values = [v for v in node.inputs if v is not None]
    for sub in node.attrs.values():
        if isinstance(sub, Graph):
            values += [*sub.inputs, *sub.outputs]
    return [f"%{v.name}: {v.type}" for v in values if not isinstance(v.type, TensorType)]


class OpRegistry:
    """Holds op schemas by name; registering a name twice is an error."""

    def __init__(self) -> None:
        self._ops: Registry[str, OpSchema] = Registry("op")

    def register(self, schema: OpSchema) -> OpSchema:
        return self._ops.register(schema.name, schema)

    def op(
        self,
        name: str,
        inputs: Sequence[str] = ("x",),
        attrs: Mapping[str, Attr] | None = None,
        *,
        outputs: int | Callable[[Mapping[str, Any]], int] = 1,
        category: str = "misc",
        doc: str = "",
        min_variadic: int = 1,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: register the decorated type-inference function as op ``name``."""

        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.register(
                OpSchema(
                    name=name,
                    inputs=tuple(InputSpec.parse(s) for s in inputs),
                    attrs=dict(attrs or {}),
                    infer_fn=fn,
                    outputs=outputs,
                    category=category,
                    doc=doc or (fn.__doc__ or "").strip().split("\n")[0],
                    min_variadic=min_variadic,
                )
            )
            return fn

        return deco

    def get(self, name: str) -> OpSchema:
        """The schema of op ``name``; a custom op (``domain::name@version``) gets the custom
        schema (msc.ops.custom)."""
        try:
            return self._ops[name]  # type: ignore[return-value]
        except KeyError:
            if isinstance(name, str) and "::" in name:
                from msc.ops.custom import schema_for

                return schema_for(name)  # type: ignore[return-value]
            raise OpError(f"unknown op {name!r}") from None

    def __contains__(self, name: object) -> bool:
        if name in self._ops:
            return True
        if isinstance(name, str) and "::" in name:
            from msc.ops.custom import schema_for

            try:
                schema_for(name)
            except OpError:
                return False
            return True
        return False

    def __iter__(self) -> Iterator[OpSchema]:
        return iter(sorted((s for _, s in self._ops.items()), key=lambda s: (s.category, s.name)))

    def __len__(self) -> int:
        return len(self._ops)

    def names(self) -> list[str]:
        return list(self._ops)
