"""Writing a model file, with weights inline or as external data, atomically.

# NOTE: invariants
# - External weights are streamed into one data file beside the model, each at a 64-byte
#   aligned offset: a weight that is a region of a file (ONNX external data, msc's
#   safetensors) is copied file to file without being read into memory, an array in 64 MiB
#   pieces, sub-byte types packed as ONNX stores them. They are never put into the ModelProto
#   first, so a model over 2 GB saves.
# - Weights whose regions were in a file this save replaces are re-pointed to the new file,
#   so the graph stays usable after saving over its own source.
# - Both files are written under temporary names in the target directory through
#   msc.io.files.DataFile (direct I/O where the file system has it: the bytes skip the page
#   cache, which was most of the CPU time of a save), each fsynced once, then renamed into
#   place (data first, model last). On any failure the temporaries are removed and existing
#   files at the target paths are left as they were.
# - One fsync per file, not one per save: POSIX makes fsync durable for its own file only,
#   and the model must not become visible before the data it points to is durable. With
#   direct I/O the data file's fsync has only metadata left to write; measured on BERT base
#   (418 MiB of data, 182 KiB of model), the two fsyncs together take about 0.5 ms of CPU and
#   10 to 35 ms of wall time of a 0.6 s save.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import onnx

from codegen.onnx.model import ModelBuilder, written_weights
from codegen.onnx.optimize import Blocks
from codegen.onnx.registry import ONNX_DTYPE
from msc.errors import MscError
from msc.io import files
from msc.ir.dtype import DType
from msc.ir.graph import Graph, Weight
from msc.ir.tensor import SUB_BYTE_BITS, FileRegion, Packed, pack

__all__ = ["save", "PROTO_LIMIT", "EXTERNAL_ABOVE", "check_data_file"]

_PENDING = "msc.pending"  # an external initializer whose bytes are written after the pass
_FLOAT_TYPES = {ONNX_DTYPE[d] for d in DType if d.is_floating and d in ONNX_DTYPE}
PROTO_LIMIT = 2**31 - 2**26  # above this many weight bytes, external data is forced
# Above this many weight bytes, the default is external data: onnxruntime maps an external
# data file where it parses inline weights out of the protobuf. onnxruntime 1.32, one thread,
# median session-creation CPU time, files at rest: a Linear chain of 4 MiB loads in 5.1 ms
# inline against 3.3 ms external, 16 MiB in 23 against 12.5, MobileNetV3-Large (22 MB) in 45
# against 29 (torch.onnx's file, external by default: 35); BERT base 1773 against 812 ms.
# Below 4 MiB the gain is under a millisecond and one file is handier.
EXTERNAL_ABOVE = 2**22
ALIGN = 64


def _weight_bytes(g: Graph) -> int:
    return sum(w.nbytes for w in written_weights(g) if w.has_data)


def _write_weight(f: files.DataFile, w: Weight) -> int:
    """Append ``w``'s bytes as ONNX stores them; returns their count."""
    data = w.storage
    if w.type.dtype in SUB_BYTE_BITS:
        if isinstance(data, FileRegion) and data.packed:
            return f.copy_region(data)
        packed = data.packed_bytes() if isinstance(data, FileRegion | Packed) else pack(w.numpy())
        f.write(memoryview(packed))
        return packed.size
    if isinstance(data, FileRegion):
        return f.copy_region(data)
    return _write_array(f, w.numpy())


def _write_array(f: files.DataFile, arr: np.ndarray) -> int:
    a = np.ascontiguousarray(arr)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    flat = a.reshape(-1).view(np.uint8)
    step = 1 << 26  # write in 64 MiB pieces so a memory-mapped weight is read piecewise
    for i in range(0, flat.size, step):
        f.write(memoryview(flat[i : i + step]))
    return flat.size


def _tmp(directory: Path, name: str) -> tuple[files.DataFile, Path]:
    fd, p = files.mkstemp(directory, prefix=f".{name}.")
    return files.DataFile(fd), Path(p)


def save(
    graph: Graph,
    path: str | os.PathLike,
    *,
    opset: int | None = None,
    external_data: bool | str | None = None,
    size_threshold: int = 1024,
    optimize: bool = True,
    done: dict[str, int] | None = None,
    decompose: Iterable[str] = (),
) -> Path:
    """Write ``graph`` as an ONNX model file.

    Args:
        graph: the graph.
        path: the .onnx file to write.
        opset: target opset (default: ``choose_opset(graph)``, the newest at which the
            installed onnxruntime has a kernel for every op).
        external_data: True to store weights in ``<file name>.data`` beside the model, a
            string to name that file (relative to the model's directory), False to keep them
            inline. None (default): external when the weights are over 4 MiB
            (``EXTERNAL_ABOVE``: onnxruntime loads such a model faster from a data file),
            inline below.
        size_threshold: with external data, weights smaller than this many bytes stay inline.
        optimize: fold what is constant before writing (see ``codegen.onnx.to_model``);
            False writes the graph node for node.
        done: a dict to fill with what the optimization did (rewrite -> count).
        decompose: canonical ops written through their decompositions even where the opset
            has an op for them (``("attention",)``: MatMul/Softmax for onnxruntime's
            transformer optimizer; see ``ModelBuilder``).

    Returns:
        The path of the model file.

    Raises:
        MscError: inline weights were asked for but do not fit in one protobuf.
        UnsupportedOpsError: the graph has ops the opset cannot express.
    """
    path = files.check_output(path, "file", "onnx")
    directory = path.parent if str(path.parent) else Path(".")
    total = _weight_bytes(graph)
    if external_data is None:
        external_data = total > min(EXTERNAL_ABOVE, PROTO_LIMIT)
    elif external_data is False and total > PROTO_LIMIT:
        raise MscError(
            f"{path}: {total} bytes of weights do not fit in one protobuf; use external data"
        )
    location = (
        external_data
        if isinstance(external_data, str)
        else (f"{path.name}.data" if external_data else None)
    )
    if location is not None and (os.path.isabs(location) or ".." in Path(location).parts):
        raise MscError(f"external data location {location!r} must stay beside the model")
    if location is not None:
        check_data_file(path, directory / location, location)

    tmps: list[Path] = []
    try:
        data_f = None
        if location is not None:
            with files.uninterrupted():
                data_f, data_tmp = _tmp(directory, Path(location).name)
                tmps.append(data_tmp)
        offset = 0

        written: dict[str, tuple[Weight, int, int]] = {}
        # The weights referenced so far, by the token the reference carries: the builder's
        # own (a layout change or a fold may have remade a weight under its name, so the
        # caller's graph, by name, can hold other data).
        pending: dict[str, Weight] = {}

        def external(w: Weight) -> onnx.TensorProto | None:
            # ONNX has no external form for strings: a str weight is always inline.
            if data_f is None or w.nbytes < size_threshold or w.type.dtype.is_string:
                return None
            t = onnx.TensorProto()
            t.data_type = ONNX_DTYPE[w.type.dtype]
            t.dims.extend(int(d) for d in w.type.shape)  # type: ignore[union-attr]
            t.data_location = onnx.TensorProto.EXTERNAL
            e = t.external_data.add()
            e.key, e.value = _PENDING, str(len(pending))
            pending[e.value] = w
            return t

        def place(t: onnx.TensorProto, length: int) -> None:
            nonlocal offset
            del t.external_data[:]
            t.data_location = onnx.TensorProto.EXTERNAL
            for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
                e = t.external_data.add()
                e.key, e.value = k, v
            offset += length

        def align() -> None:
            nonlocal offset
            pad = -offset % ALIGN
            if pad:
                data_f.write(b"\0" * pad)  # type: ignore[union-attr]
                offset += pad

        def store(arr: np.ndarray | Blocks) -> onnx.TensorProto | None:
            # A weight the optimization made (pre-transposed, BatchNorm-scaled): written out
            # as it is made (piece by piece where it comes in pieces), so they are not all in
            # memory at once. Integer ones stay inline (axes, shapes and pads onnxruntime
            # reads when it loads the model).
            if data_f is None or arr.nbytes < size_threshold or arr.dtype.kind != "f":
                return None
            t = onnx.TensorProto()
            t.data_type = onnx.helper.np_dtype_to_tensor_dtype(arr.dtype)
            t.dims.extend(arr.shape)
            align()
            if isinstance(arr, Blocks):
                length = sum(_write_array(data_f, piece) for piece in arr.pieces())
            else:
                length = _write_array(data_f, arr)
            place(t, length)
            return t

        builder = ModelBuilder(
            graph, opset, external=external, optimize=optimize, decompose=decompose, store=store
        )
        model = builder.run()
        if done is not None:
            done.update(builder.optimized)
        if data_f is not None:  # the weights the written model reads, in its order
            for t in model.graph.initializer:
                ref = {e.key: e.value for e in t.external_data}
                if _PENDING in ref:
                    w = pending[ref[_PENDING]]
                    align()
                    start = offset
                    length = _write_weight(data_f, w)
                    written[w.name] = (w, start, length)
                    place(t, length)
                elif (
                    t.HasField("raw_data")
                    and len(t.raw_data) >= size_threshold
                    and t.data_type in _FLOAT_TYPES
                ):
                    # One the optimization made and kept inline (a fold of constants): large
                    # float ones go out too.
                    align()
                    data_f.write(memoryview(t.raw_data))
                    length = len(t.raw_data)
                    t.ClearField("raw_data")
                    place(t, length)
        if data_f is not None:
            data_f.finish()
            data_f.close()
        with files.uninterrupted():
            model_f, model_tmp = _tmp(directory, path.name)
            tmps.append(model_tmp)
        try:
            model_f.write(model.SerializeToString())
            model_f.finish()
        finally:
            model_f.close()
        replaced = {str((directory / p).resolve()) for p in ([location] if location else [])}
        replaced.add(str(path.resolve()))
        for w in _reading(graph, replaced):
            if written.get(w.name, (None,))[0] is not w:  # not written as is: keep its bytes
                w.set_data(np.array(w.numpy()))
        with files.uninterrupted():  # the data file and the model that reads it, together
            if location is not None:
                os.replace(data_tmp, directory / location)
            os.replace(model_tmp, path)
            tmps.clear()
        _repoint(graph, replaced, directory / location if location else None, written)
    finally:
        if data_f is not None and not data_f.closed:
            data_f.close()
        for p in tmps:
            p.unlink(missing_ok=True)
    return path


def check_data_file(path: Path, data: Path, location: str) -> None:
    """The external data file is replaced only when it is the data of the msc model being
    replaced (``files.check_output`` checked that one): anything else there is the user's."""
    if not (data.exists() or data.is_symlink()):
        return
    if data.is_file() and not data.is_symlink() and path.is_file():
        try:
            model = onnx.load(str(path), load_external_data=False)
        except Exception:  # noqa: BLE001 - unreadable: not known to be msc's model
            model = None
        if model is not None and any(
            e.key == "location" and e.value == location
            for t in model.graph.initializer
            for e in t.external_data
        ):
            return
    raise MscError(
        f"{data}: exists and is not the data of an msc model at {path.name}; choose another "
        "path or remove it"
    )


def _repoint(
    graph: Graph,
    replaced: set[str],
    data_path: Path | None,
    written: dict[str, tuple[Weight, int, int]],
) -> None:
    """Weights read from a file this save replaced read the same bytes from the new file."""
    if data_path is None:
        return
    for w in _reading(graph, replaced):
        r = w.region
        if r is not None and w.name in written and written[w.name][0] is w:
            _, off, length = written[w.name]
            packed = w.type.dtype in SUB_BYTE_BITS
            w.set_data(FileRegion.at(data_path, off, length, r.dtype, r.shape, packed=packed))


def _reading(graph: Graph, paths: set[str]) -> list[Weight]:
    """The weights whose data is a region of one of ``paths``."""
    out = []
    for w in graph.weights.values():
        r = w.region
        if r is not None and str(Path(r.path).resolve()) in paths:
            out.append(w)
    return out


_ = DType
