"""Emitters of the transformer family (swiglu, rotary_embedding, linear_attention,
causal_conv_with_state), with their run-time helpers.

# NOTE: a run-time helper (``_msc_*``) uses only ``torch``, ``F`` and other helpers: its
# source is pasted into generated modules.
"""

from __future__ import annotations

import ast

import torch
import torch.nn.functional as F

from codegen.torch.code import expr
from codegen.torch.core import Arg, NodeEmit
from codegen.torch.emitters.common import forward_to_helper
from codegen.torch.helpers import runtime_helpers
from codegen.torch.registry import EMITTERS, emitter


@emitter("swiglu")
def swiglu(e: NodeEmit, a: Arg, b: Arg, *, alpha: float) -> ast.expr:
    if alpha == 1.0:
        return expr("F.silu(a) * b", a=a, b=b)
    return expr("a * torch.sigmoid(a * s) * b", a=a, b=b, s=alpha)


# Ops computed by one run-time helper taking the node's inputs and attributes in order.
EMITTERS("rotary_embedding")(forward_to_helper("_msc_rotary_embedding", __name__))
EMITTERS("linear_attention")(forward_to_helper("_msc_linear_attention", __name__))
EMITTERS("causal_conv_with_state")(forward_to_helper("_msc_causal_conv_with_state", __name__))


def _msc_rotary_embedding(
    x, cos_cache, sin_cache, position_ids, interleaved, rotary_dim, num_heads
):
    """ONNX RotaryEmbedding on [B, H, S, D] or [B, S, H*D]."""
    shape = x.shape
    t = x.transpose(1, 2) if x.dim() == 4 else x.reshape(shape[0], shape[1], num_heads, -1)
    r = rotary_dim or t.shape[-1]
    if position_ids is not None:
        cos_cache, sin_cache = cos_cache[position_ids], sin_cache[position_ids]
    cos, sin = cos_cache.unsqueeze(2), sin_cache.unsqueeze(2)
    rot, rest = t[..., :r], t[..., r:]
    if interleaved:
        x1, x2 = rot[..., 0::2], rot[..., 1::2]
    else:
        x1, x2 = rot[..., : r // 2], rot[..., r // 2 :]
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    if interleaved:
        rot = torch.stack([real, imag], -1).reshape(rot.shape)
    else:
        rot = torch.cat([real, imag], -1)
    out = torch.cat([rot, rest], -1)
    return out.transpose(1, 2) if x.dim() == 4 else out.reshape(shape)


def _msc_linear_attention(q, k, v, past_state, decay, beta, update_rule, hq, hkv, scale):
    """ONNX LinearAttention: the step recurrence in float32; (output, present state)."""
    b, t = q.shape[0], q.shape[1]
    f32 = torch.float32

    def heads(a, h):
        return a.reshape(b, t, h, -1).transpose(1, 2).to(f32)

    q4, k4, v4 = heads(q, hq), heads(k, hkv), heads(v, hkv)
    dk, dv = k4.shape[-1], v4.shape[-1]
    gated = update_rule in ("gated", "gated_delta")
    delta = update_rule in ("delta", "gated_delta")
    g = None
    if gated:
        g = (
            heads(decay, hkv)
            if decay.shape[-1] != hkv
            else decay.to(f32).transpose(1, 2).unsqueeze(-1)
        )
    be = beta.to(f32).transpose(1, 2).unsqueeze(-1) if delta else None
    if past_state is not None:
        state = past_state.to(f32)
    else:
        state = torch.zeros(b, hkv, dk, dv, dtype=f32, device=q.device)
    s = scale if scale else dk**-0.5
    outs = []
    for i in range(t):
        if gated:
            state = state * torch.exp(g[:, :, i]).unsqueeze(-1)
        kt, vt = k4[:, :, i], v4[:, :, i]
        if delta:
            vt = be[:, :, i] * (vt - torch.einsum("bhdm,bhd->bhm", state, kt))
        state = state + kt.unsqueeze(-1) * vt.unsqueeze(-2)
        read = state.repeat_interleave(hq // hkv, dim=1) if hq != hkv else state
        outs.append(s * torch.einsum("bhd,bhdm->bhm", q4[:, :, i], read))
    out = torch.stack(outs, 2).transpose(1, 2).reshape(b, t, hq * dv).to(q.dtype)
    return out, state.to(q.dtype if past_state is None else past_state.dtype)


def _msc_causal_conv_with_state(x, weight, bias, past_state, activation):
    """Depthwise causal conv1d left-padded by past_state (zeros when absent); optional SiLU;
    returns (output, the last k-1 positions of the padded input)."""
    k = weight.shape[2]
    if past_state is None:
        past_state = x.new_zeros(x.shape[0], x.shape[1], k - 1)
    padded = torch.cat([past_state, x], 2)
    y = F.conv1d(padded, weight, bias, groups=x.shape[1])
    if activation in ("silu", "swish"):
        y = F.silu(y.float()).to(x.dtype)
    return y, padded[:, :, padded.shape[2] - (k - 1) :]


runtime_helpers(_msc_rotary_embedding, _msc_linear_attention, _msc_causal_conv_with_state)
