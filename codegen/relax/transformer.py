"""Relax emitters of the transformer family."""

from __future__ import annotations

from tvm import relax

from codegen.relax.registry import Emit, emitter, unsupported

R = relax.op


@emitter("swiglu")
def swiglu(e: Emit, a, b, *, alpha=1.0):
    z = a if alpha == 1.0 else e.emit(R.multiply(a, e.const(alpha, e.dtype(a))))
    return e.emit(R.multiply(R.multiply(a, R.sigmoid(z)), b))


@emitter("rotary_embedding")
def rotary_embedding(
    e: Emit, x, cos_cache, sin_cache, position_ids=None, *, interleaved=False, rotary_dim=0,
    num_heads=0,
):  # fmt: skip
    # ONNX RotaryEmbedding: x as [B, S, H, D]; the first rotary_dim features rotated in pairs
    # (halves, or interleaved even/odd) by cos/sin [B, S, rotary_dim/2] at each position.
    shape = e.shape(x)
    e.require(len(shape) in (3, 4), f"rotary_embedding of a rank-{len(shape)} input")
    if len(shape) == 4:
        t = e.emit(R.permute_dims(x, [0, 2, 1, 3]))
    else:
        e.require(isinstance(shape[2], int), "a symbolic hidden size")
        t = e.emit(R.reshape(x, [shape[0], shape[1], num_heads, shape[2] // num_heads]))
    d = e.shape(t)[-1]
    e.require(isinstance(d, int), "a symbolic head size")
    r = rotary_dim or d
    if position_ids is not None:
        pos = (
            e.emit(R.astype(position_ids, "int64"))
            if e.dtype(position_ids) != "int64"
            else position_ids
        )
        cos_cache = e.emit(R.take(cos_cache, pos, axis=0))
        sin_cache = e.emit(R.take(sin_cache, pos, axis=0))
    cos = e.emit(R.expand_dims(cos_cache, [2]))
    sin = e.emit(R.expand_dims(sin_cache, [2]))
    rot = t if r == d else e.emit(R.strided_slice(t, [3], [0], [r]))
    if interleaved:
        x1 = e.emit(R.strided_slice(rot, [3], [0], [r], [2]))
        x2 = e.emit(R.strided_slice(rot, [3], [1], [r], [2]))
    else:
        x1 = e.emit(R.strided_slice(rot, [3], [0], [r // 2]))
        x2 = e.emit(R.strided_slice(rot, [3], [r // 2], [r]))
    real = e.emit(R.subtract(R.multiply(cos, x1), R.multiply(sin, x2)))
    imag = e.emit(R.add(R.multiply(sin, x1), R.multiply(cos, x2)))
    if interleaved:
        pairs = e.emit(R.stack([real, imag], -1))
        rot = e.emit(R.reshape(pairs, e.shape(rot)))
    else:
        rot = e.emit(R.concat([real, imag], -1))
    if r != d:
        rot = e.emit(R.concat([rot, R.strided_slice(t, [3], [r], [d])], -1))
    if len(shape) == 4:
        return e.emit(R.permute_dims(rot, [0, 2, 1, 3]))
    return e.emit(R.reshape(rot, shape))


unsupported(
    "linear_attention",
    "Relax has no recurrent linear attention (a scan over time with a state update) and msc "
    "has no decomposition",
)


@emitter("causal_conv_with_state")
def causal_conv_with_state(e: Emit, x, weight, bias=None, past_state=None, *, activation="none"):
    # The input left-padded by the past state (zeros when absent), a depthwise conv1d, an
    # optional SiLU; the present state is the last k - 1 positions of the padded input.
    b, c, n = e.shape(x)
    k = e.shape(weight)[2]
    e.require(isinstance(c, int) and isinstance(k, int), "symbolic channels or kernel")
    if past_state is None:
        past_state = e.emit(R.zeros([b, c, k - 1], e.dtype(x)))
    padded = e.emit(R.concat([past_state, x], 2))
    dt = e.dtype(x)
    # Half-precision inputs are computed in float32 and rounded once (as ONNX's reference).
    wide = dt in ("float16", "bfloat16")
    p, w = padded, weight
    if wide:
        p, w = e.emit(R.astype(padded, "float32")), e.emit(R.astype(weight, "float32"))
    y = e.emit(R.nn.conv1d(p, w, groups=c, data_layout="NCW", kernel_layout="OIW"))
    if bias is not None:
        bias = e.emit(R.astype(bias, "float32")) if wide else bias
        y = e.emit(R.add(y, R.reshape(bias, [1, c, 1])))
    if activation in ("silu", "swish"):
        y = e.emit(R.nn.silu(y))
    if wide:
        y = e.emit(R.astype(y, dt))
    state = e.emit(R.strided_slice(padded, [2], [n], [n + k - 1]))
    return y, state
