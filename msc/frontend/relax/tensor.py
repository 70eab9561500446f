"""Relax converters of the tensor family."""

from __future__ import annotations

from msc.frontend.relax.importer import Ctx, converter


@converter("relax.reverse_sequence")
def reverse_sequence(ctx: Ctx, x, lens, *, attrs):
    return ctx.op("reverse_sequence", x, lens, time_axis=int(attrs.seq_axis),
                  batch_axis=int(attrs.batch_axis))  # fmt: skip
