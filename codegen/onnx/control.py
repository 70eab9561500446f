"""Emitters for control flow: ops whose attributes hold subgraphs.

# NOTE: a branch is emitted into the model's one namespace (ONNX values are unique across
# scopes) and reads outer values and weights by name, as ONNX subgraphs do.
"""

from __future__ import annotations

from codegen.onnx.registry import Emit, Ref, emitter


@emitter("if", since=1)
def if_(e: Emit, condition: Ref, *, then_branch, else_branch):
    then_g = e.subgraph(then_branch, f"{e.fresh('then')}")
    else_g = e.subgraph(else_branch, f"{e.fresh('else')}")
    n = len(then_branch.outputs)
    return e.op("If", condition, outputs=n, then_branch=then_g, else_branch=else_g)
