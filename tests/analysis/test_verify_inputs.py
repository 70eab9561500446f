"""``verify``'s default inputs are ones the models are meant for, and its localisation looks at
data, not shape arithmetic (issue #29, item 11).

Before: an ``attention_mask`` got random integers in [0, 10), so some rows masked everything,
where exporters legitimately differ (softmax over nothing); ids read through a reshape could
index past their embedding table; and the first divergence was blamed on a reshape's shape
vector, which two exporters compute their own ways. The reference for every run is onnxruntime
on each ONNX model.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime", reason="verify runs ONNX models with onnxruntime")

from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper  # noqa: E402

from msc.analysis.model import load_model  # noqa: E402
from msc.analysis.verify import (  # noqa: E402
    format_verify,
    input_ranges,
    make_inputs,
    shape_arithmetic,
    verify_models,
)


def _save(path, nodes, inputs, outputs, inits=()):
    g = h.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    m.ir_version = 9
    onnx.save(m, path)
    return path


def _masked_attention(path, fill: float):
    """softmax(x x^T + (1 - mask) * fill) over keys: two exporters' spellings of one mask,
    equal wherever a row keeps a key, different where a row masks every key."""
    f = np.float32
    return _save(
        path,
        [
            h.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1], name="xt"),
            h.make_node("MatMul", ["x", "xt"], ["scores"], name="scores"),
            h.make_node("Unsqueeze", ["attention_mask", "one"], ["m3"], name="m3"),
            h.make_node("Cast", ["m3"], ["mf"], to=T.FLOAT, name="mf"),
            h.make_node("Sub", ["onef", "mf"], ["inv"], name="inv"),
            h.make_node("Mul", ["inv", "fill"], ["bias"], name="bias"),
            h.make_node("Add", ["scores", "bias"], ["logits"], name="logits"),
            h.make_node("Softmax", ["logits"], ["y"], axis=-1, name="softmax"),
        ],
        [
            h.make_tensor_value_info("x", T.FLOAT, ["b", "s", 4]),
            h.make_tensor_value_info("attention_mask", T.INT64, ["b", "s"]),
        ],
        [h.make_tensor_value_info("y", T.FLOAT, ["b", "s", "s"])],
        [
            numpy_helper.from_array(np.array([1], np.int64), "one"),
            numpy_helper.from_array(np.array(1, f), "onef"),
            numpy_helper.from_array(np.array(fill, f), "fill"),
        ],
    )


def test_masks_keep_a_key_in_every_row(tmp_path):
    a = _masked_attention(tmp_path / "a.onnx", -10000.0)
    b = _masked_attention(tmp_path / "b.onnx", float(np.finfo(np.float32).min))
    r = verify_models(a, b, binding={"b": 3, "s": 5})
    assert r.ok, format_verify(r)
    assert "attention_mask int64[3, 5] 0/1 mask (1s then 0s per row)" in r.inputs
    # The models do differ on a row that masks everything: the inputs avoid it, not the check.
    x = np.random.default_rng(0).standard_normal((1, 2, 4)).astype(np.float32)
    given = {"x": x, "attention_mask": np.zeros((1, 2), np.int64)}
    assert not verify_models(a, b, given).ok


@pytest.mark.parametrize("seed", range(4))
def test_a_mask_is_0_1_with_ones_first(tmp_path, seed):
    g = load_model(_masked_attention(tmp_path / "a.onnx", -10000.0)).graph
    m = make_inputs(g, seed, {"b": 6, "s": 7})["attention_mask"]
    assert m.dtype == np.int64 and m.shape == (6, 7)
    assert set(np.unique(m)) <= {0, 1} and (m[:, 0] == 1).all()
    assert (np.diff(m, axis=1) <= 0).all()  # 1s, then 0s


def _ids_through_reshape(path):
    """ids i64[2, 3] -> Reshape [6] -> Cast i32 -> Gather from a table of 5 rows."""
    table = np.arange(20, dtype=np.float32).reshape(5, 4)
    return _save(
        path,
        [
            h.make_node("Reshape", ["ids", "flat"], ["ids6"], name="flat_ids"),
            h.make_node("Cast", ["ids6"], ["ids32"], to=T.INT32, name="cast_ids"),
            h.make_node("Gather", ["table", "ids32"], ["y"], axis=0, name="embed"),
        ],
        [h.make_tensor_value_info("ids", T.INT64, [2, 3])],
        [h.make_tensor_value_info("y", T.FLOAT, [6, 4])],
        [numpy_helper.from_array(table, "table"), numpy_helper.from_array(np.array([6]), "flat")],
    )


def test_ids_stay_inside_the_table_they_index(tmp_path):
    # Random ids in [0, 10) ran past the 5-row table: onnxruntime refused to gather.
    src = _ids_through_reshape(tmp_path / "ids.onnx")
    g = load_model(src).graph
    assert input_ranges(g) == {"ids": "in [0, 5)"}
    for seed in range(8):
        assert make_inputs(g, seed)["ids"].max() < 5
    r = verify_models(src, src)
    assert r.ok and r.inputs == ["ids int64[2, 3] in [0, 5)"], format_verify(r)
    assert "ids int64[2, 3] in [0, 5)" in format_verify(r)


def _reshape_then_scale(path, target_last: int, scale: float):
    """x f32[b, 2, 3] reshaped to [b, target_last] (6 or -1: the same shape, computed two
    ways), then scaled and rectified: the models differ in the scale only."""
    return _save(
        path,
        [
            h.make_node("Shape", ["x"], ["shape"], name="shape"),
            h.make_node("Slice", ["shape", "zero", "one"], ["batch"], name="batch"),
            h.make_node("Concat", ["batch", "last"], ["target"], axis=0, name="target"),
            h.make_node("Reshape", ["x", "target"], ["flat"], name="flat"),
            h.make_node("Mul", ["flat", "k"], ["scaled"], name="scale"),
            h.make_node("Relu", ["scaled"], ["y"], name="relu"),
        ],
        [h.make_tensor_value_info("x", T.FLOAT, ["b", 2, 3])],
        [h.make_tensor_value_info("y", T.FLOAT, ["b", 6])],
        [
            numpy_helper.from_array(np.array([0], np.int64), "zero"),
            numpy_helper.from_array(np.array([1], np.int64), "one"),
            numpy_helper.from_array(np.array([target_last], np.int64), "last"),
            numpy_helper.from_array(np.array(scale, np.float32), "k"),
        ],
    )


def test_the_first_divergence_skips_shape_arithmetic(tmp_path):
    a = _reshape_then_scale(tmp_path / "a.onnx", 6, 2.0)
    b = _reshape_then_scale(tmp_path / "b.onnx", -1, 3.0)
    g = load_model(a).graph
    names = {id(v): v.name for n in g.nodes for v in n.outputs}
    shapes = {names[i] for i in shape_arithmetic(g)}
    assert {"shape", "batch", "target"} <= shapes and not {"flat", "y"} & shapes, shapes
    r = verify_models(a, b)
    assert not r.ok and r.divergence is not None, format_verify(r)
    assert r.divergence.node == "scale", format_verify(r)  # was 'target', the shape vector
    assert r.divergence.agreeing_before == 1 and r.compared_values == 2, format_verify(r)


# ---------------------------------------------------------------- inputs only one side takes
def _doubled(path, extra: bool):
    """y = x + x, or y = x + z with an input z the other model does not take."""
    ins = [h.make_tensor_value_info("x", T.FLOAT, [2, 3])]
    if extra:
        ins.append(h.make_tensor_value_info("z", T.FLOAT, [2, 3]))
    add = h.make_node("Add", ["x", "z" if extra else "x"], ["y"], name="add")
    return _save(path, [add], ins, [h.make_tensor_value_info("y", T.FLOAT, [2, 3])])


def test_verify_runs_models_with_different_inputs_on_an_npz_naming_both(tmp_path):
    # One model takes an input the other does not (an exporter dropped or added one): random
    # inputs cannot feed both, but an .npz that names every input of both can; it was refused.
    from tests.security import run_cli

    a, b = _doubled(tmp_path / "a.onnx", False), _doubled(tmp_path / "b.onnx", True)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.savez(tmp_path / "both.npz", x=x, z=x)
    r = verify_models(a, b, tmp_path / "both.npz")
    assert r.ok and r.inputs == ["x float32[2, 3]", "z float32[2, 3]"], format_verify(r)
    np.savez(tmp_path / "other.npz", x=x, z=x + 1)
    assert not verify_models(a, b, tmp_path / "other.npz").ok  # z reaches B
    assert verify_models(a, b, {"x": x, "z": x}).ok
    code, out, err = run_cli("verify", str(a), str(b), "--inputs", str(tmp_path / "both.npz"))
    assert code == 0 and "result: match" in out and not err, (out, err)
    # Random inputs, or a file that misses B's input: one error line that says what to give.
    code, _, err = run_cli("verify", str(a), str(b))
    assert code == 2 and "give --inputs an .npz with every input of both" in err, err
    np.savez(tmp_path / "a_only.npz", x=x)
    code, _, err = run_cli("verify", str(a), str(b), "--inputs", str(tmp_path / "a_only.npz"))
    assert code == 2 and err.startswith("msc: error:") and "'z'" in err, err
