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
``conv.bias``); a matmul's right operand is the transposed weight (``weight_t``). The bias
onnxscript's BatchNorm fusion adds (``conv1.weight_bias``) becomes the conv's ``bias``. A value
the legacy exporter computed and stored (constant folding keeps the scope-style name of the
node it folded: ``/bert/embeddings/position_embeddings/Gather_output_0``) is named after that
module and op: ``bert.embeddings.position_embeddings.gather_output``.

# NOTE: these strings come from an untrusted file; they are only data here (module paths and
# names), parsed with ``ast.literal_eval`` at most, and codegens sanitize them as any name.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from msc.ir.graph import Graph, Node, Provenance, Weight

__all__ = ["scope_provenance", "recover_weight_names"]

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
        return "weight_t"
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


def recover_weight_names(g: Graph) -> int:
    """Rename exporter-made weights of ``g`` after their uses, and folded values after the
    node they were computed by (see the module docstring); returns how many were renamed. A
    weight read by nodes of different modules, or in a role without a name, keeps its name."""
    new: dict[str, str] = {}
    taken = set(g.weights)
    for name, w in g.weights.items():
        folded = name.endswith(".weight_bias")  # onnxscript's FuseBatchNormIntoConv
        base = _folded_name(name)
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
