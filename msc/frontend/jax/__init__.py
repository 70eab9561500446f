"""The JAX / StableHLO frontend: ``from_stablehlo(text | bytes | Exported)`` and
``from_jax(fn, *example_args, params=None)`` -> msc Graph.

The module is parsed by the MLIR bindings jaxlib bundles (nothing in it is run); one converter
per StableHLO / CHLO op (``@converter("stablehlo.add")``), grouped by op family in this package.

# NOTE: invariants
# - ``func.call`` is inlined; input names come from the signature (jax.export's argument
#   locations), weight names from the pytree paths of ``params`` (``dense1.kernel``), output
#   names from dict keys (``logits``); the outputs' pytree structure is ``output_tree``.
# - Every unsupported op is reported at once (UnsupportedOpsError); a ``custom_call`` is refused
#   by its target name unless ``custom_ops="keep"`` keeps it as ``stablehlo::<target>``.
# - JAX's layouts stay what the source wrote at the interface (NHWC in, NHWC out); convolutions
#   and pools are channels first inside, with transposes at their boundary.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from msc.frontend.jax.coverage import coverage_markdown
from msc.frontend.jax.importer import Importer
from msc.frontend.jax.passes import drop_broadcasts, drop_dead, jax_spellings
from msc.frontend.jax.reader import JAX_VERSION, parse_module
from msc.frontend.jax.registry import CONVERTERS, REASONS, ConverterRegistry, converter
from msc.ir import Graph, SymDim
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
    symbols: Mapping[str, SymDim] | None = None,
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
            array) or (name, array, role).
        input_names: names for ``main``'s arguments (default: their locations, else argN).
        fuse: recover high-level ops JAX spells out (softmax, GELU, layer norm, linear)
            with msc.ops.fusions, where the fused op computes the same function.
        symbols: jax.export's symbolic dims by name as msc symbols (with their ranges);
            default: each as a symbol of that name without a range.

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
        imp = Importer(mod, registry, custom_ops, name, weights, input_names, dims, symbols)
        graph = imp.run()
    graph = drop_broadcasts(graph)
    if fuse:
        from msc.ops.fusions import fuse as fuse_patterns

        graph = fuse_patterns(jax_spellings(graph))
    drop_dead(graph)  # constants only the fused formulas read, converts branches do not
    return checked(graph)


def from_jax(
    fn: Any,
    *example_args: Any,
    params: Any = None,
    custom_ops: str = "error",
    name: str = "",
    dynamic: Mapping[str, Mapping[int, str | SymDim]] | None = None,
) -> Graph:
    """Translate a JAX function (``jax.jit(fn)`` exported by ``jax.export``) into a Graph.

    Args:
        fn: the function; called as ``fn(params, *example_args)`` when ``params`` is given.
        example_args: arrays (or ``jax.ShapeDtypeStruct``) giving the inputs' shapes and dtypes.
        params: a pytree of weights; its leaves become weights named by their pytree paths.
        custom_ops: as for ``from_stablehlo``.
        name: the graph's name (default: the function's name).
        dynamic: input name -> {axis: symbol}: those dims are exported symbolic (jax.export's
            shape polymorphism) and stay symbols in the graph; a symbol is a name or an
            ``msc.SymDim`` with its range. One name on several inputs is one symbol.
    """
    import jax

    sig = _signature(fn)
    weights: list[tuple[str, np.ndarray, str]] = []
    if params is not None:
        leaves = jax.tree_util.tree_flatten_with_path(params)[0]
        for i, (path, leaf) in enumerate(leaves):
            weights.append((_path_name(path) or f"param_{i}", np.asarray(leaf), ""))
        sig = sig[1:]
    return export_and_read(
        fn,
        params,
        example_args,
        weights,
        sig,
        dynamic=dynamic,
        custom_ops=custom_ops,
        name=name or getattr(fn, "__name__", "") or "main",
    )


def export_and_read(
    fn: Any,
    state: Any,
    example_args: tuple,
    weights: list[tuple[str, np.ndarray, str]],
    arg_names: list[str],
    *,
    dynamic: Mapping[str, Mapping[int, str | SymDim]] | None,
    custom_ops: str,
    name: str,
) -> Graph:
    """Export ``fn(state, *example_args)`` (``fn(*example_args)`` when ``state`` is None) with
    jax.export and read it: ``state``'s leaves are the weights (name, array, role) in their
    flattening order, the other arguments' leaves are inputs named after ``arg_names``."""
    import jax
    from jax import export

    names: list[str] = []
    for i, a in enumerate(example_args):
        n = len(jax.tree_util.tree_leaves(a))
        base = arg_names[i] if i < len(arg_names) else f"arg{i}"
        names += [base] if n == 1 else [f"{base}_{k}" for k in range(n)]
    specs, symbols = _symbolic_args(example_args, names, dynamic or {})
    args = specs if state is None else (state, *specs)
    # keep_unused: an argument the function does not read stays one of main's, so weights
    # and inputs keep their positions
    exported = export.export(jax.jit(fn, keep_unused=True))(*args)
    graph = from_stablehlo(
        exported,
        custom_ops=custom_ops,
        name=name,
        weights={i: w for i, w in enumerate(weights)},
        input_names=[""] * len(weights) + names,
        symbols=symbols,
    )
    graph.output_tree = output_tree(exported.out_tree)
    return graph


def output_tree(out_tree: Any) -> Any:
    """The msc output_tree spec (msc.ir.structure) of a JAX output PyTreeDef: tuples, lists,
    dicts and None around the flat outputs; None where the outputs are one bare array or a
    flat tuple (the default), or where a pytree node has no spec (a custom class)."""
    import jax

    n = out_tree.num_leaves
    skeleton = jax.tree_util.tree_unflatten(out_tree, list(range(n)))

    def spec(node: Any) -> Any:
        if isinstance(node, int) and not isinstance(node, bool):
            return {"leaf": node}
        if node is None:
            return {"const": None}
        if isinstance(node, tuple):  # a namedtuple too (its field names are not kept)
            return {"tuple": [spec(v) for v in node]}
        if isinstance(node, list):
            return {"list": [spec(v) for v in node]}
        if isinstance(node, Mapping) and all(isinstance(k, str | int) for k in node):
            return {"dict": [[k, spec(v)] for k, v in node.items()]}
        raise TypeError(type(node).__name__)

    try:
        tree = spec(skeleton)
    except TypeError:
        return None
    flat = {"tuple": [{"leaf": i} for i in range(n)]}
    if (n == 1 and tree == {"leaf": 0}) or (n > 1 and tree == flat):
        return None
    return tree


def _symbolic_args(
    example_args: tuple, names: list[str], dynamic: Mapping[str, Mapping[int, str | SymDim]]
) -> tuple[tuple, dict[str, SymDim]]:
    """``example_args`` with the dims ``dynamic`` names as jax.export symbolic dims (one scope,
    msc's ranges as its constraints), and the symbols by name."""
    import jax
    from jax import export

    if not dynamic:
        return tuple(example_args), {}
    unknown = sorted(set(dynamic) - set(names))
    if unknown:
        raise ValueError(f"dynamic names no input {unknown}; the inputs are {names}")
    symbols: dict[str, SymDim] = {}
    for axes in dynamic.values():
        for s in axes.values():
            sym = s if isinstance(s, SymDim) else SymDim(str(s))
            if not sym.name.isidentifier():
                raise ValueError(f"dynamic: a symbol is an identifier, not {sym.name!r}")
            if symbols.setdefault(sym.name, sym) != sym:
                raise ValueError(f"dynamic: symbol {sym.name!r} given two ranges")
    constraints = [
        c
        for s in symbols.values()
        for c in (
            f"{s.name} >= {s.min}" if s.min is not None and s.min > 1 else None,
            f"{s.name} <= {s.max}" if s.max is not None else None,
        )
        if c is not None
    ]
    scope = export.SymbolicScope(constraints)
    leaves, tree = jax.tree_util.tree_flatten(tuple(example_args))
    out = []
    for leaf, name in zip(leaves, names):
        shape = list(np.shape(leaf))
        for axis, s in dynamic.get(name, {}).items():
            if not -len(shape) <= axis < len(shape):
                raise ValueError(f"dynamic: input {name!r} has shape {shape}, no axis {axis}")
            shape[axis] = s.name if isinstance(s, SymDim) else str(s)
        spelled = ", ".join(str(d) for d in shape)
        dims = export.symbolic_shape(spelled, scope=scope) if shape else ()
        dtype = leaf.dtype if hasattr(leaf, "dtype") else np.asarray(leaf).dtype
        out.append(jax.ShapeDtypeStruct(dims, dtype))
    return tuple(jax.tree_util.tree_unflatten(tree, out)), symbols


def _signature(fn: Any) -> list[str]:
    import inspect

    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def _path_name(path: Any, sep: str = ".") -> str:
    parts = []
    for k in path:
        for attr in ("key", "name", "idx"):
            if hasattr(k, attr):
                parts.append(str(getattr(k, attr)))
                break
    return sep.join(parts)


def supported_ops() -> list[str]:
    return list(CONVERTERS)


# One module per op family, named as in msc.ops; importing one registers its converters.
import_families(__name__)
