"""The canonical op vocabulary: one schema per op, grouped by family.

``registry`` holds every op msc knows; docs/ops.md is generated from it
(``python -m msc.ops.doc``).
"""

from msc.ir.graph import set_default_opset
from msc.ops.schema import REQUIRED, Attr, InputSpec, OpError, OpRegistry, OpSchema

# The version of the canonical op set: bump it when a schema changes so that graphs written
# before would mean something else (an attribute's meaning, an input's order); adding ops does
# not need it. Text files record it; a file from a newer op set is refused by name.
VERSION = 1

registry = OpRegistry()
set_default_opset(registry)  # the canonical op set: what a Graph is checked against by default

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

__all__ = [
    "VERSION",
    "registry",
    "Attr",
    "InputSpec",
    "OpError",
    "OpRegistry",
    "OpSchema",
    "REQUIRED",
]
