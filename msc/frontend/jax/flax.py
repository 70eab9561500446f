"""Flax models into msc: ``from_flax(module, variables, *example_args)`` for a flax.linen
module and its variables, ``from_flax(model, *example_args)`` for a flax.nnx module.

The model is called under ``jax.export`` with its state as the first argument, so the state's
leaves are the program's weight arguments and are read as weights, named by their pytree paths
as Flax spells them (``params/Dense_0/kernel``, nnx ``layers/0/linear/kernel``).

# NOTE: invariants
# - Roles: linen's ``params`` collection and nnx ``Param`` variables are parameters; every
#   other collection or variable type (``batch_stats``, nnx ``BatchStat``) is a buffer.
# - nnx random state (``RngState``: keys and counts) is no weight: it is closed over, so a model
#   reads as what it computes with dropout deterministic. A model that draws random numbers
#   in its forward is refused by the StableHLO reader (the random bits ops), not run.
# - Input names come from the module's ``__call__`` signature (after ``self``).
# - A node's module path is its linen scope under the root (``layer0/attn``, the path its
#   weights have after the collection), from JAX's name stack; nnx records no scopes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from msc.ir import Graph, SymDim

__all__ = ["from_flax"]

SEP = "/"


def from_flax(
    module: Any,
    *args: Any,
    method: str | None = None,
    kwargs: Mapping[str, Any] | None = None,
    dynamic: Mapping[str, Mapping[int, str | SymDim]] | None = None,
    custom_ops: str = "error",
    name: str = "",
) -> Graph:
    """Translate a Flax model (linen or nnx) into a Graph.

    Args:
        module: a ``flax.linen.Module`` (then ``args`` starts with its variables, as
            ``module.init`` returned them) or a ``flax.nnx.Module`` (its state is its own).
        args: for linen the variables, then the example inputs; for nnx the example inputs.
            Arrays (or ``jax.ShapeDtypeStruct``) giving the inputs' shapes and dtypes.
        method: the method to call (default ``__call__``).
        kwargs: keyword arguments for the call that are not inputs (``train=False``).
        dynamic: input name -> {axis: symbol}, as for ``from_jax``.
        custom_ops: as for ``from_stablehlo``.
        name: the graph's name (default: the module's class name).

    Returns:
        The graph: its weights the model's variables by path, its inputs the call's arguments.
    """
    from msc.frontend.jax import _path_name, _signature, export_and_read

    kind = flax_kind(module)
    call_kwargs = dict(kwargs or {})
    meth = method or "__call__"
    if kind == "linen":
        if not args:
            raise TypeError("from_flax(linen_module, variables, *example_args): no variables")
        variables, inputs = args[0], args[1:]
        state, roles = variables, _linen_roles(variables)
        sig = _signature(getattr(module, meth))

        def fn(state: Any, *xs: Any) -> Any:
            return module.apply(state, *xs, method=meth, **call_kwargs)

        leaves = _leaves(state)
    else:
        from flax import nnx

        graphdef, rng_state, state = nnx.split(module, nnx.RngState, ...)
        inputs = args
        sig = _signature(getattr(module, meth))

        def fn(state: Any, *xs: Any) -> Any:
            model = nnx.merge(graphdef, rng_state, state)
            return getattr(model, meth)(*xs, **call_kwargs)

        leaves = _leaves(state, is_leaf=lambda x: isinstance(x, nnx.Variable))
        roles = ["parameter" if isinstance(v, nnx.Param) else "buffer" for _, v in leaves]
    weights = [
        (_path_name(_strip_value(path), SEP) or f"param_{i}", np.asarray(_array(leaf)), role)
        for i, ((path, leaf), role) in enumerate(zip(leaves, roles))
    ]
    graph = export_and_read(
        fn,
        state,
        inputs,
        weights,
        sig,
        dynamic=dynamic,
        custom_ops=custom_ops,
        name=name or type(module).__name__,
    )
    if kind == "linen":  # module paths under the root, as the variables name them
        _strip_root(graph, type(module).__name__)
    return graph


def _strip_root(graph: Graph, root: str) -> None:
    """Each node's module path without the root module's name, which linen's name stack puts
    first (``CNN/BatchNorm_0`` -> ``BatchNorm_0``, as ``params/BatchNorm_0/scale``)."""
    from dataclasses import replace

    for node in graph.nodes:
        mod = node.provenance.module
        if mod == root or mod.startswith(root + "/"):
            node.provenance = replace(node.provenance, module=mod[len(root) + 1 :])
        for sub in node.subgraphs():
            _strip_root(sub, root)


def flax_kind(module: Any) -> str:
    """ "linen" or "nnx" (a TypeError for anything else)."""
    try:
        import flax.linen as linen
        from flax import nnx
    except ImportError as e:
        raise TypeError(f"from_flax needs flax: {e}") from None
    if isinstance(module, linen.Module):
        return "linen"
    if isinstance(module, nnx.Module):
        return "nnx"
    raise TypeError(f"from_flax takes a flax.linen or flax.nnx module, not {type(module)}")


def _leaves(tree: Any, is_leaf: Any = None) -> list[tuple[Any, Any]]:
    import jax

    return jax.tree_util.tree_flatten_with_path(tree, is_leaf=is_leaf)[0]


def _linen_roles(variables: Any) -> list[str]:
    return [
        "parameter" if path and getattr(path[0], "key", None) == "params" else "buffer"
        for path, _ in _leaves(variables)
    ]


def _strip_value(path: tuple) -> tuple:
    """An nnx variable's path without the ``.value`` its pytree adds."""
    if path and getattr(path[-1], "name", None) == "value":
        return path[:-1]
    return path


def _array(leaf: Any) -> Any:
    """A variable's array (nnx ``Variable``), or the leaf itself."""
    get = getattr(leaf, "get_value", None)
    return get() if callable(get) else leaf
