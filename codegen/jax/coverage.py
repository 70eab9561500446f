"""The JAX codegen section of docs/ops.md: canonical ops with an emitter, lowered through a
decomposition, or not written."""

from __future__ import annotations

__all__ = ["coverage_markdown"]


def coverage_markdown() -> str:
    from codegen.jax.registry import EMITTERS
    from msc.ops import registry
    from msc.ops.decompose import registry as rules

    names = sorted(s.name for s in registry)
    direct = [n for n in names if n in EMITTERS]
    lowered = [n for n in names if n not in EMITTERS and n in rules]
    missing = [n for n in names if n not in EMITTERS and n not in rules]
    lines = [
        "## JAX (write)",
        "",
        f"`codegen.jax` writes {len(direct)} of {len(names)} canonical ops directly "
        f"(emitters in `codegen/jax/<family>.py`), {len(lowered)} more through their "
        f"decompositions; {len(missing)} are not written yet.",
        "",
        "Not written: " + ", ".join(f"`{n}`" for n in missing) + ".",
        "",
    ]
    return "\n".join(lines)
