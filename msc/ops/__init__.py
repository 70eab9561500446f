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

# The op families. Each is a module here holding its schemas, and a module of the same name in
# every frontend and codegen holding that family's converters and emitters.
FAMILIES = (
    "control",
    "elementwise",
    "linalg",
    "nn",
    "quant",
    "recurrent",
    "reduce",
    "shape",
    "signal",
    "special",
    "tensor",
    "transformer",
    "vision",
)

# Attributes that state a promise of the source framework's op which ONNX's spelling of the
# op cannot hold: ONNX's TopK always puts the lower index first among equal values (torch.topk
# promises nothing), ONNX's GatherElements/ScatterElements always take negative indices
# (torch.gather refuses them). The ONNX frontend infers them from the model; codegen.onnx
# records their values in each node's metadata_props (``msc.attr.<name>``, a JSON value) and
# the ONNX frontend restores a recorded value that fits the attribute, so a graph from any
# source comes back from ONNX as it went in.
ONNX_SILENT_ATTRS: dict[str, tuple[str, ...]] = {
    "topk": ("stable",),
    "gather_elements": ("negative_indices",),
    "scatter_elements": ("negative_indices",),
}


def import_families(package: str) -> list[str]:
    """Import the family modules ``package`` has (importing one registers its schemas,
    converters or emitters); returns their names, in FAMILIES order."""
    import importlib
    import importlib.util

    found = []
    for fam in FAMILIES:
        if importlib.util.find_spec(f"{package}.{fam}") is not None:
            importlib.import_module(f"{package}.{fam}")
            found.append(fam)
    return found


import_families(__name__)

__all__ = [
    "FAMILIES",
    "import_families",
    "ONNX_SILENT_ATTRS",
    "VERSION",
    "registry",
    "Attr",
    "InputSpec",
    "OpError",
    "OpRegistry",
    "OpSchema",
    "REQUIRED",
]
