"""A .pt2 is read without running anything it contains.

Before: ``torch.export.load`` unpickled sample inputs (falling back to ``weights_only=False``),
weights marked ``use_pickle``, custom/opaque-object constants, and gave symbolic expressions
to ``sympy.sympify`` (which evaluates Python): each ran its payload on ``msc inspect``.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

import msc
from msc.errors import MscError
from msc.examples import example_module

ROOT = Path(__file__).resolve().parents[2]


class _Payload:
    """Unpickling this creates ``marker``: proof that code from the file ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _saved(tmp_path: Path, dynamic: bool = False) -> tuple[Path, dict[str, bytes], str]:
    module, args, dyn = example_module("cnn")
    ep = torch.export.export(module, args, dynamic_shapes=dyn if dynamic else None)
    path = tmp_path / "good.pt2"
    torch.export.save(ep, path)
    with zipfile.ZipFile(path) as z:
        members = {i.filename: z.read(i.filename) for i in z.infolist()}
    root = next(iter(members)).split("/", 1)[0] + "/"
    return path, members, root


def _write(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for k, v in members.items():
            z.writestr(k, v)
    return path


def _torch_save(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _hostile(tmp_path: Path, case: str) -> tuple[Path, Path]:
    marker = tmp_path / f"PWNED-{case}"
    payload = _Payload(marker)
    _, m, root = _saved(tmp_path, dynamic=case == "sympy")
    if case == "sample_inputs_pickle":
        m[root + "data/sample_inputs/model.pt"] = pickle.dumps(payload)
    elif case == "sample_inputs_torch_save":
        m[root + "data/sample_inputs/model.pt"] = _torch_save(((payload,), {}))
    elif case == "weight_use_pickle":
        cfg_name = root + "data/weights/model_weights_config.json"
        cfg = json.loads(m[cfg_name])
        meta = next(iter(cfg["config"].values()))
        meta["use_pickle"] = True
        m[cfg_name] = json.dumps(cfg).encode()
        m[root + "data/weights/" + meta["path_name"]] = _torch_save(payload)
    elif case == "opaque_constant":
        cfg_name = root + "data/constants/model_constants_config.json"
        cfg = json.loads(m[cfg_name])
        cfg["config"]["evil"] = {
            "path_name": "opaque_obj_0",
            "is_param": False,
            "use_pickle": True,
            "tensor_meta": None,
        }
        m[cfg_name] = json.dumps(cfg).encode()
        m[root + "data/constants/opaque_obj_0"] = pickle.dumps(payload)
    elif case == "sympy":
        name = root + "models/model.json"
        text = m[name].decode()
        evil = f"__import__('builtins').open('{marker}', 'w')"
        assert "expr_str" in text
        text = text.replace("Symbol('s77', positive=True, integer=True)", evil, 1)
        assert evil in text
        m[name] = text.encode()
    return _write(tmp_path / f"{case}.pt2", m), marker


CASES = [
    "sample_inputs_pickle",
    "sample_inputs_torch_save",
    "weight_use_pickle",
    "opaque_constant",
    "sympy",
]


@pytest.mark.parametrize("case", CASES)
def test_hostile_pt2_runs_nothing_through_the_api(tmp_path, case):
    path, marker = _hostile(tmp_path, case)
    try:
        msc.inspect(path)
    except MscError as e:
        if case.startswith(("weight", "opaque")):
            assert "member" in str(e) and "--trust-pickle" in str(e)
    assert not marker.exists(), f"{case}: the payload ran"


@pytest.mark.parametrize("case", CASES)
def test_hostile_pt2_runs_nothing_through_the_command(tmp_path, case):
    path, marker = _hostile(tmp_path, case)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run(
        [sys.executable, "-m", "msc", "inspect", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert not marker.exists(), f"{case}: the payload ran"
    assert "Traceback" not in p.stderr
    if case.startswith("sample_inputs"):
        assert p.returncode == 0, p.stderr  # sample inputs are never read: nothing to refuse
    else:
        assert p.returncode == 2
        lines = p.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("msc: error: "), p.stderr


def test_trust_pickle_loads_a_benign_pickled_weight(tmp_path):
    _, m, root = _saved(tmp_path)
    cfg_name = root + "data/weights/model_weights_config.json"
    cfg = json.loads(m[cfg_name])
    fqn, meta = next(iter(cfg["config"].items()))
    original = torch.frombuffer(
        bytearray(m[root + "data/weights/" + meta["path_name"]]), dtype=torch.float32
    )
    meta["use_pickle"] = True
    m[cfg_name] = json.dumps(cfg).encode()
    m[root + "data/weights/" + meta["path_name"]] = _torch_save(
        torch.nn.Parameter(original.reshape(16, 3, 3, 3).clone())
    )
    path = _write(tmp_path / "benign.pt2", m)
    with pytest.raises(MscError, match="--trust-pickle"):
        msc.inspect(path)
    report = msc.inspect(path, trust_pickle=True)
    assert report.to_json()["params"] > 0


def test_ordinary_pt2_loads_without_the_flag_and_runs(tmp_path):
    from msc.analysis.model import load_model

    module, args, _ = example_module("cnn")
    path, _, _ = _saved(tmp_path)
    m = load_model(path)
    (out,) = m.run({v.name: a.numpy() for v, a in zip(m.graph.inputs, args)})[0]
    torch.testing.assert_close(torch.from_numpy(out), module(*args), rtol=1e-5, atol=1e-6)


def test_generated_model_that_exits_during_import_is_an_error(tmp_path):
    """A model.py is Python and runs (by design); if it exits, msc says so instead of ending
    with exit 0 and no output."""
    import codegen.torch as cgt
    from msc.examples import small_cnn_graph

    d = tmp_path / "gen"
    cgt.save(small_cnn_graph(), d)
    src = (d / "model.py").read_text()
    (d / "model.py").write_text("raise SystemExit(0)\n" + src)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run(
        [sys.executable, "-m", "msc", "inspect", str(d), "--input-shape", "x=1,3,16,16"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert p.returncode == 2, p.stdout + p.stderr
    assert "SystemExit" in p.stderr and p.stderr.startswith("msc: error: ")
