"""Keras image preprocessing layers: Resizing, CenterCrop, the random augmentation layers
(the identity at inference), and Pipeline (its layers in turn).

Keras' preprocessing layers are channels_last by default (``data_format`` as the layer
says); the canonical resize works on the dims after the first two, so a channels_last image
gets a transpose into channels first and back.
"""

from __future__ import annotations

from msc.errors import Unsupported
from msc.frontend.keras.importer import Ctx
from msc.frontend.keras.registry import converter


def _hw_axes(layer, x) -> tuple[int, int]:
    if x.type.rank not in (3, 4):
        raise Unsupported(f"an image of rank {x.type.rank}")
    if getattr(layer, "data_format", "channels_last") == "channels_first":
        return x.type.rank - 2, x.type.rank - 1
    return x.type.rank - 3, x.type.rank - 2


@converter("Resizing")
def resizing(ctx: Ctx, layer, x):
    """Keras' ``ops.image.resize`` on the torch backend (torch.nn.functional.interpolate,
    no antialias): nearest is torch's "nearest-exact", bilinear reads half pixels."""
    for flag in ("crop_to_aspect_ratio", "pad_to_aspect_ratio"):
        if getattr(layer, flag, False):
            raise Unsupported(f"{flag}=True")
    if x.type.rank != 4:
        raise Unsupported("an unbatched image")
    kw = {
        "nearest": {  # torch's "nearest-exact": floor((out + 0.5) * in / size)
            "mode": "nearest",
            "coordinate_transformation_mode": "half_pixel",
            "nearest_mode": "round_prefer_ceil",
        },
        "bilinear": {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
    }.get(layer.interpolation)
    if kw is None:
        raise Unsupported(f"interpolation={layer.interpolation!r}")
    if getattr(layer, "antialias", False):
        raise Unsupported("antialias=True")
    cf = getattr(layer, "data_format", "channels_last") == "channels_first"
    y = x if cf else ctx.op("transpose", x, perm=[0, 3, 1, 2])
    y = ctx.op("resize", y, sizes=[int(layer.height), int(layer.width)], **kw)
    return y if cf else ctx.op("transpose", y, perm=[0, 2, 3, 1])


@converter("CenterCrop")
def center_crop(ctx: Ctx, layer, x):
    """The centre ``height`` x ``width`` window (offsets (size - target) // 2, as Keras)."""
    ha, wa = _hw_axes(layer, x)
    h, w = x.type.shape[ha], x.type.shape[wa]
    th, tw = int(layer.height), int(layer.width)
    if not (isinstance(h, int) and isinstance(w, int)):
        raise Unsupported("a crop of a symbolic image size")
    if h < th or w < tw:
        raise Unsupported(
            f"a {h}x{w} image smaller than the {th}x{tw} crop (Keras resizes it then)"
        )
    top, left = (h - th) // 2, (w - tw) // 2
    return ctx.op("slice", x, starts=[top, left], ends=[top + th, left + tw], axes=[ha, wa])


# The random augmentation layers act only in training: at inference Keras returns the images
# unchanged (each is a table row run with training=False).
AUGMENTATION = (
    "AugMix",
    "CutMix",
    "MixUp",
    "RandAugment",
    "RandomBrightness",
    "RandomColorDegeneration",
    "RandomColorJitter",
    "RandomContrast",
    "RandomElasticTransform",
    "RandomErasing",
    "RandomFlip",
    "RandomGaussianBlur",
    "RandomGrayscale",
    "RandomHue",
    "RandomInvert",
    "RandomPerspective",
    "RandomPosterization",
    "RandomRotation",
    "RandomSaturation",
    "RandomSharpness",
    "RandomShear",
    "RandomTranslation",
    "RandomZoom",
    "Solarization",
    "MaxNumBoundingBoxes",
)


@converter(*AUGMENTATION)
def augmentation(ctx: Ctx, layer, x):
    """The identity at inference."""
    return x


@converter("RandomCrop")
def random_crop(ctx: Ctx, layer, x):
    """The identity at inference when the crop is the image's size. A smaller crop is
    refused: Keras declares the cropped shape but returns the image uncropped at inference."""
    ha, wa = _hw_axes(layer, x)
    if (x.type.shape[ha], x.type.shape[wa]) != (int(layer.height), int(layer.width)):
        raise Unsupported(
            "a crop smaller than the image: at inference Keras returns the image uncropped, "
            "not the shape it declares"
        )
    return x


@converter("Pipeline")
def pipeline(ctx: Ctx, layer, x):
    """Its layers in turn, each through its own converter."""
    for inner in layer.layers:
        x = ctx.sublayer(inner, x)
    return x


def _to_range(ctx: Ctx, x, src, dst):
    """Keras' ``_transform_value_range``: (x - src_lo) / (src_hi - src_lo) * span + dst_lo."""
    if tuple(src) == tuple(dst):
        return x
    y = ctx.op("div", ctx.op("sub", x, ctx.f32(src[0], x)), ctx.f32(src[1] - src[0], x))
    return ctx.op("add", ctx.op("mul", y, ctx.f32(dst[1] - dst[0], x)), ctx.f32(dst[0], x))


@converter("AutoContrast")
def auto_contrast(ctx: Ctx, layer, x):
    """Each image's channels stretched to the full range (also at inference): in 0..255,
    (x - min) * 255 / (max - min) over the spatial axes, clipped; a flat channel (NaN) keeps
    its input, as Keras."""
    if x.type.rank != 4 or getattr(layer, "data_format", "channels_last") != "channels_last":
        raise Unsupported("an image batch other than channels_last [batch, h, w, c]")
    rng = [float(v) for v in layer.value_range]
    y = _to_range(ctx, x, rng, (0.0, 255.0))
    low = ctx.op("reduce_min", y, axes=[1, 2], keepdims=True)
    high = ctx.op("reduce_max", y, axes=[1, 2], keepdims=True)
    scale = ctx.op("div", ctx.f32(255.0, y), ctx.op("sub", high, low))
    offset = ctx.op("mul", ctx.op("neg", low), scale)
    y = ctx.op("add", ctx.op("mul", y, scale), offset)
    y = ctx.op("clamp", y, ctx.f32(0.0, y), ctx.f32(255.0, y))
    y = _to_range(ctx, y, (0.0, 255.0), rng)
    return ctx.op("where", ctx.op("isnan", y), x, y)
