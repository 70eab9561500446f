"""codegen.keras writes the source's module hierarchy (issues 30 and 32): one
``keras.layers.Layer`` subclass per repeated block type, named after the source type, one
instance per block named by its module path, a run of them a list and a loop. A tiny BERT
(transformers config, random weights) and a ResNet-style CNN from PyTorch run by Keras on its
torch backend against eager PyTorch (atol 1e-5), on JAX where it is installed, and read back
by msc.from_keras; ``flat=True`` writes no class."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
torch = pytest.importorskip("torch")
pytest.importorskip("keras", reason="the keras extra is not installed")

import codegen.keras  # noqa: E402
import msc  # noqa: E402
from tests.keras_cases import keras_run  # noqa: E402
from tests.tflite_cases import run_torch  # noqa: E402

nn = torch.nn
ATOL = 1e-5
MSC_CLASSES = {"SourceWeight", "Sized"}  # codegen.keras' own layers, not blocks
ROOT = Path(__file__).resolve().parents[2]


class BasicBlock(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(y)))


class ResNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.layer1 = nn.Sequential(*[BasicBlock(8) for _ in range(3)])
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = self.layer1(torch.relu(self.stem(x)))
        return self.fc(x.mean((2, 3)))


def _resnet():
    torch.manual_seed(0)
    m = ResNet().eval()
    for mod in m.modules():  # running statistics that are not the identity
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.5, 0.5)
            mod.running_var.uniform_(0.5, 1.5)
    return m, {"x": torch.randn(2, 3, 16, 16)}, "BasicBlock", "layer1", 3


def _bert():
    transformers = pytest.importorskip("transformers", reason="a tiny BERT config")
    cfg = transformers.BertConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
        intermediate_size=48, max_position_embeddings=32, attn_implementation="eager",
    )  # fmt: skip
    torch.manual_seed(0)
    ids = torch.randint(0, 64, (1, 8), generator=torch.Generator().manual_seed(1))
    return transformers.BertModel(cfg).eval(), {"input_ids": ids}, "BertLayer", "encoder.layer", 3


CASES = {"resnet": _resnet, "bert": _bert}


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    model, inputs, cls, listed, n = CASES[request.param]()
    g = msc.from_torch(model, (), example_kwargs=inputs)
    with torch.no_grad():
        ref = model(**inputs)
    ref = [ref] if torch.is_tensor(ref) else [r for r in ref.values() if torch.is_tensor(r)]
    arrays = [v.numpy() for v in inputs.values()]
    return g, arrays, [r.numpy() for r in ref], cls, listed, n


def _classes(src: str) -> dict[str, ast.ClassDef]:
    return {
        c.name: c for c in ast.parse(src).body
        if isinstance(c, ast.ClassDef) and c.name not in MSC_CLASSES
    }  # fmt: skip


def _build(src: str) -> ast.FunctionDef:
    return next(f for f in ast.parse(src).body if isinstance(f, ast.FunctionDef) and
                f.name == "build")  # fmt: skip


def _agree(got, ref) -> None:
    assert len(got) == len(ref)
    for a, r in zip(got, ref):
        np.testing.assert_allclose(a, r, atol=ATOL, rtol=ATOL)


def test_one_layer_class_per_block_type(case):
    g, _, _, cls, listed, n = case
    src = codegen.keras.generate(g)
    assert all(len(line) < 100 for line in src.splitlines())
    classes = _classes(src)
    assert list(classes) == [cls]
    body = classes[cls]
    assert ast.unparse(body.bases[0]) == "keras.layers.Layer"
    methods = {f.name for f in body.body if isinstance(f, ast.FunctionDef)}
    assert methods == {"__init__", "call"}
    # sublayers made in __init__ under the source's names, the block's ops in call
    init = next(f for f in body.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
    made = [t.attr for st in init.body if isinstance(st, ast.Assign)
            for t in st.targets if isinstance(t, ast.Attribute)]  # fmt: skip
    want = {
        "BasicBlock": {"conv1", "bn1", "conv2", "bn2"},
        "BertLayer": {"attention_self_query", "intermediate_dense", "output_dense"},
    }[cls]
    assert want <= set(made)
    # instantiated once per block, named by its module path, called in a loop over the list
    build = _build(src)
    loops = [s for s in ast.walk(build) if isinstance(s, ast.For)]
    assert len(loops) == 1
    listed_name = listed.replace(".", "_")
    assert f'{cls}(name=f"{listed_name}_{{i}}") for i in range({n})' in src
    model = codegen.keras.to_model(g)
    blocks = [layer for layer in model.layers if type(layer).__name__ == cls]
    assert [b.name for b in blocks] == [f"{listed_name}_{i}" for i in range(n)]
    # each instance holds its own block's weights (the source's differ block to block)
    first = [np.asarray(w) for w in blocks[0].get_weights()]
    assert first and any(
        not np.array_equal(a, np.asarray(b)) for a, b in zip(first, blocks[1].get_weights())
    )


def test_blocks_agree_with_eager_torch(case, tmp_path):
    g, arrays, ref, cls, *_ = case
    _agree(keras_run(codegen.keras.to_model(g), arrays), ref)
    # the saved directory's load() sets the same weights from model.weights.npz
    out = codegen.keras.save(g, tmp_path / "out")
    from msc.analysis.pysource import load_keras_source

    loaded = load_keras_source(out / "model.py", lambda s: None, str(out))
    _agree(keras_run(loaded.native, arrays), ref)
    # read back by msc.from_keras (each block's call read as Keras layers and ops)
    back = loaded.graph
    assert not any(n.provenance.op == cls for n in back.nodes)  # not traced whole
    _agree(run_torch(back, arrays), ref)


def test_flat_writes_no_class(case):
    g, arrays, ref, cls, *_ = case
    src = codegen.keras.generate(g, flat=True)
    assert _classes(src) == {}
    assert not [s for s in ast.walk(_build(src)) if isinstance(s, ast.For)]
    assert f"class {cls}" in codegen.keras.generate(g)
    _agree(keras_run(codegen.keras.to_model(g, flat=True), arrays), ref)


def test_blocks_run_on_jax(case, tmp_path):
    pytest.importorskip("jax", reason="the JAX backend is not installed")
    g, arrays, ref, *_ = case
    out = codegen.keras.save(g, tmp_path / "out")
    np.savez(tmp_path / "inputs.npz", *arrays)
    script = (
        "import sys, numpy as np; sys.path.insert(0, sys.argv[1]); import model; "
        "m = model.load(); ins = np.load(sys.argv[2]); xs = [ins[k] for k in ins.files]; "
        "out = m(xs if len(xs) > 1 else xs[0], training=False); "
        "out = out if isinstance(out, (list, tuple)) else [out]; "
        "np.savez(sys.argv[3], *[np.asarray(o) for o in out])"
    )
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    env.pop("PYTHONPATH", None)  # the generated code imports keras and numpy only
    res = subprocess.run(
        [sys.executable, "-c", script, str(out), str(tmp_path / "inputs.npz"),
         str(tmp_path / "got.npz")],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    with np.load(tmp_path / "got.npz") as got:
        _agree([got[k] for k in got.files], ref)


def test_float32_literals_print_as_the_shortest_decimal():
    """A small float32 constant is written as the shortest decimal that rounds back to it
    (``1e-06``, not ``9.999999974752427e-07``; issue 30's literals rule), and the model
    computes the same as eager."""

    class Eps(nn.Module):
        def forward(self, x):
            return x / (x.abs() + torch.tensor([1e-6, 1 / 3], dtype=torch.float32))

    x = torch.randn(3, 2)
    g = msc.from_torch(Eps(), (x,))
    src = codegen.keras.generate(g)
    assert "1e-06" in src and "0.33333334" in src, src
    assert "9.99999" not in src and "0.3333333432674408" not in src
    got = keras_run(codegen.keras.to_model(g), [x.numpy()])
    np.testing.assert_allclose(got[0], Eps()(x).numpy(), atol=ATOL, rtol=0)
