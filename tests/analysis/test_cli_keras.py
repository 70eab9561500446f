"""The Keras user path through the CLI (issue 32): a saved ExportedProgram of a tiny GPT-2
(transformers, from config: tied embeddings and a position table, so the generated Keras uses
SourceWeight layers) -> ``msc convert --to keras`` as a ``.keras`` file and as a source
directory -> each output given to ``msc inspect`` / ``convert`` / ``verify`` / ``diff`` again.
Exit codes, stderr and numbers are checked; the .keras file is also run against eager
transformers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
torch = pytest.importorskip("torch")
pytest.importorskip("keras", reason="the keras extra is not installed")
transformers = pytest.importorskip("transformers", reason="a tiny GPT-2 from its config")

import msc  # noqa: E402
from tests.analysis.test_cli import run  # noqa: E402
from tests.tflite_cases import run_torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory) -> tuple[Path, torch.nn.Module, dict]:
    cfg = transformers.GPT2Config(
        n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=32, use_cache=False
    )
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    inputs = {"input_ids": torch.randint(0, 64, (1, 8))}
    path = tmp_path_factory.mktemp("gpt2") / "gpt2.pt2"
    torch.export.save(torch.export.export(model, (), inputs), path)
    return path, model, inputs


def _json(p: subprocess.CompletedProcess) -> dict:
    assert p.stderr == "", p.stderr
    return json.loads(p.stdout)


def _max_abs(report: dict) -> float:
    assert report["ok"], report
    return max(o["max_abs"] for o in report["outputs"])


def test_pt2_to_keras_file_and_back_through_the_cli(gpt2, tmp_path):
    pt2, model, inputs = gpt2
    kf = tmp_path / "gpt2.keras"
    report = _json(run("convert", pt2, "-o", kf, "--json"))
    assert report["ok"] and _max_abs(report["numeric"]) < 1e-5, report
    # -o *.keras is a Keras file, msc's mark in its metadata, with a SourceWeight layer
    assert zipfile.is_zipfile(kf)
    assert b'"generator": "msc codegen.keras"' in kf.read_bytes()[:200]
    assert b'"registered_name": "msc>SourceWeight"' in zipfile.ZipFile(kf).read("config.json")
    # read back (its SourceWeight built by msc's class, nothing in the file run)
    info = _json(run("inspect", kf, "--json"))
    assert info["inputs"][0]["name"] == "input_ids", info
    assert _max_abs(_json(run("verify", pt2, kf, "--json"))) < 1e-5
    # against transformers itself (eager PyTorch), not only against msc's reading of the .pt2
    got = run_torch(msc.from_keras(kf), [inputs["input_ids"].numpy()])
    with torch.no_grad():
        ref = model(**inputs).logits.numpy()
    np.testing.assert_allclose(got[0], ref, atol=1e-4, rtol=1e-4)
    # a .keras file msc did not write is not replaced
    theirs = tmp_path / "theirs.keras"
    theirs.write_bytes(kf.read_bytes().replace(b"msc codegen.keras", b"someone elses....", 1))
    p = run("convert", pt2, "-o", theirs, ok=2)
    assert p.stderr.startswith("msc: error: ") and "not a file msc wrote" in p.stderr


def test_keras_outputs_given_to_the_cli_again(gpt2, tmp_path):
    """The .keras file and the source directory: the same graph (the flat source's) or the
    same computation (the blocks'); both convert onwards; msc's own .keras file is replaced
    by a new conversion."""
    pt2, _, _ = gpt2
    kf, kdir = tmp_path / "gpt2.keras", tmp_path / "gpt2_keras"
    run("convert", pt2, "-o", kf)
    report = _json(run("convert", pt2, "-o", kdir, "--to", "keras", "--json"))
    assert report["ok"] and _max_abs(report["numeric"]) < 1e-5, report
    assert sorted(p.name for p in kdir.iterdir() if not p.name.startswith(".")) == [
        "model.py",
        "model.weights.npz",
    ]
    # the flat source is the .keras file's graph; the blocks' (each block's call read as its
    # layers and ops, in its own order) the same computation
    run("convert", pt2, "-o", tmp_path / "flat", "--to", "keras", "--flat")
    diff = run("diff", kf, tmp_path / "flat")
    assert diff.stderr == "" and "structurally equal: yes" in diff.stdout, diff.stdout
    diff = run("diff", kf, kdir)
    assert diff.stderr == "" and diff.stdout.startswith("verdict: equivalent"), diff.stdout
    for src, out in ((kf, "from_file_torch"), (kdir, "from_dir_torch")):
        report = _json(run("convert", src, "-o", tmp_path / out, "--json"))
        assert report["ok"] and _max_abs(report["numeric"]) < 1e-5, report
    run("convert", pt2, "-o", kf)  # msc's own file: replaced


def test_keras_blocks_and_flat_through_the_cli(gpt2, tmp_path):
    """``--to keras`` writes GPT-2's two blocks as one Layer class called in a loop, its check
    reading the class back; ``--flat`` writes the functional model alone."""
    pt2, _, _ = gpt2
    for flags, classes in (((), ["GPT2Block"]), (("--flat",), [])):
        out = tmp_path / f"keras{len(flags)}"
        report = _json(run("convert", pt2, "-o", out, "--to", "keras", "--json", *flags))
        assert report["ok"] and _max_abs(report["numeric"]) < 1e-5, report
        src = (out / "model.py").read_text()
        found = [line.split("(")[0][6:] for line in src.splitlines() if line.startswith("class ")]
        assert [c for c in found if c not in ("SourceWeight", "Sized")] == classes
        assert ("    for layer in transformer_h:" in src) == bool(classes)
    p = run("convert", pt2, "-o", tmp_path / "o.onnx", "--flat", ok=2)
    assert "--flat applies to the torch, relax, keras and jax targets only" in p.stderr


@pytest.mark.slow
def test_keras_file_through_the_cli_in_subprocesses(gpt2, tmp_path):
    """The same path as a user runs it: separate processes, stderr empty."""
    pt2, _, _ = gpt2
    kf = tmp_path / "gpt2.keras"
    env = dict(os.environ, PYTHONPATH=str(ROOT), KERAS_BACKEND="torch")

    def msc_cli(*args) -> subprocess.CompletedProcess:
        p = subprocess.run(
            [sys.executable, "-m", "msc", *map(str, args)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=300,
        )
        assert p.returncode == 0, p.stderr
        assert p.stderr == "", p.stderr
        return p

    msc_cli("convert", pt2, "-o", kf)
    assert "(keras)" in msc_cli("inspect", kf).stdout
    report = json.loads(msc_cli("verify", pt2, kf, "--json").stdout)
    assert _max_abs(report) < 1e-5
    msc_cli("convert", kf, "-o", tmp_path / "back_torch")


def test_a_real_change_in_the_keras_output_fails_the_conversion(tmp_path, monkeypatch):
    """The keras target's check blocks as the other targets' do: an output that reads back
    with a ReLU as LeakyReLU(0) (the same values, another op: a real change to diff) fails
    the conversion and writes nothing; --allow-changes writes it."""
    import importlib

    conv = importlib.import_module("msc.analysis.convert")  # the module, not msc.convert
    write = conv._write

    def changing(g, target, dest, *args):
        from msc.ir.graph import Node
        from msc.ops.rewrite import copy_graph

        g = copy_graph(g)
        at, relu = next((k, n) for k, n in enumerate(g.nodes) if n.op == "relu")
        leaky = Node("leaky_relu", relu.inputs, {"negative_slope": 0.0}, name=relu.name)
        g.nodes.insert(at, leaky)
        relu.output.replace_all_uses_with(leaky.output)
        g.remove_node(relu)
        write(g, target, dest, *args)

    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).eval()
    pt2 = tmp_path / "mlp.pt2"
    torch.export.save(torch.export.export(m, (torch.randn(3, 4),)), pt2)
    monkeypatch.setattr(conv, "_write", changing)
    for out in (tmp_path / "mlp.keras", tmp_path / "mlp_keras"):
        p = run("convert", pt2, "-o", out, "--to", "keras", ok=1)
        assert "1 real change" in p.stdout and "op relu -> leaky_relu" in p.stdout, p.stdout
        assert "check: outputs match" in p.stdout and "--allow-changes" in p.stdout, p.stdout
        assert not out.exists()
        run("convert", pt2, "-o", out, "--to", "keras", "--allow-changes")
        assert out.exists()
    monkeypatch.setattr(conv, "_write", write)  # as written: equivalent, and written
    p = run("convert", pt2, "-o", tmp_path / "ok.keras")
    assert "re-imported output is equ" in p.stdout, p.stdout
