"""Built-in examples: small PyTorch models, a hand-built graph, and the ``msc demo`` job.

``TinyCNN`` and ``TinyTransformer`` are ordinary ``nn.Module`` classes (usable as
``msc convert msc/examples.py:TinyCNN --input-shape x=1,3,32,32``); ``small_cnn_graph`` builds
an msc graph by hand, without any framework. ``demo`` runs the main job end to end:
PyTorch -> msc -> ONNX -> msc -> PyTorch source, verifying each output numerically against the
original module and inspecting the model.

# NOTE: model weights are deterministic (``torch.manual_seed`` inside the constructors' callers
# in ``example_module``), so the demo prints the same numbers every run.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TextIO

import numpy as np
import torch
from torch import nn

from msc.ir import DType, Graph, Provenance, SymDim, TensorType

__all__ = ["TinyCNN", "TinyTransformer", "example_module", "small_cnn_graph", "demo"]


class TinyCNN(nn.Module):
    """Two conv blocks (conv, batch norm, ReLU, max pool), global average pool, classifier."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(32, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


class Block(nn.Module):
    """Pre-norm causal self-attention and a GELU MLP, each added back to its input."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


class TinyTransformer(nn.Module):
    """A small decoder: token embedding, ``layers`` Blocks, a final norm and a linear head."""

    def __init__(self, vocab: int = 100, dim: int = 32, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList([Block(dim, heads) for _ in range(layers)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


def example_module(name: str = "cnn", seed: int = 0) -> tuple[nn.Module, tuple, dict]:
    """A built-in model in eval mode, example inputs, and dynamic shapes for torch.export."""
    torch.manual_seed(seed)
    if name == "cnn":
        m = TinyCNN()
        # Non-trivial batch-norm statistics, so the conversion has something to get wrong.
        for bn in (m.features[1], m.features[5]):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
        batch = torch.export.Dim("batch", min=1, max=64)
        return m.eval(), (torch.randn(2, 3, 32, 32),), {"x": {0: batch}}
    if name == "transformer":
        m = TinyTransformer()
        batch = torch.export.Dim("batch", min=1, max=64)
        return m.eval(), (torch.randint(0, 100, (2, 16)),), {"ids": {0: batch}}
    raise ValueError(f"unknown example {name!r} (cnn, transformer)")


def onnx_example(seed: int = 0, opset: int = 17):
    """An ONNX model as another exporter writes one (``/stem/conv/Conv`` node names, a
    dynamic ``N`` batch): Conv -> Relu -> MaxPool -> Conv -> Relu -> GlobalAveragePool ->
    Flatten -> Gemm -> Softmax. Returns an ``onnx.ModelProto``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)

    def init(name: str, *shape: int) -> onnx.TensorProto:
        a = (rng.standard_normal(shape) * 0.3).astype(np.float32)
        return numpy_helper.from_array(a, name)

    inits = [
        init("stem.conv.weight", 8, 3, 3, 3),
        init("stem.conv.bias", 8),
        init("body.conv.weight", 16, 8, 3, 3),
        init("body.conv.bias", 16),
        init("head.fc.weight", 5, 16),
        init("head.fc.bias", 5),
    ]
    n = helper.make_node
    nodes = [
        n(
            "Conv",
            ["image", "stem.conv.weight", "stem.conv.bias"],
            ["/stem/conv/Conv_output_0"],
            name="/stem/conv/Conv",
            pads=[1, 1, 1, 1],
            kernel_shape=[3, 3],
        ),
        n("Relu", ["/stem/conv/Conv_output_0"], ["/stem/act/Relu_output_0"], name="/stem/act/Relu"),
        n(
            "MaxPool",
            ["/stem/act/Relu_output_0"],
            ["/stem/pool/MaxPool_output_0"],
            name="/stem/pool/MaxPool",
            kernel_shape=[2, 2],
            strides=[2, 2],
        ),
        n(
            "Conv",
            ["/stem/pool/MaxPool_output_0", "body.conv.weight", "body.conv.bias"],
            ["/body/conv/Conv_output_0"],
            name="/body/conv/Conv",
            pads=[1, 1, 1, 1],
            kernel_shape=[3, 3],
        ),
        n("Relu", ["/body/conv/Conv_output_0"], ["/body/act/Relu_output_0"], name="/body/act/Relu"),
        n(
            "GlobalAveragePool",
            ["/body/act/Relu_output_0"],
            ["/head/pool/GAP_output_0"],
            name="/head/pool/GlobalAveragePool",
        ),
        n(
            "Flatten",
            ["/head/pool/GAP_output_0"],
            ["/head/Flatten_output_0"],
            name="/head/Flatten",
            axis=1,
        ),
        n(
            "Gemm",
            ["/head/Flatten_output_0", "head.fc.weight", "head.fc.bias"],
            ["/head/fc/Gemm_output_0"],
            name="/head/fc/Gemm",
            transB=1,
        ),
        n("Softmax", ["/head/fc/Gemm_output_0"], ["probs"], name="/head/Softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "foreign_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, 16, 16])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 5])],
        initializer=inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="elsewhere"
    )
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def small_cnn_graph(seed: int = 0) -> Graph:
    """conv -> batch_norm -> relu -> global mean -> linear, with a symbolic batch dim and
    PyTorch-style dotted weight names, built without any framework."""
    rng = np.random.default_rng(seed)
    f32 = DType.FLOAT32
    g = Graph("small_cnn")
    x = g.add_input("x", TensorType(f32, (SymDim("batch", 1, 64), 3, 16, 16)))

    def w(name: str, *shape: int) -> object:
        return g.add_weight(name, rng.standard_normal(shape).astype(np.float32))

    conv = g.add_node(
        "conv",
        [x, w("features.0.weight", 8, 3, 3, 3), w("features.0.bias", 8)],
        {"stride": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1], "groups": 1},
        name="features.0",
        provenance=Provenance("torch", "aten.conv2d.default", "conv2d", "features.0"),
    ).output
    bn = g.add_node(
        "batch_norm",
        [
            conv,
            w("features.1.weight", 8),
            w("features.1.bias", 8),
            w("features.1.running_mean", 8),
            g.add_weight("features.1.running_var", rng.uniform(0.5, 2, 8).astype(np.float32)),
        ],
        {"eps": 1e-5},
        name="features.1",
    ).output
    act = g.op("relu", bn)
    pooled = g.op("reduce_mean", act, axes=[2, 3], keepdims=False)
    logits = g.add_node(
        "linear",
        [pooled, w("classifier.weight", 10, 8), w("classifier.bias", 10)],
        name="classifier",
        output_names=["logits"],
    ).output
    g.set_outputs([logits])
    g.meta["producer"] = "msc.examples"
    return g.validate()


def _graph_demo(out: TextIO) -> int:
    """The framework-free demo: build a graph, print it, save and reload it unchanged."""
    import msc

    g = small_cnn_graph()
    text = msc.to_text(g)
    out.write(text)
    with tempfile.TemporaryDirectory() as d:
        msc.save(g, d + "/small_cnn")
        again = msc.load(d + "/small_cnn")
    r = msc.structural_equal(g, again, names=True)
    same_text = msc.to_text(again) == text
    out.write(
        f"\nsaved and reloaded: structurally equal = {bool(r)}, "
        f"text identical = {same_text}, hash = {msc.structural_hash(g)}\n"
    )
    return 0 if r and same_text else 1


def _have_pipeline() -> str | None:
    """None when the frontends and codegens the full demo needs import; else what is missing."""
    for mod, attr in (
        ("msc.frontend.torch", "from_torch"),
        ("msc.frontend.onnx", "from_onnx"),
        ("codegen.torch", "save"),
        ("codegen.onnx", "save"),
    ):
        try:
            m = __import__(mod, fromlist=[attr])
            getattr(m, attr)
        except (ImportError, AttributeError) as e:
            return f"{mod}.{attr} ({e})"
    return None


def demo(out: TextIO, keep: str | None = None, model: str = "cnn") -> int:
    """The main job on a built-in model: PyTorch -> msc -> ONNX -> msc -> PyTorch source, each
    output verified against the original module, then inspected. Returns 0 when every check
    passes. ``keep``: a directory to keep the files in (default: a temporary one)."""
    missing = _have_pipeline()
    if missing is not None:
        out.write(f"(the frontends/codegens are not all available: {missing};\n")
        out.write(" running the graph-only demo)\n\n")
        return _graph_demo(out)
    if keep is None:
        with tempfile.TemporaryDirectory() as d:
            return _pipeline(out, Path(d), model)
    Path(keep).mkdir(parents=True, exist_ok=True)
    return _pipeline(out, Path(keep), model)


def _pipeline(out: TextIO, work: Path, model: str) -> int:
    import codegen.onnx
    import codegen.torch
    import msc
    from msc.analysis.inspect import format_report, inspect_graph
    from msc.analysis.model import Model, _import_file, load_model
    from msc.analysis.verify import verify_models

    def say(s: str = "") -> None:
        out.write(s + "\n")

    def verdict(r) -> str:
        errs = ", ".join(f"max abs err {o.max_abs:.2g}" for o in r.outputs)
        return ("verified: outputs match" if r.ok else "MISMATCH") + f" ({errs})"

    module, args, dynamic = example_module(model)
    name = type(module).__name__
    ok = True
    say(f"msc demo: {name} (msc.examples.{name}) through every path, in {work}")
    say()
    g = msc.from_torch(module, args, dynamic_shapes=dynamic)
    msc.save(g, work / "graph")
    inputs = ", ".join(f"{v.name}: {v.type}" for v in g.inputs)
    say(f"1. PyTorch -> msc      {len(g.nodes)} nodes, {len(g.weights)} weights; input {inputs}")
    say(f"                       saved to {work / 'graph'}")
    src = Model(g, "torch-module", name, module)

    onnx_path = work / f"{model}.onnx"
    codegen.onnx.save(g, onnx_path)
    r1 = verify_models(src, load_model(onnx_path), seed=0)
    ok &= r1.ok
    say(f"2. msc -> ONNX         {onnx_path.name} ({onnx_path.stat().st_size:,} bytes)")
    say(f"                       onnxruntime vs PyTorch: {verdict(r1)}")

    g2 = msc.from_onnx(onnx_path)
    torch_dir = work / f"{model}_torch"
    codegen.torch.save(g2, torch_dir)
    lines = (torch_dir / "model.py").read_text().count("\n")
    load = _import_file(torch_dir / "model.py", "load")  # the generated file's own loader
    generated = Model(g2, "torch-source", str(torch_dir), load())
    r2 = verify_models(src, generated, seed=1)
    ok &= r2.ok
    say(
        f"3. ONNX -> msc -> PyTorch source   {torch_dir.name}/model.py ({lines} lines) + "
        "model.safetensors"
    )
    say(f"                       generated module vs original: {verdict(r2)}")
    eq = msc.structural_equal(g, g2)
    d = msc.diff(g, g2)
    say(
        "4. diff original vs ONNX round trip: "
        + (
            "structurally equal"
            if eq
            else f"{len(d.matched)} nodes matched, "
            f"{len(d.changed)} changed, {len(d.added)} added, {len(d.removed)} removed"
        )
    )
    for c in d.changed[:4]:
        say(f"     changed {c.a}: " + "; ".join(c.changes))
    if len(d.changed) > 4:
        say(f"     ... and {len(d.changed) - 4} more (msc diff lists them)")
    say()
    say(format_report(inspect_graph(g, source="from PyTorch"), top=5).rstrip())
    say()
    say("result: " + ("every conversion verified" if ok else "a conversion did NOT verify"))
    return 0 if ok else 1
