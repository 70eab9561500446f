"""TensorFlow SavedModels through TensorFlow's own TFLite converter (issue 32, the
``[tensorflow]`` extra): ``msc.from_saved_model`` and the CLI reading a SavedModel directory.
Numbers are compared with the signature run in TensorFlow.

This file stands alone (no imports from tests/): `.ci/extras` runs it in the [tensorflow]
extra's own environment, where the dev extra's packages are not installed."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
tf = pytest.importorskip(
    "tensorflow", reason="no TensorFlow (the [tensorflow] extra; .ci/extras runs this file)"
)

import msc  # noqa: E402
from msc.cli import main  # noqa: E402

ATOL = 1e-5  # float32 TensorFlow vs the converted graph's runtime


def run(*args, ok: int = 0) -> tuple[str, str]:
    """``msc ARGS`` in this process; checks the exit code; returns (stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:
            code = e.code
    assert code == ok, (code, out.getvalue(), err.getvalue())
    assert "Traceback" not in err.getvalue(), err.getvalue()
    return out.getvalue(), err.getvalue()


class Net(tf.Module):
    """A conv, a mean and a matmul at a dynamic batch, two named outputs."""

    def __init__(self):
        rng = np.random.default_rng(0)
        self.w = tf.Variable(rng.standard_normal((3, 3, 3, 8)).astype(np.float32))
        self.d = tf.Variable(rng.standard_normal((8, 4)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, 16, 16, 3], tf.float32, name="image")])
    def __call__(self, image):
        y = tf.nn.relu(tf.nn.conv2d(image, self.w, 1, "SAME"))
        y = tf.reduce_mean(y, axis=[1, 2])
        return {"logits": tf.matmul(y, self.d), "feat": y}

    @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32, name="x")])
    def scale(self, x):
        return {"y": x * 2.0}


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sm") / "net"
    net = Net()
    tf.saved_model.save(net, str(path), signatures={"serving_default": net.__call__})
    return path


@pytest.fixture(scope="module")
def two_signatures(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sm2") / "two"
    net = Net()
    tf.saved_model.save(net, str(path), signatures={"main": net.__call__, "scale": net.scale})
    return path


def _tf_outputs(path: Path, key: str, x: np.ndarray) -> dict[str, np.ndarray]:
    fn = tf.saved_model.load(str(path)).signatures[key]
    return {k: v.numpy() for k, v in fn(**x).items()}


def test_the_signature_reads_with_its_names_and_dynamic_batch(saved):
    g = msc.from_saved_model(saved)
    assert [v.name for v in g.inputs] == ["image"]
    assert sorted(v.name for v in g.outputs) == ["feat", "logits"]
    assert str(g.inputs[0].type.shape[0]) == "batch"
    # the frozen constants take back the variables' names (the conv kernel as OHWI, the
    # matmul's as FULLY_CONNECTED's transposed weight)
    assert {"w", "d"} <= set(g.weights), sorted(g.weights)
    assert g.weights["d"].type.shape == (4, 8)
    w = tf.saved_model.load(str(saved)).w.numpy()
    np.testing.assert_array_equal(g.weights["w"].numpy(), np.transpose(w, (3, 0, 1, 2)))


def test_convert_to_torch_and_onnx_checks_against_tensorflow(saved, tmp_path):
    for out in (tmp_path / "t", tmp_path / "m.onnx"):
        stdout, stderr = run("convert", saved, "--trust-code", "-o", out)
        assert "structurally equal" in stdout or "equivalent" in stdout, stdout
        assert "outputs match" in stdout, stdout
        assert stderr == "", stderr
    # the ONNX file against the SavedModel, run by onnxruntime and TensorFlow at batch 3
    import onnxruntime as ort

    x = np.random.default_rng(1).standard_normal((3, 16, 16, 3)).astype(np.float32)
    want = _tf_outputs(saved, "serving_default", {"image": x})
    sess = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"image": x})))
    for k in ("logits", "feat"):
        np.testing.assert_allclose(got[k], want[k], atol=ATOL, rtol=1e-4)
    # verify names the SavedModel's runtime as A
    stdout, _ = run("verify", saved, tmp_path / "m.onnx", "--trust-code")
    assert "(saved_model)" in stdout and "result: match" in stdout, stdout
    # a quiet success prints nothing
    assert run("convert", saved, "--trust-code", "-q", "-o", tmp_path / "q.onnx") == ("", "")


def test_a_saved_model_is_read_only_when_trusted(saved, tmp_path):
    _, err = run("convert", saved, "-o", tmp_path / "x.onnx", ok=2)
    assert err.startswith("msc: error: ") and "--trust-code" in err and err.count("\n") == 1, err
    assert not (tmp_path / "x.onnx").exists()


def test_a_signature_is_chosen_by_name(two_signatures, tmp_path):
    _, err = run("inspect", two_signatures, "--trust-code", ok=2)
    assert "2 signatures (main, scale)" in err and f"{two_signatures}:<signature>" in err, err
    stdout, _ = run("inspect", f"{two_signatures}:scale", "--trust-code")
    assert "x " in stdout and "y " in stdout, stdout
    _, err = run("inspect", f"{two_signatures}:nope", "--trust-code", ok=2)
    assert "no signature 'nope' (it has main, scale)" in err, err
    g = msc.from_saved_model(two_signatures, signature="main")
    assert sorted(v.name for v in g.outputs) == ["feat", "logits"]


def test_an_op_tflite_has_no_builtin_for_is_named(tmp_path):
    class Strings(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def __call__(self, s):
            return {"n": tf.strings.length(s)}

    path = tmp_path / "strings"
    m = Strings()
    tf.saved_model.save(m, str(path), signatures=m.__call__)
    _, err = run("convert", path, "--trust-code", "-o", tmp_path / "s.onnx", ok=2)
    assert err.startswith("msc: error: ") and "converter failed" in err, err
    assert "StringLength" in err or "strings" in err.lower(), err
    assert not (tmp_path / "s.onnx").exists()


def test_a_corrupt_saved_model_is_one_error_line(saved, tmp_path):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(saved, bad)
    data = (bad / "saved_model.pb").read_bytes()
    (bad / "saved_model.pb").write_bytes(data[: len(data) // 3])
    _, err = run("inspect", bad, "--trust-code", ok=2)
    assert err.startswith(f"msc: error: {bad}") and err.count("\n") == 1, err


def test_a_keras_model_exported_as_saved_model(tmp_path):
    """A Keras 3 model's ``model.export`` (the TensorFlow backend, in a child process: this
    process's Keras may run on another backend) converts with its layer weights' names."""
    path = tmp_path / "keras_sm"
    code = textwrap.dedent(
        f"""
        import keras
        m = keras.Sequential([keras.Input((12, 12, 3)),
            keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="conv1"),
            keras.layers.DepthwiseConv2D(3, name="dw"), keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(5, name="head")])
        m.export({str(path)!r}, verbose=False)
        """
    )
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    subprocess.run([sys.executable, "-c", code], check=True, env=env, capture_output=True)
    g = msc.from_saved_model(path)
    assert {"sequential/dw/kernel", "sequential/head/kernel"} <= set(g.weights), sorted(g.weights)
    stdout, stderr = run("convert", path, "--trust-code", "-o", tmp_path / "k.onnx")
    assert "outputs match" in stdout and stderr == "", (stdout, stderr)
