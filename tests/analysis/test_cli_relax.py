"""The relax target of ``msc convert`` and Relax (TVMScript) models in verify / diff / inspect."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("tvm", reason="apache-tvm (the tvm extra) runs the relax target")
pytest.importorskip("onnx")

import codegen.onnx as conx  # noqa: E402
from msc.examples import small_cnn_graph  # noqa: E402
from tests.analysis.test_cli import run  # noqa: E402


@pytest.fixture(scope="module")
def relax_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("relax")
    # node for node: the BatchNorm stays a node (the default folds it into the conv)
    conx.save(small_cnn_graph(), d / "cnn.onnx", optimize=False)
    p = run("convert", d / "cnn.onnx", "-o", d / "cnn_relax", "--to", "relax", "--json")
    return d, json.loads(p.stdout)


def test_convert_to_relax_writes_and_checks(relax_dir) -> None:
    d, report = relax_dir
    assert report["ok"] and report["checked"] and report["structurally_equal"], report
    names = sorted(p.name for p in (d / "cnn_relax").iterdir())
    assert names == [".msc-output.json", "load.py", "model.safetensors", "module.py"]
    assert "@R.function" in (d / "cnn_relax" / "module.py").read_text()


def test_verify_runs_the_relax_directory(relax_dir) -> None:
    d, _ = relax_dir
    p = run("verify", d / "cnn.onnx", d / "cnn_relax", "--json")
    assert json.loads(p.stdout)["ok"]


def test_diff_and_inspect_read_a_tvmscript_file(relax_dir) -> None:
    d, _ = relax_dir
    p = run("inspect", d / "cnn_relax" / "module.py")
    assert "conv x1" in p.stdout and "batch_norm x1" in p.stdout
    run("diff", d / "cnn.onnx", d / "cnn_relax" / "module.py", ok=None)


def test_a_python_file_that_is_not_tvmscript_is_refused(tmp_path) -> None:
    f = tmp_path / "x.py"
    f.write_text("print('hello')\n")
    p = run("inspect", f, ok=None)
    assert p.returncode != 0 and "not a TVMScript module" in p.stderr


def _onnx_model(nodes, inputs, outputs, inits=()):
    import onnx
    from onnx import helper

    m = helper.make_model(
        helper.make_graph(nodes, "g", inputs, outputs, list(inits)),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def test_convert_einsum_to_relax_is_checked_by_reading_it_back(tmp_path) -> None:
    """The check read back relax.einsum (it refused the module msc wrote, blaming "Relax
    function 'main'", after TVM's BlockBuilder warning)."""
    import onnx
    from onnx import TensorProto, helper

    vi = helper.make_tensor_value_info
    m = _onnx_model(
        [helper.make_node("Einsum", ["a", "b"], ["y"], equation="ij,jk->ik")],
        [vi("a", TensorProto.FLOAT, [2, 3]), vi("b", TensorProto.FLOAT, [3, 4])],
        [vi("y", TensorProto.FLOAT, [2, 4])],
    )
    onnx.save(m, tmp_path / "e.onnx")
    p = run("convert", tmp_path / "e.onnx", "-o", tmp_path / "e_relax", "--to", "relax", sub=True)
    assert "structurally equal" in p.stdout and "outputs match" in p.stdout, p.stdout
    assert "main" not in p.stdout + p.stderr and "BlockBuilder" not in p.stderr, p.stderr
    report = json.loads(
        run("convert", tmp_path / "e.onnx", "-o", tmp_path / "e2", "--to", "relax", "--json").stdout
    )
    assert report["structurally_equal"] and not report["not_reimported"], report


def test_non_finite_constants_reach_tvmscript_that_parses(tmp_path) -> None:
    """A -inf fill (a transformer's attention mask) and a NaN: TVM's printer writes them as
    R.const("-inf", ...), which TVM's own parser refuses (so did the saved load.py)."""
    import importlib.util

    import numpy as np
    import onnx
    import tvm
    from onnx import TensorProto, helper, numpy_helper

    vi = helper.make_tensor_value_info

    def const(name, v):
        value = numpy_helper.from_array(np.array(v, np.float32), name)
        return helper.make_node("Constant", [], [name], value=value)

    m = _onnx_model(
        [
            const("inf", -np.inf),
            const("nan", np.nan),
            helper.make_node("Where", ["mask", "inf", "x"], ["w"]),
            helper.make_node("Softmax", ["w"], ["s"], axis=-1),
            helper.make_node("Max", ["s", "nan"], ["y"]),  # NaN everywhere
        ],
        [vi("mask", TensorProto.BOOL, [2, 3]), vi("x", TensorProto.FLOAT, [2, 3])],
        [vi("y", TensorProto.FLOAT, [2, 3])],
    )
    onnx.save(m, tmp_path / "m.onnx")
    out = tmp_path / "m_relax"
    p = run("convert", tmp_path / "m.onnx", "-o", out, "--to", "relax")
    assert "outputs match" in p.stdout, p.stdout
    text = (out / "module.py").read_text()
    assert 'float("-inf")' in text and '"-inf"' not in text.replace('float("-inf")', "")
    spec = importlib.util.spec_from_file_location("msc_relax_load", out / "load.py")
    load = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(load)
    f = load.load(str(out))
    mask = np.array([[True, False, True], [False, False, False]])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = f(tvm.runtime.tensor(mask), tvm.runtime.tensor(x)).numpy()
    assert got.shape == (2, 3) and np.isnan(got).all()  # ONNX's Max propagates NaN
