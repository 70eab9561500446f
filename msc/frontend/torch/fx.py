"""torch.fx GraphModule (symbolic_trace output) -> msc Graph, through the same converters.

# NOTE: invariants
# - The GraphModule is run once on the example inputs to record every node's value (tensor
#   dtype/shape, or the Python value of a size computation, which becomes a constant).
# - Parameter lookup is ``named_parameters``/``named_buffers`` (get_attr targets are state_dict
#   keys); call_function / call_method nodes are normalized to an ATen overload, chosen by
#   matching the arguments against each overload's schema, so they reach the same converters
#   as torch.export graphs. call_module nodes of common torch.nn layers call those converters
#   with the layer's weights; any other leaf module is exported with torch.export and inlined.
"""

from __future__ import annotations

import inspect
import operator
import re
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F
from torch.utils import _pytree as pytree

from msc.errors import ConversionError
from msc.frontend.torch.dtypes import tensor_to_numpy, to_msc
from msc.frontend.torch.fx_modules import MODULES, export_inline
from msc.frontend.torch.registry import Ctx, Unsupported
from msc.frontend.torch.translate import (
    Call,
    Source,
    Translator,
    constant_node,
    finish,
    is_small_constant,
)
from msc.ir import DType, Graph, TensorType, Value
from msc.text.check import checked

__all__ = ["from_fx"]


class _Recorder(torch.fx.Interpreter):
    """Runs the module once, keeping each node's value (tensors as meta only)."""

    def __init__(self, gm: torch.fx.GraphModule, keep_args_for: set[str]) -> None:
        super().__init__(gm)
        self.values: dict[str, Any] = {}
        self.module_args: dict[str, tuple] = {}
        self.keep = keep_args_for

    def run_node(self, n: torch.fx.Node) -> Any:
        result = super().run_node(n)
        if n.name in self.keep:
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            self.module_args[n.name] = (args, kwargs)
        self.values[n.name] = _meta(result)
        return result


def _meta(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return torch.empty(x.shape, dtype=x.dtype, device="meta")
    if isinstance(x, list | tuple):
        return type(x)(_meta(v) for v in x) if not isinstance(x, torch.Size) else tuple(x)
    return x


# Argument types of ATen schemas that any value may fill.
_ANY_TYPES = ("Device", "Layout", "MemoryFormat", "Generator", "Storage")


def _fits(t: str, v: Any, is_tensor) -> bool:
    if t.startswith("Optional["):
        return v is None or _fits(t[9:-1], v, is_tensor)
    if t == "Tensor":
        return is_tensor(v)
    if t.startswith("List["):
        inner = t[5:-1]
        if inner == "int" and (isinstance(v, int) or _is_int(v, is_tensor)):
            return True
        return isinstance(v, list | tuple) and all(_fits(inner, x, is_tensor) for x in v)
    if is_tensor(v):
        return False
    if t == "int":
        return _is_int(v, is_tensor) or isinstance(
            v, torch.dtype | torch.layout | torch.memory_format
        )
    if t in ("float", "number"):
        return isinstance(v, int | float) or (t == "number" and isinstance(v, bool))
    if t == "bool":
        return isinstance(v, bool)
    if t == "str":
        return isinstance(v, str)
    return any(a in t for a in _ANY_TYPES)


def _is_int(v: Any, is_tensor) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def match_overload(name: str, args: tuple, kwargs: dict, is_tensor) -> str | None:
    """The ATen overload ``aten.name.*`` whose schema these arguments fit."""
    packet = getattr(torch.ops.aten, name, None)
    if packet is None or not hasattr(packet, "overloads"):
        return None
    for ov in packet.overloads():
        if ov == "out" or ov.endswith("_out") or "names" in ov or "Dimname" in ov:
            continue
        schema = getattr(packet, ov)._schema
        params = list(schema.arguments)
        if any(p.name == "out" for p in params):
            continue
        positional = [p for p in params if not p.kwarg_only]
        if len(args) > len(positional):
            continue
        names = {p.name for p in params}
        if any(k not in names for k in kwargs):
            continue
        given = {p.name: a for p, a in zip(positional, args)}
        given.update(kwargs)
        ok = all(
            (p.name in given and _fits(str(p.type), given[p.name], is_tensor))
            or (p.name not in given and (p.has_default_value() or "Optional" in str(p.type)))
            for p in params
        )
        if ok:
            return f"aten.{name}.{ov}"
    return None


_OPERATORS = {
    operator.add: "add",
    operator.iadd: "add_",
    operator.sub: "sub",
    operator.isub: "sub_",
    operator.mul: "mul",
    operator.imul: "mul_",
    operator.truediv: "div",
    operator.itruediv: "div_",
    operator.floordiv: "floor_divide",
    operator.mod: "remainder",
    operator.pow: "pow",
    operator.matmul: "matmul",
    operator.neg: "neg",
    operator.eq: "eq",
    operator.ne: "ne",
    operator.lt: "lt",
    operator.le: "le",
    operator.gt: "gt",
    operator.ge: "ge",
    operator.and_: "bitwise_and",
    operator.or_: "bitwise_or",
    operator.xor: "bitwise_xor",
    operator.invert: "bitwise_not",
}

_CASTS = {
    "float": torch.float32,
    "double": torch.float64,
    "half": torch.float16,
    "bfloat16": torch.bfloat16,
    "long": torch.int64,
    "int": torch.int32,
    "short": torch.int16,
    "char": torch.int8,
    "byte": torch.uint8,
    "bool": torch.bool,
}
_VARARGS = {"view", "reshape", "permute", "expand", "repeat", "tile", "new_zeros", "new_ones",
            "flip"}  # fmt: skip
_CREATE = {"zeros", "ones", "empty", "full", "rand", "randn"}
_REVERSED = {operator.add, operator.mul}


# fx registers a tensor the traced code created as a buffer under this name.
_TENSOR_CONSTANT = re.compile(r"_tensor_constant\d+")


class FxSource(Source):
    def __init__(self, gm: torch.fx.GraphModule, rec: _Recorder, graph: Graph, overrides: bool):
        self.gm = gm
        self.rec = rec
        self.graph = graph
        self.inputs: dict[str, Value] = {}
        self.weights: dict[str, Value] = {}  # attribute path -> weight
        self.constants: list[str] = []  # tensor attributes kept as weights
        self.overrides = overrides

    # -------------------------------------------------------------- lookups
    def placeholder(self, node: torch.fx.Node) -> Any:
        if node.name in self.inputs:
            return self.inputs[node.name]
        return self.rec.values.get(node.name)

    def _add(self, path: str, t: torch.Tensor) -> Value:
        w = self.graph.add_weight(path, tensor_to_numpy(t))
        self.weights[path] = w
        return w

    def get_attr(self, node: torch.fx.Node) -> Any:
        path = node.target
        if path in self.weights:
            return self.weights[path]
        obj: Any = self.gm
        for part in path.split("."):
            obj = getattr(obj, part)
        if isinstance(obj, torch.Tensor):  # a tensor attribute: a constant, not state
            if is_small_constant(obj):
                self.weights[path] = constant_node(self.graph, path, obj)
                return self.weights[path]
            self.constants.append(path)
            return self._add(path, obj)
        raise Unsupported(f"get_attr of a {type(obj).__name__}")

    def meta(self, node: torch.fx.Node) -> Any:
        v = self.rec.values.get(node.name)
        if isinstance(v, list | tuple) and v and all(isinstance(x, int | float | bool) for x in v):
            return None  # a size tuple: translated as a Python value, see normalize
        return v

    def module_path(self, node: torch.fx.Node) -> str:
        return node.target if node.op == "call_module" else ""

    def refine_shapes(self) -> bool:
        return not self.overrides

    def is_tensor(self, v: Any) -> bool:
        if isinstance(v, torch.fx.Node):
            return isinstance(self.rec.values.get(v.name), torch.Tensor)
        return isinstance(v, torch.Tensor | Value)

    # -------------------------------------------------------------- normalization
    def normalize(self, node: torch.fx.Node, env: dict) -> Call:
        args, kwargs = tuple(node.args), dict(node.kwargs)
        value = self.rec.values.get(node.name)
        if (
            isinstance(value, list | tuple)
            and value
            and not any(isinstance(x, torch.Tensor) for x in value)
        ):
            return Call("python value", fn=lambda ctx, v=value: v)
        if node.op == "call_module":
            mod = self.gm.get_submodule(node.target)
            handler = MODULES.get(type(mod))
            if handler is None:
                a, k = self.rec.module_args[node.name]
                return Call(
                    f"module {type(mod).__module__}.{type(mod).__qualname__}",
                    args,
                    kwargs,
                    fn=lambda ctx, *_a, **_k: export_inline(
                        ctx, mod, node.target, a, k, self, _a, _k
                    ),  # fmt: skip
                )
            return Call(
                f"module {type(mod).__qualname__}",
                args,
                kwargs,
                fn=lambda ctx, *a, **k: handler(
                    ctx, mod, self._module_weight(node.target), *a, **k
                ),
            )
        if node.op == "call_method":
            return self._method(node, node.target, args, kwargs)
        return self._function(node, node.target, args, kwargs)

    def _module_weight(self, prefix: str):
        def get(name: str) -> Value | None:
            path = f"{prefix}.{name}" if prefix else name
            mod = self.gm.get_submodule(prefix)
            t = getattr(mod, name, None)
            if t is None:
                return None
            return self.weights.get(path) or self._add(path, t)

        return get

    def _method(self, node, name: str, args: tuple, kwargs: dict) -> Call:
        if name in _CASTS and not kwargs and len(args) == 1:
            return Call("aten._to_copy.default", args, {"dtype": _CASTS[name]})
        if name == "type" and len(args) == 2 and isinstance(args[1], torch.dtype):
            return Call("aten._to_copy.default", args[:1], {"dtype": args[1]})
        if name in _VARARGS and len(args) > 1 and not isinstance(args[1], list | tuple):
            args = (args[0], list(args[1:]))
        if name in ("split",):
            return self._split(args, kwargs)
        if name in ("size", "dim", "numel", "stride"):
            raise Unsupported(f"Tensor.{name} on a dynamic value")
        return self._generic(node, name, args, kwargs, inplace_ok=True)

    def _split(self, args: tuple, kwargs: dict) -> Call:
        size = args[1] if len(args) > 1 else kwargs.get("split_size_or_sections")
        dim = args[2] if len(args) > 2 else kwargs.get("dim", 0)
        if isinstance(size, int):
            return Call("aten.split.Tensor", (args[0], size, dim))
        return Call("aten.split_with_sizes.default", (args[0], list(size), dim))

    def _function(self, node, fn: Any, args: tuple, kwargs: dict) -> Call:
        if fn in _OPERATORS:
            name = _OPERATORS[fn]
            if len(args) == 2 and not self.is_tensor(args[0]) and self.is_tensor(args[1]):
                if fn in _REVERSED:
                    args = (args[1], args[0])
                elif name in ("sub", "div", "pow", "floor_divide", "remainder"):
                    return self._reverse(name, args)
            inplace = name.endswith("_")
            call = self._generic(node, name, args, kwargs, inplace_ok=True)
            if inplace:
                call.inplace_arg = args[0] if isinstance(args[0], torch.fx.Node) else None
            return call
        if fn is operator.getitem:
            return Call("tensor indexing", args, kwargs, fn=tensor_getitem)
        special = _FUNCTIONS.get(fn)
        if special is not None:
            return special(self, args, kwargs)
        name = getattr(fn, "__name__", "")
        if name in _CREATE and args and not isinstance(args[0], list | tuple):
            n = sum(1 for a in args if isinstance(a, int) or isinstance(a, torch.fx.Node))
            if name == "full":
                n = 0
            if n:
                args = (list(args[:n]), *args[n:])
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            sig = None
        if sig is not None and args:
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError as e:
                raise Unsupported(f"{name}: {e}") from None
            named = dict(bound.arguments)
            for drop in ("inplace", "_stacklevel"):
                named.pop(drop, None)
            first = next(iter(named))
            args, kwargs = (named.pop(first),), named
        try:
            return self._generic(node, name, args, kwargs, inplace_ok=False)
        except Unsupported:
            if node.name not in self.rec.module_args:
                raise
        return self._inline_function(node, fn)

    def _inline_function(self, node: torch.fx.Node, fn: Any) -> Call:
        """A Python-level function with no ATen twin: export it on the inputs it saw."""
        real_args, real_kwargs = self.rec.module_args[node.name]
        leaves, spec = pytree.tree_flatten((list(real_args), dict(real_kwargs)))
        slots = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
        wrapper = _CallFunction(fn, leaves, spec, slots)
        tensors = tuple(leaves[i] for i in slots)
        fx_leaves = pytree.tree_leaves((list(node.args), dict(node.kwargs)))

        def convert(ctx: Ctx, *vals: Any) -> Any:
            return export_inline(ctx, wrapper, "", tensors, {}, self, vals, {})

        picked = tuple(fx_leaves[i] for i in slots) if len(fx_leaves) == len(leaves) else None
        if picked is None:
            raise Unsupported(f"cannot line up the arguments of {getattr(fn, '__name__', fn)}")
        return Call(f"{getattr(fn, '__module__', '')}.{getattr(fn, '__name__', '')}", picked,
                    fn=convert)  # fmt: skip

    def _reverse(self, name: str, args: tuple) -> Call:
        scalar, tensor = args
        if name == "sub":
            return Call("aten.rsub.Scalar", (tensor, scalar))
        if name == "pow":
            return Call("aten.pow.Scalar", (scalar, tensor))
        key = "aten.floor_divide.default" if name == "floor_divide" else f"aten.{name}.Tensor"

        def convert(ctx: Ctx, s: Any, t: Value) -> Value:
            return ctx.call(key, ctx.tensor(s, ctx.result_dtype(s, t)), t)

        return Call(key, (scalar, tensor), fn=convert)

    def probe(self, a: Any) -> Any:
        """An argument as the value it had when the module ran (for overload matching)."""
        if isinstance(a, torch.fx.Node):
            return self.rec.values.get(a.name)
        if isinstance(a, list | tuple):
            return type(a)(self.probe(x) for x in a)
        return a

    def _generic(self, node, name: str, args: tuple, kwargs: dict, inplace_ok: bool) -> Call:
        pa, pk = self.probe(args), {k: self.probe(v) for k, v in kwargs.items()}
        key = match_overload(name, pa, pk, self.is_tensor)
        if key is None and name.endswith("_") and inplace_ok:
            key = match_overload(name[:-1], pa, pk, self.is_tensor)
            if key is not None:
                c = Call(key, args, kwargs)
                c.inplace_arg = args[0] if isinstance(args[0], torch.fx.Node) else None
                return c
        if key is None:
            what = node.target if isinstance(node.target, str) else name
            raise Unsupported(f"no ATen overload of {what!r} matches these arguments")
        return Call(key, args, kwargs)


# ----------------------------------------------------------------------- special functions
def _dropout(src: FxSource, args: tuple, kwargs: dict) -> Call:
    return Call("aten.dropout.default", args[:1], fn=lambda ctx, x: x)


def _embedding(src: FxSource, args: tuple, kwargs: dict) -> Call:
    b = inspect.signature(F.embedding).bind(*args, **kwargs).arguments
    pad = b.get("padding_idx")
    return Call("aten.embedding.default", (b["weight"], b["input"], -1 if pad is None else pad))


def _max_pool(n: int):
    def norm(src: FxSource, args: tuple, kwargs: dict) -> Call:
        fn = getattr(F, f"max_pool{n}d_with_indices")
        b = inspect.signature(fn).bind(*args, **kwargs)
        b.apply_defaults()
        a = dict(b.arguments)
        ret = a.pop("return_indices")
        x = a.pop("input")
        if a["stride"] is None:
            a["stride"] = []
        key = f"aten.max_pool{n}d_with_indices.default" if ret else f"aten.max_pool{n}d.default"
        return Call(key, (x,), a)

    return norm


def _interpolate(src: FxSource, args: tuple, kwargs: dict) -> Call:
    from msc.frontend.torch.nn import _resize, dims_tuple_f

    b = inspect.signature(F.interpolate).bind(*args, **kwargs)
    b.apply_defaults()
    a = b.arguments

    def convert(ctx: Ctx, x: Value, size: Any, scale: Any, mode: str, align: Any) -> Value:
        n = ctx.rank(x) - 2
        modes = {"nearest": "nearest", "nearest-exact": "nearest-exact", "bilinear": "linear",
                 "linear": "linear", "trilinear": "linear", "bicubic": "cubic"}  # fmt: skip
        if mode not in modes or (a["antialias"] and mode not in ("bilinear", "bicubic")):
            raise Unsupported(f"interpolate mode {mode!r}" + (" with antialias" * a["antialias"]))
        if size is not None and isinstance(size, int):
            size = [size] * n
        if a["antialias"]:
            sf = None if size is not None or scale is None else dims_tuple_f(scale, n)
            key = f"aten._upsample_{mode}2d_aa.vec"
            return ctx.call(key, x, size, bool(align), sf)
        if scale is not None and a["recompute_scale_factor"]:
            sp = ctx.shape(x)[2:]
            scales = [scale] * n if isinstance(scale, int | float) else scale
            size, scale = [int(d * s) for d, s in zip(sp, scales)], None
        return _resize(ctx, x, n, size, scale, modes[mode], bool(align))

    return Call(
        "aten.upsample.vec",
        (a["input"], a["size"], a["scale_factor"], a["mode"], a["align_corners"]),
        fn=convert,
    )


def _normalize(src: FxSource, args: tuple, kwargs: dict) -> Call:
    b = inspect.signature(F.normalize).bind(*args, **kwargs)
    b.apply_defaults()
    a = b.arguments

    def convert(ctx: Ctx, x: Value) -> Value:
        n = ctx.call("aten.linalg_vector_norm.default", x, a["p"], [a["dim"]], True)
        n = ctx.call("aten.clamp_min.default", n, a["eps"])
        return ctx.call("aten.div.Tensor", x, n)

    return Call("aten.linalg_vector_norm.default", (a["input"],), fn=convert)


def _einsum(src: FxSource, args: tuple, kwargs: dict) -> Call:
    eq, *ops = args
    if len(ops) == 1 and isinstance(ops[0], list | tuple):
        ops = list(ops[0])
    return Call("aten.einsum.default", (eq, list(ops)))


def _split_fn(src: FxSource, args: tuple, kwargs: dict) -> Call:
    b = inspect.signature(torch.functional.split).bind(*args, **kwargs)
    a = b.arguments
    return src._split((a["tensor"], a["split_size_or_sections"], a.get("dim", 0)), {})


_FUNCTIONS = {
    F.dropout: _dropout,
    F.dropout1d: _dropout,
    F.dropout2d: _dropout,
    F.dropout3d: _dropout,
    F.alpha_dropout: _dropout,
    F.feature_alpha_dropout: _dropout,
    F.embedding: _embedding,
    F.max_pool1d: _max_pool(1),
    F.max_pool2d: _max_pool(2),
    F.max_pool3d: _max_pool(3),
    F.interpolate: _interpolate,
    F.upsample: _interpolate,
    F.normalize: _normalize,
    torch.einsum: _einsum,
    torch.functional.einsum: _einsum,
    torch.split: _split_fn,
    torch.functional.split: _split_fn,
}


class _CallFunction(torch.nn.Module):
    """``fn`` applied to the recorded arguments with their tensors as the inputs."""

    def __init__(self, fn: Any, leaves: list, spec: Any, slots: list[int]) -> None:
        super().__init__()
        self.fn, self.leaves, self.spec, self.slots = fn, leaves, spec, slots

    def forward(self, *tensors: torch.Tensor) -> Any:
        leaves = list(self.leaves)
        for i, t in zip(self.slots, tensors):
            leaves[i] = t
        args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        return self.fn(*args, **kwargs)


def tensor_getitem(ctx: Ctx, x: Value, idx: Any) -> Value:
    """``x[idx]``: ints, slices, None, Ellipsis, index tensors and lists."""
    if isinstance(x, list | tuple):
        return x[idx]
    items = list(idx) if isinstance(idx, tuple) else [idx]
    r = ctx.rank(x)
    used = sum(
        1 if not (i is None or i is Ellipsis) else 0
        for i in items
        if not (isinstance(i, Value) and i.dtype is DType.BOOL)
    ) + sum(ctx.rank(i) for i in items if isinstance(i, Value) and i.dtype is DType.BOOL)
    if Ellipsis in items:
        k = items.index(Ellipsis)
        items = items[:k] + [slice(None)] * (r - used) + items[k + 1 :]
    dim = 0
    tensors: list[Any] = []
    y = x
    for it in items:
        if it is None:
            y = ctx.op("unsqueeze", y, axes=[dim])
            tensors.append(None)
            dim += 1
        elif isinstance(it, bool):
            raise Unsupported("indexing with a Python bool")
        elif isinstance(it, int):
            y = ctx.call("aten.select.int", y, dim, it)
        elif isinstance(it, slice):
            if not (it.start is None and it.stop is None and it.step is None):
                y = ctx.call("aten.slice.Tensor", y, dim, it.start, it.stop, it.step or 1)
            tensors.append(None)
            dim += 1
        elif isinstance(it, Value | list):
            t = it if isinstance(it, Value) else ctx.const(it, DType.INT64)
            tensors.append(t)
            dim += ctx.rank(t) if t.dtype is DType.BOOL else 1
        else:
            raise Unsupported(f"index of type {type(it).__name__}")
    if any(t is not None for t in tensors):
        while tensors and tensors[-1] is None:
            tensors.pop()
        y = ctx.call("aten.index.Tensor", y, tensors)
    return y


def from_fx(
    graph_module: torch.fx.GraphModule,
    example_args: tuple = (),
    *,
    example_kwargs: dict[str, Any] | None = None,
    input_names: list[str] | None = None,
    input_types: dict[str, TensorType] | None = None,
) -> Graph:
    """Translate a torch.fx GraphModule (e.g. ``torch.fx.symbolic_trace`` output).

    Args:
        graph_module: the traced module.
        example_args: inputs to run it on once, to learn dtypes and shapes.
        example_kwargs: keyword inputs, by placeholder name.
        input_names: names for the tensor inputs; default: the placeholder names.
        input_types: dtype/shape overrides by input name.

    Returns:
        The translated graph.
    """
    if isinstance(example_args, torch.Tensor):
        example_args = (example_args,)
    gm = graph_module
    g = Graph(type(gm).__name__ if type(gm).__name__ != "GraphModule" else "")
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    values = list(example_args)
    kw = dict(example_kwargs or {})
    for n in placeholders[len(values) :]:
        if n.name in kw:
            values.append(kw.pop(n.name))
        elif n.target in kw:
            values.append(kw.pop(n.target))
        else:
            values.append(n.args[0] if n.args else None)
    leaf = {
        n.name
        for n in gm.graph.nodes
        if (n.op == "call_module" and type(gm.get_submodule(n.target)) not in MODULES)
        or (n.op == "call_function" and inspect.isfunction(n.target) and n.target not in _FUNCTIONS)
    }
    modes = [(m, m.training) for m in gm.modules()]
    gm.eval()
    try:
        rec = _Recorder(gm, leaf)
        with torch.no_grad():
            rec.run(*values)
    finally:
        for m, training in modes:  # each as it was (train() would set all alike)
            m.training = training
    src = FxSource(gm, rec, g, overrides=bool(input_types))
    tr = Translator(g, src)
    tensor_inputs = [(n, v) for n, v in zip(placeholders, values) if isinstance(v, torch.Tensor)]
    if input_names is not None and len(input_names) != len(tensor_inputs):
        raise ConversionError(
            f"input_names has {len(input_names)} names for {len(tensor_inputs)} tensor inputs"
        )
    for i, (n, v) in enumerate(tensor_inputs):
        # The forward signature's name (fx renames builtins such as `input` to `input_1`).
        default = n.target if isinstance(n.target, str) and n.target.isidentifier() else n.name
        name = input_names[i] if input_names is not None else default
        t = TensorType(to_msc(v.dtype), tuple(v.shape))
        if input_types and name in input_types:
            t = input_types[name]
        src.inputs[n.name] = g.add_input(name, t)
    # Every parameter and buffer, by state_dict name (tied ones once).
    seen: dict[int, Value] = {}
    named = list(gm.named_parameters(remove_duplicate=False))
    named += list(gm.named_buffers(remove_duplicate=False))
    buffers = {id(t) for _, t in gm.named_buffers(remove_duplicate=False)}
    volatile = {
        f"{prefix}.{b}" if prefix else b
        for prefix, m in gm.named_modules(remove_duplicate=False)
        for b in getattr(m, "_non_persistent_buffers_set", ())
    }
    persistent: list[str] = []
    aliases: dict[str, str] = {}
    for path, t in named:
        if _TENSOR_CONSTANT.fullmatch(path) and id(t) not in seen:
            if not is_small_constant(t):  # small ones: constant nodes, made by get_attr
                seen[id(t)] = src._add(path, t)
                src.constants.append(path)
            continue
        if id(t) in seen:
            src.weights[path] = seen[id(t)]
            aliases[path] = seen[id(t)].name  # type: ignore[assignment]
        else:
            seen[id(t)] = src._add(path, t)
            if id(t) in buffers:
                (src.constants if path in volatile else persistent).append(path)
    out = tr.run(gm.graph)
    outputs: list[Value] = []  # a value returned twice is two outputs, as eager returns it

    def spec(x: Any) -> Any:
        x = tr.resolve(x) if isinstance(x, torch.fx.Node) else x
        if isinstance(x, Value):
            outputs.append(x)
            return {"leaf": len(outputs) - 1}
        if isinstance(x, dict):
            return {"dict": [[k, spec(v)] for k, v in x.items()]}
        if isinstance(x, list):
            return {"list": [spec(v) for v in x]}
        if isinstance(x, tuple):
            return {"tuple": [spec(v) for v in x]}
        if x is None or isinstance(x, bool | int | float | str):
            return {"const": x}
        raise ConversionError(f"output of type {type(x).__name__} cannot be kept")

    tree = spec(out)
    g.set_outputs(outputs)
    g.output_tree = tree
    finish(g, persistent, src.constants, aliases)
    return checked(g)
