"""Module paths and weight names that torch.onnx's files carry, recovered.

torch.onnx keeps the PyTorch module hierarchy in two places:

- the legacy (TorchScript) exporter names nodes by scope: ``/layer1/layer1.0/conv1/Conv`` is
  the ``Conv`` of module ``layer1.0.conv1`` (a component is a child's name, or under a
  container the container's name and the index: ``downsample/downsample.0``);
- the dynamo exporter writes ``pkg.torch.onnx.name_scopes`` (``['', 'layer1', 'layer1.0',
  'layer1.0.bn1', '_native_batch_norm_legit_no_training']``: module paths, then the FX node
  name) and ``pkg.torch.onnx.fx_node`` (``... call_function[target=torch.ops.aten.relu.default]``)
  in each node's metadata_props.

Weights the exporter made itself (BatchNorm folded into a conv: ``onnx::Conv_193``; a linear's
transposed weight: ``onnx::MatMul_269``, ``val_37``) are renamed from their uses: the module of
every node that reads them, and the input's role in the op's schema (``conv.weight``,
``conv.bias``); a matmul's right operand is the transposed weight (``weight~T``). The bias
onnxscript's BatchNorm fusion adds (``conv1.weight_bias``) becomes the conv's ``bias``. A value
the legacy exporter computed and stored (constant folding keeps the scope-style name of the
node it folded: ``/bert/embeddings/position_embeddings/Gather_output_0``) is named after that
module and op: ``bert.embeddings.position_embeddings.gather_output``.

The dynamo exporter also writes the ExportedProgram's graph signature
(``pkg.torch.export.ExportedProgram.graph_signature`` in the graph's metadata_props: each
placeholder ``p_model_norm_weight: PARAMETER target='model.norm.weight'``, buffers with
``persistent=``) and, per node, the FX node it lowered (``pkg.torch.onnx.fx_node``: its
arguments name the placeholders it reads). An initializer the exporter renamed (``val_257``)
read only by nodes of FX nodes that read one parameter or buffer ``X`` is that tensor: ``X``
itself when the file holds no ``X`` (onnxscript's optimizer renamed it), ``X~T`` when the FX
node is ``aten.linear`` (the weight stored transposed, as codegen.onnx names its own; the
linear fusion turns it back into ``X``). Every weight then gets the source's role: a
parameter, a buffer, and anything the exporter made (folded lookups, rotary tables, shape
constants) a constant, which no state_dict carries.

# NOTE: these strings come from an untrusted file; they are only data here (module paths and
# names), parsed with ``ast.literal_eval`` at most, and codegens sanitize them as any name.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from msc.ir.graph import Graph, Node, Provenance, Weight
from msc.ops.fusions import PRETRANSPOSED

__all__ = ["scope_provenance", "recover_weight_names", "Signature", "read_signature"]

_FX_TARGET = re.compile(r"target=torch\.ops\.([A-Za-z_][\w.]*)")
_GENERATED = re.compile(r"^(onnx::[A-Za-z_]+_\d+|val_\d+)$")
_ROLES = {"weight", "bias", "running_mean", "running_var", "scale"}
# A scope-style value name: ``/bert/embeddings/position_embeddings/Gather_output_0`` is output
# 0 of the Gather of module ``bert.embeddings.position_embeddings``.
_SCOPE_VALUE = re.compile(r"^/(?:[^/]+/)+([A-Za-z][A-Za-z0-9]*?)(_\d+)?_output_(\d+)$")


def _scope_module(name: str) -> str:
    """``/layer1/layer1.0/conv1/Conv`` -> ``layer1.0.conv1`` ("" when not scope-style)."""
    if not name.startswith("/"):
        return ""
    path, prev = "", ""
    for p in name.split("/")[1:-1]:
        if not p or p == prev:
            continue
        if prev and p.startswith(prev + "."):  # a container's child: its own name + ".0"
            path += p[len(prev) :]
        else:
            path = f"{path}.{p}" if path else p
        prev = p
    return path


def _class_stack(scopes: list[str], text: str) -> tuple[tuple[str, str], ...]:
    """(module path, class name) per module scope, from the dynamo exporter's
    ``pkg.torch.onnx.class_hierarchy`` (the class of each entry of ``name_scopes``); the class
    name is only data (a codegen sanitizes it)."""
    if not text:
        return ()
    try:
        classes = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return ()
    if not isinstance(classes, list) or len(classes) != len(scopes):
        return ()
    return tuple(
        (path, cls.rpartition(".")[2])
        for path, cls in zip(scopes[1:-1], classes[1:-1])
        if isinstance(cls, str) and path
    )


TORCH_ONNX_GRAPH = "main_graph"  # the name torch.onnx gives every graph it writes


def root_class(props: dict[str, str]) -> str:
    """The class of the exported module itself (the first entry of a node's
    ``pkg.torch.onnx.class_hierarchy``, its scope ``''``), as a bare name; "" when not
    recorded. Only data: a codegen sanitizes it."""
    text = props.get("pkg.torch.onnx.class_hierarchy", "")
    if not text.startswith("["):
        return ""
    try:
        classes = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return ""
    if not isinstance(classes, list) or len(classes) < 2 or not isinstance(classes[0], str):
        return ""
    return classes[0].rpartition(".")[2]


def scope_provenance(
    name: str, props: dict[str, str], op_label: str, inputs: Sequence[str] = ()
) -> Provenance | None:
    """The provenance torch.onnx recorded for a node, or None when it recorded none. A conv
    that onnxscript fused with its BatchNorm is the conv's (its scopes are the BatchNorm's;
    its weight keeps the conv's name)."""
    scopes = props.get("pkg.torch.onnx.name_scopes")
    if scopes:
        try:
            items = ast.literal_eval(scopes)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            items = None
        if isinstance(items, list) and items and all(isinstance(s, str) for s in items):
            m = _FX_TARGET.search(props.get("pkg.torch.onnx.fx_node", ""))
            module = items[-2] if len(items) >= 2 else ""
            fused = "FuseBatchNormIntoConv" in props.get("pkg.onnxscript.rewriter.rule_name", "")
            if fused and len(inputs) > 1 and inputs[1].endswith(".weight"):
                module = inputs[1].removesuffix(".weight")
            stack = _class_stack(items, props.get("pkg.torch.onnx.class_hierarchy", ""))
            return Provenance("torch", m.group(1) if m else op_label, items[-1], module, stack)
    module = _scope_module(name)
    if module:
        return Provenance("onnx", op_label, name, module)
    return None


def _role(n: Node, index: int, g: Graph) -> str:
    op = n.op
    try:
        schema = g.opset.get(op)
    except Exception:  # a custom op: no schema
        schema = None
    if op == "matmul" and index == 1:
        return "weight" + PRETRANSPOSED
    if op == "gemm" and index == 1:
        return "weight"
    if op == "gemm" and index == 2:
        return "bias"
    if op == "add" and len(n.inputs) == 2:
        other = n.inputs[1 - index]
        w = n.inputs[index]
        if other is not None and other.producer is not None and other.producer.op == "matmul":
            return "bias" if w is not None and len(w.type.shape or ()) == 1 else ""
        return ""
    if schema is None or index >= len(schema.inputs):
        return ""
    name = schema.inputs[index].name.rstrip("?").lstrip("*")
    return name if name in _ROLES else ""


def _folded_name(name: str) -> str:
    """``/a/b/Gather_1_output_0`` -> ``a.b.gather_1_output`` ("" when not scope-style)."""
    m = _SCOPE_VALUE.match(name)
    module = _scope_module(name) if m else ""
    if not m or not module:
        return ""
    op = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", m.group(1)).lower()
    index = int(m.group(3))
    return f"{module}.{op}{m.group(2) or ''}_output" + (f"_{index}" if index else "")


def recover_weight_names(g: Graph, signature: Signature | None = None) -> int:
    """Rename exporter-made weights of ``g`` after the source tensor the graph signature says
    they are, else after their uses, and folded values after the node they were computed by
    (see the module docstring); then give every weight its source role when the file has a
    signature. Returns how many were renamed. A weight read by nodes of different modules,
    or in a role without a name, keeps its name."""
    new: dict[str, str] = {}
    taken = set(g.weights)
    for name, w in g.weights.items():
        folded = name.endswith(".weight_bias")  # onnxscript's FuseBatchNormIntoConv
        base = signature.source_of(name, w, g) if signature is not None else ""
        if base in taken:
            base = ""
        base = base or _folded_name(name)
        if not base and (_GENERATED.match(name) or folded) and w.uses:
            base = _from_uses(g, name, w, folded)
        if not base:
            continue
        cand, k = base, 1
        while cand in taken:
            cand, k = f"{base}_{k}", k + 1
        taken.add(cand)
        new[name] = cand
    if new:
        items: list[tuple[str, Weight]] = []
        for name, w in g.weights.items():
            if name in new:
                w.name = new[name]
            items.append((w.name, w))
        g.weights.clear()
        g.weights.update(items)
    if signature is not None:
        signature.set_roles(g)
    return len(new)


def _from_uses(g: Graph, name: str, w: Weight, folded: bool) -> str:
    """``<module>.<role>`` of the one module and role ``w`` is read in, else ""."""
    modules = {n.provenance.module for n, _ in w.uses}
    roles = {_role(n, i, g) for n, i in w.uses}
    if folded and roles == {"bias"}:
        modules = {name[: -len(".weight_bias")]}
    if len(modules) != 1 or len(roles) != 1 or "" in modules or "" in roles:
        return ""
    return f"{modules.pop()}.{roles.pop()}"


# ``p_model_norm_weight: PARAMETER target='model.norm.weight'`` (buffers add ``persistent=``).
_SPEC = re.compile(
    r"^(\w+): (PARAMETER|BUFFER|CONSTANT_TENSOR) target=(['\"])([^'\"\n]+)\3"
    r"(?: persistent=(True|False))?$",
    re.M,
)
_PLACEHOLDER = re.compile(r"%(\w+)")
_LINEAR = re.compile(r"^aten\.linear(\.|$)")


@dataclass
class Signature:
    """What torch.onnx's dynamo exporter recorded of the ExportedProgram: each placeholder's
    kind and target (``specs``: name -> (kind, target, persistent)), and the placeholders the
    FX node of each node reading an initializer named (``reads``: initializer name -> the
    placeholders, one set per reading node)."""

    specs: dict[str, tuple[str, str, bool]] = field(default_factory=dict)
    reads: dict[str, list[set[str]]] = field(default_factory=dict)

    def source_of(self, name: str, w: Weight, g: Graph) -> str:
        """The source name of an exporter-named weight (see the module docstring), or ""."""
        if not _GENERATED.match(name) or not w.uses or name not in self.reads:
            return ""
        targets = set()
        for placeholders in self.reads[name]:
            found = {self.specs[p][1] for p in placeholders if p in self.specs}
            if len(found) != 1:
                return ""
            targets |= found
        if len(targets) != 1:
            return ""
        target = targets.pop()
        linear = [bool(_LINEAR.match(n.provenance.op)) for n, _ in w.uses]
        if all(linear) and all(n.op == "matmul" and i == 1 for n, i in w.uses):
            return target + PRETRANSPOSED if w.type.rank == 2 else ""
        if any(linear) or target in g.weights:
            return ""
        return target

    def set_roles(self, g: Graph) -> None:
        """Each weight's role: the signature's for the parameters and buffers (and their
        transposed copies), a constant for everything the exporter made; and the tied names
        torch.export kept one placeholder of (see ``_ties``)."""
        kinds = {target: (kind, persistent) for kind, target, persistent in self.specs.values()}
        for name, w in g.weights.items():
            kind, persistent = kinds.get(name.removesuffix(PRETRANSPOSED), ("", False))
            if kind == "PARAMETER":
                w.role = "parameter"
            elif kind == "BUFFER" and persistent:
                w.role = "buffer"
            else:
                w.role = "constant"
        for w, alias in self._ties(g):
            w.aliases = [*w.aliases, alias]

    def _ties(self, g: Graph) -> list[tuple[Weight, str]]:
        """(weight, tied name) for each parameter ``<m>.<leaf>`` the file lacks whose module
        ``m`` still runs nodes, all reading one parameter named ``<...>.<leaf>``: torch.export
        keeps one placeholder of tied parameters (GPT-2's ``transformer.wte.weight`` is read
        as ``lm_head.weight``). A parameter torch.onnx folded away (a position table) has no
        nodes left in its module, and keeps no name."""
        by_module: dict[str, list[Node]] = {}
        for n in g.nodes:
            by_module.setdefault(n.provenance.module, []).append(n)
        out = []
        for kind, target, _ in self.specs.values():
            module, _, leaf = target.rpartition(".")
            if kind != "PARAMETER" or target in g.weights or not module:
                continue
            read = {id(v): v for n in by_module.get(module, ()) for v in n.inputs}
            weights = [v for v in read.values() if isinstance(v, Weight)]
            if len(weights) != 1:
                continue
            w = weights[0]
            if w.role == "parameter" and w.name.rpartition(".")[2] == leaf:
                out.append((w, target))
        return out


def read_signature(
    text: str, nodes: Iterable[tuple[Sequence[str], Mapping[str, str]]], initializers: set[str]
) -> Signature | None:
    """The signature torch.onnx recorded (``text``: the graph's
    ``pkg.torch.export.ExportedProgram.graph_signature``) and what each node (its inputs and
    metadata_props) read of it; None when the text holds no placeholder."""
    specs = {
        m.group(1): (m.group(2), m.group(4), m.group(5) != "False") for m in _SPEC.finditer(text)
    }
    if not specs:
        return None
    reads: dict[str, list[set[str]]] = {}
    for inputs, props in nodes:
        # The FX node's arguments: ``%x : [...] = call_function[target=...](args = ...)``
        # (found by position, not by a pattern: the text is untrusted and may be long).
        fx = props.get("pkg.torch.onnx.fx_node", "")
        start = fx.find("](")
        placeholders = set(_PLACEHOLDER.findall(fx, start)) if start >= 0 else set()
        for x in set(inputs) & initializers:
            reads.setdefault(x, []).append(placeholders)
    return Signature(specs, reads)
