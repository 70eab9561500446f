"""Small ONNX models for the structural comparison of codegen.relax with TVM's own ONNX
frontend (data, not tests): name -> ModelProto, built with onnx.helper."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32 = TensorProto.FLOAT
OPSET = 17


def _w(name, *shape, seed=0):
    rng = np.random.default_rng(seed)
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)


def _model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_empty_tensor_value_info(n) for n, _, _ in outputs],
        list(inits),
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 8
    m = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    onnx.checker.check_model(m)
    return m


def _unary(op, shape=(2, 3, 4), **attrs):
    return _model(
        [helper.make_node(op, ["x"], ["y"], **attrs)], [("x", F32, shape)], [("y", F32, None)]
    )


def _binary(op):
    return _model(
        [helper.make_node(op, ["a", "b"], ["y"])],
        [("a", F32, (2, 3)), ("b", F32, (2, 3))],
        [("y", F32, None)],
    )


def cases() -> dict:
    img = [("x", F32, (1, 3, 8, 8))]
    out = [("y", F32, None)]
    return {
        "relu": _unary("Relu"),
        "sigmoid": _unary("Sigmoid"),
        "tanh": _unary("Tanh"),
        "exp": _unary("Exp"),
        "neg": _unary("Neg"),
        "softmax": _unary("Softmax", axis=-1),
        "transpose": _unary("Transpose", perm=[2, 0, 1]),
        "add": _binary("Add"),
        "mul": _binary("Mul"),
        "sub": _binary("Sub"),
        "div": _binary("Div"),
        "matmul_init": _model(
            [helper.make_node("MatMul", ["x", "w"], ["y"])],
            [("x", F32, (2, 4))],
            out,
            [_w("w", 4, 5)],
        ),
        "conv": _model(
            [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])],
            img,
            out,
            [_w("w", 4, 3, 3, 3), _w("b", 4, seed=1)],
        ),
        "gemm": _model(
            [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)],
            [("x", F32, (2, 4))],
            out,
            [_w("w", 5, 4), _w("b", 5, seed=1)],
        ),
        "max_pool": _model(
            [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
            img,
            out,
        ),
        "global_avg_pool": _model([helper.make_node("GlobalAveragePool", ["x"], ["y"])], img, out),
        "flatten": _unary("Flatten", (2, 3, 4), axis=1),
        "reduce_mean": _unary("ReduceMean", (2, 3, 4), axes=[1], keepdims=0),
        "leaky_relu": _unary("LeakyRelu", alpha=0.2),
        "cast": _model(
            [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT32)],
            [("x", F32, (2, 3))],
            out,
        ),
        "batch_norm": _model(
            [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])],
            img,
            out,
            [
                _w("s", 3),
                _w("b", 3, seed=1),
                _w("m", 3, seed=2),
                numpy_helper.from_array(np.ones(3, np.float32), "v"),
            ],
        ),
        "layer_norm": _model(
            [helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1)],
            [("x", F32, (2, 3, 4))],
            out,
            [_w("s", 4), _w("b", 4, seed=1)],
        ),
        "where": _model(
            [helper.make_node("Where", ["c", "a", "b"], ["y"])],
            [("c", TensorProto.BOOL, (2, 3)), ("a", F32, (2, 3)), ("b", F32, (2, 3))],
            out,
        ),
        "concat": _model(
            [helper.make_node("Concat", ["a", "b"], ["y"], axis=1)],
            [("a", F32, (2, 3)), ("b", F32, (2, 2))],
            out,
        ),
    }
