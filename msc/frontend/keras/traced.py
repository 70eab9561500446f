"""A layer class msc has no converter for and Keras does not define (a subclassed layer: a
KerasHub ``TransformerEncoder``, a model's own ``PositionEmbedding``), read through PyTorch.

On Keras' torch backend a layer is an ``nn.Module``: torch.export traces its ``call`` on the
inputs the functional graph gives it, the torch frontend translates the trace (handed in by
``msc.from_keras`` as ``translate_export``: frontends do not import each other), and
the result is copied into the Keras graph in the layer's place: its inputs are the layer's
input values, its weights the layer's Keras variables (by their paths, as every other layer's),
its symbolic dims the graph's own.

# NOTE: invariants
# - Only layers of classes outside Keras reach here: Keras' own layers are read by their
#   converters (or refused by name), never traced, so the coverage table stays honest.
# - Only a model object the caller built does: a ``.keras`` file naming a class outside Keras is
#   refused before Keras loads it (msc.frontend.keras.limits), so no code from a file runs.
# - The trace keeps the graph's symbols: each symbolic input dim is exported dynamic
#   (``Dim.AUTO``: torch finds which dims the layer needs equal, or bounded, as a position
#   table's length), and the translated subgraph's symbols are replaced by the graph's dims at
#   the same input places (a dim that is an expression over symbols is refused by name).
# - A parameter of the trace that is a Keras variable of the layer becomes that variable's graph
#   weight (``self.imp.weight``); anything else the trace holds (a buffer, a lifted constant)
#   becomes a weight named under the layer's path.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from msc.errors import Unsupported
from msc.ir import Graph, SymDim, TensorType, Value
from msc.ir.graph import Node, Provenance

# The size the trace gives a symbolic dim, by axis (none 0 or 1: torch specializes those).
_SAMPLE_SIZES = (2, 3, 5, 7, 11, 13, 17, 19)


def is_traceable(layer: Any) -> bool:
    """``layer`` is a Keras layer of a class Keras does not define, on the torch backend."""
    import keras

    module = type(layer).__module__ or ""
    return (
        isinstance(layer, keras.layers.Layer)
        and keras.backend.backend() == "torch"
        and not (module == "keras" or module.startswith("keras."))
    )


def traced(imp: Any, layer: Any, path: str, xs: list[Value], kw: dict[str, Any]) -> list[Value]:
    """The values of ``layer``'s outputs, read by tracing it with torch.export (see the module
    docstring); Unsupported with the reason when the trace or its translation fails."""
    import torch

    from msc.errors import UnsupportedOpsError

    if imp.translate_export is None:
        raise Unsupported(
            "no converter (a class outside Keras: msc.from_keras reads it through PyTorch)"
        )

    if any(not isinstance(v, Value) for v in kw.values()):
        raise Unsupported("a traced layer takes tensors as keyword arguments, not lists")
    names = [f"x{i}" for i in range(len(xs))] + list(kw)
    values = list(xs) + list(kw.values())
    samples, dynamic = [], []
    for v in values:
        if not isinstance(v.type, TensorType) or v.type.shape is None:
            raise Unsupported(f"its input {v.name!r} is of unknown rank ({v.type})")
        shape, spec = [], {}
        for axis, d in enumerate(v.type.shape):
            if isinstance(d, int):
                shape.append(d)
                continue
            if not isinstance(d, SymDim):
                raise Unsupported(f"its input dim {d} is an expression over symbols")
            # One sample size per axis: the graph may name a dim that the layer needs equal to
            # another differently (each Keras input's own), so the trace has to run with them
            # equal and let torch find which are.
            shape.append(_SAMPLE_SIZES[axis % len(_SAMPLE_SIZES)])
            spec[axis] = torch.export.Dim.AUTO
        dt = v.dtype.to_numpy()
        arr = np.zeros(shape, dt) if dt == np.bool_ else np.ones(shape, dt)
        samples.append(torch.from_numpy(arr))
        dynamic.append(spec or None)

    class Call(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = layer

        def forward(self, *args: Any) -> Any:
            return self.layer(*args[: len(xs)], **dict(zip(kw, args[len(xs) :])))

    ep = _export(Call().eval(), tuple(samples), (tuple(dynamic),))
    try:
        sub = imp.translate_export(ep, input_names=names)
    except UnsupportedOpsError as e:
        ops = sorted({o.op for o in e.ops})
        raise Unsupported(f"its trace holds ops msc does not read: {', '.join(ops)}") from None
    return _copy(imp, layer, path, sub, values)


def _export(module: Any, samples: tuple, dynamic: tuple) -> Any:
    import torch

    try:
        return torch.export.export(module, samples, dynamic_shapes=dynamic, strict=False)
    except Exception as e:  # noqa: BLE001 - reported as this layer's problem
        # Keras' own wrapper says where ("Exception encountered when calling X.call()"),
        # the line after it what
        lines = [re.sub(r"\x1b\[[0-9;]*m", "", x).strip() for x in str(e).splitlines()]
        what = " ".join([x for x in lines if x][:2]) or type(e).__name__
        raise Unsupported(f"torch.export could not trace it on the torch backend: {what}"
                          ) from None  # fmt: skip


def _copy(imp: Any, layer: Any, path: str, sub: Graph, values: list[Value]) -> list[Value]:
    """Copy ``sub``'s nodes into the importer's graph with its inputs bound to ``values``."""
    import torch

    by_tensor = {id(v.value): v for v in layer.variables if isinstance(v.value, torch.Tensor)}
    params = dict(_layer_tensors(layer))
    env: dict[int, Value] = {id(a): b for a, b in zip(sub.inputs, values)}
    binding: dict[str, Any] = {}
    for a, b in zip(sub.inputs, values):
        for d, outer in zip(a.type.shape, b.type.shape):
            if not isinstance(d, SymDim):
                if d != outer:
                    raise Unsupported(f"the trace holds {outer} as {d} (the layer needs it)")
                continue
            first = binding.setdefault(d.name, outer)
            if isinstance(outer, SymDim):
                if isinstance(first, SymDim) and first != outer:
                    imp.same_size(outer, first)  # torch found the layer needs them equal
                if d.max is not None:
                    imp.at_most(outer, d.max)  # the layer's bound (not torch's lower one)

    def weight(w: Value) -> Value:  # made when a node reads it: unused state is not kept
        if id(w) not in env:
            var = by_tensor.get(id(params.get(_strip(w.name))))
            if var is not None:
                env[id(w)] = imp.weight(var)
            else:
                name = imp._unique(f"{path}/{_strip(w.name)}")  # noqa: SLF001
                env[id(w)] = imp.graph.add_weight(name, w.numpy(), w.type)
        return env[id(w)]

    weights = {id(w) for w in sub.weights.values()}
    results = {id(v) for v in sub.outputs}  # named after the layer by the importer
    module = path.rsplit("/", 1)[0].replace("/", ".") if "/" in path else ""
    for n in sub.nodes:
        if any(isinstance(a, Graph) for a in n.attrs.values()):
            raise Unsupported(f"its trace holds control flow ({n.op})")
        ins = [None if v is None else weight(v) if id(v) in weights else env[id(v)]
               for v in n.inputs]  # fmt: skip
        node = Node(
            n.op,
            ins,
            {k: _bound(a, binding) for k, a in n.attrs.items()},
            name=f"{path}/{n.name}" if n.name else path,
            provenance=Provenance("keras", type(layer).__name__, path, module),
            output_types=[_bound(o.type, binding) for o in n.outputs],
            output_names=[
                imp._unique(f"{path}/{o.name}")  # noqa: SLF001
                if o.name and id(o) not in results
                else None
                for o in n.outputs
            ],  # fmt: skip
            opset=imp.graph.opset,
        )
        imp.ctx.nodes.append(node)  # added and named with the layer's (Importer._finish)
        env.update({id(o): c for o, c in zip(n.outputs, node.outputs)})
    return [weight(v) if id(v) in weights else env[id(v)] for v in sub.outputs]


def _bound(t: Any, binding: dict[str, Any]) -> Any:
    """``t`` with the trace's symbols as the graph's dims."""
    from msc.ir.symexpr import subs

    if not isinstance(t, TensorType):
        return t
    return TensorType(t.dtype, [subs(d, binding) for d in t.shape])


def _layer_tensors(layer: Any) -> list[tuple[str, Any]]:
    """The layer's parameters and buffers by the names torch.export gives them (under the
    ``layer.`` of the wrapper module, stripped)."""
    return list(layer.named_parameters()) + list(layer.named_buffers())


def _strip(name: str) -> str:
    return name[len("layer.") :] if name.startswith("layer.") else name
