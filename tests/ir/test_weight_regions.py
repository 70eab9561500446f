"""Weights that stay in their files: ONNX external data and msc's safetensors load as file
regions, and ONNX -> msc -> ONNX or saving a loaded graph copies them file to file without
reading them into memory; sub-byte types stay packed end to end."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import codegen.onnx
import codegen.torch
import msc
from msc.io import safetensors
from msc.ir import DType
from msc.ir.tensor import FileRegion, Packed, pack
from tests.torch_cases import MODEL_CASES

ort = pytest.importorskip("onnxruntime", reason="onnxruntime runs the models")


def _external_model(tmp_path) -> tuple[str, tuple]:
    """small_cnn as ONNX with every initializer in one external data file (onnx's writer)."""
    module, args = MODEL_CASES["small_cnn"]()[:2]
    model = codegen.onnx.to_model(msc.from_torch(module, args))
    path = tmp_path / "src" / "model.onnx"
    path.parent.mkdir()
    onnx.save_model(
        model, path, save_as_external_data=True, location="model.onnx.data", size_threshold=0
    )
    return str(path), args


def _ort(path, args) -> np.ndarray:
    sess = ort.InferenceSession(str(path))
    feeds = {i.name: a.numpy() for i, a in zip(sess.get_inputs(), args)}
    return sess.run(None, feeds)[0]


def test_external_data_loads_as_regions_and_reexports_by_copy(tmp_path, monkeypatch):
    src, args = _external_model(tmp_path)
    g = msc.from_onnx(src)
    regions = [w.region for w in g.weights.values() if w.region is not None]
    assert len(regions) == len(g.weights) and all(r.path.endswith(".data") for r in regions)
    want = _ort(src, args)

    def refuse(self, *a, **k):
        raise AssertionError(f"read {self.path} at {self.offset}")

    (tmp_path / "out").mkdir()
    with monkeypatch.context() as m:  # writing copies regions: no weight is read
        m.setattr(FileRegion, "array", refuse)
        m.setattr(FileRegion, "read", refuse)
        out = codegen.onnx.save(
            g, tmp_path / "out" / "model.onnx", external_data=True, size_threshold=0
        )
        saved = msc.save(g, tmp_path / "saved")
    # the same model, regenerated (its nodes may be written differently: float rounding)
    np.testing.assert_allclose(_ort(out, args), want, rtol=1e-5, atol=1e-6)
    again = msc.load(saved)
    assert all(w.region is not None for w in again.weights.values())
    got = codegen.torch.to_module(again)(*args).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # the bytes are the source's, tensor by tensor
    for name, w in g.weights.items():
        np.testing.assert_array_equal(again.weights[name].numpy(), w.numpy())


def test_saving_over_the_source_keeps_the_graph_usable(tmp_path):
    src, args = _external_model(tmp_path)
    want = _ort(src, args)
    g = msc.from_onnx(src)
    codegen.onnx.save(g, src, external_data=True)  # the file the weights are read from
    np.testing.assert_allclose(_ort(src, args), want, rtol=1e-5, atol=1e-6)
    got = codegen.torch.to_module(g)(*args).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

    saved = msc.save(g, tmp_path / "saved")
    loaded = msc.load(saved)
    msc.save(loaded, saved)  # in place: the regions now name the new file
    got = codegen.torch.to_module(loaded)(*args).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_rewritten_file_is_an_error_not_other_bytes(tmp_path):
    src, _ = _external_model(tmp_path)
    g = msc.from_onnx(src)
    data = tmp_path / "src" / "model.onnx.data"
    raw = bytearray(data.read_bytes())
    data.write_bytes(bytes(raw[::-1]))
    w = next(iter(g.weights.values()))
    with pytest.raises(OSError, match="changed since"):
        w.numpy()


def _int4_model() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    k, n, block = 64, 16, 32
    w = rng.integers(-8, 8, size=(k, n)).astype(np.int8)
    scale = (rng.random((k // block, n)) * 0.1 + 0.01).astype(np.float32)
    nodes = [
        helper.make_node("DequantizeLinear", ["w", "s"], ["wf"], axis=0, block_size=block),
        helper.make_node("MatMul", ["x", "wf"], ["y"]),
    ]
    inits = [
        helper.make_tensor("w", TensorProto.INT4, [k, n], w.ravel().tolist()),
        numpy_helper.from_array(scale, "s"),
    ]
    g = helper.make_graph(
        nodes,
        "int4",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, n])],
        initializer=inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def test_int4_weights_stay_packed(tmp_path):
    model = _int4_model()
    g = msc.from_onnx(model)
    w = g.weights["w"]
    assert isinstance(w.storage, Packed) and w.nbytes == 64 * 16 // 2
    x = np.random.default_rng(1).random((2, 64), dtype=np.float32)
    # unfused: onnxruntime's DQ + MatMul fusion quantizes x to int8 by default
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(model.SerializeToString(), so).run(None, {"x": x})[0]

    # msc's own file: packed, read back as a packed region
    saved = msc.save(g, tmp_path / "saved")
    header, _ = safetensors.read_header(saved / "weights.safetensors")
    assert header["w"]["dtype"] == "I4_PACKED"
    assert header["w"]["data_offsets"][1] - header["w"]["data_offsets"][0] == 512
    loaded = msc.load(saved)
    r = loaded.weights["w"].region
    assert r is not None and r.packed and r.nbytes == 512
    np.testing.assert_array_equal(loaded.weights["w"].numpy(), w.numpy())

    # ONNX external data: the packed bytes copied as ONNX stores them
    (tmp_path / "out").mkdir()
    path = codegen.onnx.save(
        loaded, tmp_path / "out" / "m.onnx", external_data=True, size_threshold=0
    )
    init = {t.name: t for t in onnx.load(str(path), load_external_data=False).graph.initializer}
    info = {e.key: e.value for e in init["w"].external_data}
    assert int(info["length"]) == 512
    got = ort.InferenceSession(str(path), so).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    g2 = msc.from_onnx(path)
    assert g2.weights["w"].region.packed
    assert g2.weights["w"].region.read().tolist() == pack(w.numpy()).tolist()
    t = codegen.torch.to_module(g2)(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(t, want, rtol=1e-6, atol=1e-6)


def test_safetensors_reader_rejects_a_region_past_the_end(tmp_path):
    path = tmp_path / "w.safetensors"
    header = {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + b"\0" * 8)
    with pytest.raises(safetensors.SafetensorsError, match="out of bounds"):
        safetensors.regions(path)
    assert DType.FLOAT32.itemsize == 4
