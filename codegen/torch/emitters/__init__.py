"""Per-op emitters of the PyTorch codegen, one module per op family.

Importing this package registers every emitter and module rule in
``codegen.torch.registry.EMITTERS`` / ``MODULE_RULES``.
"""

from codegen.torch.emitters import conv, elementwise, extra, nn, reduce, shape  # noqa: F401
from codegen.torch.emitters import ext  # noqa: F401, E402 - after extra: fills its gaps

FAMILIES = ("elementwise", "nn", "conv", "reduce", "shape", "extra")
