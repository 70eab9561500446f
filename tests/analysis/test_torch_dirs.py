"""What ``convert --to torch`` writes is read back by every command: the check re-imports it,
``verify`` and ``inspect`` open the directory, and inputs of every rank reach the module as
the source model takes them.

Numeric tolerance: the convert check's defaults (rtol 1e-4, atol 1e-5) against onnxruntime.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the sources here are ONNX files")
pytest.importorskip("torch", reason="the target is generated PyTorch")
pytest.importorskip("onnxruntime", reason="the source runs in onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import msc  # noqa: E402


def _save(tmp_path, nodes, inputs, outputs, inits=(), name="m.onnx"):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    path = tmp_path / name
    onnx.save(m, path)
    return path


def test_a_scalar_input_reaches_the_module_as_a_scalar(tmp_path):
    # numpy's ascontiguousarray made the 0-d index [1]: the generated module's Gather then
    # kept the axis, and the convert check reported a mismatch (shapes [2] vs [2, 1]) for a
    # conversion that was right (torch.onnx writes Llama's logits_to_keep so).
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])
    i = helper.make_tensor_value_info("i", TensorProto.INT64, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])
    src = _save(tmp_path, [helper.make_node("Gather", ["x", "i"], ["y"], axis=1)], [x, i], [y])
    report = msc.convert(src, tmp_path / "out", to="torch")
    assert report.ok, report.numeric
    # x[:, i] with a 0-d tensor i exports as aten.select.int with a run-time index, which
    # the torch frontend reads as a gather: the check re-imports the module.
    assert not report.uncaptured, report.uncaptured


def _cli(*args):
    import contextlib
    import io

    from msc.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def _bert_like_positions(tmp_path):
    """What torch.onnx writes for BERT's embeddings and attention heads, in small: the
    position ids sliced to the sequence length from a table of 8 (a Slice whose end is read
    from a shape), and a reshape to [batch, seq, heads, -1] whose target is computed from
    shapes and initializers (ONNX's 0-copies-a-dim rule applies to it)."""
    nodes = [
        helper.make_node("Shape", ["ids"], ["s"], start=1, end=2),
        helper.make_node("Slice", ["table", "zero", "s", "one"], ["pos"]),  # table[:, :seq]
        helper.make_node("Gather", ["emb", "ids"], ["tok"]),
        helper.make_node("Gather", ["emb", "pos"], ["p"]),
        helper.make_node("Add", ["tok", "p"], ["h"]),
        helper.make_node("Shape", ["h"], ["bs"], start=0, end=2),
        helper.make_node("Concat", ["bs", "heads"], ["target"], axis=0),
        helper.make_node("Reshape", ["h", "target"], ["out"]),
    ]
    rng = np.random.default_rng(0)
    inits = [
        helper.make_tensor("table", TensorProto.INT64, [1, 8], list(range(8))),
        helper.make_tensor("zero", TensorProto.INT64, [1], [0]),
        helper.make_tensor("one", TensorProto.INT64, [1], [1]),
        helper.make_tensor("heads", TensorProto.INT64, [2], [2, -1]),
        helper.make_tensor(
            "emb", TensorProto.FLOAT, [16, 4], rng.standard_normal(64).astype(np.float32)
        ),
    ]
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", "seq", 2, 2])
    return _save(tmp_path, nodes, [ids], [out], inits)


def test_verify_and_inspect_open_what_convert_wrote(tmp_path):
    # The generated module read its slice bounds with slice.indices (torch.export made seq a
    # constant), and seq <= 8 (the table) was a constraint torch.export refused for a Dim
    # with no range: convert wrote the directory, and verify / inspect refused it.
    src = _bert_like_positions(tmp_path)
    out = tmp_path / "out.torch"
    report = msc.convert(src, out, to="torch", input_specs=())
    assert report.ok and not report.uncaptured, report.uncaptured
    # The reshape target (ONNX: a 0 copies the input's dim) is chosen in Python from sizes,
    # not read back from a tensor (which torch.export makes data-dependent symbols).
    assert ".tolist()" not in (out / "model.py").read_text()
    code, text, err = _cli("verify", src, out, "-q")
    assert code == 0 and "Traceback" not in err, text + err
    code, text, err = _cli("inspect", out)
    assert code == 0 and "seq" in text, text + err
    # The range torch.export found is the graph's: seq is at most 8 (the table's length).
    g = msc.analysis.model.load_model(out).graph
    (seq,) = {d for d in g.inputs[0].type.shape if getattr(d, "name", "") == "seq"}
    assert seq.max == 8
