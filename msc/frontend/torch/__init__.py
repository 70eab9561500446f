"""The PyTorch frontend: nn.Module / torch.export ExportedProgram / torch.fx -> msc Graph.

    g = from_torch(module, example_args, dynamic_shapes=...)
    g = from_exported_program(ep)          # default export IR or after run_decompositions()
    g = from_fx(torch.fx.symbolic_trace(module), example_args)

One op-conversion table (``registry.CONVERTERS``, keyed by ATen overload) serves all three;
``supported_ops()`` lists it and ``coverage_markdown()`` documents it in docs/ops.md.
"""

from __future__ import annotations

from msc.frontend.torch.coverage import core_aten_ops, coverage_markdown, supported_ops
from msc.frontend.torch.export import from_exported_program, from_torch
from msc.frontend.torch.fx import from_fx
from msc.ops import import_families

__all__ = [
    "from_torch",
    "from_exported_program",
    "from_fx",
    "supported_ops",
    "core_aten_ops",
    "coverage_markdown",
]


# One module per op family, named as in msc.ops; importing one registers its converters.
import_families(__name__)
