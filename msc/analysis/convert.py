"""``convert``: load a model in any supported format, write it for a target, and check it.

Targets: ``torch`` (a directory with ``model.py`` + ``model.safetensors``, by
``codegen.torch.save``), ``onnx`` (an ``.onnx`` file, external data when large, by
``codegen.onnx``), ``msc`` (a saved graph directory, by ``msc.save``), ``relax`` (only with
``to``: a directory with TVMScript ``module.py`` + ``model.safetensors`` + ``load.py``, by
``codegen.relax.save``; checked by TVM's structural equality and by running it on the VM),
``tflite`` (a ``.tflite`` file by ``codegen.tflite``, run in LiteRT's interpreter), ``keras``
(a directory with Keras 3 ``model.py`` + ``model.weights.npz`` by ``codegen.keras.save``, only
with ``to``; or a ``.keras`` file, the generated model as Keras saves it; re-imported through
Keras on the torch backend, compared with the graph as the other file targets are (the
frontend reads Keras' weight layouts back into msc's; the graph's types kept, as Keras stores
no sizes) and run against the source),
``jax`` (only with ``to``: a directory with ``model.py`` + ``weights.safetensors`` by
``codegen.jax``; re-exported with jax.export at the graph's input shapes, symbolic dims
symbolic, and read back by msc.from_stablehlo: compared with the graph as the code computes it,
``codegen.jax.as_generated``, and run against the source).
Without ``to`` the target follows OUT: ``*.onnx`` is onnx, ``*.tflite`` is tflite, ``*.keras``
a keras file, ``*.msc`` or an existing saved graph is msc, anything else is a torch directory.

The check, unless turned off: re-import what was written and compare it with the graph it was
generated from as ``msc diff`` does (equal, modulo names; else equivalent up to known rewrites;
else real changes, which fail the conversion unless ``allow_changes``), then run the source
model and the written one on the same random inputs (``msc.analysis.verify``). Output is
staged in a temporary sibling and moved into place only when everything (the check included)
succeeded, so a failure leaves nothing half-written and never clobbers an existing OUT.

# NOTE: ``input_specs`` fix input shapes (and are the example inputs of a ``module.py:Class``
# source); ``dynamic`` makes a dim symbolic (``x:0=batch``); both re-infer every node type.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from msc.analysis.model import ExportFailed, Model, load_model
from msc.analysis.pysource import generated_module
from msc.analysis.shapes import (
    DynamicDim,
    InputShape,
    bind,
    dynamic_items,
    parse_dynamic,
    retype,
    specialize,
)
from msc.analysis.verify import VerifyReport, verify_models
from msc.errors import ConversionError, MscError, UnsupportedOpsError
from msc.io import files, marker, replace_dir
from msc.ir import symexpr
from msc.ir.graph import Graph
from msc.ir.types import SymDim, TensorType, map_tensor, tensor_of

__all__ = [
    "convert",
    "ConvertReport",
    "TARGETS",
    "target_for",
    "reexport_jax",
    "check_jax_structure",
]

TARGETS = ("torch", "onnx", "msc", "relax", "tflite", "keras", "jax")
# Why the jax target's real changes are reported and do not fail the conversion: jax.export
# re-lowers every op, and msc.from_stablehlo does not yet read each of JAX's own lowerings
# back as the op the code wrote (take_along_axis's index handling, loops' counters, the shape
# computations of symbolic sizes, ...: docs/guides/jax.md lists them); the outputs are
# compared all the same.
JAX_ADVISORY = (
    "not blocking for the jax target: JAX's re-export is not yet read back as every op the "
    "code wrote (docs/guides/jax.md); the outputs decide"
)
# Why a torch target's real changes do not fail the conversion when the code runs a recurrent
# node through its run-time helper (ONNX semantics torch's nn.LSTM / GRU / RNN lack: other
# activations, clip, peepholes, sequence lengths; and, for now, every node not made by msc's
# torch frontend from one of those modules): torch.export unrolls the helper's loop
# over the time steps, so the re-import is the steps, not the node (codegen.torch
# .unrolled_nodes). The outputs decide, and only there: a change elsewhere still blocks.
UNROLLED_ADVISORY = (
    "not blocking: the code runs {nodes} through the recurrent helper _msc_recurrent (not "
    "as torch's nn.LSTM / GRU / RNN), which torch.export unrolls into its time steps; the "
    "outputs decide"
)
# Targets written as one file (the others are directories).
FILE_TARGETS = {"onnx": ".onnx", "tflite": ".tflite"}
# Directory targets written as one file when OUT has this suffix.
FILE_FORMS = {"keras": ".keras"}


def _is_file(target: str, out: Path) -> bool:
    """The output is a file (else a directory)."""
    return target in FILE_TARGETS or out.suffix.lower() == FILE_FORMS.get(target)


@dataclass
class ConvertReport:
    src: str
    out: str
    target: str
    files: list[str] = field(default_factory=list)
    checked: bool = False
    structural: str | None = None  # None: equal; else the first difference
    changes: str = ""  # when not equal: a one-line summary of the node-level diff
    verdict: str = (
        ""  # diff's verdict: "equivalent (up to N known rewrites: ...)" or "K real changes"
    )
    equivalent: bool = True  # equal, or equal up to known exporter rewrites
    numeric: VerifyReport | None = None
    ok: bool = True
    opset: int | None = None  # the ONNX opset written
    opset_reason: str = ""  # why that one
    # The tool the ONNX file was written for (codegen.onnx.CONSUMERS; --for), and the ops
    # written through their decompositions (for it, or --decompose).
    consumer: str = ""
    decompose: tuple[str, ...] = ()
    # What the ONNX or TFLite codegen's export-time optimization did (rewrite -> count);
    # empty when it was turned off (optimize=False) or did nothing.
    optimized: dict[str, int] = field(default_factory=dict)
    # A generated module torch.export could not capture (why): not compared structurally,
    # only run (eagerly) against the source.
    uncaptured: str = ""
    changes_allowed: bool = False  # real changes did not fail the conversion (allow_changes)
    # Real changes the target's check reports without failing the conversion, and why (the
    # jax target: JAX_ADVISORY); the numeric check still decides.
    advisory: str = ""
    # A written Relax module msc.from_relax cannot read back into a graph (why): compared with
    # the translation by TVM's structural equality and run on the VM, not compared as a graph.
    unread: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "src": self.src,
            "out": self.out,
            "target": self.target,
            "files": self.files,
            "checked": self.checked,
            "structurally_equal": (
                self.structural is None if self.checked and not self.uncaptured else None
            ),
            "not_reimported": self.uncaptured or self.unread or None,
            "first_difference": self.structural,
            "changes": self.changes,
            "verdict": self.verdict,
            "equivalent": self.equivalent,
            "changes_allowed": self.changes_allowed,
            "advisory": self.advisory or None,
            "numeric": None if self.numeric is None else self.numeric.to_json(),
            "ok": self.ok,
            "opset": self.opset,
            "optimized": self.optimized,
            "opset_reason": self.opset_reason,
            "consumer": self.consumer or None,
            "decompose": list(self.decompose),
        }


def target_for(out: str | os.PathLike, to: str | None) -> str:
    if to is not None:
        if to not in TARGETS:
            raise MscError(f"unknown target {to!r} (choose from {', '.join(TARGETS)})")
        return to
    p = Path(out)
    suffix = p.suffix.lower()
    if suffix == ".onnx":
        return "onnx"
    if suffix == ".tflite":
        return "tflite"
    if suffix == ".keras":
        return "keras"
    if suffix == ".msc" or (p / "graph.msc").is_file():
        return "msc"
    if suffix and not p.is_dir():
        raise MscError(
            f"{out}: msc does not write {suffix} files; name a .onnx, .tflite or .keras file, "
            "a .msc directory or a directory for PyTorch source, or say which with --to"
        )
    return "torch"


def _adjust(g: Graph, specs: Sequence[InputShape], dynamic: Sequence[str | DynamicDim]) -> Graph:
    """Apply --input-shape (fix symbols) and --dynamic (make dims symbolic) to a graph."""
    if specs:
        g = specialize(g, bind(g, specs))
        # Inputs named with a shape become exactly that shape (ints), even where unnamed dims
        # were unknown.
        fixed = {s.name: s for s in specs}
        types = {
            v.name: TensorType(v.type.dtype, fixed[v.name].shape)
            for v in g.inputs
            if v.name in fixed and v.type.shape != fixed[v.name].shape
        }
        if types:
            g = retype(g, types, {})
    if dynamic:
        inputs = {v.name: v for v in g.inputs}
        types: dict[str, TensorType] = {}
        for item in dynamic:
            name, axis, sym = parse_dynamic(item)
            v = inputs.get(name)
            if v is None:
                raise MscError(f"--dynamic {item}: no input {name!r}")
            t = types.get(name, v.type)
            if t.shape is None or not -len(t.shape) <= axis < len(t.shape):
                raise MscError(f"--dynamic {item}: input {name!r} is {t}, no axis {axis}")
            dims = list(t.shape)
            dims[axis] = sym
            types[name] = t.with_shape(dims)
        g = retype(g, types)
    return g


def _check_dynamic(before: Graph, after: Graph, dynamic: Sequence[str | DynamicDim]) -> None:
    """Run ``after`` (``before`` with --dynamic dims made symbolic) with each new symbol at a
    size other than the exported one. A program exported with static shapes bakes its sizes
    into reshapes and constants; it fails here, with a plain error, instead of late in torch."""
    from msc.analysis.model import run_graph
    from msc.analysis.verify import make_inputs

    old = {v.name: v.type.shape for v in before.inputs}
    binding: dict[str, int] = {}
    for item in dynamic:
        name, axis, sym = parse_dynamic(item)
        was = (old.get(name) or ())[axis]
        size = 3 if was == 2 else 2
        if sym.min is not None and size < sym.min or sym.max is not None and size > sym.max:
            size = sym.min if sym.min is not None and sym.min != was else (sym.max or size)
        binding[sym.name] = size
    feeds = make_inputs(after, 0, binding)
    try:
        run_graph(after, [feeds[v.name] for v in after.inputs])
    except MscError:
        raise
    except Exception as e:
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        sizes = ", ".join(f"{k}={v}" for k, v in binding.items())
        raise MscError(
            f"--dynamic {' '.join(map(str, dynamic))}: the model does not run at another size "
            f"({sizes}: {type(e).__name__}: {why}); its sizes are fixed in the program. "
            "Re-export it with torch.export's dynamic_shapes (or torch.onnx's dynamic_axes), "
            "or leave --dynamic out"
        ) from None


def _write(
    g: Graph,
    target: str,
    dest: Path,
    opset: int | None,
    report: ConvertReport,
    optimize: bool = True,
    flat: bool = False,
    decompose: Sequence[str] = (),
) -> None:
    if target == "msc":
        import msc

        msc.save(g, dest)
    elif target == "torch":
        try:
            from codegen.torch import save
        except ImportError as e:
            raise MscError(f"the torch target needs codegen.torch: {e}") from None
        save(g, dest, flat=flat)
    elif target == "relax":
        try:
            from codegen.relax import save
        except ImportError as e:
            raise MscError(f"the relax target needs apache-tvm (the tvm extra): {e}") from None
        save(g, dest, flat=flat)
    elif target == "keras":
        try:
            from codegen.keras import save
        except ImportError as e:
            raise MscError(f"the keras target needs keras (the keras extra): {e}") from None
        save(g, dest, flat=flat)
    elif target == "jax":
        try:
            from codegen.jax import save
        except ImportError as e:
            raise MscError(f"the jax target needs codegen.jax: {e}") from None
        save(g, dest, flat=flat)
    elif target == "tflite":
        try:
            from codegen.tflite import save
        except ImportError as e:
            raise MscError(f"the tflite target needs flatbuffers (the tflite extra): {e}") from None
        done: Counter[str] = Counter()
        save(g, dest, optimize=optimize, done=done)
        report.optimized.update(done)
    else:
        try:
            from codegen.onnx import choose_opset, save
        except ImportError as e:
            raise MscError(f"the onnx target needs codegen.onnx: {e}") from None
        if opset is not None:
            report.opset, report.opset_reason = opset, "--opset"
        else:  # the API's default, and why
            report.opset, report.opset_reason = choose_opset(g, decompose=decompose)
        save(
            g,
            dest,
            opset=report.opset,
            optimize=optimize,
            done=report.optimized,
            decompose=decompose,
        )


def _stage(out: Path, target: str) -> tuple[Path, Path]:
    """A temporary sibling directory and where the output goes inside it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = files.mkdtemp(out.parent, prefix=f".{out.name}.")
    return tmp, tmp / out.name


def _install(staged: Path, out: Path, target: str) -> list[str]:
    """Move the staged output into place (replacing OUT), returning the files written."""
    tmp = staged.parent
    if target == "tflite" or target == "keras" and staged.is_file():  # one file (a .keras)
        os.replace(staged, out)
        return [str(out)]
    if target == "onnx":
        from codegen.onnx.writer import check_data_file

        names = [p.name for p in tmp.iterdir()]
        for name in names:  # the model was checked before; its data file is checked here
            if name != out.name:
                check_data_file(out, out.parent / name, name)
        for name in names:
            os.replace(tmp / name, out.parent / name)
        return sorted(str(out.parent / n) for n in names)
    replace_dir(staged, out)
    # The marker is msc's bookkeeping (msc.io.marker), not part of the model.
    return sorted(str(p) for p in out.rglob("*") if p.is_file() and p.name != marker.MARKER)


def convert(
    src: str | os.PathLike,
    out: str | os.PathLike,
    *,
    to: str | None = None,
    opset: int | None = None,
    input_specs: Sequence[InputShape] = (),
    dynamic: Sequence[str | DynamicDim] = (),
    check: bool = True,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    trust_pickle: bool = False,
    force: bool = False,
    custom_ops: str = "error",
    allow_changes: bool = False,
    optimize: bool = True,
    flat: bool = False,
    decompose: Sequence[str] = (),
    consumer: str | None = None,
) -> ConvertReport:
    """Convert ``src`` to ``out`` (see the module docstring). Raises MscError for user errors;
    a failed check is reported (``ok`` False) and nothing is written. The output read back
    with real changes (``msc diff``'s verdict: neither equal nor equivalent) fails the check
    unless ``allow_changes``. ``optimize`` (the onnx target): fold constants, pre-transpose
    weights and fold BatchNorm before writing (``codegen.onnx.to_model``); (the tflite
    target) fold BatchNorm and zero pads into convs and fuse activations
    (``codegen.tflite.optimize``); False writes the graph node for node. The check compares
    the re-import with the graph before these rewrites, as equivalent up to them.
    ``flat``: a torch target's model.py is one flat forward, not one class per block of the
    source's module hierarchy (a relax target: one ``main``, not one function per block type;
    a keras target: every op in the functional model, no Layer class per repeated block type;
    a jax target: one ``forward`` over a flat params dict, not one function per block type).
    ``decompose`` (the onnx target): ops written through their decompositions
    (``("attention",)``: MatMul/Softmax, what onnxruntime's transformer optimizer fuses
    around). ``consumer`` (the onnx target): the tool the file is for, a name in
    ``codegen.onnx.CONSUMERS`` (``"ort-optimizer"``: onnxruntime's transformer optimizer),
    whose ops are decomposed besides ``decompose``; recorded in the report."""
    if flat and target_for(Path(out), to) not in ("torch", "relax", "keras", "jax"):
        raise MscError("--flat applies to the torch, relax, keras and jax targets only")
    say = progress or (lambda s: None)
    out_p = Path(out)
    target = target_for(out_p, to)
    if target in FILE_TARGETS and out_p.suffix.lower() != FILE_TARGETS[target]:
        raise MscError(f"{out_p}: a {target} output must be a {FILE_TARGETS[target]} file")
    if opset is not None and target != "onnx":
        raise MscError("--opset applies to the onnx target only")
    if not optimize and target not in ("onnx", "tflite"):
        raise MscError("--no-optimize applies to the onnx and tflite targets only")
    if decompose and target != "onnx":
        raise MscError("--decompose applies to the onnx target only")
    if consumer is not None:
        if target != "onnx":
            raise MscError("--for applies to the onnx target only")
        from codegen.onnx import consumers

        decompose = (*decompose, *consumers.consumer(consumer).decompose)
    decompose = tuple(dict.fromkeys(decompose))
    # The source file (module.py of module.py:Class), or a directory holding it (a generated
    # model.py and its weights given as the file): replaced only with --force.
    text = os.fspath(src)
    src_p = Path(text.rpartition(":")[0] if ":" in text and not Path(text).exists() else text)
    if (
        not force
        and src_p.exists()
        and out_p.exists()
        and (out_p.resolve() == src_p.resolve() or out_p.resolve() in src_p.resolve().parents)
    ):
        raise MscError(
            f"{out_p}: the output is the model being converted; pass --force to replace it"
        )
    if _is_file(target, out_p):
        files.check_output(out_p, "file", target, force=force)
    else:
        files.check_output(out_p, "dir")
    is_module = ":" in os.fspath(src) and not Path(src).exists()
    model = load_model(
        src,
        input_specs if is_module else (),
        dynamic if is_module else (),
        say,
        trust_pickle=trust_pickle,
        custom_ops=custom_ops,
    )
    g = model.graph if is_module else _adjust(model.graph, input_specs, dynamic)
    if dynamic and not is_module:
        _check_dynamic(model.graph, g, dynamic)
    source = model if g is model.graph else Model(g, "msc", f"{src} (adjusted)")
    report = ConvertReport(str(src), str(out_p), target)
    report.consumer, report.decompose = consumer or "", decompose
    tmp = None
    try:
        with files.uninterrupted():
            tmp, staged = _stage(out_p, target)
        say(f"writing {target}")
        _write(g, target, staged, opset, report, optimize, flat, decompose)
        if check:
            say("re-importing the output")
            if target == "torch":
                from codegen.torch import as_generated, constants_as_nodes

                # Code that reads shapes from tensor values at run time (ONNX files that
                # compute them) is beyond torch.export, or it captures ops on such sizes
                # msc's torch frontend does not take: then the module is run as it is.
                try:
                    again = load_model(
                        staged, _specs_of(g), dynamic_items(g), custom_ops=custom_ops
                    )
                except ExportFailed as e:
                    report.uncaptured = (
                        "torch.export cannot capture the generated module: "
                        + (str(e).split("torch.export failed: ", 1)[-1])
                    )
                except UnsupportedOpsError as e:
                    first = str(e).splitlines()[0]
                    report.uncaptured = f"msc cannot read what torch.export captured: {first}"
                if report.uncaptured:
                    again = generated_module(staged, as_generated(g))
            elif target == "relax":
                again = _reread_relax(staged, g, report)
            elif target == "jax":
                again = _reread_jax(staged, g)
            else:
                again = load_model(staged, custom_ops=custom_ops)
            report.checked = True
            if target == "relax":
                report.structural, report.changes = _structural_relax(g, again, flat)
                equal = report.structural is None
                report.verdict, report.equivalent = ("equal" if equal else "differs"), equal
            elif target == "jax":  # compared with what the generated code computes
                from codegen.jax import as_generated

                report.structural, report.changes, report.verdict, report.equivalent = _structural(
                    as_generated(g), again.graph
                )
                report.advisory = "" if report.equivalent else JAX_ADVISORY
            elif target == "keras":  # the sizes the graph proved (Keras stores none)
                report.structural, report.changes, report.verdict, report.equivalent = _structural(
                    g, again.graph, keep_types=True
                )
            elif target == "torch" and report.uncaptured:
                report.verdict, report.equivalent = "not re-imported", True
            elif target == "torch":  # compared with what the generated code computes
                from codegen.torch import unrolled_nodes

                report.structural, report.changes, report.verdict, report.equivalent = _structural(
                    as_generated(g), constants_as_nodes(again.graph, g), keep_types=True
                )
                unrolled = [] if report.equivalent else unrolled_nodes(g)
                if unrolled and _only_unrolled(as_generated(g), again.graph, g, unrolled):
                    shown = ", ".join(unrolled[:3]) + (" ..." if len(unrolled) > 3 else "")
                    report.advisory = UNROLLED_ADVISORY.format(nodes=shown)
            else:  # an ONNX model holds the weights something reads
                written = g
                if target == "onnx":
                    from codegen.onnx import as_written

                    written = as_written(g, report.opset, decompose)
                report.structural, report.changes, report.verdict, report.equivalent = _structural(
                    written, again.graph
                )
            say("running source and output on random inputs")
            report.numeric = verify_models(source, again, rtol=rtol, atol=atol, seed=seed)
            report.changes_allowed = allow_changes and not report.equivalent
            report.ok = report.numeric.ok and (
                report.equivalent or allow_changes or bool(report.advisory)
            )
        if report.ok:
            with files.uninterrupted():  # every file of the output, or (on error) none
                report.files = _install(staged, out_p, target)
    except MscError as e:  # its message names where OUT would have been, not the staging
        if tmp is not None:
            e.args = (_user_paths(str(e), tmp, out_p), *e.args[1:])
        raise
    finally:
        if tmp is not None:
            _name_user_paths(report, tmp, out_p)
            shutil.rmtree(tmp, ignore_errors=True)
    return report


def _reread_jax(staged: Path, g: Graph) -> Model:
    """The written JAX directory (code msc just generated) re-exported with jax.export at the
    graph's input shapes and read back (``reexport_jax``); it runs as an export of the code
    with its weights loaded."""
    import jax
    from jax import export

    from codegen.jax import MODEL_FILE, WEIGHTS_FILE

    src = (staged / MODEL_FILE).read_text(encoding="utf-8")
    ns: dict[str, Any] = {"__name__": "msc_generated_jax_check"}
    exec(compile(src, str(staged / MODEL_FILE), "exec"), ns)
    params = ns["load_params"](str(staged / WEIGHTS_FILE))
    fn = ns["forward"]
    graph = reexport_jax(fn, params, g)
    specs = _jax_specs(g)[0]  # exported above, so this one does too
    run = export.export(jax.jit(lambda *a: fn(params, *a)))(*specs)
    return Model(graph, "jax", str(staged / MODEL_FILE), bytes(run.serialize()))


def reexport_jax(fn: Any, params: dict[str, Any], g: Graph) -> Graph:
    """``fn(params, *inputs)`` (JAX code generated from ``g``) exported by jax.export at
    ``g``'s input shapes (its symbolic dims symbolic, with their ranges) and read back by
    msc.from_stablehlo: ``params``' entries as the weights of those names, the inputs named
    as ``g``'s, the symbols as ``g``'s."""
    import msc

    try:
        import jax
        from jax import export
    except ImportError as e:
        raise MscError(f"checking the jax target needs JAX (the jax extra): {e}") from None
    specs, symbols = _jax_specs(g)
    leaves, tree = jax.tree_util.tree_flatten_with_path(params)
    # a leaf's name: its path in the params tree joined by dots (the weight's name); its
    # array as the graph holds it (JAX without x64 made an int64 buffer int32 on loading)
    names = [".".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in p) for p, _ in leaves]
    arrays = [np.asarray(x) for _, x in leaves]
    for k, (n, x) in enumerate(zip(names, arrays)):
        w = g.weights.get(n)
        if w is not None and w.has_data and tuple(w.type.shape or ()) == x.shape:
            arrays[k] = np.asarray(w.numpy())
    weights = {i: (n, x) for i, (n, x) in enumerate(zip(names, arrays))}
    params = jax.tree_util.tree_unflatten(tree, arrays)
    try:
        # keep_unused: a weight the code does not read stays one of main's, as in the source;
        # 64-bit types (int64 token ids) stay 64-bit where the graph has them, as JAX computes
        # the code with jax_enable_x64 (without it every 64-bit array is a 32-bit one)
        with jax.enable_x64(_wide(g)):
            exp = export.export(jax.jit(fn, keep_unused=True))(params, *specs)
    except Exception as e:  # noqa: BLE001 - JAX's shape-polymorphism errors have many types
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise MscError(
            f"the generated JAX code does not export at the graph's symbolic input shapes "
            f"({first}); --no-check writes it unchecked"
        ) from None
    return msc.from_stablehlo(
        exp,
        name=g.name,
        weights=weights,
        input_names=[""] * len(weights) + [v.name for v in g.inputs],
        symbols=symbols,
    )


def _wide(g: Graph) -> bool:
    """``g`` has a 64-bit input or weight."""
    from msc.ir import DType

    wide = {DType.INT64, DType.UINT64, DType.FLOAT64, DType.COMPLEX128}
    types = [v.type for v in g.inputs] + [w.type for w in g.weights.values()]
    return any(isinstance(t, TensorType) and t.dtype in wide for t in types)


def check_jax_structure(
    g: Graph, fn: Any, params: dict[str, Any]
) -> tuple[str | None, str, str, bool]:
    """The structural half of the jax target's check for ``fn(params, *inputs)``, JAX code
    generated from ``g``: its re-export (``reexport_jax``) compared with ``g`` as the code
    computes it (``codegen.jax.as_generated``). Returns (first difference or None when equal,
    a one-line summary of the node-level diff, diff's verdict, equivalent up to known
    rewrites), as for every target."""
    from codegen.jax import as_generated

    return _structural(as_generated(g), reexport_jax(fn, params, g))


def _jax_specs(g: Graph) -> tuple[list, dict[str, SymDim]]:
    """``g``'s inputs as jax.ShapeDtypeStruct (symbolic dims as jax.export's) and msc's
    symbols by their jax.export names."""
    import jax

    shapes = []
    for v in g.inputs:
        t = v.type
        if not isinstance(t, TensorType) or t.shape is None or None in t.shape:
            raise MscError(f"input {v.name!r}: the jax check needs a tensor of known shape")
        shapes.append(t)
    dims, symbols = _jax_symbolic_dims([t.shape for t in shapes])
    specs = [
        jax.ShapeDtypeStruct(tuple(dims.pop(0) for _ in t.shape), t.dtype.to_numpy())
        for t in shapes
    ]
    return specs, symbols


def _jax_symbolic_dims(shapes: list[tuple]) -> tuple[list, dict[str, SymDim]]:
    """Every dim of ``shapes`` in order, symbolic ones as jax.export symbolic dims of one
    scope (symbol names made identifiers, msc's ranges as constraints), so the generated code
    is exported as polymorphic as the graph it came from; and msc's symbols by those names."""
    from jax import export

    from msc.ir.symexpr import spell, subs, symbols

    syms = {s.name: s for shape in shapes for d in shape for s in symbols(d)}
    safe: dict[str, SymDim] = {}
    for i, (name, s) in enumerate(sorted(syms.items())):
        ident = name if name.isidentifier() and name.isascii() else f"d{i}"
        safe[name] = SymDim(ident, s.min, s.max)
    constraints = [
        c
        for s in safe.values()
        for c in (
            f"{s.name} >= {s.min}" if s.min is not None and s.min > 1 else None,
            f"{s.name} <= {s.max}" if s.max is not None else None,
        )
        if c is not None
    ]
    scope = export.SymbolicScope(constraints)
    out: list = []
    for shape in shapes:
        spelled = [spell(subs(d, safe), ranges=False) for d in shape]
        out.extend(export.symbolic_shape(", ".join(spelled), scope=scope) if spelled else ())
    return out, {safe[name].name: s for name, s in syms.items()}


def _reread_relax(staged: Path, g: Graph, report: ConvertReport) -> Model:
    """The written Relax directory, read back: as msc's graph when msc.from_relax reads every
    binding the codegen wrote (run-time shapes are written as ``match_cast`` and
    ``tensor_to_shape``, which have no msc form); else the module alone, run on the VM with
    ``g``'s inputs, and ``report.unread`` says why."""
    import msc
    from codegen.relax import SCRIPT_FILE, WEIGHTS_FILE
    from msc.analysis.relaxfile import read_relax
    from msc.io.native import native_stderr_captured

    mod = read_relax(staged / SCRIPT_FILE, staged / WEIGHTS_FILE)
    try:
        with native_stderr_captured():
            graph = msc.from_relax(mod)
    except UnsupportedOpsError as e:
        kinds = sorted({o.op for o in e.ops})
        shown = ", ".join(kinds[:6]) + (", ..." if len(kinds) > 6 else "")
        report.unread = f"msc.from_relax cannot read back {len(e.ops)} binding(s): {shown}"
        graph = g
    except ConversionError as e:
        report.unread = f"msc.from_relax cannot read it back: {str(e).splitlines()[0]}"
        graph = g
    return Model(graph, "relax", str(staged / SCRIPT_FILE), mod)


def _user_paths(text: str, tmp: Path, out: Path) -> str:
    """``text`` with paths in the staging directory ``tmp`` written as the user's: the staged
    output as OUT, other staged files (an .onnx file's external data) as OUT's siblings."""
    staged = tmp / out.name
    for path, user in ((staged, out), (tmp, out.parent)):
        for form in dict.fromkeys((str(path.absolute()), str(path))):
            text = text.replace(form, str(user))
    return text


def _name_user_paths(report: ConvertReport, tmp: Path, out: Path) -> None:
    """The report's messages name OUT, where the output was checked in staging."""

    def fix(text: str) -> str:
        return _user_paths(text, tmp, out)

    report.uncaptured = fix(report.uncaptured)
    report.unread = fix(report.unread)
    report.changes = fix(report.changes)
    report.structural = None if report.structural is None else fix(report.structural)
    if report.numeric is not None:
        report.numeric.b_label = fix(report.numeric.b_label)
        report.numeric.notes = [fix(n) for n in report.numeric.notes]


def _structural_relax(g: Graph, again: Model, flat: bool = False) -> tuple[str | None, str]:
    """The written module, read back, is the module ``g`` translates to (TVM's structural
    equality). (The graph read back from it is what the numeric check then runs.)"""
    import tvm_ffi
    from tvm import relax

    import codegen.relax as cr

    want = cr.script_module(g, flat=flat)[0]
    got = relax.frontend.detach_params(again.native)[0]
    mismatch = tvm_ffi.get_first_structural_mismatch(got, want)
    if mismatch is not None:
        return str(mismatch), "the written TVMScript differs from the translation"
    return None, ""


def _specs_of(g: Graph) -> list[InputShape]:
    """Example shapes for re-importing a torch module generated from ``g`` (symbols at 2)."""
    from msc.analysis.shapes import concrete_shape

    return [InputShape(v.name, concrete_shape(v.type, {}), v.type.dtype) for v in g.inputs]


def _unranged(g: Graph, keep_types: bool = False) -> Graph:
    """``g`` with symbol ranges dropped (ONNX cannot store them; torch.export adds its own).
    ``keep_types``: every type kept with its ranges dropped, as a torch.export re-import has
    the sizes torch proved (a slice to a run-time end); else the types inferred again from
    the unranged inputs, as an ONNX re-import's are."""
    from msc.ops.rewrite import copy_graph

    def strip(t: Any) -> Any:
        def dims(x: TensorType) -> TensorType:
            return x if x.shape is None else x.with_shape(symexpr.unranged(d) for d in x.shape)

        return map_tensor(t, dims)

    if not keep_types:
        types = {}
        for v in g.inputs:
            t = tensor_of(v.type)  # a sequence's or optional's element: its dims
            if t.shape is not None and not t.is_static:
                types[v.name] = strip(v.type)
        return retype(g, types, {}) if types else g

    def values(graph: Graph) -> list:
        out = list(graph.values())
        for n in graph.nodes:
            for sub in n.subgraphs():
                out += values(sub)
        return out

    if all(strip(v.type) == v.type for v in values(g)):
        return g
    out = copy_graph(g)
    for v in values(out):
        v.type = strip(v.type)
    return out


def _only_unrolled(a: Graph, b: Graph, source: Graph, unrolled: list[str]) -> bool:
    """Whether the re-import ``b`` differs from ``a`` only where ``unrolled`` nodes were:
    every node of ``a`` diff pairs is unchanged, and those it cannot pair are ops of the
    unrolled nodes (their steps are what ``b`` adds). A change anywhere else still blocks."""
    from msc.analysis.diff import diff_graphs

    ops = {n.op for n in source.nodes if (n.name or n.op) in set(unrolled)}
    a, b = _unranged(a, True), _unranged(b, True)
    d = diff_graphs(a, b)
    if d.changed or any(": renamed " not in s for s in d.io_changes):
        return False
    return all(a.nodes[i].op in ops for i, s in d.node_status_a.items() if s != "same")


def _structural(a: Graph, b: Graph, keep_types: bool = False) -> tuple[str | None, str, str, bool]:
    """(first difference or None when equal modulo names and symbol ranges, a one-line
    summary of the node-level diff, diff's verdict, equivalent up to known rewrites)."""
    import msc
    from msc.analysis.diff import _kind, diff_graphs

    a, b = _unranged(a, keep_types), _unranged(b, keep_types)
    r = msc.structural_equal(a, b)
    if r:
        return None, "", "equal", True
    d = diff_graphs(a, b)
    kinds = Counter(_kind(s) for c in d.changed for s in c.changes if "type:" not in s)
    summary = (
        f"{len(d.matched)} nodes matched ({len(d.matched) - len(d.changed)} identical), "
        f"{len(d.added)} added, {len(d.removed)} removed"
    )
    if kinds:
        summary += "; " + ", ".join(
            k + (f" x{n}" if n > 1 else "") for k, n in kinds.most_common(4)
        )
    return r.diff, summary, d.verdict(), d.equivalent
