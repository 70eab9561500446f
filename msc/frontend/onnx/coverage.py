"""What the ONNX frontend covers, generated from the converter registry.

# NOTE: ``supported_ops`` and ``unsupported_ops`` are computed from the registry and from
# ``onnx.defs`` (every default-domain op the installed onnx knows), so they cannot drift from
# the code. ``REASONS`` says why an op has no converter; ops without a reason are "not yet".
"""

from __future__ import annotations

import onnx

from msc.frontend.onnx.registry import CONVERTERS, ConverterRegistry

__all__ = ["supported_ops", "unsupported_ops", "coverage_markdown", "REASONS"]

_SEQ = "sequence/optional op: no canonical op; kept as a custom node with custom_ops='keep'"
_STR = "text op on str tensors: no canonical op (custom_ops='keep' keeps it for ONNX)"
_TRAIN = "training-only op"
_RAND = "random output: not reproducible across frameworks"
_ML = "ai.onnx.ml domain"
_DATA = "output shape depends on the data and the op has no canonical counterpart yet"

REASONS: dict[str, str] = {
    **{
        op: _SEQ
        for op in (
            "SequenceAt SequenceConstruct SequenceEmpty SequenceErase SequenceInsert "
            "SequenceLength SequenceMap SplitToSequence ConcatFromSequence Optional "
            "OptionalGetElement OptionalHasElement"
        ).split()
    },
    **{
        op: _STR
        for op in "StringConcat StringNormalizer StringSplit RegexFullMatch TfIdfVectorizer".split()
    },
    **{op: _TRAIN for op in "Adagrad Adam Momentum Gradient".split()},
    **{
        op: _RAND
        for op in "Bernoulli Multinomial RandomNormal RandomNormalLike RandomUniform "
        "RandomUniformLike".split()
    },
    **{op: _DATA for op in "Unique NonMaxSuppression".split()},
    "ImageDecoder": "decodes image files (bytes in, pixels out)",
    "DFT": "complex-valued spectral ops have no canonical op yet",
    "STFT": "complex-valued spectral ops have no canonical op yet",
    "BitCast": "reinterpreting bits has no canonical op yet",
}


def supported_ops(registry: ConverterRegistry = CONVERTERS) -> list[tuple[str, list[int]]]:
    """``(op, since-versions)`` for every default-domain op with a converter, sorted by op."""
    return [(op, versions) for domain, op, versions in registry.ops() if domain == ""]


def _onnx_ops() -> dict[str, list[int]]:
    out: dict[str, set[int]] = {}
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain in ("", "ai.onnx") and not s.deprecated:
            out.setdefault(s.name, set()).add(s.since_version)
    return {k: sorted(v) for k, v in out.items()}


def unsupported_ops(registry: ConverterRegistry = CONVERTERS) -> dict[str, str]:
    """Default-domain ops of the installed onnx with no converter -> the reason."""
    have = {op for op, _ in supported_ops(registry)}
    return {
        op: REASONS.get(op, "not implemented yet") for op in sorted(_onnx_ops()) if op not in have
    }


def coverage_markdown(registry: ConverterRegistry = CONVERTERS) -> str:
    """The ONNX frontend section of docs/ops.md."""
    newest = onnx.defs.onnx_opset_version()
    versions = _onnx_ops()
    sup = supported_ops(registry)
    missing = unsupported_ops(registry)
    lines = [
        "## ONNX frontend (`msc.from_onnx`)",
        "",
        f"Reads ai.onnx opsets 7 to {newest}. {len(sup)} of {len(sup) + len(missing)} "
        "default-domain ops have converters; a converter with `since` N serves every opset "
        ">= N up to the next converter of that op. Ops of other domains with converters are "
        "listed after the table; any other op of another domain (ai.onnx.ml, the rest of "
        "com.microsoft) is reported as unsupported, or kept as a custom node on request.",
        "",
        "| ONNX op | converters since | op versions in onnx |",
        "|---|---|---|",
    ]
    for op, since in sup:
        lines.append(
            f"| `{op}` | {', '.join(map(str, since))} | "
            f"{', '.join(map(str, versions.get(op, [])))} |"
        )
    others = [(d, op, v) for d, op, v in registry.ops() if d != ""]
    if others:
        lines += [
            "",
            "### Other domains",
            "",
            "| domain | op | converters since |",
            "|---|---|---|",
        ]
        lines += [f"| {d} | `{op}` | {', '.join(map(str, v))} |" for d, op, v in others]
    lines += ["", "### Not covered", "", "| ONNX op | why |", "|---|---|"]
    for op, why in missing.items():
        lines.append(f"| `{op}` | {why} |")
    lines.append("")
    return "\n".join(lines)
