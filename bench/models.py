"""The benchmark's models: transformers models built from configs with seeded random weights,
and MobileNetV3-Large written out from its paper (transformers has none, torchvision is not a
dependency).

Nothing is downloaded. Every process that builds a model by name gets bit-identical weights
(``torch.manual_seed(0)`` before construction), so a model converted in one process can be
checked against the eager model rebuilt in another.

# NOTE: invariants
# - KV caches are off (``use_cache=False``): a cache object in the outputs is not a tensor tree
#   either exporter can return, and inference without a cache is what both convert.
# - ``--quick`` sizes keep every architecture feature (attention, GQA, rotary, bottlenecks) at
#   a size that converts in seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

SEQ = 128


@dataclass
class Built:
    name: str
    model: torch.nn.Module
    args: tuple
    description: str


def _resnet(quick: bool) -> tuple[torch.nn.Module, tuple, str]:
    from transformers import ResNetConfig, ResNetModel

    cfg = (
        ResNetConfig(depths=[1, 1, 1, 1], hidden_sizes=[64, 128, 256, 512])
        if quick
        else ResNetConfig()
    )
    return (
        ResNetModel(cfg),
        (torch.randn(1, 3, 224, 224),),
        "ResNetModel(ResNetConfig()) 1x3x224x224",
    )


def _bert(quick: bool) -> tuple[torch.nn.Module, tuple, str]:
    from transformers import BertConfig, BertModel

    kw = dict(num_hidden_layers=2, hidden_size=128, num_attention_heads=4, intermediate_size=512)
    cfg = BertConfig(**kw) if quick else BertConfig()
    ids = torch.randint(0, cfg.vocab_size, (1, SEQ))
    return BertModel(cfg), (ids,), f"BertModel(BertConfig()) base, 1x{SEQ} tokens"


def _gpt2(quick: bool) -> tuple[torch.nn.Module, tuple, str]:
    from transformers import GPT2Config, GPT2Model

    kw = dict(n_layer=2, n_embd=128, n_head=4) if quick else {}
    cfg = GPT2Config(use_cache=False, **kw)
    ids = torch.randint(0, cfg.vocab_size, (1, SEQ))
    return GPT2Model(cfg), (ids,), f"GPT2Model(GPT2Config()) small, 1x{SEQ} tokens"


def _llama(quick: bool) -> tuple[torch.nn.Module, tuple, str]:
    from transformers import LlamaConfig, LlamaModel

    size = (
        dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2)
        if quick
        else dict(hidden_size=768, intermediate_size=2048, num_hidden_layers=12)
    )
    cfg = LlamaConfig(
        num_attention_heads=12 if not quick else 4,
        num_key_value_heads=4 if not quick else 2,
        vocab_size=32000,
        use_cache=False,
        **size,
    )
    ids = torch.randint(0, cfg.vocab_size, (1, SEQ))
    return LlamaModel(cfg), (ids,), f"LlamaModel ~100M (768 wide, 12 layers, GQA 12/4), 1x{SEQ}"


def _vit(quick: bool) -> tuple[torch.nn.Module, tuple, str]:
    from transformers import ViTConfig, ViTModel

    kw = dict(num_hidden_layers=2, hidden_size=128, num_attention_heads=4, intermediate_size=512)
    cfg = ViTConfig(**kw) if quick else ViTConfig()
    return (
        ViTModel(cfg, add_pooling_layer=False),
        (torch.randn(1, 3, cfg.image_size, cfg.image_size),),
        "ViTModel(ViTConfig()) B/16, 1x3x224x224",
    )


# MobileNetV3-Large's bottlenecks (Howard et al. 2019, "Searching for MobileNetV3", table 1):
# kernel, expanded width, output width, squeeze-and-excitation, hardswish (else ReLU), stride.
MOBILENET_V3_LARGE = [
    (3, 16, 16, False, False, 1),
    (3, 64, 24, False, False, 2),
    (3, 72, 24, False, False, 1),
    (5, 72, 40, True, False, 2),
    (5, 120, 40, True, False, 1),
    (5, 120, 40, True, False, 1),
    (3, 240, 80, False, True, 2),
    (3, 200, 80, False, True, 1),
    (3, 184, 80, False, True, 1),
    (3, 184, 80, False, True, 1),
    (3, 480, 112, True, True, 1),
    (3, 672, 112, True, True, 1),
    (5, 672, 160, True, True, 2),
    (5, 960, 160, True, True, 1),
    (5, 960, 160, True, True, 1),
]


def _divisible(v: float, d: int = 8) -> int:
    """The paper's channel rounding: to a multiple of ``d``, never below 90% of ``v``."""
    n = max(d, int(v + d / 2) // d * d)
    return n + d if n < 0.9 * v else n


def _conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act=None):
    layers = [
        torch.nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
        torch.nn.BatchNorm2d(cout, eps=0.001, momentum=0.01),
    ]
    return torch.nn.Sequential(*layers, *([act()] if act else []))


class SqueezeExcitation(torch.nn.Module):
    """Global average pool, 1x1 conv down to a quarter, ReLU, 1x1 conv up, hard sigmoid, scale."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        squeezed = _divisible(channels // 4)
        self.fc1 = torch.nn.Conv2d(channels, squeezed, 1)
        self.fc2 = torch.nn.Conv2d(squeezed, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = torch.nn.functional.adaptive_avg_pool2d(x, 1)
        s = self.fc2(torch.relu(self.fc1(s)))
        return x * torch.nn.functional.hardsigmoid(s)


class InvertedResidual(torch.nn.Module):
    """1x1 expansion (when wider), depthwise kxk, optional SE, 1x1 linear projection; the input
    added back when the shape is kept."""

    def __init__(self, cin: int, k: int, exp: int, cout: int, se: bool, hs: bool, stride: int):
        super().__init__()
        act = torch.nn.Hardswish if hs else torch.nn.ReLU
        layers = [] if exp == cin else [_conv_bn(cin, exp, 1, act=act)]
        layers.append(_conv_bn(exp, exp, k, stride, groups=exp, act=act))
        if se:
            layers.append(SqueezeExcitation(exp))
        layers.append(_conv_bn(exp, cout, 1))
        self.block = torch.nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return x + y if self.residual else y


class MobileNetV3(torch.nn.Module):
    """MobileNetV3-Large: stem, the bottlenecks of ``rows``, 1x1 conv to 6x the last width,
    pooled, a hardswish classifier head (dropout omitted: inference)."""

    def __init__(self, rows=MOBILENET_V3_LARGE, last: int = 1280, classes: int = 1000) -> None:
        super().__init__()
        layers = [_conv_bn(3, 16, 3, 2, act=torch.nn.Hardswish)]
        cin = 16
        for k, exp, cout, se, hs, stride in rows:
            layers.append(InvertedResidual(cin, k, exp, cout, se, hs, stride))
            cin = cout
        layers.append(_conv_bn(cin, 6 * cin, 1, act=torch.nn.Hardswish))
        self.features = torch.nn.Sequential(*layers)
        self.classifier = torch.nn.Sequential(
            torch.nn.Linear(6 * cin, last), torch.nn.Hardswish(), torch.nn.Linear(last, classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


def _mobilenet(quick: bool) -> tuple[torch.nn.Module, tuple, str]:
    rows = MOBILENET_V3_LARGE[:1] + MOBILENET_V3_LARGE[3:4] + MOBILENET_V3_LARGE[10:11]
    model = MobileNetV3(rows, last=128, classes=10) if quick else MobileNetV3()
    return (
        model,
        (torch.randn(1, 3, 224, 224),),
        "MobileNetV3-Large (paper's table 1; SE, hardswish), 1x3x224x224",
    )


MODELS: dict[str, Callable[[bool], tuple[torch.nn.Module, tuple, str]]] = {
    "resnet50": _resnet,
    "bert-base": _bert,
    "gpt2": _gpt2,
    "llama-100m": _llama,
    "vit-b16": _vit,
    "mobilenetv3": _mobilenet,
}


def build(name: str, quick: bool = False) -> Built:
    """The model ``name`` in eval mode with its example inputs, seeded."""
    import transformers

    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    model, args, desc = MODELS[name](quick)
    return Built(name, model.eval(), args, desc)


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of the model's parameters and buffers, each storage counted once."""
    seen: set[int] = set()
    total = 0
    for t in [*model.parameters(), *model.buffers()]:
        key = t.untyped_storage().data_ptr()
        if key in seen:
            continue
        seen.add(key)
        total += t.untyped_storage().nbytes()
    return total


def tiny() -> tuple[torch.nn.Module, tuple]:
    """A small model to warm up a converter's imports and caches before timing."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16))
    return m.eval(), (torch.randn(2, 8),)


def leaves(out: Any) -> list[torch.Tensor]:
    """The tensors of a model output (ModelOutput, dict, tuple, tensor) in order."""
    from torch.utils._pytree import tree_leaves

    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    return [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
