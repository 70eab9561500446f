"""The canonical op vocabulary: one schema per op, grouped by family.

``registry`` holds every op msc knows; docs/ops.md is generated from it
(``python -m msc.ops.doc``).
"""

from msc.ops.schema import REQUIRED, Attr, InputSpec, OpError, OpRegistry, OpSchema

registry = OpRegistry()

# Importing a family registers its ops.
from msc.ops import control, elementwise, nn, reduce, shape  # noqa: E402,F401
from msc.ops import signal, tensor, transformer, vision  # noqa: E402,F401

__all__ = ["registry", "Attr", "InputSpec", "OpError", "OpRegistry", "OpSchema", "REQUIRED"]
