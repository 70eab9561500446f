"""JAX codegen: an msc Graph as readable JAX, pure functions over a params tree.

    src = codegen.jax.generate(g)               # the source of model.py
    fn, params = codegen.jax.to_function(g)     # forward(params, *inputs), jit-able
    codegen.jax.save(g, "out/")                 # out/model.py + out/weights.safetensors
    codegen.jax.generate(g, flat=True)          # one flat forward over a flat params dict

``forward(params, *inputs)`` uses jax.numpy / jax.lax / jax.nn. The source's module hierarchy
is kept (codegen.jax.blocks): one function per block type (``def bert_layer(params, ...)``),
called with its module's params subtree, a run of layers a ``for`` loop; ``params`` is the
weights nested by their names (``params["encoder"]["layer"][0]``, the generated ``nest``),
whose safetensors keys are the graph's weight names (the source's parameter names). With
``flat=True``, or when the graph has no blocks, one flat ``forward`` reads ``params[name]``.
Each canonical op has an emitter (``EMITTERS``), one module per op family named as in
``msc.ops``; an op without one is lowered through ``msc.ops.decompose``; what can be written
neither way is reported at once.
"""

from __future__ import annotations

import itertools
import linecache
import os
from pathlib import Path
from typing import Any

import numpy as np

from codegen.jax.blocks import flat_params
from codegen.jax.core import JaxCodegen
from codegen.jax.coverage import coverage_markdown
from codegen.jax.registry import EMITTERS, EmitterRegistry, emitter, spelled_out
from msc.ir.graph import Graph
from msc.ops import import_families

__all__ = [
    "coverage_markdown",
    "as_generated",
    "generate",
    "to_function",
    "save",
    "params_of",
    "flat_params",
    "EMITTERS",
    "EmitterRegistry",
    "emitter",
    "spelled_out",
    "MODEL_FILE",
    "WEIGHTS_FILE",
]

MODEL_FILE = "model.py"
WEIGHTS_FILE = "weights.safetensors"
_counter = itertools.count()


def generate(graph: Graph, *, emitters: EmitterRegistry = EMITTERS, flat: bool = False) -> str:
    """The source of a module with ``forward(params, *inputs)`` and ``load_params(path)``;
    ``flat``: one flat ``forward`` instead of one function per block type."""
    return JaxCodegen(graph, emitters, flat=flat).generate()


def params_of(graph: Graph) -> dict[str, np.ndarray]:
    """The weights of ``graph`` as a params dict (name -> array)."""
    return {name: np.asarray(w.numpy()) for name, w in graph.weights.items()}


def to_function(
    graph: Graph, *, emitters: EmitterRegistry = EMITTERS, flat: bool = False
) -> tuple[Any, dict]:
    """``(forward, params)``: the generated function, loaded in memory, and its params (the
    tree ``forward`` reads: nested by module path, or by name with ``flat``)."""
    import jax.numpy as jnp

    src = generate(graph, emitters=emitters, flat=flat)
    filename = f"<msc-generated-jax-{next(_counter)}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    namespace: dict[str, Any] = {"__name__": f"msc_generated_jax_{filename[-2:-1]}"}
    exec(compile(src, filename, "exec"), namespace)
    fn = namespace["forward"]
    fn.msc_source = src
    params = {k: jnp.asarray(v) for k, v in params_of(graph).items()}
    return fn, namespace["nest"](params) if "nest" in namespace else params


def save(graph: Graph, directory: str | os.PathLike, *, flat: bool = False) -> Path:
    """Write ``model.py`` and ``weights.safetensors`` into ``directory`` (replaced
    atomically); ``model.load_params()`` reads the weights back as the params ``forward``
    takes. ``flat``: as ``generate``."""
    from msc.io import atomic_dir, safetensors, source

    src = generate(graph, flat=flat)
    tensors = [(w.name, w.type.dtype, w.type.shape, source(w)) for w in graph.weights.values()]
    target = Path(directory)
    with atomic_dir(target) as tmp:
        (tmp / MODEL_FILE).write_text(src, encoding="utf-8")
        safetensors.write_lazy(tmp / WEIGHTS_FILE, tensors, metadata={"format": "np"})
    return target


def as_generated(graph: Graph, *, emitters: EmitterRegistry = EMITTERS) -> Graph:
    """``graph`` as the generated code computes it, to compare a re-export of the code with:
    the ops without an emitter lowered through their decompositions (as ``generate`` writes
    them), and the ops whose emitter is ``spelled_out`` (JAX lowers the code to the op's
    decomposition, which the frontend's fusions do not recover) decomposed the same way, and
    the ops whose emitter ``computes`` them with more definite attributes given those.
    ``graph`` itself is not changed."""
    from msc.ops.decompose import NotDecomposable, decompose
    from msc.ops.decompose import registry as rules
    from msc.ops.rewrite import copy_graph

    out = JaxCodegen(graph, emitters).graph

    def spelled(n: Any) -> bool:
        if not getattr(emitters.get(n.op), "spelled_out", False) or n.op not in rules:
            return False
        if not n.inputs:  # a rule's node, detached while decompose lowers it (recursively)
            return True
        try:
            rules.expand(n)
        except NotDecomposable:
            return False
        return True

    if any(spelled(n) for n in out.nodes):  # recursively: a rule's nodes may be spelled too
        out = decompose(out, spelled)
    refined = {n.op for n in out.nodes if getattr(emitters.get(n.op), "computes", None)}
    if refined:
        out = copy_graph(out) if out is graph else out
        for n in out.nodes:
            if n.op in refined:
                n.attrs = {**n.attrs, **emitters[n.op].computes}
    return out


# One module per op family, named as in msc.ops; importing one registers its emitters.
import_families(__name__)
