"""What the PyTorch frontend translates, and what it does not and why (for docs/ops.md).

# NOTE: ``supported_ops()`` and the coverage table are generated from the converter registry;
# ``UNSUPPORTED`` is the one place an ATen op is declared untranslatable, each with its reason.
"""

from __future__ import annotations

import torch

from msc.frontend.torch.registry import CONVERTERS

__all__ = ["UNSUPPORTED", "supported_ops", "core_aten_ops", "coverage_markdown"]

_BACKWARD = "a training-only backward op; inference graphs never contain it"
_RANDOM = "random sampling: msc graphs are deterministic and have no random-number op"

UNSUPPORTED: dict[str, str] = {
    "aten._adaptive_avg_pool2d_backward.default": _BACKWARD,
    "aten.avg_pool2d_backward.default": _BACKWARD,
    "aten.convolution_backward.default": _BACKWARD,
    "aten.embedding_dense_backward.default": _BACKWARD,
    "aten.max_pool2d_with_indices_backward.default": _BACKWARD,
    "aten.native_group_norm_backward.default": _BACKWARD,
    "aten.native_layer_norm_backward.default": _BACKWARD,
    "aten.rand.default": _RANDOM,
    "aten.randn.default": _RANDOM,
    "aten.randperm.default": _RANDOM,
    "aten.sym_stride.int": "strides are memory layout, which msc graphs do not model",
    "aten.sym_storage_offset.default": "storage offsets are memory layout, not modelled",
    "aten.sym_is_contiguous.default": "contiguity is memory layout, which msc graphs do not model",
    "aten.resize_.default": "in-place storage resizing (uninitialized memory): not a dataflow op",
}


def supported_ops() -> list[str]:
    """Every source-op key the frontend translates (ATen overloads and Python operators)."""
    return CONVERTERS.keys()


def core_aten_ops() -> list[str]:
    """The overloads of torch's Core ATen set (ops tagged ``torch.Tag.core``)."""
    out = []
    # Every aten op with a schema (``dir(torch.ops.aten)`` lists only the ones loaded so far).
    names = {s.name[6:] for s in torch._C._jit_get_all_schemas() if s.name.startswith("aten::")}
    for name in sorted(names | set(dir(torch.ops.aten))):
        try:
            packet = getattr(torch.ops.aten, name)
        except (AttributeError, RuntimeError):
            continue
        if not hasattr(packet, "overloads"):
            continue
        for ov in packet.overloads():
            op = getattr(packet, ov)
            if torch.Tag.core in op.tags:
                out.append(str(op))
    return sorted(out)


def coverage_markdown() -> str:
    """The PyTorch section of docs/ops.md."""
    core = core_aten_ops()
    covered = [k for k in core if k in CONVERTERS]
    missing = [k for k in core if k not in CONVERTERS]
    lines = [
        "## PyTorch frontend (torch.export / torch.fx)",
        "",
        f"Core ATen (`torch.Tag.core`, torch {torch.__version__.split('+')[0]}): "
        f"{len(covered)} of {len(core)} overloads translate; {len(supported_ops())} source "
        "ops in all (in-place `op_` and `.out` variants reuse the functional converter).",
        "",
        "### Not translated",
        "",
        "| ATen op | reason |",
        "|---|---|",
    ]
    for k in sorted(set(missing) | set(UNSUPPORTED)):
        lines.append(f"| `{k}` | {UNSUPPORTED.get(k, 'no converter yet')} |")
    lines += ["", "### Translated", "", ", ".join(f"`{k}`" for k in supported_ops()), ""]
    return "\n".join(lines)
