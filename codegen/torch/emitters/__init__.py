"""Per-op emitters of the PyTorch codegen, one module per op family.

Importing this package registers every emitter and module rule in
``codegen.torch.registry.EMITTERS`` / ``MODULE_RULES``.
"""

# Order matters: extra declares gaps that ext, control and recurrent then fill.
# isort: off
from codegen.torch.emitters import conv, elementwise, extra, nn, reduce, shape  # noqa: F401
from codegen.torch.emitters import ext  # noqa: F401, E402 - after extra: fills its gaps
from codegen.torch.emitters import control, recurrent  # noqa: F401, E402 - fill gaps too
# isort: on

FAMILIES = ("elementwise", "nn", "conv", "reduce", "shape", "extra")
