"""The benchmark's models: transformers models built from configs with seeded random weights.

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


MODELS: dict[str, Callable[[bool], tuple[torch.nn.Module, tuple, str]]] = {
    "resnet50": _resnet,
    "bert-base": _bert,
    "gpt2": _gpt2,
    "llama-100m": _llama,
    "vit-b16": _vit,
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
