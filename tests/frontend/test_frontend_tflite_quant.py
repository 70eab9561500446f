"""Quantized TFLite: one-op and small models built by the tests' own writer with int8 / uint8
/ int16 tensors (per tensor and per channel), float16 weights behind DEQUANTIZE and
dynamic-range (hybrid) kernels; read by msc onto quantize / dequantize around float ops, run
through generated PyTorch and ONNX against LiteRT, and written back to TFLite.

Tolerances: integer outputs within one quantization step of LiteRT (msc computes the float op
between dequantize and quantize exactly, LiteRT in fixed point, so a value near a rounding
boundary may land one step away); the round trip, written as the same quantized kernels, is
exact. Hybrid kernels quantize their float input at run time, so msc's float path differs from
them by about a step of that quantization (atol stated per row).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the tflite extra (tflite, flatbuffers) is not installed")
pytest.importorskip("ai_edge_litert", reason="LiteRT (ai-edge-litert) is not installed")

import codegen.tflite  # noqa: E402
import msc  # noqa: E402
from codegen.tflite import flatbuf  # noqa: E402
from codegen.tflite.registry import OPTIONS_OF  # noqa: E402
from codegen.tflite.versions import version  # noqa: E402
from msc.errors import BadModelError  # noqa: E402
from msc.frontend.tflite import read_model  # noqa: E402
from msc.ir.graph import Weight  # noqa: E402
from tests.tflite_cases import (  # noqa: E402
    RNG,
    Case,
    In,
    _model,
    build,
    close,
    f32,
    feeds,
    i32,
    run_litert,
    run_onnx,
    run_torch,
)


def i8(*shape: int) -> np.ndarray:
    return RNG.integers(-128, 128, shape).astype(np.int8)


def u8(*shape: int) -> np.ndarray:
    return RNG.integers(0, 256, shape).astype(np.uint8)


def i16(*shape: int) -> np.ndarray:
    return RNG.integers(-20000, 20000, shape).astype(np.int16)


def weights(*shape: int) -> np.ndarray:
    return RNG.integers(-127, 128, shape).astype(np.int8)


def bias(n: int) -> np.ndarray:
    return RNG.integers(-2000, 2000, (n,)).astype(np.int32)


X8 = In(i8(1, 6, 7, 3), scale=[0.05], zero_point=[3])
CONV = {"padding": 0, "stride_w": 1, "stride_h": 1}
POOL = {"padding": 1, "stride_w": 2, "stride_h": 2, "filter_width": 2, "filter_height": 2}
# per-channel scales of a 4-channel filter, and its bias's (input scale x filter scale)
WS = [0.004, 0.006, 0.005, 0.007]

CASES = [
    Case(
        "CONV_2D",
        [X8, In(weights(4, 3, 3, 3), True, [0.005], [0]), In(bias(4), True, [0.05 * 0.005])],
        {**CONV, "fused_activation_function": 3},
        out_quant=([0.04], [-128]),
        atol=1,
        id="CONV_2D-int8-tensor-relu6",
    ),
    Case(
        "CONV_2D",
        [X8, In(weights(4, 3, 3, 3), True, WS, [0] * 4), In(bias(4), True, [0.05 * s for s in WS])],
        {"padding": 1, "stride_w": 2, "stride_h": 2},
        out_quant=([0.06], [5]),
        atol=1,
        id="CONV_2D-int8-channel",
    ),
    Case(
        "DEPTHWISE_CONV_2D",
        [
            X8,
            In(weights(1, 3, 3, 3), True, WS[:3], [0] * 3, axis=3),
            In(bias(3), True, [0.05 * s for s in WS[:3]]),
        ],
        {**CONV, "depth_multiplier": 1},
        out_quant=([0.03], [-2]),
        atol=1,
        id="DEPTHWISE_CONV_2D-int8-channel",
    ),
    Case(
        "FULLY_CONNECTED",
        [
            In(i8(2, 5), scale=[0.1], zero_point=[-4]),
            In(weights(3, 5), True, [0.02], [0]),
            In(bias(3), True, [0.1 * 0.02]),
        ],
        {"fused_activation_function": 1},
        out_quant=([0.15], [-10]),
        atol=1,
        id="FULLY_CONNECTED-int8-relu",
    ),
    Case(
        "ADD",
        [
            In(u8(2, 6), scale=[0.05], zero_point=[128]),
            In(u8(2, 6), scale=[0.03], zero_point=[100]),
        ],
        out_quant=([0.08], [120]),
        atol=1,
        id="ADD-uint8",
    ),
    Case(
        "MUL",
        [In(i8(2, 6), scale=[0.05], zero_point=[2]), In(i8(2, 6), scale=[0.03], zero_point=[-1])],
        out_quant=([0.1], [0]),
        atol=1,
        id="MUL-int8",
    ),
    Case("MAX_POOL_2D", [X8], POOL, out_quant=([0.05], [3]), id="MAX_POOL_2D-int8"),
    Case("AVERAGE_POOL_2D", [X8], POOL, out_quant=([0.05], [3]), atol=1, id="AVERAGE_POOL_2D-int8"),
    Case(
        "RESHAPE",
        [X8, In(i32([1, -1]), const=True)],
        out_quant=([0.05], [3]),
        id="RESHAPE-int8",
    ),
    Case(
        "SOFTMAX",
        [In(i8(2, 7), scale=[0.1], zero_point=[0])],
        {"beta": 1.0},
        out_quant=([1 / 256], [-128]),
        atol=1,
        id="SOFTMAX-int8",
    ),
    Case(
        "LOGISTIC",
        [In(i8(2, 7), scale=[0.05], zero_point=[4])],
        out_quant=([1 / 256], [-128]),
        atol=1,
        id="LOGISTIC-int8",
    ),
    Case(
        "SUB",
        [In(i8(2, 6), scale=[0.05], zero_point=[2]), In(i8(1, 6), scale=[0.03], zero_point=[-1])],
        out_quant=([0.08], [1]),
        atol=1,
        id="SUB-int8-broadcast",
    ),
    Case(
        "TANH",
        [In(i8(2, 7), scale=[0.03], zero_point=[0])],
        out_quant=([1 / 128], [0]),
        atol=1,
        id="TANH-int8",
    ),
    Case(
        "CONCATENATION",
        [In(i8(2, 3), scale=[0.05], zero_point=[3]), In(i8(2, 4), scale=[0.05], zero_point=[3])],
        {"axis": 1},
        out_quant=([0.05], [3]),
        id="CONCATENATION-int8",
    ),
    Case(
        "TRANSPOSE",
        [X8, In(i32([0, 3, 1, 2]), const=True)],
        out_quant=([0.05], [3]),
        id="TRANSPOSE-int8",
    ),
    # LiteRT's RESHAPE copies the integers whatever its output's scale: read so too
    Case(
        "RESHAPE",
        [X8, In(i32([1, -1]), const=True)],
        out_quant=([0.07], [0]),
        id="RESHAPE-int8-reinterpreted",
    ),
    Case(
        "ADD",
        [In(i16(2, 6), scale=[0.001], zero_point=[0]), In(i16(2, 6), scale=[0.002])],
        out_quant=([0.003], [0]),
        atol=1,
        id="ADD-int16",
    ),
    Case(
        "CONV_2D",
        [
            In(i16(1, 5, 5, 3), scale=[0.0002], zero_point=[0]),
            In(weights(2, 3, 3, 3), True, [0.004, 0.006], [0, 0]),
            In(bias(2).astype(np.int64), True, [0.0002 * 0.004, 0.0002 * 0.006]),
        ],
        CONV,
        out_quant=([0.0004], [0]),
        atol=1,
        id="CONV_2D-int16",
    ),
    Case(
        "CONV_2D",
        [In(f32(1, 6, 7, 3)), In(weights(4, 3, 3, 3), True, WS, [0] * 4), In(f32(4), True)],
        CONV,
        atol=0.05,
        id="CONV_2D-hybrid-int8",
    ),
    Case(
        "FULLY_CONNECTED",
        [In(f32(2, 5)), In(weights(3, 5), True, [0.01], [0]), In(f32(3), True)],
        {"asymmetric_quantize_inputs": True},
        atol=0.03,
        id="FULLY_CONNECTED-hybrid-asymmetric",
    ),
]

# rows written back as DEQUANTIZE -> float op (QUANTIZE), not as LiteRT's kernel, with why
FLOAT_KERNEL = {
    "RESHAPE-int8-reinterpreted": "read as a reshape of the integers (no QDQ), written as "
    "RESHAPE of int8 tensors; a graph output so loses its scale, the integers are kept",
    "CONV_2D-hybrid-int8": "a hybrid kernel is written as DEQUANTIZE + the float kernel",
    "FULLY_CONNECTED-hybrid-asymmetric": "as CONV_2D-hybrid-int8",
}
# a row that starts passing fails (strict), so the list stays true
ONNX_EXPECTED_FAILURES: dict[str, str] = {}


def ops_of(data: bytes) -> dict[str, int]:
    """Operators by name in a .tflite file."""
    counts: dict[str, int] = {}
    for op in read_model(data).subgraphs[0].operators:
        counts[op.op] = counts.get(op.op, 0) + 1
    return counts


@pytest.fixture(scope="module", params=CASES, ids=[c.id for c in CASES])
def case(request):
    c = request.param
    data = build(c)
    return c, data, run_litert(data, feeds(c))


def test_reads_as_qdq_and_runs_in_torch(case):
    c, data, ref = case
    g = msc.from_tflite(data)
    ops = {n.op for n in g.nodes}
    assert ("dequantize" in ops) == (c.id != "RESHAPE-int8-reinterpreted")
    assert close(run_torch(g, feeds(c)), ref, c.atol, 1e-5) == ""


def test_runs_through_onnx(case, request):
    c, data, ref = case
    if c.id in ONNX_EXPECTED_FAILURES:
        request.applymarker(pytest.mark.xfail(strict=True, reason=ONNX_EXPECTED_FAILURES[c.id]))
    g = msc.from_tflite(data)
    assert close(run_onnx(g, feeds(c)), ref, c.atol, 1e-5) == ""


def test_round_trip_writes_the_quantized_kernel(case):
    c, data, ref = case
    g = msc.from_tflite(data)
    again = codegen.tflite.to_bytes(g)
    written = ops_of(again)
    if c.id in FLOAT_KERNEL:
        assert close(run_litert(again, feeds(c)), ref, c.atol, 1e-5) == ""
        return
    assert written == {c.op: 1}, written
    assert close(run_litert(again, feeds(c)), ref, 0, 0) == ""


def test_kept_through_onnx_and_back_to_tflite(case):
    """TFLite -> msc -> ONNX (QuantizeLinear / DequantizeLinear, per axis where per channel)
    -> msc -> TFLite: the same quantized kernel again, with the same outputs in LiteRT."""
    import codegen.onnx

    c, data, ref = case
    proto = codegen.onnx.to_model(msc.from_tflite(data))
    kinds = {n.op_type for n in proto.graph.node}
    assert ("DequantizeLinear" in kinds) == (c.id != "RESHAPE-int8-reinterpreted")
    per_axis = any(x.scale is not None and len(x.scale) > 1 for x in c.inputs if x is not None)
    axes = [
        a.name for n in proto.graph.node if n.op_type == "DequantizeLinear" for a in n.attribute
    ]
    assert ("axis" in axes) == per_axis
    again = codegen.tflite.to_bytes(msc.from_onnx(proto))
    if c.id in FLOAT_KERNEL:
        assert close(run_litert(again, feeds(c)), ref, c.atol, 1e-5) == ""
        return
    assert ops_of(again) == {c.op: 1}
    assert close(run_litert(again, feeds(c)), ref, 0, 0) == ""


REQUANTIZING_RESHAPE = """msc format 1, ops 1
graph main {
  input %x: i8[2, 6]
  %s_in: f32[] = constant() {value = tensor(f32[], [0.05])}
  %z_in: i8[] = constant() {value = tensor(i8[], [3])}
  %s_out: f32[] = constant() {value = tensor(f32[], [0.07])}
  %z_out: i8[] = constant() {value = tensor(i8[], [0])}
  %f: f32[2, 6] = dequantize(%x, %s_in, %z_in) {axis = 1, block_size = 0}
  %r: f32[3, 4] = reshape(%f, _) {shape = [3, 4]}
  %y: i8[3, 4] = quantize(%r, %s_out, %z_out) {axis = 1, dtype = i8}
  output %y
}
"""


def test_a_requantizing_move_is_written_around_the_float_op():
    """dequantize -> reshape -> quantize to another scale: LiteRT's RESHAPE copies integers
    (no rescaling kernel), so it is written as DEQUANTIZE -> RESHAPE -> QUANTIZE, and agrees
    with the generated PyTorch within one step."""
    g = msc.from_text(REQUANTIZING_RESHAPE)
    again = codegen.tflite.to_bytes(g)
    assert ops_of(again) == {"DEQUANTIZE": 1, "RESHAPE": 1, "QUANTIZE": 1}
    x = [i8(2, 6)]
    assert close(run_litert(again, x), run_torch(g, x), 1, 0) == ""


NCHW_QDQ = """msc format 1, ops 1
graph main {
  input %x: f32[1, 3, 8, 8]
  weight @w: i8[4, 3, 3, 3]
  %sx: f32[] = constant() {value = tensor(f32[], [0.02])}
  %zx: i8[] = constant() {value = tensor(i8[], [0])}
  %sw: f32[4] = constant() {value = tensor(f32[4], [0.004, 0.006, 0.005, 0.007])}
  %sy: f32[] = constant() {value = tensor(f32[], [0.03])}
  %zy: i8[] = constant() {value = tensor(i8[], [-128])}
  %q: i8[1, 3, 8, 8] = quantize(%x, %sx, %zx) {axis = 1, dtype = i8}
  %d: f32[1, 3, 8, 8] = dequantize(%q, %sx, %zx) {axis = 1}
  %wd: f32[4, 3, 3, 3] = dequantize(@w, %sw, _) {axis = 0}
  %c: f32[1, 4, 8, 8] = conv(%d, %wd, _) {stride = [1, 1], padding = [1, 1, 1, 1]}
  %r: f32[1, 4, 8, 8] = relu(%c)
  %cq: i8[1, 4, 8, 8] = quantize(%r, %sy, %zy) {axis = 1, dtype = i8}
  %cd: f32[1, 4, 8, 8] = dequantize(%cq, %sy, %zy) {axis = 1}
  %m: f32[1, 4, 4, 4] = max_pool(%cd) {kernel = [2, 2], stride = [2, 2]}
  %mq: i8[1, 4, 4, 4] = quantize(%m, %sy, %zy) {axis = 1, dtype = i8}
  %y: f32[1, 4, 4, 4] = dequantize(%mq, %sy, %zy) {axis = 1}
  output %y
}
"""


def test_a_channels_first_qdq_graph_is_written_as_quantized_kernels():
    """A QDQ graph in NCHW (what PT2E and ONNX QDQ models read as): the layout change moves
    its transposes onto the integers at the graph's edges, so the conv (relu fused) and the
    pool are LiteRT's int8 kernels, within one output step of the generated PyTorch."""
    g = msc.from_text(NCHW_QDQ)
    g.weights["w"].set_data(weights(4, 3, 3, 3))
    data = codegen.tflite.to_bytes(g)
    assert ops_of(data) == {
        "QUANTIZE": 1,
        "TRANSPOSE": 2,
        "CONV_2D": 1,
        "MAX_POOL_2D": 1,
        "DEQUANTIZE": 1,
    }
    x = [f32(1, 3, 8, 8, lo=-1, hi=1)]
    assert close(run_litert(data, x), run_torch(g, x), 0.03 + 1e-6, 0) == ""


# ---------------------------------------------------------------- small models
def _small(tensors, ops, buffers, inputs, outputs) -> bytes:
    for op in ops:
        op.version = version(op, tensors)
    sg = flatbuf.Subgraph(tensors, inputs, outputs, ops, "main")
    return flatbuf.write(flatbuf.Model([sg], buffers))


def _op(name, ins, outs, **options) -> flatbuf.Op:
    return flatbuf.Op(name, ins, outs, options, OPTIONS_OF.get(name, ""))


def float16_weights_model() -> bytes:
    """conv with its filter stored as float16 behind DEQUANTIZE (what TFLite's float16
    post-training quantization writes)."""
    w = f32(4, 3, 3, 3, lo=-0.5, hi=0.5).astype(np.float16)
    T = flatbuf.Tensor
    tensors = [
        T("x", 0, [1, 6, 7, 3]),
        T("w16", 1, [4, 3, 3, 3], 1),
        T("w", 0, [4, 3, 3, 3]),
        T("b", 0, [4], 2),
        T("y", 0, [1, 6, 7, 4]),
    ]
    ops = [_op("DEQUANTIZE", [1], [2]), _op("CONV_2D", [0, 2, 3], [4], **CONV)]
    return _small(tensors, ops, [b"", w.tobytes(), f32(4).tobytes()], [0], [4])


def int8_model() -> bytes:
    """float in, float out: QUANTIZE -> CONV_2D (relu) -> MAX_POOL_2D -> RESHAPE ->
    FULLY_CONNECTED -> SOFTMAX -> DEQUANTIZE, int8 in between (a full-integer classifier)."""
    T = flatbuf.Tensor

    def q(name, shape, scale, zp, buffer=0, code=9):
        t = T(name, code, shape, buffer)
        t.scale, t.zero_point = list(scale), list(zp)
        return t

    wc = weights(4, 3, 3, 3)
    tensors = [
        T("x", 0, [1, 8, 8, 3]),
        q("xq", [1, 8, 8, 3], [0.02], [0]),
        q("wc", [4, 3, 3, 3], WS, [0] * 4, 1),
        q("bc", [4], [0.02 * s for s in WS], [0] * 4, 2, code=2),
        q("c", [1, 8, 8, 4], [0.03], [-128]),
        q("p", [1, 4, 4, 4], [0.03], [-128]),
        q("r", [1, 64], [0.03], [-128]),
        T("shape", 2, [2], 3),
        q("wf", [5, 64], [0.01], [0], 4),
        q("bf", [5], [0.03 * 0.01], [0], 5, code=2),
        q("f", [1, 5], [0.1], [3]),
        q("s", [1, 5], [1 / 256], [-128]),
        T("y", 0, [1, 5]),
    ]
    wf = weights(5, 64)
    buffers = [b"", wc.tobytes(), bias(4).tobytes(), i32([1, 64]).tobytes(), wf.tobytes()]
    buffers.append(bias(5).tobytes())
    pool = {"padding": 1, "stride_w": 2, "stride_h": 2, "filter_width": 2, "filter_height": 2}
    ops = [
        _op("QUANTIZE", [0], [1]),
        _op("CONV_2D", [1, 2, 3], [4], **CONV, fused_activation_function=1),
        _op("MAX_POOL_2D", [4], [5], **pool),
        _op("RESHAPE", [5, 7], [6]),
        _op("FULLY_CONNECTED", [6, 8, 9], [10]),
        _op("SOFTMAX", [10], [11], beta=1.0),
        _op("DEQUANTIZE", [11], [12]),
    ]
    return _small(tensors, ops, buffers, [0], [12])


SMALL = {
    "float16-weights": (float16_weights_model, [f32(1, 6, 7, 3)], 1e-5, 1e-5),
    # one output step (1/256) of the softmax; the round trip is exact
    "int8-classifier": (int8_model, [f32(1, 8, 8, 3, lo=-1, hi=1)], 1 / 256 + 1e-6, 0.0),
}


@pytest.mark.parametrize("name", list(SMALL))
def test_small_models(name):
    make, arrays, atol, trip = SMALL[name]
    data = make()
    ref = run_litert(data, arrays)
    g = msc.from_tflite(data)
    assert close(run_torch(g, arrays), ref, atol, 0) == ""
    again = codegen.tflite.to_bytes(g)
    assert close(run_litert(again, arrays), ref, trip, 0) == ""
    ops = ops_of(again)
    if name == "float16-weights":
        # the filter stays float16 behind DEQUANTIZE
        model = read_model(again)
        assert ops == {"DEQUANTIZE": 1, "CONV_2D": 1}
        assert 1 in {t.type for t in model.subgraphs[0].tensors}
    else:
        assert ops == {
            "QUANTIZE": 1,
            "CONV_2D": 1,
            "MAX_POOL_2D": 1,
            "RESHAPE": 1,
            "FULLY_CONNECTED": 1,
            "SOFTMAX": 1,
            "DEQUANTIZE": 1,
        }, ops


@pytest.mark.parametrize("name", list(SMALL))
def test_small_models_through_onnx(name):
    make, arrays, atol, _ = SMALL[name]
    data = make()
    g = msc.from_tflite(data)
    assert close(run_onnx(g, arrays), run_litert(data, arrays), atol, 0) == ""


def shared_int8_model() -> bytes:
    """int8 in and out, the shapes of microWakeWord's streaming layers: a [1, T, 1, F] int8
    input read by a strided CONV_2D (per-channel filter, relu) and by an ADD, and the conv's
    4-d output read by FULLY_CONNECTED. In channels-first ONNX the conv's input is transposed
    and the fully-connected layer's reshaped, both values a dequantize other nodes read too."""
    T = flatbuf.Tensor

    def q(name, shape, scale, zp, buffer=0, code=9):
        t = T(name, code, shape, buffer)
        t.scale, t.zero_point = list(scale), list(zp)
        return t

    ws = [0.004, 0.006, 0.005, 0.007, 0.003, 0.008]
    tensors = [
        q("x", [1, 5, 1, 8], [0.05], [3]),
        q("wc", [6, 3, 1, 8], ws, [0] * 6, 1),
        q("bc", [6], [0.05 * s for s in ws], [0] * 6, 2, code=2),
        q("c", [1, 2, 1, 6], [0.03], [-128]),
        q("a", [1, 5, 1, 8], [0.1], [0]),
        q("wf", [4, 12], [0.01], [0], 3),
        q("bf", [4], [0.03 * 0.01], [0], 4, code=2),
        q("f", [1, 4], [0.05], [2]),
    ]
    conv = {"padding": 1, "stride_w": 1, "stride_h": 2, "fused_activation_function": 1}
    buffers = [b"", weights(6, 3, 1, 8).tobytes(), bias(6).tobytes()]
    buffers += [weights(4, 12).tobytes(), bias(4).tobytes()]
    ops = [
        _op("CONV_2D", [0, 1, 2], [3], **conv),
        _op("ADD", [0, 0], [4]),
        _op("FULLY_CONNECTED", [3, 5, 6], [7]),
    ]
    return _small(tensors, ops, buffers, [0], [7, 4])


@pytest.mark.parametrize("optimize", [True, False], ids=["optimized", "no-optimize"])
def test_moves_of_a_shared_int8_tensor_load_in_onnxruntime(optimize):
    """The transpose and the reshape of a dequantized int8 value that other nodes read too
    are written on the integers (``codegen.onnx.optimize``), with or without ``optimize``:
    onnxruntime 1.32 with its default (all) graph optimizations refuses the file otherwise (a
    QuantizeLinear of int8 output with a uint8 zero point; ``msc convert --no-optimize`` wrote
    such files). The outputs are LiteRT's within one quantization step, and the re-import is
    the written graph up to that rewrite, as ``msc diff`` counts it."""
    import onnxruntime as ort

    import codegen.onnx
    from codegen.onnx.model import ModelBuilder
    from msc.analysis.diff import diff_graphs

    data = shared_int8_model()
    g = msc.from_tflite(data)
    b = ModelBuilder(g, codegen.onnx.choose_opset(g)[0], optimize=optimize)
    proto = b.run()
    assert b.optimized["moves before dequantize"] == 2
    made = {o: n.op_type for n in proto.graph.node for o in n.output}
    moves = [n for n in proto.graph.node if n.op_type in ("Transpose", "Reshape")]
    assert moves and all(made.get(n.input[0]) != "DequantizeLinear" for n in moves)
    # the session as a user opens it: default options, every graph optimization on
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    for x in [i8(1, 5, 1, 8) for _ in range(3)]:
        got = sess.run(None, {sess.get_inputs()[0].name: x})
        assert close(got, run_litert(data, [x]), 1, 0) == ""
    d = diff_graphs(codegen.onnx.as_written(g), msc.from_onnx(proto))
    assert d.equivalent, d.verdict()
    assert "move of quantized integers -> move of the dequantized values" in d.verdict()


# ---------------------------------------------------------------- hostile quantization blocks
@pytest.mark.parametrize(
    "scale, match",
    [
        ([0.01, 0.02, 0.03], "3 scales for the 4 elements of its quantized dimension 0"),
        ([0.01, 0.0, 0.02, 0.01], "quantization scale 0.0 is not positive"),
        ([float("nan")], "quantization scale nan is not positive"),
    ],
)
def test_malformed_quantization_is_one_clear_error(scale, match):
    c = Case(
        "CONV_2D",
        [X8, In(weights(4, 3, 3, 3), True, scale, [0] * len(scale)), In(bias(4), True, [1e-4])],
        CONV,
        out_quant=([0.04], [0]),
    )
    data = _model(c, [[1, 6, 7, 4]], [9])
    with pytest.raises(BadModelError, match=match) as e:
        msc.from_tflite(data)
    assert "in1" in str(e.value)


@pytest.mark.parametrize("model", ["small_cnn", "mlp"])
def test_pt2e_quantized_model_to_tflite(model):
    """torchao's PT2E (x86 quantizer: uint8 activations, int8 per-channel filters, which no
    LiteRT kernel takes together) written as DEQUANTIZE -> float op -> QUANTIZE: LiteRT agrees
    with the quantized module's eager outputs."""
    import torch

    from tests.frontend.test_pt2e_quant import _Mlp, _quantized, _small_cnn

    module, args = _small_cnn() if model == "small_cnn" else (_Mlp(), (torch.randn(2, 16),))
    ep = _quantized(module, args, False)
    with torch.no_grad():
        ref = ep.module()(*args)
    ref = ref[0] if isinstance(ref, tuple) else ref
    data = codegen.tflite.to_bytes(msc.from_exported_program(ep))
    got = run_litert(data, [a.numpy() for a in args])
    assert close(got, [ref.numpy()], 1e-5, 1e-5) == ""


def test_an_int8_file_converts_to_pytorch_with_its_check(tmp_path):
    # The generated PyTorch computes quantize / dequantize by run-time helpers that run the ops'
    # own decompositions (codegen.torch's spelled_out emitters), so the re-import is compared
    # with that decomposition: equivalent, where it had been one real change per QDQ node
    # (and max_pool's dilation [1, 1] against TFLite's none, a spelling).
    from msc.analysis.convert import convert

    src = tmp_path / "int8.tflite"
    src.write_bytes(int8_model())
    r = convert(src, tmp_path / "out", to="torch")
    assert r.ok and r.equivalent and "real change" not in r.verdict, r.verdict
    assert (tmp_path / "out" / "model.py").exists()
    src_py = (tmp_path / "out" / "model.py").read_text()
    assert "_msc_quantize(" in src_py and "_msc_dequantize(" in src_py


_WAKEWORD = Path.home() / ".cache/msc-bench-wheels/pymicro-wakeword-2.5.0/pymicro_wakeword/models"


@pytest.mark.parametrize(
    "name, optimize",
    [(n, False) for n in ["alexa", "hey_jarvis", "hey_mycroft", "okay_nabu"]]
    + [("okay_nabu", True)],
    ids=lambda v: {False: "no-optimize", True: "optimized"}.get(v, v),
)
def test_microwakeword_int8_models_to_onnx_load_and_match_litert(tmp_path, name, optimize):
    """microWakeWord's int8 streaming models (pymicro-wakeword 2.5.0's wheel, cached by
    bench/tflite_pip_models.py) written to ONNX with and without ``--no-optimize``: the file
    opens in onnxruntime as a user opens it (default options, which refused the un-optimized
    one), and ``msc convert``'s check (outputs and states against LiteRT) passes."""
    import onnxruntime as ort

    from msc.analysis.convert import convert

    src = _WAKEWORD / f"{name}.tflite"
    if not src.exists():
        pytest.skip(f"{src} is absent (bench/tflite_pip_models.py downloads the wheel)")
    out = tmp_path / f"{name}.onnx"
    r = convert(src, out, to="onnx", optimize=optimize)
    assert r.ok and r.equivalent, (r.verdict, r.structural)
    assert r.optimized.get("moves before dequantize", 0) > 0
    assert all(o.ok for o in r.numeric.outputs)
    ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])


def test_an_int8_file_diffs_as_equivalent_to_its_generated_pytorch(tmp_path):
    """``msc diff`` of a .tflite and the PyTorch written from it: the generated helpers spell
    quantize / dequantize out (div, round, add, clamp, cast; cast, sub, mul), and the
    canonical form reads that spelling back as the op, on the side that wrote it. A scale
    that really changed is still a change of the dequantize that reads it."""
    from msc.analysis import diff
    from msc.analysis.convert import convert
    from msc.analysis.diff import diff_graphs
    from msc.analysis.model import graph_of

    src = tmp_path / "int8.tflite"
    src.write_bytes(int8_model())
    assert convert(src, tmp_path / "out", to="torch", check=False).ok
    d = diff(src, tmp_path / "out" / "model.py")
    assert d.equivalent, d.verdict()
    assert "quantize spelled out -> quantize x6 (B)" in d.verdict()
    assert "dequantize spelled out -> dequantize x6 (B)" in d.verdict()

    g = msc.from_tflite(int8_model())
    deq = next(n for n in g.nodes if n.op == "dequantize" and not isinstance(n.inputs[0], Weight))
    scale = deq.inputs[1].producer  # a constant node (the filters' dequantizes share it)
    scale.attrs["value"] = np.asarray(scale.attrs["value"] * 2)  # type: ignore[union-attr]
    changed = diff_graphs(g, graph_of(tmp_path / "out" / "model.py"))
    assert not changed.equivalent, changed.verdict()
    ops = {c.op: c.changes for c in changed.changed}
    assert ops.keys() == {"dequantize", "conv", "linear"}, ops  # the two filters it scaled
    assert ops["dequantize"] == ["input 1 @6: values differ (max abs 0.02)"]
