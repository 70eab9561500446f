"""Emitters through run-time helpers (helpers_ext.py) for the vision, signal, sequence-model
and data-dependent ops that no single torch call computes: unique, non_max_suppression,
roi_align, deform_conv, dft, stft, rotary_embedding, linear_attention, causal_conv_with_state,
reverse_sequence, tensor_scatter.

# NOTE: extra.py emits the ops of these families that one torch call computes and declares the
# rest unsupported; this module, imported after it, fills those gaps (``EMITTERS.fill``). The
# helpers implement the canonical (ONNX) semantics exactly and import only torch.
"""

from __future__ import annotations

import ast

from codegen.torch import helpers_ext  # noqa: F401 - registers the helpers used below
from codegen.torch.code import call
from codegen.torch.core import Arg, NodeEmit
from codegen.torch.registry import EMITTERS
from msc.errors import ConversionError


def _helper(e: NodeEmit, name: str, *args, **kwargs) -> ast.expr:
    return call(e.helper(name).id, *args, **kwargs)


# ---------------------------------------------------------------- vision
@EMITTERS("deform_conv")
def deform_conv(
    e, x, weight, offset, bias=None, mask=None, *, stride, padding, dilation, groups, offset_groups
):
    return _helper(
        e,
        "_msc_deform_conv",
        x,
        weight,
        offset,
        bias,
        mask,
        list(stride),
        list(padding),
        list(dilation),
        groups,
        offset_groups,
    )


@EMITTERS("roi_align")
def roi_align(
    e,
    x,
    rois,
    batch_indices,
    *,
    mode,
    output_height,
    output_width,
    sampling_ratio,
    spatial_scale,
    half_pixel,
):
    return _helper(
        e,
        "_msc_roi_align",
        x,
        rois,
        batch_indices,
        mode,
        output_height,
        output_width,
        sampling_ratio,
        spatial_scale,
        half_pixel,
    )


@EMITTERS("non_max_suppression")
def non_max_suppression(e, boxes, scores, max_out=None, iou=None, score=None, *, center_point_box):
    return _helper(
        e, "_msc_non_max_suppression", boxes, scores, max_out, iou, score, center_point_box
    )


# ---------------------------------------------------------------- signal
@EMITTERS("dft")
def dft(e: NodeEmit, x: Arg, *, axis, inverse, onesided, length):
    return _helper(e, "_msc_dft", x, axis, inverse, onesided, length)


@EMITTERS("stft")
def stft(
    e: NodeEmit, signal: Arg, window: Arg | None = None, *, frame_step, frame_length, onesided
):
    n = frame_length
    if n is None:
        if window is None or window.shape is None or not isinstance(window.shape[0], int):
            raise ConversionError("stft: frame length unknown (no frame_length, no static window)")
        n = window.shape[0]
    return _helper(e, "_msc_stft", signal, window, frame_step, n, onesided)


# ---------------------------------------------------------------- sequence models
@EMITTERS("rotary_embedding")
def rotary_embedding(
    e, x, cos_cache, sin_cache, position_ids=None, *, interleaved, rotary_dim, num_heads
):
    return _helper(
        e,
        "_msc_rotary_embedding",
        x,
        cos_cache,
        sin_cache,
        position_ids,
        interleaved,
        rotary_dim,
        num_heads,
    )


@EMITTERS("linear_attention")
def linear_attention(
    e,
    query,
    key,
    value,
    past_state=None,
    decay=None,
    beta=None,
    *,
    update_rule,
    q_num_heads,
    kv_num_heads,
    scale,
):
    return _helper(
        e,
        "_msc_linear_attention",
        query,
        key,
        value,
        past_state,
        decay,
        beta,
        update_rule,
        q_num_heads,
        kv_num_heads,
        scale,
    )


@EMITTERS("causal_conv_with_state")
def causal_conv_with_state(e, x, weight, bias=None, past_state=None, *, activation):
    return _helper(e, "_msc_causal_conv_with_state", x, weight, bias, past_state, activation)


# ---------------------------------------------------------------- tensor
@EMITTERS("unique")
def unique(e: NodeEmit, x: Arg, *, axis, sorted):  # noqa: A002
    return _helper(e, "_msc_unique", x, axis, sorted)


@EMITTERS("reverse_sequence")
def reverse_sequence(e: NodeEmit, x: Arg, sequence_lens: Arg, *, batch_axis, time_axis):
    return _helper(e, "_msc_reverse_sequence", x, sequence_lens, batch_axis, time_axis)


@EMITTERS("tensor_scatter")
def tensor_scatter(e, past_cache, update, write_indices=None, *, axis, mode):
    return _helper(e, "_msc_tensor_scatter", past_cache, update, write_indices, axis, mode)
