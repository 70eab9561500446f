"""The TFLite op table: each builtin op as a one-op model built by the tests' own writer, read
by msc, and run through generated PyTorch and through ONNX (onnxruntime) against LiteRT's
interpreter, with the tolerance stated per row; then written back by codegen.tflite and run in
LiteRT again (the round trip TFLite -> msc -> TFLite)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the tflite extra (tflite, flatbuffers) is not installed")
pytest.importorskip("ai_edge_litert", reason="LiteRT (ai-edge-litert) is not installed")

import codegen.tflite  # noqa: E402
import msc  # noqa: E402
from msc.errors import UnsupportedOpsError  # noqa: E402
from tests.tflite_cases import (  # noqa: E402
    RNG,
    Case,
    In,
    build,
    close,
    f32,
    feeds,
    i32,
    run_litert,
    run_onnx,
    run_torch,
)

X = f32(1, 6, 7, 3)
W = f32(4, 3, 3, 3, lo=-0.5, hi=0.5)  # OHWI
B = f32(4)
POS = f32(2, 3, 4, lo=0.1, hi=3.0)


def _unary(op: str, x=None, **kw) -> Case:
    return Case(op, [In(f32(2, 3, 4) if x is None else x)], **kw)


def _binary(op: str, a=None, b=None, **kw) -> Case:
    return Case(op, [In(f32(2, 3, 4) if a is None else a), In(f32(3, 4) if b is None else b)], **kw)


def _lstm(
    *, batch=2, steps=5, size=3, units=4, peepholes=False, cifg=False, time_major=False, act=4, **kw
) -> Case:
    """UNIDIRECTIONAL_SEQUENCE_LSTM (its 24 inputs): per-gate weights i, f, c, o (no input
    gate's with CIFG), optional peepholes, the two state variables; no projection or layer
    norm."""
    x = f32(steps, batch, size) if time_major else f32(batch, steps, size)

    def gates(*shape, skip_input=cifg):
        return [None if skip_input and k == 0 else In(f32(*shape, lo=-1, hi=1), const=True)
                for k in range(4)]  # fmt: skip

    peep = [None] * 3
    if peepholes:
        peep = [None if cifg and k == 0 else In(f32(units, lo=-1, hi=1), const=True)
                for k in range(3)]  # fmt: skip
    state = [In(np.zeros((batch, units), np.float32), variable=True) for _ in range(2)]
    ins = [In(x), *gates(units, size), *gates(units, units), *peep, *gates(units),
           None, None, *state, None, None, None, None]  # fmt: skip
    return Case("UNIDIRECTIONAL_SEQUENCE_LSTM", ins,
                {"fused_activation_function": act, "time_major": time_major}, **kw)  # fmt: skip


def _rnn(*, batch=2, steps=5, size=3, units=4, time_major=False, act=4, **kw) -> Case:
    x = f32(steps, batch, size) if time_major else f32(batch, steps, size)
    ins = [In(x), In(f32(units, size, lo=-1, hi=1), const=True),
           In(f32(units, units, lo=-1, hi=1), const=True), In(f32(units), const=True),
           In(np.zeros((batch, units), np.float32), variable=True)]  # fmt: skip
    return Case("UNIDIRECTIONAL_SEQUENCE_RNN", ins,
                {"fused_activation_function": act, "time_major": time_major}, **kw)  # fmt: skip


CASES = [
    # elementwise
    *[
        _unary(op)
        for op in [
            "ABS",
            "CEIL",
            "COS",
            "EXP",
            "FLOOR",
            "NEG",
            "RELU",
            "RELU6",
            "RELU_N1_TO_1",
            "RELU_0_TO_1",
            "ROUND",
            "SIN",
            "TANH",
            "ELU",
            "SQUARE",
            "SIGN",
        ]
    ],
    _unary("LOGISTIC", atol=1e-6),
    _unary("HARD_SWISH", atol=1e-6),
    _unary("LOG", POS),
    _unary("SQRT", POS),
    _unary("RSQRT", POS, atol=1e-5, rtol=1e-4),
    _unary("LEAKY_RELU", options={"alpha": 0.2}),
    _unary("GELU", options={"approximate": False}, atol=1e-5),
    Case("GELU", [In(f32(2, 5))], {"approximate": True}, atol=1e-5, id="GELU-tanh"),
    *[_binary(op) for op in ["ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE"]],
    _binary("DIV", b=f32(3, 4, lo=0.5, hi=2.0), rtol=1e-5),
    _binary("POW", a=POS, atol=1e-4, rtol=1e-5),
    _binary("FLOOR_DIV", b=f32(3, 4, lo=0.5, hi=2.0)),
    _binary("FLOOR_MOD", b=f32(3, 4, lo=0.5, hi=2.0), atol=1e-5),
    Case(
        "ADD",
        [
            In(f32(2, 3, 4)),
            In(f32(3, 4)),
        ],
        {"fused_activation_function": 1},
        id="ADD-relu",
    ),
    Case(
        "MUL",
        [In(f32(2, 3, 4)), In(f32(4), const=True)],
        {"fused_activation_function": 3},
        id="MUL-relu6-const",
    ),
    *[
        _binary(op, out_dtype=np.bool_)
        for op in ["LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL"]
    ],
    Case("PRELU", [In(f32(2, 3, 4)), In(f32(4), const=True)]),
    Case("SELECT_V2", [In(f32(2, 3) > 0), In(f32(2, 3)), In(f32(2, 3))]),
    Case("CAST", [In(f32(2, 3) * 5)], {"in_data_type": 0, "out_data_type": 2}, out_dtype=np.int32),
    Case("ADD_N", [In(f32(2, 3)), In(f32(2, 3)), In(f32(2, 3))]),
    # nn
    Case(
        "CONV_2D",
        [In(X), In(W, const=True), In(B, const=True)],
        {"padding": 0, "stride_w": 1, "stride_h": 1},
        atol=1e-5,
        id="CONV_2D-same",
    ),
    Case(
        "CONV_2D",
        [In(X), In(W, const=True), In(B, const=True)],
        {"padding": 1, "stride_w": 2, "stride_h": 2, "fused_activation_function": 1},
        atol=1e-5,
        id="CONV_2D-valid-stride-relu",
    ),
    Case(
        "CONV_2D",
        [In(X), In(W, const=True), In(B, const=True)],
        {"padding": 0, "stride_w": 2, "stride_h": 2, "dilation_w_factor": 1},
        atol=1e-5,
        id="CONV_2D-same-stride2",
    ),
    Case(
        "DEPTHWISE_CONV_2D",
        [In(X), In(f32(1, 3, 3, 6), const=True), In(f32(6), const=True)],
        {"padding": 0, "stride_w": 1, "stride_h": 1, "depth_multiplier": 2},
        atol=1e-5,
    ),
    Case(
        "TRANSPOSE_CONV",
        [In(i32([1, 12, 14, 4]), const=True), In(W, const=True), In(X)],
        {"padding": 0, "stride_w": 2, "stride_h": 2},
        atol=1e-5,
        out_dtype=np.float32,
    ),
    Case(
        "FULLY_CONNECTED",
        [In(f32(2, 5)), In(f32(3, 5), const=True), In(f32(3), const=True)],
        atol=1e-5,
    ),
    Case(
        "FULLY_CONNECTED",
        [In(f32(2, 4, 5)), In(f32(3, 5), const=True), None],
        {"keep_num_dims": True},
        atol=1e-5,
        id="FULLY_CONNECTED-keep-dims",
    ),
    Case("BATCH_MATMUL", [In(f32(2, 3, 4)), In(f32(2, 5, 4))], {"adj_y": True}, atol=1e-5),
    Case(
        "AVERAGE_POOL_2D",
        [In(X)],
        {"padding": 0, "stride_w": 2, "stride_h": 2, "filter_width": 3, "filter_height": 3},
        atol=1e-6,
    ),
    Case(
        "MAX_POOL_2D",
        [In(X)],
        {"padding": 1, "stride_w": 2, "stride_h": 2, "filter_width": 2, "filter_height": 2},
    ),
    Case(
        "MAX_POOL_2D",
        [In(X)],
        {"padding": 0, "stride_w": 2, "stride_h": 2, "filter_width": 3, "filter_height": 3},
        id="MAX_POOL_2D-same",
    ),
    Case(
        "L2_POOL_2D",
        [In(X)],
        {"padding": 1, "stride_w": 1, "stride_h": 1, "filter_width": 2, "filter_height": 2},
        atol=1e-5,
    ),
    Case("SOFTMAX", [In(f32(2, 7))], {"beta": 1.0}, atol=1e-6),
    Case("SOFTMAX", [In(f32(2, 7))], {"beta": 0.5}, atol=1e-6, id="SOFTMAX-beta"),
    Case("LOG_SOFTMAX", [In(f32(2, 7))], atol=1e-5),
    Case("L2_NORMALIZATION", [In(f32(2, 7))], atol=1e-6),
    Case(
        "LOCAL_RESPONSE_NORMALIZATION",
        [In(X)],
        {"radius": 1, "bias": 1.0, "alpha": 0.5, "beta": 0.75},
        atol=1e-5,
    ),
    Case(
        "RESIZE_BILINEAR",
        [In(X), In(i32([12, 9]), const=True)],
        {"half_pixel_centers": True},
        atol=1e-5,
    ),
    Case(
        "RESIZE_BILINEAR",
        [In(X), In(i32([11, 13]), const=True)],
        {"align_corners": True},
        atol=1e-5,
        id="RESIZE_BILINEAR-align",
    ),
    Case("RESIZE_NEAREST_NEIGHBOR", [In(X), In(i32([12, 14]), const=True)]),
    Case(
        "RESIZE_NEAREST_NEIGHBOR",
        [In(X), In(i32([12, 14]), const=True)],
        {"half_pixel_centers": True},
        id="RESIZE_NEAREST_NEIGHBOR-half",
    ),
    Case("EMBEDDING_LOOKUP", [In(i32([1, 0, 3])), In(f32(5, 4), const=True)], out_dtype=np.float32),
    # recurrent (the graph is the first run: the state variables start at zeros)
    _lstm(id="UNIDIRECTIONAL_SEQUENCE_LSTM"),
    _lstm(time_major=True, id="UNIDIRECTIONAL_SEQUENCE_LSTM-time-major"),
    _lstm(peepholes=True, id="UNIDIRECTIONAL_SEQUENCE_LSTM-peepholes"),
    _lstm(cifg=True, peepholes=True, id="UNIDIRECTIONAL_SEQUENCE_LSTM-cifg-peepholes"),
    _lstm(act=1, id="UNIDIRECTIONAL_SEQUENCE_LSTM-relu"),
    _rnn(id="UNIDIRECTIONAL_SEQUENCE_RNN"),
    _rnn(time_major=True, act=1, id="UNIDIRECTIONAL_SEQUENCE_RNN-time-major-relu"),
    _rnn(act=0, id="UNIDIRECTIONAL_SEQUENCE_RNN-none"),
    # shape
    Case("RESHAPE", [In(f32(2, 3, 4)), In(i32([4, -1]), const=True)]),
    Case("TRANSPOSE", [In(f32(2, 3, 4)), In(i32([2, 0, 1]), const=True)]),
    Case("CONCATENATION", [In(f32(2, 3)), In(f32(2, 5))], {"axis": 1}),
    Case("SQUEEZE", [In(f32(2, 1, 3, 1))], {"squeeze_dims": [1]}),
    Case("EXPAND_DIMS", [In(f32(2, 3)), In(i32([1]), const=True)]),
    Case("PACK", [In(f32(2, 3)), In(f32(2, 3))], {"values_count": 2, "axis": 1}),
    Case("UNPACK", [In(f32(2, 3, 4))], {"num": 3, "axis": 1}, outputs=3),
    Case("SPLIT", [In(i32(1), const=True), In(f32(2, 6))], {"num_splits": 3}, outputs=3),
    Case(
        "SPLIT_V",
        [In(f32(2, 6)), In(i32([1, -1, 2]), const=True), In(i32(1), const=True)],
        {"num_splits": 3},
        outputs=3,
    ),
    Case(
        "SLICE",
        [In(f32(3, 5)), In(i32([1, 1]), const=True), In(i32([2, -1]), const=True)],
        out_shapes=[[2, 4]],
    ),
    Case(
        "STRIDED_SLICE",
        [
            In(f32(4, 6, 5)),
            In(i32([1, 0, 4]), const=True),
            In(i32([3, 6, 0]), const=True),
            In(i32([1, 2, -1]), const=True),
        ],
        {"begin_mask": 2, "end_mask": 4},
    ),
    Case(
        "STRIDED_SLICE",
        [
            In(f32(4, 6, 5)),
            In(i32([1, 2]), const=True),
            In(i32([2, 5]), const=True),
            In(i32([1, 1]), const=True),
        ],
        {"shrink_axis_mask": 1, "new_axis_mask": 0},
        id="STRIDED_SLICE-shrink",
    ),
    Case(  # bounds computed at run time (tf.signal.frame's ends, from a SHAPE)
        "STRIDED_SLICE",
        [
            In(f32(4, 6, 5)),
            In(i32([1, 0, 4])),
            In(i32([3, 6, 0])),
            In(i32([1, 2, -1]), const=True),
        ],
        {"begin_mask": 2, "end_mask": 4},
        id="STRIDED_SLICE-run-time-bounds",
    ),
    Case("PAD", [In(f32(2, 3)), In(i32([[1, 0], [2, 1]]), const=True)]),
    Case(
        "PADV2",
        [
            In(f32(2, 3)),
            In(i32([[1, 0], [2, 1]]), const=True),
            In(np.float32(-3.0).reshape(()), const=True),
        ],
    ),
    Case("MIRROR_PAD", [In(f32(3, 4)), In(i32([[1, 1], [2, 1]]), const=True)], {"mode": 0}),
    Case("GATHER", [In(f32(5, 4)), In(i32([4, 0, 2]))], {"axis": 0}),
    Case(
        "GATHER", [In(f32(3, 5)), In(i32([[1], [3]]), const=True)], {"axis": 1}, id="GATHER-axis1"
    ),
    Case("GATHER_ND", [In(f32(3, 4, 2)), In(i32([[0, 1], [2, 3]]), const=True)]),
    Case("TILE", [In(f32(2, 3)), In(i32([2, 1]), const=True)]),
    Case("BROADCAST_TO", [In(f32(1, 3)), In(i32([4, 3]), const=True)]),
    Case("SHAPE", [In(f32(2, 3, 4))], {"out_type": 2}, out_dtype=np.int32),
    Case(
        "FILL",
        [In(i32([2, 3]), const=True), In(np.float32(1.5).reshape(()), const=True)],
        out_dtype=np.float32,
    ),
    Case("REVERSE_V2", [In(f32(3, 4)), In(i32([1]), const=True)]),
    Case("DEPTH_TO_SPACE", [In(f32(1, 2, 3, 8))], {"block_size": 2}),
    Case("SPACE_TO_DEPTH", [In(f32(1, 4, 6, 2))], {"block_size": 2}),
    Case("ZEROS_LIKE", [In(f32(2, 3))]),
    # reduce
    *[
        Case(
            op,
            [In(f32(2, 3, 4)), In(i32([1, 2]), const=True)],
            {"keep_dims": kd},
            atol=1e-5,
            id=f"{op}-{kd}",
        )
        for op in ["MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"]
        for kd in (False, True)
    ],
    Case(
        "ARG_MAX", [In(f32(3, 5)), In(i32([1]), const=True)], {"output_type": 2}, out_dtype=np.int32
    ),
    Case(
        "ARG_MIN", [In(f32(3, 5)), In(i32([0]), const=True)], {"output_type": 4}, out_dtype=np.int64
    ),
    Case("CUMSUM", [In(f32(3, 5)), In(i32(1), const=True)], {"exclusive": True}, atol=1e-5),
    Case(
        "TOPK_V2",
        [In(f32(3, 7)), In(i32(3), const=True)],
        outputs=2,
        out_dtype=[np.float32, np.int32],
    ),
    # quantization
    Case("QUANTIZE", [In(f32(2, 5))], out_quant=([0.02], [3]), out_dtype=np.int8, atol=1),
    Case(
        "DEQUANTIZE",
        [In(RNG.integers(-128, 127, (2, 5)).astype(np.int8), scale=[0.05], zero_point=[-2])],
        out_dtype=np.float32,
    ),
    Case(
        "DEQUANTIZE", [In(f32(2, 5).astype(np.float16))], out_dtype=np.float32, id="DEQUANTIZE-f16"
    ),
    Case(
        "FULLY_CONNECTED",
        [
            In(f32(2, 5)),
            In(
                RNG.integers(-127, 127, (3, 5)).astype(np.int8),
                const=True,
                scale=[0.01, 0.02, 0.015],
                zero_point=[0, 0, 0],
            ),
            In(f32(3), const=True),
        ],
        atol=0.05,
        id="FULLY_CONNECTED-hybrid-int8",
    ),
    Case(
        "CONV_2D",
        [
            In(RNG.integers(-128, 127, (1, 5, 5, 3)).astype(np.int8), scale=[0.05], zero_point=[1]),
            In(
                RNG.integers(-127, 127, (2, 3, 3, 3)).astype(np.int8),
                const=True,
                scale=[0.01, 0.02],
                zero_point=[0, 0],
            ),
            In(
                RNG.integers(-100, 100, (2,)).astype(np.int32),
                const=True,
                scale=[0.0005, 0.001],
                zero_point=[0, 0],
            ),
        ],
        {"padding": 0, "stride_w": 1, "stride_h": 1},
        out_quant=([0.1], [-3]),
        atol=1,
        id="CONV_2D-int8",
    ),
    Case(
        "ADD",
        [
            In(RNG.integers(-128, 127, (2, 6)).astype(np.int8), scale=[0.05], zero_point=[2]),
            In(RNG.integers(-128, 127, (2, 6)).astype(np.int8), scale=[0.03], zero_point=[-1]),
        ],
        out_quant=([0.08], [0]),
        atol=1,
        id="ADD-int8",
    ),
    # ops the table had no row of (the completeness test below lists what is left)
    _binary("ATAN2", b=f32(2, 3, 4), atol=1e-5),
    *[
        Case(op, [In(f32(2, 3) > 0), In(f32(3) > 0)], out_dtype=np.bool_)
        for op in ["LOGICAL_AND", "LOGICAL_OR"]
    ],
    Case("LOGICAL_NOT", [In(f32(2, 3) > 0)], out_dtype=np.bool_),
    Case("BITWISE_XOR", [In(i32([[5, -3, 7]])), In(i32([6, 2, -9]))]),
    Case("RIGHT_SHIFT", [In(i32([[64, -64, 7]])), In(i32([3, 2, 1]))]),
    Case("SELECT", [In(f32(2, 3) > 0), In(f32(2, 3)), In(f32(2, 3))]),
    *[
        Case(
            op,
            [In(f32(2, 3, 4) > 0), In(i32([1]), const=True)],
            {"keep_dims": False},
            out_dtype=np.bool_,
        )
        for op in ["REDUCE_ALL", "REDUCE_ANY"]
    ],  # fmt: skip
    Case(
        "ONE_HOT",
        [
            In(i32([0, 2, 1])),
            In(i32(4), const=True),
            In(f32(1) * 0 + 1.0, const=True),
            In(f32(1) * 0, const=True),
        ],
        {"axis": -1},
        out_dtype=np.float32,
    ),  # fmt: skip
    Case(
        "ONE_HOT",
        [
            In(i32([[0, 3], [1, 9]])),
            In(i32(4), const=True),
            In(f32(1) * 0 + 2.5, const=True),
            In(f32(1) * 0 - 1.0, const=True),
        ],
        {"axis": 1},
        out_dtype=np.float32,
        id="ONE_HOT-values-axis1",
    ),  # fmt: skip
    Case("RANK", [In(f32(2, 3, 4))], out_dtype=np.int32),
    Case(
        "SCATTER_ND",
        [In(i32([[0], [2]]), const=True), In(f32(2, 3)), In(i32([4, 3]), const=True)],
    ),
    Case(
        "CONV_3D",
        [In(f32(1, 4, 5, 6, 2)), In(f32(2, 3, 3, 2, 3, lo=-0.5, hi=0.5), const=True)],
        {"padding": 1, "stride_d": 1, "stride_w": 1, "stride_h": 1},
        atol=1e-5,
    ),
    Case(
        "CONV_3D",
        [
            In(f32(2, 5, 7, 6, 3)),
            In(f32(3, 3, 2, 3, 4, lo=-0.5, hi=0.5), const=True),
            In(f32(4), const=True),
        ],
        {"padding": 0, "stride_d": 2, "stride_w": 1, "stride_h": 2, "dilation_w_factor": 2},
        atol=1e-5,
        id="CONV_3D-same-strided-dilated-bias",
    ),
    Case(  # filter [kd, kh, kw, O, I]
        "CONV_3D_TRANSPOSE",
        [
            In(i32([1, 5, 8, 10, 2]), const=True),
            In(f32(3, 3, 2, 2, 3, lo=-0.5, hi=0.5), const=True),
            In(f32(1, 3, 4, 5, 3)),
        ],
        {"padding": 0, "stride_d": 2, "stride_w": 2, "stride_h": 2},
        atol=1e-5,
        out_dtype=np.float32,
    ),
    Case(
        "CONV_3D_TRANSPOSE",
        [
            In(i32([2, 6, 5, 6, 3]), const=True),
            In(f32(2, 2, 3, 3, 2, lo=-0.5, hi=0.5), const=True),
            In(f32(2, 3, 2, 4, 2)),
            In(f32(3), const=True),
        ],
        {"padding": 1, "stride_d": 2, "stride_w": 1, "stride_h": 2},
        atol=1e-5,
        out_dtype=np.float32,
        id="CONV_3D_TRANSPOSE-valid-bias",
    ),
]


# Rows the ONNX path does not run yet, each with its reason; a row that starts passing fails
# (strict), so the list stays true.
ONNX_EXPECTED_FAILURES = {}
# Rows whose round trip writes some ops another way (a reduction as MUL + SUM, a constant
# folded, an int32 bias dequantized at write time, run-time slice bounds clamped to int32),
# so only the numbers are compared.
REWRITTEN = {"L2_NORMALIZATION", "FILL", "STRIDED_SLICE-run-time-bounds"}


# Round trips codegen.tflite cannot write yet, with the reason; strict, so the list stays true.
ROUND_TRIP_GAPS: dict[str, str] = {}

# Builtin ops read by msc without a one-op row above, and where they are tested instead.
TESTED_ELSEWHERE = {
    **dict.fromkeys(
        ["VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE"],
        "state: test_resource_variables_are_state_inputs_and_outputs, "
        "test_a_streaming_model_converts_from_its_file_with_its_state_checked",
    ),
    **dict.fromkeys(
        ["RFFT2D", "COMPLEX_ABS", "REAL", "IMAG"], "test_rfft2d_and_its_complex_consumers"
    ),
    "DENSIFY": "MediaPipe's sparse weights: bench/tflite_pip_models.py (no writer of sparsity)",
    # the tests' writer declares static output shapes; these outputs are sized by values
    "RANGE": "no row: its output size depends on its input values",
    "WHERE": "no row: its output size depends on its input values",
}


def test_every_builtin_op_has_a_row_a_reason_or_a_test():
    # The table's completeness: each of the schema's builtin ops is a one-op row here or in the
    # quantized table, declared unread with its reason (docs/tflite_ops), or named above.
    from tflite.BuiltinOperator import BuiltinOperator

    from msc.frontend.tflite import supported_ops, unsupported_ops
    from tests.frontend.test_frontend_tflite_quant import CASES as QUANT

    rows = {c.op for c in CASES} | {c.op for c in QUANT}
    unread = unsupported_ops()
    left = [
        op
        for op in sorted(k for k in vars(BuiltinOperator) if k.isupper())
        if op not in rows and op not in unread and op not in TESTED_ELSEWHERE
    ]
    assert left == [], f"builtin ops with no row, reason or test: {left}"
    read = set(supported_ops())
    assert not set(TESTED_ELSEWHERE) - read, "TESTED_ELSEWHERE names an op msc does not read"
    assert not set(TESTED_ELSEWHERE) & rows, "an op in TESTED_ELSEWHERE has a row now"


@pytest.fixture(scope="module", params=CASES, ids=[c.id for c in CASES])
def case(request):
    c = request.param
    data = build(c)
    ref = run_litert(data, feeds(c))
    return c, data, ref


def test_reads_and_runs_in_torch(case):
    c, data, ref = case
    g = msc.from_tflite(data)
    assert close(run_torch(g, feeds(c)), ref, c.atol, c.rtol) == ""


def test_runs_through_onnx(case, request):
    c, data, ref = case
    if c.id in ONNX_EXPECTED_FAILURES:
        request.applymarker(pytest.mark.xfail(strict=True, reason=ONNX_EXPECTED_FAILURES[c.id]))
    g = msc.from_tflite(data)
    assert close(run_onnx(g, feeds(c)), ref, c.atol, c.rtol) == ""


def test_round_trip_through_tflite(case, request):
    c, data, ref = case
    if c.id in ROUND_TRIP_GAPS:
        request.applymarker(pytest.mark.xfail(strict=True, reason=ROUND_TRIP_GAPS[c.id]))
    g = msc.from_tflite(data)
    again = codegen.tflite.to_bytes(g)
    assert close(run_litert(again, feeds(c)), ref, c.atol, c.rtol) == ""
    if c.id in REWRITTEN:
        return
    g2 = msc.from_tflite(again)
    # the same ops, less the transposes of constants folded at write time, the casts of an
    # index output, and size-1 dims added or dropped, which are written as RESHAPE
    skip = ("constant", "transpose", "cast", "reshape", "squeeze", "unsqueeze")
    assert [n.op for n in g2.nodes if n.op not in skip] == [
        n.op for n in g.nodes if n.op not in skip
    ]


def test_every_unsupported_op_is_reported_at_once():
    bad = [
        Case(
            "SPACE_TO_BATCH_ND",
            [
                In(f32(1, 4, 4, 1)),
                In(i32([2, 2]), const=True),
                In(i32([[0, 0], [0, 0]]), const=True),
            ],
        ),
    ]
    from tests.tflite_cases import _model

    data = _model(bad[0], [[4, 2, 2, 1]], [0])
    with pytest.raises(UnsupportedOpsError) as e:
        msc.from_tflite(data)
    assert "SPACE_TO_BATCH_ND" in str(e.value) and "out0" in str(e.value)
    assert "space <-> batch rearrangements" in str(e.value)  # the reason docs/ops.md gives


def _with(case: Case, at: int, x: In | None = None, **options) -> Case:
    ins = list(case.inputs)
    if x is not None:
        ins[at] = x
    return Case(case.op, ins, {**case.options, **options}, id=case.id)


@pytest.mark.parametrize(
    "case, why",
    [
        (_with(_lstm(), 16, In(f32(3, 4), const=True)), "a projection layer"),
        (_with(_lstm(), 20, In(f32(4), const=True)), "layer-normalized gates"),
        (_with(_lstm(), 0, cell_clip=0.5), "cell_clip=0.5 (LiteRT clips the cell state"),
        (_with(_lstm(), 0, fused_activation_function=3), "fused activation RELU6"),
        (
            _with(_lstm(), 2, In(np.ones((4, 3), np.int8), const=True, scale=[0.1])),
            "input_to_forget_weights is i8 quantized",
        ),
        (_with(_rnn(), 0, fused_activation_function=3), "fused activation RELU6"),
    ],
    ids=["projection", "layer-norm", "cell-clip", "relu6", "int8-weights", "rnn-relu6"],
)
def test_recurrent_cells_without_a_canonical_form_are_refused_by_name(case, why):
    from tests.tflite_cases import _model

    units = case.inputs[-1 if case.op.endswith("RNN") else 18].value.shape[1]
    data = _model(case, [[2, 5, units]], [0])  # LiteRT runs some of these; msc refuses
    with pytest.raises(UnsupportedOpsError) as e:
        msc.from_tflite(data)
    assert case.op in str(e.value) and why in str(e.value)


def test_custom_ops_kept_with_their_options():
    from codegen.tflite import flatbuf

    t = [flatbuf.Tensor("x", 0, [2, 3]), flatbuf.Tensor("y", 0, [2, 3])]
    op = flatbuf.Op("MyOp", [0], [1], custom=True, custom_options=b"\x01\x02opaque")
    data = flatbuf.write(flatbuf.Model([flatbuf.Subgraph(t, [0], [1], [op])]))
    with pytest.raises(UnsupportedOpsError, match="CUSTOM MyOp"):
        msc.from_tflite(data)
    g = msc.from_tflite(data, custom_ops="keep")
    (node,) = g.nodes
    assert node.op == "tflite::MyOp@1"
    assert node.attrs["custom_options"] == b"\x01\x02opaque"
    assert msc.structural_equal(msc.from_text(msc.to_text(g)), g)


@pytest.mark.parametrize("padding, out_hw", [(1, 8), (2, 9)], ids=["same", "valid"])
def test_mediapipe_transposed_convolution_with_bias(padding, out_hw):
    # MediaPipe's custom op (its selfie / hair segmentation models): TRANSPOSE_CONV's options
    # as a TfLiteTransposeConvParams struct (padding 1 SAME / 2 VALID, stride w, stride h)
    from codegen.tflite import flatbuf

    x, w, b = f32(1, 4, 4, 3), f32(2, 3, 3, 3, lo=-0.5, hi=0.5), f32(2)
    t = [
        flatbuf.Tensor("x", 0, [1, 4, 4, 3]),
        flatbuf.Tensor("w", 0, [2, 3, 3, 3], buffer=1),
        flatbuf.Tensor("b", 0, [2], buffer=2),
        flatbuf.Tensor("y", 0, [1, out_hw, out_hw, 2]),
    ]
    params = np.array([padding, 2, 2], "<i4").tobytes()
    op = flatbuf.Op(
        "Convolution2DTransposeBias", [0, 1, 2], [3], custom=True, custom_options=params
    )
    data = flatbuf.write(
        flatbuf.Model([flatbuf.Subgraph(t, [0], [3], [op])], [b"", w.tobytes(), b.tobytes()])
    )
    ref = run_litert(data, [x])
    g = msc.from_tflite(data)
    assert "conv_transpose" in [n.op for n in g.nodes]
    assert close(run_torch(g, [x]), ref, 1e-5, 1e-5) == ""
    assert close(run_onnx(g, [x]), ref, 1e-5, 1e-5) == ""
    assert close(run_litert(codegen.tflite.to_bytes(g), [x]), ref, 1e-5, 1e-5) == ""


@pytest.mark.parametrize(
    "shape, lengths, then",
    [
        ([1, 1, 16], [1, 16], "COMPLEX_ABS"),  # an STFT frame, as tf.signal.stft writes it
        ([2, 4, 8], [4, 8], "COMPLEX_ABS"),  # 2-D
        ([2, 3, 6], [4, 8], "REAL"),  # zero-padded to the FFT lengths
        ([2, 4, 8], [2, 4], "IMAG"),  # cut to them
        ([1, 1, 16], [1, 16], "CAST"),  # the real part, as TensorFlow's cast
    ],
    ids=["frame-abs", "2d-abs", "padded-real", "cut-imag", "cast"],
)
def test_rfft2d_and_its_complex_consumers(shape, lengths, then):
    # RFFT2D's complex64 output is msc's real layout (a trailing pair of floats) in between
    from codegen.tflite import flatbuf

    x = f32(*shape)
    out = [*shape[:-2], lengths[0], lengths[1] // 2 + 1]
    t = [
        flatbuf.Tensor("x", 0, shape),
        flatbuf.Tensor("fft_length", 2, [2], buffer=1),
        flatbuf.Tensor("spectrum", 8, out),
        flatbuf.Tensor("y", 0, out),
    ]
    ops = [flatbuf.Op("RFFT2D", [0, 1], [2])]
    if then == "CAST":
        ops.append(flatbuf.Op("CAST", [2], [3]))
    else:
        ops.append(flatbuf.Op(then, [2], [3]))
    data = flatbuf.write(
        flatbuf.Model([flatbuf.Subgraph(t, [0], [3], ops)], [b"", i32(lengths).tobytes()])
    )
    ref = run_litert(data, [x])
    g = msc.from_tflite(data)
    assert "dft" in [n.op for n in g.nodes]
    assert close(run_torch(g, [x]), ref, 1e-4, 1e-4) == ""
    assert close(run_onnx(g, [x]), ref, 1e-4, 1e-4) == ""
    if lengths[0] == 1:  # one real DFT: written back as RFFT2D (a DFT of a complex input not)
        again = codegen.tflite.to_bytes(g)
        assert close(run_litert(again, [x]), ref, 1e-4, 1e-4) == ""


def test_a_complex_input_is_read_only_by_the_ops_that_know_its_layout():
    from codegen.tflite import flatbuf

    t = [
        flatbuf.Tensor("x", 0, [1, 8]),
        flatbuf.Tensor("fft_length", 2, [2], buffer=1),
        flatbuf.Tensor("spectrum", 8, [1, 5]),
        flatbuf.Tensor("y", 8, [1, 5]),
    ]
    ops = [flatbuf.Op("RFFT2D", [0, 1], [2]), flatbuf.Op("NEG", [2], [3])]
    data = flatbuf.write(
        flatbuf.Model([flatbuf.Subgraph(t, [0], [3], ops)], [b"", i32([1, 8]).tobytes()])
    )
    with pytest.raises(UnsupportedOpsError, match="NEG.*a complex input"):
        msc.from_tflite(data)


def _stateful_model(c: np.ndarray, output_apart: bool = False) -> bytes:
    """y = state + x, then state = y: a variable that CALL_ONCE's init subgraph sets to c.
    ``output_apart``: the model's output is z = y + x, a value the state is not."""
    from codegen.tflite import flatbuf

    main = [
        flatbuf.Tensor("x", 0, [1, 3]),
        flatbuf.Tensor("acc", 13, []),
        flatbuf.Tensor("acc/read", 0, [1, 3]),
        flatbuf.Tensor("acc/next" if output_apart else "y", 0, [1, 3]),
    ]
    handle = ({"container": "", "shared_name": "acc"}, "VarHandleOptions")
    ops = [
        flatbuf.Op("CALL_ONCE", [], [], {"init_subgraph_index": 1}, "CallOnceOptions"),
        flatbuf.Op("VAR_HANDLE", [], [1], *handle),
        flatbuf.Op("READ_VARIABLE", [1], [2], {}, "ReadVariableOptions"),
        flatbuf.Op("ADD", [2, 0], [3], {}, "AddOptions"),
        flatbuf.Op("ASSIGN_VARIABLE", [1, 3], [], {}, "AssignVariableOptions"),
    ]
    if output_apart:
        main.append(flatbuf.Tensor("z", 0, [1, 3]))
        ops.insert(4, flatbuf.Op("ADD", [3, 0], [4], {}, "AddOptions"))
    init_t = [flatbuf.Tensor("acc_1", 13, []), flatbuf.Tensor("zeros", 0, [1, 3], buffer=1)]
    init_ops = [
        flatbuf.Op("VAR_HANDLE", [], [0], *handle),
        flatbuf.Op("ASSIGN_VARIABLE", [0, 1], [], {}, "AssignVariableOptions"),
    ]
    sgs = [
        flatbuf.Subgraph(main, [0], [len(main) - 1], ops, "main"),
        flatbuf.Subgraph(init_t, [], [], init_ops, "init"),
    ]
    return flatbuf.write(flatbuf.Model(sgs, [b"", c.tobytes()]))


def test_resource_variables_are_state_inputs_and_outputs():
    # a streaming model's state (microWakeWord's ring buffers): the variable's value before
    # the run is a graph input, after it a graph output, its first value initial_state's
    from msc.frontend.tflite import initial_state

    c = f32(1, 3)
    data = _stateful_model(c)
    g = msc.from_tflite(data)
    assert [v.name for v in g.inputs] == ["x", "acc"]
    assert len(g.outputs) == 2 and [n.op for n in g.nodes] == ["add"]
    init = initial_state(data)
    assert list(init) == ["acc"] and np.array_equal(init["acc"], c)
    xs = [f32(1, 3) for _ in range(3)]
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=data)
    it.allocate_tensors()
    ref = []
    for x in xs:  # LiteRT keeps the variable between runs
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        ref.append(np.array(it.get_tensor(it.get_output_details()[0]["index"])))
    again = codegen.tflite.to_bytes(g)
    for run in (run_torch, run_onnx, lambda g_, a: run_litert(again, a)):
        state = init["acc"]
        for x, want in zip(xs, ref):
            y, state = run(g, [x, state])
            assert close([y], [want], 1e-6, 1e-6) == ""


@pytest.mark.parametrize("apart", [True, False], ids=["output-apart", "state-is-output"])
@pytest.mark.parametrize("target", ["torch", "onnx", "tflite"])
def test_a_streaming_model_converts_from_its_file_with_its_state_checked(tmp_path, target, apart):
    # LiteRT keeps a model's variables itself (no API sets them): the check feeds the state
    # inputs the model's first values, starts each LiteRT run from them, and compares the
    # state the run assigns (read by tensor name) as well as the model's output. Before, the
    # state inputs were random and the check said MISMATCH (A gives 1 outputs, B gives 2).
    # A state that is also the output is one value returned twice, which generated PyTorch
    # and ONNX (an Identity) read back as two outputs too.
    from msc.analysis.convert import convert

    c = f32(1, 3) + 5.0
    src = tmp_path / "stream.tflite"
    src.write_bytes(_stateful_model(c, output_apart=apart))
    out = tmp_path / {"torch": "out", "onnx": "out.onnx", "tflite": "out.tflite"}[target]
    r = convert(src, out, to=target)
    assert r.ok and r.equivalent, r
    assert [o.name for o in r.numeric.outputs] == (["z", "acc/next"] if apart else ["y", "y"])
    assert all(o.ok for o in r.numeric.outputs)
    assert any("acc" in i and "initial state" in i for i in r.numeric.inputs), r.numeric.inputs
    assert out.exists()


def test_a_malformed_variable_op_is_reported():
    from codegen.tflite import flatbuf

    t = [flatbuf.Tensor("x", 0, [1, 3]), flatbuf.Tensor("acc", 13, [])]
    handle = ({"container": "", "shared_name": "acc"}, "VarHandleOptions")
    ops = [
        flatbuf.Op("VAR_HANDLE", [], [1], *handle),
        flatbuf.Op("ASSIGN_VARIABLE", [1, -1], [], {}, "AssignVariableOptions"),
        flatbuf.Op("READ_VARIABLE", [1], [], {}, "ReadVariableOptions"),
    ]
    data = flatbuf.write(flatbuf.Model([flatbuf.Subgraph(t, [0], [0], ops)]))
    with pytest.raises(UnsupportedOpsError, match="ASSIGN_VARIABLE.*READ_VARIABLE"):
        msc.from_tflite(data)


def test_an_op_that_cannot_be_kept_is_reported_with_the_others():
    # an op without outputs (a custom op run for its side effect) cannot be a custom node, so
    # custom_ops="keep" reports it with every other op msc cannot keep, never a crash
    from codegen.tflite import flatbuf

    t = [flatbuf.Tensor("x", 0, [2, 3]), flatbuf.Tensor("y", 0, [2, 3])]
    ops = [flatbuf.Op("MyInit", [], [], custom=True), flatbuf.Op("MyOp", [0], [1], custom=True)]
    data = flatbuf.write(flatbuf.Model([flatbuf.Subgraph(t, [0], [1], ops)]))
    with pytest.raises(UnsupportedOpsError, match="MyInit") as e:
        msc.from_tflite(data, custom_ops="keep")
    assert "cannot keep it as a custom node" in str(e.value)
    assert "MyOp" not in str(e.value)  # kept


def test_names_signature_and_dynamic_dims():
    from codegen.tflite import flatbuf

    t = [
        flatbuf.Tensor("serving_default_x:0", 0, [1, 3], signature=[-1, 3]),
        flatbuf.Tensor("w", 0, [3], buffer=1),
        flatbuf.Tensor("model/dense/add", 0, [1, 3], signature=[-1, 3]),
    ]
    op = flatbuf.Op("ADD", [0, 1], [2], {}, "AddOptions")
    sig = flatbuf.Signature("serving_default", 0, [("x", 0)], [("y", 2)])
    data = flatbuf.write(
        flatbuf.Model([flatbuf.Subgraph(t, [0], [2], [op])], [b"", f32(3).tobytes()], [sig])
    )
    g = msc.from_tflite(data)
    assert [v.name for v in g.inputs] == ["x"] and [v.name for v in g.outputs] == ["y"]
    assert str(g.inputs[0].type) == "f32[batch, 3]"
    assert "w" in g.weights
    assert g.nodes[0].provenance.module == "model.dense"
    x = f32(5, 3)
    ref = run_litert(data, [x])
    assert close(run_torch(g, [x]), ref, 1e-6, 1e-6) == ""
    # written back: the symbolic dim is a -1 in shape_signature again
    again = msc.from_tflite(codegen.tflite.to_bytes(g))
    assert str(again.inputs[0].type) == "f32[batch, 3]"
