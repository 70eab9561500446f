"""Facts of TFLite's schema (schema.fbs, file identifier TFL3) the writer needs: builtin op
codes, the options unions' member order, and each table's fields in slot order.

# NOTE: invariants
# - A table is a list of (field, kind, default) in the schema's declaration order; a union
#   field takes two slots (its type, then its value), as flatbuffers lays them out.
# - Kinds: scalar ``bool i8 u8 i16 u16 i32 u32 i64 u64 f32``; ``str``; ``[i32]`` and the other
#   scalar vectors; ``[u8/16]`` (bytes aligned to 16, buffer data); ``table`` (an offset to a
#   built table); ``[table]``; ``union``.
# - tests/codegen/test_codegen_tflite_schema.py checks every table here against the
#   generated schema classes of the ``tflite`` package, slot by slot.
"""

from __future__ import annotations

__all__ = ["BUILTIN", "OPTIONS", "OPTIONS2", "TABLES", "TYPES", "FILE_ID", "op_code"]

FILE_ID = b"TFL3"

# BuiltinOperator, by code (0 .. 209).
_OPS = """
ADD AVERAGE_POOL_2D CONCATENATION CONV_2D DEPTHWISE_CONV_2D DEPTH_TO_SPACE DEQUANTIZE
EMBEDDING_LOOKUP FLOOR FULLY_CONNECTED HASHTABLE_LOOKUP L2_NORMALIZATION L2_POOL_2D
LOCAL_RESPONSE_NORMALIZATION LOGISTIC LSH_PROJECTION LSTM MAX_POOL_2D MUL RELU RELU_N1_TO_1
RELU6 RESHAPE RESIZE_BILINEAR RNN SOFTMAX SPACE_TO_DEPTH SVDF TANH CONCAT_EMBEDDINGS
SKIP_GRAM CALL CUSTOM EMBEDDING_LOOKUP_SPARSE PAD UNIDIRECTIONAL_SEQUENCE_RNN GATHER
BATCH_TO_SPACE_ND SPACE_TO_BATCH_ND TRANSPOSE MEAN SUB DIV SQUEEZE
UNIDIRECTIONAL_SEQUENCE_LSTM STRIDED_SLICE BIDIRECTIONAL_SEQUENCE_RNN EXP TOPK_V2 SPLIT
LOG_SOFTMAX DELEGATE BIDIRECTIONAL_SEQUENCE_LSTM CAST PRELU MAXIMUM ARG_MAX MINIMUM LESS NEG
PADV2 GREATER GREATER_EQUAL LESS_EQUAL SELECT SLICE SIN TRANSPOSE_CONV SPARSE_TO_DENSE TILE
EXPAND_DIMS EQUAL NOT_EQUAL LOG SUM SQRT RSQRT SHAPE POW ARG_MIN FAKE_QUANT REDUCE_PROD
REDUCE_MAX PACK LOGICAL_OR ONE_HOT LOGICAL_AND LOGICAL_NOT UNPACK REDUCE_MIN FLOOR_DIV
REDUCE_ANY SQUARE ZEROS_LIKE FILL FLOOR_MOD RANGE RESIZE_NEAREST_NEIGHBOR LEAKY_RELU
SQUARED_DIFFERENCE MIRROR_PAD ABS SPLIT_V UNIQUE CEIL REVERSE_V2 ADD_N GATHER_ND COS WHERE
RANK ELU REVERSE_SEQUENCE MATRIX_DIAG QUANTIZE MATRIX_SET_DIAG ROUND HARD_SWISH IF WHILE
NON_MAX_SUPPRESSION_V4 NON_MAX_SUPPRESSION_V5 SCATTER_ND SELECT_V2 DENSIFY SEGMENT_SUM
BATCH_MATMUL PLACEHOLDER_FOR_GREATER_OP_CODES CUMSUM CALL_ONCE BROADCAST_TO RFFT2D CONV_3D
IMAG REAL COMPLEX_ABS HASHTABLE HASHTABLE_FIND HASHTABLE_IMPORT HASHTABLE_SIZE REDUCE_ALL
CONV_3D_TRANSPOSE VAR_HANDLE READ_VARIABLE ASSIGN_VARIABLE BROADCAST_ARGS
RANDOM_STANDARD_NORMAL BUCKETIZE RANDOM_UNIFORM MULTINOMIAL GELU DYNAMIC_UPDATE_SLICE
RELU_0_TO_1 UNSORTED_SEGMENT_PROD UNSORTED_SEGMENT_MAX UNSORTED_SEGMENT_SUM ATAN2
UNSORTED_SEGMENT_MIN SIGN BITCAST BITWISE_XOR RIGHT_SHIFT STABLEHLO_LOGISTIC STABLEHLO_ADD
STABLEHLO_DIVIDE STABLEHLO_MULTIPLY STABLEHLO_MAXIMUM STABLEHLO_RESHAPE STABLEHLO_CLAMP
STABLEHLO_CONCATENATE STABLEHLO_BROADCAST_IN_DIM STABLEHLO_CONVOLUTION STABLEHLO_SLICE
STABLEHLO_CUSTOM_CALL STABLEHLO_REDUCE STABLEHLO_ABS STABLEHLO_AND STABLEHLO_COSINE
STABLEHLO_EXPONENTIAL STABLEHLO_FLOOR STABLEHLO_LOG STABLEHLO_MINIMUM STABLEHLO_NEGATE
STABLEHLO_OR STABLEHLO_POWER STABLEHLO_REMAINDER STABLEHLO_RSQRT STABLEHLO_SELECT
STABLEHLO_SUBTRACT STABLEHLO_TANH STABLEHLO_SCATTER STABLEHLO_COMPARE STABLEHLO_CONVERT
STABLEHLO_DYNAMIC_SLICE STABLEHLO_DYNAMIC_UPDATE_SLICE STABLEHLO_PAD STABLEHLO_IOTA
STABLEHLO_DOT_GENERAL STABLEHLO_REDUCE_WINDOW STABLEHLO_SORT STABLEHLO_WHILE
STABLEHLO_GATHER STABLEHLO_TRANSPOSE DILATE STABLEHLO_RNG_BIT_GENERATOR REDUCE_WINDOW
STABLEHLO_COMPOSITE STABLEHLO_SHIFT_LEFT STABLEHLO_CBRT STABLEHLO_CASE
""".split()
BUILTIN: dict[str, int] = {name: code for code, name in enumerate(_OPS)}

# The BuiltinOptions union's members, by type index (1 ..).
_OPTIONS = """
Conv2DOptions DepthwiseConv2DOptions ConcatEmbeddingsOptions LSHProjectionOptions
Pool2DOptions SVDFOptions RNNOptions FullyConnectedOptions SoftmaxOptions
ConcatenationOptions AddOptions L2NormOptions LocalResponseNormalizationOptions LSTMOptions
ResizeBilinearOptions CallOptions ReshapeOptions SkipGramOptions SpaceToDepthOptions
EmbeddingLookupSparseOptions MulOptions PadOptions GatherOptions BatchToSpaceNDOptions
SpaceToBatchNDOptions TransposeOptions ReducerOptions SubOptions DivOptions SqueezeOptions
SequenceRNNOptions StridedSliceOptions ExpOptions TopKV2Options SplitOptions
LogSoftmaxOptions CastOptions DequantizeOptions MaximumMinimumOptions ArgMaxOptions
LessOptions NegOptions PadV2Options GreaterOptions GreaterEqualOptions LessEqualOptions
SelectOptions SliceOptions TransposeConvOptions SparseToDenseOptions TileOptions
ExpandDimsOptions EqualOptions NotEqualOptions ShapeOptions PowOptions ArgMinOptions
FakeQuantOptions PackOptions LogicalOrOptions OneHotOptions LogicalAndOptions
LogicalNotOptions UnpackOptions FloorDivOptions SquareOptions ZerosLikeOptions FillOptions
BidirectionalSequenceLSTMOptions BidirectionalSequenceRNNOptions
UnidirectionalSequenceLSTMOptions FloorModOptions RangeOptions ResizeNearestNeighborOptions
LeakyReluOptions SquaredDifferenceOptions MirrorPadOptions AbsOptions SplitVOptions
UniqueOptions ReverseV2Options AddNOptions GatherNdOptions CosOptions WhereOptions
RankOptions ReverseSequenceOptions MatrixDiagOptions QuantizeOptions MatrixSetDiagOptions
HardSwishOptions IfOptions WhileOptions DepthToSpaceOptions NonMaxSuppressionV4Options
NonMaxSuppressionV5Options ScatterNdOptions SelectV2Options DensifyOptions SegmentSumOptions
BatchMatMulOptions CumsumOptions CallOnceOptions BroadcastToOptions Rfft2dOptions
Conv3DOptions HashtableOptions HashtableFindOptions HashtableImportOptions
HashtableSizeOptions VarHandleOptions ReadVariableOptions AssignVariableOptions
RandomOptions BucketizeOptions GeluOptions DynamicUpdateSliceOptions
UnsortedSegmentProdOptions UnsortedSegmentMaxOptions UnsortedSegmentMinOptions
UnsortedSegmentSumOptions ATan2Options SignOptions BitcastOptions BitwiseXorOptions
RightShiftOptions
""".split()
OPTIONS: dict[str, int] = {name: i + 1 for i, name in enumerate(_OPTIONS)}
OPTIONS2: dict[str, int] = {}

# TensorType codes.
TYPES = {
    "FLOAT32": 0,
    "FLOAT16": 1,
    "INT32": 2,
    "UINT8": 3,
    "INT64": 4,
    "STRING": 5,
    "BOOL": 6,
    "INT16": 7,
    "COMPLEX64": 8,
    "INT8": 9,
    "FLOAT64": 10,
    "COMPLEX128": 11,
    "UINT64": 12,
    "UINT32": 15,
    "UINT16": 16,
    "INT4": 17,
    "BFLOAT16": 18,
}

_ACT = ("fused_activation_function", "i8", 0)

TABLES: dict[str, list[tuple[str, str, object]]] = {
    "Model": [
        ("version", "u32", 0),
        ("operator_codes", "[table]", None),
        ("subgraphs", "[table]", None),
        ("description", "str", None),
        ("buffers", "[table]", None),
        ("metadata_buffer", "[i32]", None),
        ("metadata", "[table]", None),
        ("signature_defs", "[table]", None),
    ],
    "OperatorCode": [
        ("deprecated_builtin_code", "i8", 0),
        ("custom_code", "str", None),
        ("version", "i32", 1),
        ("builtin_code", "i32", 0),
    ],
    "SubGraph": [
        ("tensors", "[table]", None),
        ("inputs", "[i32]", None),
        ("outputs", "[i32]", None),
        ("operators", "[table]", None),
        ("name", "str", None),
    ],
    "Buffer": [("data", "[u8/16]", None), ("offset", "u64", 0), ("size", "u64", 0)],
    "Metadata": [("name", "str", None), ("buffer", "u32", 0)],
    "TensorMap": [("name", "str", None), ("tensor_index", "u32", 0)],
    "SignatureDef": [
        ("inputs", "[table]", None),
        ("outputs", "[table]", None),
        ("signature_key", "str", None),
        ("deprecated_tag", "str", None),
        ("subgraph_index", "u32", 0),
    ],
    "QuantizationParameters": [
        ("min", "[f32]", None),
        ("max", "[f32]", None),
        ("scale", "[f32]", None),
        ("zero_point", "[i64]", None),
        ("details", "union", None),
        ("quantized_dimension", "i32", 0),
    ],
    "Tensor": [
        ("shape", "[i32]", None),
        ("type", "i8", 0),
        ("buffer", "u32", 0),
        ("name", "str", None),
        ("quantization", "table", None),
        ("is_variable", "bool", False),
        ("sparsity", "table", None),
        ("shape_signature", "[i32]", None),
        ("has_rank", "bool", False),
    ],
    "Operator": [
        ("opcode_index", "u32", 0),
        ("inputs", "[i32]", None),
        ("outputs", "[i32]", None),
        ("builtin_options", "union", None),
        ("custom_options", "[u8]", None),
        ("custom_options_format", "i8", 0),
        ("mutating_variable_inputs", "[bool]", None),
        ("intermediates", "[i32]", None),
        ("large_custom_options_offset", "u64", 0),
        ("large_custom_options_size", "u64", 0),
        ("builtin_options_2", "union", None),
    ],
    # options tables
    "Conv2DOptions": [
        ("padding", "i8", 0),
        ("stride_w", "i32", 0),
        ("stride_h", "i32", 0),
        _ACT,
        ("dilation_w_factor", "i32", 1),
        ("dilation_h_factor", "i32", 1),
        ("quantized_bias_type", "i8", 0),
    ],
    "DepthwiseConv2DOptions": [
        ("padding", "i8", 0),
        ("stride_w", "i32", 0),
        ("stride_h", "i32", 0),
        ("depth_multiplier", "i32", 0),
        _ACT,
        ("dilation_w_factor", "i32", 1),
        ("dilation_h_factor", "i32", 1),
    ],
    "Conv3DOptions": [
        ("padding", "i8", 0),
        ("stride_d", "i32", 0),
        ("stride_w", "i32", 0),
        ("stride_h", "i32", 0),
        _ACT,
        ("dilation_d_factor", "i32", 1),
        ("dilation_w_factor", "i32", 1),
        ("dilation_h_factor", "i32", 1),
    ],
    "Pool2DOptions": [
        ("padding", "i8", 0),
        ("stride_w", "i32", 0),
        ("stride_h", "i32", 0),
        ("filter_width", "i32", 0),
        ("filter_height", "i32", 0),
        _ACT,
    ],
    "FullyConnectedOptions": [
        _ACT,
        ("weights_format", "i8", 0),
        ("keep_num_dims", "bool", False),
        ("asymmetric_quantize_inputs", "bool", False),
        ("quantized_bias_type", "i8", 0),
    ],
    "SoftmaxOptions": [("beta", "f32", 0.0)],
    "ConcatenationOptions": [("axis", "i32", 0), _ACT],
    "AddOptions": [_ACT, ("pot_scale_int16", "bool", True)],
    "SubOptions": [_ACT, ("pot_scale_int16", "bool", True)],
    "MulOptions": [_ACT],
    "DivOptions": [_ACT],
    "L2NormOptions": [_ACT],
    "LocalResponseNormalizationOptions": [
        ("radius", "i32", 0),
        ("bias", "f32", 0.0),
        ("alpha", "f32", 0.0),
        ("beta", "f32", 0.0),
    ],
    "ResizeBilinearOptions": [
        ("new_height", "i32", 0),
        ("new_width", "i32", 0),
        ("align_corners", "bool", False),
        ("half_pixel_centers", "bool", False),
    ],
    "ResizeNearestNeighborOptions": [
        ("align_corners", "bool", False),
        ("half_pixel_centers", "bool", False),
    ],
    "ReshapeOptions": [("new_shape", "[i32]", None)],
    "SpaceToDepthOptions": [("block_size", "i32", 0)],
    "DepthToSpaceOptions": [("block_size", "i32", 0)],
    "GatherOptions": [("axis", "i32", 0), ("batch_dims", "i32", 0)],
    "ReducerOptions": [("keep_dims", "bool", False)],
    "SqueezeOptions": [("squeeze_dims", "[i32]", None)],
    "SplitOptions": [("num_splits", "i32", 0)],
    "SplitVOptions": [("num_splits", "i32", 0)],
    "StridedSliceOptions": [
        ("begin_mask", "i32", 0),
        ("end_mask", "i32", 0),
        ("ellipsis_mask", "i32", 0),
        ("new_axis_mask", "i32", 0),
        ("shrink_axis_mask", "i32", 0),
        ("offset", "bool", False),
    ],
    "CastOptions": [("in_data_type", "i8", 0), ("out_data_type", "i8", 0)],
    "ArgMaxOptions": [("output_type", "i8", 0)],
    "ArgMinOptions": [("output_type", "i8", 0)],
    "TransposeConvOptions": [
        ("padding", "i8", 0),
        ("stride_w", "i32", 0),
        ("stride_h", "i32", 0),
        _ACT,
        ("quantized_bias_type", "i8", 0),
    ],
    "ShapeOptions": [("out_type", "i8", 0)],
    "PackOptions": [("values_count", "i32", 0), ("axis", "i32", 0)],
    "CallOnceOptions": [("init_subgraph_index", "i32", 0)],
    "VarHandleOptions": [("container", "str", None), ("shared_name", "str", None)],
    "UnpackOptions": [("num", "i32", 0), ("axis", "i32", 0)],
    "OneHotOptions": [("axis", "i32", 0)],
    "LeakyReluOptions": [("alpha", "f32", 0.0)],
    "MirrorPadOptions": [("mode", "i8", 0)],
    "BatchMatMulOptions": [
        ("adj_x", "bool", False),
        ("adj_y", "bool", False),
        ("asymmetric_quantize_inputs", "bool", False),
    ],
    "CumsumOptions": [("exclusive", "bool", False), ("reverse", "bool", False)],
    "GeluOptions": [("approximate", "bool", False)],
    "UnidirectionalSequenceLSTMOptions": [
        _ACT,
        ("cell_clip", "f32", 0.0),
        ("proj_clip", "f32", 0.0),
        ("time_major", "bool", False),
        ("asymmetric_quantize_inputs", "bool", False),
        ("diagonal_recurrent_tensors", "bool", False),
    ],
    "SequenceRNNOptions": [
        ("time_major", "bool", False),
        _ACT,
        ("asymmetric_quantize_inputs", "bool", False),
    ],
}

# Options tables without fields (the op still names its table).
for _name in """PadOptions PadV2Options TransposeOptions ExpOptions TopKV2Options LogSoftmaxOptions
    DequantizeOptions QuantizeOptions MaximumMinimumOptions LessOptions NegOptions GreaterOptions
    GreaterEqualOptions LessEqualOptions SelectOptions SelectV2Options SliceOptions TileOptions
    ExpandDimsOptions EqualOptions NotEqualOptions PowOptions LogicalOrOptions LogicalAndOptions
    LogicalNotOptions FloorDivOptions FloorModOptions SquareOptions ZerosLikeOptions FillOptions
    RangeOptions SquaredDifferenceOptions AbsOptions ReverseV2Options AddNOptions GatherNdOptions
    CosOptions WhereOptions RankOptions HardSwishOptions ScatterNdOptions DensifyOptions
    BroadcastToOptions Rfft2dOptions ATan2Options SignOptions BitwiseXorOptions
    RightShiftOptions ReadVariableOptions AssignVariableOptions""".split():
    TABLES.setdefault(_name, [])


def op_code(name: str) -> int:
    """The builtin code of op ``name`` (KeyError naming it when the schema has none)."""
    try:
        return BUILTIN[name]
    except KeyError:
        raise KeyError(f"TFLite has no builtin op {name!r}") from None
