"""The layer contracts of ../shared/DESIGN.md hold, and are seen to fail when broken."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).parent / "lint-imports"

pytestmark = pytest.mark.skipif(
    not LINT.exists(), reason="import-linter is not installed (pip install import-linter)"
)


def _lint(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(LINT), "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        timeout=300,
    )


def test_contracts_kept():
    r = _lint(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout


def test_upward_import_breaks_a_contract(tmp_path):
    for part in ("msc", "codegen"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    # The graph core reaching up into the op vocabulary: what this layout exists to prevent.
    core = tmp_path / "msc" / "ir" / "validate.py"
    core.write_text(core.read_text() + "\nfrom msc.ops import registry  # noqa\n")
    r = _lint(tmp_path)
    assert r.returncode != 0
    assert "msc.ir is not allowed to import msc.ops" in r.stdout
