"""Custom ops: ops outside the canonical vocabulary, kept as they are in their source.

A custom op is named ``domain::name@version`` (``com.microsoft::Inverse@1``,
``transformers::grouped_mm_fallback@1``): the ONNX domain or torch.library namespace, the op
name, and the domain's version. A node with such an op takes any inputs (absent optional
inputs are ``None``), typed attributes of any kind, and the output types it was given: msc
cannot infer them, so whoever creates the node states them. Otherwise it is a node like any
other: it prints, parses, saves, compares and hashes the same way.

# NOTE: invariants
# - ``custom_op(d, n, v)`` is the only spelling: a name with ``::`` is a custom op, any other
#   name is canonical. The domain and name are non-empty and hold no ``@``; the version is a
#   non-negative int, always written.
# - Frontends create custom nodes only for what they cannot translate (see DESIGN.md): a
#   custom node is never a way around writing a converter.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from msc.ir.attrs import infer_kind, normalize
from msc.ir.types import TensorType
from msc.ops.schema import OpError, Where, _where

__all__ = [
    "markdown",
    "CUSTOM_OPS",
    "CustomOp",
    "custom_op",
    "parse_custom",
    "is_custom",
    "CustomSchema",
    "schema_for",
]

# What a frontend does with an op it cannot translate: report it with all the others
# ("error"), or keep it as a custom node ("keep").
CUSTOM_OPS = ("error", "keep")

_SPELLING = re.compile(r"([^@:][^@]*?)::([^@:][^@]*)@([0-9]+)\Z")


@dataclass(frozen=True, slots=True)
class CustomOp:
    """The identity of a custom op: domain (ONNX domain, torch namespace), name, version."""

    domain: str
    name: str
    version: int = 1

    def __post_init__(self) -> None:
        for what, s in (("domain", self.domain), ("name", self.name)):
            if not isinstance(s, str) or not s or "@" in s or s.startswith(":") or "::" in s:
                raise OpError(
                    f"custom op {what} {s!r} must be a non-empty name without '@' or '::'"
                )
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 0:
            raise OpError(f"custom op version must be an int >= 0, got {self.version!r}")

    def __str__(self) -> str:
        return f"{self.domain}::{self.name}@{self.version}"


def custom_op(domain: str, name: str, version: int = 1) -> str:
    """The op name of a custom op: ``custom_op("com.microsoft", "Inverse")`` is
    ``"com.microsoft::Inverse@1"``."""
    return str(CustomOp(domain, name, version))


def is_custom(op: str) -> bool:
    return "::" in op


def parse_custom(op: str) -> CustomOp | None:
    """The (domain, name, version) of a custom op name, None for a canonical op."""
    if "::" not in op:
        return None
    m = _SPELLING.match(op)
    if m is None:
        raise OpError(f"custom op {op!r} is not spelled domain::name@version")
    return CustomOp(m.group(1), m.group(2), int(m.group(3)))


@functools.lru_cache(maxsize=1024)
def schema_for(op: str) -> CustomSchema:
    """The schema of custom op ``op`` (OpError if it is not spelled domain::name@version)."""
    parsed = parse_custom(op)
    if parsed is None:
        raise OpError(f"{op!r} is not a custom op name (domain::name@version)")
    return CustomSchema(op, parsed)


@dataclass(frozen=True, slots=True)
class CustomSchema:
    """What a node with a custom op is checked against: the same questions an OpSchema
    answers, with the answers the op's creator gave."""

    name: str
    op: CustomOp
    category: str = "custom"
    doc: str = "a custom op, kept as its source wrote it"
    family: str = "custom"

    def check_inputs(self, inputs: Sequence[Any], *, where: Where = "") -> None:
        pass  # any number of inputs; None is an absent optional input

    def normalize_attrs(self, attrs: Mapping[str, Any], *, where: Where = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in attrs.items():
            if not isinstance(k, str) or not k:
                raise OpError(f"{_where(where) or self.name}: attribute name {k!r} is not a name")
            try:
                out[k] = normalize(infer_kind(v), v)
            except TypeError as e:
                raise OpError(f"{_where(where) or self.name}: attribute {k!r}: {e}") from None
        return out

    def num_outputs(self, attrs: Mapping[str, Any]) -> int | None:
        return None

    def check_output_count(self, n: int, attrs: Mapping[str, Any], *, where: Where = "") -> None:
        if n < 1:
            raise OpError(f"{_where(where) or self.name}: a custom op needs at least one output")

    def infer(self, node: Any) -> list[TensorType]:
        outputs = getattr(node, "outputs", None)
        if outputs is None:
            raise OpError(
                f"custom op {self.name}: msc cannot infer its output types; give output_types"
            )
        return [v.type for v in outputs]

    def signature(self) -> str:
        return f"{self.name}(*inputs) {{any attributes}}"

    @property
    def inputs(self) -> tuple:
        return ()  # no input specs: any inputs

    @property
    def attrs(self) -> dict[str, Any]:
        return {}  # no attribute specs: any typed attributes


def markdown() -> str:
    """The docs/ops.md section on custom ops."""
    return "\n".join(
        [
            "## Custom ops",
            "",
            "An op outside the canonical vocabulary is kept as a *custom node* when the user asks "
            'for it (`custom_ops="keep"` in `msc.from_torch` / `msc.from_exported_program` / '
            '`msc.from_onnx`, `--custom-ops keep` on the command line; the default, `"error"`, '
            "reports every untranslatable op at once). Frontends create one only for an op they "
            "have no converter for: a torch.library op outside PyTorch's own namespaces, an ONNX "
            "op of another domain (`com.microsoft`, ...) or one msc lacks.",
            "",
            "- Name: `domain::name@version` (`com.microsoft::Inverse@1`, "
            "`transformers::grouped_mm_fallback@1`; a torch overload other than `default` joins "
            "the name: `ns::op.out@1`).",
            "- Inputs: any, in the source's order (an absent optional one is `_`); attributes: "
            "any typed values (a torch op's non-tensor arguments by name, an ONNX node's "
            "attributes); outputs: the types the source declared (torch's meta, ONNX "
            "value_info or shape inference), since msc cannot infer them.",
            "- Binary attributes: a string attribute that is not UTF-8 on an ONNX node whose op "
            "neither ONNX's schemas nor msc's converters define (the compiled blob in "
            "`ep_cache_context` of onnxruntime's `com.microsoft::EPContext`, embed_mode=1) is "
            '`bytes`, printed `bytes(b64 "...")` and written back byte for byte; a UTF-8 one '
            "stays `str`. Anywhere else (a list of strings, a string tensor, an op whose schema "
            "says text) non-UTF-8 is a malformed model (BadModelError).",
            '- Like any node it prints (quoted: `"com.microsoft::Inverse@1"(%x)`), parses, '
            "saves, loads, compares and hashes; `msc inspect` lists custom ops apart.",
            "- Its inputs and outputs may be sequences and optionals (`seq<f32[?, 3]>`, "
            "`opt<seq<i64[?]>>`: ONNX's sequence and optional values), which only custom nodes "
            "make and take (canonical ops take tensors). codegen.onnx writes them; codegen.torch "
            "and codegen.relax refuse a graph holding one, naming every such value.",
            "- codegen.onnx writes it in its domain (`ai.onnx`: the default domain) and imports "
            "that domain at its version.",
            "- codegen.torch calls `torch.ops.<domain>.<name>.<overload>(arg=...)` when the op is "
            "registered with torch.library in the generating process (tensor inputs fill the "
            "schema's tensor arguments in order, attributes the others by name); otherwise it "
            "refuses, naming the op and its domain (and a node with a bytes attribute, which no "
            "torch schema takes). Only checked identifiers of a registered op reach the "
            "generated code.",
            "",
        ]
    )
