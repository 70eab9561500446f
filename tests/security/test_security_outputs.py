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


# ------------------------------------------- what counts as msc's: a marker, not file names
@pytest.mark.parametrize(
    "mine", ["model.py", "load.py", "module.py", "graph.msc", "__pycache__/x.cpython-312.pyc"]
)
@pytest.mark.parametrize("to", ["torch", "msc"])
def test_a_folder_is_not_mscs_because_of_its_file_names(tmp_path, mine, to):
    src = _onnx(tmp_path / "m.onnx")
    proj = tmp_path / "proj"
    (proj / mine).parent.mkdir(parents=True)
    (proj / mine).write_text("mine")
    code, _, err = run_cli("convert", str(src), "-o", str(proj), "--to", to)
    assert code == 2 and "msc did not write" in _one_error(err)
    assert (proj / mine).read_text() == "mine"
    assert sorted(str(p.relative_to(proj)) for p in proj.rglob("*") if p.is_file()) == [mine]
    _no_staging(tmp_path)


def test_an_output_edited_since_msc_wrote_it_is_kept(tmp_path):
    src = _onnx(tmp_path / "m.onnx")
    out = tmp_path / "out"
    assert run_cli("convert", str(src), "-o", str(out))[0] == 0
    # Importing model.py leaves Python's bytecode cache beside it (when Python writes one).
    (out / "__pycache__").mkdir()
    (out / "__pycache__" / "model.cpython-312.pyc").write_bytes(b"\0" * 16)
    assert run_cli("convert", str(src), "-o", str(out))[0] == 0  # unedited: replaced
    with open(out / "model.py", "a") as f:
        f.write("# my change\n")
    code, _, err = run_cli("convert", str(src), "-o", str(out))
    assert code == 2 and "model.py changed since msc wrote it" in _one_error(err)
    assert (out / "model.py").read_text().endswith("# my change\n")
    (out / "notes.txt").write_text("mine")  # and a file of the user's beside msc's
    (out / "model.py").write_text(cgt.generate(msc.from_onnx(src)))
    code, _, err = run_cli("convert", str(src), "-o", str(out))
    assert code == 2 and "notes.txt" in _one_error(err)


@pytest.mark.parametrize("command", ["diff", "verify"])
@pytest.mark.parametrize("which", ["a", "b"])
def test_an_html_page_never_replaces_an_input(tmp_path, command, which):
    a, b = _onnx(tmp_path / "a.onnx"), tmp_path / "b.onnx"
    assert run_cli("convert", str(a), "-o", str(b))[0] == 0  # an onnx file msc wrote
    target = {"a": a, "b": b}[which]
    before = target.read_bytes()
    code, _, err = run_cli(command, str(a), str(b), "--html", str(target))
    assert code == 2 and "reads" in _one_error(err)
    assert target.read_bytes() == before


@pytest.mark.parametrize("command", ["diff", "verify"])
def test_overlays_never_replace_the_users_files(tmp_path, command):
    a = _onnx(tmp_path / "a.onnx")
    page, proj = tmp_path / "page.html", tmp_path / "proj"
    page.write_text("<html>my page</html>")
    proj.mkdir()
    (proj / "A.json").write_text('{"mine": 1}')
    code, _, err = run_cli(command, str(a), str(a), "--html", str(page))
    assert code == 2 and "not a file msc wrote" in _one_error(err)
    code, _, err = run_cli(command, str(a), str(a), "--node-data", str(proj))
    assert code == 2 and "A.json" in _one_error(err)
    assert page.read_text() == "<html>my page</html>"
    assert (proj / "A.json").read_text() == '{"mine": 1}' and not (proj / "B.json").exists()
    # msc's own outputs are replaced, run after run
    new, nd = tmp_path / "new.html", tmp_path / "nd"
    for _ in range(2):
        code, out, err = run_cli(
            command, str(a), str(a), "--html", str(new), "--node-data", str(nd)
        )
        assert code == 0, out + err
    assert sorted(p.name for p in nd.iterdir()) == ["A.json", "B.json"]


@pytest.mark.parametrize("suffix", [".html", ".dot"])
def test_render_replaces_only_its_own_files(tmp_path, suffix):
    src = _onnx(tmp_path / "m.onnx")
    mine, out = tmp_path / f"mine{suffix}", tmp_path / f"out{suffix}"
    mine.write_text("my drawing")
    code, _, err = run_cli("render", str(src), "-o", str(mine))
    assert code == 2 and "not a file msc wrote" in _one_error(err)
    assert mine.read_text() == "my drawing"
    for _ in range(2):
        assert run_cli("render", str(src), "-o", str(out))[0] == 0
    # one kind of msc output never replaces another
    code, _, err = run_cli("render", str(src), "-o", str(tmp_path / "m.html"))
    assert code == 0, err
    code, _, err = run_cli("convert", str(src), "-o", str(tmp_path / "m.html"), "--to", "onnx")
    assert code == 2
    _one_error(err)


def test_convert_to_onnx_replaces_only_mscs_onnx(tmp_path):
    src = _onnx(tmp_path / "m.onnx")
    theirs = _onnx(tmp_path / "theirs.onnx", width=3)
    before = theirs.read_bytes()
    code, _, err = run_cli("convert", str(src), "-o", str(theirs))
    assert code == 2 and "not a file msc wrote" in _one_error(err)
    assert theirs.read_bytes() == before
    ours = tmp_path / "ours.onnx"
    for _ in range(2):
        assert run_cli("convert", str(src), "-o", str(ours))[0] == 0
    assert run_cli("convert", str(src), "-o", str(theirs), "--force")[0] == 0  # when told to


def test_onnx_external_data_never_replaces_the_users_file(tmp_path):
    import codegen.onnx as cgo

    g = msc.from_onnx(_onnx(tmp_path / "m.onnx"))
    data = tmp_path / "out.onnx.data"
    data.write_text("mine")
    with pytest.raises(MscError, match="not the data of an msc model"):
        cgo.save(g, tmp_path / "out.onnx", external_data=True, size_threshold=0)
    assert data.read_text() == "mine" and not (tmp_path / "out.onnx").exists()
    data.unlink()
    for _ in range(2):  # its own data file, beside its own model, is replaced
        cgo.save(g, tmp_path / "out.onnx", external_data=True, size_threshold=0)
    _no_staging(tmp_path)
