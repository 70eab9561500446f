"""The TFLite-written section of docs/ops.md: which canonical ops codegen.tflite writes."""

from __future__ import annotations

__all__ = ["coverage_markdown"]


def coverage_markdown() -> str:
    from codegen.tflite.registry import EMITTERS
    from msc.ops import registry as ops
    from msc.ops.decompose import registry as decompositions

    direct, lowered, missing = [], [], []
    for schema in ops:
        if schema.name in EMITTERS:
            direct.append(schema.name)
        elif schema.name in decompositions:
            lowered.append(schema.name)
        else:
            missing.append(schema.name)
    fmt = lambda names: ", ".join(f"`{n}`" for n in sorted(names)) or "none"  # noqa: E731
    return "\n".join(
        [
            "## TFLite (written)",
            "",
            f"`codegen.tflite` writes {len(direct)} canonical ops with an emitter "
            "(`codegen/tflite/<family>.py`), and lowers through their decompositions "
            f"{len(lowered)} more (those whose parts it writes). Not written "
            "(no emitter, no decomposition): the node is reported with every other one.",
            "",
            "Emitted: " + fmt(direct) + ".",
            "",
            "Through a decomposition: " + fmt(lowered) + ".",
            "",
            "Not written: " + fmt(missing) + ".",
            "",
        ]
    )
