"""Per-op emitters of the PyTorch codegen, one module per op family.

Importing this package registers every emitter and module rule in
``codegen.torch.registry.EMITTERS`` / ``MODULE_RULES``.
"""

from codegen.torch.emitters import (  # noqa: F401 - importing a family registers it
    control,
    conv,
    elementwise,
    ext,
    extra,
    nn,
    recurrent,
    reduce,
    shape,
)

FAMILIES = ("elementwise", "nn", "conv", "reduce", "shape", "extra")
