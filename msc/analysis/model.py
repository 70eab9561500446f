"""Models on disk, whatever their format: load one into an msc graph, and run it natively.

Sources ``load_model`` understands:

- ``model.onnx`` -- an ONNX file (external data next to it is found by the ONNX loader);
- ``model.pt2`` -- a saved ExportedProgram (``torch.export.save``; loaded without pickle);
- ``model.tflite`` -- a TFLite / LiteRT flatbuffer (read by msc's own bounded reader);
- ``model.keras`` -- a Keras 3 file (its config checked as data, then loaded by Keras with
  ``safe_mode=True`` on the torch backend: Lambda layers and custom objects are refused);
- ``model.h5`` / ``model.hdf5`` -- a legacy (Keras 2) Keras model file, checked the same way
  (msc.frontend.keras.legacy);
- a directory holding ``model.py`` + ``model.weights.npz`` -- what ``codegen.keras.save``
  writes (Python code: it runs);
- a directory holding ``graph.msc`` -- a graph saved by ``msc.save``; ``file.msc`` -- text only;
- a directory holding ``model.py`` + ``model.safetensors`` -- what ``codegen.torch.save`` writes;
- ``module.py:ClassName`` -- a Python file defining an ``nn.Module`` built with no arguments,
  exported with example inputs from ``--input-shape`` (forward parameters by name).

A ``model.py`` a codegen wrote, given as a file, is read as its directory, and
``model.py:Class`` naming the class its ``load()`` builds gets the weights beside it, not a
random initialization (msc.analysis.pysource). Any other ``.py`` file is TVMScript, or needs
``:ClassName``.

A ``Model`` runs in its own framework where it has one (onnxruntime for ONNX, the exported or
eager module for PyTorch, LiteRT's interpreter for TFLite) and through ``codegen.torch`` for an
msc graph. ``run`` can also return the values of named intermediate graph values; for that, a
PyTorch model runs its msc graph (with those values made outputs) and an ONNX model runs with
them added as outputs.

# NOTE: user errors (no such file, a corrupt file, a module that will not build) become
# ``MscError`` with one clear line; anything else is a bug and propagates.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect as pyinspect
import itertools
import logging
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from msc.analysis.shapes import (
    DynamicDim,
    InputShape,
    parse_dynamic,
    specialize,
    symbols,
)
from msc.errors import BadModelError, MscError, UnsupportedOpsError
from msc.io.marker import generated_source
from msc.ir.dtype import DType
from msc.ir.graph import Graph
from msc.ir.validate import non_numeric_values

__all__ = [
    "Model",
    "load_model",
    "graph_of",
    "to_torch",
    "from_torch_value",
    "flatten",
]

_counter = itertools.count()


@dataclass
class Model:
    """A loaded model: its msc graph, what it came from, and how to run it."""

    graph: Graph
    # "onnx" | "pt2" | "msc" | "torch-module" | "torch-source" | "relax" | "tflite" | "keras"
    # | "jax" (a .jaxexport runs in JAX; a .mlir through the graph) | "saved_model" (a
    # TensorFlow SavedModel's signature, run in TensorFlow)
    kind: str
    path: str
    native: Any = None  # onnx path, ExportedProgram, nn.Module, Relax IRModule, or None
    example: dict[str, np.ndarray] | None = None  # example inputs a module was exported with
    # Inputs the model's runtime keeps itself, by graph input name: a .tflite's resource
    # variables (LiteRT holds them; no API sets them), at their first run's values
    # (msc.frontend.tflite.initial_state). Each run starts from them; checks feed them.
    fixed: dict[str, np.ndarray] = field(default_factory=dict)
    _session: Any = field(default=None, repr=False)

    @property
    def label(self) -> str:
        return f"{self.path} ({self.kind})"

    @classmethod
    def from_torch(
        cls, module: Any, example_args: tuple, dynamic_shapes: Any = None, **kwargs: Any
    ) -> Model:
        """Translate an ``nn.Module`` (``msc.from_torch``) and keep the module to run natively,
        so ``msc.verify(Model.from_torch(m, args), "m.onnx")`` compares against eager PyTorch."""
        import msc

        g = msc.from_torch(module, example_args, dynamic_shapes=dynamic_shapes, **kwargs)
        return cls(g, "torch-module", type(module).__name__, module)

    @classmethod
    def of(cls, x: Any, *, trust_pickle: bool = False) -> Model:
        """A Model from a Model, a Graph (run through codegen.torch) or a path."""
        if isinstance(x, Model):
            return x
        if isinstance(x, Graph):
            return cls(x, "msc", x.name or "graph")
        return load_model(x, trust_pickle=trust_pickle)

    def run(
        self, inputs: Mapping[str, Any], extra: Sequence[str] = ()
    ) -> tuple[list[Any], dict[str, Any]]:
        """Run on ``inputs`` (by graph input name); returns the flat outputs and the values of
        the ``extra`` graph value names (those it could produce). Values are arrays, or, for
        sequence and optional values, what onnxruntime takes and gives: a list of arrays, and
        None for an empty optional."""
        args = [inputs[v.name] for v in self.graph.inputs]
        if self.kind == "onnx":
            return _run_onnx(self, args, extra)
        if self.kind == "tflite":
            return _run_tflite(self, args, extra)
        outs: list[np.ndarray] | None = None
        if self.kind == "pt2":
            outs = _run_exported(self.native, args)
        elif self.kind in ("torch-module", "torch-source"):
            outs = _run_torch(self.native, args)
        elif self.kind == "relax" and self.native is not None:
            outs = _run_relax(self, args)
        elif self.kind == "keras" and self.native is not None:
            outs = _run_keras(self.native, args)
        elif self.kind == "jax" and self.native is not None:
            outs = _run_jax(self.native, args)
        elif self.kind == "saved_model":
            outs = _run_saved_model(self, args)
        if outs is not None and not extra:
            return outs, {}
        g_outs, vals = run_graph(self.graph, args, extra)
        return (outs if outs is not None else g_outs), vals


def flatten(x: Any) -> list[Any]:
    """Leaves of nested tuples / lists / dicts, in order (None and constants dropped)."""
    if isinstance(x, tuple | list):
        return [y for e in x for y in flatten(e)]
    if isinstance(x, dict):
        return [y for e in x.values() for y in flatten(e)]
    if x is None or isinstance(x, bool | int | float | str):
        return []
    return [x]


def to_torch(a: np.ndarray):
    """numpy -> torch without a copy; ml_dtypes arrays (bf16, float8) go through a bit view."""
    import torch

    if a.dtype.kind == "V" or a.dtype.name in ("bfloat16",) or a.dtype.name.startswith("float8"):
        dt = DType.from_numpy(a.dtype)
        tdt = {
            DType.BFLOAT16: torch.bfloat16,
            DType.FLOAT8_E4M3FN: torch.float8_e4m3fn,
            DType.FLOAT8_E5M2: torch.float8_e5m2,
            DType.FLOAT8_E4M3FNUZ: torch.float8_e4m3fnuz,
            DType.FLOAT8_E5M2FNUZ: torch.float8_e5m2fnuz,
        }[dt]
        raw = _contiguous(a).view(np.int16 if a.dtype.itemsize == 2 else np.int8)
        return torch.from_numpy(raw).view(tdt)
    return torch.from_numpy(_contiguous(a))


def _contiguous(a: np.ndarray) -> np.ndarray:
    """``a`` C-contiguous, its rank kept (np.ascontiguousarray makes a 0-d array 1-d)."""
    return np.ascontiguousarray(a).reshape(a.shape)


def from_torch_value(t: Any) -> np.ndarray:
    import ml_dtypes
    import torch

    if not isinstance(t, torch.Tensor):
        return np.asarray(t)
    t = t.detach().cpu()
    special = {
        torch.bfloat16: (torch.int16, ml_dtypes.bfloat16),
        torch.float8_e4m3fn: (torch.int8, ml_dtypes.float8_e4m3fn),
        torch.float8_e5m2: (torch.int8, ml_dtypes.float8_e5m2),
    }
    if t.dtype in special:
        raw, npdt = special[t.dtype]
        return t.contiguous().view(raw).numpy().view(npdt)
    return t.contiguous().numpy()


def _run_torch(module: Any, args: list[np.ndarray]) -> list[np.ndarray]:
    import torch

    with torch.no_grad():
        out = module(*[to_torch(a) for a in args])
    return [from_torch_value(t) for t in flatten(out)]


def _run_exported(ep: Any, args: list[np.ndarray]) -> list[np.ndarray]:
    """Run an ExportedProgram on the graph's inputs (its tensor user inputs, in flattened
    order): they go back into the structure the program was called with, so keyword
    arguments (``attention_mask=``) are passed by name; a non-tensor input takes the value it
    was exported with. ``check_guards=False``: torch would compile guard code (Python source
    kept with the program) into the module."""
    import torch
    import torch.utils._pytree as pytree
    from torch.export.graph_signature import InputKind

    values = iter(args)
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    leaves = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            val = placeholders[spec.arg.name].meta.get("val")
            leaves.append(to_torch(next(values)) if isinstance(val, torch.Tensor) else val)
    call_args, call_kwargs = pytree.tree_unflatten(leaves, ep.call_spec.in_spec)
    with torch.no_grad():
        out = ep.module(check_guards=False)(*call_args, **call_kwargs)
    return [from_torch_value(t) for t in flatten(out)]


def _with_outputs(g: Graph, names: Sequence[str]) -> tuple[Graph, list[str]]:
    """A copy of ``g`` whose outputs are its own followed by the values ``names`` (those that
    exist and are not already outputs); weights share their data."""
    from msc.text import from_text, to_text

    g2 = from_text(to_text(g))
    for w in g2.weights.values():
        src = g.weights[w.name]
        if src.has_data:
            w.set_data(src.storage)
    g2.output_tree = None
    by_name = {v.name: v for v in g2.values()}
    have = {v.name for v in g2.outputs}
    extra = [n for n in dict.fromkeys(names) if n in by_name and n not in have]
    g2.set_outputs([*g2.outputs, *(by_name[n] for n in extra)])
    return g2, extra


def run_graph(
    g: Graph, args: Sequence[Any], extra: Sequence[str] = ()
) -> tuple[list[Any], dict[str, Any]]:
    """Run an msc graph (positional inputs in graph order) through ``codegen.torch``, or, when
    that is unavailable, through ``codegen.onnx`` and onnxruntime. Returns the flat outputs and
    the values of the ``extra`` value names."""
    if any(not w.has_data for w in g.weights.values()):
        raise MscError(f"graph {g.name!r} has weights without data (a text-only graph?)")
    if extra or g.output_tree is not None:
        g2, names = _with_outputs(g, extra)
    else:
        g2, names = g, []
    try:
        import codegen.torch as cgt

        to_module = cgt.to_module
    except (ImportError, AttributeError):
        to_module = None
    # torch holds numeric tensors only: no strings, sequences or optionals
    if to_module is not None and not non_numeric_values(g2):
        outs = _run_torch(to_module(g2), list(args))
    else:
        outs = _run_via_onnx(g2, list(args))
    n = len(g.outputs)
    return outs[:n], dict(zip(names, outs[n:]))


def _run_via_onnx(g: Graph, args: list[Any]) -> list[Any]:
    try:
        import onnxruntime as ort

        import codegen.onnx as cgo
    except ImportError as e:
        raise MscError(f"running an msc graph needs codegen.torch or codegen.onnx: {e}") from None
    proto = cgo.to_model(g, optimize=False)  # the graph's own nodes, as verify reads them
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    feeds = {meta.name: a for meta, a in zip(sess.get_inputs(), args)}
    return list(sess.run(None, feeds))


def _run_onnx(m: Model, args: list[Any], extra: Sequence[str]):
    try:
        import onnxruntime as ort
    except ImportError:
        raise MscError(
            "running an .onnx model needs onnxruntime (pip install onnxruntime)"
        ) from None
    import onnx

    feeds: dict[str, Any] = {}
    sess = m._session
    if sess is None or extra:
        if extra:
            proto = onnx.load(m.path)
            have = {o.name for o in proto.graph.output}
            produced = {o for n in proto.graph.node for o in n.output if o}
            for name in dict.fromkeys(extra):
                if name in produced and name not in have:
                    proto.graph.output.append(onnx.ValueInfoProto(name=name))
            src: Any = proto.SerializeToString()
        else:
            src = m.path
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(src, opts, providers=["CPUExecutionProvider"])
        if not extra:
            m._session = sess
    for meta, a in zip(sess.get_inputs(), args):
        feeds[meta.name] = a
    names = [o.name for o in sess.get_outputs()]
    outs = sess.run(names, feeds)
    n = len(m.graph.outputs)
    return list(outs[:n]), dict(zip(names[n:], outs[n:]))


@contextlib.contextmanager
def _stderr_muted() -> Iterator[None]:
    """Mute file descriptor 2 while LiteRT starts: its C++ runtime prints an INFO line about
    its CPU delegate there, which no Python setting turns off."""
    sys.stderr.flush()
    keep = os.dup(2)
    try:
        with open(os.devnull, "wb") as sink:
            os.dup2(sink.fileno(), 2)
        yield
    finally:
        os.dup2(keep, 2)
        os.close(keep)


def _litert(path: str, preserve: bool) -> Any:
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        raise MscError(
            "running a .tflite model needs LiteRT (pip install 'msc-graph-hub[tflite]')"
        ) from None
    with _stderr_muted(), warnings.catch_warnings():
        # its "for debugging purposes only" warning: reading intermediates is what it is for
        warnings.filterwarnings("ignore", ".*`experimental_preserve_all_tensors`")
        return Interpreter(model_path=path, experimental_preserve_all_tensors=preserve)


def _run_jax(data: bytes, args: list[Any]) -> list[np.ndarray]:
    """Run a serialized jax.export artifact in JAX (CPU)."""
    try:
        from jax import export
    except ImportError:
        raise MscError(
            "running a .jaxexport model needs JAX (pip install 'msc-graph-hub[jax]')"
        ) from None
    exp = export.deserialize(bytearray(data))
    out = exp.call(*[np.asarray(a) for a in args])
    return [np.asarray(o) for o in flatten(out)]


def _tflite_state(path: str, g: Graph) -> dict[str, np.ndarray]:
    """A stateful model's variables at their first run's values, by state input name; empty
    when the model has none (or its init subgraph computes them: then there is nothing
    LiteRT's values can be compared from)."""
    from msc.errors import Unsupported
    from msc.frontend.tflite import initial_state

    names = {v.name for v in g.inputs}
    try:
        state = initial_state(path)
    except Unsupported:
        return {}
    return {k: v for k, v in state.items() if k in names}


def _run_tflite(m: Model, args: list[Any], extra: Sequence[str]):
    """Run a .tflite file in LiteRT's interpreter (inputs resized to the arrays given), with
    the values of the ``extra`` tensor names when asked. A stateful model starts each run from
    its initial variables (its state inputs' ``m.fixed`` values) and also gives the state it
    assigns, read by tensor name: the graph's outputs after the model's own."""
    stateful = bool(m.fixed)
    interp = m._session if not extra else None
    if interp is None:
        interp = _litert(m.path, bool(extra) or stateful)
        if not extra:
            m._session = interp
    details = interp.get_input_details()
    resized = False
    for d, a in zip(details, args):
        if list(d["shape"]) != list(np.shape(a)):
            interp.resize_tensor_input(d["index"], list(np.shape(a)))
            resized = True
    if resized or not getattr(interp, "_msc_allocated", False):
        with _stderr_muted():
            interp.allocate_tensors()
        interp._msc_allocated = True
    for d, a in zip(details, args):
        interp.set_tensor(d["index"], np.ascontiguousarray(a, dtype=d["dtype"]))
    with _stderr_muted():
        if stateful:
            interp.reset_all_variables()
        interp.invoke()
    outs = [np.array(interp.get_tensor(d["index"])) for d in interp.get_output_details()]
    vals: dict[str, Any] = {}
    index = {t["name"]: t["index"] for t in interp.get_tensor_details()} if (
        extra or stateful) else {}  # fmt: skip
    if stateful:
        for v in m.graph.outputs[len(outs) :]:
            if v.name in index:
                outs.append(np.array(interp.get_tensor(index[v.name])))
    if extra:
        for name in extra:
            if name in index:
                try:
                    vals[name] = np.array(interp.get_tensor(index[name]))
                except ValueError:  # a tensor the runtime did not keep
                    continue
    return outs, vals


def _run_keras(model: Any, args: list[Any]) -> list[np.ndarray]:
    """Run a Keras model (on the backend Keras was started with; torch by default)."""
    import keras

    struct = getattr(model, "_inputs_struct", None)  # a functional model's: a dict, a list
    if isinstance(struct, dict):  # inputs by name (KerasHub's), in model.inputs' order
        x = keras.tree.pack_sequence_as(struct, list(args))
    else:
        x = list(args) if len(args) > 1 else args[0]
    out = model(x, training=False)
    return [np.asarray(keras.ops.convert_to_numpy(o)) for o in flatten(out)]


# ---------------------------------------------------------------------------- loading
def _torch_dtype(dt: DType):
    import torch

    return {
        DType.FLOAT32: torch.float32,
        DType.FLOAT16: torch.float16,
        DType.BFLOAT16: torch.bfloat16,
        DType.FLOAT64: torch.float64,
        DType.INT64: torch.int64,
        DType.INT32: torch.int32,
        DType.INT8: torch.int8,
        DType.UINT8: torch.uint8,
        DType.BOOL: torch.bool,
    }[dt]


def _import_file(path: Path, attr: str) -> Any:
    name = f"_msc_user_{next(_counter)}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise MscError(f"{path}: cannot import it as a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except SystemExit as e:  # the file is Python and runs; it may not end msc
        raise MscError(f"{path}: exited while being imported (SystemExit({e.code!r}))") from None
    except Exception as e:
        raise MscError(f"{path}: importing it failed: {type(e).__name__}: {e}") from None
    if not hasattr(mod, attr):
        classes = sorted(
            k for k, v in vars(mod).items() if isinstance(v, type) and v.__module__ == name
        )
        raise MscError(f"{path}: no {attr!r} in it (classes: {', '.join(classes) or 'none'})")
    return getattr(mod, attr)


def _example_inputs(
    module: Any, specs: Sequence[InputShape], seed: int = 0
) -> tuple[list[str], dict[str, np.ndarray]]:
    params = [
        p
        for p in pyinspect.signature(module.forward).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    given = {s.name: s for s in specs}
    unknown = sorted(set(given) - {p.name for p in params})
    if unknown:
        raise MscError(
            f"--input-shape {unknown[0]}: forward() has no such parameter "
            f"(it takes {', '.join(p.name for p in params) or 'nothing'})"
        )
    names, arrays = [], {}
    rng = np.random.default_rng(seed)
    for p in params:
        s = given.get(p.name)
        if s is None:
            if p.default is not p.empty:
                break
            raise MscError(
                f"forward() parameter {p.name!r} needs an example shape: "
                f"--input-shape {p.name}=1,3,224,224 (add :i64 for integer inputs)"
            )
        dt = s.dtype or DType.FLOAT32
        arrays[p.name] = random_array(dt, s.shape, rng)
        names.append(p.name)
    return names, arrays


def random_array(dt: DType, shape: Sequence[int], rng: np.random.Generator, high: int = 10):
    """Random data of ``dt``: normal floats, ints in [0, high), fair bools, str words from a
    small vocabulary (so comparisons of two inputs sometimes match)."""
    if dt.is_string:
        words = np.array(["", "a", "b", "ab", "msc", "Ünï", "x y"], object)
        return words[rng.integers(0, len(words), size=shape)]
    if dt.is_bool:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dt.is_integer:
        return rng.integers(0, max(high, 1), size=shape).astype(dt.to_numpy())
    if dt.is_complex:
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt.to_numpy())
    return rng.standard_normal(shape).astype(np.float32).astype(dt.to_numpy())


def _from_module(
    module: Any,
    specs: Sequence[InputShape],
    dynamic: Iterable[str | DynamicDim],
    label: str,
    source_names: Mapping[str, str] | None = None,
    custom_ops: str = "error",
) -> tuple[Graph, dict[str, np.ndarray]]:
    """Export ``module`` with example inputs from ``specs`` and translate it. With
    ``source_names`` (forward parameter -> the source model's input name, for a module
    codegen.torch generated), specs and --dynamic may use either name, and the graph's inputs
    get the source names back."""
    import msc

    source = dict(source_names or {})
    ident = {s: i for i, s in source.items()}
    specs = [InputShape(ident.get(s.name, s.name), s.shape, s.dtype) for s in specs]
    names, example = _example_inputs(module, specs)
    dyn: dict[str, dict[int, Any]] = {}
    if dynamic:
        import torch

        syms: dict[str, Any] = {}
        for item in dynamic:
            name, axis, sym = parse_dynamic(item)
            name = ident.get(name, name)
            if name not in example:
                raise MscError(f"--dynamic {item}: forward() has no input {name!r}")
            if sym.name not in syms:
                syms[sym.name] = torch.export.Dim(_dim_name(sym.name), min=sym.min, max=sym.max)
            dyn.setdefault(name, {})[axis] = syms[sym.name]
    args = tuple(to_torch(example[n]) for n in names)
    kwargs: dict[str, Any] = {"custom_ops": custom_ops}
    if dyn:
        kwargs["dynamic_shapes"] = {n: dyn.get(n) for n in names}
    if source:
        kwargs["input_names"] = [source.get(n, n) for n in names]
        example = {source.get(n, n): a for n, a in example.items()}
    try:
        with torch_logs_muted():
            try:
                g = msc.from_torch(module, args, **kwargs)
            except Exception as e:
                refined = _refined(e, kwargs.get("dynamic_shapes"))
                if refined is None:
                    raise
                g = msc.from_torch(module, args, **{**kwargs, "dynamic_shapes": refined})
    except MscError:
        raise
    except Exception as e:
        raise ExportFailed(
            f"{label}: torch.export failed: {type(e).__name__}: {_first(e)}"
        ) from None
    if dynamic:
        g = _symbols_renamed(g, {_dim_name(n): n for n in syms if _dim_name(n) != n})
    return g, example


def _refined(e: BaseException, dynamic_shapes: Any) -> Any:
    """The dynamic shapes with the ranges torch.export found the module needs (its suggested
    fixes: ``seq = Dim('seq', max=64)`` for a position table of 64), when that is all it
    suggests; None when it would make a dynamic dim static or tie dims together (then the
    module is not what the dims say, and the failure stands)."""
    msg = str(getattr(e, "msg", "") or e)
    if dynamic_shapes is None or "Suggested fixes" not in msg:
        return None
    fixes = msg.split("Suggested fixes:", 1)[1].strip().split("\n\n", 1)[0].splitlines()
    for line in (f.strip() for f in fixes):
        m = re.fullmatch(r"\w+ = Dim\('\w+'(?:, min=(\d+))?(?:, max=\d+)?\)", line)
        if m is None or int(m.group(1) or 0) > 2:
            # a specialization (seq = 2), a relation (a = b + 1), or a lower bound above the
            # 2 torch.export assumes anyway (the code branched on a size, not the model)
            return None
    from torch.export.dynamic_shapes import refine_dynamic_shapes_from_suggested_fixes

    try:
        return refine_dynamic_shapes_from_suggested_fixes(msg, dynamic_shapes)
    except Exception:
        return None


def _symbols_renamed(g: Graph, names: Mapping[str, str]) -> Graph:
    """``g`` with the symbols named as keys of ``names`` named as its values (the source's
    dim names that torch.export's Dim could not take), ranges kept, types re-inferred."""
    from msc.ir.types import SymDim

    found = symbols(g)
    return specialize(
        g, {k: SymDim(names[k], s.min, s.max) for k, s in found.items() if k in names}
    )


class ExportFailed(MscError):
    """torch.export could not capture a module (e.g. generated code that reads a shape from a
    tensor's values: a data-dependent size torch.export cannot guard on)."""


def _dim_name(name: str) -> str:
    """A torch.export Dim name (an identifier) for a symbol: itself when it is one, else its
    characters with the others replaced, made unique by a hash of the name (ONNX dim_params
    such as ``p2o.DynamicDimension.0`` or ``?``)."""
    if name.isidentifier():
        return name
    import hashlib

    tag = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return "d_" + re.sub(r"\W", "_", name, flags=re.ASCII) + "_" + tag


def _first(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return s[0] if s else ""


def load_model(
    src: str | os.PathLike,
    input_specs: Sequence[InputShape] = (),
    dynamic: Sequence[str | DynamicDim] = (),
    progress: Callable[[str], None] | None = None,
    *,
    trust_pickle: bool = False,
    custom_ops: str = "error",
) -> Model:
    """Load ``src`` (any supported format) into a ``Model``. Raises MscError for user errors.
    ``custom_ops`` ("error" or "keep") is the frontends' choice for ops they cannot translate
    (see msc.from_onnx).

    Model files are only read, never run (see msc.frontend.torch.pt2 for .pt2,
    msc.frontend.relax.script for TVMScript files and codegen.relax directories), except the
    formats that are Python code: ``module.py:Class`` and a codegen.torch directory's model.py
    are imported and run. ``trust_pickle`` (``--trust-code``) lets a file run code it
    contains: unpickling .pt2 members, TVMScript beyond the subset msc reads without running
    it; only for files from a trusted source."""
    import msc
    from msc.analysis import pysource
    from msc.frontend.tflite.saved_model import is_saved_model

    say = progress or (lambda s: None)
    text = os.fspath(src)
    path = Path(text)
    if not path.exists() and ":" in text and is_saved_model(text.rpartition(":")[0]):
        folder, _, key = text.rpartition(":")
        return _load_saved_model(folder, key, say, trust_pickle, custom_ops, text)
    if not path.exists() and ":" in text:
        file, _, cls = text.rpartition(":")
        fp = Path(file)
        if not fp.is_file():
            raise MscError(f"{file}: no such file")
        if not cls.isidentifier():
            raise MscError(f"{text}: expected module.py:ClassName")
        if generated_source(fp) == "torch":
            top = pysource.model_class(fp)
            if cls == top:  # the module load() builds: with its weights, as load() sets them
                return pysource.load_torch_source(fp, input_specs, dynamic, say, custom_ops, text)
            if top is not None:  # a block class: built as written, its weights random
                say(f"{cls} is not {file}'s model class ({top}): built without its weights")
        say(f"building {cls} from {file}")
        factory = _import_file(fp, cls)
        try:
            module = factory()
        except (Exception, SystemExit) as e:
            raise MscError(f"{text}: {cls}() failed: {type(e).__name__}: {e}") from None
        if hasattr(module, "eval"):
            module.eval()
        say("exporting with torch.export")
        g, ex = _from_module(module, input_specs, dynamic, text, custom_ops=custom_ops)
        return Model(g, "torch-module", text, module, ex)
    if not path.exists():
        raise MscError(f"{text}: no such file or directory")
    try:
        if path.is_dir():
            if is_saved_model(path):
                return _load_saved_model(text, None, say, trust_pickle, custom_ops, text)
            if (path / "graph.msc").is_file():
                say("loading the msc graph")
                return Model(msc.load(path).validate(), "msc", text)
            code = path / "model.py"
            if code.is_file() and (path / "model.weights.npz").is_file():
                return pysource.load_keras_source(code, say, text)
            if code.is_file() and generated_source(code) == "jax":
                raise pysource.jax_source_error(code)
            if code.is_file():
                return pysource.load_torch_source(code, input_specs, dynamic, say, custom_ops, text)
            if (path / "module.py").is_file() and (path / "model.safetensors").is_file():
                return _load_relax(
                    path / "module.py", path / "model.safetensors", say, trust_pickle
                )
            raise MscError(
                f"{text}: a directory that holds neither graph.msc (msc.save), model.py "
                "(codegen.torch.save), module.py (codegen.relax.save) nor saved_model.pb (a "
                "TensorFlow SavedModel)"
            )
        suffix = path.suffix.lower()
        if suffix == ".py":
            kind = generated_source(path)
            if kind == "torch":
                return pysource.load_torch_source(path, input_specs, dynamic, say, custom_ops, text)
            if kind == "keras":
                return pysource.load_keras_source(path, say, text)
            if kind == "jax":
                raise pysource.jax_source_error(path)
            pysource.refuse_plain_python(path)
            return _load_relax(path, None, say, trust_pickle)
        if suffix == ".onnx":
            say("importing the ONNX model")
            return Model(msc.from_onnx(text, custom_ops=custom_ops), "onnx", text, text)
        if suffix == ".tflite":
            say("reading the TFLite model")
            g = msc.from_tflite(text, custom_ops=custom_ops, name=path.stem)
            return Model(g, "tflite", text, text, fixed=_tflite_state(text, g))
        if suffix in (".keras", ".h5", ".hdf5"):
            from msc.frontend.keras import load_keras

            say("loading the Keras model (safe mode)")
            km = load_keras(text, trust_code=trust_pickle)
            return Model(msc.from_keras(km, name=path.stem), "keras", text, km)
        if suffix in (".jaxexport", ".mlir"):
            say("reading the StableHLO module")
            data = path.read_bytes()
            try:
                g = msc.from_stablehlo(data, custom_ops=custom_ops, name=path.stem)
            except BadModelError as e:
                raise MscError(f"{text}: {e}") from None
            return Model(g, "jax", text, data if suffix == ".jaxexport" else None)
        if suffix in (".pt2", ".ep"):
            say("loading the ExportedProgram")
            # torch logs its own traceback for a corrupt archive before raising; the error
            # below is what the user needs.
            ep = _load_pt2(text, trust_pickle)
            say("importing the ExportedProgram")
            g = msc.from_exported_program(ep, name=path.stem, custom_ops=custom_ops)
            return Model(g, "pt2", text, ep)
        if suffix == ".msc":
            try:
                source = path.read_text(encoding="utf-8")
            except UnicodeDecodeError as e:
                raise MscError(f"{text}: not UTF-8 text ({e.reason} at byte {e.start})") from None
            return Model(msc.from_text(source).validate(), "msc", text)
    except MscError:
        raise
    except (OSError, ValueError, RuntimeError, KeyError, EOFError) as e:
        raise MscError(f"{text}: cannot read it: {type(e).__name__}: {_first(e)}") from None
    except Exception as e:  # a corrupt protobuf / zip raises its own exception types
        if type(e).__module__.split(".")[0] in ("google", "onnx", "zipfile", "torch"):
            raise MscError(f"{text}: cannot read it: {type(e).__name__}: {_first(e)}") from None
        raise
    raise MscError(
        f"{text}: unknown model format (expected .onnx, .pt2, .tflite, .keras, .h5, .jaxexport, "
        ".mlir, .msc, a TVMScript .py, a saved msc graph directory, a codegen.torch, "
        "codegen.relax or codegen.keras directory, or module.py:ClassName)"
    )


def _load_saved_model(
    folder: str,
    signature: str | None,
    say: Callable[[str], None],
    trusted: bool,
    custom_ops: str,
    label: str,
) -> Model:
    """A TensorFlow SavedModel's signature, through TensorFlow's TFLite converter
    (msc.frontend.tflite.saved_model). TensorFlow loads the model's graph to do it, so only
    when ``trusted``; its numeric checks run the signature in TensorFlow."""
    from msc.frontend.tflite.saved_model import from_saved_model, signature_of

    if not trusted:
        raise MscError(
            f"{folder}: a TensorFlow SavedModel is a program TensorFlow runs to read it; pass "
            "--trust-code (trust_pickle=True) only if you trust it, to convert it with "
            "TensorFlow's TFLite converter"
        )
    say("converting the SavedModel with TensorFlow's TFLite converter")
    key = signature_of(folder, signature)
    g = from_saved_model(folder, signature=key, custom_ops=custom_ops)
    return Model(g, "saved_model", label, (folder, key))


def _run_saved_model(m: Model, args: list[Any]) -> list[np.ndarray]:
    """Run the SavedModel's signature in TensorFlow (loaded once), outputs in the graph's
    order (the signature's output names)."""
    if m._session is None:
        from msc.frontend.tflite.saved_model import signature_function

        m._session = signature_function(*m.native)
    fn = m._session
    outs = fn(**{v.name: a for v, a in zip(m.graph.inputs, args)})
    return [np.asarray(outs[v.name]) for v in m.graph.outputs]


def _load_relax(
    script: Path, weights: Path | None, say: Callable[[str], None], trusted: bool = False
) -> Model:
    """A TVMScript module (``codegen.relax.save``'s ``module.py``, or any TVMScript file) and,
    beside it, the weights its ``main`` takes after its inputs. The script is read, not run
    (msc.frontend.relax.script), unless ``trusted``."""
    import msc
    from msc.analysis.relaxfile import read_relax
    from msc.io.native import native_stderr_captured

    mod = read_relax(script, weights, say, trusted)
    say("reading the Relax function")
    try:
        with native_stderr_captured():
            g = msc.from_relax(mod)
    except UnsupportedOpsError as e:
        raise UnsupportedOpsError(e.ops, what=f"{script} (its Relax function main)") from None
    return Model(g, "relax", str(script), mod)


def _run_relax(m: Model, args: list[np.ndarray]) -> list[np.ndarray]:
    """Compile the Relax module (weights bound) for llvm once and run it on the VM."""
    if m._session is None:
        import tvm
        from tvm import relax

        mod = m.native
        main = mod["main"]
        attrs = main.attrs or {}
        if "params" in attrs:
            n = int(attrs["num_input"]) if "num_input" in attrs else 0
            binding = dict(zip(main.params[n:], attrs["params"]))
            mod = relax.transform.BindParams("main", binding)(relax.frontend.detach_params(mod)[0])
        from msc.io.native import native_stderr_captured

        with native_stderr_captured():  # block functions inlined, as codegen.relax.build
            ex = tvm.compile(relax.transform.InlinePrivateFunctions()(mod), target="llvm")
        m._session = relax.VirtualMachine(ex, tvm.cpu())
    import tvm

    out = m._session["main"](*[tvm.runtime.tensor(np.array(a, order="C")) for a in args])
    return [np.array(o.numpy()) for o in _flat_tvm(out)]


def _flat_tvm(x: Any) -> list[Any]:
    if hasattr(x, "numpy"):
        return [x]
    return [o for v in x for o in _flat_tvm(v)]


@contextlib.contextmanager
def torch_logs_muted() -> Iterator[None]:
    """Mute logging while torch does something whose failure msc reports itself: torch.export
    logs the traceback of a failed fake-tensor op (~20 lines) before raising the error that
    msc turns into one line."""
    before = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(before)


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _load_pt2(path: str, trust_pickle: bool = False) -> Any:
    """The .pt2's ExportedProgram, read without unpickling (msc.frontend.torch.pt2) unless
    ``trust_pickle``; the reason torch only logs (a traceback on stderr) becomes the error."""
    from msc.frontend.torch.pt2 import load_pt2

    log = logging.getLogger("torch.export")
    cap = _Capture()
    saved = (log.handlers[:], log.propagate)
    log.handlers[:] = [cap]  # torch attaches its own stderr handler here
    log.propagate = False
    try:
        return load_pt2(path, trust_pickle=trust_pickle)
    except MscError:
        raise
    except Exception as e:
        why = _first(e)
        for r in cap.records:
            if r.exc_info and r.exc_info[1] is not None:
                inner = r.exc_info[1]
                why = f"{type(inner).__name__}: {_first(inner)}"
        if "in pytree is not registered" in why:
            why += (
                " (the program's outputs use a class registered with torch's pytree by its "
                "package; load it in Python after importing that package, or export with "
                "tuple outputs)"
            )
        raise MscError(f"{path}: cannot load the ExportedProgram: {why}") from None
    finally:
        log.handlers[:], log.propagate = saved


def graph_of(src: str | os.PathLike | Graph | Model, **kw: Any) -> Graph:
    """The msc graph of a path, a Model, or a Graph."""
    if isinstance(src, Graph):
        return src
    if isinstance(src, Model):
        return src.graph
    return load_model(src, **kw).graph
