"""The TFLite section of docs/ops.md: every builtin op of the schema, read or not, with why."""

from __future__ import annotations

__all__ = ["coverage_markdown", "custom_ops", "reason", "supported_ops", "unsupported_ops"]

_NOT_OPS = {
    "CUSTOM": "a custom op: kept as `tflite::<code>@<version>` with custom_ops keep",
    "DELEGATE": "a delegated partition: compiled for one accelerator, not a model op",
    "PLACEHOLDER_FOR_GREATER_OP_CODES": "not an op (a marker in the op code enum)",
}


def _builtins() -> list[str]:
    from msc.frontend.tflite.reader import builtin_name

    return [builtin_name(c) for c in range(210)]


def _read(op: str) -> bool:
    """Read by a converter, or by the importer itself (resource variables)."""
    from msc.frontend.tflite.importer import STATE_OPS
    from msc.frontend.tflite.registry import CONVERTERS

    return op in CONVERTERS or op in STATE_OPS


def supported_ops() -> list[str]:
    return [op for op in _builtins() if _read(op)]


def custom_ops() -> list[str]:
    """Custom codes (not builtin ops) msc reads, such as MediaPipe's."""
    from msc.frontend.tflite.registry import CONVERTERS

    builtins = set(_builtins())
    return sorted(op for op in CONVERTERS if op not in builtins)


def reason(op: str) -> str:
    """Why msc does not read builtin ``op`` (what docs/ops.md and the import error say)."""
    from msc.frontend.tflite.registry import REASONS

    if op in _NOT_OPS:
        return _NOT_OPS[op]
    if op in REASONS:
        return REASONS[op]
    if op.startswith("STABLEHLO_"):
        return "StableHLO ops (litert-torch's) are not read yet"
    if op in ("WHILE", "IF", "CALL"):
        return "control flow across subgraphs is not read yet"
    return "not read yet"


def unsupported_ops() -> dict[str, str]:
    """Builtin op -> why msc does not read it."""
    return {op: reason(op) for op in _builtins() if not _read(op)}


def coverage_markdown() -> str:
    ok = supported_ops()
    bad = unsupported_ops()
    lines = [
        "## TFLite (read)",
        "",
        f"`msc.from_tflite` reads {len(ok)} of the schema's {len(ok) + len(bad)} builtin ops; "
        "converters in `msc/frontend/tflite/<family>.py`.",
        "",
        "Read: " + ", ".join(f"`{op}`" for op in ok) + ". Resource variables (VAR_HANDLE, "
        "READ_VARIABLE, ASSIGN_VARIABLE; CALL_ONCE's init subgraph) are state: a graph input "
        "and output each, their first values `msc.frontend.tflite.initial_state`'s.",
        "",
        "Custom ops read (by their custom code): "
        + (", ".join(f"`{op}`" for op in custom_ops()) or "none")
        + '; any other is kept opaque with `custom_ops="keep"`.',
        "",
        "| builtin op | why it is not read |",
        "|---|---|",
    ]
    lines += [f"| `{op}` | {why} |" for op, why in bad.items()]
    return "\n".join(lines) + "\n"
