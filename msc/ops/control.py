"""Control flow: ops whose attributes hold subgraphs.

# NOTE: a branch is a Graph with no inputs of its own; it reads outer values by reference
# (ONNX If, torch.cond after its operands are bound). Both branches give the same number of
# outputs with matching dtypes.
"""

from __future__ import annotations

from msc.ir.graph import Graph
from msc.ir.types import TensorType
from msc.ops import registry
from msc.ops.infer import InferError
from msc.ops.schema import Attr


@registry.op(
    "if",
    ["condition"],
    {"then_branch": Attr.graph(), "else_branch": Attr.graph()},
    outputs=lambda a: len(a["then_branch"].outputs),
    category="control",
)
def if_(condition: TensorType, *, then_branch: Graph, else_branch: Graph):
    """then_branch's outputs if the one-element bool condition holds, else else_branch's."""
    if len(then_branch.outputs) != len(else_branch.outputs):
        raise InferError(
            f"if: then_branch gives {len(then_branch.outputs)} outputs, "
            f"else_branch {len(else_branch.outputs)}"
        )
    out = []
    for i, (a, b) in enumerate(zip(then_branch.outputs, else_branch.outputs)):
        if a.dtype is not b.dtype:
            raise InferError(f"if: output {i} is {a.dtype.short} in then, {b.dtype.short} in else")
        out.append(
            a.type
            if a.type == b.type
            else TensorType(
                a.dtype,
                None
                if a.rank != b.rank
                else [x if x == y else None for x, y in zip(a.shape, b.shape)],
            )
        )
    return out
