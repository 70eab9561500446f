"""Keras 3 codegen: an msc Graph as readable Keras functional-model source plus weights.

    src = codegen.keras.generate(g)        # model.py's source (flat=True: no block classes)
    model = codegen.keras.to_model(g)      # a keras.Model with its weights (in memory)
    codegen.keras.save(g, "out_dir")       # out_dir/model.py + out_dir/model.weights.npz
    codegen.keras.save(g, "model.keras")   # the generated model as Keras saves it

The source imports only keras and numpy and runs on every Keras backend. Each canonical op
has an emitter (``EMITTERS``), one module per op family named as in ``msc.ops``; an op
without one is lowered through ``msc.ops.decompose``. Every node that can be written neither
way is reported at once in one ``msc.errors.UnsupportedOpsError``. A block type the source
repeats (a BertLayer, a ResNet BasicBlock) is one ``keras.layers.Layer`` subclass, instantiated
per block and called from the functional model, a run of them in a loop
(codegen.keras.blocks); ``flat=True`` writes every op in the functional model.
"""

from __future__ import annotations

import itertools
import linecache
import os
from pathlib import Path
from typing import Any

import numpy as np

from codegen.keras.coverage import coverage_markdown
from codegen.keras.model import MODEL_FILE, WEIGHTS_FILE, Emit, KerasCodegen
from codegen.keras.registry import EMITTERS, EmitterRegistry, emitter
from msc.ir.graph import Graph
from msc.ops import import_families

__all__ = [
    "coverage_markdown",
    "generate",
    "to_model",
    "save",
    "EMITTERS",
    "emitter",
    "Emit",
    "EmitterRegistry",
    "KerasCodegen",
    "MODEL_FILE",
    "WEIGHTS_FILE",
    "KERAS_FILE_MARK",
]

_counter = itertools.count()


def generate(graph: Graph, *, emitters: EmitterRegistry = EMITTERS, flat: bool = False) -> str:
    """The source of ``model.py`` for ``graph``: one Layer class per repeated block type of
    the source's module hierarchy, or (``flat``) every op in the functional model.

    Raises:
        UnsupportedOpsError: every node Keras cannot express, all at once.
    """
    return KerasCodegen(graph, emitters, flat=flat).generate()


def _keras():
    os.environ.setdefault("KERAS_BACKEND", "torch")
    try:
        import keras
    except ImportError as e:
        from msc.errors import MscError

        raise MscError(
            f"the keras target needs keras (pip install 'msc-graph-hub[keras]'): {e}"
        ) from None
    return keras


def to_model(graph: Graph, *, emitters: EmitterRegistry = EMITTERS, flat: bool = False) -> Any:
    """The generated model, built in memory (its source registered with linecache so
    tracebacks show it) with its weights set; ``flat`` as for ``generate``."""
    _keras()
    cg = KerasCodegen(graph, emitters, flat=flat)
    src = cg.generate()
    filename = f"<msc-generated-keras-{next(_counter)}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    scope: dict[str, Any] = {"__name__": "msc_generated_keras", "__file__": filename}
    exec(compile(src, filename, "exec"), scope)
    model = scope["build"]()
    scope["set_weights"](model, cg.arrays())
    return model


# In a .keras file's metadata.json (its first member, stored): the file is one msc wrote.
KERAS_FILE_MARK = "msc codegen.keras"


def save(
    graph: Graph,
    directory: str | os.PathLike,
    *,
    emitters: EmitterRegistry = EMITTERS,
    flat: bool = False,
) -> Path:
    """Write ``model.py`` and ``model.weights.npz`` into ``directory`` (replaced atomically).
    ``model.py``'s ``load()`` builds the model and sets its weights; ``flat`` as for
    ``generate``. A path ending in ``.keras`` gets a Keras 3 file instead: the flat generated
    model with its weights, as ``model.save`` writes it (its SourceWeight layers are
    registered as "msc>SourceWeight": Keras loads them where the class is registered,
    ``msc.from_keras`` with msc's own; a block class would be code of the file's, which Keras'
    safe mode and msc refuse to load)."""
    from msc.io import atomic_dir

    if os.fspath(directory).lower().endswith(".keras"):
        return _save_file(graph, Path(directory), emitters)
    cg = KerasCodegen(graph, emitters, flat=flat)
    src = cg.generate()
    arrays = cg.arrays()
    target = Path(directory)
    with atomic_dir(target) as tmp:
        (tmp / MODEL_FILE).write_text(src, encoding="utf-8")
        with open(tmp / WEIGHTS_FILE, "wb") as f:
            np.savez(f, **arrays)
    return target


def _save_file(graph: Graph, target: Path, emitters: EmitterRegistry) -> Path:
    """The generated model saved by Keras, metadata.json marked as msc's, then renamed into
    place (never half-written)."""
    import json
    import zipfile

    model = to_model(graph, emitters=emitters, flat=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    saved = target.with_name(f".{target.name}.{os.getpid()}.saved.keras")  # Keras wants .keras
    marked = target.with_name(f".{target.name}.{os.getpid()}.marked")
    try:
        model.save(saved)
        with zipfile.ZipFile(saved) as src, zipfile.ZipFile(marked, "w") as dst:
            for item in src.infolist():  # same order, same (stored) members
                data = src.read(item)
                if item.filename == "metadata.json":
                    meta = json.loads(data)
                    data = json.dumps({"generator": KERAS_FILE_MARK, **meta}).encode()
                dst.writestr(item, data)
        os.replace(marked, target)
    finally:
        for p in (saved, marked):
            p.unlink(missing_ok=True)
    return target


# One module per op family, named as in msc.ops; importing one registers its emitters.
import_families(__name__)
