"""Operator versions: the lowest version of each builtin op whose kernel has the features a
node uses. LiteRT refuses an operator whose version it has no kernel for, so writing the
lowest sufficient one keeps a file loadable by the oldest runtime that can run it.

# NOTE: facts from TFLite's op version rules (tensorflow/lite/tools/versioning): an op's
# version rises with its input types (int8, then int16 activations; hybrid float x int8
# weights) and with options added later (dilation, keep_num_dims, batch_dims). Ops not listed
# take version 1 for float and 2 for int8, as most of TFLite's kernels were versioned.
"""

from __future__ import annotations

from typing import Any

__all__ = ["version"]

F32, I32, U8, I64, BOOL, I16, I8, F16 = 0, 2, 3, 4, 6, 7, 9, 1

# Ops whose int8 kernel came in version 2 (and int16 in version 3 where listed).
_INT8_V2 = set(
    """ADD SUB MUL AVERAGE_POOL_2D MAX_POOL_2D CONCATENATION SOFTMAX LOGISTIC TANH
    RESIZE_BILINEAR RESIZE_NEAREST_NEIGHBOR PAD PADV2 TRANSPOSE MEAN SUM SQUEEZE
    STRIDED_SLICE SLICE SPLIT SPLIT_V GATHER MAXIMUM MINIMUM ARG_MAX ARG_MIN PACK UNPACK
    QUANTIZE DEQUANTIZE RELU RELU6 LEAKY_RELU HARD_SWISH LOG_SOFTMAX EQUAL NOT_EQUAL LESS
    LESS_EQUAL GREATER GREATER_EQUAL SELECT SELECT_V2 DEPTH_TO_SPACE SPACE_TO_DEPTH
    TOPK_V2 REDUCE_MAX REDUCE_MIN L2_NORMALIZATION BATCH_MATMUL PRELU""".split()
)
_INT16_V3 = set("ADD SUB CONCATENATION SOFTMAX LOGISTIC TANH RELU LEAKY_RELU".split())


def _types(op: Any, tensors: list) -> tuple[list[int], list[int]]:
    ins = [tensors[i].type for i in op.inputs if i >= 0]
    outs = [tensors[i].type for i in op.outputs if i >= 0]
    return ins, outs


# Ops whose kernels start above version 1 (LiteRT registers BROADCAST_TO from 2).
MIN_VERSION = {"BROADCAST_TO": 2}


def version(op: Any, tensors: list) -> int:
    """The version to write for ``op`` (a ``flatbuf.Op``) given the subgraph's tensors."""
    if op.custom:
        return op.version
    return max(_version(op, tensors), MIN_VERSION.get(op.op, 1))


def _version(op: Any, tensors: list) -> int:
    ins, outs = _types(op, tensors)
    first = ins[0] if ins else F32
    name, o = op.op, op.options
    if name == "CONV_2D":
        filt = ins[1] if len(ins) > 1 else F32
        if first == I16:
            return 4
        if first == F32 and filt == I8:
            return 2
        if first == I8:
            return 3
        return 1
    if name == "DEPTHWISE_CONV_2D":
        filt = ins[1] if len(ins) > 1 else F32
        if first == I16:
            return 5
        if first == F32 and filt == I8:
            return 4
        if first == I8:
            return 3
        if o.get("dilation_w_factor", 1) != 1 or o.get("dilation_h_factor", 1) != 1:
            return 2
        return 1
    if name == "FULLY_CONNECTED":
        filt = ins[1] if len(ins) > 1 else F32
        if first == I16:
            return 7
        if o.get("keep_num_dims"):
            return 5
        if first == F32 and filt == I8:
            return 3
        if first == I8:
            return 4
        return 1
    if name == "TRANSPOSE_CONV":
        if len(ins) > 3:
            return 3  # a bias input
        return 2 if first == I8 else 1
    if name == "GATHER":
        if o.get("batch_dims"):
            return 5
        return 2 if first == I8 else 1
    if name == "DEQUANTIZE":
        return 3 if first == F16 else 2 if first == I8 else 1
    if name == "QUANTIZE":
        return 2 if outs and outs[0] == I8 else 1
    if name == "CAST":
        return 1
    if name in _INT16_V3 and first == I16:
        return 3
    if name in _INT8_V2 and first == I8:
        return 2
    return 1
