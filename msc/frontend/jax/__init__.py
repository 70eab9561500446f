"""The JAX / StableHLO frontend: ``from_stablehlo(text | bytes | Exported)`` and
``from_jax(fn, *example_args, params=None)`` -> msc Graph.

The module is parsed by the MLIR bindings jaxlib bundles (nothing in it is run); one converter
per StableHLO / CHLO op (``@converter("stablehlo.add")``), grouped by op family in this package.

# NOTE: invariants
# - ``func.call`` is inlined; input names come from the signature (jax.export's argument
#   locations), weight names from the pytree paths of ``params`` (``dense1.kernel``).
# - Every unsupported op is reported at once (UnsupportedOpsError); a ``custom_call`` is refused
#   by its target name unless ``custom_ops="keep"`` keeps it as ``stablehlo::<target>``.
# - JAX's layouts stay what the source wrote at the interface (NHWC in, NHWC out); convolutions
#   and pools are channels first inside, with transposes at their boundary.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from msc.frontend.jax.coverage import coverage_markdown
from msc.frontend.jax.importer import Importer
from msc.frontend.jax.passes import drop_broadcasts, jax_spellings
from msc.frontend.jax.reader import JAX_VERSION, parse_module
from msc.frontend.jax.registry import CONVERTERS, REASONS, ConverterRegistry, converter
from msc.ir import Graph
from msc.ir.graph import dead_nodes
from msc.ops import import_families

__all__ = [
    "coverage_markdown",
    "from_stablehlo",
    "from_jax",
    "converter",
    "CONVERTERS",
    "ConverterRegistry",
    "REASONS",
    "JAX_VERSION",
    "supported_ops",
]


def from_stablehlo(
    module: Any,
    *,
    registry: ConverterRegistry = CONVERTERS,
    custom_ops: str = "error",
    name: str = "",
    weights: dict[int, tuple[str, np.ndarray]] | None = None,
    input_names: list[str] | None = None,
    fuse: bool = True,
) -> Graph:
    """Translate a StableHLO module into an msc Graph.

    Args:
        module: MLIR text, MLIR bytecode, serialized ``jax.export`` bytes
            (``Exported.serialize()``), or a ``jax.export.Exported``.
        registry: the converter registry (tests may pass their own).
        custom_ops: "error" reports every op msc cannot translate at once; "keep" keeps each
            ``custom_call`` as a custom node ``stablehlo::<target>``.
        name: the graph's name (default "main").
        weights: arguments of ``main`` (by position) that are weights: position -> (name,
            array).
        input_names: names for ``main``'s arguments (default: their locations, else argN).
        fuse: recover high-level ops JAX spells out (softmax, GELU, layer norm, linear)
            with msc.ops.fusions, where the fused op computes the same function.

    Returns:
        The graph.

    Raises:
        UnsupportedOpsError: every op msc cannot translate.
        BadModelError: the input is not a well-formed StableHLO module.
    """
    if custom_ops not in ("error", "keep"):
        raise ValueError(f"custom_ops must be 'error' or 'keep', got {custom_ops!r}")
    mod, ctx, dims = parse_module(module)
    from msc.text.check import checked

    with ctx:
        imp = Importer(mod, registry, custom_ops, name, weights, input_names, dims)
        graph = imp.run()
    graph = drop_broadcasts(graph)
    if fuse:
        from msc.ops.fusions import fuse as fuse_patterns

        graph = fuse_patterns(jax_spellings(graph))
        graph.remove_nodes(dead_nodes(graph))  # constants only the fused formulas read
    return checked(graph)


def from_jax(
    fn: Any,
    *example_args: Any,
    params: Any = None,
    custom_ops: str = "error",
    name: str = "",
) -> Graph:
    """Translate a JAX function (``jax.jit(fn)`` exported by ``jax.export``) into a Graph.

    Args:
        fn: the function; called as ``fn(params, *example_args)`` when ``params`` is given.
        example_args: arrays (or ``jax.ShapeDtypeStruct``) giving the inputs' shapes and dtypes.
        params: a pytree of weights; its leaves become weights named by their pytree paths.
        custom_ops: as for ``from_stablehlo``.
        name: the graph's name (default: the function's name).
    """
    import inspect

    import jax
    from jax import export

    names: list[str] = []
    try:
        sig = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        sig = []
    weights: dict[int, tuple[str, np.ndarray]] = {}
    if params is not None:
        leaves = jax.tree_util.tree_flatten_with_path(params)[0]
        for i, (path, leaf) in enumerate(leaves):
            weights[i] = (_path_name(path) or f"param_{i}", np.asarray(leaf))
        names = [""] * len(leaves)
        sig = sig[1:]
        args = (params, *example_args)
    else:
        args = example_args
    for i, a in enumerate(example_args):
        n = len(jax.tree_util.tree_leaves(a))
        base = sig[i] if i < len(sig) else f"arg{i}"
        names += [base] if n == 1 else [f"{base}_{k}" for k in range(n)]
    # keep_unused: every argument stays an input of main (jit drops unused ones by default,
    # and then the names above would land on the wrong arguments).
    exported = export.export(jax.jit(fn, keep_unused=True))(*args)
    return from_stablehlo(
        exported,
        custom_ops=custom_ops,
        name=name or getattr(fn, "__name__", "") or "main",
        weights=weights,
        input_names=names,
    )


def _path_name(path: Any) -> str:
    parts = []
    for k in path:
        for attr in ("key", "name", "idx"):
            if hasattr(k, attr):
                parts.append(str(getattr(k, attr)))
                break
    return ".".join(parts)


def supported_ops() -> list[str]:
    return list(CONVERTERS)


# One module per op family, named as in msc.ops; importing one registers its converters.
import_families(__name__)
