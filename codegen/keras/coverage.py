"""The Keras-written section of docs/ops.md: which canonical ops codegen.keras writes."""

from __future__ import annotations

__all__ = ["coverage_markdown"]


def coverage_markdown() -> str:
    from codegen.keras.registry import EMITTERS
    from msc.ops import registry as ops
    from msc.ops.decompose import registry as decompositions

    direct, lowered = [], []
    for schema in ops:
        if schema.name in EMITTERS:
            direct.append(schema.name)
        elif schema.name in decompositions:
            lowered.append(schema.name)
    fmt = lambda names: ", ".join(f"`{n}`" for n in sorted(names)) or "none"  # noqa: E731
    return "\n".join(
        [
            "## Keras (written)",
            "",
            f"`codegen.keras` writes {len(direct)} canonical ops with an emitter "
            "(`codegen/keras/<family>.py`: a library layer where Keras has one, else "
            f"`keras.ops`), and lowers {len(lowered)} more through their decompositions when "
            "their parts have emitters. Any other op is reported with every other one.",
            "",
            "Emitted: " + fmt(direct) + ".",
            "",
        ]
    )
