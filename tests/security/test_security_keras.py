"""Hostile .keras files: a Lambda layer (marshalled Python bytecode) and custom objects are
refused by name without running anything; truncated or garbage files give one ``msc: error:``
line; layer names that are code stay names in generated Keras source. codegen.keras' own
SourceWeight layer (registered as msc>SourceWeight) reads back, built by msc's class; hostile
values in its config and classes named like it are refused."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tokenize
import zipfile
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
keras = pytest.importorskip("keras", reason="the keras extra (keras 3) is not installed")
torch = pytest.importorskip("torch")

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


# codegen.keras' SourceWeight (a weight used as an operand), registered as "msc>SourceWeight":
# a .keras file holding it is read, the layer built by msc's own class from a config checked as
# data; hostile values in that config, and classes named like it, are refused.


def _source_weight_file(path: Path, name: str = "table") -> tuple[Path, np.ndarray]:
    """A generated Keras model ``x + table`` (``table`` a SourceWeight), saved as .keras."""
    import codegen.keras

    table = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
    g = msc.from_torch(_AddTable(table), (torch.zeros(2, 4),))
    gen = codegen.keras.to_model(g)  # registers the generated class, as importing model.py does
    sw = [la for la in gen.layers if type(la).__name__ == "SourceWeight"]
    assert len(sw) == 1, [type(la).__name__ for la in gen.layers]
    inp = keras.Input((4,), batch_size=2, name="x")
    layer = type(sw[0])((2, 4), "float32", name=name)
    out = keras.layers.Add(name="add")([inp, layer(inp)])
    model = keras.Model(inp, out)
    layer.set_weights([table])
    model.save(path)
    return path, table


class _AddTable(torch.nn.Module):
    def __init__(self, table):
        super().__init__()
        self.table = torch.nn.Parameter(torch.from_numpy(table))

    def forward(self, x):
        return x + self.table


def _edit_config(src: Path, dst: Path, edit) -> Path:
    """``src`` with its config.json's SourceWeight entry changed by ``edit(entry)``."""
    import json

    with zipfile.ZipFile(src) as z, zipfile.ZipFile(dst, "w") as out:
        for item in z.infolist():
            data = z.read(item)
            if item.filename == "config.json":
                config = json.loads(data)
                (entry,) = [
                    la
                    for la in config["config"]["layers"]
                    if la.get("registered_name") == "msc>SourceWeight"
                ]
                edit(entry)
                data = json.dumps(config).encode()
            out.writestr(item, data)
    return dst


def test_msc_source_weight_reads_back_with_mscs_class(tmp_path):
    from msc.frontend.keras import load_keras
    from msc.frontend.keras.importer import msc_layers
    from tests.tflite_cases import run_torch

    f, table = _source_weight_file(tmp_path / "gen.keras")
    model = load_keras(f)
    (layer,) = [la for la in model.layers if type(la).__name__ == "SourceWeight"]
    # msc's class, not the generated one registered in this process nor the file's module
    assert type(layer) is msc_layers()["msc>SourceWeight"]
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    (got,) = run_torch(msc.from_keras(f), [x])
    np.testing.assert_array_equal(got, x + table)  # one add: exact


HOSTILE_SOURCE_WEIGHT = {
    "huge_shape": lambda e: e["config"].update(shape=[1 << 40, 1 << 40]),
    "shape_beyond_the_weights": lambda e: e["config"].update(shape=[4096, 4096]),
    "negative_size": lambda e: e["config"].update(shape=[-1, 4]),
    "float_size": lambda e: e["config"].update(shape=[2.5, 4]),
    "bool_size": lambda e: e["config"].update(shape=[True, 4]),
    "shape_as_code": lambda e: e["config"].update(shape="__import__('os').system('id')"),
    "rank_17": lambda e: e["config"].update(shape=[1] * 17),
    "dtype_object": lambda e: e["config"].update(value_dtype="object"),
    "dtype_code": lambda e: e["config"].update(value_dtype="__import__('os')"),
    "dtype_not_a_string": lambda e: e["config"].update(value_dtype={"class_name": "X"}),
    "name_not_a_string": lambda e: e["config"].update(name=["x"]),
    "extra_key": lambda e: e["config"].update(initializer="orthogonal"),
    "no_config": lambda e: e.update(config=None),
    "other_class_under_our_name": lambda e: e.update(class_name="Evil"),
}


@pytest.mark.parametrize("how", sorted(HOSTILE_SOURCE_WEIGHT))
def test_hostile_source_weight_config_is_refused(tmp_path, how):
    good, _ = _source_weight_file(tmp_path / "good.keras")
    f = _edit_config(good, tmp_path / f"{how}.keras", HOSTILE_SOURCE_WEIGHT[how])
    with pytest.raises(BadModelError, match="refused.*msc>SourceWeight"):
        msc.from_keras(f)


def test_hostile_source_weight_is_one_error_line(tmp_path):
    good, _ = _source_weight_file(tmp_path / "good.keras")
    f = _edit_config(good, tmp_path / "huge.keras", HOSTILE_SOURCE_WEIGHT["huge_shape"])
    line = _one_error(_cli(f))
    assert "huge.keras" in line and "msc>SourceWeight" in line and "bytes" in line


NEAR_NAMES = {
    "plural": {"registered_name": "msc>SourceWeights"},
    "case": {"registered_name": "MSC>SourceWeight"},
    "other_package": {"registered_name": "msc2>SourceWeight"},
    # as a generated model.py before it registered the class: its module, not msc's name
    "unregistered": {"registered_name": "SourceWeight", "module": "msc_generated_keras"},
    "msc_module": {"registered_name": None, "module": "msc.frontend.keras.importer"},
    "name_in_a_list": {"registered_name": ["msc>SourceWeight"]},
}


@pytest.mark.parametrize("how", sorted(NEAR_NAMES))
def test_classes_named_like_source_weight_are_refused(tmp_path, how):
    good, _ = _source_weight_file(tmp_path / "good.keras")
    f = _edit_config(good, tmp_path / f"{how}.keras", lambda e: e.update(NEAR_NAMES[how]))
    with pytest.raises(BadModelError, match="refused.*SourceWeight 'table'"):
        msc.from_keras(f)


def test_source_weight_name_that_is_code_stays_a_name(tmp_path, monkeypatch):
    import codegen.keras
    import codegen.torch

    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "msc_keras_ran"
    name = "getattr(__import__('os'),'system')('touch msc_keras_ran')"
    f, table = _source_weight_file(tmp_path / "named.keras", name=name)
    g = msc.from_keras(f)
    assert f"{name}/value" in g.weights
    for src in (codegen.keras.generate(g), codegen.torch.generate(g)):
        assert "__import__" in src  # the name is kept, as a string: outside strings, nowhere
        code = [
            t.string
            for t in tokenize.generate_tokens(io.StringIO(src).readline)
            if t.type not in (tokenize.STRING, tokenize.COMMENT)
        ]
        # sanitized identifiers (getattr___import___...) or strings hold it, never the calls
        assert not {"__import__", "system"} & set(code)
    codegen.keras.to_model(g)
    assert not marker.exists()


@pytest.mark.parametrize("cls", ["TorchModuleWrapper", "TFSMLayer", "JaxLayer", "FlaxLayer"])
def test_layers_that_wrap_code_are_refused_by_name(tmp_path, cls, monkeypatch):
    """Keras' own layers that wrap a pickled torch module, a SavedModel or a JAX function:
    refused by msc before Keras sees the file, not left to Keras' safe mode."""
    import json

    good = _small(tmp_path / "good.keras")
    f = tmp_path / f"{cls}.keras"
    with zipfile.ZipFile(good) as z, zipfile.ZipFile(f, "w") as out:
        for item in z.infolist():
            data = z.read(item)
            if item.filename == "config.json":
                config = json.loads(data)
                (fc,) = [la for la in config["config"]["layers"] if la["config"]["name"] == "fc"]
                fc["class_name"] = cls
                data = json.dumps(config).encode()
            out.writestr(item, data)
    monkeypatch.setattr(keras.saving, "load_model", lambda *a, **k: pytest.fail("loaded"))
    with pytest.raises(BadModelError, match=f"{cls} 'fc' \\(wraps code"):
        msc.from_keras(f)
