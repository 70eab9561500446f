"""ONNX tensor ops with data-dependent or bit-level results: BitCast, Unique, Det,
ReverseSequence, TensorScatter and TfIdfVectorizer (the quantized ops are in quant.py).
"""

from __future__ import annotations

import numpy as np

from msc.frontend.onnx.importer import Ctx, Unsupported
from msc.frontend.onnx.initializers import dtype_from_onnx
from msc.frontend.onnx.registry import converter
from msc.ir import DType


@converter("BitCast", since=26)
def bitcast(ctx: Ctx, input, *, to):  # noqa: A002
    return ctx.op("bitcast", input, to=dtype_from_onnx(to))


@converter("Unique", since=11)
def unique(ctx: Ctx, X, *, axis=None, sorted=1):  # noqa: N803, A002
    return ctx.ops("unique", X, axis=axis, sorted=bool(sorted))


@converter("Det", since=11)
def det(ctx: Ctx, X):  # noqa: N803
    return ctx.op("det", X)


@converter("ReverseSequence", since=10)
def reverse_sequence(ctx: Ctx, input, sequence_lens, *, batch_axis=1, time_axis=0):  # noqa: A002
    lens = ctx.cast(sequence_lens, DType.INT64)
    return ctx.op("reverse_sequence", input, lens, batch_axis=batch_axis, time_axis=time_axis)


@converter("TensorScatter", since=24)
def tensor_scatter(ctx: Ctx, past_cache, update, write_indices=None, *, axis=-2, mode="linear"):
    idx = None if write_indices is None else ctx.cast(write_indices, DType.INT64)
    return ctx.op("tensor_scatter", past_cache, update, idx, axis=axis, mode=mode)


@converter("TfIdfVectorizer", since=9)
def tfidf_vectorizer(
    ctx: Ctx,
    X,  # noqa: N803
    *,
    max_gram_length,
    max_skip_count,
    min_gram_length,
    mode,
    ngram_counts,
    ngram_indexes,
    pool_int64s=None,
    pool_strings=None,
    weights=None,
):
    """Counts of the pool's n-grams in each row of X ([C] or [B, C] integers), as ONNX's
    reference counts them: for each skip d (1 .. max_skip_count + 1) the items i, i + d, ...,
    i + (n - 1) d of a row form an n-gram (unigrams counted once, at d = 1), and a count goes to
    output ngram_indexes[k] for the pool's k-th n-gram. Each (n, d) is a gather of every
    window, an equality with the pool's n-grams and a sum over the row; TF keeps the counts,
    IDF weights (or 1) where a count is non-zero, TFIDF counts times weights."""
    if pool_strings is not None or pool_int64s is None:
        raise Unsupported("TfIdfVectorizer over strings (msc has no string tensors)")
    if mode not in ("TF", "IDF", "TFIDF"):
        raise Unsupported(f"TfIdfVectorizer mode={mode!r}")
    shape = ctx.shape(X)
    if len(shape) > 2 or not isinstance(shape[-1] if shape else 1, int):
        raise Unsupported("TfIdfVectorizer over rows of a run-time length (or rank > 2)")
    width = shape[-1] if shape else 1
    rows = ctx.op("reshape", ctx.cast(X, DType.INT64), shape=[-1, width])
    pool = list(pool_int64s)
    out_size = max(ngram_indexes) + 1
    bounds = [*ngram_counts, len(pool)]
    counts, targets = [], []
    for n, (start, end) in enumerate(zip(bounds, bounds[1:]), start=1):
        if end <= start or not min_gram_length <= n <= max_gram_length:
            continue
        grams = np.asarray(pool[start:end], np.int64).reshape(-1, n)
        total = None
        for d in range(1, max_skip_count + 2) if n > 1 else (1,):
            windows = width - (n - 1) * d
            if windows <= 0:
                continue
            ctx.check_size(windows * grams.size, "the TfIdfVectorizer comparison")
            idx = np.arange(windows)[:, None] + d * np.arange(n)[None, :]
            picked = ctx.op("unsqueeze", ctx.op("gather", rows, idx, axis=1), axes=[2])
            hit = ctx.op("reduce_all", ctx.op("eq", picked, grams), axes=[-1], keepdims=False)
            c = ctx.op("reduce_sum", ctx.cast(hit, DType.FLOAT32), axes=[1], keepdims=False)
            total = c if total is None else ctx.op("add", total, c)
        if total is not None:
            counts.append(total)
            targets.extend(ngram_indexes[g] for g in _gram_ids(ngram_counts, len(pool), n))
    if counts:
        found = counts[0] if len(counts) == 1 else ctx.op("concat", *counts, axis=1)
        place = np.zeros((len(targets), out_size), np.float32)
        place[np.arange(len(targets)), targets] = 1
        y = ctx.op("matmul", found, place)
    else:  # no n-gram of the pool can occur: zeros [rows, out_size]
        blank = ctx.op("full_like", rows, value=0.0, dtype=DType.FLOAT32)
        y = ctx.op("matmul", blank, np.zeros((width, out_size), np.float32))
    w = None if weights is None else np.asarray(weights, np.float32)
    if mode == "IDF":
        present = ctx.cast(ctx.op("gt", y, np.array(0, np.float32)), DType.FLOAT32)
        y = present if w is None else ctx.op("mul", present, w)
    elif mode == "TFIDF" and w is not None:
        y = ctx.op("mul", y, w)
    return y if len(shape) == 2 else ctx.op("reshape", y, shape=[out_size])


def _gram_ids(ngram_counts, pool_len: int, n: int) -> range:
    """Indexes (into ngram_indexes) of the pool's n-grams: ids run over the pool's grams in
    order, n-grams of size 1 first."""
    bounds = [*ngram_counts, pool_len]
    first = sum((bounds[s + 1] - bounds[s]) // (s + 1) for s in range(n - 1))
    return range(first, first + (bounds[n] - bounds[n - 1]) // n)
