"""Relax emitters of the vision family: none yet."""

from __future__ import annotations

from codegen.relax.registry import unsupported

unsupported(
    "affine_grid",
    "not mapped yet (relax.op.image.affine_grid covers 2-d grids only; no emitter written)",
)
unsupported(
    "grid_sample",
    "not mapped yet (relax.op.image.grid_sample exists; its modes, padding modes and 3-d form "
    "are not mapped)",
)
unsupported(
    "roi_align",
    "not mapped yet (relax.op.vision.roi_align exists; its layout and coordinate conventions "
    "are not mapped)",
)
unsupported(
    "non_max_suppression",
    "not mapped yet (relax.op.vision.all_class_non_max_suppression returns padded rows and a "
    "count; the data-dependent slice is not written)",
)
unsupported(
    "deform_conv",
    "Relax has no deformable convolution and msc has no decomposition (bilinear gathers per "
    "kernel tap)",
)
unsupported(
    "col2im", "Relax has no col2im (a scatter-add of sliding blocks) and msc has no decomposition"
)
unsupported(
    "max_unpool",
    "Relax has no unpooling and msc has no decomposition (a scatter of each value into zeros "
    "at its flat index)",
)
