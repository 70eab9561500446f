"""Per-op emitters of the PyTorch codegen, one module per op family.

Importing this package registers every emitter and module rule in
``codegen.torch.registry.EMITTERS`` / ``MODULE_RULES``.
"""

from codegen.torch.emitters import (  # noqa: F401 - importing a family registers it
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

FAMILIES = (
    "control",
    "elementwise",
    "nn",
    "recurrent",
    "reduce",
    "shape",
    "signal",
    "tensor",
    "transformer",
    "vision",
)
