"""Converters for torch's higher-order control ops: with_effects (effect ordering).

# NOTE: ``with_effects(token, op, *args)`` orders side effects with tokens, which carry no
# data in a dataflow graph: the wrapped op is converted as it is, and a pure check
# (``_linalg_check_errors``, asserts) translates to nothing.
"""

from __future__ import annotations

from typing import Any

import torch

from msc.frontend.torch.registry import Ctx, Unsupported, converter

# Effectful ops that only check their inputs (raise on bad data); they produce no value.
_CHECKS = {
    "aten._linalg_check_errors.default",
    "aten._assert_async.msg",
    "aten._assert_scalar.default",
    "aten._print.default",
}


@converter("with_effects")
def with_effects(ctx: Ctx, token: Any, op: Any, *args: Any, **kwargs: Any) -> tuple:
    if not isinstance(op, torch._ops.OpOverload):
        raise Unsupported(f"with_effects around {op!r}")
    key = str(op)
    if key in _CHECKS:
        return (None, None)
    out = ctx.call(key, *args, **kwargs)
    return (None, *out) if isinstance(out, tuple | list) else (None, out)
