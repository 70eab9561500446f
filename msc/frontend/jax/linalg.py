"""StableHLO linear algebra that JAX lowers to LAPACK custom calls on CPU (``jnp.linalg.svd``,
and what calls it: ``jnp.polyfit``, ``lstsq``, ``pinv``), onto msc's linalg ops.

# NOTE: a LAPACK call's results are its outputs in LAPACK's order, the logical (row-major)
# tensors StableHLO states whatever the operand layouts say; ``info`` (0 on success) is a
# zero: the canonical op raises or gives NaN where LAPACK would report a failure.
"""

from __future__ import annotations

import numpy as np

from msc.errors import Unsupported
from msc.frontend.jax.importer import Ctx
from msc.frontend.jax.reader import ShloOp
from msc.frontend.jax.registry import converter

# gesdd's job (mhlo.backend_config's mode): 'S' reduced U / Vt, 'A' full ones
_GESDD_FULL = {ord("S"): False, ord("A"): True}


def _gesdd(ctx: Ctx, sop: ShloOp, x):
    """LAPACK's divide-and-conquer SVD: (the overwritten input, S, U, Vt, info)."""
    from jax._src.lib.mlir import ir

    config = sop.raw("mhlo.backend_config") if sop.has("mhlo.backend_config") else None
    mode = int(ir.IntegerAttr(config["mode"]).value) if config is not None else None
    if mode not in _GESDD_FULL:
        raise Unsupported(f"a gesdd SVD of job {chr(mode) if mode else '?'} (no U / Vt)")
    u, s, vt = ctx.multi("svd", x, full_matrices=_GESDD_FULL[mode])
    info = ctx.out_type(4)
    zeros = np.zeros(info.shape, info.dtype.to_numpy())
    # LAPACK leaves scratch in its input; JAX reads nothing from it
    return ctx.op("identity", x), s, u, vt, ctx.const(zeros, info.dtype)


for _t in ("s", "d"):
    converter(f"custom_call:lapack_{_t}gesdd_ffi")(_gesdd)
