"""ONNX ops of modern sequence models: RotaryEmbedding, LinearAttention, CausalConvWithState,
SwiGLU. Each maps to one canonical op of the same meaning.
"""

from __future__ import annotations

from msc.frontend.onnx.importer import Ctx
from msc.frontend.onnx.registry import converter
from msc.ir import DType


@converter("RotaryEmbedding", since=23)
def rotary_embedding(
    ctx: Ctx,
    X,  # noqa: N803
    cos_cache,
    sin_cache,
    position_ids=None,
    *,
    interleaved=0,
    num_heads=0,
    rotary_embedding_dim=0,
):
    pos = None if position_ids is None else ctx.cast(position_ids, DType.INT64)
    return ctx.op(
        "rotary_embedding",
        X,
        cos_cache,
        sin_cache,
        pos,
        interleaved=bool(interleaved),
        rotary_dim=rotary_embedding_dim,
        num_heads=num_heads,
    )


@converter("LinearAttention", since=27)
def linear_attention(
    ctx: Ctx,
    query,
    key,
    value,
    past_state=None,
    decay=None,
    beta=None,
    *,
    chunk_size=0,  # a tuning hint with no effect on the result
    kv_num_heads,
    q_num_heads,
    scale=0.0,
    update_rule="gated_delta",
):
    del chunk_size
    return ctx.ops(
        "linear_attention",
        query,
        key,
        value,
        past_state,
        decay,
        beta,
        update_rule=update_rule,
        q_num_heads=q_num_heads,
        kv_num_heads=kv_num_heads,
        scale=scale or None,
    )


@converter("CausalConvWithState", since=27)
def causal_conv_with_state(
    ctx: Ctx, input, weight, bias=None, past_state=None, *, activation="none"
):  # noqa: A002
    return ctx.ops("causal_conv_with_state", input, weight, bias, past_state, activation=activation)


@converter("SwiGLU", since=28)
def swiglu(ctx: Ctx, A, B, *, alpha=1.0):  # noqa: N803
    return ctx.op("swiglu", A, B, alpha=alpha)
