"""Read a .tflite flatbuffer into plain records, every offset and size checked.

The generated schema classes of the ``tflite`` package do the field decoding; this module
checks what they cannot: that each vector lies inside the file before it is walked, that
indices (buffers, tensors, op codes, subgraphs) are in range, and that strings are UTF-8.

# NOTE: invariants
# - Nothing in the file runs: a flatbuffer is data, read field by field. Custom op options and
#   metadata stay bytes.
# - Every vector length is bounded by the bytes left in the file before anything is allocated
#   or iterated for it; a hostile length ends in ``BadModelError``, never a long loop.
# - Buffers are (offset, size) regions of the file (in the flatbuffer, or after it in a model
#   over 2 GB); their bytes are read only when a tensor needs them.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from msc.errors import BadModelError

__all__ = [
    "TfModel",
    "TfSubgraph",
    "TfTensor",
    "TfOperator",
    "TfQuant",
    "TfSparsity",
    "TfSignature",
    "read_model",
    "builtin_name",
    "TYPE_NAMES",
]

# Subgraphs, tensors, operators: limits far above any real model, so that a hostile count is
# refused before it costs time (each also has to fit in the file's bytes).
MAX_ITEMS = 1 << 24


class _Bad(Exception):
    """Raised inside the reader; turned into BadModelError naming where."""


def _snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    return re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s).lower()


def _enum_names(cls: type) -> dict[int, str]:
    return {v: k for k, v in vars(cls).items() if not k.startswith("_") and isinstance(v, int)}


def _schema() -> Any:
    try:
        import tflite
    except ImportError as e:
        raise BadModelError(
            f"reading .tflite files needs the tflite package (pip install 'msc-graph-hub[tflite]')"
            f": {e}"
        ) from None
    return tflite


_BUILTINS: dict[int, str] | None = None
TYPE_NAMES = {
    0: "FLOAT32",
    1: "FLOAT16",
    2: "INT32",
    3: "UINT8",
    4: "INT64",
    5: "STRING",
    6: "BOOL",
    7: "INT16",
    8: "COMPLEX64",
    9: "INT8",
    10: "FLOAT64",
    11: "COMPLEX128",
    12: "UINT64",
    13: "RESOURCE",
    14: "VARIANT",
    15: "UINT32",
    16: "UINT16",
    17: "INT4",
    18: "BFLOAT16",
}


def builtin_name(code: int) -> str:
    """The schema's name of builtin op ``code`` (``CONV_2D``); ``BUILTIN_<n>`` for a code newer
    than the installed schema."""
    global _BUILTINS
    if _BUILTINS is None:
        _BUILTINS = _enum_names(_schema().BuiltinOperator)
        # Codes the installed generated schema predates (LiteRT's schema.fbs).
        _BUILTINS.setdefault(209, "STABLEHLO_CASE")
    return _BUILTINS.get(code, f"BUILTIN_{code}")


@dataclass(frozen=True, slots=True)
class TfQuant:
    """A tensor's affine quantization: real = scale * (q - zero_point), per tensor (one scale)
    or per channel along ``axis``."""

    scale: np.ndarray  # float32, 1-d
    zero_point: np.ndarray  # int64, 1-d, as many as scales (or empty: all zero)
    axis: int = 0
    min: tuple[float, ...] = ()
    max: tuple[float, ...] = ()
    custom: bool = False  # QuantizationDetails set: a scheme other than affine


@dataclass(frozen=True, slots=True)
class TfSparsity:
    """A sparse constant (TACO format): traversal order, block map, per-dimension metadata
    (format 0 dense with ``dense_size``, 1 CSR with segment and index arrays)."""

    traversal_order: tuple[int, ...]
    block_map: tuple[int, ...]
    dims: tuple[tuple[int, int, np.ndarray | None, np.ndarray | None], ...]


@dataclass(slots=True)
class TfTensor:
    index: int
    name: str
    type: int  # the schema's TensorType code
    shape: tuple[int, ...]
    signature: tuple[int, ...] | None  # shape_signature: -1 for a dynamic dim
    buffer: int
    quant: TfQuant | None = None
    is_variable: bool = False
    sparsity: TfSparsity | None = None
    has_rank: bool = True

    @property
    def type_name(self) -> str:
        return TYPE_NAMES.get(self.type, f"type {self.type}")


@dataclass(slots=True)
class TfOperator:
    index: int
    op: str  # builtin name (CONV_2D) or, for CUSTOM, the custom code
    custom: bool
    version: int
    inputs: tuple[int, ...]  # -1: an absent optional input
    outputs: tuple[int, ...]
    options: dict[str, Any] = field(default_factory=dict)
    options_type: str = ""  # the options table's name (Conv2DOptions), "" for none
    custom_options: bytes | None = None
    intermediates: tuple[int, ...] = ()

    @property
    def label(self) -> str:
        return f"operator {self.index} ({self.op})"


@dataclass(slots=True)
class TfSubgraph:
    index: int
    name: str
    tensors: list[TfTensor]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    operators: list[TfOperator]


@dataclass(slots=True)
class TfSignature:
    key: str
    subgraph: int
    inputs: list[tuple[str, int]]  # (name, tensor index)
    outputs: list[tuple[str, int]]


@dataclass(slots=True)
class TfModel:
    version: int
    description: str
    subgraphs: list[TfSubgraph]
    buffers: list[tuple[int, int]]  # (offset, size) in the file's bytes; (0, 0) for none
    signatures: list[TfSignature]
    metadata: dict[str, int]
    data: Any  # the file's bytes (bytes or a read-only mmap)
    path: str | None = None

    def buffer_bytes(self, index: int) -> memoryview:
        off, size = self.buffers[index]
        return memoryview(self.data)[off : off + size]

    def close(self) -> None:
        if isinstance(self.data, mmap.mmap):
            try:
                self.data.close()
            except BufferError:  # a view still alive (an error's traceback): freed with it
                pass


class _Reader:
    def __init__(self, data: Any) -> None:
        self.data = data
        self.size = len(data)
        self.fb = _schema()
        import flatbuffers

        self.N = flatbuffers.number_types

    # ------------------------------------------------------------ low level
    def _vector(self, obj: Any, slot: int, elem: int, what: str) -> tuple[int, int] | None:
        """(start, length) of the vector in field ``slot`` of ``obj``, checked to fit."""
        tab = obj._tab
        o = tab.Offset(4 + 2 * slot)
        if o == 0:
            return None
        start = tab.Vector(o)
        n = tab.VectorLen(o)
        if n < 0 or n > MAX_ITEMS * 64 or start < 0 or start + n * elem > self.size:
            raise _Bad(f"{what}: a vector of {n} items does not fit in the file")
        return start, n

    def _ints(self, obj: Any, slot: int, what: str, fmt: str = "<i", size: int = 4) -> list:
        v = self._vector(obj, slot, size, what)
        if v is None:
            return []
        start, n = v
        return [x[0] for x in struct.iter_unpack(fmt, bytes(self.data[start : start + n * size]))]

    def _array(self, obj: Any, slot: int, dtype: str, what: str) -> np.ndarray:
        dt = np.dtype(dtype)
        v = self._vector(obj, slot, dt.itemsize, what)
        if v is None:
            return np.zeros(0, dt)
        start, n = v
        return np.frombuffer(self.data, dt, count=n, offset=start).copy()

    def _count(self, obj: Any, slot: int, what: str) -> int:
        v = self._vector(obj, slot, 4, what)
        if v is None:
            return 0
        if v[1] > MAX_ITEMS:
            raise _Bad(f"{what}: {v[1]} items")
        return v[1]

    def _str(self, raw: bytes | None, what: str) -> str:
        if raw is None:
            return ""
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError as e:
            raise _Bad(f"{what} is not UTF-8 ({e.reason} at byte {e.start})") from None

    # ------------------------------------------------------------ model
    def model(self) -> TfModel:
        fb = self.fb
        if self.size < 8:
            raise _Bad(f"{self.size} bytes is too short for a flatbuffer")
        if bytes(self.data[4:8]) != b"TFL3":
            raise _Bad("no TFL3 file identifier (not a .tflite flatbuffer)")
        m = fb.Model.GetRootAs(self.data, 0)
        version = m.Version()
        buffers = []
        for i in range(self._count(m, 4, "buffers")):
            buffers.append(self.buffer(m.Buffers(i), i))
        subgraphs = [
            self.subgraph(m, m.Subgraphs(i), i, buffers)
            for i in range(self._count(m, 2, "subgraphs"))
        ]
        if not subgraphs:
            raise _Bad("the model has no subgraphs")
        codes = []
        for i in range(self._count(m, 1, "operator codes")):
            c = m.OperatorCodes(i)
            code = max(int(c.DeprecatedBuiltinCode()), int(c.BuiltinCode()))
            custom = c.CustomCode()
            codes.append(
                (
                    code,
                    self._str(custom, f"operator code {i}") if code == 32 else None,
                    int(c.Version()),
                )
            )
        for sg in subgraphs:
            for op in sg.operators:
                self._resolve(op, codes, sg)
        signatures = []
        for i in range(self._count(m, 7, "signature defs")):
            s = m.SignatureDefs(i)
            sub = int(s.SubgraphIndex())
            if not 0 <= sub < len(subgraphs):
                raise _Bad(f"signature {i} names subgraph {sub} of {len(subgraphs)}")
            key = self._str(s.SignatureKey(), f"signature {i} key")
            ins = [
                self._tmap(s.Inputs(j), subgraphs[sub], f"signature {key!r} input {j}")
                for j in range(self._count(s, 0, "signature inputs"))
            ]
            outs = [
                self._tmap(s.Outputs(j), subgraphs[sub], f"signature {key!r} output {j}")
                for j in range(self._count(s, 1, "signature outputs"))
            ]
            signatures.append(TfSignature(key, sub, ins, outs))
        metadata = {}
        for i in range(self._count(m, 6, "metadata")):
            md = m.Metadata(i)
            metadata[self._str(md.Name(), f"metadata {i} name")] = int(md.Buffer())
        desc = self._str(m.Description(), "the model description")
        return TfModel(int(version), desc, subgraphs, buffers, signatures, metadata, self.data)

    def _tmap(self, t: Any, sg: TfSubgraph, what: str) -> tuple[str, int]:
        idx = int(t.TensorIndex())
        if not 0 <= idx < len(sg.tensors):
            raise _Bad(f"{what} names tensor {idx} of {len(sg.tensors)}")
        return self._str(t.Name(), what), idx

    def buffer(self, b: Any, i: int) -> tuple[int, int]:
        v = self._vector(b, 0, 1, f"buffer {i}")
        if v is not None and v[1]:
            return v
        off, size = int(b.Offset()), int(b.Size())
        if off > 1:  # stored after the flatbuffer (models over 2 GB)
            if off + size > self.size:
                raise _Bad(f"buffer {i}: {size} bytes at {off} run past the file's end")
            return off, size
        return 0, 0

    def subgraph(self, m: Any, s: Any, i: int, buffers: list) -> TfSubgraph:
        where = f"subgraph {i}"
        tensors = [
            self.tensor(s.Tensors(j), j, where, len(buffers))
            for j in range(self._count(s, 0, f"{where} tensors"))
        ]
        n = len(tensors)

        def idx(values: list[int], what: str, optional: bool = False) -> tuple[int, ...]:
            for x in values:
                if not (0 <= x < n or (optional and x == -1)):
                    raise _Bad(f"{where}: {what} names tensor {x} of {n}")
            return tuple(values)

        inputs = idx(self._ints(s, 1, f"{where} inputs"), "an input")
        outputs = idx(self._ints(s, 2, f"{where} outputs"), "an output")
        ops = []
        for j in range(self._count(s, 3, f"{where} operators")):
            o = s.Operators(j)
            w = f"{where} operator {j}"
            op = TfOperator(
                index=j,
                op="",
                custom=False,
                version=int(o.OpcodeIndex()),  # resolved to the op code's version later
                inputs=idx(self._ints(o, 1, f"{w} inputs"), f"{w} input", optional=True),
                outputs=idx(self._ints(o, 2, f"{w} outputs"), f"{w} output", optional=True),
                intermediates=idx(self._ints(o, 8, f"{w} intermediates"), f"{w} intermediate"),
            )
            op.options_type, op.options = self.options(o, w)
            co = self._vector(o, 5, 1, f"{w} custom options")
            if co is not None:
                op.custom_options = bytes(self.data[co[0] : co[0] + co[1]])
            else:
                off, size = int(o.LargeCustomOptionsOffset()), int(o.LargeCustomOptionsSize())
                if off > 1:
                    if off + size > self.size:
                        raise _Bad(f"{w}: custom options run past the file's end")
                    op.custom_options = bytes(self.data[off : off + size])
            ops.append(op)
        name = self._str(s.Name(), f"{where} name")
        return TfSubgraph(i, name, tensors, inputs, outputs, ops)

    def _resolve(self, op: TfOperator, codes: list, sg: TfSubgraph) -> None:
        k = op.version
        if not 0 <= k < len(codes):
            raise _Bad(f"subgraph {sg.index} operator {op.index}: op code {k} of {len(codes)}")
        code, custom, version = codes[k]
        op.version = version
        if code == 32:
            op.custom, op.op = True, custom or ""
        else:
            op.op = builtin_name(code)

    def tensor(self, t: Any, j: int, where: str, n_buffers: int) -> TfTensor:
        w = f"{where} tensor {j}"
        name = self._str(t.Name(), f"{w} name")
        shape = tuple(self._ints(t, 0, f"{w} shape"))
        sig_v = self._vector(t, 7, 4, f"{w} shape_signature")
        signature = tuple(self._ints(t, 7, f"{w} shape_signature")) if sig_v else None
        if any(d < 0 for d in shape) or (signature and any(d < -1 for d in signature)):
            raise _Bad(f"{w} ({name!r}): negative dim in {list(shape)}")
        if signature is not None and len(signature) != len(shape):
            raise _Bad(f"{w} ({name!r}): shape_signature {list(signature)} vs {list(shape)}")
        buf = int(t.Buffer())
        if not 0 <= buf < max(n_buffers, 1):
            raise _Bad(f"{w} ({name!r}) names buffer {buf} of {n_buffers}")
        tensor = TfTensor(j, name, int(t.Type()), shape, signature, buf)
        tensor.is_variable = bool(t.IsVariable())
        tensor.has_rank = bool(t.HasRank()) or bool(shape)
        q = t.Quantization()
        if q is not None:
            tensor.quant = self.quant(q, f"{w} ({name!r})")
            self._check_quant(tensor, f"{w} ({name!r})")
        sp = t.Sparsity()
        if sp is not None:
            tensor.sparsity = self.sparsity(sp, w)
        return tensor

    def quant(self, q: Any, w: str) -> TfQuant | None:
        scale = self._array(q, 2, "<f4", f"{w} scales")
        zp = self._array(q, 3, "<i8", f"{w} zero points")
        mins = tuple(float(x) for x in self._array(q, 0, "<f4", f"{w} min"))
        maxs = tuple(float(x) for x in self._array(q, 1, "<f4", f"{w} max"))
        custom = int(q.DetailsType()) != 0
        if not scale.size and not custom:
            return None  # min/max only: calibration data, not a quantized tensor
        if zp.size not in (0, scale.size):
            raise _Bad(f"{w}: {zp.size} zero points for {scale.size} scales")
        return TfQuant(
            scale.astype(np.float32),
            zp.astype(np.int64),
            int(q.QuantizedDimension()),
            mins,
            maxs,
            custom,
        )

    @staticmethod
    def _check_quant(t: TfTensor, w: str) -> None:
        """A quantization block that fits its tensor: one scale, or one per element of the
        quantized dimension; every scale finite and positive (LiteRT divides by them)."""
        q = t.quant
        if q is None or q.custom:
            return
        bad = ~np.isfinite(q.scale) | (q.scale <= 0)
        if np.any(bad):
            raise _Bad(f"{w}: quantization scale {float(q.scale[bad][0])!r} is not positive")
        n = q.scale.size
        if n > 1:
            if not 0 <= q.axis < len(t.shape):
                raise _Bad(f"{w}: quantized dimension {q.axis} of a rank-{len(t.shape)} tensor")
            if t.shape[q.axis] != n:
                raise _Bad(
                    f"{w}: {n} scales for the {t.shape[q.axis]} elements of its quantized "
                    f"dimension {q.axis}"
                )

    def sparsity(self, sp: Any, w: str) -> TfSparsity:
        order = tuple(self._ints(sp, 0, f"{w} traversal order"))
        block = tuple(self._ints(sp, 1, f"{w} block map"))
        dims = []
        for k in range(self._count(sp, 2, f"{w} dim metadata")):
            d = sp.DimMetadata(k)
            seg = self._index_vector(d, int(d.ArraySegmentsType()), 3, f"{w} dim {k} segments")
            ind = self._index_vector(d, int(d.ArrayIndicesType()), 5, f"{w} dim {k} indices")
            dims.append((int(d.Format()), int(d.DenseSize()), seg, ind))
        return TfSparsity(order, block, tuple(dims))

    def _index_vector(self, d: Any, kind: int, slot: int, what: str) -> np.ndarray | None:
        if kind == 0:
            return None
        tab = d._tab
        o = tab.Offset(4 + 2 * slot)
        if o == 0:
            return None
        import flatbuffers

        sub = flatbuffers.table.Table(tab.Bytes, 0)
        tab.Union(sub, o)
        dtype = {1: "<i4", 2: "<u2", 3: "<u1"}.get(kind)
        if dtype is None:
            raise _Bad(f"{what}: unknown index vector type {kind}")

        class _T:
            _tab = sub

        return self._array(_T, 0, dtype, what).astype(np.int64)

    # ------------------------------------------------------------ options
    def options(self, o: Any, w: str) -> tuple[str, dict[str, Any]]:
        fb = self.fb
        out: dict[str, Any] = {}
        name = ""
        for type_fn, table_fn, union in (
            (o.BuiltinOptionsType, o.BuiltinOptions, fb.BuiltinOptions),
            (o.BuiltinOptions2Type, o.BuiltinOptions2, fb.BuiltinOptions2),
        ):
            kind = int(type_fn())
            if kind == 0:
                continue
            cls_name = _enum_names(union).get(kind)
            cls = getattr(fb, cls_name, None) if cls_name else None
            table = table_fn()
            if cls is None or table is None:
                raise _Bad(f"{w}: unknown options type {kind}")
            opts = cls()
            opts.Init(table.Bytes, table.Pos)
            name = cls_name
            out.update(self.table(opts, f"{w} {cls_name}"))
        return name, out

    def table(self, obj: Any, w: str) -> dict[str, Any]:
        """Every field of a generated options table, by its schema name (snake_case)."""
        out: dict[str, Any] = {}
        cls = type(obj)
        for attr in _fields(cls):
            key = _snake(attr)
            if hasattr(cls, attr + "Length"):
                n = getattr(obj, attr + "Length")()
                if n > self.size:
                    raise _Bad(f"{w}: field {key} has {n} items")
                if hasattr(cls, attr + "AsNumpy") and n:
                    arr = getattr(obj, attr + "AsNumpy")()
                    out[key] = [x.item() for x in np.asarray(arr)]
                else:
                    out[key] = [] if n == 0 else None  # a vector of tables: not an option value
                continue
            v = getattr(obj, attr)()
            if isinstance(v, bytes):
                v = self._str(v, f"{w} field {key}")
            elif v is not None and not isinstance(v, int | float | bool):
                continue  # a nested table
            out[key] = v
        return out


_FIELDS: dict[type, list[str]] = {}
_NOT_FIELDS = {"Init", "GetRootAs"}


def _fields(cls: type) -> list[str]:
    """The field accessors of a generated table class, in schema order."""
    got = _FIELDS.get(cls)
    if got is None:
        names = [k for k, v in vars(cls).items() if callable(v) or isinstance(v, classmethod)]
        got = [
            k
            for k in names
            if k[:1].isupper()
            and k not in _NOT_FIELDS
            and not k.startswith("GetRootAs")
            and not k.endswith(("Length", "AsNumpy", "IsNone", "BufferHasIdentifier"))
        ]
        _FIELDS[cls] = got
    return got


_DEFAULT_OPTIONS: dict[str, dict[str, Any]] = {}


def option_defaults(options_type: str) -> dict[str, Any]:
    """The schema defaults of an options table's fields (read from an empty table)."""
    got = _DEFAULT_OPTIONS.get(options_type)
    if got is None:
        got = {}
        cls = getattr(_schema(), options_type, None) if options_type else None
        if cls is not None:
            import flatbuffers

            b = flatbuffers.Builder(16)
            b.StartObject(0)
            b.Finish(b.EndObject())
            buf = bytes(b.Output())
            obj = cls()
            obj.Init(buf, flatbuffers.encode.Get(flatbuffers.packer.uoffset, buf, 0))
            got = _Reader(buf).table(obj, options_type)
        _DEFAULT_OPTIONS[options_type] = got
    return got


def read_model(src: str | os.PathLike | bytes | bytearray | memoryview) -> TfModel:
    """Read a .tflite file (a path, mapped read-only) or its bytes into a ``TfModel``."""
    path = None
    if isinstance(src, str | os.PathLike):
        path = os.fspath(src)
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                raise BadModelError(f"{path}: the file is empty (0 bytes)")
            data: Any = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    else:
        data = bytes(src)
    try:
        model = _Reader(data).model()
    except BadModelError:
        raise
    except (_Bad, struct.error, IndexError, ValueError, OverflowError, TypeError) as e:
        if isinstance(data, mmap.mmap):
            try:
                data.close()
            except BufferError:
                pass
        where = f"{path}: " if path else ""
        why = str(e) if isinstance(e, _Bad) else f"{type(e).__name__}: {e}"
        raise BadModelError(f"{where}not a readable .tflite model: {why}") from None
    model.path = path
    return model
