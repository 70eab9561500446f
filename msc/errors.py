"""Errors shared by frontends, codegens and the command line.

# NOTE: a user error (a bad path, an unsupported op list, a corrupt file) is an ``MscError``:
# the CLI prints its message without a traceback. ``UnsupportedOpsError`` lists *every*
# unsupported op of a model at once, never just the first.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "MscError",
    "ConversionError",
    "BadModelError",
    "NonNumericValuesError",
    "Unsupported",
    "UnsupportedOp",
    "UnsupportedOpsError",
]


class MscError(Exception):
    """An error caused by the input (model, file, arguments), not by a bug in msc."""


class ConversionError(MscError):
    """A model could not be translated; the message names the node and why."""


class BadModelError(ConversionError):
    """The model breaks its own format's rules (an ONNX string that is not UTF-8, ...): not an
    op msc lacks, so it is raised at once rather than collected with the unsupported ops, and
    ``custom_ops="keep"`` does not keep it. The message names where: node, op, attribute or
    tensor."""


class NonNumericValuesError(ConversionError):
    """A target that holds numeric tensors only (PyTorch, Relax) was given a graph with
    ``str`` tensors, sequences or optionals (``msc.ir.validate.non_numeric_values``); the
    message names every one of them with its type, never its contents."""

    def __init__(self, values: list[str], target: str, graph: str = "") -> None:
        self.values = list(values)
        self.target = target
        of = f"graph {graph!r}" if graph else "the graph"
        super().__init__(
            f"{target} holds numeric tensors only (no str tensors, sequences or optionals); "
            f"{of} has {len(self.values)} value(s) it cannot hold (codegen.onnx writes "
            "them):\n" + "\n".join(f"  - {v}" for v in self.values)
        )


class Unsupported(MscError):
    """A converter, emitter or decomposition cannot translate this use of an op (the message
    says why). Frontends and codegens collect every one into one ``UnsupportedOpsError``."""


@dataclass(frozen=True, slots=True)
class UnsupportedOp:
    """One occurrence of an op a frontend or codegen cannot translate."""

    op: str  # the source op, e.g. "aten.foo.default" or "com.microsoft::Attention"
    node: str = ""  # the source node name
    module: str = ""  # the module path, when the source has one
    reason: str = ""  # why, when more is known than "no converter"

    def __str__(self) -> str:
        s = self.op
        where = ", ".join(
            x
            for x in (
                f"node {self.node!r}" if self.node else "",
                f"module {self.module!r}" if self.module else "",
            )
            if x
        )
        if where:
            s += f" ({where})"
        if self.reason:
            s += f": {self.reason}"
        return s


class UnsupportedOpsError(ConversionError):
    """Every unsupported op of a model, found before any work was thrown away."""

    def __init__(self, ops: list[UnsupportedOp], what: str = "model") -> None:
        self.ops = list(ops)
        kinds = sorted({o.op for o in self.ops})
        lines = [
            f"{what} has {len(self.ops)} unsupported op occurrence(s) of "
            f"{len(kinds)} kind(s): {', '.join(kinds)}"
        ]
        lines += [f"  - {o}" for o in self.ops]
        super().__init__("\n".join(lines))
