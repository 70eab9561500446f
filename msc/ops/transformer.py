"""Building blocks of modern sequence models: rotary embeddings, linear attention, causal
convolution with state, gated linear units.

# NOTE: these stay high-level (one node each) with ONNX's semantics (RotaryEmbedding,
# LinearAttention, CausalConvWithState, SwiGLU); the recurrences of linear attention and the
# state of the causal convolution are part of the op, returned as a second output.
"""

from __future__ import annotations

from msc.ir.types import TensorType
from msc.ops import registry
from msc.ops.infer import InferError, known, same_dtype
from msc.ops.schema import Attr


@registry.op(
    "rotary_embedding",
    ["x", "cos_cache", "sin_cache", "position_ids?"],
    {
        "interleaved": Attr.bool(False),
        "rotary_dim": Attr.int(0, doc="0 = the whole head"),
        "num_heads": Attr.int(0, doc="heads of a 3-d input [B, S, H*D]"),
    },
    category="attention",
)
def rotary_embedding(x, cos_cache, sin_cache, position_ids, *, interleaved, rotary_dim, num_heads):
    """Rotate pairs of x [B, H, S, D] (or [B, S, H*D]) by the angles whose cos/sin are
    cos_cache/sin_cache [max_pos, rotary_dim/2] at position_ids [B, S] (or [B, S, rotary_dim/2]
    without position ids); halves or interleaved pairs (ONNX RotaryEmbedding)."""
    same_dtype(x, cos_cache, sin_cache)
    if x.shape is not None and len(x.shape) == 3 and not num_heads:
        raise InferError("rotary_embedding: a 3-d input needs num_heads")
    return x


LINEAR_ATTENTION_RULES = ("linear", "gated", "delta", "gated_delta")


@registry.op(
    "linear_attention",
    ["query", "key", "value", "past_state?", "decay?", "beta?"],
    {
        "update_rule": Attr.str("gated_delta", doc=" | ".join(LINEAR_ATTENTION_RULES)),
        "q_num_heads": Attr.int(),
        "kv_num_heads": Attr.int(),
        "scale": Attr.float(None, doc="none = 1/sqrt(head_dim)"),
    },
    outputs=2,
    category="attention",
)
def linear_attention(
    query, key, value, past_state, decay, beta, *, update_rule, q_num_heads, kv_num_heads, scale
):
    """Recurrent linear attention over [B, T, H*D] inputs with a [B, H_kv, Dk, Dv] state:
    per step S = exp(decay) * S (gated), v = beta * (v - S^T k) (delta), S += k v^T,
    o = scale * q S. Returns (output [B, T, H_q*Dv], present state) (ONNX LinearAttention)."""
    if update_rule not in LINEAR_ATTENTION_RULES:
        raise InferError(f"linear_attention: update_rule {update_rule!r}")
    if q_num_heads <= 0 or kv_num_heads <= 0 or q_num_heads % kv_num_heads:
        raise InferError("linear_attention: q_num_heads must be a multiple of kv_num_heads")
    gated, delta = update_rule in ("gated", "gated_delta"), update_rule in ("delta", "gated_delta")
    if gated != (decay is not None) or delta != (beta is not None):
        raise InferError(f"linear_attention: update_rule {update_rule!r} and decay/beta disagree")
    dt = same_dtype(query, key, value)
    if query.shape is None or key.shape is None or value.shape is None:
        return [TensorType(dt, None), TensorType(dt, None)]
    b, t = query.shape[0], query.shape[1]
    dk = key.shape[2] // kv_num_heads if known(key.shape[2]) else None
    dv = value.shape[2] // kv_num_heads if known(value.shape[2]) else None
    out = TensorType(dt, (b, t, q_num_heads * dv if dv is not None else None))
    sdt = past_state.dtype if past_state is not None else dt
    return [out, TensorType(sdt, (b, kv_num_heads, dk, dv))]


@registry.op(
    "causal_conv_with_state",
    ["x", "weight", "bias?", "past_state?"],
    {"activation": Attr.str("none", doc="none | silu | swish")},
    outputs=2,
    category="conv",
)
def causal_conv_with_state(x, weight, bias, past_state, *, activation):
    """Depthwise causal 1-d convolution of x [B, C, L] with weight [C, 1, k], left-padded by
    past_state [B, C, k-1] (zeros when absent), optional SiLU; returns (output [B, C, L],
    present state: the last k-1 positions of the padded input) (ONNX CausalConvWithState)."""
    if activation not in ("none", "silu", "swish"):
        raise InferError(f"causal_conv_with_state: activation {activation!r}")
    dt = same_dtype(x, weight, bias, past_state)
    if x.shape is None or weight.shape is None:
        return [TensorType(dt, x.shape), TensorType(dt, None)]
    k = weight.shape[2]
    state = (x.shape[0], x.shape[1], k - 1 if known(k) else None)
    return [TensorType(dt, x.shape), TensorType(dt, state)]


@registry.op("swiglu", ["a", "b"], {"alpha": Attr.float(1.0)}, category="activation")
def swiglu(a, b, *, alpha):
    """a * sigmoid(alpha * a) * b, a and b of one shape (ONNX SwiGLU)."""
    dt = same_dtype(a, b)
    if a.shape is not None and b.shape is not None and len(a.shape) != len(b.shape):
        raise InferError("swiglu: a and b must have one shape")
    return TensorType(dt, a.shape)
