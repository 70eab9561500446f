"""TFLite / LiteRT codegen: an msc Graph as a .tflite flatbuffer, written without TensorFlow.

    data = codegen.tflite.to_bytes(g)      # the file's bytes
    codegen.tflite.save(g, "model.tflite")
    codegen.tflite.to_bytes(g, optimize=False)   # node for node, no export-time folding

Each canonical op has an emitter (``EMITTERS``), one module per op family named as in
``msc.ops``; an op without one is lowered through ``msc.ops.decompose``. Every node that can be
expressed neither way is reported at once in one ``msc.errors.UnsupportedOpsError``.
"""

from __future__ import annotations

import os
from collections import Counter

from codegen.tflite.coverage import coverage_markdown
from codegen.tflite.flatbuf import write
from codegen.tflite.model import Writer, to_records
from codegen.tflite.optimize import fuse_activations, optimize_graph
from codegen.tflite.passes import simplify
from codegen.tflite.registry import EMITTERS, Emit, EmitterRegistry, Ref, emitter
from msc.ir.graph import Graph
from msc.ops import import_families

__all__ = [
    "to_bytes",
    "generate",
    "save",
    "to_records",
    "EMITTERS",
    "emitter",
    "Emit",
    "EmitterRegistry",
    "Ref",
    "Writer",
    "coverage_markdown",
]


def to_bytes(
    graph: Graph,
    *,
    emitters: EmitterRegistry = EMITTERS,
    external: bool | None = None,
    optimize: bool = True,
    done: Counter[str] | None = None,
) -> bytes:
    """The .tflite bytes of ``graph``.

    Args:
        graph: the graph to write (left unchanged).
        emitters: the emitter registry (tests may pass their own).
        external: keep the buffers after the flatbuffer (the layout of models over 2 GB);
            None chooses it when the weights need it.
        optimize: the export-time folds (``codegen.tflite.optimize``: BatchNorm into the
            conv or linear before it, zero pads into SAME, activations fused into their
            producers); False writes an operator (or a few) per node.
        done: with ``optimize``, counts what the folds did, by rewrite.

    Raises:
        UnsupportedOpsError: every node TFLite cannot express, all at once.
    """
    if optimize:
        graph = optimize_graph(graph, done)
    model = simplify(to_records(graph, emitters))
    if optimize and fuse_activations(model, done):
        simplify(model)  # the pre-activation tensors go
    return write(model, external=external)


generate = to_bytes


def save(graph: Graph, path: str | os.PathLike, *, force: bool = False, **kwargs) -> None:
    """Write ``graph`` to ``path`` as a .tflite file, atomically: it is staged under a fresh
    name and renamed, so a failure leaves what was there; an existing file is replaced only
    when msc wrote it (or with ``force``)."""
    from msc.io import files

    p = files.check_output(path, "file", "tflite", force=force)
    data = to_bytes(graph, **kwargs)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = None
    try:
        with files.uninterrupted():
            fd, tmp = files.mkstemp(p.parent, prefix=f".{p.name}.")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        raise


# One module per op family, named as in msc.ops; importing one registers its emitters.
import_families(__name__)
