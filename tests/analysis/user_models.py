"""Models saved to files the way their users save them, for the file/CLI matrix
(tests/analysis/test_user_files.py).

Three models: a CNN of a user's own (BatchNorm, a residual, bilinear and nearest upsampling,
a pooled linear head) and two transformers families from tiny ``transformers`` configs with
random weights (BertForMaskedLM, LlamaForCausalLM). Each is written three ways:

- ``NAME.pt2``: ``torch.export.save`` of a program exported with dynamic batch (and sequence)
  ``Dim``s, ``attention_mask`` passed as a keyword argument, returning the model's own output
  class (transformers' ``MaskedLMOutput`` / ``CausalLMOutputWithPast``);
- ``NAME_dynamo.onnx``: ``torch.onnx.export(..., dynamo=True)`` with the same dynamic shapes;
- ``NAME_legacy.onnx``: the TorchScript exporter (``dynamo=False``) with ``dynamic_axes``.

# NOTE: every model is built from a fixed seed, so the three files of one model hold the same
# weights and every pair of them is the same model.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

MODELS = ("cnn", "bert", "llama")
FORMATS = ("pt2", "dynamo", "legacy")
VOCAB = 64


class UpBlock(nn.Module):
    def __init__(self, c: int, mode: str) -> None:
        super().__init__()
        self.mode = mode
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        x = F.interpolate(x, scale_factor=2.0, mode=self.mode)
        return torch.relu(self.bn(self.conv(x)))


class UserCNN(nn.Module):
    """A segmentation-style CNN as a user writes one: stem, a residual block, downsampling,
    bilinear and nearest upsampling, and a pooled classifier head."""

    def __init__(self, classes: int = 5) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8))
        self.block = nn.Sequential(
            nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU()
        )
        self.down = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.up1 = UpBlock(16, "bilinear")
        self.up2 = UpBlock(16, "nearest")
        self.head = nn.Linear(16, classes)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        x = x + self.block(x)
        x = self.up2(self.up1(self.down(x)))
        return self.head(x.mean(dim=(2, 3)))


def _trained_like(m: nn.Module) -> nn.Module:
    """Running statistics that are not the identity, as a trained model has."""
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
    return m


def build(name: str) -> nn.Module:
    """The model ``name`` (one of MODELS), in eval mode, from a fixed seed."""
    import transformers

    torch.manual_seed(0)
    if name == "cnn":
        return _trained_like(UserCNN()).eval()
    if name == "bert":
        cfg = transformers.BertConfig(
            vocab_size=VOCAB,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=64,
        )
        return transformers.BertForMaskedLM(cfg).eval()
    if name == "llama":
        cfg = transformers.LlamaConfig(
            vocab_size=VOCAB,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=64,
            max_position_embeddings=64,
            use_cache=False,
        )
        return transformers.LlamaForCausalLM(cfg).eval()
    raise ValueError(name)


def example(name: str) -> tuple[tuple, dict, dict]:
    """(args, kwargs, dynamic_shapes by argument name) as a user passes them to export."""
    from torch.export import Dim

    batch = Dim("batch", min=1, max=32)
    if name == "cnn":
        return (torch.randn(2, 3, 16, 16),), {}, {"x": {0: batch}}
    seq = Dim("seq", min=2, max=60)
    ids = torch.randint(0, VOCAB, (2, 8), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(2, 8, dtype=torch.int64)
    dims = {0: batch, 1: seq}
    return (ids,), {"attention_mask": mask}, {"input_ids": dims, "attention_mask": dims}


@contextlib.contextmanager
def _quiet():
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        warnings.simplefilter("ignore")
        level = logging.getLogger("torch").level
        logging.getLogger("torch").setLevel(logging.ERROR)
        try:
            yield
        finally:
            logging.getLogger("torch").setLevel(level)


def save(name: str, how: str, directory: Path) -> Path:
    """Write model ``name`` as ``how`` (one of FORMATS) into ``directory``; its path."""
    m = build(name)
    args, kwargs, dyn = example(name)
    path = directory / (f"{name}.pt2" if how == "pt2" else f"{name}_{how}.onnx")
    with _quiet(), torch.no_grad():
        if how == "pt2":
            ep = torch.export.export(m, args, kwargs, dynamic_shapes=dyn)
            torch.export.save(ep, path)
        elif how == "dynamo":
            torch.onnx.export(
                m, args, path, kwargs=kwargs, dynamo=True, dynamic_shapes=dyn, external_data=False
            )
        else:
            names = list(dyn)
            axes = {n: {0: "batch"} if name == "cnn" else {0: "batch", 1: "seq"} for n in names}
            # Positionally, as the TorchScript exporter is called: a trailing kwargs dict
            # would also turn every defaulted argument before it into a traced input
            # (Llama's int ``logits_to_keep`` becomes a tensor and selects one position).
            torch.onnx.export(
                m,
                (*args, *kwargs.values()),
                path,
                dynamo=False,
                input_names=names,
                output_names=["logits"],
                dynamic_axes=axes,
            )
    return path
