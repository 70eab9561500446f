"""Hostile and mutated model files through msc's readers: nothing runs, nothing hangs, nothing
crashes.

Each test writes a seeded batch of mutants of valid models (ONNX protos mutated field by field
and byte by byte, text graphs, saved graph directories with damaged safetensors, .pt2 archives
with damaged or pickled members) and reads every one through ``msc.inspect`` and ``msc
inspect`` in a child process limited in time and memory (tests/security/fuzz_worker.py).
Every outcome must be "read" or "refused with an MscError / exit 2 and one error line"; a
traceback, a timeout or running out of memory fails the test with the file that did it, kept
for replay.

How many inputs a run tries: ``MSC_FUZZ_N`` mutants per format (default 100, so 400 files, each
read twice); ``MSC_FUZZ_SEED`` picks another batch. The count is printed (``pytest -s``).
"""

from __future__ import annotations

import io
import json
import os
import pickle
import random
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import msc
from msc.examples import onnx_example, small_cnn_graph

N = int(os.environ.get("MSC_FUZZ_N", "100"))
SEED = int(os.environ.get("MSC_FUZZ_SEED", "0"))
WORKER = Path(__file__).with_name("fuzz_worker.py")
ROOT = Path(__file__).resolve().parents[2]
LIMIT_MB = 3072  # address space of the child, torch's own mappings included
SECONDS = 20  # per file and way of reading it

STRANGE_INTS = [-(2**63), -(2**31), -7, -1, 0, 1, 3, 2**31, 2**40, 2**62, 2**63 - 1]
OP_TYPES = ["Conv", "Loop", "Scan", "If", "Range", "Tile", "Expand", "Resize", "Gemm", "Xyz", ""]
STRANGE_NAMES = ["", " ", "input.1", "class", "__import__('os').system('x')", "a\nb", "é" * 300]


def _run(files: list[Path], tmp: Path) -> list[dict]:
    """Read ``files`` in the limited child; returns its records, one per file and way."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), MSC_CHECK="0")
    r = subprocess.run(
        [sys.executable, str(WORKER), str(LIMIT_MB), str(SECONDS), *map(str, files)],
        capture_output=True,
        text=True,
        cwd=tmp,
        env=env,
        timeout=SECONDS * 2 * len(files) + 120,
    )
    recs = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert len(recs) == 2 * len(files), (
        f"the worker died after {len(recs)} of {2 * len(files)} readings "
        f"(exit {r.returncode}): {r.stderr[-3000:]}"
    )
    return recs


def _check(recs: list[dict], what: str) -> None:
    bad = [r for r in recs if r["outcome"] not in ("ok", "error")]
    counts: dict[str, int] = {}
    for r in recs:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    print(f"\n{what}: {len(recs) // 2} files read twice (seed {SEED}): {counts}")
    if bad:
        keep = Path(os.environ.get("MSC_FUZZ_KEEP", "/tmp/msc-fuzz-failures"))
        keep.mkdir(parents=True, exist_ok=True)
        for r in bad:
            src = Path(r["file"])
            dst = keep / src.name
            if src.is_dir():
                shutil.copytree(src, dst, dirs_exist_ok=True)
            elif src.exists():
                shutil.copy(src, dst)
        first = bad[0]
        pytest.fail(
            f"{len(bad)} of {len(recs)} readings of {what} neither read nor refused cleanly "
            f"(copies in {keep}); first: {first['file']} via {first['via']}: "
            f"{first['outcome']}: {first['detail']}"
        )


# ------------------------------------------------------------------ ONNX
def _onnx_seeds() -> list[onnx.ModelProto]:
    cnn = onnx_example(seed=1)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    then = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t"])],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, ["batch", 4])],
    )
    other = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e"])],
        "else",
        [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, ["batch", 4])],
    )
    w = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4), "w")
    shape = numpy_helper.from_array(np.array([-1, 2, 2], dtype=np.int64), "shape")
    nodes = [
        helper.make_node("If", ["c"], ["i"], then_branch=then, else_branch=other),
        helper.make_node("MatMul", ["i", "w"], ["m"]),
        helper.make_node("Reshape", ["m", "shape"], ["r"]),
        helper.make_node("Shape", ["r"], ["s"]),
        helper.make_node(
            "ConstantOfShape", ["s"], ["z"], value=helper.make_tensor("v", 1, [1], [1.0])
        ),
        helper.make_node("Add", ["r", "z"], ["a"]),
        helper.make_node("Flatten", ["a"], ["y"], axis=1),
    ]
    ctl = helper.make_model(
        helper.make_graph(nodes, "ctl", [x, c], [y], [w, shape]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    return [cnn, ctl]


def _values(g: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    return list(g.input) + list(g.output) + list(g.value_info)


def _mutate_onnx(m: onnx.ModelProto, rng: random.Random) -> onnx.ModelProto:
    m = onnx.ModelProto.FromString(m.SerializeToString())
    g = m.graph
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(12)
        if kind == 0 and _values(g):
            v = rng.choice(_values(g))
            dims = v.type.tensor_type.shape.dim
            if dims:
                d = rng.choice(dims)
                if rng.random() < 0.7:
                    d.dim_value = rng.choice(STRANGE_INTS[1:])
                else:
                    d.dim_param = rng.choice(STRANGE_NAMES)
        elif kind == 1 and g.initializer:
            t = rng.choice(g.initializer)
            if t.dims and rng.random() < 0.5:
                t.dims[rng.randrange(len(t.dims))] = rng.choice(STRANGE_INTS)
            else:
                t.data_type = rng.randrange(0, 30)
        elif kind == 2 and g.initializer:
            t = rng.choice(g.initializer)
            if t.raw_data:
                t.raw_data = t.raw_data[: rng.randrange(len(t.raw_data))]
        elif kind == 3 and g.node:
            rng.choice(g.node).op_type = rng.choice(
                [
                    "Conv",
                    "Loop",
                    "Scan",
                    "If",
                    "Range",
                    "Tile",
                    "Expand",
                    "Resize",
                    "Gemm",
                    "Xyz",
                    "",
                ]
            )
        elif kind == 4 and g.node:
            n = rng.choice(g.node)
            if n.input and rng.random() < 0.5:
                n.input[rng.randrange(len(n.input))] = rng.choice(
                    ["", "nope", g.node[-1].output[0]]
                )
            else:
                n.input.append(rng.choice(["", "nope", "x"]))
        elif kind == 5:
            v = rng.choice(list(g.input) + list(g.output))
            v.name = rng.choice(STRANGE_NAMES)
        elif kind == 6 and g.node:
            n = rng.choice(g.node)
            if n.attribute:
                a = rng.choice(n.attribute)
                if a.type == onnx.AttributeProto.INT:
                    a.i = rng.choice(STRANGE_INTS)
                elif a.type == onnx.AttributeProto.INTS and a.ints:
                    a.ints[rng.randrange(len(a.ints))] = rng.choice(STRANGE_INTS)
                elif a.type == onnx.AttributeProto.FLOAT:
                    a.f = rng.choice([float("nan"), float("inf"), -1e30])
                else:
                    a.type = rng.choice([onnx.AttributeProto.INT, onnx.AttributeProto.GRAPH])
            else:
                n.attribute.append(helper.make_attribute(rng.choice(["axis", "x"]), -(2**40)))
        elif kind == 7:
            m.opset_import[0].version = rng.choice([1, 6, 7, 11, 30, 10**6])
        elif kind == 8:
            del g.output[:]
        elif kind == 9 and g.node:
            g.node.append(onnx.NodeProto.FromString(rng.choice(g.node).SerializeToString()))
        elif kind == 10 and len(g.node) > 1:
            g.node[0].input[0] = g.node[-1].output[0]  # a cycle
        elif kind == 11 and g.initializer:
            t = rng.choice(g.initializer)
            t.data_location = TensorProto.EXTERNAL
            del t.external_data[:]
            for k, val in (
                ("location", rng.choice(["../secret.bin", "/etc/passwd", "missing.bin", "w.bin"])),
                ("offset", str(rng.choice(STRANGE_INTS))),
                ("length", str(rng.choice(STRANGE_INTS))),
            ):
                e = t.external_data.add()
                e.key, e.value = k, val
    return m


def _mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    kind = rng.randrange(4)
    if kind == 0 and b:
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif kind == 1:
        b = b[: rng.randrange(len(b) + 1)]
    elif kind == 2:
        at = rng.randrange(len(b) + 1)
        b[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    else:
        b = b[: rng.randrange(len(b) + 1)] + b"\xff" * rng.randint(1, 64)
    return bytes(b)


def test_mutated_onnx_files(tmp_path):
    rng = random.Random(SEED * 1000 + 1)
    seeds = _onnx_seeds()
    (tmp_path / "w.bin").write_bytes(b"\x00" * 64)
    files = []
    for i in range(N):
        m = _mutate_onnx(rng.choice(seeds), rng)
        data = m.SerializeToString()
        if rng.random() < 0.3:
            data = _mutate_bytes(data, rng)
        f = tmp_path / f"m{i}.onnx"
        f.write_bytes(data)
        files.append(f)
    _check(_run(files, tmp_path), "mutated ONNX files")


# ------------------------------------------------------------------ text and saved graphs
def _text_seeds() -> list[str]:
    from msc.text import to_text

    return [to_text(small_cnn_graph()), to_text(msc.from_onnx(_onnx_seeds()[1]))]


_SYNTAX = list('%@{}[]()<>,:=!_."\\ \n\t0123456789-e') + ["graph", "input", "output", "f32", "b64"]


def _mutate_text(text: str, rng: random.Random) -> str:
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(6)
        at = rng.randrange(len(text) + 1)
        if kind == 0:
            text = text[:at] + text[at + rng.randint(1, 20) :]
        elif kind == 1:
            text = text[:at] + rng.choice(_SYNTAX) * rng.randint(1, 40) + text[at:]
        elif kind == 2:
            lines = text.split("\n")
            i = rng.randrange(len(lines))
            lines.insert(rng.randrange(len(lines)), lines[i])
            text = "\n".join(lines)
        elif kind == 3:
            lines = text.split("\n")
            del lines[rng.randrange(len(lines))]
            text = "\n".join(lines)
        elif kind == 4:
            digits = [i for i, ch in enumerate(text) if ch.isdigit()]
            if digits:
                i = rng.choice(digits)
                text = text[:i] + str(rng.choice(STRANGE_INTS)) + text[i + 1 :]
        else:
            text = text + rng.choice(["\n" * 40, " " * 5000, '"' + "a" * 10000, "[" * 3000])
    return text


def test_mutated_text_graphs(tmp_path):
    rng = random.Random(SEED * 1000 + 2)
    seeds = _text_seeds()
    files = []
    for i in range(N):
        f = tmp_path / f"g{i}.msc"
        f.write_text(_mutate_text(rng.choice(seeds), rng), encoding="utf-8")
        files.append(f)
    _check(_run(files, tmp_path), "mutated text graphs")


def _mutate_safetensors(data: bytes, rng: random.Random) -> bytes:
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    kind = rng.randrange(6)
    names = [k for k in header if k != "__metadata__"]
    if kind == 0 and names:
        del header[rng.choice(names)]
    elif kind == 1 and names:
        header[rng.choice(names)]["dtype"] = rng.choice(["F16", "I64", "BOOL", "XYZ", 3])
    elif kind == 2 and names:
        header[rng.choice(names)]["shape"] = [rng.choice(STRANGE_INTS), 2]
    elif kind == 3 and names:
        header[rng.choice(names)]["data_offsets"] = [
            rng.choice(STRANGE_INTS),
            rng.choice(STRANGE_INTS),
        ]
    elif kind == 4:
        return struct.pack("<Q", rng.choice([2**62, len(data) * 2, 0])) + data[8:]
    else:
        body = body[: rng.randrange(len(body) + 1)]
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + body


def test_damaged_saved_graphs(tmp_path):
    rng = random.Random(SEED * 1000 + 3)
    good = tmp_path / "good"
    msc.save(small_cnn_graph(), good)
    text = (good / "graph.msc").read_text(encoding="utf-8")
    weights = (good / "weights.safetensors").read_bytes()
    files = []
    for i in range(N):
        d = tmp_path / f"saved{i}"
        shutil.copytree(good, d)
        if rng.random() < 0.5:
            (d / "weights.safetensors").write_bytes(_mutate_safetensors(weights, rng))
        elif rng.random() < 0.5:
            (d / "weights.safetensors").write_bytes(_mutate_bytes(weights, rng))
        else:
            (d / "graph.msc").write_text(_mutate_text(text, rng), encoding="utf-8")
        files.append(d)
    _check(_run(files, tmp_path), "damaged saved graphs")


# ------------------------------------------------------------------ .pt2 archives
class _Payload:
    """Unpickling this creates the marker file: proof that a pickle ran."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_damaged_pt2_archives(tmp_path):
    import torch

    from msc.examples import example_module

    rng = random.Random(SEED * 1000 + 4)
    module, args, _ = example_module("cnn")
    good = tmp_path / "good.pt2"
    torch.export.save(torch.export.export(module, args), good)
    with zipfile.ZipFile(good) as z:
        members = {i.filename: z.read(i.filename) for i in z.infolist()}
    marker = tmp_path / "PWNED"
    payload = pickle.dumps(_Payload(str(marker)))
    files = []
    for i in range(N):
        out = dict(members)
        name = rng.choice(sorted(out))
        kind = rng.randrange(5)
        if kind == 0:
            out[name] = payload
        elif kind == 1:
            buf = io.BytesIO()
            torch.save({"x": _Payload(str(marker))}, buf)
            out[name] = buf.getvalue()
        elif kind == 2:
            out[name] = _mutate_bytes(out[name], rng)
        elif kind == 3 and name.endswith(".json"):
            out[name] = _mutate_text(out[name].decode("utf-8", "replace"), rng).encode()
        else:
            out[rng.choice(["../../evil", "/abs/evil", name + "/../../x"])] = payload
        f = tmp_path / f"p{i}.pt2"
        with zipfile.ZipFile(f, "w") as z:
            for k, v in out.items():
                z.writestr(k, v)
        files.append(f)
    recs = _run(files, tmp_path)
    assert not marker.exists(), "a pickle inside a .pt2 ran while msc read it"
    _check(recs, "damaged .pt2 archives")


# ------------------------------------------------------------------ .tflite flatbuffers
def _mutate_words(data: bytes, rng: random.Random) -> bytes:
    """A flatbuffer's offsets and lengths are uint32 words: set some to strange values."""
    b = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        at = rng.randrange(0, max(len(b) - 4, 1)) & ~3
        value = rng.choice([0, 1, 3, 7, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, len(b), len(b) - 4])
        struct.pack_into("<I", b, at, value & 0xFFFFFFFF)
    return bytes(b)


def test_mutated_tflite_files(tmp_path):
    pytest.importorskip("tflite", reason="the tflite extra (tflite, flatbuffers) is not installed")
    import codegen.tflite

    rng = random.Random(SEED * 1000 + 5)
    seeds = [
        codegen.tflite.to_bytes(small_cnn_graph()),
        codegen.tflite.to_bytes(msc.from_onnx(_onnx_seeds()[0])),
    ]
    files = []
    for i in range(N):
        data = rng.choice(seeds)
        data = _mutate_words(data, rng) if rng.random() < 0.6 else _mutate_bytes(data, rng)
        f = tmp_path / f"m{i}.tflite"
        f.write_bytes(data)
        files.append(f)
    _check(_run(files, tmp_path), "mutated .tflite files")
