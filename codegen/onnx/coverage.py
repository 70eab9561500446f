"""The ONNX codegen's coverage table for docs/ops.md.

# NOTE: generated from the registries alone (never from the installed onnxruntime), so the
# text is the same on every machine.
"""

from __future__ import annotations

from codegen.onnx.registry import EMITTERS as emitters
from msc.ops import registry as ops
from msc.ops.decompose import registry as decompositions

OPSETS = (9, 11, 13, 17, 18, 20, 21, 23, 26)


def coverage_markdown(opsets: tuple[int, ...] | None = None) -> str:
    opsets = tuple(opsets or OPSETS)
    names = ops.names()
    lines = [
        "## ONNX codegen (`codegen.onnx`)",
        "",
        "Per canonical op and target opset: `E` = an emitter writes ONNX ops directly, "
        "`D` = lowered through its decomposition (`msc.ops.decompose`) into ops that are emitted, "
        "`E/D` = emitted, falling back to the decomposition for cases the emitter cannot "
        "express (an input rank, a dtype, an attribute value), `-` = not available. "
        "Columns are opsets; `since` lists the opsets where the emitter changes.",
        "",
        "| op | since | " + " | ".join(str(o) for o in opsets) + " |",
        "|---|---|" + "---|" * len(opsets),
    ]
    counts = dict.fromkeys(opsets, 0)
    for op in names:
        has_rule = op in decompositions
        cells = []
        for o in opsets:
            em = emitters.lookup(op, o)
            cell = ("E/D" if has_rule else "E") if em else ("D" if has_rule else "-")
            if cell != "-":
                counts[o] += 1
            cells.append(cell)
        since = ", ".join(str(v) for v in emitters.versions(op)) or "-"
        lines.append(f"| `{op}` | {since} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Ops with an emitter or decomposition per opset: "
        + ", ".join(f"{o}: {counts[o]}/{len(names)}" for o in opsets)
        + ".",
        "",
        "Decompositions (`msc.ops.decompose`, pure msc, shared by every codegen): "
        + ", ".join(f"`{d.op}`" for d in decompositions)
        + ".",
        "",
    ]
    return "\n".join(lines)
