"""codegen/relax/ops.txt lists the ops codegen.relax emits, so ``msc inspect`` can say what a
Relax target supports without importing TVM (seconds of CPU per call)."""

import subprocess
import sys
from pathlib import Path

import pytest

import codegen

ROOT = Path(__file__).resolve().parents[2]


def test_the_list_is_the_registry():
    relax = pytest.importorskip("codegen.relax", reason="apache-tvm (the tvm extra) not installed")
    listed = (Path(codegen.__file__).parent / "relax" / "ops.txt").read_text().split()
    assert listed == sorted(relax.EMITTERS), "regenerate it with `make docs`"


def test_inspect_reports_relax_support_without_importing_tvm():
    pytest.importorskip("tvm", reason="apache-tvm (the tvm extra) not installed")
    code = (
        "import sys, torch, msc\n"
        "from msc.analysis.inspect import target_support\n"
        "g = msc.from_torch(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.GELU()),"
        " (torch.randn(2, 4),))\n"
        "s = target_support(g)\n"
        "print(s['relax'], 'tvm' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout
    assert out.split() == ["[]", "False"], out
