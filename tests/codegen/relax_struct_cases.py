"""Small torch modules for the structural comparison of codegen.relax with TVM's own
ExportedProgram frontend (data, not tests): name -> (module, example args)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def _r(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


class Attention(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


class CausalAttention(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class ConvBnRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


X = (_r(2, 3, 4),)
IMG = (_r(1, 3, 8, 8),)
QKV = (_r(1, 2, 4, 8), _r(1, 2, 4, 8, seed=1), _r(1, 2, 4, 8, seed=2))

CASES: dict[str, tuple] = {
    "conv2d": (nn.Conv2d(3, 4, 3), IMG),
    "conv2d_nobias_stride": (nn.Conv2d(3, 4, 3, stride=2, padding=1, bias=False), IMG),
    "conv1d": (nn.Conv1d(3, 4, 3), (_r(1, 3, 10),)),
    "conv_transpose2d": (nn.ConvTranspose2d(3, 4, 3), IMG),
    "batch_norm": (nn.BatchNorm2d(3).eval(), IMG),
    "conv_bn_relu": (ConvBnRelu().eval(), IMG),
    "max_pool2d": (nn.MaxPool2d(2), IMG),
    "avg_pool2d": (nn.AvgPool2d(2), IMG),
    "adaptive_avg_pool2d": (nn.AdaptiveAvgPool2d(1), IMG),
    "linear": (nn.Linear(4, 5), X),
    "linear_nobias": (nn.Linear(4, 5, bias=False), X),
    "mlp": (Mlp(), (_r(2, 8),)),
    "matmul": (Fn(torch.matmul), (_r(2, 3, 4), _r(2, 4, 5, seed=1))),
    "layer_norm": (nn.LayerNorm(4), X),
    "group_norm": (nn.GroupNorm(2, 4), (_r(2, 4, 3, 3),)),
    "softmax": (nn.Softmax(-1), X),
    "log_softmax": (nn.LogSoftmax(1), X),
    "gelu": (nn.GELU(), X),
    "gelu_tanh": (nn.GELU("tanh"), X),
    "silu": (nn.SiLU(), X),
    "relu": (nn.ReLU(), X),
    "sigmoid": (nn.Sigmoid(), X),
    "tanh": (nn.Tanh(), X),
    "leaky_relu": (nn.LeakyReLU(0.2), X),
    "hardtanh": (nn.Hardtanh(-0.5, 0.5), X),
    "attention": (Attention(), QKV),
    "causal_attention": (CausalAttention(), QKV),
    "embedding": (nn.Embedding(10, 4), (torch.tensor([[1, 2], [3, 9]]),)),
    "reshape": (Fn(lambda x: x.reshape(6, 4)), X),
    "permute": (Fn(lambda x: x.permute(2, 0, 1)), X),
    "transpose": (Fn(lambda x: x.transpose(1, 2)), X),
    "flatten": (Fn(lambda x: torch.flatten(x, 1)), X),
    "slice": (Fn(lambda x: x[:, 1:3]), X),
    "concat": (Fn(lambda a, b: torch.cat([a, b], 1)), (_r(2, 3, 4), _r(2, 2, 4, seed=1))),
    "split": (Fn(lambda x: torch.split(x, [1, 3], dim=2)), X),
    "unsqueeze": (Fn(lambda x: x.unsqueeze(1)), X),
    "squeeze": (Fn(lambda x: x.squeeze(1)), (_r(2, 1, 4),)),
    "sum": (Fn(lambda x: x.sum(1)), X),
    "mean_keepdim": (Fn(lambda x: x.mean(-1, keepdim=True)), X),
    "amax": (Fn(lambda x: torch.amax(x, 2)), X),
    "add": (Fn(torch.add), (_r(2, 3), _r(2, 3, seed=1))),
    "mul": (Fn(torch.mul), (_r(2, 3), _r(2, 3, seed=1))),
    "sub": (Fn(torch.sub), (_r(2, 3), _r(2, 3, seed=1))),
    "div": (Fn(torch.div), (_r(2, 3), _r(2, 3, seed=1))),
    "exp": (Fn(torch.exp), X),
    "sqrt": (Fn(lambda x: torch.sqrt(x.abs())), X),
    "where": (Fn(lambda c, a, b: torch.where(c, a, b)), (_r(2, 3) > 0, _r(2, 3), _r(2, 3))),
    "cast": (Fn(lambda x: x.to(torch.int32)), X),
    "maximum": (Fn(torch.maximum), (_r(2, 3), _r(2, 3, seed=1))),
    "argmax": (Fn(lambda x: torch.argmax(x, 1)), X),
    "cumsum": (Fn(lambda x: torch.cumsum(x, 1)), X),
    "expand": (Fn(lambda x: x.expand(2, 3, 4)), (_r(1, 3, 4),)),
    "clamp": (Fn(lambda x: torch.clamp(x, -0.5, 0.5)), X),
}
