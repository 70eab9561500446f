"""codegen.tflite's export-time folds (codegen.tflite.optimize): each one removes the operators
it should (counted against ``optimize=False``), the file still runs in LiteRT like eager
PyTorch, and ``msc diff`` reads the file back as equivalent to the graph it was written from,
naming the fold."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the tflite extra (tflite, flatbuffers) is not installed")
pytest.importorskip("ai_edge_litert", reason="LiteRT (ai-edge-litert) is not installed")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import codegen.tflite  # noqa: E402
import msc  # noqa: E402
from codegen.tflite.model import to_records  # noqa: E402
from codegen.tflite.optimize import fuse_activations, optimize_graph  # noqa: E402
from codegen.tflite.passes import count_ops, simplify  # noqa: E402
from tests.tflite_cases import run_litert  # noqa: E402

TOL = 1e-5  # float32, a few ops deep: LiteRT's kernels against eager PyTorch


def _ops(g, optimize: bool) -> Counter[str]:
    model = simplify(to_records(optimize_graph(g) if optimize else g))
    if optimize:
        fuse_activations(model)
    return Counter(count_ops(simplify(model)))


def _agrees(m: nn.Module, xs: tuple, **kw) -> tuple:
    """The module's graph, written optimized, runs in LiteRT like eager: (graph, data)."""
    g = msc.from_torch(m, xs)
    data = codegen.tflite.to_bytes(g, **kw)
    got = run_litert(data, [x.numpy() for x in xs])
    with torch.no_grad():
        want = m(*xs)
    np.testing.assert_allclose(got[0], want.numpy(), atol=TOL, rtol=TOL)
    return g, data


def _trained(bn: nn.Module) -> nn.Module:
    """Statistics and affine parameters far from the identity, so a lost fold shows."""
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.3, 3)
        bn.weight.uniform_(0.5, 2)
        bn.bias.uniform_(-1, 1)
    return bn


def _equivalent(g, data, rewrite: str) -> None:
    from msc.analysis.convert import _structural
    from msc.analysis.diff import diff_graphs

    again = msc.from_tflite(data)
    _, summary, verdict, equivalent = _structural(g, again)
    assert equivalent, (verdict, summary)
    d = diff_graphs(g, again)
    assert rewrite in {k for _, k, _ in d.rewrites}, d.rewrites


# ------------------------------------------------------------------ BatchNorm
class _ConvBN(nn.Module):
    def __init__(self, groups: int = 1):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1, groups=groups, bias=groups == 1)
        self.bn = _trained(nn.BatchNorm2d(8))

    def forward(self, x):
        return self.bn(self.conv(x))


def _depthwise_bn() -> nn.Module:
    return _ConvBN(groups=4)


class _LinearBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 5)
        self.bn = _trained(nn.BatchNorm1d(5))

    def forward(self, x):
        return self.bn(self.fc(x))


@pytest.mark.parametrize(
    "make, shape, op, rewrite",
    [
        (_ConvBN, (2, 4, 9, 9), "CONV_2D", "batch_norm folded into conv"),
        (_depthwise_bn, (2, 4, 9, 9), "DEPTHWISE_CONV_2D", "batch_norm folded into conv"),
        (_LinearBN, (3, 6), "FULLY_CONNECTED", "batch_norm folded into linear"),
    ],
    ids=["conv", "depthwise", "linear"],
)
def test_batch_norm_is_folded_into_the_weights(make, shape, op, rewrite):
    torch.manual_seed(0)
    m = make().eval()
    x = torch.randn(*shape)
    g, data = _agrees(m, (x,))
    before, after = _ops(g, False), _ops(g, True)
    assert before["MUL"] >= 1 and before["ADD"] >= 1  # BatchNorm as x * scale + shift
    assert after["MUL"] == after["ADD"] == 0 and after[op] == 1
    assert sum(after.values()) <= sum(before.values()) - 2
    done: Counter[str] = Counter()
    codegen.tflite.to_bytes(g, done=done)
    assert done["batch_norm folded"] == 1
    _equivalent(g, data, rewrite)


class _ReluBN(nn.Module):
    """A BatchNorm no conv or linear absorbs."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.bn = _trained(nn.BatchNorm2d(8))

    def forward(self, x):
        return self.bn(torch.relu(self.conv(x)))


@pytest.mark.parametrize(
    "make, shape, side, rewrite",
    [  # the spelled-out one folds into the conv (B); the source's stands alone, folded (A)
        (_ConvBN, (2, 4, 9, 9), 1, "batch_norm folded into conv"),
        (_ReluBN, (2, 4, 9, 9), 0, "batch_norm's statistics folded into its scale and shift"),
    ],
    ids=["conv", "alone"],
)
def test_batch_norm_written_as_mul_and_add_reads_back_as_one(make, shape, side, rewrite):
    """Unoptimized, codegen.tflite writes an inference BatchNorm as MUL by its scale and ADD
    of its shift (per-channel constants): diff reads that back as a batch_norm of mean 0,
    variance 1, which folds into the conv / linear before it as the source's does, or stands
    alone as the source's, its statistics folded into scale and shift. A statistic that
    really changed is still a change."""
    from msc.analysis.canonical import canonicalize
    from msc.analysis.diff import diff_graphs

    torch.manual_seed(0)
    m = make().eval()
    g, data = _agrees(m, (torch.randn(*shape),), optimize=False)
    assert _ops(g, False)["MUL"] == _ops(g, False)["ADD"] == 1
    _equivalent(g, data, "batch_norm spelled out as mul + add -> batch_norm")
    assert canonicalize((g, msc.from_tflite(data))[side]).rewrites[rewrite] == 1

    with torch.no_grad():
        m.bn.running_var.mul_(1.5)
    changed = diff_graphs(msc.from_torch(m, (torch.randn(*shape),)), msc.from_tflite(data))
    assert not changed.equivalent and changed.real_changes == 1, changed.verdict()
    assert "values differ" in changed.changed[0].changes[0], changed.changed[0].changes


def test_a_conv_whose_output_is_read_elsewhere_keeps_its_batch_norm():
    class Both(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 1)
            self.bn = _trained(nn.BatchNorm2d(4))

        def forward(self, x):
            y = self.conv(x)
            return self.bn(y) + y

    g, _ = _agrees(Both().eval(), (torch.randn(1, 3, 5, 5),))
    assert _ops(g, True)["MUL"] == 1


# ------------------------------------------------------------------ activations
class _Producer(nn.Module):
    """``act(producer(x))`` for a producer TFLite can fuse an activation into."""

    def __init__(self, producer: str, act: str):
        super().__init__()
        self.producer, self.act = producer, act
        self.conv = nn.Conv2d(4, 4, 3, padding=1)
        self.dw = nn.Conv2d(4, 4, 3, padding=1, groups=4)
        self.fc = nn.Linear(9, 9)

    def forward(self, x):
        y = {
            "conv": lambda: self.conv(x),
            "depthwise": lambda: self.dw(x),
            "linear": lambda: self.fc(x),
            "add": lambda: x + 0.5 * x.flip(-1),
            "sub": lambda: x - x.flip(-1),
            "mul": lambda: x * x.flip(-1),
            "div": lambda: x / (x.abs().flip(-1) + 1.0),
            "avg_pool": lambda: F.avg_pool2d(x, 3, 1),
            "max_pool": lambda: F.max_pool2d(x, 3, 1),
        }[self.producer]()
        return {
            "relu": F.relu,
            "relu6": F.relu6,
            "hardtanh": F.hardtanh,  # RELU_N1_TO_1
        }[self.act](y)


_FUSED_INTO = {
    "conv": "CONV_2D",
    "depthwise": "DEPTHWISE_CONV_2D",
    "linear": "FULLY_CONNECTED",
    "add": "ADD",
    "sub": "SUB",
    "mul": "MUL",
    "div": "DIV",
    "avg_pool": "AVERAGE_POOL_2D",
    "max_pool": "MAX_POOL_2D",
}
_ACT_OP = {"relu": "RELU", "relu6": "RELU6", "hardtanh": "RELU_N1_TO_1"}


@pytest.mark.parametrize("act", sorted(_ACT_OP))
@pytest.mark.parametrize("producer", sorted(_FUSED_INTO))
def test_an_activation_is_fused_into_its_producer(producer, act):
    torch.manual_seed(0)
    m = _Producer(producer, act).eval()
    x = torch.randn(2, 4, 9, 9) * 4  # beyond 6 and -1: every clamp matters
    g, data = _agrees(m, (x,))
    before, after = _ops(g, False), _ops(g, True)
    assert before[_ACT_OP[act]] == 1
    assert after[_ACT_OP[act]] == 0
    assert after[_FUSED_INTO[producer]] == before[_FUSED_INTO[producer]]
    # read back, the fused activation is its own node again: the same graph
    again = msc.from_tflite(data)
    assert sum(n.op in ("relu", "hardtanh") for n in again.nodes) == 1


def test_an_activation_of_a_value_read_twice_stays_an_operator():
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 3, 1)

        def forward(self, x):
            y = self.conv(x)
            return torch.relu(y) * y

    g, _ = _agrees(Twice().eval(), (torch.randn(1, 3, 4, 4),))
    assert _ops(g, True)["RELU"] == 1


def test_tanh_and_concatenation_are_not_fused():
    """LiteRT's conv kernel ignores a fused TANH and its CONCATENATION one any activation:
    written fused, both would be wrong, so both stay operators (and the outputs agree)."""

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 3, 1)

        def forward(self, x):
            return torch.relu(torch.cat([torch.tanh(self.conv(x)), x], 1))

    g, _ = _agrees(M().eval(), (torch.randn(1, 3, 4, 4) * 3,))
    ops = _ops(g, True)
    assert ops["TANH"] == 1 and ops["RELU"] == 1


# ------------------------------------------------------------------ pads
class _PadConv(nn.Module):
    def __init__(self, pads, stride: int, groups: int = 1):
        super().__init__()
        self.pads = pads
        self.conv = nn.Conv2d(4, 4, 3, stride=stride, groups=groups)

    def forward(self, x):
        return self.conv(F.pad(x, self.pads))


@pytest.mark.parametrize(
    "pads, stride, groups, size, same",
    [
        ((0, 1, 0, 1), 2, 1, 16, True),  # TF's SAME for an even size, stride 2
        ((1, 1, 1, 1), 2, 4, 15, True),  # SAME for an odd size: symmetric; depthwise
        ((1, 1, 1, 1), 1, 1, 10, True),  # stride 1
        ((1, 1, 1, 1), 2, 1, 16, False),  # torch's symmetric pad: not SAME, a PAD stays
    ],
    ids=["even-stride2", "odd-stride2-depthwise", "stride1", "not-same"],
)
def test_a_zero_pad_before_a_conv_becomes_same_padding(pads, stride, groups, size, same):
    torch.manual_seed(0)
    m = _PadConv(pads, stride, groups).eval()
    g, data = _agrees(m, (torch.randn(1, 4, size, size),))
    before, after = _ops(g, False), _ops(g, True)
    assert before["PAD"] == 1
    assert after["PAD"] == (0 if same else 1)
    if same:
        _equivalent(g, data, "zero pad folded into conv")


@pytest.mark.parametrize("size, same", [(16, True), (15, False)])
def test_a_minus_inf_pad_before_a_max_pool_becomes_same_padding(size, same):
    class M(nn.Module):
        def forward(self, x):
            return F.max_pool2d(F.pad(x, (0, 1, 0, 1), value=float("-inf")), 3, 2)

    g, data = _agrees(M(), (torch.randn(1, 4, size, size),))
    before, after = _ops(g, False), _ops(g, True)
    assert before["PADV2"] + before["PAD"] == 1
    assert after["PADV2"] + after["PAD"] == (0 if same else 1)
    if same:
        _equivalent(g, data, "-inf pad folded into max_pool")


def test_a_pad_of_another_value_or_of_the_channels_is_kept():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(4, 4, 3, stride=2)
            self.conv2 = nn.Conv2d(6, 4, 1)

        def forward(self, x):
            a = self.conv(F.pad(x, (0, 1, 0, 1), value=1.0))
            b = self.conv2(F.pad(x, (0, 0, 0, 0, 1, 1)))  # two channels of zeros
            return a.sum() + b.sum()

    g, _ = _agrees(M().eval(), (torch.randn(1, 4, 16, 16),))
    ops = _ops(g, True)
    assert ops["PAD"] + ops["PADV2"] == 2


# ------------------------------------------------------------------ global pools
def test_a_global_average_pool_is_one_mean_between_no_transposes():
    """A squeeze-excitation block: adaptive_avg_pool(x, 1) scales x's channels. As one MEAN
    the layout pass moves through, no TRANSPOSE is left inside (one at the input, one at the
    output); decomposed, each pool took a TRANSPOSE to channels first and a slice per dim."""

    class SE(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.reduce = nn.Conv2d(8, 2, 1)
            self.expand = nn.Conv2d(2, 8, 1)

        def forward(self, x):
            y = self.conv(x)
            s = F.adaptive_avg_pool2d(y, 1)
            return y * torch.sigmoid(self.expand(F.silu(self.reduce(s))))

    g, data = _agrees(SE().eval(), (torch.randn(2, 3, 10, 10),))
    before, after = _ops(g, False), _ops(g, True)
    assert before["TRANSPOSE"] > 2 and before["STRIDED_SLICE"] >= 1
    assert after["TRANSPOSE"] == 2 and after["MEAN"] == 1 and after["STRIDED_SLICE"] == 0
    _equivalent(g, data, "adaptive_avg_pool -> reduce_mean")


# ------------------------------------------------------------------ together
def test_optimize_false_writes_node_for_node():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), _trained(nn.BatchNorm2d(4)), nn.ReLU6())
    g, data = _agrees(m.eval(), (torch.randn(1, 3, 8, 8),))
    _, plain = _agrees(m, (torch.randn(1, 3, 8, 8),), optimize=False)
    assert len(plain) > len(data)
    assert _ops(g, False)["RELU6"] == 1 and _ops(g, True)["RELU6"] == 0
    _equivalent(g, data, "batch_norm folded into conv")


def test_convert_to_tflite_reports_the_folds_and_its_check_passes(tmp_path):
    """``msc convert --to tflite`` of a CNN: the re-import is equivalent up to the folds (and
    the layout change), the report says what was folded; ``optimize=False`` folds nothing."""
    from msc.analysis.convert import convert

    torch.manual_seed(0)
    m = nn.Sequential(
        nn.ZeroPad2d((0, 1, 0, 1)),
        nn.Conv2d(3, 4, 3, stride=2),
        _trained(nn.BatchNorm2d(4)),
        nn.ReLU(),
    ).eval()
    msc.save(msc.from_torch(m, (torch.randn(1, 3, 16, 16),)), tmp_path / "g")
    r = convert(tmp_path / "g", tmp_path / "m.tflite")
    assert r.ok and r.equivalent, r.verdict
    assert r.optimized == {
        "batch_norm folded": 1,
        "zero pad folded into conv": 1,
        "activations fused": 1,
    }
    assert "zero pad folded into conv" in r.verdict
    # Unoptimized, the BatchNorm is a MUL and an ADD, which diff reads back as a batch_norm.
    plain = convert(tmp_path / "g", tmp_path / "p.tflite", optimize=False)
    assert plain.ok and plain.equivalent and plain.optimized == {}, plain.verdict
    assert "batch_norm spelled out as mul + add -> batch_norm x1 (B)" in plain.verdict
