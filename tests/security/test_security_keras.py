"""Hostile .keras files: a Lambda layer (marshalled Python bytecode) and custom objects are
refused by name without running anything; truncated or garbage files give one ``msc: error:``
line; layer names that are code stay names in generated Keras source."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
keras = pytest.importorskip("keras", reason="the keras extra (keras 3) is not installed")

import msc  # noqa: E402
from msc.errors import BadModelError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _cli(path: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, KERAS_BACKEND="torch")
    return subprocess.run(
        [sys.executable, "-m", "msc", "inspect", str(path), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env=env,
    )


def _one_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines and lines[0].startswith("msc: error: "), r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


def _small(path: Path) -> Path:
    inp = keras.Input((4,), name="x")
    keras.Model(inp, keras.layers.Dense(2, name="fc")(inp)).save(path)
    return path


def test_lambda_layer_is_refused_without_running_it(tmp_path):
    marker = tmp_path / "ran"

    def touch(x, marker=str(marker)):
        open(marker, "w").close()
        return x

    inp = keras.Input((4,), name="x")
    model = keras.Model(inp, keras.layers.Lambda(touch, name="payload")(inp))
    f = tmp_path / "lambda.keras"
    model.save(f)
    marker.unlink()  # building the model ran it once; loading must not
    with pytest.raises(BadModelError, match="Lambda 'payload'"):
        msc.from_keras(f)
    line = _one_error(_cli(f))
    assert "Lambda" in line and "payload" in line
    assert not marker.exists()


@keras.saving.register_keras_serializable(package="Hostile")
class Custom(keras.layers.Layer):
    def call(self, x):
        return x


def test_custom_objects_are_refused_by_name(tmp_path):
    inp = keras.Input((4,), name="x")
    f = tmp_path / "custom.keras"
    keras.Model(inp, Custom(name="mine")(inp)).save(f)
    with pytest.raises(BadModelError, match="Custom 'mine'"):
        msc.from_keras(f)


@pytest.mark.parametrize("how", ["truncated", "garbage", "no_config", "bad_json"])
def test_broken_files_give_one_error_line(tmp_path, how):
    good = _small(tmp_path / "good.keras")
    f = tmp_path / f"{how}.keras"
    data = good.read_bytes()
    if how == "truncated":
        f.write_bytes(data[: len(data) // 2])
    elif how == "garbage":
        f.write_bytes(b"\x00garbage" * 100)
    else:
        with zipfile.ZipFile(good) as src, zipfile.ZipFile(f, "w") as dst:
            for item in src.infolist():
                if item.filename == "config.json":
                    if how == "bad_json":
                        dst.writestr(item, b"{not json")
                    continue
                dst.writestr(item, src.read(item))
    with pytest.raises(BadModelError):
        msc.from_keras(f)
    line = _one_error(_cli(f))
    assert f.name in line


def test_names_that_are_code_stay_names(tmp_path, monkeypatch):
    import codegen.keras

    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "msc_keras_ran"
    # Keras refuses '/' in names, and on torch '.' too
    name = "getattr(__import__('os'),'system')('touch msc_keras_ran')"
    inp = keras.Input((4,), name="x")
    g = msc.from_keras(keras.Model(inp, keras.layers.Dense(2, name=name)(inp)))
    assert g.outputs[0].name == name
    src = codegen.keras.generate(g)
    codegen.keras.to_model(g)
    assert not marker.exists()
    assert name not in src.replace(repr(name), "")
