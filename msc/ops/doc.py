"""Generate docs/ops.md from the registries: ``python -m msc.ops.doc > docs/ops.md``.

The canonical vocabulary comes from ``msc.ops.registry``. Frontends and codegens that define a
``coverage_markdown()`` function add their own section (which source ops they translate, which
canonical ops they emit, and what is missing and why).
"""

from __future__ import annotations

import importlib

from msc.ops import custom, registry

# Modules that may add a coverage section, in the order they appear.
COVERAGE_MODULES = (
    "msc.frontend.torch",
    "msc.frontend.onnx",
    "codegen.torch",
    "codegen.onnx",
    "codegen.relax",
    "msc.frontend.tflite",
    "codegen.tflite",
    "msc.frontend.keras",
    "codegen.keras",
    "msc.frontend.jax",
    "codegen.jax",
)


def canonical_markdown() -> str:
    lines = [
        "## Canonical ops",
        "",
        f"{len(registry)} ops. Inputs marked `?` are optional, `*` variadic. "
        "Attributes show kind and default.",
        "",
    ]
    by_family: dict[str, list] = {}
    for s in registry:
        by_family.setdefault(s.family, []).append(s)
    for fam in sorted(by_family):
        lines += [
            f"### {fam}",
            "",
            f"Schemas in `msc/ops/{fam}.py`; converters in the frontends' `{fam}.py`, "
            f"emitters in `codegen/torch/emitters/{fam}.py` and `codegen/onnx/{fam}.py`.",
            "",
            "| op | category | inputs | attributes | outputs | meaning |",
            "|---|---|---|---|---|---|",
        ]
        for s in sorted(by_family[fam], key=lambda s: (s.category, s.name)):
            ins = ", ".join(f"`{i}`" for i in s.inputs) or "-"
            ats = "<br>".join(f"`{k}`: {a.describe()}" for k, a in s.attrs.items()) or "-"
            outs = str(s.outputs) if not callable(s.outputs) else "by attrs"
            doc = s.doc.replace("|", "\\|")
            row = f"| `{s.name}` | {s.category} | {ins} | {ats.replace('|', '/')} | {outs} |"
            lines.append(f"{row} {doc} |")
        lines.append("")
    return "\n".join(lines)


def markdown() -> str:
    parts = [
        "# Op coverage",
        "",
        "Generated from the registries by `python -m msc.ops.doc` (`make docs`); a test keeps "
        "this file in sync. Do not edit by hand.",
        "",
        "End-to-end coverage of PyTorch's own operator table (each op exported, translated and "
        "run through both codegens), with the reason for every op that does not convert: "
        "[torch_op_coverage.md](torch_op_coverage.md) (`python bench/torch_op_coverage.py "
        "--markdown docs/torch_op_coverage.md`).",
        "",
        canonical_markdown(),
        custom.markdown(),
    ]
    for name in COVERAGE_MODULES:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        fn = getattr(mod, "coverage_markdown", None)
        if fn is not None:
            parts.append(fn())
    return "\n".join(parts).rstrip("\n") + "\n"


def main() -> None:
    print(markdown(), end="")


if __name__ == "__main__":
    main()
