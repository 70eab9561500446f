"""Small models exported the ways users export them: a ResNet-like CNN with BatchNorm and a
small BERT (transformers, random weights), each as a .pt2 (torch.export.save) and as
torch.onnx's file (dynamo=True and the legacy TorchScript exporter).

# NOTE: models are built from fixed seeds so every export of one model has the same weights;
# ``change`` perturbs one named parameter to make a known difference.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from pathlib import Path

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(y)) + idt)


class TinyResNet(nn.Module):
    """torchvision's ResNet layout (conv1/bn1/layerN.M.convK/fc), small."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.layer1 = nn.Sequential(Block(8, 8, 1), Block(8, 8, 1))
        self.layer2 = nn.Sequential(Block(8, 16, 2))
        self.layer3 = nn.Sequential(Block(16, 16, 1))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet() -> tuple[nn.Module, tuple]:
    torch.manual_seed(0)
    m = TinyResNet()
    with torch.no_grad():  # running stats that are not the identity, as a trained model has
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
    return m.eval(), (torch.randn(1, 3, 16, 16),)


def bert() -> tuple[nn.Module, tuple]:
    import transformers

    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        vocab_size=64,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
    )

    class Bert(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = transformers.BertModel(cfg, add_pooling_layer=False)

        def forward(self, input_ids):
            return self.bert(input_ids=input_ids).last_hidden_state

    m = Bert().eval()
    return m, (torch.randint(0, 64, (1, 7)),)


def change(module: nn.Module, param: str, by: float = 0.5) -> nn.Module:
    """``module`` with ``param`` (a state_dict key) scaled by ``1 + by`` (a shift would vanish
    where a LayerNorm output, summing to 0, meets it)."""
    with torch.no_grad():
        dict(module.named_parameters())[param].mul_(1 + by)
    return module


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


def export(module: nn.Module, args: tuple, path: Path, how: str) -> Path:
    """Write ``module`` as ``how``: "pt2", "dynamo" (torch.onnx, dynamo=True) or "legacy"."""
    with _quiet(), torch.no_grad():
        if how == "pt2":
            torch.export.save(torch.export.export(module, args), path)
        elif how == "dynamo":
            torch.onnx.export(module, args, path, dynamo=True, external_data=False)
        else:
            names = ["input_ids"] if args[0].dtype == torch.int64 else ["x"]
            torch.onnx.export(module, args, path, dynamo=False, input_names=names)
    return path
