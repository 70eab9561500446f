"""A .jaxexport / .mlir file is read without running anything it holds: garbage, truncated
files and unknown dialects end in one ``msc: error:`` line (exit 2); a custom_call is refused by
its target name unless --custom-ops keep, and kept opaque then, never run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="the jax extra (jax, jaxlib) is not installed")

import jax.numpy as jnp  # noqa: E402
from jax import export  # noqa: E402

import msc  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _exported():
    w = jnp.asarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    return export.export(jax.jit(lambda x: jax.nn.relu(x @ w)))(
        jax.ShapeDtypeStruct((2, 3), jnp.float32)
    )


def _cli(*args: str) -> subprocess.CompletedProcess:
    """``msc ARGS`` in this process (main(argv) runs the command in place), its stdout and
    stderr captured."""
    import contextlib
    import io

    from msc.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(args))
        except SystemExit as e:
            rc = int(e.code or 0)
    return subprocess.CompletedProcess(args, rc, out.getvalue(), err.getvalue())


def test_cli_process_one_error_line(files):
    """The real command (a process) on a truncated artifact: one error line, exit 2."""
    r = subprocess.run(
        [sys.executable, "-m", "msc", "inspect", str(files / "trunc.jaxexport")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    _one_error(r)


def _one_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("msc: error:"), r.stderr
    return lines[0]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("jax")
    e = _exported()
    data = bytes(e.serialize())
    text = e.mlir_module()
    (d / "m.jaxexport").write_bytes(data)
    (d / "m.mlir").write_text(text)
    (d / "trunc.jaxexport").write_bytes(data[: len(data) // 2])
    (d / "trunc.mlir").write_text(text[: len(text) // 2])
    (d / "garbage.jaxexport").write_bytes(b"\x00\xffgarbage" * 10)
    (d / "garbage.mlir").write_bytes(b"\x00\xff\xfe not mlir")
    (d / "dialect.mlir").write_text(
        'module { func.func @main() -> tensor<f32> { %0 = "evil.op"() : () -> tensor<f32>\n'
        "return %0 : tensor<f32> } }"
    )
    (d / "custom.mlir").write_text(
        "func.func public @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {\n"
        '  %0 = stablehlo.custom_call @__import__("os").system(%arg0) : '
        "(tensor<2x3xf32>) -> tensor<2x3xf32>\n"
        "  return %0 : tensor<2x3xf32>\n}\n"
    )
    (d / "custom_ok.mlir").write_text(
        "func.func public @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {\n"
        "  %0 = stablehlo.custom_call @my_kernel(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>\n"
        "  return %0 : tensor<2x3xf32>\n}\n"
    )
    return d


@pytest.mark.parametrize(
    "name",
    [
        "trunc.jaxexport",
        "trunc.mlir",
        "garbage.jaxexport",
        "garbage.mlir",
        "dialect.mlir",
        "custom.mlir",
    ],
)
def test_bad_files_give_one_error_line(files, name):
    line = _one_error(_cli("inspect", str(files / name)))
    assert name in line or "custom_call" in line


def test_custom_call_refused_by_name_then_kept(files):
    r = _cli("inspect", str(files / "custom_ok.mlir"))
    assert r.returncode == 2 and "my_kernel" in r.stderr
    r = _cli("inspect", str(files / "custom_ok.mlir"), "--custom-ops", "keep")
    assert r.returncode == 0, r.stderr
    assert "my_kernel" in r.stdout


def test_good_files_read_and_verify(files, tmp_path):
    g = msc.from_stablehlo((files / "m.jaxexport").read_bytes())
    assert len(g.nodes) > 0
    r = _cli("convert", str(files / "m.jaxexport"), "-o", str(tmp_path / "m.onnx"))
    assert r.returncode == 0, r.stderr
    r = _cli("convert", str(files / "m.mlir"), "-o", str(tmp_path / "j"), "--to", "jax")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "j" / "model.py").is_file()
    r = _cli("verify", str(files / "m.jaxexport"), str(tmp_path / "m.onnx"))
    assert r.returncode == 0, r.stdout + r.stderr
