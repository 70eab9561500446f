"""torch.export ExportedProgram -> msc Graph, and nn.Module -> ExportedProgram -> msc Graph.

# NOTE: invariants
# - Parameters, buffers and large lifted constants become weights named by their state_dict /
#   constants key (``encoder.layers.0.self_attn.in_proj_weight``), found through the
#   graph signature; a weight used twice (tied) is one weight. Small lifted constants (a
#   ``torch.tensor([...])`` in forward) become ``constant`` nodes. Each weight's ``role`` says
#   whether it is a parameter, a persistent buffer or a constant (non-persistent buffers and
#   lifted constants), and a tied weight's other names are its ``aliases``, so a codegen
#   registers exactly what the source module had.
# - Graph inputs are the user-input placeholders, named after the forward signature (torch
#   names placeholders by argument), in flattened order; ``input_names`` overrides them.
# - A symbolic dim becomes ``SymDim(name, min, max)``: the name of the user's ``Dim`` where the
#   shape environment remembers it (a saved .pt2 keeps none), else ``batch`` for an input's
#   axis 0 and ``<input>_<axis>`` for another, after the first user input dim it is, else
#   torch's symbol (``s0``); the range from
#   ``range_constraints``. A size torch computed from symbols (``2*s0``, ``s0 + 1``,
#   ``FloorDiv``, ``Mod``, ``Min``, ``Max``) becomes the same expression (msc.ir.symexpr).
# - The output structure (``out_spec``) is kept in ``graph.output_tree``; an output under a dict
#   key (a ModelOutput's ``logits``) is named by its key path.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

from msc.errors import ConversionError, UnsupportedOp, UnsupportedOpsError
from msc.frontend.torch.decompose import decompose, explain, overload, unconverted_ops
from msc.frontend.torch.dtypes import tensor_to_numpy
from msc.frontend.torch.translate import (
    Call,
    Source,
    Translator,
    constant_node,
    finish,
    is_small_constant,
    target_key,
)
from msc.ir import Graph, SymDim, TensorType, Value
from msc.ops.custom import CUSTOM_OPS
from msc.text.check import checked

__all__ = ["from_torch", "from_exported_program"]


def _clean_path(path: Any) -> str:
    if not isinstance(path, str) or path.startswith("_empty_nn_module_stack"):
        return ""
    for prefix in ("L['self'].", "L__self__."):
        if path.startswith(prefix):
            path = path[len(prefix) :]
    return path


def _module_path(node: torch.fx.Node) -> str:
    stack = node.meta.get("nn_module_stack")
    if not stack:
        return ""
    return _clean_path(list(stack.values())[-1][0])


_STACKS: dict[tuple, tuple[tuple[str, str], ...]] = {}  # one tuple per distinct stack


def _module_stack(node: torch.fx.Node) -> tuple[tuple[str, str], ...]:
    """(module path, type name) per entry of the node's nn_module_stack, outermost first; the
    type is the class's own name (``LlamaDecoderLayer``), only data for a codegen to sanitize."""
    stack = node.meta.get("nn_module_stack")
    if not stack:
        return ()
    out = []
    for entry in stack.values():
        path = _clean_path(entry[0]) if isinstance(entry, tuple) and entry else ""
        if not path:
            continue
        t = entry[1] if len(entry) > 1 else ""
        name = getattr(t, "__name__", None) if not isinstance(t, str) else t
        out.append((path, str(name or "").rpartition(".")[2]))
    key = tuple(out)
    return _STACKS.setdefault(key, key) if len(_STACKS) < 100_000 else key


class ExportSource(Source):
    def __init__(self, ep: ExportedProgram, translator_graph: Graph, overrides: bool) -> None:
        self.ep = ep
        self.graph = translator_graph
        self.weights: dict[str, Value] = {}  # placeholder name -> weight
        self.inputs: dict[str, Value] = {}  # placeholder name -> graph input
        self.constants: dict[str, Any] = {}  # placeholder name -> non-tensor constant
        self.overrides = overrides

    def placeholder(self, node: torch.fx.Node) -> Any:
        for table in (self.weights, self.inputs, self.constants):
            if node.name in table:
                return table[node.name]
        return None  # a token or an unused input

    def get_attr(self, node: torch.fx.Node) -> Any:
        obj: Any = self.ep.graph_module
        for part in node.target.split("."):
            obj = getattr(obj, part)
        return obj  # a submodule of a higher-order op (wrap_with_set_grad_enabled, cond)

    def normalize(self, node: torch.fx.Node, env: dict) -> Call:
        return Call(target_key(node.target), tuple(node.args), dict(node.kwargs))

    def meta(self, node: torch.fx.Node) -> Any:
        return node.meta.get("val")

    def module_path(self, node: torch.fx.Node) -> str:
        return _module_path(node)

    def module_stack(self, node: torch.fx.Node) -> tuple[tuple[str, str], ...]:
        return _module_stack(node)

    def refine_shapes(self) -> bool:
        return not self.overrides


def _where(sym: Any, placeholders: list[torch.fx.Node], users: set[str], taken: set[str]) -> str:
    """A name for a symbol torch knows no Dim name of, from the first user input dim that is
    that symbol: ``batch`` for an axis 0, else ``<input>_<axis>`` (``input_ids_1``), as
    msc.from_tflite names a file's -1 dims; "" when no input has it as a dim."""
    for n in placeholders:
        if n.name not in users:
            continue
        for axis, d in enumerate(getattr(n.meta.get("val"), "shape", ())):
            if isinstance(d, torch.SymInt) and d.node.expr == sym:
                for name in (("batch",) if axis == 0 else ()) + (f"{n.name}_{axis}",):
                    if name not in taken:
                        return name
    return ""


def _symbols(
    ep: ExportedProgram, placeholders: list[torch.fx.Node], user_inputs: set[str] = frozenset()
) -> dict[Any, SymDim]:
    """torch symbol -> SymDim with the user's Dim name (else one from where it first appears,
    ``_where``) and the range torch proved."""
    env = None
    for n in placeholders:
        val = n.meta.get("val")
        for d in getattr(val, "shape", ()):
            if isinstance(d, torch.SymInt):
                env = d.node.shape_env
                break
        if env is not None:
            break
    debug = getattr(env, "source_name_to_debug_name", {}) if env is not None else {}
    sources = getattr(env, "var_to_sources", {}) if env is not None else {}
    out: dict[Any, SymDim] = {}
    taken: set[str] = set()
    for sym, vr in ep.range_constraints.items():
        if not getattr(sym, "is_Symbol", False):
            continue
        name = ""
        for src in sources.get(sym, ()):
            user = debug.get(src.name() if callable(src.name) else src.name)
            if user and user not in taken:
                name = user
                break
        if not name:  # a saved .pt2 keeps no Dim names: named after where it first appears
            name = _where(sym, placeholders, user_inputs, taken) or str(sym)
        taken.add(name)
        lo = _bound(vr.lower)
        hi = _bound(vr.upper)
        out[sym] = SymDim(name, lo, hi)
    return out


def _bound(x: Any) -> int | None:
    try:
        v = int(x)
    except Exception:  # noqa: BLE001 - sympy infinities raise assorted errors
        return None
    return v if abs(v) < 2**62 else None


def tree_spec(spec: Any, leaves: list[Any]) -> Any:
    """An output_tree spec from a pytree TreeSpec and the flat outputs (Values or constants);
    the k-th Value leaf is graph output k."""
    pos, k = [0], [0]

    def walk(s: Any) -> Any:
        if s.is_leaf():
            x = leaves[pos[0]]
            pos[0] += 1
            if isinstance(x, Value):
                k[0] += 1
                return {"leaf": k[0] - 1}
            if x is None or isinstance(x, bool | int | float | str):
                return {"const": x}
            raise ConversionError(f"output of type {type(x).__name__} cannot be kept")
        kids = [walk(c) for c in s.children()]
        t = s.type
        if t is dict or (isinstance(t, type) and issubclass(t, dict)) or _is_model_output(t):
            keys = list(s.context) if s.context is not None else []
            return {"dict": [[k, c] for k, c in zip(keys, kids)]}
        if t is list:
            return {"list": kids}
        return {"tuple": kids}

    return walk(spec)


def name_outputs(g: Graph) -> None:
    """Outputs the source returns under string dict keys (a ModelOutput's ``logits``, a dict's
    entries) are named by their key path (``logits``, ``hidden_states.0``), where that name is
    free and the value is computed by a node (an input or weight returned as it is keeps its
    name)."""
    tree = g.output_tree
    if tree is None:
        return
    taken = {v.name for v in g.values()} | set(g.weights)
    done: set[int] = set()  # id of each value named (a value returned twice: by its first key)

    def walk(spec: Any, path: list[str], keyed: bool) -> None:
        ((kind, body),) = spec.items()
        if kind == "leaf" and keyed and id(g.outputs[body]) not in done:
            done.add(id(g.outputs[body]))
            v, name = g.outputs[body], ".".join(path)
            if v.producer is not None and name not in taken:
                taken.add(name)
                v.name = name
        elif kind == "dict":
            for k, c in body:
                walk(c, [*path, str(k)], isinstance(k, str))
        elif kind in ("tuple", "list"):  # indices count inside a dict entry only
            for i, c in enumerate(body):
                walk(c, [*path, str(i)] if keyed else path, keyed)

    walk(tree, [], False)


def _is_model_output(t: Any) -> bool:
    return isinstance(t, type) and any(c.__name__ == "ModelOutput" for c in t.__mro__)


def from_exported_program(
    ep: ExportedProgram,
    *,
    input_names: list[str] | None = None,
    input_types: dict[str, TensorType] | None = None,
    name: str = "",
    custom_ops: str = "error",
    _aliases: dict[str, str] | None = None,
) -> Graph:
    """Translate a torch.export ExportedProgram (the default IR or after run_decompositions).

    Args:
        ep: the exported program.
        input_names: names for the graph inputs (flattened user inputs, in order); by default
            the forward signature's argument names as torch.export gives them.
        input_types: overrides for input types by (final) input name.
        name: the graph's name.
        custom_ops: what to do with a torch.library op (outside PyTorch's own namespaces)
            that has no converter: "error" reports it with every other untranslatable op;
            "keep" keeps it as a custom node ``namespace::name@1``, which codegen.torch calls
            as ``torch.ops.namespace.name`` and codegen.onnx writes in domain ``namespace``.

    Returns:
        The translated graph (self-checked when MSC_CHECK is set).

    An op with no converter, or whose converter refuses this use, is rewritten with
    PyTorch's own decomposition of it (only those ops; see msc.frontend.torch.decompose),
    repeatedly, until the program translates or what is left has no decomposition.

    Raises:
        UnsupportedOpsError: listing every op that could not be translated, each saying
            whether a decomposition was tried and why it did not help.
    """
    if _mutates_views(ep):
        # Writes through views (x[:, 1] = 0) need functionalization; an empty decomposition
        # table functionalizes and keeps the high-level ops.
        ep = ep.run_decompositions({})
    if custom_ops not in CUSTOM_OPS:
        raise ValueError(f"custom_ops must be one of {CUSTOM_OPS}, got {custom_ops!r}")
    tried: dict[str, str] = {}  # op key -> what its decomposition did
    ep, _ = decompose(ep, unconverted_ops(ep), tried)
    for _ in range(_ROUNDS):
        try:
            return _translate(ep, input_names, input_types, name, custom_ops, _aliases, tried)
        except UnsupportedOpsError as e:
            ops = [op for op in (overload(o.op) for o in e.ops) if op is not None]
            ep, changed = decompose(ep, ops, tried)
            if not changed:
                raise explain(e, tried) from e.__cause__
    return _translate(ep, input_names, input_types, name, custom_ops, _aliases, tried)


# Rounds of decomposition after the first translation attempt (each may expose new ops).
_ROUNDS = 8


def _translate(
    ep: ExportedProgram,
    input_names: list[str] | None,
    input_types: dict[str, TensorType] | None,
    name: str,
    custom_ops: str,
    _aliases: dict[str, str] | None,
    tried: dict[str, str],
) -> Graph:
    g = Graph(name)
    gm = ep.graph_module
    sig = ep.graph_signature
    src = ExportSource(ep, g, overrides=bool(input_types))
    tr = Translator(g, src)
    tr.custom_ops = custom_ops
    tr.decomposed = {k for k, how in tried.items() if how == "decomposed"}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    tr.symbols = _symbols(ep, placeholders, set(sig.user_inputs))

    # Weights: parameters, buffers, lifted constants, by their state_dict/constants key.
    problems: list[UnsupportedOp] = []
    by_name = {n.name: n for n in placeholders}
    user_specs = []
    by_tensor: dict[Any, Value] = {}
    tied: dict[str, str] = {}  # another name of a tied weight -> the weight's name
    buffers: list[str] = []  # persistent buffers
    constants: list[str] = []  # non-persistent buffers and large lifted constants
    for spec in sig.input_specs:
        arg_name = getattr(spec.arg, "name", None)
        if spec.kind == InputKind.USER_INPUT:
            user_specs.append(spec)
            continue
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            key = spec.target
            t = ep.state_dict.get(key) if key in ep.state_dict else ep.constants.get(key)
            if not isinstance(t, torch.Tensor):
                problems.append(UnsupportedOp("constant", arg_name, key, "not a tensor"))
                continue
            if spec.kind == InputKind.CONSTANT_TENSOR and _same_tensor(t) in by_tensor:
                # a parameter read as a lifted constant (Keras' torch backend reads variables
                # this way): the parameter's weight, whatever its size
                src.weights[arg_name] = by_tensor[_same_tensor(t)]
            elif spec.kind == InputKind.CONSTANT_TENSOR and is_small_constant(t):
                src.weights[arg_name] = constant_node(g, arg_name, t)
            elif key in g.weights:
                src.weights[arg_name] = g.weights[key]
            elif _same_tensor(t) in by_tensor:  # tied: one weight, used wherever either name is
                src.weights[arg_name] = w = by_tensor[_same_tensor(t)]
                tied[key] = w.name
            else:
                w = g.add_weight(key, tensor_to_numpy(t))
                src.weights[arg_name] = by_tensor[_same_tensor(t)] = w
                if spec.kind == InputKind.BUFFER:
                    (buffers if spec.persistent else constants).append(key)
                elif spec.kind == InputKind.CONSTANT_TENSOR:
                    constants.append(key)
        elif spec.kind == InputKind.CUSTOM_OBJ:
            problems.append(UnsupportedOp("custom object", arg_name, spec.target, "script object"))
        # TOKEN inputs (effect ordering) carry no data.
    if problems:
        raise UnsupportedOpsError(problems)
    # Names the state_dict has beside the signature's (a loaded .pt2 has no module to ask).
    tied |= _tied_in_state_dict(ep, g, by_tensor, buffers, set(_aliases or ()))

    # User inputs, in flattened order.
    tensor_specs = []
    for spec in user_specs:
        node = by_name[spec.arg.name]
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            tensor_specs.append((spec.arg.name, val))
        else:
            src.constants[spec.arg.name] = val
    if input_names is not None and len(input_names) != len(tensor_specs):
        raise ConversionError(
            f"input_names has {len(input_names)} names for {len(tensor_specs)} tensor inputs "
            f"({', '.join(n for n, _ in tensor_specs)})"
        )
    for i, (pname, val) in enumerate(tensor_specs):
        iname = input_names[i] if input_names is not None else pname
        t = tr.torch_type(val)
        if input_types and iname in input_types:
            t = input_types[iname]
        src.inputs[pname] = g.add_input(iname, t)
        tr.ctx.torch_shapes[id(src.inputs[pname])] = tuple(val.shape)
    if input_types:
        unknown = set(input_types) - {v.name for v in g.inputs}
        if unknown:
            raise ConversionError(f"input_types names unknown inputs: {sorted(unknown)}")

    out_arg = tr.run(gm.graph)

    # Outputs: user outputs only (buffer mutations are training state).
    flat = list(out_arg) if isinstance(out_arg, list | tuple) else [out_arg]
    user_out = [
        i for i, s in enumerate(sig.output_specs) if s.kind == OutputKind.USER_OUTPUT
    ] or list(range(len(flat)))
    leaves = [tr.resolve(flat[i]) for i in user_out]
    # one graph output per tensor the program returns, a tensor returned twice twice (as
    # eager returns it, and as every target then writes it)
    g.set_outputs([x for x in leaves if isinstance(x, Value)])
    g.output_tree = tree_spec(ep.call_spec.out_spec, leaves)
    name_outputs(g)
    finish(g, buffers, constants, tied | (_aliases or {}))
    return checked(g)


def _same_tensor(t: torch.Tensor) -> Any:
    """A key equal for two tensors that are one tensor under two names: the same object, or
    the same elements of one storage (a tie as a saved program restores it: two Parameters
    on one storage)."""
    if t.numel() == 0 or t.device.type == "meta":
        return id(t)
    st = t.untyped_storage()
    return (st.data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)


def _is_view(node: Any) -> bool:
    t = getattr(node, "target", None)
    if not isinstance(t, torch._ops.OpOverload):
        return False
    return any(r.alias_info is not None for r in t._schema.returns)


def _mutates_views(ep: ExportedProgram) -> bool:
    """Does the graph write in place into a view of another tensor?"""
    for n in ep.graph.nodes:
        t = n.target
        if n.op != "call_function" or not isinstance(t, torch._ops.OpOverload):
            continue
        if not t._schema.is_mutable or not n.args:
            continue
        if _is_view(n.args[0]) or any(_is_view(u) for u in n.args[0].users if u is not n):
            return True
    return False


def _tied_in_state_dict(
    ep: ExportedProgram,
    g: Graph,
    by_tensor: dict[Any, Value],
    buffers: list[str],
    known: set[str],
) -> dict[str, str]:
    """Names the program's state_dict has beside the ones its signature reads (torch.export
    may lift a tied parameter once; ``known`` ones the module named already), each -> the
    weight whose tensor it is: the same elements of one storage (``_same_tensor``; msc's .pt2
    reader gives names stored in one payload file one storage). Equal values alone are not a
    tie: two weights that merely start equal may be trained apart. A name tied to nothing
    found is its own unused weight (a persistent buffer, added to ``buffers``, unless it is a
    Parameter), so the source's state_dict still loads with every key."""
    seen = {s.target for s in ep.graph_signature.input_specs if s.target is not None}
    out: dict[str, str] = {}
    for key, t in ep.state_dict.items():
        if key in seen or key in known or key in g.weights or not isinstance(t, torch.Tensor):
            continue
        same = by_tensor.get(_same_tensor(t))
        if same is not None:
            out[key] = same.name
        else:
            g.add_weight(key, tensor_to_numpy(t))
            if not isinstance(t, torch.nn.Parameter):
                buffers.append(key)
    return out


def _aliases(module: torch.nn.Module) -> dict[str, str]:
    """Tied parameter/buffer names -> the name torch.export keeps (the first)."""
    first: dict[int, str] = {}
    out: dict[str, str] = {}
    items = list(module.named_parameters(remove_duplicate=False))
    items += list(module.named_buffers(remove_duplicate=False))
    for n, t in items:
        k = id(t)
        if k in first:
            if first[k] != n:
                out[n] = first[k]
        else:
            first[k] = n
    return out


def from_torch(
    module: torch.nn.Module,
    example_args: tuple = (),
    *,
    example_kwargs: dict[str, Any] | None = None,
    input_names: list[str] | None = None,
    input_types: dict[str, TensorType] | None = None,
    dynamic_shapes: Any = None,
    custom_ops: str = "error",
) -> Graph:
    """Export ``module`` with torch.export (eval mode, non-strict) and translate it.

    Args:
        module: the model; it is put in eval mode for the export and restored after.
        example_args: example positional inputs (a single tensor is accepted too).
        example_kwargs: example keyword inputs.
        input_names: names for the graph inputs; default: the forward signature's.
        input_types: dtype/shape overrides by input name.
        dynamic_shapes: as for ``torch.export.export``; ``Dim`` names become symbol names.
        custom_ops: "error" or "keep", as for ``from_exported_program``.

    Returns:
        The translated graph.
    """
    if isinstance(example_args, torch.Tensor):
        example_args = (example_args,)
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        ep = torch.export.export(
            module,
            tuple(example_args),
            kwargs=example_kwargs,
            dynamic_shapes=dynamic_shapes,
            strict=False,
        )
    finally:
        for m, training in modes:  # each as it was (train() would set all alike)
            m.training = training
    name = type(module).__name__
    return from_exported_program(
        ep,
        input_names=input_names,
        input_types=input_types,
        name=name,
        custom_ops=custom_ops,
        _aliases=_aliases(module),
    )
