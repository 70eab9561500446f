"""Hostile legacy Keras ``.h5`` files (msc.frontend.keras.legacy), the .keras cases again: huge
sizes with small stored weights, a Lambda layer's marshalled bytecode, custom class names,
declared datasets the file does not hold, deep nesting, truncated and garbage files. Each is
refused with one error (one ``msc: error:`` line from the CLI) before Keras builds anything,
or, for an input size only Keras' building knows, before any variable is allocated; in
bounded memory (the CLI under a 3 GiB limit)."""

from __future__ import annotations

import copy
import json
import os
import tracemalloc
from pathlib import Path

import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
keras = pytest.importorskip("keras", reason="the keras extra (keras 3) is not installed")
h5py = pytest.importorskip("h5py", reason="the keras extra (h5py) is not installed")

import msc  # noqa: E402
from msc.errors import BadModelError  # noqa: E402
from tests import keras2_files as k2  # noqa: E402
from tests.security import hang_guard, one_error, run_child  # noqa: E402

BIG = 10**5


def _layer(config: dict, name: str) -> dict:
    (entry,) = [la for la in config["config"]["layers"] if la["config"]["name"] == name]
    return entry


def _set(name: str, **kw):
    return lambda c, w: _layer(c, name)["config"].update(kw)


def _payload(marker: Path):
    def touch(x, marker=str(marker)):
        open(marker, "w").close()
        return x

    return touch


def _lambda(c, w, marker=None):
    entry = k2.lambda_layer("payload", _payload(marker or Path("/nonexistent/ran")))
    _layer(c, "dense")["inbound_nodes"] = [[["payload", 0, 0, {}]]]
    entry = dict(entry, name="payload", inbound_nodes=[[["global_average_pooling2d", 0, 0, {}]]])
    c["config"]["layers"].insert(-1, entry)


def _custom(cls: str):
    def edit(c, w):
        _layer(c, "conv2d")["class_name"] = cls

    return edit


def _initializer(c, w):
    _layer(c, "dense")["config"]["kernel_initializer"] = {"class_name": "Evil", "config": {}}


def _module(c, w):
    _layer(c, "dense")["config"]["activation"] = {
        "module": "os", "class_name": "system", "config": "id", "registered_name": "system"
    }  # fmt: skip


# case -> (model, edit of (config, weights), the words the error must hold)
HOSTILE = {
    "dense_units": ("cnn", _set("dense", units=10**12), ["Dense 'dense'", "units="]),
    "conv_filters": ("cnn", _set("conv2d", filters=10**9), ["Conv2D 'conv2d'", "filters="]),
    "conv_kernel_size": ("cnn", _set("conv2d", kernel_size=[BIG, BIG]), ["Conv2D", "kernel_s"]),
    "lstm_units": ("recurrent", _set("lstm", units=10**8), ["LSTM 'lstm'", "units="]),
    "gru_units": ("recurrent", _set("gru", units=10**8), ["GRU 'gru'", "units="]),
    "input_shape": (
        "cnn", _set("input_1", batch_input_shape=[None, BIG, BIG, 3]),
        ["InputLayer 'input_1'", "batch_input_shape"],
    ),
    "first_layer_input_shape": (
        "recurrent", _set("lstm", batch_input_shape=[None, BIG, BIG]),
        ["LSTM 'lstm'", "batch_input_shape"],
    ),
    "size_as_text": ("cnn", _set("dense", units="1e12"), ["Dense 'dense'", "not a size"]),
    "lambda_bytecode": ("cnn", _lambda, ["Lambda 'payload'", "runs Python"]),
    "custom_class": ("cnn", _custom("MyConv"), ["MyConv 'conv2d'", "custom object"]),
    "registered_custom_class": ("cnn", _custom("HostileH5>Custom"), ["HostileH5>Custom"]),
    "custom_initializer": ("cnn", _initializer, ["Evil", "custom object"]),
    "torch_module_pickle": ("cnn", _custom("TorchModuleWrapper"), ["TorchModuleWrapper", "pickle"]),
    "saved_model_layer": ("cnn", _custom("TFSMLayer"), ["TFSMLayer 'conv2d'", "wraps code"]),
    "keras2_only_layer": ("cnn", _custom("CuDNNLSTM"), ["CuDNNLSTM", "Keras 3 dropped"]),
    "module_outside_keras": ("cnn", _module, ["system", "module 'os'"]),
}  # fmt: skip


@keras.saving.register_keras_serializable(package="HostileH5")
class Custom(keras.layers.Layer):
    """Registered in this process: a file naming it must not get it."""

    def call(self, x):
        return x


def _file(tmp_path: Path, model: str, edit=None, name: str = "m.h5") -> Path:
    config, weights, _ = {"cnn": k2.cnn, "recurrent": k2.recurrent}[model]()
    if edit is not None:
        edit(config, weights)
    return k2.write(tmp_path / name, config, weights)


@pytest.fixture
def never_built(monkeypatch):
    """Keras' builder fails the test if msc hands it the config."""
    from keras.src.legacy.saving import saving_utils

    monkeypatch.setattr(saving_utils, "model_from_config", lambda *a, **k: pytest.fail("built"))
    monkeypatch.setattr(keras.saving, "load_model", lambda *a, **k: pytest.fail("loaded"))


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_h5_is_refused_before_keras_builds(tmp_path, case, never_built):
    model, edit, words = HOSTILE[case]
    f = _file(tmp_path, model, edit, f"{case}.h5")
    tracemalloc.start()
    try:
        with pytest.raises(BadModelError) as e, hang_guard(f"reading {case}"):
            msc.from_keras(f)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, peak
    msg = str(e.value)
    assert msg.startswith(f"{f}: refused") and "\n" not in msg, msg
    for w in words:
        assert w in msg, msg


def test_lambda_bytecode_is_never_unmarshalled(tmp_path, monkeypatch):
    """Keras 2's Lambda holds marshalled bytecode: msc refuses it by name, so Keras' func_load
    (marshal.loads) is never reached and the function never runs."""
    from keras.src.utils import python_utils

    monkeypatch.setattr(python_utils, "func_load", lambda *a, **k: pytest.fail("unmarshalled"))
    marker = tmp_path / "ran"
    f = _file(tmp_path, "cnn", lambda c, w: _lambda(c, w, marker), "lambda.h5")
    with pytest.raises(BadModelError, match="Lambda 'payload'"):
        msc.from_keras(f)
    line = one_error(*_cli(f))
    assert "Lambda" in line and "payload" in line
    assert not marker.exists()


def _cli(f: Path) -> tuple[int, str]:
    from tests.security import run_cli

    code, _, err = run_cli("inspect", str(f))
    return code, err


def _input_too_wide(c, w):
    # sizes within the budget (2**26 elements), but an LSTM built on 2**26 features holds a
    # kernel of 2**26 x 24 floats (6 GiB): only building the model tells, as Keras 2 files
    # state no layer's input size; the file stores the kernel as (4, 24)
    _layer(c, "lstm")["config"]["batch_input_shape"] = [None, 1, 1 << 26]


def test_input_size_only_building_knows_is_refused_before_allocation(tmp_path):
    f = _file(tmp_path, "recurrent", _input_too_wide, "wide.h5")
    tracemalloc.start()
    try:
        with pytest.raises(BadModelError) as e:
            msc.from_keras(f)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, peak
    msg = str(e.value)
    assert "refused, a layer would build weights the file does not store" in msg, msg
    assert "LSTM 'lstm' builds [(67108864, 24)" in msg and "(4, 24)" in msg, msg
    # nothing of it waits to be allocated by the next model Keras builds
    keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
    with keras.StatelessScope():
        pass


def _declared(f: Path) -> None:
    """dense's kernel declared (6, 2**30) and its units to match, nothing stored."""
    with h5py.File(f, "r+") as h:
        g = h["model_weights/dense"]
        del g["dense/kernel:0"]
        g.create_dataset("dense/kernel:0", shape=(6, 1 << 30), dtype="f4")
        config = json.loads(h.attrs["model_config"])
        _layer(config, "dense")["config"]["units"] = 1 << 30
        h.attrs["model_config"] = json.dumps(config).encode()


def test_declared_but_not_stored_weights_are_refused(tmp_path, never_built):
    f = _file(tmp_path, "cnn", name="declared.h5")
    _declared(f)
    assert f.stat().st_size < 1 << 20
    with pytest.raises(BadModelError, match=r"refused, its datasets declare \d+ bytes"):
        msc.from_keras(f)


def _nested(f: Path, depth: int) -> Path:
    """``f`` with dense's units a list nested ``depth`` deep (written as text: Python's json
    cannot write it)."""
    with h5py.File(f, "r+") as h:
        text = h.attrs["model_config"]
        text = text.decode() if isinstance(text, bytes) else text
        text = text.replace('"units": 5', '"units": ' + "[" * depth + "]" * depth)
        h.attrs["model_config"] = text.encode()
    return f


BROKEN = {
    "truncated": lambda f: f.write_bytes(f.read_bytes()[: f.stat().st_size // 2]),
    "garbage": lambda f: f.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\x00garbage" * 200),
    "not_json": lambda f: _attrs(f, model_config=b"{not json"),
    "no_config": lambda f: _attrs(f, model_config=None),
    "config_not_a_model": lambda f: _attrs(f, model_config=b"[1, 2, 3]"),
    "weight_not_stored": lambda f: _drop(f, "model_weights/dense/dense/kernel:0"),
    "no_weights_group": lambda f: _drop(f, "model_weights"),
}


def _attrs(f: Path, **kw) -> None:
    with h5py.File(f, "r+") as h:
        for k, v in kw.items():
            if v is None:
                del h.attrs[k]
            else:
                h.attrs[k] = v


def _drop(f: Path, path: str) -> None:
    with h5py.File(f, "r+") as h:
        del h[path]


@pytest.mark.parametrize("how", sorted(BROKEN) + ["nested_100", "nested_100000"])
def test_broken_h5_is_one_error(tmp_path, how):
    if how.startswith("nested"):
        f = _nested(_file(tmp_path, "cnn", name=f"{how}.h5"), int(how.split("_")[1]))
    else:
        f = _file(tmp_path, "cnn", name=f"{how}.h5")
        BROKEN[how](f)
    with pytest.raises(BadModelError) as e:
        msc.from_keras(f)
    assert str(e.value).startswith(str(f)) and "\n" not in str(e.value), e.value
    one_error(*_cli(f), f.name)


# through the CLI in a child process limited to 3 GiB, as a user runs it
CHILD = {
    "dense_units": (lambda p: _file(p, "cnn", HOSTILE["dense_units"][1], "units.h5"), "units="),
    "input_too_wide": (lambda p: _file(p, "recurrent", _input_too_wide, "wide.h5"), "builds"),
    "declared": (lambda p: _declared(_file(p, "cnn", name="declared.h5")) or p / "declared.h5",
                 "declare"),
    "nested": (lambda p: _nested(_file(p, "cnn", name="nested.h5"), 100000), "nests"),
}  # fmt: skip


@pytest.mark.slow  # a child process importing keras and torch: ~13 s each on a loaded machine
@pytest.mark.parametrize("case", sorted(CHILD))
def test_hostile_h5_is_one_error_line_in_bounded_memory(tmp_path, case):
    make, word = CHILD[case]
    f = make(tmp_path)
    p = run_child("inspect", str(f), limit_mb=3072)
    line = one_error(p.returncode, p.stderr, word)
    assert f.name in line


def test_the_unedited_files_read(tmp_path):
    """What the hostile cases edit reads as it is (so each refusal is the edit's)."""
    for model in ("cnn", "recurrent"):
        msc.from_keras(_file(tmp_path, model, name=f"{model}.h5"))


def test_custom_objects_scope_is_not_consulted(tmp_path):
    """A class registered in the process, named by the file with its registered name: still
    refused (Keras' legacy reader would look it up among the registered objects)."""
    assert keras.saving.get_registered_object("HostileH5>Custom") is Custom
    config, weights, _ = k2.cnn()
    bad = copy.deepcopy(config)
    _layer(bad, "max_pooling2d")["class_name"] = "HostileH5>Custom"
    f = k2.write(tmp_path / "registered.h5", bad, weights)
    with pytest.raises(BadModelError, match="HostileH5>Custom 'max_pooling2d'.*custom object"):
        msc.from_keras(f)
