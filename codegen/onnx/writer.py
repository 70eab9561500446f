"""Writing a model file, with weights inline or as external data, atomically.

# NOTE: invariants
# - External weights are streamed from their arrays (memory-mapped ones stay mapped) into one
#   data file beside the model, each at a 64-byte aligned offset; they are never put into the
#   ModelProto first, so a model over 2 GB saves.
# - Both files are written under temporary names in the target directory, flushed and fsynced,
#   then renamed into place (data first, model last). On any failure the temporaries are
#   removed and existing files at the target paths are left as they were.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

import numpy as np
import onnx

from codegen.onnx.model import ModelBuilder
from codegen.onnx.registry import ONNX_DTYPE
from msc.errors import MscError
from msc.io import files
from msc.ir.dtype import DType
from msc.ir.graph import Graph, Weight

__all__ = ["save", "PROTO_LIMIT"]

PROTO_LIMIT = 2**31 - 2**26  # above this many weight bytes, external data is forced
ALIGN = 64


def _weight_bytes(g: Graph) -> int:
    return sum(w.type.nbytes() or 0 for w in g.weights.values() if w.has_data)


def _write_array(f: BinaryIO, arr: np.ndarray) -> int:
    a = np.ascontiguousarray(arr)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    flat = a.reshape(-1).view(np.uint8)
    step = 1 << 26  # write in 64 MiB pieces so a memory-mapped weight is read piecewise
    for i in range(0, flat.size, step):
        f.write(memoryview(flat[i : i + step]))
    return flat.size


def _tmp(directory: Path, name: str) -> tuple[BinaryIO, Path]:
    fd, p = files.mkstemp(directory, prefix=f".{name}.")
    return os.fdopen(fd, "wb"), Path(p)


def save(
    graph: Graph,
    path: str | os.PathLike,
    *,
    opset: int | None = None,
    external_data: bool | str | None = None,
    size_threshold: int = 1024,
) -> Path:
    """Write ``graph`` as an ONNX model file.

    Args:
        graph: the graph.
        path: the .onnx file to write.
        opset: target opset (default: the newest onnxruntime runs).
        external_data: True to store weights in ``<file name>.data`` beside the model, a
            string to name that file (relative to the model's directory), False to keep them
            inline. None (default): external only when the weights exceed what a protobuf
            can hold (about 2 GB).
        size_threshold: with external data, weights smaller than this many bytes stay inline.

    Returns:
        The path of the model file.

    Raises:
        MscError: inline weights were asked for but do not fit in one protobuf.
        UnsupportedOpsError: the graph has ops the opset cannot express.
    """
    path = files.check_output(path, "file")
    directory = path.parent if str(path.parent) else Path(".")
    total = _weight_bytes(graph)
    if external_data is None:
        external_data = total > PROTO_LIMIT
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

    tmps: list[Path] = []
    try:
        data_f = None
        if location is not None:
            data_f, data_tmp = _tmp(directory, Path(location).name)
            tmps.append(data_tmp)
        offset = 0

        def external(w: Weight) -> onnx.TensorProto | None:
            nonlocal offset
            nbytes = w.type.nbytes() or 0
            if data_f is None or nbytes < size_threshold:
                return None
            pad = -offset % ALIGN
            if pad:
                data_f.write(b"\0" * pad)
                offset += pad
            length = _write_array(data_f, w.numpy())
            t = onnx.TensorProto()
            t.data_type = ONNX_DTYPE[w.type.dtype]
            t.dims.extend(int(d) for d in w.type.shape)  # type: ignore[union-attr]
            t.data_location = onnx.TensorProto.EXTERNAL
            for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
                e = t.external_data.add()
                e.key, e.value = k, v
            offset += length
            return t

        model = ModelBuilder(graph, opset, external=external).run()
        if data_f is not None:
            data_f.flush()
            os.fsync(data_f.fileno())
            data_f.close()
        model_f, model_tmp = _tmp(directory, path.name)
        tmps.append(model_tmp)
        with model_f:
            model_f.write(model.SerializeToString())
            model_f.flush()
            os.fsync(model_f.fileno())
        if location is not None:
            os.replace(data_tmp, directory / location)
        os.replace(model_tmp, path)
        tmps.clear()
    finally:
        if data_f is not None and not data_f.closed:
            data_f.close()
        for p in tmps:
            p.unlink(missing_ok=True)
    return path


_ = DType
