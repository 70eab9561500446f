"""TFLite quantization: QUANTIZE and DEQUANTIZE onto the canonical quantize / dequantize
(the importer dequantizes quantized inputs and quantizes quantized outputs, so these ops are
the identity on float views), float16 weights behind DEQUANTIZE as a cast, and sparse
constants behind DENSIFY decoded at import.

# NOTE: a sparse constant (TACO format: a traversal order over the dims and block dims, each
# level dense or CSR) is decoded into a dense array once, level by level with numpy; the size
# it would take is bounded (IMPORT_ARRAY_LIMIT) before anything is allocated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from msc.errors import BadModelError, Unsupported
from msc.frontend.tflite.importer import IMPORT_ARRAY_LIMIT, Ctx, tensor_type
from msc.frontend.tflite.registry import converter, not_read

if TYPE_CHECKING:
    from msc.frontend.tflite.importer import Importer
    from msc.frontend.tflite.reader import TfTensor


@converter("QUANTIZE")
def quantize(ctx: Ctx, x):
    # the output tensor's scale and zero point are applied by the importer
    return ctx.value(x)


@converter("DEQUANTIZE")
def dequantize(ctx: Ctx, x):
    v = ctx.value(x)
    want = ctx.out_type().dtype
    return v if v.dtype is want else ctx.op("cast", v, to=want)


@converter("DENSIFY")
def densify_op(ctx: Ctx, x):
    if x.sparsity is None:
        raise Unsupported(f"DENSIFY of {x.name!r}, which is not a sparse constant")
    return ctx.raw(x)


def densify(imp: Importer, t: TfTensor) -> np.ndarray:
    """The dense values of sparse constant ``t``."""
    sp = t.sparsity
    assert sp is not None
    dt = tensor_type(t).dtype
    shape = [int(d) for d in t.shape]
    n = int(np.prod(shape, dtype=np.int64))
    if n > IMPORT_ARRAY_LIMIT:
        raise Unsupported(f"sparse constant {t.name!r} of {n} elements is too large to densify")
    rank = len(shape)
    order, block_map = list(sp.traversal_order), list(sp.block_map)
    levels = len(order)
    bad = BadModelError(f"sparse constant {t.name!r} has inconsistent sparsity metadata")
    if len(sp.dims) != levels or levels != rank + len(block_map):
        raise bad
    if sorted(order[:rank]) != list(range(rank)):
        raise bad
    # block sizes: expanded dim rank + k is a block of original dim block_map[k]
    block = {}
    for k, d in enumerate(block_map):
        lvl = order.index(rank + k) if rank + k in order else -1
        if lvl < 0 or not 0 <= d < rank or sp.dims[lvl][0] != 0:
            raise bad
        block[d] = sp.dims[lvl][1]
    values = np.frombuffer(imp.model.buffer_bytes(t.buffer), dt.to_numpy().newbyteorder("<"))
    pos = np.zeros(1, np.int64)
    coords = np.zeros((1, levels), np.int64)
    for lvl, (fmt, size, seg, idx) in enumerate(sp.dims):
        if fmt == 0:
            if size < 0 or pos.size * max(size, 1) > IMPORT_ARRAY_LIMIT:
                raise bad
            child = np.arange(size, dtype=np.int64)
            new_pos = (pos[:, None] * size + child[None, :]).reshape(-1)
            coords = np.repeat(coords, size, axis=0)
            coords[:, lvl] = np.tile(child, pos.size)
        else:
            if seg is None or idx is None or pos.size and int(pos.max()) + 1 >= seg.size:
                raise bad
            starts, ends = seg[pos], seg[pos + 1]
            counts = ends - starts
            if np.any(counts < 0) or int(ends.max(initial=0)) > idx.size:
                raise bad
            total = int(counts.sum())
            if total > IMPORT_ARRAY_LIMIT:
                raise bad
            new_pos = np.repeat(starts, counts) + (
                np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
            )
            coords = np.repeat(coords, counts, axis=0)
            coords[:, lvl] = idx[new_pos]
        pos = new_pos
    if pos.size and int(pos.max()) >= values.size:
        raise bad
    dense = np.zeros(shape, dt.to_numpy())
    full = np.zeros((pos.size, rank), np.int64)
    for lvl, d in enumerate(order):
        if d < rank:
            full[:, d] += coords[:, lvl] * block.get(d, 1)
        else:
            full[:, block_map[d - rank]] += coords[:, lvl]
    if np.any(full < 0) or np.any(full >= np.asarray(shape)):
        raise bad
    dense[tuple(full.T)] = values[pos]
    return dense


not_read("fake quantization (TensorFlow's nudged min / max ranges) is not read yet", "FAKE_QUANT")
