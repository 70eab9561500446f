"""JAX emitters of tensor-creating ops: range (``jnp.arange`` to a size known in Python)."""

from __future__ import annotations

from codegen.jax.core import JaxCodegen, dtype_expr
from codegen.jax.registry import emitter
from msc.errors import Unsupported


@emitter("range")
def range_(e: JaxCodegen, node, start, limit, delta):
    # Under jax.jit the bounds must be Python values: constants, or sizes read from shapes.
    bounds = [e.size(v) for v in node.inputs]
    if any(b is None or isinstance(b, list) for b in bounds):
        raise Unsupported("a range whose bounds are computed from array values")
    s, t, d = bounds
    dt = dtype_expr(node.outputs[0].type.dtype)
    args = [t] if (s, d) == ("0", "1") else [s, t] if d == "1" else [s, t, d]
    return f"jnp.arange({', '.join(args)}, dtype={dt})"  # type: ignore[arg-type]
