"""Relax emitters of the transformer family."""

from __future__ import annotations

from codegen.relax.registry import unsupported

unsupported(
    "linear_attention",
    "Relax has no recurrent linear attention (a scan over time with a state update) and msc "
    "has no decomposition",
)
unsupported(
    "causal_conv_with_state",
    "not written yet (a concat with the past state, a depthwise conv1d and the new state's slice)",
)
unsupported("rotary_embedding", "no emitter yet")
unsupported("swiglu", "no emitter yet")
