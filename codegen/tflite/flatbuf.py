"""A .tflite file from plain records, with flatbuffers' Builder and the schema facts in
``codegen.tflite.schema`` (no TensorFlow, and not the read-only generated classes).

    data = write(Model(subgraphs=[Subgraph(...)], buffers=[b"", weights_bytes]))

# NOTE: invariants
# - Buffer 0 is the empty sentinel every tensor without data names, as the schema requires.
# - Buffer data is aligned to 16 bytes in the file (the schema's force_align), so the runtime
#   maps weights in place.
# - A model whose buffers do not fit in a flatbuffer (2 GB) keeps them after it: each Buffer
#   records its file offset and size instead of holding the bytes (the schema's rule for
#   large models); ``external`` forces that layout (tests use it on small models).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import flatbuffers
import numpy as np

from codegen.tflite.schema import FILE_ID, OPTIONS, OPTIONS2, TABLES, op_code

__all__ = ["Tensor", "Op", "Subgraph", "Signature", "Model", "write", "LIMIT"]

# Flatbuffers address 2 GB; above this total of buffer bytes they go after the flatbuffer.
LIMIT = (1 << 31) - (64 << 20)
_ALIGN = 16

_SCALARS = {
    "bool": (flatbuffers.Builder.PrependBoolSlot, bool),
    "i8": (flatbuffers.Builder.PrependInt8Slot, int),
    "u8": (flatbuffers.Builder.PrependUint8Slot, int),
    "i16": (flatbuffers.Builder.PrependInt16Slot, int),
    "u16": (flatbuffers.Builder.PrependUint16Slot, int),
    "i32": (flatbuffers.Builder.PrependInt32Slot, int),
    "u32": (flatbuffers.Builder.PrependUint32Slot, int),
    "i64": (flatbuffers.Builder.PrependInt64Slot, int),
    "u64": (flatbuffers.Builder.PrependUint64Slot, int),
    "f32": (flatbuffers.Builder.PrependFloat32Slot, float),
}
_VECTORS = {"[i32]": "<i4", "[i64]": "<i8", "[f32]": "<f4", "[u8]": "u1", "[bool]": "?"}


@dataclass
class Tensor:
    name: str
    type: int  # schema TensorType code
    shape: Sequence[int]
    buffer: int = 0
    signature: Sequence[int] | None = None  # -1 for dynamic dims
    scale: Sequence[float] | None = None
    zero_point: Sequence[int] | None = None
    quantized_dimension: int = 0
    is_variable: bool = False


@dataclass
class Op:
    op: str  # builtin name, or a custom op's code with ``custom=True``
    inputs: Sequence[int]
    outputs: Sequence[int]
    options: dict[str, Any] = field(default_factory=dict)
    options_type: str = ""  # the options table (Conv2DOptions); "" for none
    version: int = 1
    custom: bool = False
    custom_options: bytes | None = None


@dataclass
class Subgraph:
    tensors: list[Tensor]
    inputs: Sequence[int]
    outputs: Sequence[int]
    ops: list[Op]
    name: str = ""


@dataclass
class Signature:
    key: str
    subgraph: int
    inputs: Sequence[tuple[str, int]]
    outputs: Sequence[tuple[str, int]]


@dataclass
class Model:
    subgraphs: list[Subgraph]
    buffers: list[bytes | memoryview | np.ndarray] = field(default_factory=lambda: [b""])
    signatures: list[Signature] = field(default_factory=list)
    description: str = "generator: msc"
    metadata: dict[str, int] = field(default_factory=dict)


class _Writer:
    def __init__(self, size_hint: int) -> None:
        self.b = flatbuffers.Builder(max(1024, size_hint))

    def table(self, name: str, values: dict[str, Any]) -> int:
        fields = TABLES[name]
        unknown = set(values) - {f for f, _, _ in fields}
        if unknown:
            raise KeyError(f"{name} has no field(s) {sorted(unknown)}")
        b = self.b
        offsets: dict[str, Any] = {}
        for fname, kind, _ in fields:
            v = values.get(fname)
            if v is None:
                continue
            if kind == "str":
                offsets[fname] = b.CreateString(v)
            elif kind in _VECTORS:
                offsets[fname] = b.CreateNumpyVector(np.asarray(v, _VECTORS[kind]).reshape(-1))
            elif kind == "[u8/16]":
                offsets[fname] = self.aligned(v)
            elif kind == "[table]":
                offsets[fname] = self.offsets(v)
        b.StartObject(sum(2 if k == "union" else 1 for _, k, _ in fields))
        slot = 0
        for fname, kind, default in fields:
            v = values.get(fname)
            if kind == "union":
                if v is not None:
                    b.PrependUint8Slot(slot, v[0], 0)
                    b.PrependUOffsetTRelativeSlot(slot + 1, v[1], 0)
                slot += 2
                continue
            if v is not None:
                if kind in _SCALARS:
                    fn, cast = _SCALARS[kind]
                    fn(b, slot, cast(v), default)
                elif kind == "table":
                    b.PrependUOffsetTRelativeSlot(slot, v, 0)
                else:
                    b.PrependUOffsetTRelativeSlot(slot, offsets[fname], 0)
            slot += 1
        return b.EndObject()

    def offsets(self, items: Sequence[int]) -> int:
        b = self.b
        b.StartVector(4, len(items), 4)
        for off in reversed(items):
            b.PrependUOffsetTRelative(off)
        return b.EndVector()

    def aligned(self, data: Any) -> int:
        raw = (
            memoryview(np.ascontiguousarray(data)).cast("B")
            if not isinstance(data, bytes | bytearray)
            else memoryview(data)
        )
        b = self.b
        n = len(raw)
        b.StartVector(1, n, _ALIGN)
        b.head = b.head - n
        b.Bytes[b.head : b.head + n] = raw
        return b.EndVector()


def _quant(w: _Writer, t: Tensor) -> int | None:
    if t.scale is None:
        return None
    zp = t.zero_point if t.zero_point is not None else [0] * len(t.scale)
    return w.table(
        "QuantizationParameters",
        {
            "scale": list(t.scale),
            "zero_point": list(zp),
            "quantized_dimension": t.quantized_dimension,
        },
    )


def _op_codes(model: Model) -> tuple[list[tuple[str, bool, int]], dict]:
    codes: list[tuple[str, bool, int]] = []
    index: dict[tuple[str, bool, int], int] = {}
    for sg in model.subgraphs:
        for op in sg.ops:
            key = (op.op, op.custom, op.version)
            if key not in index:
                index[key] = len(codes)
                codes.append(key)
    return codes, index


def _build(model: Model, places: list[tuple[int, int]] | None) -> bytes:
    total = sum(len(memoryview(np.ascontiguousarray(b)).cast("B")) for b in model.buffers)
    w = _Writer(total + 4096 if places is None else 4096)
    codes, index = _op_codes(model)
    code_offs = []
    for name, custom, version in codes:
        if custom:
            code_offs.append(
                w.table(
                    "OperatorCode",
                    {
                        "custom_code": name,
                        "version": version,
                        "builtin_code": 32,
                        "deprecated_builtin_code": 32,
                    },
                )
            )
        else:
            c = op_code(name)
            code_offs.append(
                w.table(
                    "OperatorCode",
                    {"builtin_code": c, "deprecated_builtin_code": min(c, 127), "version": version},
                )
            )
    sg_offs = []
    for sg in model.subgraphs:
        t_offs = []
        for t in sg.tensors:
            q = _quant(w, t)
            t_offs.append(
                w.table(
                    "Tensor",
                    {
                        "shape": list(t.shape),
                        "type": t.type,
                        "buffer": t.buffer,
                        "name": t.name,
                        "quantization": q,
                        "is_variable": t.is_variable or None,
                        "shape_signature": None if t.signature is None else list(t.signature),
                        "has_rank": True,
                    },
                )
            )
        o_offs = []
        for op in sg.ops:
            opts = None
            if op.options_type:
                table = w.table(op.options_type, op.options)
                if op.options_type in OPTIONS:
                    opts = ("builtin_options", (OPTIONS[op.options_type], table))
                else:
                    opts = ("builtin_options_2", (OPTIONS2[op.options_type], table))
            values: dict[str, Any] = {
                "opcode_index": index[(op.op, op.custom, op.version)],
                "inputs": list(op.inputs),
                "outputs": list(op.outputs),
            }
            if op.custom_options is not None:
                values["custom_options"] = np.frombuffer(op.custom_options, np.uint8)
            if opts is not None:
                values[opts[0]] = opts[1]
            o_offs.append(w.table("Operator", values))
        sg_offs.append(
            w.table(
                "SubGraph",
                {
                    "tensors": t_offs,
                    "inputs": list(sg.inputs),
                    "outputs": list(sg.outputs),
                    "operators": o_offs,
                    "name": sg.name or None,
                },
            )
        )
    buf_offs = []
    for i, data in enumerate(model.buffers):
        if places is not None and i > 0 and places[i][1] > 0:
            buf_offs.append(w.table("Buffer", {"offset": places[i][0], "size": places[i][1]}))
        elif (
            len(memoryview(np.ascontiguousarray(data)).cast("B"))
            if not isinstance(data, bytes | bytearray)
            else len(data)
        ):
            buf_offs.append(w.table("Buffer", {"data": data}))
        else:
            buf_offs.append(w.table("Buffer", {}))
    sig_offs = []
    for s in model.signatures:
        ins = [w.table("TensorMap", {"name": n, "tensor_index": i}) for n, i in s.inputs]
        outs = [w.table("TensorMap", {"name": n, "tensor_index": i}) for n, i in s.outputs]
        sig_offs.append(
            w.table(
                "SignatureDef",
                {
                    "inputs": ins,
                    "outputs": outs,
                    "signature_key": s.key,
                    "subgraph_index": s.subgraph,
                },
            )
        )
    md_offs = [w.table("Metadata", {"name": k, "buffer": v}) for k, v in model.metadata.items()]
    root = w.table(
        "Model",
        {
            "version": 3,
            "operator_codes": code_offs,
            "subgraphs": sg_offs,
            "description": model.description,
            "buffers": buf_offs,
            "metadata": md_offs or None,
            "signature_defs": sig_offs or None,
        },
    )
    w.b.Finish(root, file_identifier=FILE_ID)
    return bytes(w.b.Output())


def _nbytes(data: Any) -> int:
    if isinstance(data, bytes | bytearray):
        return len(data)
    return len(memoryview(np.ascontiguousarray(data)).cast("B"))


def write(model: Model, external: bool | None = None) -> bytes:
    """The .tflite bytes of ``model``. Buffers go after the flatbuffer when they would not
    fit in one (``external`` None), or when ``external`` says so."""
    sizes = [_nbytes(b) for b in model.buffers]
    if external is None:
        external = sum(sizes) > LIMIT
    if not external:
        return _build(model, None)
    # Offsets are absolute: build once to learn the flatbuffer's size (the offset fields have
    # a fixed width, so the real values do not change it), then again with the real ones.
    dummy = [(2, s) for s in sizes]
    head = len(_build(model, dummy))
    places, pos = [], -(-head // _ALIGN) * _ALIGN
    for s in sizes:
        places.append((pos, s))
        pos = -(-(pos + s) // _ALIGN) * _ALIGN
    fb = _build(model, places)
    assert len(fb) == head
    out = bytearray(fb)
    for (off, s), data in zip(places, model.buffers):
        if s:
            out.extend(b"\0" * (off - len(out)))
            out.extend(
                memoryview(np.ascontiguousarray(data)).cast("B")
                if not isinstance(data, bytes | bytearray)
                else data
            )
    return bytes(out)
