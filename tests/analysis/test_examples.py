"""Every script in examples/ runs to completion (exit 0) and says what it promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / "examples").glob("*.py"))

# What each script must print; a new script needs a row here (the test below checks that).
EXPECT = {
    "pytorch_to_onnx.py": ["result: match", "transformer.onnx", "FLOPs"],
    "onnx_to_pytorch.py": ["result: match", "class ForeignCnn(nn.Module)", "def forward"],
    "inspect_and_diff.py": [
        "verdict: 4 real changes",
        "added (only in B)",
        "diverges at or upstream",
    ],
}


def test_every_example_has_expectations():
    assert {p.name for p in SCRIPTS} == set(EXPECT)


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_example_runs(script, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run(
        [sys.executable, str(script), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert p.returncode == 0, f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    for needle in EXPECT[script.name]:
        assert needle in p.stdout, f"{needle!r} not in the output:\n{p.stdout}"
    assert any(tmp_path.iterdir()), "the example wrote nothing to --out"
