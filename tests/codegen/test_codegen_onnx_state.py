"""What an ONNX model written by codegen.onnx holds of a PyTorch model's tensors: each tensor
once (a tied weight is one initializer), only the tensors some node reads (state such as a
BatchNorm's ``num_batches_tracked`` stays in the graph, for the PyTorch output), and
onnxruntime loads it without a warning."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime runs the generated models")
torch = pytest.importorskip("torch")

import codegen.onnx as conx  # noqa: E402
import codegen.torch  # noqa: E402
import msc  # noqa: E402
from msc.frontend.torch.pt2 import load_pt2  # noqa: E402
from tests.analysis.exporters import resnet  # noqa: E402


def _bert_mlm():
    transformers = pytest.importorskip("transformers", reason="transformers builds BERT")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    return transformers.BertForMaskedLM(cfg).eval(), (torch.randint(0, 64, (2, 8)),)


def _unique_bytes(m) -> int:
    """Bytes of the module's distinct tensors, non-persistent buffers included (a tied
    weight counted once)."""
    seen = {}
    for _, t in [*m.named_parameters(), *m.named_buffers()]:
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape))
        seen[key] = t.numel() * t.element_size()
    return sum(seen.values())


def _graph(m, args, how: str, tmp_path):
    ep = torch.export.export(m, args)
    if how == "pt2":  # saved and read back: a tie is two Parameters on one storage
        torch.export.save(ep, tmp_path / "m.pt2")
        ep = load_pt2(tmp_path / "m.pt2")
    return msc.from_exported_program(ep)


def _load_quietly(model, capfd) -> ort.InferenceSession:
    capfd.readouterr()
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    err = capfd.readouterr().err
    assert "W:onnxruntime" not in err and "Removing initializer" not in err, err
    return s


@pytest.mark.parametrize("how", ["export", "pt2"])
@pytest.mark.parametrize("which", ["bert_mlm", "resnet"])
def test_each_tensor_once_and_only_what_is_read(which, how, tmp_path, capfd) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m, args = _bert_mlm() if which == "bert_mlm" else resnet()
        g = _graph(m, args, how, tmp_path)
    plain = conx.to_model(g, optimize=False)  # node for node: exactly the weights read
    unread = {"num_batches_tracked"}  # BatchNorm's training counter: state, not computation
    want = _unique_bytes(m) - sum(
        t.numel() * t.element_size()
        for k, t in m.state_dict().items()
        if k.rsplit(".", 1)[-1] in unread
    )
    assert sum(len(t.raw_data) for t in plain.graph.initializer) == want
    # Optimized: constants are initializers too, BatchNorm folded away; still each tensor once.
    model = conx.to_model(g)
    inits = model.graph.initializer
    read = {i for n in model.graph.node for i in n.input}
    assert [t.name for t in inits if t.name not in read] == []
    consts = [t for t in inits if t.name not in g.weights]  # equal weights stay apart
    assert len({(t.data_type, tuple(t.dims), t.raw_data) for t in consts}) == len(consts)
    constants = sum(
        len(a.t.raw_data) for n in plain.graph.node if n.op_type == "Constant" for a in n.attribute
    )
    assert sum(len(t.raw_data) for t in inits) <= want + constants

    s = _load_quietly(model, capfd)
    with torch.no_grad():
        ref = m(*args)
    ref = ref.logits if hasattr(ref, "logits") else ref
    got = s.run(None, {g.inputs[0].name: args[0].numpy()})[0]
    np.testing.assert_allclose(got, ref.numpy(), rtol=1e-5, atol=1e-5)

    # The graph keeps every state_dict name (a tied one as an alias), so the PyTorch output
    # does: its state_dict has every key the source's has.
    names = set(g.weights) | {a for w in g.weights.values() for a in w.aliases}
    assert set(m.state_dict()) <= names
    if which == "resnet":
        gen = codegen.torch.to_module(g)
        assert set(gen.state_dict()) == set(m.state_dict())


def test_a_graph_with_an_unread_weight_reimports_as_written(tmp_path) -> None:
    g = msc.Graph("g")
    x = g.add_input("x", msc.TensorType(msc.DType.FLOAT32, (2, 3)))
    g.set_outputs([g.op("add", x, g.add_weight("w", np.ones((2, 3), np.float32)))])
    g.add_weight("counter", np.zeros((), np.int64), role="buffer")
    path = conx.save(g, tmp_path / "m.onnx")
    assert "counter" not in {t.name for t in onnx.load(path).graph.initializer}
    assert "counter" in g.weights  # the graph is left as it was
    written = conx.as_written(g)
    assert "counter" not in written.weights
    msc.assert_structural_equal(written, msc.from_onnx(path))
