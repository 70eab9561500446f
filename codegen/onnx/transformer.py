"""ONNX emitters of the transformer family (swiglu, rotary_embedding, linear_attention,
causal_conv_with_state)."""

from __future__ import annotations

from codegen.onnx.registry import Emit, Ref, emitter


# ---------------------------------------------------------------- sequence models
@emitter("rotary_embedding", since=23)
def rotary_embedding(
    e: Emit, x, cos_cache, sin_cache, position_ids, *, interleaved, rotary_dim, num_heads
):
    return e.op(
        "RotaryEmbedding",
        x,
        cos_cache,
        sin_cache,
        position_ids,
        interleaved=int(interleaved),
        rotary_embedding_dim=rotary_dim or None,
        num_heads=num_heads or None,
    )


@emitter("linear_attention", since=27)
def linear_attention(
    e: Emit,
    query,
    key,
    value,
    past_state,
    decay,
    beta,
    *,
    update_rule,
    q_num_heads,
    kv_num_heads,
    scale,
):
    return e.op(
        "LinearAttention",
        query,
        key,
        value,
        past_state,
        decay,
        beta,
        outputs=2,
        update_rule=update_rule,
        q_num_heads=q_num_heads,
        kv_num_heads=kv_num_heads,
        scale=scale,
    )


@emitter("causal_conv_with_state", since=27)
def causal_conv_with_state(e: Emit, x, weight, bias, past_state, *, activation):
    return e.op(
        "CausalConvWithState", x, weight, bias, past_state, outputs=2, activation=activation
    )


@emitter("swiglu", since=28)
def swiglu(e: Emit, a: Ref, b: Ref, *, alpha):
    return e.op("SwiGLU", a, b, alpha=alpha if alpha != 1.0 else None)
