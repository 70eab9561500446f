"""The Keras-read section of docs/ops.md: which Keras layers (and keras.ops calls) msc reads."""

from __future__ import annotations

__all__ = ["coverage_markdown"]


def coverage_markdown() -> str:
    from msc.frontend.keras.registry import CONVERTERS

    layers = sorted(c for c in CONVERTERS if not c.startswith("ops."))
    calls = sorted(c for c in CONVERTERS if c.startswith("ops."))
    fmt = lambda names: ", ".join(f"`{n}`" for n in names) or "none"  # noqa: E731
    return "\n".join(
        [
            "## Keras (read)",
            "",
            f"`msc.from_keras` reads {len(layers)} Keras layer classes "
            "(`msc/frontend/keras/<family>.py`) and "
            f"{len(calls)} `keras.ops` calls recorded in functional models. Any other layer is "
            "reported with every other one.",
            "",
            "Layers: " + fmt(layers) + ".",
            "",
            "keras.ops calls: " + fmt(calls) + ".",
            "",
        ]
    )
