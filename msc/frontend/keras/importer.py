"""The Keras importer: a Keras 3 model (Sequential or functional) into an msc Graph, one
converter per layer class (``.keras`` files are read by ``loading``).

# NOTE: invariants
# - The functional graph is walked as Keras records it (``_nodes_by_depth``, deepest first: a
#   topological order); a Sequential model is walked through the functional model Keras
#   builds for it. A nested model is flattened in place: its layers' values are named
#   ``outer/inner`` (the model's name as a path prefix), its inputs are the outer tensors. So is
#   a block class codegen.keras wrote (registered as "msc>..."): its call run on Keras inputs
#   builds the functional model read (``_unfolded``); another class outside Keras is traced.
# - Names are kept: a layer's output value is named after the layer (a shared layer's second
#   call gets ``name_1``), a graph input after its InputLayer, a weight after its variable's
#   ``path`` (``block1_conv1/kernel``), made once however many calls share it. Weights keep
#   Keras' own layout (a conv kernel is [kh, kw, in, out]); converters transpose them.
# - channels_last stays the interface layout: layout-sensitive ops get a transpose into
#   channels first and back, which msc.ops' transpose sinking cancels between ops.
# - Every unsupported layer is collected with its name; ``UnsupportedOpsError`` is raised once
#   after the whole model was walked. Layers downstream of one are not converted.
# - A ``.keras`` file is checked as data first (``loading``: its config.json: no Lambda layer,
#   no class outside Keras but msc's own ``MSC_LAYERS``, whose configs are checked and which
#   Keras builds with msc's classes) and its size keys against the weights the file stores
#   (limits.py), then loaded by Keras itself with ``safe_mode=True`` on the torch backend.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from msc.errors import (
    BadModelError,
    ConversionError,
    Unsupported,
    UnsupportedOp,
    UnsupportedOpsError,
)
from msc.frontend.keras.loading import (
    DTYPES,
    MSC_LAYERS,
    keras_module,
    load_keras,
    msc_layers,
)
from msc.frontend.keras.registry import CONVERTERS, ConverterRegistry
from msc.frontend.keras.traced import is_traceable, traced
from msc.ir import DType, Graph, Provenance, SymDim, TensorType, Value
from msc.ir.builder import Builder
from msc.ir.graph import GraphError
from msc.ops.infer import InferError
from msc.ops.schema import OpError

__all__ = ["Importer", "Ctx", "load_keras", "keras_module", "msc_layers", "MSC_LAYERS", "DTYPES"]


def to_numpy(variable: Any) -> np.ndarray:
    keras = keras_module()
    return np.array(keras.ops.convert_to_numpy(variable))


class Ctx(Builder):
    """What a converter builds with: canonical nodes (``ctx.op``), the layer's weights
    (``ctx.weight(layer.kernel)``), constants (``ctx.const``)."""

    def __init__(self, imp: Importer) -> None:
        super().__init__()
        self.imp = imp
        self.layer: Any = None
        self.path = ""
        self.call_kwargs: dict[str, Any] = {}  # the call's keyword arguments as Keras got them

    def sublayer(self, layer: Any, *xs: Value, **kw: Any) -> Any:
        """A layer held by the one being converted (a wrapper's inner layer, a pipeline's
        steps) through its own converter; refused with its class when there is none."""
        conv = _converter(self.imp.registry, layer)
        if conv is None:
            raise Unsupported(f"its {_kind(layer)} {layer.name!r} (no converter)")
        _takes(conv, kw)
        outer, self.layer = self.layer, layer
        try:
            return conv(self, layer, *xs, **kw)
        finally:
            self.layer = outer

    def _current_name(self) -> str:
        return self.path

    def _current_provenance(self) -> Provenance | None:
        if self.layer is None:
            return None
        module = self.path.rsplit("/", 1)[0].replace("/", ".") if "/" in self.path else ""
        return Provenance("keras", type(self.layer).__name__, self.path, module)

    def weight(self, variable: Any) -> Value:
        """The graph weight of a Keras variable (named by its path; made once)."""
        return self.imp.weight(variable)

    def f32(self, value: Any, like: Value) -> Value:
        """A constant of ``like``'s dtype."""
        return self.const(np.asarray(value, like.dtype.to_numpy()), like.dtype)


class Importer:
    def __init__(
        self,
        model: Any,
        registry: ConverterRegistry = CONVERTERS,
        name: str = "",
        translate_export: Any = None,
    ) -> None:
        self.model = model
        self.registry = registry
        self.translate_export = translate_export  # ExportedProgram -> Graph (traced.py)
        self.graph = Graph(name or getattr(model, "name", "") or "main")
        self.ctx = Ctx(self)
        self.values: dict[int, Value] = {}  # id(KerasTensor) -> value
        self.weights: dict[int, Value] = {}  # id(variable) -> weight
        self.poisoned: set[int] = set()
        self._unfolding = 0  # inside a codegen.keras block's call (_unfolded)
        self.unsupported: list[UnsupportedOp] = []
        self._taken: set[str] = set()
        self._counter = 0
        self._keep: list[Any] = []  # keeps walked tensors alive (their ids are the keys)
        self._done: set[int] = set()  # ids of the Keras nodes converted
        # What traced layers showed of the graph's symbols (traced.py): two that are one
        # size (each Keras input names its own), and upper bounds (a position table's length).
        self._same: dict[str, str] = {}
        self._most: dict[str, int] = {}

    # ------------------------------------------------------------ names and weights
    def _constant(self, a: Any) -> Value:
        """A tensor the model holds as a constant argument (computed when it was built, or
        a block's variable its call reads), as a weight named under the layer's path."""
        keras = keras_module()
        arr = np.asarray(keras.ops.convert_to_numpy(a))
        dt = DTYPES.get(str(arr.dtype))
        if dt is None:
            raise Unsupported(f"a constant argument of dtype {arr.dtype}")
        name = self._unique(f"{self.ctx.path or 'constant'}/argument")
        return self.graph.add_weight(name, arr, TensorType(dt, list(arr.shape)))

    def _unique(self, name: str) -> str:
        if name and name not in self._taken:
            self._taken.add(name)
            return name
        base = name or "t"
        k = 1
        while f"{base}_{k}" in self._taken:
            k += 1
        self._taken.add(f"{base}_{k}")
        return f"{base}_{k}"

    def same_size(self, a: SymDim, b: SymDim) -> None:
        """Symbols ``a`` and ``b`` are one size (the graph says so once the walk is done)."""
        ra, rb = self._root(a.name), self._root(b.name)
        if ra != rb:
            self._same[ra] = rb

    def at_most(self, a: SymDim, size: int) -> None:
        """Symbol ``a`` is at most ``size``."""
        self._most[a.name] = min(size, self._most.get(a.name, size))

    def _root(self, name: str) -> str:
        while name in self._same:
            name = self._same[name]
        return name

    def _broadcast_sizes(self) -> None:
        """Symbols an elementwise op of two tensors lines up are one size: each Keras input
        names its own dims (``token_ids_1``, ``segment_ids_1``), and adding their embeddings
        says they are equal, as torch.export reads a broadcast of two dynamic dims."""
        from msc.ops import registry as ops

        for n in self.graph.nodes:
            if ops.get(n.op).category not in ("binary", "compare") or len(n.inputs) != 2:
                continue
            a, b = n.inputs
            if a is None or b is None or a.type.shape is None or b.type.shape is None:
                continue
            for x, y in zip(reversed(a.type.shape), reversed(b.type.shape)):
                if isinstance(x, SymDim) and isinstance(y, SymDim) and x.name != y.name:
                    self.same_size(y, x)

    def _resymbol(self) -> None:
        """Every type of the graph with ``same_size`` and ``at_most`` applied: one symbol for
        each set of equal ones (the first input's), with the tightest bound any had."""
        self._broadcast_sizes()
        if not self._same and not self._most:
            return
        from msc.ir import symexpr

        found: dict[str, SymDim] = {}
        for v in self.graph.inputs:
            for d in v.type.shape or ():
                if isinstance(d, SymDim):
                    found.setdefault(d.name, d)
        most: dict[str, int] = {}
        for name, size in self._most.items():
            root = self._root(name)
            most[root] = min(size, most.get(root, size))
        binding: dict[str, Any] = {}
        for name, d in found.items():
            root = found.get(self._root(name), d)
            hi = most.get(root.name, root.max)
            if root.max is not None and hi is not None:
                hi = min(hi, root.max)
            binding[name] = SymDim(root.name, root.min, hi)

        def retyped(t: Any) -> Any:
            if not isinstance(t, TensorType) or t.shape is None:
                return t
            dims = [d if d is None else symexpr.subs(d, binding) for d in t.shape]
            return TensorType(t.dtype, dims)

        for v in self.graph.inputs:
            v.type = retyped(v.type)
        for n in self.graph.nodes:
            for o in n.outputs:
                o.type = retyped(o.type)
            for k, a in n.attrs.items():
                if isinstance(a, TensorType):
                    n.attrs[k] = retyped(a)

    def _fresh(self) -> str:
        while True:
            name = str(self._counter)
            self._counter += 1
            if name not in self._taken:
                self._taken.add(name)
                return name

    def weight(self, variable: Any) -> Value:
        w = self.weights.get(id(variable))
        if w is not None:
            return w
        arr = to_numpy(variable)
        dt = DTYPES.get(str(arr.dtype))
        if dt is None:
            raise Unsupported(f"weight {variable.path!r} of dtype {arr.dtype}")
        name = self._unique(variable.path)
        w = self.graph.add_weight(name, arr, TensorType(dt, list(arr.shape)))
        self.weights[id(variable)] = w
        self._keep.append(variable)
        return w

    # ------------------------------------------------------------ the walk
    def run(self) -> Graph:
        model = _functional(self.model)
        for t in model.inputs:
            layer = t._keras_history.operation
            dt = DTYPES.get(str(t.dtype))
            if dt is None:
                raise BadModelError(
                    f"input {layer.name!r} has dtype {t.dtype}, which msc does not hold"
                )
            dims = [SymDim("batch") if d is None and a == 0 else d for a, d in enumerate(t.shape)]
            if any(d is None for d in dims):
                dims = [SymDim(f"{layer.name}_{a}") if d is None else d for a, d in enumerate(dims)]
            v = self.graph.add_input(self._unique(layer.name), TensorType(dt, dims))
            self.values[id(t)] = v
            self._keep.append(t)
        self._walk(model, "")
        if self.unsupported:
            raise UnsupportedOpsError(self.unsupported, what="Keras model")
        self._resymbol()
        outs = []
        for t in model.outputs:
            outs.append(self.values[id(t)])
        self.graph.set_outputs(outs)
        return self.graph

    def _walk(self, model: Any, prefix: str) -> None:
        by_depth = model._nodes_by_depth
        for depth in sorted(by_depth, reverse=True):
            for node in by_depth[depth]:
                op = node.operation
                if type(op).__name__ == "InputLayer":
                    continue
                ins = list(node.arguments.keras_tensors)
                outs = list(node.outputs)
                if any(id(t) in self.poisoned for t in ins):
                    self.poisoned.update(id(t) for t in outs)
                    continue
                if id(node) in self._done:  # a mask computed ahead of a layer reading it
                    continue
                if _is_model(op):
                    self._nested(op, ins, outs, prefix)
                    continue
                inner = None
                if _is_msc_block(op) and _converter(self.registry, op) is None:
                    inner = _unfolded(op, node.arguments)
                if inner is not None:  # codegen.keras' block: its call's layers and ops
                    self._unfolding += 1
                    try:
                        self._nested(inner, ins, outs, prefix)
                    finally:
                        self._unfolding -= 1
                    continue
                masks = self._implicit_masks(op, node.arguments, outs, prefix)
                if any(id(t) in self.poisoned for t in outs):
                    continue
                self._done.add(id(node))
                self._convert(op, ins, outs, prefix, node.arguments, masks)

    def _nested(self, model: Any, ins: list, outs: list, prefix: str) -> None:
        inner = _functional(model)
        if len(inner.inputs) != len(ins):
            self._refused(
                model, outs, prefix, f"called on {len(ins)} tensors, built for {len(inner.inputs)}"
            )
            return
        for t_in, t_outer in zip(inner.inputs, ins):
            self.values[id(t_in)] = self.values[id(t_outer)]
            self._keep.append(t_in)
        self._walk(inner, f"{prefix}{model.name}/")
        for t_inner, t_outer in zip(inner.outputs, outs):
            if id(t_inner) in self.poisoned:
                self.poisoned.add(id(t_outer))
            else:
                self.values[id(t_outer)] = self.values[id(t_inner)]
        self._keep.extend(outs)

    def _arguments(self, arguments: Any) -> tuple[list, dict]:
        keras = keras_module()

        def value(a: Any) -> Any:
            if id(a) in self.values:
                return self.values[id(a)]
            if isinstance(a, list | tuple):
                return type(a)(value(b) for b in a)
            if self._unfolding and keras.ops.is_tensor(a):  # a block's own variable, read
                return self._constant(a)
            return a

        return [value(a) for a in arguments.args], {
            k: value(v) for k, v in arguments.kwargs.items()
        }

    def _implicit_masks(self, op: Any, node_args: Any, outs: list, prefix: str) -> dict:
        """The masks Keras gives a layer at run time that its recorded call does not hold.

        Keras passes a layer whose ``call`` takes ``mask`` (or ``<arg>_mask``) the mask its
        input tensors carry when the call did not give one; some layers record it as an
        argument (LSTM, GlobalAveragePooling1D), others do not (Attention,
        MultiHeadAttention), and their output still depends on it. Each such mask is added
        to the call's keyword arguments, its value converted from the nodes that compute it
        (Embedding's not_equal, Masking's any) if the walk has not reached them.
        """
        keras = keras_module()
        if not isinstance(op, keras.layers.Layer) or node_args is None:
            return {}
        import inspect

        try:
            params = inspect.signature(op.call).parameters
            bound = inspect.signature(op.call).bind_partial(*node_args.args, **node_args.kwargs)
        except (TypeError, ValueError):
            return {}
        given = bound.arguments
        found: dict[str, Any] = {}
        first = next(iter(given.values()), None)
        if "mask" in params and given.get("mask") is None and first is not None:
            masks = [getattr(t, "_keras_mask", None) for t in _flat(first)]
            if any(m is not None for m in masks):
                found["mask"] = masks if isinstance(first, list | tuple) else masks[0]
        for name, arg in given.items():
            if _is_keras_tensor(arg) and f"{name}_mask" in params:
                m = getattr(arg, "_keras_mask", None)
                if m is not None and given.get(f"{name}_mask") is None:
                    found[f"{name}_mask"] = m
        for k, m in found.items():
            for t in _flat(m):
                if t is not None and not self._compute(t, prefix):
                    self._refused(op, outs, prefix, f"its {k} comes from a layer msc did not read")
                    return {}
        return found  # passed as Keras passes them at run time

    def _compute(self, t: Any, prefix: str) -> bool:
        """Convert the nodes that compute tensor ``t`` (all of whose inputs are converted
        or computable); False when one of them is refused."""
        if id(t) in self.values:
            return True
        if id(t) in self.poisoned:
            return False
        history = getattr(t, "_keras_history", None)
        if history is None:
            return False
        op = history.operation
        node = op._inbound_nodes[history.node_index]
        for u in node.arguments.keras_tensors:
            if not self._compute(u, prefix):
                return False
        self._done.add(id(node))
        self._convert(op, list(node.arguments.keras_tensors), list(node.outputs), prefix,
                      node.arguments)  # fmt: skip
        return id(t) in self.values

    def _layer_arguments(self, node_args: Any, ins: list, masks: dict) -> tuple[list, dict]:
        """A layer call's tensors: those of its positional arguments in order (a list
        argument flattened, as ``Add()([a, b])``), and its keyword arguments that hold
        tensors by name (``mask=``, ``query_mask=``, ``initial_state=``: Keras records a
        mask as an argument, computed by the graph's own nodes). A tensor the model holds as
        a constant argument (computed once when it was built: codegen.keras passes such a mask
        to a block's layer) is a weight named under the layer's path."""
        if node_args is None:
            return [self.values[id(t)] for t in ins], {}
        keras = keras_module()

        def flat(a: Any) -> list:
            if id(a) in self.values:
                return [self.values[id(a)]]
            if isinstance(a, list | tuple):
                return [v for b in a for v in flat(b)]
            if keras.ops.is_tensor(a) or isinstance(a, np.ndarray):
                return [self._constant(a)]
            return []

        def value(a: Any) -> Any:
            if id(a) in self.values:
                return self.values[id(a)]
            if isinstance(a, list | tuple):
                return [value(b) for b in a]
            return None

        xs = [v for a in node_args.args for v in flat(a)]
        kw = {k: value(v) for k, v in {**node_args.kwargs, **masks}.items() if flat(v)}
        return xs, kw

    def _convert(
        self,
        layer: Any,
        ins: list,
        outs: list,
        prefix: str,
        node_args: Any = None,
        masks: dict | None = None,
    ) -> None:
        ctx = self.ctx
        ctx.layer = layer
        ctx.path = prefix + layer.name
        ctx.nodes = []
        ctx.call_kwargs = dict(node_args.kwargs) if node_args is not None else {}
        cls = _kind(layer)
        conv = _converter(self.registry, layer)
        try:
            if conv is None and is_traceable(layer):
                xs, kw = self._layer_arguments(node_args, ins, masks or {})
                result = traced(self, layer, ctx.path, xs, kw)
            elif conv is None:
                raise Unsupported("no converter")
            elif cls.startswith("ops."):  # a keras.ops call: its arguments as they were given
                args, kwargs = self._arguments(node_args)
                result = conv(ctx, layer, *args, **kwargs)
            else:
                xs, kw = self._layer_arguments(node_args, ins, masks or {})
                _takes(conv, kw)
                result = conv(ctx, layer, *xs, **kw)
            values = list(result) if isinstance(result, tuple | list) else [result]
            if len(values) != len(outs):
                raise Unsupported(f"the converter gave {len(values)} outputs for {len(outs)}")
            for t, v in zip(outs, values):
                _check_type(v, t, ctx.path, wide_ints=cls.startswith("ops.") or cls == "Sized")
        except (Unsupported, InferError, OpError, GraphError) as e:
            ctx.nodes = []
            self._refused(layer, outs, prefix, str(e))
            ctx.layer = None
            return
        self._finish(outs, values)
        ctx.layer = None

    def _finish(self, outs: list, values: list[Value]) -> None:
        new = {id(n) for n in self.ctx.nodes}
        for k, (t, v) in enumerate(zip(outs, values)):
            if v.producer is not None and v.name is None and id(v.producer) in new:
                base = self.ctx.path if len(outs) == 1 else f"{self.ctx.path}:{k}"
                v.name = self._unique(base)
            self.values[id(t)] = v
        for node in self.ctx.nodes:
            for o in node.outputs:
                if o.name is None:
                    o.name = self._fresh()
            self.graph.add_node(node)
        self.ctx.nodes = []
        self._keep.extend(outs)

    def _refused(self, layer: Any, outs: list, prefix: str, why: str) -> None:
        self.poisoned.update(id(t) for t in outs)
        self._keep.extend(outs)
        path = prefix + layer.name
        module = prefix.rstrip("/").replace("/", ".")
        self.unsupported.append(UnsupportedOp(_kind(layer), path, module, why))


def _flat(a: Any) -> list:
    return [b for x in a for b in _flat(x)] if isinstance(a, list | tuple) else [a]


def _is_keras_tensor(a: Any) -> bool:
    return type(a).__name__ == "KerasTensor"


def _takes(conv: Any, kw: dict) -> None:
    """The converter reads every tensor keyword the call had: a mask or an initial state it
    does not take is refused by name, never dropped."""
    import inspect

    params = inspect.signature(conv).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    extra = sorted(k for k in kw if k not in params)
    if extra:
        raise Unsupported(", ".join(f"{k}=" for k in extra) + " (not read for this layer)")


def _kind(op: Any) -> str:
    """A layer's class name (``Dense``), or ``ops.<Class>`` for a keras.ops call recorded in
    a functional model (``ops.Mean``): the two share names (``Add``, ``Reshape``)."""
    keras = keras_module()
    name = type(op).__name__
    return name if isinstance(op, keras.layers.Layer) else f"ops.{name}"


def _converter(registry: ConverterRegistry, op: Any) -> Any:
    """The converter registered for ``op``'s class name, unless the name is a Keras layer's
    and ``op`` is not one: a class of another package that Keras' name (KerasHub's own
    ``RMSNormalization``) is not read as Keras' layer; it is traced, as any class outside
    Keras (msc.frontend.keras.traced)."""
    kind = _kind(op)
    conv = registry.get(kind)
    if conv is None or kind.startswith("ops."):
        return conv
    keras = keras_module()
    own = getattr(keras.layers, kind, None)
    if isinstance(own, type) and not isinstance(op, own):
        return None
    return conv


def _is_msc_block(layer: Any) -> bool:
    """A block class codegen.keras writes (registered in Keras' package "msc"; msc's own
    SourceWeight and Sized have converters)."""
    keras = keras_module()
    try:
        name = keras.saving.get_registered_name(type(layer))
    except Exception:  # noqa: BLE001 - not a registered class
        return False
    return isinstance(layer, keras.layers.Layer) and name.startswith("msc>")


def _unfolded(layer: Any, arguments: Any) -> Any:
    """A codegen.keras block as the functional model its ``call`` builds when run on Keras
    inputs of its tensors' specs (its constant arguments as they are): read as Keras layers
    and ``keras.ops``, as the flat model would be. None when its call does not build one: then
    it is traced. The layer runs (the caller built it: its code is already trusted), its
    sublayers already built, so the model holds the layer's own variables."""
    keras = keras_module()
    if arguments.kwargs or not all(
        _is_keras_tensor(a) or keras.ops.is_tensor(a) or isinstance(a, np.ndarray)
        for a in arguments.args
    ):
        return None
    inputs = [
        keras.Input(batch_shape=a.shape, dtype=a.dtype) for a in arguments.args
        if _is_keras_tensor(a)
    ]  # fmt: skip
    it = iter(inputs)
    args = [next(it) if _is_keras_tensor(a) else a for a in arguments.args]
    try:
        outs = layer.call(*args)
        model = keras.Model(inputs, outs, name=layer.name)
    except Exception:  # noqa: BLE001 - its call does more than Keras layers and ops: traced
        return None
    if {id(v) for v in model.weights} - {id(v) for v in layer.weights}:
        return None  # the call made variables of its own: traced
    return model


def _is_model(op: Any) -> bool:
    return hasattr(op, "_nodes_by_depth") or type(op).__name__ == "Sequential"


def _functional(model: Any) -> Any:
    """The functional graph of a model: itself, or the one Keras built for a Sequential."""
    if hasattr(model, "_nodes_by_depth"):
        return model
    if type(model).__name__ == "Sequential":
        f = getattr(model, "_functional", None)
        if f is None:
            raise BadModelError(
                f"Sequential model {model.name!r} is not built: give it an Input (or call it "
                "once) so its input shape is known"
            )
        return f
    raise ConversionError(
        f"{type(model).__name__} {getattr(model, 'name', '')!r} is a subclassed model (its "
        "call is Python code): msc reads Sequential and functional models; convert a "
        "subclassed one on the torch backend with msc.from_keras(model, example_args) (it goes "
        "through msc.from_torch)"
    )


def _check_type(v: Value, t: Any, path: str, wide_ints: bool = False) -> None:
    """The value a converter made has the Keras tensor's dtype and static dims.

    ``wide_ints``: an int64 where Keras says int32 is kept, for a keras.ops call or codegen's
    Sized: Keras types ``ops.add(int64 tensor, 0)`` int32 while it builds a functional model,
    but on the torch backend it computes int64 (what runs is what the graph says)."""
    got = v.type
    if not isinstance(got, TensorType):
        return
    want = DTYPES.get(str(t.dtype))
    if wide_ints and got.dtype is DType.INT64 and want is DType.INT32:
        want = DType.INT64
    if want is not None and got.dtype is not want:
        raise Unsupported(f"made {got.dtype.short} for {path!r}, Keras gives {t.dtype}")
    if got.shape is None:
        return
    if len(got.shape) != len(t.shape):
        raise Unsupported(f"made {got} for {path!r}, Keras gives shape {tuple(t.shape)}")
    for a, b in zip(got.shape, t.shape):
        if isinstance(a, int) and isinstance(b, int) and a != b:
            raise Unsupported(f"made {got} for {path!r}, Keras gives shape {tuple(t.shape)}")
