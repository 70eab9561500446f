"""codegen.relax writes the source's module hierarchy: one private Relax function per block type,
called once per layer with that layer's weights (issue 30), from torch.export and from
torch.onnx's dynamo file.

For GPT-2, BERT and a ResNet (tiny configs, random weights; the builds of
test_torch_hierarchy_models):

- the IRModule has one function per block type (``GPT2Block``, ``BertLayer``, ``Bottleneck``)
  and the blocks of one type are calls of it, as many as the source has layers;
- compiled with ``relax.build`` (llvm, CPU) it computes what eager PyTorch computes (float32:
  rtol 1e-4, atol 1e-5);
- read back by msc.from_relax (which reads a call of a module function inline) it is the graph
  of the flat module (``flat=True``), and its TVMScript reads back structurally equal, through
  TVM's parser and through msc's checked one.

The partition itself (msc.ir.blocks) is checked on a handmade graph: contiguity, the values a
block reads and returns, and keys equal exactly for blocks equal up to their weights.
"""

from __future__ import annotations

import numpy as np
import pytest

tvm = pytest.importorskip("tvm", reason="apache-tvm (the tvm extra) is needed for codegen.relax")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers", reason="tiny transformers model configs")

import codegen.relax as cr  # noqa: E402
import msc  # noqa: E402
from msc.frontend.relax.script import parse_script  # noqa: E402
from msc.ir import blocks  # noqa: E402
from msc.ir.dtype import DType  # noqa: E402
from msc.ir.equal import structural_equal  # noqa: E402
from msc.ir.graph import Graph, Provenance  # noqa: E402
from msc.ir.types import TensorType  # noqa: E402
from tests.codegen.test_torch_hierarchy_models import _bert, _gpt2, _graph, _resnet  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5  # float32, the VM's kernels against eager

# name: (build, the function of the repeated block type, how many calls of block functions of
# that type at least, how many of those functions at most). A block no other block equals is
# written inline.
MODELS = {
    "gpt2": (_gpt2, "GPT2Block", 2, 1),
    "bert": (_bert, "BertLayer", 2, 1),
    # 5 Bottlenecks: layer1.1 and layer1.2 are the same computation (one function, two calls);
    # each stage's first (with its downsample) and layer2.1 (other shapes) are each alone.
    "resnet": (_resnet, "Bottleneck", 2, 1),
}
# torch.onnx's export is the slow part (each file over 10 s on a shared 2-core machine).
SLOW = {("gpt2", "onnx"), ("bert", "onnx"), ("resnet", "onnx")}


@pytest.fixture(
    scope="module",
    params=[
        pytest.param((m, s), marks=[pytest.mark.slow] if (m, s) in SLOW else [], id=f"{m}-{s}")
        for m in MODELS
        for s in ("export", "onnx")
    ],
)
def case(request, tmp_path_factory):
    name, source = request.param
    build = MODELS[name][0]
    model, inputs = build()
    g = _graph(model, inputs, source, tmp_path_factory)
    return name, source, model, inputs, g, cr.to_module(g)


def _calls(mod) -> dict[str, int]:
    """How many times each module function is called, over all functions."""
    from tvm import relax

    out: dict[str, int] = {}
    for _, f in mod.functions.items():

        def count(e):
            if isinstance(e, relax.Call) and isinstance(e.op, tvm.ir.GlobalVar):
                out[e.op.name_hint] = out.get(e.op.name_hint, 0) + 1

        relax.analysis.post_order_visit(f, count)
    return out


def _names(mod) -> list[str]:
    return sorted(gv.name_hint for gv in mod.get_global_vars())


def test_one_function_per_block_type_called_per_layer(case):
    name, source, model, inputs, g, mod = case
    _, block, calls, functions = MODELS[name]
    names = _names(mod)
    mine = [n for n in names if n == block or n.startswith(block + "_")]
    assert 1 <= len(mine) <= functions, names
    called = _calls(mod)
    assert sum(called.get(n, 0) for n in mine) >= calls, called
    assert max(called.get(n, 0) for n in mine) >= 2, f"no {block} function is shared: {called}"
    for n in mine:  # private: only main is the VM's
        assert "global_symbol" not in (mod[n].attrs or {}), n
    flat = cr.to_module(g, flat=True)
    assert _names(flat) == ["main"]


def _eager(model, inputs):
    with torch.no_grad():
        out = model(**inputs)
    return out.numpy() if isinstance(out, torch.Tensor) else out[0].numpy()


def _first(x):
    while isinstance(x, dict | list | tuple):
        x = next(iter(x.values())) if isinstance(x, dict) else x[0]
    return x.numpy()


def test_built_module_computes_what_eager_does(case):
    name, source, model, inputs, g, mod = case
    f = cr.build(g, target="llvm")
    assert any(n != "main" for n in _names(f.module))
    got = _first(f(*[inputs[v.name] for v in g.inputs]))
    np.testing.assert_allclose(got, _eager(model, inputs), rtol=RTOL, atol=ATOL)


def test_read_back_is_the_flat_graph(case):
    name, source, model, inputs, g, mod = case
    back = msc.from_relax(mod)
    flat = msc.from_relax(cr.to_module(g, flat=True))
    r = structural_equal(back, flat)
    assert r, r.diff


def test_script_reads_back_structurally_equal(case):
    name, source, model, inputs, g, mod = case
    want = cr.script_module(g)[0]
    text = cr.script_text(want)
    assert "@R.function(private=True)" in text
    tvm.ir.assert_structural_equal(tvm.script.from_source(text), want)
    tvm.ir.assert_structural_equal(parse_script(text, name), want)


@pytest.mark.slow  # two conversions, each checked: ~45 s
def test_convert_checks_the_written_functions(tmp_path):
    """``msc convert --to relax`` writes the functions and its check passes: the written
    TVMScript equals the translation, and the module read back runs like the source."""
    from msc.analysis.convert import convert

    model, inputs = _gpt2()
    ep = torch.export.export(model, (), kwargs=inputs)
    torch.export.save(ep, tmp_path / "gpt2.pt2")
    report = convert(tmp_path / "gpt2.pt2", tmp_path / "out", to="relax")
    assert report.ok and report.structural is None and not report.unread, report
    text = (tmp_path / "out" / cr.SCRIPT_FILE).read_text()
    assert text.count("def GPT2Block(") == 1 and text.count("cls.GPT2Block(") == 2
    flat = convert(tmp_path / "gpt2.pt2", tmp_path / "flat", to="relax", flat=True)
    assert flat.ok and flat.structural is None
    assert "private=True" not in (tmp_path / "flat" / cr.SCRIPT_FILE).read_text()


# ---------------------------------------------------------------------- the partition


def _layers(values: list[float], scalars: list[float]) -> Graph:
    """``x`` through one ``Layer`` per value: (x + c) * w, c a constant node of the layer."""
    g = Graph("layers")
    h = g.add_input("x", TensorType(DType.FLOAT32, (2, 3)))
    for i, (v, c) in enumerate(zip(values, scalars)):
        p = Provenance("torch", "", "", f"layers.{i}", ((f"layers.{i}", "Layer"),))
        w = g.add_weight(f"layers.{i}.w", np.full((3,), v, np.float32), role="parameter")
        k = g.add_node("constant", [], {"value": np.full((3,), c, np.float32)}, provenance=p)
        a = g.add_node("add", [h, k.outputs[0]], provenance=p).outputs[0]
        h = g.add_node("mul", [a, w], provenance=p).outputs[0]
    g.set_outputs([h])
    return g.validate()


def test_partition_boundary_and_keys():
    g = _layers([1.0, 2.0, 3.0], [1.0, 1.0, 5.0])
    part = blocks.partition(g)
    assert [b.path for b in part.top] == ["layers.0", "layers.1", "layers.2"]
    b0, b1, b2 = part.top
    assert [n.op for n in b0.nodes] == ["constant", "add", "mul"]  # its constant with it
    assert b0.inputs == [g.inputs[0], g.weights["layers.0.w"]]
    assert b1.inputs[0] is b0.outputs[0] and b2.outputs == g.outputs
    # Equal up to the weights: the first two; the third adds another constant.
    assert part.same(b0, b1) and not part.same(b1, b2)
    assert blocks.same_computation(b0, b1) and not blocks.same_computation(b0, b2)
    assert b0.name == "Layer"


def test_block_constants_are_passed_by_the_calls():
    """An array of a shared function is its parameter in the script, passed once from main."""
    g = _layers([1.0, 2.0, 3.0], [1.0, 1.0, 1.0])
    mod, _, arrays = cr.script_module(g)
    assert _names(mod) == ["Layer", "main"] and len(arrays) == 1
    text = cr.script_text(mod)
    tvm.ir.assert_structural_equal(tvm.script.from_source(text), mod)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    want = x
    for v in (1.0, 2.0, 3.0):
        want = (want + 1.0) * v
    np.testing.assert_allclose(cr.build(g)(x).numpy(), want, rtol=RTOL, atol=ATOL)


@pytest.mark.slow  # a dynamic export and a compile: ~10 s
def test_symbolic_sizes_are_the_functions_own():
    """A dynamic batch and sequence length: the layer function takes them from its parameters'
    shapes (and knows the sizes torch.export passes as tensors as those dims), its result keeps
    them, and the module runs at other sizes. (msc.from_relax reads neither this module nor
    the flat one back: a split of the run-time shape a reshape computed.)"""
    from torch.export import Dim

    from tests.codegen.test_torch_hierarchy_models import _ids

    model, _ = _gpt2()
    ids = _ids(64, 8, 2).repeat(2, 1)
    dyn = {"input_ids": {0: Dim("batch", max=8), 1: Dim("seq_len", min=2, max=32)}}
    g = msc.from_torch(model, (), example_kwargs={"input_ids": ids}, dynamic_shapes=dyn)
    mod = cr.script_module(g)[0]
    assert _names(mod) == ["GPT2Block", "main"] and _calls(mod)["GPT2Block"] == 2
    block = mod["GPT2Block"]
    dims = lambda ty: [str(d).replace("T.int64(32)", "32") for d in ty.shape.values]  # noqa: E731
    assert dims(block.params[0].ty) == dims(block.ret_ty) == ["batch", "seq_len", "32"]
    tvm.ir.assert_structural_equal(tvm.script.from_source(cr.script_text(mod)), mod)
    other = _ids(64, 11, 4).repeat(3, 1)
    got = cr.build(g)(other)["logits"].numpy()
    with torch.no_grad():
        want = model(other).logits.numpy()
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
