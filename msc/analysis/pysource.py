"""Models that are Python code: the ``model.py`` msc's codegens write, and the checks that
tell such a file from a user's file or a TVMScript file before anything runs.

- A codegen.torch ``model.py`` (its directory, the file, or ``model.py:Class`` naming the class
  its ``load()`` builds) is imported and built by its own ``load()`` with the
  ``model.safetensors`` beside it (safetensors: nothing unpickled), then exported with
  torch.export at ``--input-shape`` or the inputs its class docstring declares.
- A codegen.keras ``model.py`` (its directory or the file) is built by its ``load()`` with the
  ``model.weights.npz`` beside it (read without pickle).
- Generated JAX code (codegen.jax) is not read back: it declares no input shapes; the error
  says what to give instead.
- Any other ``.py`` without ``:ClassName`` is TVMScript (msc.frontend.relax.script reads it
  without running it) or refused with what to add.

# NOTE: which codegen wrote a file is read from its first bytes (msc.io.marker.SOURCES) and the
# model class from its syntax tree: nothing runs to decide. A recognised file is Python code
# and runs when it is loaded, as its directory always did (docs/security.md).
"""

from __future__ import annotations

import ast
import inspect as pyinspect
import os
import re
from collections.abc import Callable
from pathlib import Path

from msc.analysis.model import Model, _from_module, _import_file
from msc.analysis.shapes import InputShape, concrete_shape, dynamic_items
from msc.errors import MscError
from msc.io.marker import generated_source
from msc.ir.graph import Graph
from msc.ir.types import TensorType

__all__ = [
    "load_torch_source",
    "load_keras_source",
    "generated_module",
    "generated_weights",
    "exports_module",
    "model_class",
    "refuse_plain_python",
    "jax_source_error",
]


# The weights file beside a generated model.py, by the codegen that wrote it (what its load()
# reads by default).
_WEIGHTS_BESIDE = {
    "torch": "model.safetensors",
    "keras": "model.weights.npz",
    "jax": "weights.safetensors",
}
_KIND_NAMES = {"torch": "PyTorch", "keras": "Keras", "jax": "JAX"}


def load_keras_source(code: Path, say: Callable[[str], None], label: str) -> Model:
    """A codegen.keras ``model.py`` (given as its directory or as the file): it is imported
    (Python code: it runs) and its ``load()`` builds the model with the weights of the
    model.weights.npz beside it."""
    import msc
    from msc.frontend.keras import keras_module

    weights = _weights_beside(code, "keras")
    keras_module()
    say(f"building the Keras model from {code.name}")
    load = _import_file(code, "load")
    try:
        model = load(str(weights))
    except (Exception, SystemExit) as e:
        raise MscError(f"{label}: {code.name}'s load() failed: {type(e).__name__}: {e}") from None
    return Model(msc.from_keras(model), "keras", label, model)


def generated_weights(code: str | os.PathLike) -> Path | None:
    """The weights file a ``model.py`` msc generated reads (beside it), whether or not it
    exists; None for any other file. Reads the file's first bytes only."""
    kind = generated_source(Path(code))
    return Path(code).parent / _WEIGHTS_BESIDE[kind] if kind else None


def _weights_beside(code: Path, kind: str) -> Path:
    weights = code.parent / _WEIGHTS_BESIDE[kind]
    if not weights.is_file():
        raise MscError(
            f"{code}: generated {_KIND_NAMES[kind]} code without its weights: {weights.name} "
            f"is not beside it (its load() reads them from there)"
        )
    return weights


def jax_source_error(code: Path) -> MscError:
    """Generated JAX code is not a source msc reads back (it declares no input shapes)."""
    return MscError(
        f"{code}: JAX code msc generated (codegen.jax); msc does not read it back as a model: "
        "give the model it was converted from, or a .jaxexport of its forward "
        "(jax.export(jax.jit(...)).serialize())"
    )


def exports_module(src: str | os.PathLike) -> bool:
    """Sources msc exports from a PyTorch module with torch.export (module.py:Class, a
    codegen.torch model.py), for which --input-shape gives the example inputs rather than
    binding the symbols of a graph that has its shapes. Any directory holding a model.py
    counts (a codegen.keras one ignores the shapes)."""
    text = os.fspath(src)
    p = Path(text)
    if ":" in text and not p.exists():
        return True
    if p.is_dir():
        return (p / "model.py").is_file()
    return p.suffix.lower() == ".py" and p.is_file() and generated_source(p) == "torch"


def model_class(code: Path) -> str | None:
    """The class a codegen.torch ``model.py``'s ``load()`` builds (the model; the others are
    its blocks), read from the file's syntax tree (nothing runs); None when ``load()`` builds
    no class of the file (edited by hand)."""
    try:
        tree = ast.parse(code.read_text(encoding="utf-8"), filename=str(code))
    except (SyntaxError, ValueError, RecursionError, MemoryError, OSError):
        return None
    classes = {s.name for s in tree.body if isinstance(s, ast.ClassDef)}
    load = next((s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == "load"), None)
    for node in ast.walk(load) if load is not None else ():
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in classes:
                return node.func.id
    return None


# The decorators that make a file TVMScript (as TVM's printer and codegen.relax write them).
_SCRIPT_DECORATORS = frozenset({"ir_module", "function", "prim_func"})


def refuse_plain_python(path: Path) -> None:
    """MscError for a ``.py`` file that is neither TVMScript (no class or function decorated
    as TVMScript's) nor generated by msc: it needs ``:ClassName``. Read with ``ast`` only; a
    file that does not parse goes on to the TVMScript reader, which says why."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError, RecursionError, MemoryError, OSError):
        return
    for s in tree.body:
        for d in getattr(s, "decorator_list", ()):
            d = d.func if isinstance(d, ast.Call) else d
            if isinstance(d, ast.Attribute) and d.attr in _SCRIPT_DECORATORS:
                return
    classes = [s.name for s in tree.body if isinstance(s, ast.ClassDef) and s.bases]
    hint = (
        f"name the nn.Module class to build: {path}:{classes[0]}"
        + (f" (classes: {', '.join(classes)})" if len(classes) > 1 else "")
        if classes
        else "a PyTorch module is given as module.py:ClassName (this file defines no class)"
    )
    raise MscError(
        f"{path}: not a TVMScript module, nor a model.py msc generated (its first line is not "
        f"msc's header); {hint}"
    )


def load_torch_source(
    code: Path, specs, dynamic, say, custom_ops: str = "error", label: str | None = None
) -> Model:
    """A ``model.py`` written by ``codegen.torch.save`` (given as its directory, as the file,
    or as ``model.py:Class`` naming the class ``load()`` builds): import it, build the module
    with the weights beside it (the file's own ``load()``: safetensors, nothing unpickled), and
    export it with ``--input-shape`` or the inputs its class docstring declares."""
    path = label or str(code.parent)
    weights = _weights_beside(code, "torch")
    say("loading the generated PyTorch module")
    load = _import_file(code, "load")
    # The file's NAMES map (code identifier -> source name): the graph's inputs keep the
    # source model's names (``input.1``, ``class``), not the identifiers Python needed.
    names = getattr(load, "__globals__", {}).get("NAMES", {})
    if not isinstance(names, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in names.items()
    ):
        names = {}
    try:
        module = load(str(weights))
    except (Exception, SystemExit) as e:
        raise MscError(f"{path}: building the module failed: {type(e).__name__}: {e}") from None
    params = set(pyinspect.signature(module.forward).parameters)
    source = {k: v for k, v in names.items() if k in params}
    if not specs:
        declared = _declared_inputs(type(module).__doc__ or "")
        if declared is None:
            raise MscError(
                f"{path}: give the input shapes to export the generated module with, "
                "e.g. --input-shape x=1,3,224,224"
            )
        declared = [(source.get(n, n), t) for n, t in declared]  # by source name
        specs = [InputShape(n, concrete_shape(t, {}), t.dtype) for n, t in declared]
        if not dynamic:
            g = Graph()
            for n, t in declared:
                g.add_input(n, t)
            dynamic = dynamic_items(g)
    say("exporting with torch.export")
    g, ex = _from_module(module, specs, dynamic, path, source, custom_ops)
    return Model(g, "torch-source", path, module, ex)


def generated_module(path: str | os.PathLike, graph: Graph) -> Model:
    """A codegen.torch directory run as it is (eagerly), described by ``graph``, the graph it
    was generated from: for code torch.export cannot capture. This imports and runs model.py."""
    path = Path(path)
    load = _import_file(path / "model.py", "load")
    try:
        module = load(str(path / "model.safetensors"))
    except (Exception, SystemExit) as e:
        raise MscError(f"{path}: building the module failed: {type(e).__name__}: {e}") from None
    return Model(graph, "torch-source", str(path), module)


def _declared_inputs(doc: str) -> list[tuple[str, TensorType]] | None:
    """The inputs a codegen.torch class docstring declares (``Inputs: x: f32[N, 3], ...``),
    types parsed by the msc text parser; None when absent or unreadable."""
    from msc.text import ParseError, from_text

    text = " ".join(doc.split())  # a long docstring is wrapped over lines
    if ". Outputs: " in text:  # the output types follow the inputs
        text = text[: text.rindex(". Outputs: ")] + "."
    m = re.search(r"Inputs: (.*)\.\s*$", text, re.S)
    if m is None or m.group(1) == "none":
        return None
    items, depth, cur = [], 0, ""
    for ch in m.group(1):
        depth += ch in "[{"
        depth -= ch in "]}"
        if ch == "," and depth == 0:
            items.append(cur.strip())
            cur = ""
        else:
            cur += ch
    items.append(cur.strip())
    out = []
    for item in items:
        name, sep, ty = item.partition(": ")
        if not sep or not name.isidentifier():
            return None
        try:
            g = from_text(f"graph t {{\n  input %x: {ty}\n  output %x\n}}\n")
        except (ParseError, ValueError):
            return None
        out.append((name, g.inputs[0].type))
    return out
