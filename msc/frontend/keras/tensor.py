"""Keras layers that encode integers and look up tables: CategoryEncoding, Discretization,
ReversibleEmbedding."""

from __future__ import annotations

import numpy as np

from msc.errors import Unsupported
from msc.frontend.keras.importer import DTYPES, Ctx
from msc.frontend.keras.registry import converter
from msc.ir import DType, Value


def _dtype(name) -> DType:
    dt = DTYPES.get(str(name))
    if dt is None:
        raise Unsupported(f"output dtype {name}")
    return dt


def encode(ctx: Ctx, ids: Value, mode: str, depth: int, dtype: DType) -> Value:
    """Keras' ``encode_categorical_inputs``: int (a cast), one_hot (a trailing 1 dropped),
    multi_hot (max of the one-hots over axis 1) or count (their sum)."""
    if mode == "int":
        return ctx.op("cast", ids, to=dtype) if ids.dtype is not dtype else ids
    if ids.dtype is not DType.INT64:  # the index type every target's one_hot takes
        ids = ctx.op("cast", ids, to=DType.INT64)
    if mode == "one_hot":
        if ids.type.rank > 1 and ids.type.shape[-1] == 1:
            ids = ctx.op("squeeze", ids, axes=[-1])
        return ctx.op("one_hot", ids, depth=depth, axis=-1, dtype=dtype)
    if mode not in ("multi_hot", "count"):
        raise Unsupported(f"output_mode={mode!r}")
    hot = ctx.op("one_hot", ids, depth=depth, axis=-1, dtype=dtype)
    axis = 1 if ids.type.rank > 1 else 0
    op = "reduce_max" if mode == "multi_hot" else "reduce_sum"
    return ctx.op(op, hot, axes=[axis], keepdims=False)


@converter("CategoryEncoding")
def category_encoding(ctx: Ctx, layer, ids):
    if getattr(layer, "sparse", False):
        raise Unsupported("sparse=True")
    return encode(ctx, ids, layer.output_mode, int(layer.num_tokens), _dtype(layer.dtype))


@converter("Discretization")
def discretization(ctx: Ctx, layer, x):
    """The bucket of each value: how many boundaries are <= it (``torch.bucketize(x,
    boundaries, right=True)``, as Keras' digitize), then encoded as ``output_mode`` says."""
    if getattr(layer, "sparse", False):
        raise Unsupported("sparse=True")
    bounds = np.asarray(layer.bin_boundaries, x.dtype.to_numpy())
    ge = ctx.op("ge", ctx.op("unsqueeze", x, axes=[-1]), ctx.f32(bounds, x))
    idx = ctx.op("reduce_sum", ctx.op("cast", ge, to=DType.INT32), axes=[-1], keepdims=False)
    return encode(ctx, idx, layer.output_mode, len(bounds) + 1, _dtype(layer.output_dtype))


@converter("ReversibleEmbedding")
def reversible_embedding(ctx: Ctx, layer, x):
    """``reverse=False``: an embedding lookup; ``reverse=True``: logits against the
    embeddings (tied) or the reverse embeddings, soft-capped when the layer says so."""
    if not ctx.call_kwargs.get("reverse", False):
        if x.dtype.is_floating:
            x = ctx.op("cast", x, to=DType.INT32)
        return ctx.op("embedding", ctx.weight(layer.embeddings), x)
    if getattr(layer, "reverse_dtype", None) not in (None, str(x.dtype.to_numpy())):
        raise Unsupported(f"reverse_dtype={layer.reverse_dtype!r}")
    if layer.tie_weights:
        kernel = ctx.op("transpose", ctx.weight(layer.embeddings), perm=[1, 0])
    else:
        kernel = ctx.weight(layer.reverse_embeddings)
    y = ctx.op("matmul", x, kernel)
    cap = getattr(layer, "logit_soft_cap", None)
    if cap is not None:
        y = ctx.op("mul", ctx.op("tanh", ctx.op("div", y, ctx.f32(cap, y))), ctx.f32(cap, y))
    return y
