"""Outputs never destroy what was there; staging is unpredictable and cleaned up.

Before: ``msc convert m.onnx -o DIR`` replaced a directory full of the user's files;
``msc render`` wrote through a symlink planted at its fixed temporary name; ``-o .`` and
``-o ''`` tracebacked and left ``..old.*`` behind; a killed convert left its staging directory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import codegen.torch as cgt
import msc
from msc.errors import MscError
from msc.examples import small_cnn_graph
from tests.security import run_cli

ROOT = Path(__file__).resolve().parents[2]


def _onnx(path: Path, width: int = 4, layers: int = 1) -> Path:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, width])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, width])
    rng = np.random.default_rng(0)
    nodes, inits, cur = [], [], "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width)) / width).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        out = "y" if i == layers - 1 else f"h{i}"
        nodes.append(helper.make_node("MatMul", [cur, f"w{i}"], [out]))
        cur = out
    m = helper.make_model(
        helper.make_graph(nodes, "mlp", [x], [y], inits),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    m.ir_version = 8
    onnx.save(m, path)
    return path


def _one_error(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("msc: error: "), err
    assert "Traceback" not in err
    return lines[0]


def _no_staging(d: Path) -> None:
    left = [p.name for p in d.iterdir() if p.name.startswith(".")]
    assert not left, f"staging left behind in {d}: {left}"


def _users_dir(tmp_path: Path) -> Path:
    d = tmp_path / "mine"
    d.mkdir()
    (d / "thesis.tex").write_text("years of work")
    (d / "data").mkdir()
    return d


@pytest.mark.parametrize("to", ["torch", "msc"])
def test_convert_keeps_a_directory_of_the_users_files(tmp_path, to):
    src = _onnx(tmp_path / "m.onnx")
    mine = _users_dir(tmp_path)
    code, _, err = run_cli("convert", str(src), "-o", str(mine), "--to", to)
    assert code == 2
    assert "thesis.tex" in _one_error(err)
    assert (mine / "thesis.tex").read_text() == "years of work" and (mine / "data").is_dir()
    _no_staging(tmp_path)


def test_api_writers_keep_a_directory_of_the_users_files(tmp_path):
    mine = _users_dir(tmp_path)
    g = small_cnn_graph()
    for save in (msc.save, cgt.save):
        with pytest.raises(MscError, match="holds files msc did not write"):
            save(g, mine)
    assert sorted(p.name for p in mine.iterdir()) == ["data", "thesis.tex"]
    _no_staging(tmp_path)


def test_a_directory_msc_wrote_is_replaced(tmp_path):
    src = _onnx(tmp_path / "m.onnx")
    out = tmp_path / "out"
    for to in ("torch", "torch", "msc"):
        code, stdout, err = run_cli("convert", str(src), "-o", str(out), "--to", to)
        assert code == 0, stdout + err
    assert (out / "graph.msc").is_file() and not (out / "model.py").exists()
    msc.save(small_cnn_graph(), out)  # and through the API
    _no_staging(tmp_path)


def test_render_does_not_write_through_a_planted_symlink(tmp_path):
    g = small_cnn_graph()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "g.dot"
    (tmp_path / ".g.dot.tmp").symlink_to(victim)  # the old fixed staging name
    msc.render(g, out)
    assert victim.read_text() == "precious"
    assert out.read_text().startswith("digraph")
    # An output path that is itself a symlink: the link is replaced, its target kept.
    link = tmp_path / "link.dot"
    link.symlink_to(victim)
    msc.render(g, link)
    assert victim.read_text() == "precious" and not link.is_symlink()


@pytest.mark.parametrize(
    ("out", "to"),
    [
        (".", "torch"),
        ("", "torch"),
        ("/", "msc"),
        ("..", "msc"),
        ("file.txt", "torch"),  # a file where a directory goes
        ("file.txt/under", "msc"),  # under a file
        ("file.txt/under.onnx", "onnx"),
        ("adir.onnx", "onnx"),  # a directory where a file goes
    ],
)
def test_unusable_output_paths_are_one_error_line(tmp_path, monkeypatch, out, to):
    monkeypatch.chdir(tmp_path)
    src = _onnx(tmp_path / "m.onnx")
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "adir.onnx").mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    code, _, err = run_cli("convert", str(src), "-o", out, "--to", to)
    assert code == 2
    _one_error(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert (tmp_path / "file.txt").read_text() == "x"


@pytest.mark.parametrize("out", ["adir.svg", "file.txt/x.svg"])
def test_render_to_unusable_paths_is_one_error_line(tmp_path, monkeypatch, out):
    monkeypatch.chdir(tmp_path)
    src = _onnx(tmp_path / "m.onnx")
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "adir.svg").mkdir()
    code, _, err = run_cli("render", str(src), "-o", out)
    assert code == 2
    _one_error(err)
    _no_staging(tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through directory permissions")
def test_unwritable_location_is_one_error_line(tmp_path):
    src = _onnx(tmp_path / "m.onnx")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    code, _, err = run_cli("convert", str(src), "-o", str(locked / "out"), "--to", "msc")
    assert code == 2 and "permission" in _one_error(err)


def test_writing_under_proc_is_one_error_line(tmp_path):
    """A location nobody can write, root included."""
    src = _onnx(tmp_path / "m.onnx")
    code, _, err = run_cli("convert", str(src), "-o", "/proc/msc-out.onnx")
    assert code == 2
    _one_error(err)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_killed_convert_leaves_no_staging(tmp_path, sig):
    src = _onnx(tmp_path / "big.onnx", width=1024, layers=24)  # ~100 MB to write and check
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.Popen(
        [sys.executable, "-m", "msc", "convert", str(src), "-o", str(work / "out"), "-q"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not any(work.iterdir()) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert p.poll() is None, "convert finished before it could be interrupted"
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    assert "Traceback" not in err
    left = sorted(x.name for x in work.iterdir())
    assert p.returncode in (0, 130, 143), err
    # Nothing staged is left. The output is there only if the signal raced the end of the
    # conversion (rarely, on a loaded machine; the signal then ends the program after the
    # output is installed), and then it is complete.
    assert left in ([], ["out"]), f"left behind: {left}"
    if left or p.returncode == 0:
        assert left == ["out"] and (work / "out" / "model.safetensors").is_file()
