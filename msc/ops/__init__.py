"""The canonical op vocabulary: one schema per op, grouped by family.

``registry`` holds every op msc knows; docs/ops.md is generated from it
(``python -m msc.ops.doc``).
"""

from msc.ops.schema import REQUIRED, Attr, InputSpec, OpError, OpRegistry, OpSchema

registry = OpRegistry()

# Importing a family registers its ops.
from msc.ops import (  # noqa: E402,F401
    control,
    elementwise,
    nn,
    recurrent,
    reduce,
    shape,
    signal,
    tensor,
    transformer,
    vision,
)

__all__ = ["registry", "Attr", "InputSpec", "OpError", "OpRegistry", "OpSchema", "REQUIRED"]
