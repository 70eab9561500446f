"""``msc batch`` / ``msc.batch``: a collection of test models, each in its own worker process,
locally and on a local Ray instance (2 CPUs): conversions checked against onnxruntime, a
model whose code kills its worker, one that hangs past its time limit, one over its memory
limit, one with unsupported ops; the JSON report; resuming."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import msc
from msc.analysis.batch import digest, format_batch
from msc.errors import MscError
from msc.examples import onnx_example, small_cnn_graph
from tests.analysis.test_cli import _unsupported_onnx, run

ROOT = Path(__file__).resolve().parents[2]


def _code_model(d: Path, source: str) -> Path:
    """A generated-PyTorch-style directory (model.py + model.safetensors): its model.py is
    Python that msc imports, in the worker."""
    d.mkdir()
    (d / "model.py").write_text(source)
    (d / "model.safetensors").write_bytes(b"")
    return d


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    import onnx

    d = tmp_path_factory.mktemp("collection")
    onnx.save(onnx_example(), d / "cnn.onnx")
    msc.save(small_cnn_graph(), d / "small_cnn")
    msc.save(msc.from_onnx(d / "cnn.onnx"), d / "cnn_copy.msc")
    _unsupported_onnx(d / "unsupported.onnx")
    _code_model(d / "crash", "import os\nos._exit(7)\n")
    _code_model(d / "segv", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    _code_model(d / "hang", "import time\ntime.sleep(1000)\n")
    _code_model(d / "bigmem", "block = bytearray(3 * 1024**3)\n")
    return d


def _onnx_vs_torch_dir(onnx_path: Path, torch_dir: Path) -> float:
    """Max abs difference between onnxruntime on the source and the generated module."""
    import onnxruntime as ort
    import torch

    from msc.analysis.model import _import_file

    x = np.random.default_rng(3).standard_normal((2, 3, 16, 16)).astype(np.float32)
    ref = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"]).run(
        None, {"image": x}
    )[0]
    module = _import_file(torch_dir / "model.py", "load")()
    with torch.no_grad():
        got = module(torch.from_numpy(x)).numpy()
    return float(np.abs(got - ref).max())


@pytest.mark.slow  # worker processes that crash and hang: ~22 s
def test_local_batch_survives_crash_hang_memory_and_unsupported_ops(models, tmp_path):
    manifest = {
        "defaults": {"to": "torch"},
        "models": [
            "cnn.onnx",
            {"model": "small_cnn", "to": "onnx"},
            {"model": "cnn.onnx", "name": "cnn-inspect", "task": "inspect"},
            {
                "model": "cnn.onnx",
                "name": "cnn-verify",
                "task": "verify",
                "against": "cnn_copy.msc",
            },
            {"model": "unsupported.onnx", "task": "inspect"},
            "crash",
            "segv",
            {"model": "hang", "timeout": 12},
            {"model": "bigmem", "memory": "2GiB"},
        ],
    }
    path = models / "batch.json"
    path.write_text(json.dumps(manifest))
    out = tmp_path / "out"
    p = run("batch", path, "-o", out, "-j", "2", ok=1)
    status = {m["name"]: m for m in json.loads((out / "batch-report.json").read_text())["models"]}
    assert {k: v["status"] for k, v in status.items()} == {
        "cnn.onnx": "ok",
        "small_cnn": "ok",
        "cnn-inspect": "ok",
        "cnn-verify": "ok",
        "unsupported.onnx": "error",
        "crash": "crashed",
        "segv": "crashed",
        "hang": "timeout",
        "bigmem": "error",
    }
    # the table ends with the count of each status
    assert "4 ok, 2 error, 2 crashed, 1 timeout" in p.stdout, p.stdout
    assert "exited with code 7" in status["crash"]["message"]
    assert "SIGSEGV" in status["segv"]["message"]
    assert "12 s" in status["hang"]["message"] and status["hang"]["seconds"] < 60
    assert "MemoryError" in status["bigmem"]["message"]
    msg = status["unsupported.onnx"]["message"]
    assert "'first'" in msg and "'second'" in msg  # every unsupported node, not the first
    # outputs mirror the model paths and are what the source computes
    assert _onnx_vs_torch_dir(models / "cnn.onnx", out / "cnn_torch") < 1e-4
    assert (out / "small_cnn.onnx").is_file()
    assert status["cnn-inspect"]["result"]["params"] == 1477
    assert status["cnn-verify"]["result"]["ok"] is True


@pytest.mark.slow  # two batch runs: ~17 s
def test_report_records_hashes_and_rerun_resumes(models, tmp_path):
    out = tmp_path / "out"
    entries = ["cnn.onnx", {"model": "cnn.onnx", "name": "info", "task": "inspect"}]
    r1 = msc.batch([str(models / "cnn.onnx"), {**entries[1], "model": str(models / "cnn.onnx")}],
                   out, to="torch", jobs=2)  # fmt: skip
    assert r1.ok and r1.counts == {"ok": 2}
    data = json.loads((out / "batch-report.json").read_text())
    assert data["msc_batch"] == 1 and data["counts"] == {"ok": 2} and data["runner"] == "local"
    conv = data["models"][0]
    assert conv["task"] == "convert" and conv["target"] == "torch"
    assert conv["output_files"] == ["cnn_torch/model.py", "cnn_torch/model.safetensors"]
    assert conv["output_sha256"] == digest(
        [out / f for f in conv["output_files"]], out
    )  # the verified output, as written
    assert conv["input_sha256"] == digest([models / "cnn.onnx"], models)
    assert conv["result"]["numeric"]["ok"] and conv["result"]["checked"]
    # rerun: nothing changed, nothing runs
    again = [str(models / "cnn.onnx"), {**entries[1], "model": str(models / "cnn.onnx")}]
    r2 = msc.batch(again, out, to="torch")
    assert [m["status"] for m in r2.models] == ["skipped", "skipped"]
    assert r2.models[0]["output_sha256"] == conv["output_sha256"]
    # an output edited since is the user's: nothing runs, the edit stays; once it is moved
    # away, that model is converted again and the other stays skipped
    (out / "cnn_torch" / "model.py").write_text("# edited\n")
    with pytest.raises(MscError, match="model.py changed since msc wrote it"):
        msc.batch(again, out, to="torch")
    assert (out / "cnn_torch" / "model.py").read_text() == "# edited\n"
    (out / "cnn_torch").rename(tmp_path / "kept")
    seen: list = []
    r3 = msc.batch(again, out, to="torch", progress=lambda e, r: seen.append(e and e["status"]))
    assert [m["status"] for m in r3.models] == ["ok", "skipped"]
    assert seen == [None, "ok"]  # the plan, then each model that ran
    assert "edited" not in (out / "cnn_torch" / "model.py").read_text()
    assert (tmp_path / "kept" / "model.py").read_text() == "# edited\n"
    # other options are another job; --no-resume redoes everything
    r4 = msc.batch(again, out, to="torch", resume=False)
    assert [m["status"] for m in r4.models] == ["ok", "ok"]
    assert "skipped" in format_batch(r2) and "report:" in format_batch(r2)


def test_bad_manifest_lists_every_problem_and_runs_nothing(models, tmp_path):
    bad = {
        "colour": 1,
        "models": [
            {"model": "cnn.onnx", "name": "v", "task": "verify"},
            {"model": "cnn.onnx", "name": "t", "to": "coreml"},
            {"model": "a.onnx", "frobnicate": True},
            {"model": "cnn.onnx", "name": "s", "timeout": "soon"},
            {"model": "cnn.onnx", "name": "n", "timeout": -3},
            "cnn.onnx",
            "cnn.onnx",
        ],
    }
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(MscError) as e:
        msc.batch(path, tmp_path / "out")
    text = str(e.value)
    needles = ("'colour'", "against'", "'coreml'", "'frobnicate'", "bad value", "> 0", "twice")
    for needle in needles:
        assert needle in text, text
    assert not (tmp_path / "out").exists()
    p = run("batch", path, "-o", tmp_path / "out", ok=2)
    assert p.stderr.startswith("msc: error: ") and "bad manifest" in p.stderr


def test_a_file_that_is_not_a_batch_report_is_never_replaced(models, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "batch-report.json").write_text('{"mine": true}')
    with pytest.raises(MscError, match="not an msc batch report"):
        msc.batch([str(models / "cnn.onnx")], out)
    assert (out / "batch-report.json").read_text() == '{"mine": true}'


def test_directory_and_yaml_manifest(models, tmp_path):
    yaml = pytest.importorskip("yaml")
    d = tmp_path / "zoo"
    d.mkdir()
    (d / "cnn.onnx").write_bytes((models / "cnn.onnx").read_bytes())
    (d / "notes.txt").write_text("not a model")
    r = msc.batch(d, tmp_path / "zoo_out")  # no target: inspect each model
    assert [(m["name"], m["task"], m["status"]) for m in r.models] == [
        ("cnn.onnx", "inspect", "ok")
    ]
    m = tmp_path / "m.yaml"
    m.write_text(
        yaml.safe_dump({"output": "yout", "models": [{"model": "zoo/cnn.onnx", "to": "msc"}]})
    )
    r = msc.batch(m)
    assert r.ok and (tmp_path / "yout" / "zoo" / "cnn.msc" / "graph.msc").is_file()


def test_directory_of_keras_h5_files(tmp_path, monkeypatch):
    # A legacy Keras model file (.h5, as Keras 3's model.save writes one) is a model of the
    # directory; Keras' save_weights file beside it (.weights.h5: no config) is not.
    monkeypatch.setenv("KERAS_BACKEND", "torch")
    keras = pytest.importorskip("keras", reason="the keras extra is not installed")
    d = tmp_path / "zoo"
    d.mkdir()
    inp = keras.Input((4,), name="x")
    model = keras.Model(inp, keras.layers.Dense(3, name="fc")(inp))
    model.save(d / "dense.h5")
    model.save_weights(d / "dense.weights.h5")
    r = msc.batch(d, tmp_path / "zoo_out")  # no target: inspect each model
    assert [(m["name"], m["task"], m["status"]) for m in r.models] == [
        ("dense.h5", "inspect", "ok")
    ], r.models


@pytest.mark.slow  # starts Ray: ~16 s
def test_ray_batch_on_a_local_instance(models, tmp_path):
    ray = pytest.importorskip("ray")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},
    )
    try:
        entries = [
            {"model": str(models / "cnn.onnx"), "to": "onnx", "output": "cnn.onnx"},
            str(models / "crash"),
            {"model": str(models / "hang"), "timeout": 8},
        ]
        r = msc.batch(entries, tmp_path / "out", to="torch", ray=True)
    finally:
        ray.shutdown()
    assert r.runner == "ray"
    assert [m["status"] for m in r.models] == ["ok", "crashed", "timeout"]
    data = json.loads((tmp_path / "out" / "batch-report.json").read_text())
    assert data["runner"] == "ray" and data["counts"] == {"ok": 1, "crashed": 1, "timeout": 1}
    assert data["models"][0]["result"]["numeric"]["ok"]
    assert (tmp_path / "out" / "cnn.onnx").is_file()
