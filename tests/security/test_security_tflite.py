"""A .tflite file is read without running anything it holds, in bounded time and memory.

Hostile vector lengths and offsets, buffers past the file's end, sparse metadata that would
densify into gigabytes, and names and custom-op payloads that are Python code: each ends in
one ``msc: error:`` line (exit 2) or is read as data, and no payload runs.
"""

from __future__ import annotations

import pickle
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the tflite extra (tflite, flatbuffers) is not installed")

import msc  # noqa: E402
from codegen.tflite import flatbuf  # noqa: E402
from msc.errors import MscError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _model(name: str = "x", custom: bytes | None = None) -> bytes:
    t = [
        flatbuf.Tensor(name, 0, [2, 3]),
        flatbuf.Tensor("w", 0, [3], 1),
        flatbuf.Tensor("y", 0, [2, 3]),
    ]
    if custom is not None:
        op = flatbuf.Op("Payload", [0, 1], [2], custom=True, custom_options=custom)
    else:
        op = flatbuf.Op("ADD", [0, 1], [2], {}, "AddOptions")
    w = np.arange(3, dtype=np.float32)
    return flatbuf.write(flatbuf.Model([flatbuf.Subgraph(t, [0], [2], [op])], [b"", w.tobytes()]))


def _cli(path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "msc", "inspect", str(path), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


def _one_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines and lines[0].startswith("msc: error: "), r.stderr
    assert "Traceback" not in r.stderr
    assert all(line.startswith("  ") for line in lines[1:]), r.stderr
    return lines[0]


def _vectors(data: bytes) -> list[int]:
    """Offsets of every uint32 that looks like a vector length of this small file."""
    return [i for i in range(0, len(data) - 4, 4) if 0 < struct.unpack_from("<I", data, i)[0] < 8]


def test_hostile_vector_lengths_are_refused_quickly(tmp_path):
    data = bytearray(_model())
    hits = 0
    for i in _vectors(bytes(data))[:40]:
        bad = bytearray(data)
        struct.pack_into("<I", bad, i, 0x7FFFFFFF)
        try:
            msc.from_tflite(bytes(bad))
        except MscError:
            hits += 1
    assert hits > 0  # at least some of those words were vector lengths, each refused
    f = tmp_path / "bad.tflite"
    bad = bytearray(data)
    for i in _vectors(bytes(data)):
        struct.pack_into("<I", bad, i, 0x7FFFFFFF)
    f.write_bytes(bytes(bad))
    assert "tflite" in _one_error(_cli(f)) or "error" in _one_error(_cli(f))


def test_not_a_flatbuffer(tmp_path):
    for i, data in enumerate([b"", b"TFL3", b"\x00" * 64, b"\x10\x00\x00\x00TFL3" + b"\xff" * 60]):
        f = tmp_path / f"junk{i}.tflite"
        f.write_bytes(data)
        _one_error(_cli(f))


def test_external_buffer_past_the_end(tmp_path):
    data = bytearray(
        flatbuf.write(
            flatbuf.Model(
                [
                    flatbuf.Subgraph(
                        [
                            flatbuf.Tensor("x", 0, [2]),
                            flatbuf.Tensor("w", 0, [2], 1),
                            flatbuf.Tensor("y", 0, [2]),
                        ],
                        [0],
                        [2],
                        [flatbuf.Op("ADD", [0, 1], [2], {}, "AddOptions")],
                    )
                ],
                [b"", np.ones(2, np.float32).tobytes()],
            ),
            external=True,
        )
    )
    f = tmp_path / "trunc.tflite"
    f.write_bytes(bytes(data[:-4]))  # the weights after the flatbuffer cut short
    with pytest.raises(MscError, match="past the file's end"):
        msc.from_tflite(f)
    _one_error(_cli(f))


def test_custom_payload_is_kept_as_bytes_and_never_runs(tmp_path):
    marker = tmp_path / "ran"
    payload = pickle.dumps(_Payload(marker))
    f = tmp_path / "custom.tflite"
    f.write_bytes(_model(custom=payload))
    line = _one_error(_cli(f))
    assert "Payload" in line or "unsupported" in line
    g = msc.from_tflite(f, custom_ops="keep")
    assert g.nodes[0].attrs["custom_options"] == payload
    r = _cli(f, "--custom-ops", "keep")
    assert r.returncode == 0, r.stderr
    assert not marker.exists()


def test_names_that_are_code_stay_names(tmp_path):
    marker = tmp_path / "ran2"
    name = f"__import__('os').system('touch {marker}')"
    f = tmp_path / "names.tflite"
    f.write_bytes(_model(name=name))
    g = msc.from_tflite(f)
    assert g.inputs[0].name == name
    import codegen.torch

    src = codegen.torch.generate(g)
    codegen.torch.to_module(g)
    assert not marker.exists()
    assert name not in src.replace(repr(name), "")


def test_sparse_weights_that_would_densify_into_gigabytes(tmp_path):
    # a 2**20 x 2**20 dense shape behind a tiny sparse buffer: refused before allocating
    from msc.frontend.tflite import read_model
    from msc.frontend.tflite.importer import Importer
    from msc.frontend.tflite.reader import TfSparsity

    m = read_model(_model())
    t = m.subgraphs[0].tensors[1]
    t.shape = (1 << 20, 1 << 20)
    t.sparsity = TfSparsity((0, 1), (), ((0, 1 << 20, None, None), (0, 1 << 20, None, None)))
    with pytest.raises(MscError, match="too large|larger"):
        Importer(m).array(t)
