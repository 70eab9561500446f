"""save/load: safetensors weights (no pickle), memory-mapped loads, atomic writes."""

from __future__ import annotations

import errno
import os

import ml_dtypes
import numpy as np
import pytest

import msc
from msc import DType, Graph, TensorType
from msc.io import files
from msc.io import safetensors as st
from msc.ir.tensor import FileRegion
from tests import graphs

ARRAYS = {
    "f32": np.arange(6, dtype=np.float32).reshape(2, 3),
    "bf16": np.array([1.0, -2.5, 3.140625], ml_dtypes.bfloat16),
    "scalar": np.array(7.25, np.float64),
    "i64": np.array([-(2**62), 2**62], np.int64),
    "bool": np.array([[True, False]]),
    "u8": np.arange(5, dtype=np.uint8),
    "f16": np.array([65504, -0.0], np.float16),
    "fp8": np.array([0.5, -448.0], ml_dtypes.float8_e4m3fn),
    "c64": np.array([1 + 2j], np.complex64),
    "empty": np.zeros((0, 4), np.float32),
}


def weights_graph() -> Graph:
    g = Graph("weights")
    x = g.add_input("x", TensorType(DType.FLOAT32, (2, 3)))
    for name, arr in ARRAYS.items():
        g.add_weight(f"w.{name}", arr)
    g.set_outputs([g.op("add", x, g.weights["w.f32"])])
    return g.validate()


def test_save_load_roundtrip_all_dtypes(tmp_path):
    g = weights_graph()
    msc.save(g, tmp_path / "m")
    assert sorted(os.listdir(tmp_path / "m")) == [
        ".msc-output.json",
        "graph.msc",
        "weights.safetensors",
    ]
    h = msc.load(tmp_path / "m")
    msc.assert_structural_equal(g, h, names=True)
    for name, arr in ARRAYS.items():
        got = h.weights[f"w.{name}"].numpy()
        assert got.dtype == arr.dtype and got.shape == arr.shape
        assert got.tobytes() == arr.tobytes()


def test_load_memory_maps(tmp_path):
    msc.save(weights_graph(), tmp_path / "m")
    w = msc.load(tmp_path / "m").weights["w.f32"].numpy()
    base = w
    while getattr(base, "base", None) is not None and not isinstance(base, np.memmap):
        base = base.base
    assert isinstance(base, np.memmap), "weights were copied instead of memory-mapped"
    assert not w.flags.writeable


@pytest.mark.parametrize("name", sorted(graphs.ALL))
def test_builtin_graphs_save_load(tmp_path, name):
    g = graphs.ALL[name]()
    msc.save(g, tmp_path / name)
    msc.assert_structural_equal(g, msc.load(tmp_path / name), names=True)


def test_files_load_with_the_safetensors_library(tmp_path):
    safetensors_torch = pytest.importorskip("safetensors.torch")
    import torch

    arrays = {k: v for k, v in ARRAYS.items() if k not in ("c64",)}
    st.write(tmp_path / "w.safetensors", arrays)
    loaded = safetensors_torch.load_file(str(tmp_path / "w.safetensors"))
    for k, v in arrays.items():
        t = loaded[k]
        if v.dtype == ml_dtypes.bfloat16:
            assert t.dtype == torch.bfloat16
            np.testing.assert_array_equal(t.float().numpy(), v.astype(np.float32))
        elif v.dtype == ml_dtypes.float8_e4m3fn:
            assert t.dtype == torch.float8_e4m3fn
            np.testing.assert_array_equal(t.float().numpy(), v.astype(np.float32))
        else:
            np.testing.assert_array_equal(t.numpy(), v)


def test_reads_files_the_safetensors_library_wrote(tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    arrays = {"a": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.ones(3, np.int64)}
    safetensors_numpy.save_file(arrays, str(tmp_path / "lib.safetensors"))
    got = st.read(tmp_path / "lib.safetensors")
    for k, v in arrays.items():
        np.testing.assert_array_equal(got[k], v)


def test_failed_save_leaves_nothing_and_keeps_the_old(tmp_path):
    g = weights_graph()
    msc.save(g, tmp_path / "m")
    before = (tmp_path / "m" / "graph.msc").read_text()

    def boom():
        raise RuntimeError("disk on fire")

    bad = graphs.mlp()
    bad.weights["layers.0.bias"].set_data(boom)
    with pytest.raises(RuntimeError, match="disk on fire"):
        msc.save(bad, tmp_path / "m")
    with pytest.raises(RuntimeError):
        msc.save(bad, tmp_path / "new")
    assert (tmp_path / "m" / "graph.msc").read_text() == before
    assert sorted(os.listdir(tmp_path)) == ["m"], "a half-written directory was left behind"


def test_corrupt_files_give_clear_errors(tmp_path):
    (tmp_path / "bad.safetensors").write_bytes(b"\xff" * 16)
    with pytest.raises(ValueError, match="not a safetensors file"):
        st.read(tmp_path / "bad.safetensors")
    with pytest.raises(FileNotFoundError, match="not a saved msc graph"):
        msc.load(tmp_path)
    msc.save(weights_graph(), tmp_path / "m")
    p = tmp_path / "m" / "weights.safetensors"
    p.write_bytes(p.read_bytes()[:-8])
    with pytest.raises(ValueError, match="out of bounds"):
        msc.load(tmp_path / "m")


def test_outputs_get_ordinary_file_modes(tmp_path):
    """Atomic writes go through temp files, but what lands has the modes open()/mkdir() give."""
    old = os.umask(0o022)
    try:
        msc.save(weights_graph(), tmp_path / "m")
    finally:
        os.umask(old)
    assert (tmp_path / "m").stat().st_mode & 0o777 == 0o755
    for f in ("graph.msc", "weights.safetensors"):
        assert (tmp_path / "m" / f).stat().st_mode & 0o777 == 0o644


def test_streamed_write_releases_mapped_pages(tmp_path):
    """Writing memory-mapped weights back out does not keep their pages resident (models
    larger than RAM convert); the data written is unchanged."""
    big = np.arange(3 << 20, dtype=np.float32)  # 12 MiB
    st.write(tmp_path / "a.safetensors", {"w": big})
    mapped = st.read(tmp_path / "a.safetensors")["w"]
    st.write(tmp_path / "b.safetensors", {"w": mapped})
    np.testing.assert_array_equal(st.read(tmp_path / "b.safetensors")["w"], big)
    np.testing.assert_array_equal(mapped[-4:], big[-4:])  # still readable after the drop


def _data_file_bytes(path, direct: bool, monkeypatch, pieces) -> bytes:
    """Append ``pieces`` (bytes, or (file, offset, length) regions) through a DataFile."""
    if not direct:
        monkeypatch.setattr(files, "_direct_io", lambda fd: False)
    fd, tmp = files.mkstemp(path.parent, prefix="t.")
    f = files.DataFile(fd)
    try:
        if direct and not f.direct:
            pytest.skip(f"{path.parent}: the file system does not do direct I/O")
        assert f.direct == direct
        for p in pieces:
            if isinstance(p, bytes):
                assert f.write(p) == len(p)
            else:
                src, off, n = p
                region = FileRegion(str(src), off, n, DType.UINT8, (n,))
                assert f.copy_region(region) == n
        f.finish()
        assert f.size == os.path.getsize(tmp)
    finally:
        f.close()
    return open(tmp, "rb").read()


def test_data_file_bytes_are_those_appended(tmp_path, monkeypatch):
    """Direct and buffered writes give the same file: pieces of every size across the
    staging buffer's edges, file regions, an unaligned end (padded, then truncated)."""
    monkeypatch.setattr(files, "_STAGE", 3 * files._BLOCK)  # several drains per piece
    rng = np.random.default_rng(0)
    src = tmp_path / "src.bin"
    src.write_bytes(rng.bytes(40_000))
    sizes = [1, 4095, 4096, 4097, 12_288, 30_001, 0, 7]
    pieces = [rng.bytes(n) for n in sizes] + [(src, 3, 20_000), b"tail", (src, 0, 5)]
    want = b"".join(
        p if isinstance(p, bytes) else src.read_bytes()[p[1] : p[1] + p[2]] for p in pieces
    )
    assert _data_file_bytes(tmp_path / "d", True, monkeypatch, pieces) == want
    assert _data_file_bytes(tmp_path / "b", False, monkeypatch, pieces) == want


def test_data_file_falls_back_when_direct_writes_are_refused(tmp_path, monkeypatch):
    """A file system that takes O_DIRECT but refuses the writes (EINVAL) gets the same bytes
    through buffered writes."""
    monkeypatch.setattr(files, "_STAGE", 2 * files._BLOCK)
    real = os.pwrite
    calls = []

    def pwrite(fd, data, offset):
        calls.append(offset)
        if len(calls) == 2:  # after one block went out directly
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", pwrite)
    data = np.random.default_rng(1).bytes(5 * files._BLOCK + 11)
    assert _data_file_bytes(tmp_path / "d", True, monkeypatch, [data[:100], data[100:]]) == data
    assert calls == [0, 2 * files._BLOCK]


class _Stop(BaseException):
    pass


def _spin() -> None:
    for _ in range(1000):  # the Python-level handler runs within these bytecodes
        pass


def test_a_signal_inside_uninterrupted_is_raised_at_its_end():
    """A deferring handler raises where the program is, except inside uninterrupted(): there
    the block finishes (a staging name recorded, a set of renames done) and the exception
    comes at its end, where the writer's cleanup sees it."""
    import signal

    if not hasattr(signal, "SIGUSR1"):
        pytest.skip("no SIGUSR1 on this platform")
    old = signal.signal(signal.SIGUSR1, files.deferring(_Stop))
    steps = []
    try:
        with pytest.raises(_Stop):
            with files.uninterrupted():
                with files.uninterrupted():  # nested: raised when the outermost ends
                    os.kill(os.getpid(), signal.SIGUSR1)
                    _spin()
                    steps.append("inner")
                steps.append("outer")
        assert steps == ["inner", "outer"]
        with pytest.raises(_Stop):
            os.kill(os.getpid(), signal.SIGUSR1)
            _spin()
            steps.append("never")
        assert steps == ["inner", "outer"]
        with files.uninterrupted():  # nothing pending: nothing raised
            steps.append("quiet")
    finally:
        signal.signal(signal.SIGUSR1, old)
