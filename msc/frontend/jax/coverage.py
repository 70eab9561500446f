"""The StableHLO section of docs/ops.md: the ops msc reads, and the common ones it does not,
with why."""

from __future__ import annotations

__all__ = ["coverage_markdown", "supported_ops", "unsupported_ops"]

# StableHLO ops JAX commonly lowers to that msc does not read yet, with why.
NOT_READ = {
    "stablehlo.gather": "the general gather (jnp indexing, take) is not mapped yet",
    "stablehlo.scatter": "the general scatter (.at[].set/add) is not mapped yet",
    "stablehlo.dynamic_slice": "a slice at run-time offsets is not mapped yet",
    "stablehlo.dynamic_update_slice": "an update at run-time offsets is not mapped yet",
    "stablehlo.while": "loops (lax.while_loop, fori_loop, scan) are not mapped onto loop yet",
    "stablehlo.case": "lax.switch / cond are not mapped onto if yet",
    "stablehlo.if": "lax.cond is not mapped onto if yet",
    "stablehlo.sort": "sort with its comparator is not recognized yet",
    "stablehlo.select_and_scatter": "the gradient of max pooling; not an inference op",
    "stablehlo.reduce (2+ operands)": "only JAX's argmax / argmin body is recognized",
    "stablehlo.dynamic_reshape / real_dynamic_slice / dynamic_iota": "symbolic shapes beyond "
    "plain symbols as input dims (b, not 2*b) are not read yet",
    "stablehlo.fft": "not mapped onto dft yet",
    "stablehlo.rng_bit_generator": "random bits are state, not a function of the inputs",
    "stablehlo.custom_call": "refused by its target name; kept opaque with custom_ops keep "
    "(shape_assertion checks are dropped)",
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
