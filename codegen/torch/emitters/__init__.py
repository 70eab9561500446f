"""Per-op emitters of the PyTorch codegen, one module per op family.

Importing this package registers every emitter and module rule in
``codegen.torch.registry.EMITTERS`` / ``MODULE_RULES``.
"""

from msc.ops import import_families

FAMILIES = tuple(import_families(__name__))
