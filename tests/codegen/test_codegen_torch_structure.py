"""Generated PyTorch code follows the source's module hierarchy (issue 30).

For a tiny Llama, a tiny BERT and a small ResNet-style CNN: one class per block type, a ``for``
loop over the layers, short forwards, outputs equal to eager, the source's state_dict keys and
submodule types, and the generated module exports and converts again, to the same shape. Every
structural check is also run on ``flat=True`` output, where it must fail.
"""

from __future__ import annotations

import ast
import re

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import codegen.torch as ct  # noqa: E402
import msc  # noqa: E402
from tests.torch_cases import seeded  # noqa: E402

transformers = pytest.importorskip("transformers", reason="tiny Llama / BERT configs")


class BasicBlock(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + x)


class SmallResNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.layers = nn.ModuleList([BasicBlock(8) for _ in range(6)])
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        for layer in self.layers:
            x = layer(x)
        return self.head(x.mean((2, 3)))


def _llama():
    cfg = transformers.LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        use_cache=False,
    )  # fmt: skip
    ids = torch.randint(0, 128, (1, 8), generator=torch.Generator().manual_seed(0))
    return seeded(transformers.LlamaForCausalLM(cfg)), (ids,)


def _bert():
    cfg = transformers.BertConfig(
        vocab_size=64, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
        intermediate_size=128, max_position_embeddings=64,
    )  # fmt: skip
    ids = torch.randint(0, 64, (1, 8), generator=torch.Generator().manual_seed(1))
    return seeded(transformers.BertModel(cfg)), (ids,)


def _cnn():
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    return seeded(SmallResNet()), (x,)


# model, the block classes the source has (class name, a path of one instance), the list looped
CASES = {
    "llama": (_llama, [("LlamaDecoderLayer", "model.layers.0"), ("LlamaAttention",
              "model.layers.0.self_attn"), ("LlamaMLP", "model.layers.1.mlp")], "layers"),
    "bert": (_bert, [("BertLayer", "encoder.layer.0"), ("BertSelfAttention",
             "encoder.layer.2.attention.self"), ("BertEmbeddings", "embeddings")], "layer"),
    "cnn": (_cnn, [("BasicBlock", "layers.0"), ("BasicBlock", "layers.5")], "layers"),
}  # fmt: skip


def _forwards(src: str) -> dict[str, int]:
    """Class name -> line count of its forward."""
    out = {}
    for node in ast.parse(src).body:
        if isinstance(node, ast.ClassDef):
            for f in node.body:
                if isinstance(f, ast.FunctionDef) and f.name == "forward":
                    out[node.name] = f.end_lineno - f.lineno + 1  # type: ignore[operator]
    return out


def _top_class(src: str) -> str:
    return [n.name for n in ast.parse(src).body if isinstance(n, ast.ClassDef)][-1]


def _structure_problems(src: str, blocks, looped: str) -> list[str]:
    """What keeps ``src`` from following the source's structure (empty: nothing)."""
    problems = []
    classes = set(_forwards(src))
    for cls, _ in blocks:
        if cls not in classes:
            problems.append(f"no class {cls}")
    if not re.search(rf"^\s+for \w+ in self(\.\w+)*\.{looped}:$", src, re.M):
        problems.append(f"no loop over {looped}")
    lines = _forwards(src)
    if lines.get(_top_class(src), 0) > 40:
        problems.append(f"top-level forward of {lines[_top_class(src)]} lines")
    if max(lines.values()) > 80:
        problems.append(f"a forward of {max(lines.values())} lines")
    if any(len(line) > 100 for line in src.splitlines()):
        problems.append("a line over 100 characters")
    return problems


def _leaves(out):
    import torch.utils._pytree as pytree

    return [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    make, blocks, looped = CASES[request.param]
    model, args = make()
    return model, args, msc.from_torch(model, args), blocks, looped


def test_generated_code_follows_the_module_hierarchy(case):
    model, args, g, blocks, looped = case
    src = ct.generate(g)
    assert _structure_problems(src, blocks, looped) == []
    flat = ct.generate(g, flat=True)
    assert len(_structure_problems(flat, blocks, looped)) >= 2  # each check fails on flat code


def test_hierarchical_module_is_the_source_model(case):
    model, args, g, blocks, looped = case
    gen = ct.to_module(g)
    flat = ct.to_module(g, flat=True)
    with torch.no_grad():
        want, got = _leaves(model(*args)), _leaves(gen(*args))
    assert len(want) == len(got)
    for a, b in zip(want, got):
        torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5)
    assert sorted(gen.state_dict()) == sorted(model.state_dict())
    for cls, path in blocks:  # the source's submodule types, where flat code has nn.Module
        assert type(gen.get_submodule(path)).__name__ == cls
        assert type(flat.get_submodule(path)).__name__ != cls


def test_generated_module_exports_and_converts_again(case):
    model, args, g, blocks, looped = case
    gen = ct.to_module(g)
    g2 = msc.from_torch(gen, args)
    again = ct.generate(g2)
    assert _structure_problems(again, blocks, looped) == []
    gen2 = ct.to_module(g2)
    with torch.no_grad():
        for a, b in zip(_leaves(model(*args)), _leaves(gen2(*args))):
            torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5)
    flat2 = ct.generate(msc.from_torch(ct.to_module(g, flat=True), args))
    assert _structure_problems(flat2, blocks, looped) != []


def test_float_literals_are_the_shortest_that_round_trip():
    model, args = _llama()
    src = ct.generate(msc.from_torch(model, args))
    assert "1e-06" in src and "9.99999997" not in src


@pytest.mark.parametrize("dynamo", [False, True], ids=["legacy", "dynamo"])
def test_onnx_scopes_give_the_hierarchy(dynamo, tmp_path):
    # torch.onnx's files carry the module paths (the legacy exporter's scope-style node names,
    # the dynamo exporter's name_scopes and class_hierarchy): the same classes and loop.
    pytest.importorskip("onnx")
    if dynamo:
        pytest.importorskip("onnxscript", reason="torch.onnx's dynamo exporter")
    model, args = _cnn()
    path = tmp_path / "m.onnx"
    torch.onnx.export(model, args, str(path), dynamo=dynamo, input_names=["x"])
    g = msc.from_onnx(str(path))
    src = ct.generate(g)
    # Class names: the source's types where the file has them (dynamo), else from the path.
    blocks = [("BasicBlock" if dynamo else "Layers", "layers.0")]
    assert _structure_problems(src, blocks, "layers") == []
    # The top class: the exported module's own (dynamo's class_hierarchy), not torch.onnx's
    # fixed graph name main_graph.
    top = type(model).__name__ if dynamo else "MainGraph"
    assert g.name == (top if dynamo else "main_graph") and f"class {top}(nn.Module)" in src
    assert _structure_problems(ct.generate(g, flat=True), blocks, "layers") != []
    with torch.no_grad():
        torch.testing.assert_close(ct.to_module(g)(*args), model(*args), atol=1e-5, rtol=1e-5)


def test_convert_flat_flag(tmp_path):
    from msc.cli import main

    model, args = _cnn()
    pt2 = tmp_path / "cnn.pt2"
    torch.export.save(torch.export.export(model, args), str(pt2))
    for flag, want in (([], True), (["--flat"], False)):
        out = tmp_path / ("flat" if flag else "hier")
        assert main(["convert", str(pt2), "-o", str(out), "--no-check", "-q", *flag]) == 0
        src = (out / "model.py").read_text()
        assert ("class BasicBlock(nn.Module)" in src) is want
        assert bool(re.search(r"for \w+ in self\.layers:", src)) is want


class Pools(nn.Module):
    """Every pool module: the generated code has each as a module, as the source does."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 8, 3, padding=1), nn.AvgPool2d(3, 1, 1, count_include_pad=False),
        )  # fmt: skip
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.maxpool1d = nn.MaxPool1d(2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.maxpool_out = nn.AdaptiveMaxPool2d((2, 1))

    def forward(self, x):
        y = self.maxpool(self.features(x))
        z = self.maxpool1d(y.flatten(2))
        return self.avgpool(y).flatten(1), self.maxpool_out(y), z


def test_pools_are_modules_and_a_sequential_is_called_whole():
    # A pool the source ran as a module is that module (its rule), so the nn.Sequential it
    # is an item of stays one, called whole, also where the model has no block class at all.
    from msc.examples import TinyCNN

    for model, x, want in (
        (TinyCNN(), torch.randn(2, 3, 16, 16), ["nn.MaxPool2d(2),", "nn.AdaptiveAvgPool2d(1)"]),
        (Pools(), torch.randn(1, 3, 16, 16), [
            "nn.MaxPool2d(2),", "nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)",
            "self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)",
            "self.maxpool1d = nn.MaxPool1d(2)", "self.avgpool = nn.AdaptiveAvgPool2d(1)",
            "self.maxpool_out = nn.AdaptiveMaxPool2d((2, 1))",
        ]),
    ):  # fmt: skip
        model = seeded(model).eval()
        g = msc.from_torch(model, (x,))
        src = ct.generate(g)
        for line in want:
            assert line in src, line
        assert re.search(r"= self\.features\(x\)$", src, re.M), src
        assert "F.max_pool" not in src and "F.avg_pool" not in src and "adaptive" not in src
        gen = ct.to_module(g)
        assert list(gen.state_dict()) == list(model.state_dict())
        with torch.no_grad():
            for a, b in zip(_leaves(model(x)), _leaves(gen(x))):
                torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5)


class Indices(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(2, return_indices=True)
        self.unused = nn.AdaptiveMaxPool2d(1)

    def forward(self, x):
        y, i = self.pool(x)
        return self.unused(y).flatten(1), i


def test_pool_indices_only_where_read():
    # aten's adaptive max pool always returns its indices; the code asks for them only where
    # something reads them, as the source's module did, and the re-import is still equal.
    model, x = Indices().eval(), torch.randn(1, 2, 8, 8)
    g = msc.from_torch(model, (x,))
    src = ct.generate(g)
    assert "self.pool = nn.MaxPool2d(2, return_indices=True)" in src, src
    assert "self.unused = nn.AdaptiveMaxPool2d(1)" in src, src
    assert re.search(r"^ +\w+, \w+ = self\.pool\(x\)$", src, re.M), src
    assert re.search(r"^ +\w+ = self\.unused\(", src, re.M), src
    gen = ct.to_module(g)
    with torch.no_grad():
        for a, b in zip(_leaves(model(x)), _leaves(gen(x))):
            torch.testing.assert_close(b, a, atol=0, rtol=0)
    again = msc.from_torch(gen, (x,))
    assert msc.diff(g, again).equivalent


def _forward_src(src: str, cls: str) -> str:
    node = next(n for n in ast.parse(src).body if isinstance(n, ast.ClassDef) and n.name == cls)
    return ast.unparse(next(f for f in node.body if getattr(f, "name", "") == "forward"))


def test_values_are_named_by_their_role():
    # What a person names them: a model output after its field, a block's result after the
    # block (attention_output), a layer's after the layer in each class (dense, not dense_6),
    # the value a loop carries after the layers' parameter (hidden_states), never the name of
    # the last value computed inside a call (layernorm_4) or a counter of the module's name.
    model, args = _bert()
    g = msc.from_torch(model, args)
    src = ct.generate(g)
    top = _forward_src(src, "BertModel")
    assert "embeddings_output = self.embeddings(input_ids)" in top, top
    # No mask is handed down: BERT's, built from no input, hides nothing (constant_masks).
    assert "last_hidden_state = self.encoder(embeddings_output)" in top, top
    assert "pooler_output = self.pooler(last_hidden_state)" in top, top
    assert "return {'last_hidden_state': last_hidden_state, 'pooler_output': pooler_output}" in top
    encoder = _forward_src(src, "BertEncoder")
    # (its one argument is x, as ResNet's stages read: the loop carries hidden_states)
    assert encoder.startswith("def forward(self, x):\n    hidden_states = x\n"), encoder
    assert "    hidden_states = layer(hidden_states)" in encoder, encoder
    layer = _forward_src(src, "BertLayer")
    assert "attention_output = self.attention(x)" in layer, layer
    assert "intermediate_output = self.intermediate(attention_output)" in layer, layer
    assert "output = self.output(intermediate_output, attention_output)" in layer, layer
    # A library module's output read only by the next one is written inside it, as
    # torchvision writes relu(bn(conv(x))): one statement, named after the outer module.
    assert "activation = self.activation(self.dense(select))" in _forward_src(src, "BertPooler")
    for cls in re.findall(r"^class (\w+)", src, re.M):  # a counter only where the name is taken
        fwd = _forward_src(src, cls)
        for name, attr in re.findall(r"\b((\w+)_\d+) = self\.\w+\(", fwd):
            if re.search(rf"= self\.{attr}\(", fwd, re.I):
                assert re.search(rf"\b{attr.lower()}\b(?! =)", fwd), (cls, name, fwd)
    gen = ct.to_module(g)
    with torch.no_grad():
        for a, b in zip(_leaves(model(*args)), _leaves(gen(*args))):
            torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5)

    model, args = _llama()
    src = ct.generate(msc.from_torch(model, args))
    top = _forward_src(src, "LlamaForCausalLM")
    assert "model_output = self.model(input_ids)" in top and "logits = self.lm_head(" in top, top
    inner = _forward_src(src, "LlamaModel")
    loop = r"for layer in self\.layers:\n\s+hidden_states = layer\(hidden_states, "
    assert re.search(loop, inner), inner
    assert "mlp_output = self.mlp(" in _forward_src(src, "LlamaDecoderLayer")
    flat = ct.generate(msc.from_torch(model, args), flat=True)  # names as the graph has them
    assert "hidden_states = layer(" not in flat and "mlp_output" not in flat


class _Keys(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c, self.d = (nn.Linear(4, 4) for _ in range(4))

    def forward(self, x):
        return {
            "class": self.a(x),
            "\u00fcber": self.b(x),
            "__init__": self.c(x),
            "hidden": self.d(x),
        }


def test_output_keys_name_values_only_when_plain():
    # A model's output key names its value only when it is a plain ASCII identifier nothing
    # else uses (not a keyword, not private, not non-ASCII, which Python would normalize).
    model, x = _Keys(), torch.randn(2, 4)
    g = msc.from_torch(model, (x,))
    src = ct.generate(g)
    fwd = _forward_src(src, "Keys")
    assert re.search(r"^    hidden = self\.d\(x\)$", fwd, re.M), fwd
    for plain in ("a", "b", "c"):
        assert re.search(rf"^    {plain} = self\.{plain}\(x\)$", fwd, re.M), fwd
    with torch.no_grad():
        got, want = ct.to_module(g)(x), model(x)
    for k in want:
        torch.testing.assert_close(got[k], want[k])


class _Gelu(nn.Module):  # transformers' NewGELUActivation, as GPT-2 writes it
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * torch.pow(x, 3.0))))


class _Mlp(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.up = nn.Linear(d, 4 * d)
        self.act = _Gelu()
        self.down = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.down(self.act(self.up(x)))


class _Bottleneck(nn.Module):  # transformers' ResNet layer: a shortcut only where sizes change
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.shortcut = nn.Linear(cin, cout) if cin != cout else None
        self.conv = nn.Linear(cin, cout)
        self.norm = nn.LayerNorm(cout)
        self.act = nn.ReLU()
        self.mlp = _Mlp(cout)

    def forward(self, x):
        residual = x if self.shortcut is None else self.shortcut(x)
        h = self.act(self.norm(self.conv(x)))
        return self.mlp(h) + residual


class _Stages(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([_Bottleneck(16, 32), _Bottleneck(32, 32), _Bottleneck(32, 32)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class _LiveActivations(torch.utils._python_dispatch.TorchDispatchMode):
    """The most tensors of ``nbytes`` or more alive at once (weak references to every op's
    output), checked before each op runs."""

    def __init__(self, nbytes: int) -> None:
        super().__init__()
        self.nbytes, self.refs, self.most = nbytes, [], 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        import weakref

        self.refs = [r for r in self.refs if r() is not None]
        self.most = max(self.most, len(self.refs))
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, tuple | list) else [out]:
            if isinstance(t, torch.Tensor) and t.nbytes >= self.nbytes and t._base is None:
                self.refs.append(weakref.ref(t))
        return out


def test_short_forwards_free_activations_as_the_source_does():
    # A block's forward keeps its locals to its return (no del in a short forward), so a chain
    # written a statement per op holds every activation of the chain: GPT-2's tanh GELU held
    # nine per layer, and the heap glibc gave back after each call page-faulted in again on
    # the next (generated 1.11x eager in bench/run.py). An elementwise chain is one expression
    # (Python frees its temporaries at once), a library module's output read only by the next
    # one is written inside it, and a ModuleList applied in a chain is a loop even when its
    # items are of several classes (a ResNet stage's first layer has the shortcut).
    model, x = seeded(_Stages()).eval(), torch.randn(512, 16)
    g = msc.from_torch(model, (x,))
    src = ct.generate(g)
    stages = _forward_src(src, _top_class(src))
    assert "for layer in self.layers:" in stages and "self.layers[" not in stages, stages
    gelu = [ln for ln in src.splitlines() if "torch.tanh(" in ln]
    assert gelu and all("** 3" in ln for ln in gelu), gelu  # the chain in one statement
    assert any("self.act(self.norm(self.conv(x)))" in ln for ln in src.splitlines()), src
    gen = ct.to_module(g)
    assert list(gen.state_dict()) == list(model.state_dict())
    big = 512 * 4 * 32 * 4  # one of the MLP's hidden activations (512 KiB)
    live = {}
    with torch.inference_mode():
        for name, m in (("eager", model), ("generated", gen), ("flat", ct.to_module(g, flat=True))):
            with _LiveActivations(big) as mode:
                out = m(x)
            live[name] = mode.most
            torch.testing.assert_close(out, model(x), rtol=0, atol=0)
    assert live["generated"] <= live["eager"], live  # was 9 against eager's 3


class _Rolled(nn.Module):
    def __init__(self, shift: int) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.shift = shift

    def forward(self, x):
        return torch.roll(self.lin(x) * 2, self.shift, 1)


class _TwoRolls(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = _Rolled(1)
        self.b = _Rolled(3)
        self.c = _Rolled(3)

    def forward(self, x):
        return self.c(self.b(self.a(x)))


def test_blocks_apart_when_their_forwards_differ_in_a_number_that_is_no_size():
    # Blocks whose __init__s are equal and whose forwards differ in an integer (the shift of
    # a roll) are two classes: a forward's number becomes the instance's attribute only where
    # it is a size that the __init__s differ in too.
    model, x = seeded(_TwoRolls()), torch.randn(2, 5, 8)
    g = msc.from_torch(model, (x,))
    src = ct.generate(g)
    classes = re.findall(r"^class (\w+)", src, re.M)
    assert len([c for c in classes if c.startswith("Rolled")]) == 2, src
    assert "self.shift" not in src
    with torch.no_grad():
        torch.testing.assert_close(ct.to_module(g)(x), model(x))


class _Residual(nn.Module):
    """A residual block as transformers' ResNet writes it (``h += residual``), reading back
    as a plain add."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(4, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(4)
        self.act = nn.ReLU()

    def forward(self, x):
        h = torch.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        h += x
        return self.act(h)


class _NotInPlace(nn.Module):
    """Adds whose left operand must not be overwritten: an input, a weight, a view, a value
    read again later, a parameter of the block's forward."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 1)
        self.w = nn.Parameter(torch.randn(4, 1, 1))
        self.inner = _AddOne()

    def forward(self, x):
        a = x + self.conv(x)  # an input
        b = self.w + a  # a weight
        c = self.conv(b)
        d = c[:, :2] - 1.0  # a view
        e = self.conv(x)
        f = e + 1.0  # read again below
        g = self.inner(self.conv(f))  # a parameter of the inner forward
        return torch.relu(x), d, f * e, g


class _AddOne(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(4, 1, 1))

    def forward(self, y):
        return (y + 1.0) * self.scale


def test_in_place_only_on_fresh_intermediates():
    # The residual add is ``h += x`` again (a new tensor per block otherwise), the relu of a
    # BatchNorm's result ``torch.relu_``; the add's result is not overwritten a second time
    # (the activation after it is not in place). Outputs, keys and the re-export as the
    # source's, flat and not.
    model, x = seeded(_Residual()), torch.randn(1, 4, 6, 6)
    g = msc.from_torch(model, (x,))
    for flat in (False, True):
        src = ct.generate(g, flat=flat)
        assert len(re.findall(r"^\s+\w+ \+= x$", src, re.M)) == 1, src
        assert src.count("torch.relu_(") == 1, src
        assert "inplace=True" not in src and "self.act(" in src, src
        gen = ct.to_module(g, flat=flat)
        with torch.no_grad():
            torch.testing.assert_close(gen(x), model(x))
        assert list(gen.state_dict()) == list(model.state_dict())
        again = ct.constants_as_nodes(msc.from_torch(gen, (x,)), g)
        msc.assert_structural_equal(ct.as_generated(g), again)


def test_no_in_place_where_the_left_value_lives_on():
    # Not an input, not a weight, not a view, not a value read after the add, not a
    # parameter of the forward the add is in: each add allocates its result.
    model, x = seeded(_NotInPlace()), torch.randn(1, 4, 3, 3)
    g = msc.from_torch(model, (x,))
    for flat in (False, True):
        src = ct.generate(g, flat=flat)
        classes = src[src.index("\nclass ") : src.index("\ndef load(")]
        assert "relu_" not in classes and "inplace" not in classes, classes
        in_place = re.findall(r"^\s+(\w+ [-+*/]= .*)$", classes, re.M)
        # Flat code has one forward: there the inner block's add is on a fresh conv output.
        assert len(in_place) == (1 if flat else 0), in_place
        if flat:
            assert re.fullmatch(r"conv_\d+ \+= 1", in_place[0]), in_place
        gen, before = ct.to_module(g, flat=flat), x.clone()
        with torch.no_grad():
            for got, want in zip(gen(x), model(before)):
                torch.testing.assert_close(got, want)
        assert torch.equal(x, before)  # the input is as it was


def _ConvBN(cin: int, cout: int, groups: int = 1) -> nn.Sequential:  # noqa: N802
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
        nn.Hardswish(),
    )


class _SE(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.fc1 = nn.Conv2d(c, c // 2, 1)
        self.fc2 = nn.Conv2d(c // 2, c, 1)

    def forward(self, x):
        return x * torch.sigmoid(self.fc2(torch.relu(self.fc1(x.mean((2, 3), keepdim=True)))))


class _Inverted(nn.Module):
    """torchvision's InvertedResidual shape: one nn.Sequential of nn.Sequentials and a
    block, run as ``self.block(x)``."""

    def __init__(self, c: int) -> None:
        super().__init__()
        project = nn.Sequential(nn.Conv2d(2 * c, c, 1), nn.BatchNorm2d(c))
        self.block = nn.Sequential(
            _ConvBN(c, 2 * c), _ConvBN(2 * c, 2 * c, 2 * c), _SE(2 * c), project
        )

    def forward(self, x):
        return x + self.block(x)


class _Stem(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(_ConvBN(3, 8), _Inverted(8), _Inverted(8))

    def forward(self, x):
        return self.features(x).mean((2, 3))


def test_nested_sequentials_are_called_whole():
    """A Sequential whose items are Sequentials (and blocks) applied in a chain is one call,
    as the source wrote it (``self.block(x)``), not ``self.block[0][0](x)`` per leaf."""
    model = seeded(_Stem()).eval()
    x = torch.randn(1, 3, 8, 8)
    g = msc.from_torch(model, (x,))
    src = ct.generate(g)
    assert "][" not in src, src  # no item of an item
    assert re.search(r"= self\.block\(x\)$", src, re.M), src
    assert re.search(r"= self\.features\(x\)$", src, re.M), src
    gen = ct.to_module(g)
    assert list(gen.state_dict()) == list(model.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(gen(x), model(x), atol=1e-5, rtol=1e-5)
