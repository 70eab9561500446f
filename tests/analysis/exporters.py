"""Small models exported the ways users export them: a ResNet-like CNN with BatchNorm, a CNN
that upsamples with ``F.interpolate``, a small BERT, and transformers' BertForMaskedLM and
LlamaForCausalLM called with an attention mask (random weights), each as a .pt2
(torch.export.save) and as torch.onnx's file (dynamo=True and the legacy TorchScript exporter),
with static or dynamic batch and sequence dims.

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
    _trained_batch_norms(m)
    return m.eval(), (torch.randn(1, 3, 16, 16),)


class UpsampleCNN(nn.Module):
    """A small encoder-decoder: strided convs with BatchNorm, then ``F.interpolate`` back up
    (bilinear by a scale, nearest to a size), as segmentation heads do."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, 2, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, 2, 1)
        self.bn2 = nn.BatchNorm2d(8)
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        y = nn.functional.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=False)
        y = self.head(y)
        return nn.functional.interpolate(y, size=(16, 16), mode="nearest")


def upsample() -> tuple[nn.Module, tuple]:
    torch.manual_seed(0)
    m = UpsampleCNN()
    _trained_batch_norms(m)
    return m.eval(), (torch.randn(2, 3, 16, 16),)


def fresh_resnet() -> tuple[nn.Module, tuple]:
    """TinyResNet as constructed: BatchNorms of mean 0, variance 1, weight 1, bias 0."""
    torch.manual_seed(0)
    return TinyResNet().eval(), (torch.randn(2, 3, 16, 16),)


def _trained_batch_norms(m: nn.Module) -> None:
    with torch.no_grad():  # running stats that are not the identity, as a trained model has
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)


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


class _MaskedLM(nn.Module):
    """A transformers model called as users call it: ids and an attention mask, logits out."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits


def _ids_and_mask() -> tuple:
    torch.manual_seed(1)
    return torch.randint(0, 64, (2, 8)), torch.ones(2, 8, dtype=torch.int64)


def bert_mlm() -> tuple[nn.Module, tuple]:
    """BertForMaskedLM (tiny config) taking ``(input_ids, attention_mask)``."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    return _MaskedLM(transformers.BertForMaskedLM(cfg)).eval(), _ids_and_mask()


def llama() -> tuple[nn.Module, tuple]:
    """LlamaForCausalLM (tiny config, grouped-query attention) taking ``(input_ids,
    attention_mask)``."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        use_cache=False,
    )
    return _MaskedLM(transformers.LlamaForCausalLM(cfg)).eval(), _ids_and_mask()


def change(module: nn.Module, param: str, by: float = 0.5) -> nn.Module:
    """``module`` with ``param`` (a state_dict key) scaled by ``1 + by`` (a shift would vanish
    where a LayerNorm output, summing to 0, meets it)."""
    with torch.no_grad():
        dict(module.named_parameters())[param].mul_(1 + by)
    return module


def change_op(module: nn.Module, path: str, new: nn.Module) -> nn.Module:
    """``module`` with the submodule at ``path`` (dotted) replaced by ``new``: a changed op."""
    parent, _, name = path.rpartition(".")
    setattr(module.get_submodule(parent), name, new)
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


def _input_names(args: tuple) -> list[str]:
    if args[0].dtype != torch.int64:
        return ["x"]
    return ["input_ids", "attention_mask"][: len(args)]


def _dynamic_shapes(args: tuple) -> tuple:
    """A dynamic batch (and sequence, for token ids) in every input."""
    from torch.export import Dim

    batch, seq = Dim("batch", min=1, max=32), Dim("seq", min=2, max=60)
    if args[0].dtype != torch.int64:
        return ({0: batch},)
    return tuple({0: batch, 1: seq} for _ in args)


def export(module: nn.Module, args: tuple, path: Path, how: str, dynamic: bool = False) -> Path:
    """Write ``module`` as ``how``: "pt2", "dynamo" (torch.onnx, dynamo=True), "legacy", or
    "ep" (torch.export's program read in memory by ``msc.from_exported_program``, saved as an
    msc graph directory). ``dynamic``: batch (and sequence) dims symbolic, as users export."""
    names = _input_names(args)
    shapes = _dynamic_shapes(args) if dynamic else None
    with _quiet(), torch.no_grad():
        if how in ("pt2", "ep"):
            ep = torch.export.export(module, args, dynamic_shapes=shapes)
            if how == "pt2":
                torch.export.save(ep, path)
            else:
                import msc

                msc.save(msc.from_exported_program(ep), path)
        elif how == "dynamo":
            torch.onnx.export(
                module, args, path, dynamo=True, external_data=False, dynamic_shapes=shapes
            )
        else:
            axes = None
            if dynamic:
                axes = {k: {i: ("batch", "seq")[i] for i in d} for k, d in zip(names, shapes)}  # type: ignore[arg-type]
            torch.onnx.export(
                module, args, path, dynamo=False, input_names=names, dynamic_axes=axes
            )
    return path
