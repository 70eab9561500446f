"""PyTorch control flow: torch.cond and torch.while_loop come in as ``if`` / ``loop`` nodes,
run through both codegens, and generated PyTorch re-exports as control flow again."""

from __future__ import annotations

import onnxruntime as ort
import torch
from torch import nn

import codegen.onnx
import codegen.torch
import msc


class Cond(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(3, generator=torch.Generator().manual_seed(0)))

    def forward(self, x, y):
        def then(x, y):
            return x.sin() * self.w + y, x * 3

        def other(x, y):
            return x.cos() + 1, y * 2

        return torch.cond(x.sum() > 0, then, other, (x, y))


class _While(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.full((3,), 0.5))

    def forward(self, x, k):
        i = torch.zeros((), dtype=torch.int64)
        return torch.while_loop(lambda i, x: i < k, lambda i, x: (i + 1, x * 2 + self.w), (i, x))


def _ort(g, feeds):
    sess = ort.InferenceSession(codegen.onnx.to_model(g).SerializeToString())
    return sess.run(None, {k: v.numpy() for k, v in feeds.items()})


def _same(got, want) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert torch.allclose(torch.as_tensor(a), b.detach(), atol=1e-6)


def test_cond_is_an_if_and_round_trips() -> None:
    m, x, y = Cond().eval(), torch.randn(3), torch.randn(3)
    g = msc.from_torch(m, (x, y))
    (node,) = [n for n in g.nodes if n.op == "if"]
    assert node.provenance.op == "cond"
    gen = codegen.torch.to_module(g)
    assert "torch.cond(" in gen.msc_source
    for xx in (x.abs() + 0.1, -x.abs() - 0.1):  # both branches, in eager and in onnxruntime
        want = m(xx, y)
        _same(gen(xx, y), want)
        _same(_ort(g, {"x": xx, "y": y}), want)
    # torch.export of the generated module sees torch.cond again: the same graph comes back
    # (not the branch the example input took).
    again = msc.from_torch(gen, (x, y))
    assert msc.structural_equal(g, again, names=True), msc.structural_equal(g, again).diff


def test_while_loop_is_a_loop_and_re_exports_as_one() -> None:
    m, x = _While().eval(), torch.randn(3)
    g = msc.from_torch(m, (x, torch.tensor(4)))
    assert [n.op for n in g.nodes].count("loop") == 1
    gen = codegen.torch.to_module(g)
    assert "torch.while_loop(" in gen.msc_source
    for k in (0, 1, 5):  # trip counts the example did not have
        kk = torch.tensor(k)
        _same(gen(x, kk), m(x, kk))
        _same(_ort(g, {"x": x, "k": kk}), m(x, kk))
    again = msc.from_torch(gen, (x, torch.tensor(4)))
    assert [n.op for n in again.nodes].count("loop") == 1  # still a loop, not unrolled
    _same(codegen.torch.to_module(again)(x, torch.tensor(6)), m(x, torch.tensor(6)))


def test_cond_on_a_python_bool_takes_the_branch() -> None:
    class M(nn.Module):
        def forward(self, x):
            return torch.cond(x.shape[0] > 2, lambda x: x + 1, lambda x: x - 1, (x,))

    g = msc.from_torch(M(), (torch.ones(4),))
    assert "if" not in {n.op for n in g.nodes}
    assert torch.equal(codegen.torch.to_module(g)(torch.ones(4)), torch.full((4,), 2.0))


def test_map_is_a_scan() -> None:
    from torch._higher_order_ops.map import map as torch_map

    class M(nn.Module):
        def forward(self, xs, y):
            return torch_map(lambda x, y: x.sin() + y, xs, y)

    xs, y = torch.randn(4, 3), torch.randn(3)
    g = msc.from_torch(M(), (xs, y))
    assert [n.op for n in g.nodes] == ["scan"]
    want = M()(xs, y)
    _same([codegen.torch.to_module(g)(xs, y)], [want])
    _same(_ort(g, {"xs": xs, "y": y}), [want])
