"""Emitters for control flow: ops whose attributes hold subgraphs.

# NOTE: a branch is emitted into the model's one namespace (ONNX values are unique across
# scopes) and reads outer values and weights by name, as ONNX subgraphs do.
"""

from __future__ import annotations

from codegen.onnx.registry import Emit, Ref, Unsupported, emitter


@emitter("if", since=1)
def if_(e: Emit, condition: Ref, *, then_branch, else_branch):
    then_g = e.subgraph(then_branch, f"{e.fresh('then')}")
    else_g = e.subgraph(else_branch, f"{e.fresh('else')}")
    n = len(then_branch.outputs)
    return e.op("If", condition, outputs=n, then_branch=then_g, else_branch=else_g)


@emitter("loop", since=11)
def loop(e: Emit, max_trip_count: Ref | None, cond: Ref | None, *initial: Ref, body):
    g = e.subgraph(body, e.fresh("body"))
    n = len(body.outputs) - 1
    return e.op("Loop", max_trip_count, cond, *initial, outputs=n, body=g)


@emitter("scan", since=9)
def scan(e: Emit, *xs: Ref, body, num_scan_inputs, scan_input_axes,
         scan_input_directions, scan_output_axes, scan_output_directions):  # fmt: skip
    if e.opset < 11 and any(a < 0 for a in (*(scan_input_axes or ()), *(scan_output_axes or ()))):
        raise Unsupported("negative scan axes need opset 11")
    g = e.subgraph(body, e.fresh("body"))
    return e.op(
        "Scan",
        *xs,
        outputs=len(body.outputs),
        body=g,
        num_scan_inputs=num_scan_inputs,
        scan_input_axes=scan_input_axes,
        scan_input_directions=scan_input_directions,
        scan_output_axes=scan_output_axes,
        scan_output_directions=scan_output_directions,
    )
