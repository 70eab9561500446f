"""Control flow: ops whose attributes hold subgraphs.

# NOTE: a branch is a Graph with no inputs of its own; it reads outer values by reference
# (ONNX If, torch.cond after its operands are bound). Both branches give the same number of
# outputs with matching dtypes. A loop or scan body is a Graph whose inputs are bound by the op
# on each iteration; it too reads outer values (and the top-level graph's weights) by
# reference. Values carried from one iteration to the next keep their dtype; a dim that
# changes between iterations is unknown (None) in the op's output type.
"""

from __future__ import annotations

from msc.ir.dtype import DType
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
                if a.type.rank != b.type.rank
                else [x if x == y else None for x, y in zip(a.shape, b.shape)],
            )
        )
    return out


def _merge(a: TensorType, b: TensorType) -> TensorType:
    """The type both ``a`` and ``b`` fit: dims that differ become unknown."""
    if a == b:
        return a
    if a.rank != b.rank or a.shape is None or b.shape is None:
        return TensorType(a.dtype, None)
    return TensorType(a.dtype, [x if x == y else None for x, y in zip(a.shape, b.shape)])


def _scalar(t: TensorType | None, dtype: DType) -> bool:
    return t is None or (t.dtype is dtype and (t.shape is None or t.numel() in (None, 1)))


@registry.op(
    "loop",
    ["max_trip_count?", "cond?", "*initial"],
    {"body": Attr.graph()},
    outputs=lambda a: len(a["body"].outputs) - 1,
    category="control",
    min_variadic=0,
)
def loop(
    max_trip_count: TensorType | None,
    cond: TensorType | None,
    initial: list[TensorType],
    *,
    body: Graph,
):
    """Run ``body`` while ``iteration < max_trip_count`` and ``cond`` (ONNX Loop).

    ``body`` takes (iteration: i64 scalar, cond: bool scalar, *carried) and gives (cond,
    *carried, *scan_outputs). An absent ``max_trip_count`` means no bound; an absent ``cond``
    means true. The body's cond output decides whether another iteration runs (onnxruntime's
    reading of ONNX Loop, also when ``cond`` is absent). Outputs: the carried values after the last
    iteration (the initial values when there is none), then each scan output of every
    iteration stacked along a new first axis.
    """
    n = len(initial)
    if not _scalar(max_trip_count, DType.INT64):
        raise InferError(f"loop: max_trip_count must be one i64, got {max_trip_count}")
    if not _scalar(cond, DType.BOOL):
        raise InferError(f"loop: cond must be one bool, got {cond}")
    if len(body.inputs) != n + 2:
        raise InferError(
            f"loop: body takes {len(body.inputs)} inputs, needs {n + 2} "
            f"(iteration, cond and {n} carried)"
        )
    if len(body.outputs) < n + 1:
        raise InferError(
            f"loop: body gives {len(body.outputs)} outputs, needs at least {n + 1} "
            f"(cond and {n} carried)"
        )
    if body.outputs[0].dtype is not DType.BOOL:
        raise InferError(f"loop: body's first output (cond) is {body.outputs[0].dtype.short}")
    out = []
    for i, (init, b_in, b_out) in enumerate(zip(initial, body.inputs[2:], body.outputs[1:])):
        if not init.dtype is b_in.dtype is b_out.dtype:
            raise InferError(
                f"loop: carried value {i} is {init.dtype.short} initially, "
                f"{b_in.dtype.short} into the body, {b_out.dtype.short} out of it"
            )
        out.append(_merge(init, b_out.type))
    for v in body.outputs[n + 1 :]:
        shape = None if v.shape is None else (None, *v.shape)
        out.append(TensorType(v.dtype, shape))
    return out


@registry.op(
    "scan",
    ["*xs"],
    {
        "body": Attr.graph(),
        "num_scan_inputs": Attr.int(),
        "scan_input_axes": Attr.ints(None),
        "scan_input_directions": Attr.ints(None),
        "scan_output_axes": Attr.ints(None),
        "scan_output_directions": Attr.ints(None),
    },
    outputs=lambda a: len(a["body"].outputs),
    category="control",
)
def scan(
    xs: list[TensorType],
    *,
    body: Graph,
    num_scan_inputs: int,
    scan_input_axes,
    scan_input_directions,
    scan_output_axes,
    scan_output_directions,
):
    """Run ``body`` once per slice of the scan inputs, threading state (ONNX Scan, opset 9+).

    ``xs`` are the N initial states, then the M scan inputs. ``body`` takes (*states, *one
    slice of each scan input along its axis) and gives (*states, *scan output elements).
    Outputs: the final states, then each scan output's elements stacked along its axis. A
    direction of 1 walks the input backwards / stacks the output backwards; absent axes and
    directions are all 0.
    """
    m = num_scan_inputs
    n = len(xs) - m
    if m < 1 or n < 0:
        raise InferError(f"scan: num_scan_inputs={m} with {len(xs)} inputs")
    if len(body.inputs) != len(xs):
        raise InferError(f"scan: body takes {len(body.inputs)} inputs, the node gives {len(xs)}")
    k = len(body.outputs) - n
    if k < 0:
        raise InferError(f"scan: body gives {len(body.outputs)} outputs, needs at least {n}")
    for what, v, want in (
        ("scan_input_axes", scan_input_axes, m),
        ("scan_input_directions", scan_input_directions, m),
        ("scan_output_axes", scan_output_axes, k),
        ("scan_output_directions", scan_output_directions, k),
    ):
        if v is not None and len(v) != want:
            raise InferError(f"scan: {what} has {len(v)} entries, needs {want}")
    seq: object = None
    in_axes = scan_input_axes or (0,) * m
    for j, (x, a) in enumerate(zip(xs[n:], in_axes)):
        if x.shape is None:
            continue
        r = len(x.shape)
        if not -r <= a < r:
            raise InferError(f"scan: scan_input_axes[{j}]={a} is out of range for rank {r}")
        if seq is None:
            seq = x.shape[a % r]
    out = []
    for i, (init, b_in, b_out) in enumerate(zip(xs[:n], body.inputs, body.outputs)):
        if not init.dtype is b_in.dtype is b_out.dtype:
            raise InferError(
                f"scan: state {i} is {init.dtype.short} initially, {b_in.dtype.short} into "
                f"the body, {b_out.dtype.short} out of it"
            )
        out.append(_merge(init, b_out.type))
    out_axes = scan_output_axes or (0,) * k
    for j, (v, a) in enumerate(zip(body.outputs[n:], out_axes)):
        if v.shape is None:
            out.append(TensorType(v.dtype, None))
            continue
        r = len(v.shape) + 1
        if not -r <= a < r:
            raise InferError(f"scan: scan_output_axes[{j}]={a} is out of range for rank {r}")
        shape = list(v.shape)
        shape.insert(a % r, seq)  # type: ignore[arg-type]
        out.append(TensorType(v.dtype, shape))
    return out
