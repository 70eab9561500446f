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
    conx.save(small_cnn_graph(), d / "cnn.onnx")
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
