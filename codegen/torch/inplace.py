"""Where the generated code may overwrite a tensor instead of allocating the result.

A residual block's ``hidden_state += residual`` (transformers' ResNet) or ``out += identity``
and ``nn.ReLU(inplace=True)`` (torchvision) reach the graph as a plain ``add`` and ``relu``:
written as they are, every block allocates (and the allocator faults in) one more activation
than the source does. Where it is provably safe the code writes them in place again.

# NOTE: invariants
# - A node overwrites its operand ``a`` only where ``a`` is a fresh intermediate of the
#   forward that computes the node: made by an op in ``FRESH`` (its emitted code always returns
#   a new tensor, never a view or an input, and autograd's backward of that op does not read
#   it), read by this node alone, not a graph output, of the node's result type (dtype and
#   shape: no broadcast or promotion changes it), and defined in the same forward (its
#   producer's block is the node's block or one inside it: never a parameter of the forward).
# - The result of a node written in place is not fresh for another one: ``a += b;
#   relu_(a)`` would be safe, but torch.export's program then writes into the result of an
#   in-place op, which msc's frontend reads as a write through a view and functionalizes
#   (decomposing flatten and the like), so the re-import would differ. One in-place op per
#   tensor: ``a += b; relu(a)``, as transformers' ResNet writes it.
# - An activation module (``nn.ReLU``) is constructed with ``inplace=True`` only when every
#   call of it qualifies; functional code writes the ``_`` variant (``torch.relu_``).
# - Only top-level nodes are considered: nothing inside a branch or a loop body.
"""

from __future__ import annotations

import ast

from codegen.torch import code
from msc.ir.dtype import DType
from msc.ir.graph import Graph, Node, Weight

__all__ = ["FRESH", "BINARY", "UNARY", "MODULES", "overwritten", "apply_modules", "rewrite"]

# Ops whose emitted code returns a new tensor that the op's backward does not read (not
# relu, sigmoid, tanh, exp: their backward reads the result; not mul, div: an in-place
# product keeps a copy of its left operand for the backward).
FRESH = frozenset(
    {"conv", "conv_transpose", "batch_norm", "linear", "matmul", "gemm", "layer_norm",
     "group_norm", "add", "sub"}
)  # fmt: skip

# op -> the augmented assignment operator. Only the left operand is overwritten: ``b += a``
# for ``a + b`` computes the same sum, but re-exports as ``add(b, a)``, a different graph.
BINARY: dict[str, type[ast.operator]] = {"add": ast.Add, "sub": ast.Sub}
# op -> its in-place torch function, for functional code
UNARY: dict[str, tuple[str, str]] = {"relu": ("torch.relu", "torch.relu_")}
# op -> the activation module that takes ``inplace=True``
MODULES: dict[str, str] = {"relu": "ReLU"}


def overwritten(graph: Graph, contains) -> dict[Node, int]:
    """The top-level nodes the code may compute in place, each with the index of the operand
    it overwrites (the left one). ``contains(n, p)``: whether the forward that computes node
    ``n`` also defines the output of node ``p`` (same block, or a block inside it)."""
    outputs = {id(v) for v in graph.outputs}
    fresh: set[int] = set()  # values nothing else holds
    out: dict[Node, int] = {}
    for n in graph.nodes:
        if len(n.outputs) != 1 or any(True for _ in n.subgraphs()):
            continue
        arity = 2 if n.op in BINARY else 1 if n.op in UNARY else 0
        a = n.inputs[0] if arity and len(n.inputs) == arity else None
        if (
            a is not None
            and not isinstance(a, Weight)
            and id(a) in fresh
            and id(a) not in outputs
            and len(a.uses) == 1
            and a.type == n.outputs[0].type
            and a.type.dtype is not DType.BOOL
            and a.type.shape is not None
            and contains(n, a.producer)
        ):
            out[n] = 0
        elif n.op in FRESH:
            fresh.add(id(n.outputs[0]))
    return out


def apply_modules(inplace: dict[Node, int], leaves) -> None:
    """Construct the activation modules all of whose calls are in ``inplace`` with
    ``inplace=True`` (``leaves``: the plan's leaves; their constructor is changed)."""
    for leaf in leaves:
        calls = list(leaf.calls)
        if not calls or any(n not in inplace for n in calls):
            continue
        kind = MODULES.get(calls[0].op)
        ctor = leaf.ctor
        if kind is None or any(n.op != calls[0].op for n in calls):
            continue
        if ast.dump(ctor) == ast.dump(code.call(f"nn.{kind}")):
            leaf.ctor = code.call(f"nn.{kind}", inplace=True)


def rewrite(node: Node, value: ast.expr, index: int, target: str) -> ast.stmt | ast.expr | None:
    """The in-place form of ``value``, the expression emitted for ``node`` whose operand
    ``index`` is the local ``target``: an augmented assignment (``target += b``) for a
    binary operator, the ``_`` function for a unary one (an expression); None when the code
    is not of the expected form (a Python size, another spelling), to be kept as it is."""
    if node.op in BINARY:
        op = BINARY[node.op]
        if not (isinstance(value, ast.BinOp) and isinstance(value.op, op)):
            return None
        sides = [value.left, value.right]
        mine = sides[index]
        if not (isinstance(mine, ast.Name) and mine.id == target):
            return None
        return ast.AugAssign(ast.Name(target, ast.Store()), op(), sides[1 - index])
    if node.op in UNARY:
        plain, inplace = UNARY[node.op]
        if not (isinstance(value, ast.Call) and ast.unparse(value.func) == plain):
            return None
        arg = value.args[0] if len(value.args) == 1 and not value.keywords else None
        if not (isinstance(arg, ast.Name) and arg.id == target):
            return None
        return code.call(inplace, arg)
    return None
