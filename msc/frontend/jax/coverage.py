"""The StableHLO section of docs/ops.md: the ops msc reads, and the common ones it does not,
with why."""

from __future__ import annotations

__all__ = ["coverage_markdown", "supported_ops", "unsupported_ops"]

# StableHLO ops JAX commonly lowers to that msc does not read yet, with why.
NOT_READ = {
    "stablehlo.gather (windows)": "a gather of windows wider than one element along an indexed "
    "dim (a vmapped dynamic_slice), or batched other than take_along_axis: msc's gather / index "
    "take one element per index",
    "stablehlo.scatter (windows, mul / min / max)": "only x.at[idx].set / .add of whole "
    "slices (onto index_put) are read (updates out of range dropped, as StableHLO drops them)",
    "stablehlo.sort (several keys)": "only a comparator of one key (< or >) is recognized",
    "stablehlo.select_and_scatter": "the gradient of max pooling; not an inference op",
    "stablehlo.reduce (2+ operands)": "only JAX's argmax / argmin body is recognized",
    "stablehlo.dynamic_reshape / real_dynamic_slice / dynamic_iota": "symbolic shapes beyond "
    "plain symbols as input dims (b, not 2*b) are not read yet",
    "custom_call @stablehlo.dynamic_reduce_window": "read only as a running sum / product "
    "(jnp.cumsum at a symbolic length), not as a pool",
    "stablehlo.fft": "not mapped onto dft yet",
    "stablehlo.rng_bit_generator": "random bits are state, not a function of the inputs",
    "stablehlo.custom_call": "refused by its target name; kept opaque with custom_ops keep "
    "(shape_assertion checks are dropped; stablehlo.dynamic_reduce_window is read)",
}


def supported_ops() -> list[str]:
    from msc.frontend.jax.registry import CONVERTERS

    return list(CONVERTERS)


def unsupported_ops() -> dict[str, str]:
    return dict(NOT_READ)


def coverage_markdown() -> str:
    ok = supported_ops()
    lines = [
        "## StableHLO / JAX (read)",
        "",
        f"`msc.from_stablehlo` / `msc.from_jax` read {len(ok)} StableHLO / CHLO ops (and "
        "`func.call` and `stablehlo.composite`, inlined); converters in "
        "`msc/frontend/jax/<family>.py`. The op table in `tests/frontend/test_jax.py` runs "
        "jax.numpy / jax.nn / jax.lax samples through generated PyTorch and ONNX.",
        "",
        "Read: " + ", ".join(f"`{op}`" for op in ok) + ".",
        "",
        "| op | why it is not read |",
        "|---|---|",
    ]
    lines += [f"| `{op}` | {why} |" for op, why in NOT_READ.items()]
    return "\n".join(lines) + "\n"
