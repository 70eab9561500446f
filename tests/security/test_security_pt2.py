"""A .pt2 is read without running anything it contains, in bounded time and memory.

Before: ``torch.export.load`` unpickled sample inputs (falling back to ``weights_only=False``),
weights marked ``use_pickle``, custom/opaque-object constants, and gave symbolic expressions
to ``sympy.sympify`` (which evaluates Python): each ran its payload on ``msc inspect``. Its
structure specs import a module the file names (an enum dict key, a defaultdict's factory).
Issue #37: a size expression such as ``9**9**9`` passed the grammar check and sympy hung (or
took gigabytes), and many deflated members, each under the per-member ratio, added up to GBs.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import resource
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

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
    elif case in ("spec_enum", "spec_defaultdict"):
        # Importing this module (a name the file gives) is the payload.
        (tmp_path / f"pwned_{case}.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
        name = root + "models/model.json"
        doc = json.loads(m[name])
        sig = doc["graph_module"]["module_call_graph"][0]["signature"]
        spec = json.loads(sig["in_spec"])
        kwargs = spec[1]["children_spec"][1]  # the keyword-arguments dict
        if case == "spec_enum":
            key = {"__enum__": True, "fqn": f"pwned_{case}:E", "name": "A"}
            kwargs["context"] = json.dumps([key])
        else:
            kwargs["type"] = "collections.defaultdict"  # torch writes its context as an object
            kwargs["context"] = {
                "default_factory_module": f"pwned_{case}",
                "default_factory_name": "f",
                "dict_context": [],
            }
        sig["in_spec"] = json.dumps(spec)
        m[name] = json.dumps(doc).encode()
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
    "spec_enum",
    "spec_defaultdict",
]
# Read without the payload: nothing to refuse (sample inputs are never read; a defaultdict is
# read as the dict it is).
READS = {"sample_inputs_pickle", "sample_inputs_torch_save", "spec_defaultdict"}


@pytest.mark.parametrize("case", CASES)
def test_hostile_pt2_runs_nothing_through_the_api(tmp_path, case, monkeypatch):
    path, marker = _hostile(tmp_path, case)
    monkeypatch.syspath_prepend(str(tmp_path))  # where the spec cases' module is
    try:
        msc.inspect(path)
    except MscError as e:
        if case.startswith(("weight", "opaque")):
            assert "member" in str(e) and "--trust-pickle" in str(e)
    assert not marker.exists(), f"{case}: the payload ran"


@pytest.mark.parametrize("case", CASES)
def test_hostile_pt2_runs_nothing_through_the_command(tmp_path, case):
    path, marker = _hostile(tmp_path, case)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path)]))
    p = subprocess.run(
        [sys.executable, "-m", "msc", "inspect", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert not marker.exists(), f"{case}: the payload ran"
    assert "Traceback" not in p.stderr
    if case in READS:
        assert p.returncode == 0, p.stderr
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


# ---------------------------------------------------------------------- issue #37: bounds
def _limited(*argv: str, limit_mb: int = 2048, timeout: float = 120) -> Any:
    """``msc ARGV`` in a child limited in memory; ``timeout`` is a hang guard."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit_mb << 20, limit_mb << 20))

    return subprocess.run(
        [sys.executable, "-m", "msc", *argv],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        preexec_fn=limit,
        timeout=timeout,
    )


def _one_error(p: Any, *words: str) -> None:
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("msc: error: "), p.stderr
    for w in words:
        assert w in p.stderr, p.stderr


HUGE_EXPRESSIONS = [
    "9**9**9",
    "Pow(Integer(10), Pow(Integer(10), Integer(10)))",
    "Float('1e999999999', precision=53)",
    "Pow(Integer(2), Pow(Integer(10), Integer(10)))",  # 2**10**10: 2.6 GB before
]


@pytest.mark.parametrize("expr", HUGE_EXPRESSIONS)
def test_huge_size_expression_is_refused_in_bounded_time_and_memory(tmp_path, expr):
    _, m, root = _saved(tmp_path, dynamic=True)
    name = root + "models/model.json"
    symbol = "Symbol('s77', positive=True, integer=True)"
    assert symbol in m[name].decode()
    m[name] = m[name].decode().replace(symbol, expr, 1).encode()
    p = _limited("inspect", str(_write(tmp_path / "huge.pt2", m)), timeout=60)
    _one_error(p, "symbolic size expression", "refused")


def test_deflated_members_are_bounded_in_total(tmp_path):
    """Eight deflated weights of zeros, each within what one member may expand to (200x the
    archive before), together far more than the archive may (50x + 16 MiB)."""
    _, m, root = _saved(tmp_path)
    cfg_name = root + "data/weights/model_weights_config.json"
    cfg = json.loads(m[cfg_name])
    base = len(_write(tmp_path / "base.pt2", m).read_bytes())
    size = 150 * base // 4 * 4
    bombs = []
    for meta in list(cfg["config"].values())[:8]:
        meta["tensor_meta"]["sizes"] = [{"as_int": size // 4}]
        meta["tensor_meta"]["strides"] = [{"as_int": 1}]
        bombs.append(root + "data/weights/" + meta["path_name"])
    m[cfg_name] = json.dumps(cfg).encode()
    path = tmp_path / "bomb.pt2"
    zeros = bytes(size)
    with zipfile.ZipFile(path, "w") as z:
        for k, v in m.items():
            if k in bombs:
                z.writestr(k, zeros, compress_type=zipfile.ZIP_DEFLATED)
            else:
                z.writestr(k, v)
    archive = path.stat().st_size
    assert size < 200 * archive and 8 * size > 50 * archive + (16 << 20)  # the premise
    p = _limited("inspect", str(path), timeout=60)
    _one_error(p, "times its size")
