"""PyTorch frontend: whole models, names, inputs, dtypes, dynamic dims, provenance, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.export import Dim
from torch.utils import _pytree as pytree

import msc
import msc.frontend.torch as ft
from msc.errors import UnsupportedOpsError
from msc.frontend.torch.coverage import UNSUPPORTED
from msc.frontend.torch.registry import CONVERTERS
from tests.frontend.test_frontend_torch import check_numerics, check_outputs
from tests.torch_cases import MODEL_CASES, build_model, wrap

_build = build_model


def assert_round_trip(g: msc.Graph) -> None:
    g.validate()
    text = msc.to_text(g)
    again = msc.from_text(text)
    msc.assert_structural_equal(g, again, names=True, weights="types")
    assert msc.to_text(again) == text


@pytest.mark.parametrize("name", list(MODEL_CASES))
def test_model(name: str) -> None:
    module, args, dyn = _build(name)
    with torch.no_grad():
        expected = module(*args)
    g = msc.from_torch(module, args, dynamic_shapes=dyn)
    assert_round_trip(g)
    check_outputs(g, expected, name)
    names = set(module.state_dict()) | {n for n, _ in module.named_buffers()}
    assert set(g.weights) <= names | {k for k in g.weights if "lifted" in k or "constant" in k}
    check_numerics(g, args, expected, 1e-4)


@pytest.mark.parametrize("name", ["small_cnn", "mlp_mixer", "transformer"])
def test_model_fx(name: str) -> None:
    module, args, _ = _build(name)
    with torch.no_grad():
        expected = module(*args)
    if type(module).__module__.startswith("torch.nn"):
        module = wrap(module, len(args))  # a torch.nn root would be traced through
    g = msc.from_fx(torch.fx.symbolic_trace(module), args)
    assert_round_trip(g)
    check_outputs(g, expected, name)


def test_transformer_names_survive() -> None:
    module, args, _ = _build("transformer")
    g = msc.from_torch(module, args)
    assert [v.name for v in g.inputs] == ["src", "tgt"]
    assert "encoder.layers.0.self_attn.in_proj_weight" in g.weights
    assert "decoder.layers.1.multihead_attn.out_proj.bias" in g.weights
    again = msc.from_text(msc.to_text(g))
    assert "encoder.layers.0.self_attn.in_proj_weight" in again.weights
    mods = {n.provenance.module for n in g.nodes}
    assert any(m.startswith("encoder.layers.0") for m in mods)


def test_small_cnn_dynamic_batch_and_provenance() -> None:
    module, args, dyn = _build("small_cnn")
    g = msc.from_torch(module, args, dynamic_shapes=dyn)
    (x,) = g.inputs
    assert x.name == "x"
    assert x.type.shape[0] == msc.SymDim("batch", 1, 32)
    assert g.outputs[0].type.shape == (msc.SymDim("batch", 1, 32), 10)
    convs = [n for n in g.nodes if n.op == "conv"]
    assert convs[0].provenance == msc.Provenance("torch", "aten.conv2d.default", "conv2d", "stem.0")
    assert convs[0].attrs["padding"] == (1, 1, 1, 1)
    assert {n.provenance.module for n in convs} == {"stem.0", "block.0", "block.3"}
    bn = next(n for n in g.nodes if n.op == "batch_norm")
    assert [v.name for v in bn.inputs[1:]] == [
        "stem.1.weight",
        "stem.1.bias",
        "stem.1.running_mean",
        "stem.1.running_var",
    ]


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.head = nn.Linear(8, 20, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.emb(ids))


@pytest.mark.parametrize("how", ["export", "fx"])
def test_tied_weights_one_weight(how: str) -> None:
    m = Tied().eval()
    ids = torch.tensor([[1, 2, 3]])
    g = (
        msc.from_torch(m, (ids,))
        if how == "export"
        else msc.from_fx(torch.fx.symbolic_trace(m), (ids,))
    )
    assert list(g.weights) == ["emb.weight"]
    w = g.weights["emb.weight"]
    assert len(w.uses) == 2
    if how == "export":
        assert g.weights["emb.weight"].aliases == ("head.weight",)


class Stateful(nn.Module):
    """A persistent and a non-persistent buffer, and a small and a large tensor attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", torch.full((3,), 2.0))
        self.register_buffer("shift", torch.ones(3), persistent=False)
        self.small = torch.tensor([1.0, 2.0, 3.0])
        self.large = torch.arange(300.0).reshape(100, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * self.scale + self.shift) * self.small + self.large[:4] + x**2


def test_buffers_and_tensor_constants() -> None:
    m = Stateful().eval()
    x = torch.randn(4, 3)
    g = msc.from_torch(m, (x,))
    # Buffers stay weights, listed by kind; the small constant is a constant node.
    roles = {w.name: w.role for w in g.weights.values()}
    assert [n for n, r in roles.items() if r == "buffer"] == ["scale"]
    assert sorted(n for n, r in roles.items() if r == "constant") == ["large", "shift"]
    assert set(g.weights) == {"scale", "shift", "large"}
    values = [n.attrs["value"] for n in g.nodes if n.op == "constant"]
    assert any(v.shape == (3,) and v.tolist() == [1.0, 2.0, 3.0] for v in values)
    # x**2 became x*x: the frontend leaves no unused constant behind.
    assert all(n.output.uses for n in g.nodes if n.op == "constant")
    check_numerics(g, (x,), m(x), 1e-6)


def test_buffers_and_tensor_constants_fx() -> None:
    m = Stateful().eval()
    x = torch.randn(4, 3)
    gm = torch.fx.symbolic_trace(m)  # folds large[:4] into _tensor_constant0
    g = msc.from_fx(gm, (x,))
    # An fx GraphModule registers every tensor attribute as a persistent buffer.
    buffers = [w.name for w in g.weights.values() if w.role == "buffer"]
    assert sorted(buffers) == ["scale", "shift", "small"]
    assert set(g.weights) == {"scale", "shift", "small"}
    values = [n.attrs["value"] for n in g.nodes if n.op == "constant"]
    assert any(v.shape == (4, 3) for v in values)
    # x**2 became x*x: the frontend leaves no unused constant behind.
    assert all(n.output.uses for n in g.nodes if n.op == "constant")
    check_numerics(g, (x,), m(x), 1e-6)


@pytest.mark.parametrize("how", ["export", "fx"])
def test_training_modes_are_restored_per_module(how: str) -> None:
    bn = nn.BatchNorm1d(3).eval()
    m = wrap(bn, 1)  # the wrapper is in training mode, the batch norm in eval
    x = torch.randn(4, 3)
    if how == "export":
        msc.from_torch(m, (x,))
    else:
        msc.from_fx(torch.fx.symbolic_trace(m), (x,))
    assert m.training and not bn.training


def test_checks_on_unbacked_sizes_are_dropped() -> None:
    x, mask = torch.randn(2, 3), torch.tensor([[True, False, True], [False, True, True]])
    g = msc.from_torch(wrap(lambda a, b: a[b], 2), (x, mask))
    assert [n.op for n in g.nodes if n.op in ("shape", "ge", "le")] == []
    (nz,) = [n for n in g.nodes if n.op == "nonzero"]
    assert nz.output.type.shape[0] == g.outputs[0].type.shape[0]  # the same symbol
    assert isinstance(nz.output.type.shape[0], msc.SymDim)


class Mixed(nn.Module):
    def forward(self, ids, mask, h16, hb16, h64):
        return ids.sum(-1), mask.logical_not(), h16 * 2, hb16 + 1, h64.exp()


def test_input_dtypes_and_names() -> None:
    args = (
        torch.tensor([[1, 2]]),
        torch.tensor([True, False]),
        torch.ones(2, dtype=torch.float16),
        torch.ones(2, dtype=torch.bfloat16),
        torch.ones(2, dtype=torch.float64),
    )
    g = msc.from_torch(Mixed(), args)
    assert [v.name for v in g.inputs] == ["ids", "mask", "h16", "hb16", "h64"]
    assert [v.dtype.short for v in g.inputs] == ["i64", "bool", "f16", "bf16", "f64"]
    assert [v.dtype.short for v in g.outputs] == ["i64", "bool", "f16", "bf16", "f64"]
    g2 = msc.from_torch(Mixed(), args, input_names=["a", "b", "c", "d", "e"])
    assert [v.name for v in g2.inputs] == ["a", "b", "c", "d", "e"]


def test_input_types_override() -> None:
    n = msc.SymDim("n", 1, 100)
    t = msc.TensorType(msc.DType.FLOAT32, (n, 4))
    m = nn.Sequential(nn.Linear(4, 3), nn.ReLU()).eval()
    for g in (
        msc.from_torch(m, (torch.ones(2, 4),), input_types={"input": t}),
        msc.from_fx(torch.fx.symbolic_trace(m), (torch.ones(2, 4),), input_types={"input": t}),
    ):
        assert g.inputs[0].type == t
        assert g.outputs[0].type.shape[0] == n


def test_weights_are_not_copied() -> None:
    m = nn.Linear(4, 4).to(torch.bfloat16).eval()
    g = msc.from_torch(m, (torch.ones(1, 4, dtype=torch.bfloat16),))
    w = g.weights["weight"].numpy()
    assert w.dtype == np.dtype("bfloat16")
    assert w.ctypes.data == m.weight.data_ptr()


class Multi(nn.Module):
    def forward(self, x, y):
        return {"sum": x + y, "pair": [x * 2, None], "n": 3}


def test_output_structure() -> None:
    x = torch.ones(2)
    for g in (
        msc.from_torch(Multi(), (x, x)),
        msc.from_fx(torch.fx.symbolic_trace(Multi()), (x, x)),
    ):
        spec = g.output_tree
        assert [k for k, _ in spec["dict"]] == ["sum", "pair", "n"]
        assert len(g.outputs) == 2


class Bad(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = _BitsView()
        self.b = _BitsView()

    def forward(self, x):
        return self.a(x) + self.b(x), torch.as_strided_scatter(x, torch.zeros(2), (2,), (1,))


class _BitsView(nn.Module):
    def forward(self, x):
        return x.view(torch.int32)


def test_unsupported_ops_listed_all_at_once() -> None:
    with pytest.raises(UnsupportedOpsError) as info:
        msc.from_torch(Bad(), (torch.ones(3),))
    ops = info.value.ops
    where = {(o.op, o.module) for o in ops}
    assert ("aten.view.dtype", "a") in where and ("aten.view.dtype", "b") in where
    # as_strided_scatter (memory layout) has no converter; PyTorch decomposes it into a prim
    # that has none: the report names the op the decomposition came from and that nothing
    # more was possible.
    (nxt,) = [o for o in ops if "as_strided" in o.op]
    assert nxt.op == "prims.as_strided_scatter.default"
    assert "decomposition of aten.as_strided_scatter.default" in nxt.reason
    assert "PyTorch has no decomposition for it" in nxt.reason
    assert all(o.node for o in ops)
    assert "aten.view.dtype" in str(info.value) and "as_strided" in str(info.value)


def test_coverage_tables() -> None:
    core = ft.core_aten_ops()
    assert len(core) >= 180
    missing = [k for k in core if k not in CONVERTERS and k not in UNSUPPORTED]
    assert not missing, f"core ATen ops neither converted nor listed as unsupported: {missing}"
    for key in ("aten.conv2d.default", "aten.scaled_dot_product_attention.default",
                "aten.layer_norm.default", "aten.relu_.default"):  # fmt: skip
        assert key in CONVERTERS
    assert set(ft.supported_ops()) >= {"aten.linear.default", "aten.convolution.default"}
    md = ft.coverage_markdown()
    assert "Core ATen" in md and "aten.rand.default" in md


def test_dynamic_reshape_keeps_symbol() -> None:
    class M(nn.Module):
        def forward(self, x):
            b, s, _ = x.shape
            return x.reshape(b, s, 2, 4).transpose(1, 2).reshape(b * 2, s, 4)

    dyn = {"x": {0: Dim("b", min=1, max=8), 1: Dim("s", min=2, max=16)}}
    g = msc.from_torch(M(), (torch.ones(2, 3, 8),), dynamic_shapes=dyn)
    assert_round_trip(g)
    b, s = g.inputs[0].type.shape[:2]
    assert (b.name, s.name) == ("b", "s")
    assert g.outputs[0].type.shape[1:] == (s, 4)
    assert pytree.tree_leaves(g.output_tree) == [0]
