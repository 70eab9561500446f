"""ONNX ops of modern sequence models: RotaryEmbedding, LinearAttention, CausalConvWithState,
SwiGLU. Each maps to one canonical op of the same meaning.
"""

from __future__ import annotations

import numpy as np

from msc.frontend.onnx.importer import Ctx, Unsupported
from msc.frontend.onnx.initializers import dtype_from_onnx
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


# ---------------------------------------------------------------- attention
def _heads(ctx: Ctx, x, n: int):
    """[B, S, n*d] -> [B, n, S, d]."""
    b, s, hidden = ctx.shape(x)
    if not isinstance(s, int) or not isinstance(hidden, int):
        raise Unsupported("3-d Attention inputs need static sequence and hidden sizes")
    y = ctx.op("reshape", x, shape=[-1, s, n, hidden // n])
    return ctx.op("transpose", y, perm=[0, 2, 1, 3])


def _static_bias(q: int, kv: int, offset: int, causal: bool, left: int, right: int):
    """0 where allowed, -inf where a causal or window rule masks, or None if nothing masks."""
    i = np.arange(q).reshape(q, 1) + offset
    j = np.arange(kv).reshape(1, kv)
    allowed = np.ones((q, kv), bool)
    if causal:
        allowed &= j <= i
    if left >= 0:
        allowed &= i - j <= left
    if right >= 0:
        allowed &= j - i <= right
    if allowed.all():
        return None
    return allowed


@converter("Attention", since=23)
def attention(
    ctx: Ctx,
    Q,  # noqa: N803
    K,  # noqa: N803
    V,  # noqa: N803
    attn_mask=None,
    past_key=None,
    past_value=None,
    nonpad_kv_seqlen=None,
    *,
    is_causal=0,
    kv_num_heads=None,
    q_num_heads=None,
    qk_matmul_output_mode=0,
    scale=None,
    softcap=0.0,
    softmax_precision=None,
    left_window_size=-1,
    right_window_size=-1,
):
    dt = ctx.dtype(Q)
    npdt = dt.to_numpy()
    rank3 = ctx.rank(Q) == 3
    if rank3:
        if q_num_heads is None or kv_num_heads is None:
            raise Unsupported("3-d Attention without q_num_heads/kv_num_heads")
        Q, K, V = (
            _heads(ctx, Q, q_num_heads),
            _heads(ctx, K, kv_num_heads),
            _heads(ctx, V, kv_num_heads),
        )
    if (past_key is None) != (past_value is None):
        raise Unsupported("past_key without past_value")
    past = 0
    if past_key is not None:
        past = ctx.shape(past_key)[2]
        K = ctx.op("concat", past_key, K, axis=2)
        V = ctx.op("concat", past_value, V, axis=2)
    present_k, present_v = K, V
    q_seq, kv_seq = ctx.shape(Q)[2], ctx.shape(K)[2]
    qh, kvh = ctx.shape(Q)[1], ctx.shape(K)[1]

    # Everything that masks, as one additive float bias (None when nothing masks).
    parts = []
    dynamic = False
    if attn_mask is not None:
        m = attn_mask
        if ctx.dtype(m) is DType.BOOL:
            m = ctx.op("where", m, np.array(0, npdt), np.array(-np.inf, npdt))
        else:
            m = ctx.cast(m, dt)
        width = ctx.shape(m)[-1]
        if isinstance(kv_seq, int) and isinstance(width, int) and width < kv_seq:
            r = ctx.rank(m)
            pads = [0] * (2 * r)
            pads[2 * r - 1] = kv_seq - width
            m = ctx.op("pad", m, pads=pads, value=float("-inf"))
        parts.append(m)
        dynamic = True
    windowed = left_window_size >= 0 or right_window_size >= 0
    if nonpad_kv_seqlen is not None:
        if not (isinstance(q_seq, int) and isinstance(kv_seq, int)):
            raise Unsupported("nonpad_kv_seqlen with sequence lengths only known at run time")
        ctx.check_size(q_seq * kv_seq, "the attention mask")
        lens = ctx.op("reshape", ctx.cast(nonpad_kv_seqlen, DType.INT64), shape=[-1, 1, 1, 1])
        j = np.arange(kv_seq, dtype=np.int64).reshape(1, 1, 1, kv_seq)
        keep = ctx.op("lt", j, lens)
        if is_causal or windowed:
            # Offset per batch: query i sits at position lens - q_seq + i.
            diff = np.arange(q_seq).reshape(q_seq, 1) - np.arange(kv_seq).reshape(1, kv_seq)
            d = ctx.op("add", diff.astype(np.int64), ctx.op("sub", lens, np.array(q_seq)))
            if is_causal:
                keep = ctx.op("logical_and", keep, ctx.op("ge", d, np.array(0, np.int64)))
            if left_window_size >= 0:
                lw = np.array(left_window_size, np.int64)
                keep = ctx.op("logical_and", keep, ctx.op("le", d, lw))
            if right_window_size >= 0:
                rw = np.array(-right_window_size, np.int64)
                keep = ctx.op("logical_and", keep, ctx.op("ge", d, rw))
        parts.append(ctx.op("where", keep, np.array(0, npdt), np.array(-np.inf, npdt)))
        dynamic = True
    elif is_causal and not windowed and not parts and past_key is None:
        parts = None  # plain top-left causal: the canonical flag says it
    elif is_causal or windowed:
        if not (isinstance(q_seq, int) and isinstance(kv_seq, int) and isinstance(past, int)):
            if is_causal and not windowed and not parts and past_key is None:
                parts = None  # plain top-left causal: the canonical flag says it
            else:
                raise Unsupported("causal/window masks over lengths only known at run time")
        if parts is not None:
            ctx.check_size(q_seq * kv_seq, "the attention mask")
            allowed = _static_bias(
                q_seq, kv_seq, past, bool(is_causal), left_window_size, right_window_size
            )
            if allowed is not None:
                parts.append(np.where(allowed, 0, -np.inf).astype(npdt))
                dynamic = dynamic or not allowed.any(axis=-1).all()
    causal_flag = parts is None
    parts = parts or []
    bias = None
    for p in parts:
        bias = p if bias is None else ctx.op("add", bias, p)

    want_qk = len(ctx.node.output) > 3 and bool(ctx.node.output[3])
    if (
        softcap
        or want_qk
        or softmax_precision is not None
        and dtype_from_onnx(softmax_precision) is not dt
    ):
        y, qk = _spelled_out(
            ctx, Q, K, V, bias, qh, kvh, scale, softcap, qk_matmul_output_mode, softmax_precision
        )
    else:
        qk = None
        if bias is None and is_causal and past == 0 and not windowed:
            causal_flag = True
        y = ctx.op(
            "attention",
            Q,
            K,
            V,
            None if causal_flag else bias,
            is_causal=causal_flag,
            scale=scale,
            # ONNX groups key / value heads whenever kv_num_heads divides q_num_heads, and
            # grouped attention over equal heads is plain attention: grouped unless the
            # head counts are known equal (a Reshape to -1 heads at run time leaves them
            # unknown).
            enable_gqa=qh is None or qh != kvh,
        )
    if bias is not None and dynamic:
        # ONNX gives 0 for a query row masked everywhere; softmax over all -inf gives NaN.
        top = ctx.op("reduce_max", bias, axes=[-1], keepdims=True)
        dead = ctx.op("eq", top, np.array(-np.inf, npdt))
        y = ctx.op("where", dead, np.array(0, npdt), y)
    if rank3:
        y = ctx.op("flatten", ctx.op("transpose", y, perm=[0, 2, 1, 3]), start_axis=2)
    return [y, present_k, present_v, qk]


def _spelled_out(ctx, Q, K, V, bias, qh, kvh, scale, softcap, mode, softmax_precision, sink=None):  # noqa: N803
    """Attention as matmul, softmax, matmul; ``sink`` [qh] is one more logit per head that
    takes part in the softmax's denominator only (onnxruntime's head_sink / smooth_softmax)."""
    dt = ctx.dtype(Q)
    npdt = dt.to_numpy()
    if qh != kvh:
        if not (isinstance(qh, int) and isinstance(kvh, int)):
            raise Unsupported("grouped-query Attention with head counts only known at run time")
        rep = qh // kvh

        def repeat(t):
            t = ctx.op("unsqueeze", t, axes=[2])
            t = ctx.op("expand", t, shape=[-1, -1, rep, -1, -1])
            return ctx.op("flatten", t, start_axis=1, end_axis=2)

        K, V = repeat(K), repeat(V)
    if scale is None:
        hd = ctx.shape(Q)[3]
        if not isinstance(hd, int):
            raise Unsupported("Attention head size only known at run time")
        scale = 1.0 / np.sqrt(hd)
    s = ctx.op("matmul", Q, ctx.op("transpose", K, perm=[0, 1, 3, 2]))
    s = ctx.op("mul", s, np.array(scale, npdt))
    if softcap:
        c = np.array(softcap, npdt)
        s = ctx.op("mul", ctx.op("tanh", ctx.op("div", s, c)), c)
    qk = s
    sb = s if bias is None else ctx.op("add", s, bias)
    if mode == 2:
        qk = sb
    if softmax_precision is not None:
        sb = ctx.cast(sb, dtype_from_onnx(softmax_precision))
    if sink is not None:
        # An extra column holding the sink logit (0 * a finite row max keeps its shape).
        sdt = ctx.dtype(sb)
        col = ctx.op("reduce_max", sb, axes=[-1], keepdims=True)
        col = ctx.op("mul", col, np.array(0, sdt.to_numpy()))
        col = ctx.op("add", col, ctx.op("reshape", ctx.cast(sink, sdt), shape=[1, -1, 1, 1]))
        p = ctx.op("softmax", ctx.op("concat", sb, col, axis=-1), axis=-1)
        p = ctx.op("slice", p, starts=[0], ends=[-1], axes=[-1])
    else:
        p = ctx.op("softmax", sb, axis=-1)
    p = ctx.cast(p, dt)
    if mode == 3:  # a fully masked row's softmax is NaN; ONNX gives 0 there
        qk = p if bias is None else ctx.op("where", ctx.op("isnan", p), np.array(0, npdt), p)
    return ctx.op("matmul", p, V), qk


# ---------------------------------------------------------------------------- losses
def _nll(ctx: Ctx, logp, target, weight, ignore_index, reduction: str):
    if reduction not in ("none", "sum", "mean"):
        raise Unsupported(f"reduction={reduction!r}")
    dt = ctx.dtype(logp)
    t = ctx.cast(target, DType.INT64)
    keep = None
    if ignore_index is not None:
        keep = ctx.op("ne", t, np.array(ignore_index, np.int64))
        t = ctx.op("where", keep, t, np.array(0, np.int64))
    picked = ctx.op("gather_elements", logp, ctx.op("unsqueeze", t, axes=[1]), axis=1)
    loss = ctx.op("neg", ctx.op("squeeze", picked, axes=[1]))
    w = None
    if weight is not None:
        w = ctx.op("gather", weight, t, axis=0)
    if keep is not None:
        k = ctx.op("cast", keep, to=dt)
        w = k if w is None else ctx.op("mul", w, k)
    if w is not None:
        loss = ctx.op("mul", loss, w)
    if reduction == "none":
        return loss
    total = ctx.op("reduce_sum", loss, axes=None, keepdims=False)
    if reduction == "sum":
        return total
    if w is None:
        return ctx.op("reduce_mean", loss, axes=None, keepdims=False)
    den = ctx.op("reduce_sum", w, axes=None, keepdims=False)
    return ctx.op("div", total, den)


@converter("NegativeLogLikelihoodLoss", since=12)
def negative_log_likelihood_loss(
    ctx: Ctx,
    input,
    target,
    weight=None,
    *,
    ignore_index=None,
    reduction="mean",  # noqa: A002
):
    return _nll(ctx, input, target, weight, ignore_index, reduction)


@converter("SoftmaxCrossEntropyLoss", since=12)
def softmax_cross_entropy_loss(
    ctx: Ctx, scores, labels, weights=None, *, ignore_index=None, reduction="mean"
):
    logp = ctx.op("log_softmax", scores, axis=1)
    return [_nll(ctx, logp, labels, weights, ignore_index, reduction), logp]


# ---------------------------------------------------------------------------- com.microsoft
# onnxruntime's contrib attention ops, written by its transformer optimizer. Each becomes the
# canonical attention (and rotary_embedding) with its masks as one additive bias.
MS = "com.microsoft"


@converter("RotaryEmbedding", since=1, domain=MS)
def ms_rotary_embedding(
    ctx: Ctx,
    input,  # noqa: A002
    position_ids,
    cos_cache,
    sin_cache,
    *,
    interleaved=0,
    is_packed_batching=0,
    num_heads=0,
    rotary_embedding_dim=0,
    scale=1.0,
):
    """Inputs [B, S, N*H] or [B, N, S, H]; position ids [B, S], or [1] holding an offset."""
    if is_packed_batching or scale != 1.0:
        raise Unsupported("RotaryEmbedding with is_packed_batching or a scale other than 1")
    shape = ctx.shape(input)
    seq = shape[1] if len(shape) == 3 else shape[2]
    if ctx.shape(position_ids) in ((1,), ()):
        if not isinstance(seq, int):
            raise Unsupported("RotaryEmbedding position offset over a run-time length")
        pos = ctx.op(
            "add",
            np.arange(seq, dtype=np.int64).reshape(1, seq),
            ctx.op("reshape", ctx.cast(position_ids, DType.INT64), shape=[1, 1]),
        )
        if isinstance(shape[0], int):  # ONNX's RotaryEmbedding wants [B, S] ids
            pos = ctx.op("expand", pos, shape=[shape[0], seq])
    else:
        pos = ctx.cast(position_ids, DType.INT64)
    if len(shape) == 3 and not num_heads:
        half, hidden = ctx.shape(cos_cache)[1], shape[2]
        if rotary_embedding_dim or not (isinstance(half, int) and isinstance(hidden, int)):
            raise Unsupported("3-d RotaryEmbedding input without num_heads")
        num_heads = hidden // (2 * half)
    return ctx.op(
        "rotary_embedding",
        input,
        cos_cache,
        sin_cache,
        pos,
        interleaved=bool(interleaved),
        rotary_dim=rotary_embedding_dim,
        num_heads=num_heads if len(shape) == 3 else 0,
    )


def _split_heads(ctx: Ctx, x, n: int):
    """[B, S, n*h] -> [B, n, S, h] (a 4-d input is taken as already split)."""
    if ctx.rank(x) == 4:
        return x
    b, s, hidden = ctx.shape(x)
    if not isinstance(hidden, int):
        raise Unsupported("attention hidden size only known at run time")
    if isinstance(s, int):
        target = [-1, s, n, hidden // n]
    elif isinstance(b, int):
        target = [b, -1, n, hidden // n]
    else:
        raise Unsupported("attention over run-time batch and sequence sizes")
    y = ctx.op("reshape", x, shape=target)
    return ctx.op("transpose", y, perm=[0, 2, 1, 3])


def _merge_heads(ctx: Ctx, y):
    return ctx.op("flatten", ctx.op("transpose", y, perm=[0, 2, 1, 3]), start_axis=2)


def _key_mask_bias(ctx: Ctx, mask, dt: DType, filter_value: float, kv_len):
    """An additive bias [B, 1, 1|S, T] from a 2-d [B, T] or 3-d [B, S, T] 0/1 mask, or 1-d
    [B] valid lengths (keys at or after the length are masked)."""
    npdt = dt.to_numpy()
    r = ctx.rank(mask)
    if r == 1:
        if not isinstance(kv_len, int):
            raise Unsupported("a 1-d mask_index over a run-time length")
        lens = ctx.op("reshape", ctx.cast(mask, DType.INT64), shape=[-1, 1, 1, 1])
        keep = ctx.op("lt", np.arange(kv_len, dtype=np.int64).reshape(1, 1, 1, kv_len), lens)
    elif r in (2, 3):
        keep = ctx.op("ne", mask, np.array(0, ctx.dtype(mask).to_numpy()))
        keep = ctx.op("unsqueeze", keep, axes=[1, 2] if r == 2 else [1])
    elif r == 4:
        keep = ctx.op("ne", mask, np.array(0, ctx.dtype(mask).to_numpy()))
    else:
        raise Unsupported(f"a mask of rank {r}")
    return ctx.op("where", keep, np.array(0, npdt), np.array(filter_value, npdt))


def _causal_bias(ctx: Ctx, q_len, kv_len, dt: DType, filter_value: float):
    if not (isinstance(q_len, int) and isinstance(kv_len, int)):
        raise Unsupported("unidirectional attention over run-time lengths")
    ctx.check_size(q_len * kv_len, "the causal mask")
    i = np.arange(q_len).reshape(q_len, 1) + (kv_len - q_len)
    allowed = np.arange(kv_len).reshape(1, kv_len) <= i
    return np.where(allowed, 0, filter_value).astype(dt.to_numpy())


def _attend(ctx: Ctx, q, k, v, biases: list, scale):
    bias = None
    for b in biases:
        bias = b if bias is None else ctx.op("add", bias, b)
    if bias is not None and ctx.dtype(bias) is not ctx.dtype(q):
        bias = ctx.cast(bias, ctx.dtype(q))
    return ctx.op("attention", q, k, v, bias, scale=scale or None)


@converter("Attention", since=1, domain=MS)
def ms_attention(
    ctx: Ctx,
    input,  # noqa: A002
    weights,
    bias=None,
    mask_index=None,
    past=None,
    attention_bias=None,
    past_sequence_length=None,
    *,
    num_heads,
    unidirectional=0,
    qkv_hidden_sizes=None,
    mask_filter_value=-10000.0,
    scale=0.0,
    do_rotary=0,
    past_present_share_buffer=0,
    rotary_embedding_dim=0,
):
    """Self-attention with packed Q/K/V weights [D_in, D + D + D_v]: input @ weights + bias,
    split, heads, masks as an additive bias (mask_filter_value where masked)."""
    if past is not None or past_sequence_length is not None or do_rotary:
        raise Unsupported("Attention with past state or rotary")
    if len(ctx.node.output) > 1 and any(ctx.node.output[1:]):
        raise Unsupported("Attention's present output")
    hidden = ctx.shape(weights)[1]
    if not isinstance(hidden, int):
        raise Unsupported("Attention weights of run-time size")
    sizes = list(qkv_hidden_sizes) if qkv_hidden_sizes else [hidden // 3] * 3
    qkv = ctx.op("matmul", input, weights)
    if bias is not None:
        qkv = ctx.op("add", qkv, bias)
    q, k, v = ctx.ops("split", qkv, axis=-1, sizes=sizes)
    q, k, v = (_split_heads(ctx, t, num_heads) for t in (q, k, v))
    dt = ctx.dtype(q)
    seq = ctx.shape(input)[1]
    biases = []
    if mask_index is not None:
        biases.append(_key_mask_bias(ctx, mask_index, dt, mask_filter_value, seq))
    if attention_bias is not None:
        biases.append(attention_bias)
    if unidirectional:
        biases.append(_causal_bias(ctx, seq, seq, dt, mask_filter_value))
    return _merge_heads(ctx, _attend(ctx, q, k, v, biases, scale))


@converter("MultiHeadAttention", since=1, domain=MS)
def ms_multi_head_attention(
    ctx: Ctx,
    query,
    key=None,
    value=None,
    bias=None,
    key_padding_mask=None,
    attention_bias=None,
    past_key=None,
    past_value=None,
    past_sequence_length=None,
    cache_indirection=None,
    *,
    num_heads,
    mask_filter_value=-10000.0,
    scale=0.0,
    unidirectional=0,
):
    """Attention of separate query [B, S, D], key and value ([B, L, D] or split into heads
    [B, N, L, H]); bias [D + D + D_v] adds to the 3-d projections."""
    if key is None or value is None or ctx.rank(query) != 3:
        raise Unsupported("MultiHeadAttention with packed QKV / KV inputs")
    if past_key is not None or past_value is not None or cache_indirection is not None:
        raise Unsupported("MultiHeadAttention with past state")
    if len(ctx.node.output) > 1 and any(ctx.node.output[1:]):
        raise Unsupported("MultiHeadAttention's present outputs")
    if bias is not None:
        d = ctx.shape(query)[2]
        dv = ctx.shape(value)[-1] * (num_heads if ctx.rank(value) == 4 else 1)
        bq, bk, bv = ctx.ops("split", bias, axis=0, sizes=[d, d, dv])
        query = ctx.op("add", query, bq)
        if ctx.rank(key) == 3:
            key = ctx.op("add", key, bk)
        if ctx.rank(value) == 3:
            value = ctx.op("add", value, bv)
    q, k, v = (_split_heads(ctx, t, num_heads) for t in (query, key, value))
    dt = ctx.dtype(q)
    q_len, kv_len = ctx.shape(q)[2], ctx.shape(k)[2]
    biases = []
    if key_padding_mask is not None:
        biases.append(_key_mask_bias(ctx, key_padding_mask, dt, mask_filter_value, kv_len))
    if attention_bias is not None:
        biases.append(attention_bias)
    if unidirectional:
        biases.append(_causal_bias(ctx, q_len, kv_len, dt, mask_filter_value))
    return _merge_heads(ctx, _attend(ctx, q, k, v, biases, scale))


def _dim(ctx: Ctx, x, axis: int):
    """Dim ``axis`` of x as an i64 scalar: an array when static, else a 0-d run-time value."""
    d = ctx.shape(x)[axis]
    if isinstance(d, int):
        return np.array(d, np.int64)
    a = axis % ctx.rank(x)
    return ctx.op("reshape", ctx.op("shape", x, start=a, end=a + 1), shape=[])


def _arange(ctx: Ctx, n):
    """0, 1, ..., n - 1 (i64, 1-d) for an i64 scalar n from _dim."""
    if isinstance(n, np.ndarray):
        return np.arange(int(n), dtype=np.int64)
    return ctx.op("range", np.array(0, np.int64), n, np.array(1, np.int64))


@converter("GroupQueryAttention", since=1, domain=MS)
def ms_group_query_attention(
    ctx: Ctx,
    query,
    key=None,
    value=None,
    past_key=None,
    past_value=None,
    seqlens_k=None,
    total_sequence_length=None,
    cos_cache=None,
    sin_cache=None,
    position_ids=None,
    attention_bias=None,
    head_sink=None,
    k_scale=None,
    v_scale=None,
    q_norm_weight=None,
    k_norm_weight=None,
    query_seqlens=None,
    *,
    num_heads,
    kv_num_heads,
    causal=1,
    do_rotary=0,
    rotary_interleaved=0,
    local_window_size=-1,
    scale=0.0,
    softcap=0.0,
    smooth_softmax=0,
    qk_output=0,
    sliding_window_cache=0,
    kv_cache_bit_width=0,
    k_quant_type="NONE",
    v_quant_type="NONE",
    qk_norm_epsilon=1e-6,
    q_norm_epsilon=None,
    k_norm_epsilon=None,
):
    """Grouped-query self-attention with a KV cache (onnxruntime's CPU kernel).

    Batch entry b holds T_b = seqlens_k[b] + 1 tokens after this step, so P_b = T_b - S came
    before it (0 on a first prompt, where S == total_sequence_length). The new keys and values
    (rotated when do_rotary) are written at [P_b, P_b + S) of the cache past the first P_b rows
    of past_key/past_value; query row s sits at position P_b + s and attends causally (and to
    the last local_window_size positions when set), or with causal=0 to every one of the
    entry's T_b keys. Present caches are
    max(total_sequence_length, past length) long, zero past P_b + S.
    """
    del qk_norm_epsilon, q_norm_epsilon, k_norm_epsilon  # read only with q/k_norm_weight
    quantized = (
        k_scale is not None
        or v_scale is not None
        or kv_cache_bit_width
        or k_quant_type != "NONE"
        or v_quant_type != "NONE"
    )
    refusals = [
        (quantized, "a quantized KV cache"),
        (q_norm_weight is not None or k_norm_weight is not None, "per-head Q/K RMS norm"),
        (query_seqlens is not None, "right-padded query chunks (query_seqlens)"),
        (sliding_window_cache, "a window-sized cache (sliding_window_cache=1)"),
        (not causal and local_window_size > 0, "local_window_size and causal=0"),
        (qk_output or (len(ctx.node.output) > 3 and ctx.node.output[3]), "the output_qk output"),
        ((past_key is None) != (past_value is None), "past_key without past_value"),
        (do_rotary and (cos_cache is None or sin_cache is None), "do_rotary without cos/sin"),
        (ctx.rank(query) != 3, "a query that is not 3-d [B, S, D]"),
    ]
    for bad, what in refusals:
        if bad:
            raise Unsupported(f"GroupQueryAttention with {what}")
    hidden = ctx.shape(query)[2]
    if not isinstance(hidden, int):
        raise Unsupported("GroupQueryAttention hidden size only known at run time")
    n, kvn = num_heads, kv_num_heads
    if key is None:  # packed [B, S, (n + 2 kvn) * H]
        hd = hidden // (n + 2 * kvn)
        query, key, value = ctx.ops("split", query, axis=-1, sizes=[n * hd, kvn * hd, kvn * hd])
    else:
        hd = hidden // n
    dt = ctx.dtype(query)
    npdt = dt.to_numpy()
    s_len = _dim(ctx, query, 1)
    has_past = past_key is not None
    s_iota = _arange(ctx, s_len)
    past_b = None  # per batch entry: the tokens cached before this step, [B, 1]
    if has_past or (do_rotary and position_ids is None):
        total = ctx.op("add", ctx.cast(seqlens_k, DType.INT64), np.array(1, np.int64))
        past_b = ctx.op("maximum", ctx.op("sub", total, s_len), np.array(0, np.int64))
        past_b = ctx.op("unsqueeze", past_b, axes=[1])

    if do_rotary:
        if position_ids is not None:
            pos = ctx.cast(position_ids, DType.INT64)
        else:  # query row s sits at P_b + s
            pos = ctx.op("add", past_b, ctx.op("unsqueeze", s_iota, axes=[0]))
        half = ctx.shape(cos_cache)[1]
        if not isinstance(half, int):
            raise Unsupported("GroupQueryAttention rotary caches of run-time width")

        def rotate(x, heads):
            return ctx.op(
                "rotary_embedding",
                x,
                cos_cache,
                sin_cache,
                pos,
                interleaved=bool(rotary_interleaved),
                rotary_dim=2 * half,
                num_heads=heads,
            )

        query, key = rotate(query, n), rotate(key, kvn)
    q, k, v = (
        _split_heads(ctx, query, n),
        _split_heads(ctx, key, kvn),
        _split_heads(ctx, value, kvn),
    )

    sink = None
    if head_sink is not None:
        sink = head_sink
    elif smooth_softmax == 1:
        sink = np.zeros(n, npdt)  # exp(0) = 1 more in the denominator
    spelled = bool(softcap) or sink is not None
    bias = None
    if has_past:
        # Keys are the cache after this step: masks over positions differ per batch entry.
        past_len = _dim(ctx, past_key, 2)
        if isinstance(past_len, np.ndarray) and isinstance(s_len, np.ndarray):
            kv_len = np.asarray(past_len + s_len)
        else:
            kv_len = ctx.op("add", past_len, s_len)
        j = _arange(ctx, kv_len)
        k, v, present_k, present_v = _gqa_cache(
            ctx, past_key, past_value, k, v, past_b, j, s_len, total_sequence_length, kvn, hd
        )
        if causal:
            j = ctx.op("reshape", j, shape=[1, 1, -1])
            qpos = ctx.op("reshape", s_iota, shape=[1, -1, 1])
            qpos = ctx.op("add", ctx.op("unsqueeze", past_b, axes=[2]), qpos)
            allowed = ctx.op("le", j, qpos)
            if local_window_size > 0:
                near = ctx.op("lt", ctx.op("sub", qpos, j), np.array(local_window_size, np.int64))
                allowed = ctx.op("logical_and", allowed, near)
            allowed = ctx.op("unsqueeze", allowed, axes=[1])
            bias = ctx.op("where", allowed, np.array(0, npdt), np.array(-np.inf, npdt))
        else:
            bias = _cached_keys(ctx, seqlens_k, j, npdt)
    elif not causal:  # a first prompt attending to its seqlens_k + 1 keys
        present_k, present_v = k, v
        bias = _cached_keys(ctx, seqlens_k, s_iota, npdt)
    else:
        # A first prompt: query row s at position s, a static causal (or windowed) mask.
        present_k, present_v = k, v
        if attention_bias is not None or local_window_size > 0 or spelled:
            s = ctx.shape(q)[2]
            if not isinstance(s, int):
                raise Unsupported("GroupQueryAttention windows or biases over run-time lengths")
            ctx.check_size(s * s, "the causal mask")
            allowed = _static_bias(s, s, 0, True, local_window_size - 1, -1)
            if allowed is not None:
                bias = np.where(allowed, 0, -np.inf).astype(npdt)
    if attention_bias is not None:
        extra = _fit_width(ctx, ctx.cast(attention_bias, dt), ctx.shape(k)[2])
        bias = extra if bias is None else ctx.op("add", bias, extra)

    if spelled:
        y, _ = _spelled_out(ctx, q, k, v, bias, n, kvn, scale or None, softcap, 0, None, sink)
    else:
        y = ctx.op(
            "attention",
            q,
            k,
            v,
            bias,
            is_causal=bias is None,
            scale=scale or None,
            enable_gqa=n != kvn,
        )
    return [_merge_heads(ctx, y), present_k, present_v]


def _cached_keys(ctx: Ctx, seqlens_k, j, npdt):
    """0 for the keys j < seqlens_k + 1 of each batch entry, else -inf: [B, 1, 1, L]."""
    total = ctx.op("add", ctx.cast(seqlens_k, DType.INT64), np.array(1, np.int64))
    keep = ctx.op(
        "lt",
        ctx.op("reshape", j, shape=[1, 1, 1, -1]),
        ctx.op("reshape", total, shape=[-1, 1, 1, 1]),
    )
    return ctx.op("where", keep, np.array(0, npdt), np.array(-np.inf, npdt))


def _fit_width(ctx: Ctx, bias, width):
    """An additive bias [.., total_sequence_length] cut or zero-padded to ``width`` keys."""
    have = ctx.shape(bias)[-1]
    if have == width:
        return bias
    if not (isinstance(have, int) and isinstance(width, int)):
        raise Unsupported("GroupQueryAttention attention_bias over run-time lengths")
    if have > width:
        return ctx.op("slice", bias, starts=[0], ends=[width], axes=[-1])
    r = ctx.rank(bias)
    pads = [0] * (2 * r)
    pads[2 * r - 1] = width - have
    return ctx.op("pad", bias, pads=pads, value=0.0)


def _gqa_cache(ctx: Ctx, past_key, past_value, k, v, past_b, j, s_len, total_len, kvn, hd):
    """The cache after this step, over j = 0 .. past length + S - 1: row j is past row j
    below P_b, new row j - P_b below P_b + S, else 0. Returns (keys, values) to attend to and
    the present outputs (their first max(total_sequence_length, past length) rows)."""
    past_len = _dim(ctx, past_key, 2)
    j = ctx.op("unsqueeze", j, axes=[0])
    from_past = ctx.op("lt", j, past_b)
    idx = ctx.op("where", from_past, j, ctx.op("add", ctx.op("sub", j, past_b), past_len))
    valid = ctx.op("lt", j, ctx.op("add", past_b, s_len))
    idx = ctx.op("where", valid, idx, np.array(0, np.int64))
    idx = ctx.op("expand", ctx.op("unsqueeze", idx, axes=[1, 3]), shape=[-1, kvn, -1, hd])
    keep = ctx.op("unsqueeze", valid, axes=[1, 3])
    out = []
    for past, new in ((past_key, k), (past_value, v)):
        both = ctx.op("concat", past, new, axis=2)
        picked = ctx.op("gather_elements", both, idx, axis=2)
        out.append(ctx.op("where", keep, picked, np.array(0, ctx.dtype(new).to_numpy())))
    tsl = ctx.known(total_len)
    if tsl is not None and isinstance(past_len, np.ndarray):
        n = max(int(np.asarray(tsl).reshape(-1)[0]), int(past_len))
        presents = [ctx.op("slice", t, starts=[0], ends=[n], axes=[2]) for t in out]
    else:
        end = ctx.op("maximum", ctx.cast(total_len, DType.INT64), past_len)
        end = ctx.op("reshape", end, shape=[1])
        presents = [ctx.op("slice", t, np.array([0], np.int64), end, axes=[2]) for t in out]
    return out[0], out[1], presents[0], presents[1]
