"""The ``msc`` command prints only what msc has to say (issue #29, item 10).

Before: a quiet (``-q``) conversion of an ONNX file that computes sizes at run time printed
torch's graph dump of the failed re-export (54 lines for BERT); a failure came after
onnxruntime's coloured log line, torch's warnings and TVM's destructor warnings; an error in the
re-import named the staging folder, which no longer exists. Now a quiet success prints nothing,
a failure is exactly one ``msc: error:`` line, and errors name the user's paths.

These run the command in a subprocess, as a user does: torch, onnxruntime and TVM write to the
process's file descriptors, which an in-process run does not see.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from msc.errors import MscError

ROOT = Path(__file__).resolve().parents[2]

# A module.py:Class source that makes every kind of noise a library makes while msc works:
# C++ loggers on file descriptors 1 and 2, prints, a warning, a log record, and a destructor
# that writes at the interpreter's exit (as TVM's BlockBuilder does).
NOISY = """\
import atexit
import logging
import os
import sys
import warnings

import torch


def _at_exit():
    os.write(2, b"noise: a destructor at exit\\n")


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        os.write(1, b"noise: a C++ logger on fd 1\\n")
        os.write(2, b"noise: a C++ logger on fd 2\\n")
        print("noise: print")
        print("noise: print to stderr", file=sys.stderr)
        warnings.warn("noise: a warning", FutureWarning)
        logging.getLogger("torch.noise").warning("noise: a log record")
        atexit.register(_at_exit)
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(x)
"""


def _onnx(path: Path, nodes, inputs, outputs, inits=()) -> Path:
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    onnx.save(m, path)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("quiet")
    f32 = TensorProto.FLOAT
    (d / "models").mkdir()
    relu = _onnx(
        d / "models" / "relu.onnx",
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", f32, [2, 3])],
        [helper.make_tensor_value_info("y", f32, [2, 3])],
    )
    # Slice bounds read from tensor values: torch.export cannot capture the generated module,
    # and printed the partial graph of its failed export.
    dd = _onnx(
        d / "dd.onnx",
        [helper.make_node("Slice", ["x", "s", "e"], ["y"])],
        [
            helper.make_tensor_value_info("x", f32, [4]),
            helper.make_tensor_value_info("s", TensorProto.INT64, [1]),
            helper.make_tensor_value_info("e", TensorProto.INT64, [1]),
        ],
        [helper.make_tensor_value_info("y", f32, None)],
    )
    # Reflect padding of 3 on dims sized 2: onnxruntime fails, and logged it in colour first.
    pad = _onnx(
        d / "pad.onnx",
        [helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect")],
        [helper.make_tensor_value_info("x", f32, ["b", "n"])],
        [helper.make_tensor_value_info("y", f32, None)],
        [numpy_helper.from_array(np.array([0, 3, 0, 3], np.int64), "p")],
    )
    noisy = d / "noisy.py"
    noisy.write_text(NOISY)
    return {"dir": d, "relu": relu, "dd": dd, "pad": pad, "noisy": noisy}


def msc_cmd(*argv: object, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("MSC_CHECK", None)
    return subprocess.run(
        [sys.executable, "-m", "msc", *map(str, argv)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


def quiet_success(p: subprocess.CompletedProcess) -> None:
    assert (p.returncode, p.stdout, p.stderr) == (0, "", ""), (
        f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    )


def one_error(p: subprocess.CompletedProcess, *words: str) -> str:
    lines = p.stderr.splitlines()
    assert p.returncode == 2 and p.stdout == "", (p.returncode, p.stdout, p.stderr)
    assert len(lines) == 1 and lines[0].startswith("msc: error: "), p.stderr
    for w in words:
        assert w in lines[0], p.stderr
    return lines[0]


def _tvm() -> bool:
    try:
        import codegen.relax  # noqa: F401
    except ImportError:
        return False
    return True


# Every command, quiet, on a success: nothing on stdout or stderr.
QUIET = {
    "convert-onnx": ["convert", "{relu}", "-o", "{out}/a.onnx"],
    "convert-msc": ["convert", "{relu}", "-o", "{out}/a.msc"],
    # --allow-changes: the read-back of its run-time slice has real changes (issue 29, roundtrip)
    "convert-torch-uncapturable": [
        "convert",
        "{dd}",
        "-o",
        "{out}/dd_torch",
        "--to",
        "torch",
        "--allow-changes",
    ],
    "convert-relax": ["convert", "{relu}", "-o", "{out}/a_relax", "--to", "relax"],
    "convert-noisy": ["convert", "{noisy}:M", "--input-shape", "x=2,3", "-o", "{out}/n.onnx"],
    "inspect-noisy": ["inspect", "{noisy}:M", "--input-shape", "x=2,3"],
    "diff": ["diff", "{relu}", "{relu}"],
    "verify-noisy": ["verify", "{noisy}:M", "{noisy}:M", "--input-shape", "x=2,3"],
    "render": ["render", "{relu}", "-o", "{out}/g.dot"],
    "batch": ["batch", "{models}", "-o", "{out}/batch", "--task", "inspect", "-j", "1"],
    "demo": ["demo"],
}


@pytest.mark.parametrize("case", sorted(QUIET))
def test_a_quiet_success_prints_nothing(files, tmp_path, case):
    if case == "convert-relax" and not _tvm():
        pytest.skip("the relax target needs apache-tvm")
    where = {k: str(v) for k, v in files.items()} | {
        "out": str(tmp_path),
        "models": str(files["relu"].parent),
    }
    argv = [a.format(**where) for a in QUIET[case]]
    quiet_success(msc_cmd(*argv, "-q", cwd=tmp_path))


def test_results_without_quiet_are_msc_s_own(files, tmp_path):
    # Without -q the report is printed, and nothing of what the model's libraries wrote.
    p = msc_cmd("inspect", f"{files['noisy']}:M", "--input-shape", "x=2,3", cwd=tmp_path)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert "parameters" in p.stdout and "noise" not in p.stdout, p.stdout
    p = msc_cmd(
        "inspect", f"{files['noisy']}:M", "--input-shape", "x=2,3", "--json", "-q", cwd=tmp_path
    )
    assert p.returncode == 0 and p.stderr == "" and json.loads(p.stdout)["inputs"], p.stdout


def test_verbose_lets_the_libraries_through(files, tmp_path):
    p = msc_cmd(
        "inspect", f"{files['noisy']}:M", "--input-shape", "x=2,3", "-q", "-v", cwd=tmp_path
    )
    assert p.returncode == 0
    assert "noise: a C++ logger on fd 2" in p.stderr and "noise: print" in p.stdout, p


@pytest.mark.slow  # one CLI process per failure: ~16 s
def test_a_failure_is_one_line(files, tmp_path):
    # onnxruntime's own coloured log line came first.
    p = msc_cmd("convert", files["pad"], "-o", tmp_path / "pad_torch", "-q", cwd=tmp_path)
    one_error(p, "running it failed", "--input-shape")
    # torch's graph dump of the export it could not do came first (~20 lines).
    # --allow-changes: the read-back of its run-time slice has real changes (issue 29, roundtrip)
    dd = msc_cmd(
        "convert", files["dd"], "-o", tmp_path / "dd_torch", "-q", "--allow-changes", cwd=tmp_path
    )
    quiet_success(dd)
    # The directory it writes now opens (its run-time slice is written so torch.export captures
    # it): inspect succeeds with nothing on stderr.
    p = msc_cmd("inspect", tmp_path / "dd_torch", cwd=tmp_path)
    assert p.returncode == 0 and p.stderr == "", p
    # A module.py:Class source given the wrong input shape, with all its noise.
    p = msc_cmd("inspect", f"{files['noisy']}:M", "--input-shape", "x=2,4", cwd=tmp_path)
    one_error(p)


def test_a_failure_in_staging_names_the_user_s_output(files, tmp_path, monkeypatch):
    # The output is re-imported from a staging folder beside OUT, removed afterwards; an error
    # there named it (/out/.a_torch.5je57v06/a_torch/model.py), a path the user never sees.
    conv = importlib.import_module("msc.analysis.convert")  # msc.analysis.convert: a function

    real = conv.load_model

    def reimport_fails(path, *args, **kwargs):
        if Path(path).parent.name.startswith("."):
            raise MscError(f"{path / 'model.py'}: cannot read it")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(conv, "load_model", reimport_fails)
    out = tmp_path / "a_torch"
    with pytest.raises(MscError) as e:
        conv.convert(files["relu"], out, to="torch")
    assert str(e.value) == f"{out / 'model.py'}: cannot read it"
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == []
