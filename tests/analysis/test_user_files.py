"""The file/CLI matrix: models saved the way users save them, through every command.

A CNN, BertForMaskedLM and LlamaForCausalLM (tests/analysis/user_models.py), each as a dynamic
``.pt2`` with keyword arguments and its own output class, torch.onnx's dynamo file and its
legacy file, are given to ``msc inspect``, ``msc convert`` (to PyTorch, ONNX and Relax), and
what convert wrote is given to ``verify``, ``inspect`` and ``convert`` again; every pair of
files of one model goes through ``diff`` and ``verify``. Each cell asserts the exit code, that
stderr stays empty (one ``msc: error:`` line is the only stderr a failure may have), and what
the command says: convert's check re-imports what it wrote and finds it equal or equivalent,
verify matches, diff finds the two exports equivalent.

A cell that does not hold yet is listed in EXPECTED_FAILURES with its reason; such a cell is a
strict xfail, so it fails the suite the day it starts passing and the entry must go.

# NOTE: commands run in this process through ``msc.cli.main`` (one torch import for all), with
# file descriptors 1 and 2 captured, so C++ loggers (onnxruntime, TVM) writing to them count.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import pytest

from tests.analysis import user_models
from tests.analysis.user_models import FORMATS, MODELS

pytest.importorskip("transformers", reason="the matrix's transformers models need transformers")

TARGETS = ("torch", "onnx", "relax")

# cell id -> why it does not hold yet. A cell id is the test's parameter id, e.g.
# "convert[bert-pt2-relax]".
EXPECTED_FAILURES: dict[str, str] = {}

# (model, format) -> why that file is a different model from the model's other files, so diff
# must name real changes and verify must refuse or mismatch: those cells assert that instead.
DIFFERENT_MODELS: dict[tuple[str, str], str] = {
    ("llama", "legacy"): (
        "torch.onnx's TorchScript exporter traces LlamaForCausalLM's defaulted int "
        "logits_to_keep as a graph input and indexes one position with it (logits "
        "[batch, vocab] instead of [batch, seq, vocab])"
    ),
}

# (model, format, target) cells that take a minute or more on 2 cores: `make test-slow` runs
# them (``-m slow``), `make test` leaves them out. Relax compiles the transformers' ONNX files
# (dynamo and legacy) with every op spelled out; the .pt2 relax cells stay in `make test`.
SLOW_CELLS = {(m, h, "relax") for m in ("bert", "llama") for h in ("dynamo", "legacy")}

pytestmark = pytest.mark.xdist_group("user_files")


@dataclass
class Result:
    code: int
    out: str
    err: str

    def __str__(self) -> str:
        return f"exit {self.code}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


def cli(*args: object) -> Result:
    """``msc ARGS`` in this process; stdout and stderr captured at the file descriptors too."""
    from msc.cli import main

    argv = [str(a) for a in args]
    py_out, py_err = io.StringIO(), io.StringIO()
    with tempfile.TemporaryFile("w+") as fd_out, tempfile.TemporaryFile("w+") as fd_err:
        saved = os.dup(1), os.dup(2)
        os.dup2(fd_out.fileno(), 1)
        os.dup2(fd_err.fileno(), 2)
        try:
            with contextlib.redirect_stdout(py_out), contextlib.redirect_stderr(py_err):
                try:
                    code = main(argv)
                except SystemExit as e:  # argparse
                    code = e.code if isinstance(e.code, int) else 2
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        fd_out.seek(0)
        fd_err.seek(0)
        return Result(code, py_out.getvalue() + fd_out.read(), py_err.getvalue() + fd_err.read())


class Workspace:
    """The files and convert's outputs, made on first use and shared by the cells."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: dict[tuple[str, str], Path] = {}
        self.converted: dict[tuple[str, str, str], tuple[Path, Result]] = {}

    def file(self, model: str, how: str) -> Path:
        if (model, how) not in self.files:
            self.files[model, how] = user_models.save(model, how, self.root)
        return self.files[model, how]

    def convert(self, model: str, how: str, target: str) -> tuple[Path, Result]:
        key = (model, how, target)
        if key not in self.converted:
            src = self.file(model, how)
            out = self.root / f"{model}_{how}.{target}" if target != "onnx" else None
            out = out or self.root / f"{model}_{how}.out.onnx"
            self.converted[key] = out, cli("convert", src, "-o", out, "--to", target)
        return self.converted[key]


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Workspace:
    return Workspace(tmp_path_factory.mktemp("user_files"))


def _cells(name: str, params: list[tuple]) -> list:
    out = []
    for p in params:
        cid = f"{name}[{'-'.join(p)}]"
        reason = EXPECTED_FAILURES.get(cid)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        if p in SLOW_CELLS:
            marks.append(pytest.mark.slow)
        out.append(pytest.param(*p, id="-".join(p), marks=marks))
    return out


FILES = [(m, h) for m in MODELS for h in FORMATS]
OUTPUTS = [(m, h, t) for m, h in FILES for t in TARGETS]
PAIRS = [(m, a, b) for m in MODELS for a, b in combinations(FORMATS, 2)]


def _needs(target: str) -> None:
    if target == "relax":
        pytest.importorskip("tvm", reason="--to relax needs apache-tvm (the [tvm] extra)")


def _ok(r: Result, *says: str) -> None:
    assert r.code == 0, str(r)
    assert r.err == "", str(r)
    assert any(s in r.out for s in says), str(r)


@pytest.mark.parametrize(("model", "how"), _cells("inspect", FILES))
def test_inspect(ws, model, how):
    r = cli("inspect", ws.file(model, how))
    _ok(r, "inputs")


@pytest.mark.parametrize(("model", "how", "target"), _cells("convert", OUTPUTS))
def test_convert(ws, model, how, target):
    """convert writes the target and its check re-imports it: equal, or equivalent up to
    named rewrites; never a real change with exit 0."""
    _needs(target)
    out, r = ws.convert(model, how, target)
    _ok(r, "structurally equal", "is equivalent")
    assert "real change" not in r.out, str(r)
    assert out.exists()


@pytest.mark.parametrize(("model", "how", "target"), _cells("verify_output", OUTPUTS))
def test_verify_output(ws, model, how, target):
    _needs(target)
    out, r = ws.convert(model, how, target)
    assert r.code == 0, str(r)
    _ok(cli("verify", ws.file(model, how), out), "result: match")


@pytest.mark.parametrize(("model", "how", "target"), _cells("inspect_output", OUTPUTS))
def test_inspect_output(ws, model, how, target):
    _needs(target)
    out, r = ws.convert(model, how, target)
    assert r.code == 0, str(r)
    _ok(cli("inspect", out), "inputs")


@pytest.mark.parametrize(("model", "how", "target"), _cells("convert_again", OUTPUTS))
def test_convert_again(ws, model, how, target):
    """What convert wrote is a model the CLI takes as a source: to ONNX, checked."""
    _needs(target)
    out, r = ws.convert(model, how, target)
    assert r.code == 0, str(r)
    again = ws.root / f"{model}_{how}_{target}.again.onnx"
    _ok(cli("convert", out, "-o", again), "structurally equal", "is equivalent")


def _different(model: str, a: str, b: str) -> bool:
    return (model, a) in DIFFERENT_MODELS or (model, b) in DIFFERENT_MODELS


@pytest.mark.parametrize(("model", "a", "b"), _cells("diff", PAIRS))
def test_diff_across_exporters(ws, model, a, b):
    """Two exports of one model differ only by rewrites diff knows; a file that is another
    model (DIFFERENT_MODELS) is named as real changes, exit 1."""
    r = cli("diff", ws.file(model, a), ws.file(model, b))
    if _different(model, a, b):
        assert r.code == 1 and "real change" in r.out and r.err == "", str(r)
    else:
        _ok(r, "equivalent", "equal")


@pytest.mark.parametrize(("model", "a", "b"), _cells("verify", PAIRS))
def test_verify_across_exporters(ws, model, a, b):
    r = cli("verify", ws.file(model, a), ws.file(model, b))
    if _different(model, a, b):  # one error line naming the input only one of them takes
        assert r.code == 2 and "logits_to_keep" in r.err, str(r)
        assert r.err.startswith("msc: error:") and "Traceback" not in r.err, str(r)
    else:
        _ok(r, "result: match")
