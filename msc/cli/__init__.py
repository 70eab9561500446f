"""The ``msc`` command. A thin layer over the Python API (``msc.convert``, ``msc.inspect``,
``msc.diff``, ``msc.verify``, ``msc.render``, ``msc.batch``).

Exit codes: 0 success (for ``diff``: the models are structurally equal); 1 a check, a
verification or a diff found a difference; 2 a user error (bad arguments, a missing or corrupt
file, unsupported ops), reported as one ``msc: error:`` line (plus indented details, such as
every unsupported op), without a traceback.

# NOTE: what a command prints is msc's own: while it runs, everything else written to the
# process's stdout and stderr (torch's graph dumps and logs, onnxruntime's and TVM's C++
# loggers, Python warnings) goes nowhere, unless ``--verbose``. Progress goes to stderr, and
# only when stderr is a terminal and ``--quiet`` is not given; results go to stdout
# (``--json``: one JSON document and nothing else); ``--quiet`` prints nothing on success.
"""

from __future__ import annotations

import argparse
import difflib
import io
import json
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from msc.cli.output import BatchBar, Progress, isatty, own_output, quiet_exit

__all__ = ["main", "build_parser"]

EXIT_OK, EXIT_MISMATCH, EXIT_USAGE = 0, 1, 2
# msc.analysis.convert.TARGETS, without its import
TARGETS = ("torch", "onnx", "msc", "relax", "tflite", "keras", "jax")

_EPILOG = """\
model formats: .onnx, .pt2 (torch.export.save), .tflite (TFLite / LiteRT; run in LiteRT's
interpreter, the tflite extra), .keras (Keras 3, loaded by Keras in safe mode on the torch
backend, the keras extra) and legacy Keras .h5 / .hdf5 files, .jaxexport (jax.export's
Exported.serialize(); run in JAX) and .mlir (StableHLO text or bytecode; both need the jax
extra), a TensorFlow SavedModel directory or dir:signature (with --trust-code, through
TensorFlow's TFLite converter; the tensorflow extra), a saved msc graph directory (msc.save),
a codegen.torch directory (model.py + model.safetensors) or its model.py (the weights
beside it are loaded, also for model.py:Class), a codegen.keras directory or its model.py, a
codegen.relax directory (module.py + model.safetensors) or TVMScript file (needs apache-tvm),
.msc text, or module.py:ClassName (a file defining an nn.Module built with no arguments; give
--input-shape for its inputs). Generated JAX code is not read back.

security: .onnx, .pt2, .tflite, .jaxexport, .mlir, .msc, saved graphs, safetensors, TVMScript
files and
codegen.relax directories are only read; nothing in them runs (a .pt2 member that needs
unpickling, or TVMScript beyond what TVM's printer writes, is refused unless --trust-code; a
.tflite custom op or StableHLO custom_call is kept opaque with --custom-ops keep, never
run). A .keras or legacy .h5 file's config is checked first and Keras loads it with
safe_mode: Lambda layers and custom objects are refused (msc's own SourceWeight and Sized
layers are built by msc's code), and layer sizes beyond the weights the file stores are refused.
A TensorFlow SavedModel is a program TensorFlow runs: read only with --trust-code.
module.py:ClassName and codegen.torch /
codegen.keras directories and their model.py (known by msc's header) ARE Python code: msc
imports and runs them.

exit codes: 0 ok, 1 a check/verify/diff found a difference, 2 user error.
"""


def _progress(args: argparse.Namespace) -> Progress:
    return Progress(_shows_progress(args), args.err)


def _shows_progress(args: argparse.Namespace) -> bool:
    return not args.quiet and not getattr(args, "json", False) and isatty(args.err)


def _specs(args: argparse.Namespace):
    from msc.analysis.shapes import parse_input_shape

    return [parse_input_shape(s) for s in args.input_shape or ()]


def _is_module(src: str) -> bool:
    """Sources exported from a PyTorch module, for which --input-shape gives the example
    inputs (module.py:Class, a codegen.torch directory or its model.py) rather than binding
    symbols."""
    from msc.analysis.pysource import exports_module

    return exports_module(src)


def _load(src: str, args: argparse.Namespace, say: Callable[[str], None]):
    from msc.analysis.model import load_model
    from msc.analysis.shapes import parse_dynamic
    from msc.errors import MscError

    trust = getattr(args, "trust_pickle", False)
    custom = getattr(args, "custom_ops", "error")
    dynamic = getattr(args, "dynamic", None) or ()
    for item in dynamic:
        parse_dynamic(item)  # a malformed item is an error whatever the source
    if _is_module(src):
        return load_model(src, _specs(args), dynamic, say, trust_pickle=trust, custom_ops=custom)
    if dynamic:
        raise MscError(
            f"--dynamic applies where msc exports a module (module.py:Class, a generated "
            f"PyTorch directory) and to convert; {src} already has its shapes"
        )
    return load_model(src, progress=say, trust_pickle=trust, custom_ops=custom)


def _emit(args: argparse.Namespace, data: dict[str, Any], text: str, code: int = 0) -> int:
    """Print a command's result (``--json``: the document) and return its exit code; with
    ``--quiet`` a success prints nothing but what ``--json`` asked for."""
    if getattr(args, "json", False):
        args.out.write(json.dumps(data, indent=2, default=str) + "\n")
    elif not (args.quiet and code == EXIT_OK):
        args.out.write(text)
    return code


# ------------------------------------------------------------------------------ commands
def _cmd_inspect(args: argparse.Namespace) -> int:
    from msc.analysis.inspect import format_report, inspect_graph
    from msc.analysis.shapes import bind

    if args.weights_only or args.model.lower().endswith(".safetensors"):
        from msc.analysis.weights import format_weights, inspect_weights

        w = inspect_weights(args.model)
        _emit(args, w.to_json(), format_weights(w, top=args.top if args.weights_only else 0))
        return EXIT_OK
    with _progress(args) as say:
        m = _load(args.model, args, say)
        binding = {} if _is_module(args.model) else bind(m.graph, _specs(args))
        say("analysing")
        r = inspect_graph(m.graph, binding, source=m.label)
    return _emit(args, r.to_json(), format_report(r, top=args.top))


def _cmd_diff(args: argparse.Namespace) -> int:
    from msc.analysis.diff import diff_graphs, format_diff

    _check_overlay_outputs(args)
    with _progress(args) as say:
        a = _load(args.a, args, say)
        b = _load(args.b, args, say)
        say("comparing")
        r = diff_graphs(a.graph, b.graph)
        if args.html or args.node_data:
            from msc.analysis.graphview import diff_overlays

            say("writing overlays")
            _overlays(args, a, b, *diff_overlays(r))
    text = format_diff(r, a.label, b.label, limit=0 if args.all else 25)
    return _emit(args, r.to_json(), text, EXIT_OK if r.equivalent else EXIT_MISMATCH)


def _overlays(args: argparse.Namespace, a: Any, b: Any, oa: Any, ob: Any) -> None:
    """``--html OUT``: one page showing A and B with their overlays; ``--node-data DIR``:
    Model Explorer node-data files DIR/A.json and DIR/B.json."""
    import json as _json
    from pathlib import Path

    from msc.io import files

    if args.html:
        from msc.analysis.page import graph_data, to_page

        out = Path(args.html)
        page = to_page(
            [graph_data(a.graph, f"A: {a.label}", oa), graph_data(b.graph, f"B: {b.label}", ob)],
            f"{args.command}: {a.label} vs {b.label}",
        )
        files.write_text(out, page, "html")
        if not args.quiet:
            print(f"wrote {out}", file=args.err)
    if args.node_data:
        from msc.analysis.explorer import node_data

        d = Path(args.node_data)
        d.mkdir(parents=True, exist_ok=True)
        for name, o in (("A.json", oa), ("B.json", ob)):
            text = _json.dumps(node_data(o), indent=1) + "\n"
            files.write_text(d / name, text, "node-data")
        if not args.quiet:
            print(
                f"wrote {d / 'A.json'} and {d / 'B.json'}; view with: model-explorer {args.a} "
                f"--extensions=msc.explorer --node_data_paths={d / 'A.json'}",
                file=args.err,
            )


def _check_overlay_outputs(args: argparse.Namespace) -> None:
    """Before any work: ``--html`` and ``--node-data`` files can be written, and replace
    neither a model the command reads (A or B, or a file inside one) nor a file msc did not
    write."""
    from pathlib import Path

    from msc.errors import MscError
    from msc.io import files

    outs = [(Path(args.html), "html")] if args.html else []
    if args.node_data:
        outs += [(Path(args.node_data) / n, "node-data") for n in ("A.json", "B.json")]
    for out, what in outs:
        target = out.resolve()
        for src in (args.a, args.b):
            p = Path(src).resolve()
            if target == p or p in target.parents:
                raise MscError(f"{out}: is the model {src} this command reads; choose another path")
        files.check_output(out, "file", what)


def _cmd_verify(args: argparse.Namespace) -> int:
    from msc.analysis.shapes import bind
    from msc.analysis.verify import format_verify, verify_models

    _check_overlay_outputs(args)
    with _progress(args) as say:
        a = _load(args.a, args, say)
        b = _load(args.b, args, say)
        inputs: Any = args.inputs
        if inputs is None and a.example is not None:
            inputs = None  # random inputs of the exported shapes (seeded) are still used
        binding = {} if _is_module(args.a) else bind(a.graph, _specs(args))
        r = verify_models(
            a,
            b,
            inputs,
            rtol=args.rtol,
            atol=args.atol,
            seed=args.seed,
            binding=binding,
            localize=not args.no_localize,
            progress=say,
            per_node=bool(args.html or args.node_data),
        )
        if args.html or args.node_data:
            from msc.analysis.graphview import verify_overlays

            say("writing overlays")
            _overlays(args, a, b, *verify_overlays(r))
    return _emit(args, r.to_json(), format_verify(r), EXIT_OK if r.ok else EXIT_MISMATCH)


def _cmd_render(args: argparse.Namespace) -> int:
    from msc.analysis.render import render
    from msc.analysis.shapes import bind, specialize

    with _progress(args) as say:
        m = _load(args.model, args, say)
        g = m.graph
        if not _is_module(args.model) and args.input_shape:
            g = specialize(g, bind(g, _specs(args)))
        say(f"rendering {args.output}")
        path = render(g, args.output)
    if not args.quiet:
        print(f"wrote {path} ({len(g.nodes)} nodes)", file=args.out)
    return EXIT_OK


def _cmd_convert(args: argparse.Namespace) -> int:
    from msc.analysis.convert import convert
    from msc.analysis.verify import format_verify

    with _progress(args) as say:
        r = convert(
            args.src,
            args.output,
            to=args.to,
            opset=args.opset,
            input_specs=_specs(args),
            dynamic=args.dynamic or (),
            check=not args.no_check,
            rtol=args.rtol,
            atol=args.atol,
            seed=args.seed,
            progress=say,
            trust_pickle=args.trust_pickle,
            force=args.force,
            custom_ops=args.custom_ops,
            allow_changes=args.allow_changes,
            optimize=not args.no_optimize,
            flat=args.flat,
            decompose=args.decompose or (),
            consumer=args.consumer,
        )
    lines: list[str] = []
    if r.ok:
        lines.append(f"wrote {r.out} ({r.target}): " + ", ".join(r.files))
        if r.opset is not None:
            lines.append(f"onnx opset {r.opset} ({r.opset_reason})")
        if r.consumer:
            from codegen.onnx import CONSUMERS

            lines.append(f"written for {r.consumer}: {CONSUMERS[r.consumer].reason}")
        did = ", ".join(f"{k} x{v}" for k, v in sorted(r.optimized.items()) if v)
        if did:  # nothing to fold: no line
            # without optimize, only what the runtime needs to load the file (onnx's moves
            # of dequantized integers, codegen.onnx.optimize.moves_before_dequantize)
            how = "rewritten to load" if args.no_optimize else "optimized"
            lines.append(f"{r.target} {how}: {did}")
    if r.checked:
        if r.uncaptured:
            lines.append(f"check: not re-imported ({r.uncaptured}); the module is run as it is")
        elif r.unread and r.structural is None:
            lines.append(
                "check: the written module is structurally equal to the translation (TVM); "
                f"not compared as an msc graph ({r.unread})"
            )
        elif r.structural is None:
            lines.append("check: re-imported output is structurally equal to the converted graph")
        elif r.equivalent:
            lines.append(f"check: re-imported output is {r.verdict}")
        else:
            lines.append(f"check: re-imported output: {r.verdict}: {r.changes}")
            if r.advisory:
                lines.append(f"check: {r.advisory}")
        assert r.numeric is not None
        lines.append(
            "check: outputs "
            + ("match" if r.numeric.ok else "DO NOT match")
            + f" on random inputs (rtol {r.numeric.rtol:g}, atol {r.numeric.atol:g}): "
            + ", ".join(f"{o.name} max abs {o.max_abs:.3g}" for o in r.numeric.outputs)
        )
        if not r.numeric.ok:
            lines.append(format_verify(r.numeric).rstrip())
            lines.append("nothing written; --no-check writes it anyway")
        elif not r.ok:
            lines.append(
                "nothing written: the output read back differs from the converted graph "
                "(msc diff shows how); --allow-changes writes it anyway"
            )
    else:
        lines.append("check: skipped (--no-check)")
    return _emit(args, r.to_json(), "\n".join(lines) + "\n", EXIT_OK if r.ok else EXIT_MISMATCH)


def _cmd_batch(args: argparse.Namespace) -> int:
    from msc.analysis.batch import batch, format_batch

    ray: bool | str = False if args.ray is None else (args.ray or True)
    with BatchBar(_shows_progress(args), args.err) as bar:
        r = batch(
            args.manifest,
            args.output,
            task=args.task,
            to=args.to,
            jobs=args.jobs,
            timeout=args.timeout,
            memory=args.memory,
            ray=ray,
            resume=not args.no_resume,
            trust_pickle=args.trust_pickle,
            custom_ops=args.custom_ops,
            progress=bar,
        )
    return _emit(args, r.to_json(), format_batch(r), EXIT_OK if r.ok else EXIT_MISMATCH)


def _cmd_demo(args: argparse.Namespace) -> int:
    from msc.examples import demo

    text = io.StringIO()
    code = demo(out=text if args.quiet else args.out, keep=args.keep, model=args.model)
    return _emit(args, {}, text.getvalue(), code)


# ------------------------------------------------------------------------------ parser
def _shape_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--input-shape",
        action="append",
        metavar="NAME=DIMS[:DTYPE]",
        help="an input's shape, e.g. x=1,3,224,224 or ids=1,128:i64 (repeatable); binds "
        "symbolic dims, or gives the example inputs of a module.py:Class source",
    )
    p.add_argument(
        "--dynamic",
        action="append",
        metavar="NAME:AXIS=SYMBOL",
        help="make a dim symbolic, e.g. x:0=batch or x:0=batch{1..64} (repeatable)",
    )


def _common(p: argparse.ArgumentParser, reads_models: bool = True) -> None:
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print nothing on success (the exit code says it; --json still prints its "
        "document); a difference or an error is still reported",
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="let through what torch, onnxruntime and TVM print and log while msc works "
        "(hidden by default)",
    )
    if reads_models:
        p.add_argument(
            "--trust-code",
            "--trust-pickle",
            dest="trust_pickle",
            action="store_true",
            help="let a model file run code it contains: unpickle .pt2 members (pickled "
            "weights, custom objects, old formats) and hand TVMScript beyond the subset msc "
            "reads to TVM's parser, which runs it as Python; let TensorFlow load a "
            "SavedModel's graph to convert it; only for files you trust",
        )
        p.add_argument(
            "--custom-ops",
            choices=("error", "keep"),
            default="error",
            help="an op msc cannot translate (a torch.library op, an ONNX com.microsoft op): "
            "report it with all the others (error, the default) or keep it as a custom node",
        )


def _tolerance(text: str) -> float:
    """A tolerance: a finite number >= 0 (``nan`` would make every comparison pass)."""
    import math

    try:
        tol = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(tol) or tol < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a tolerance is a finite number >= 0")
    return tol


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad command line as one ``msc: error:`` line, exit 2, with a
    guess at what was meant for a mistyped command, option or choice."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.commands: dict[str, _Parser] = {}  # the top-level parser's subcommands
        self.options: list[str] = []  # every option string, for "did you mean"
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.options += action.option_strings
        return action

    def error(self, message: str):  # type: ignore[override]
        where = self.prog.removeprefix("msc").strip()  # "convert": no second "msc"
        where = f"{where}: " if where else ""
        sys.stderr.write(f"msc: error: {where}{message} (see {self.prog} --help)\n")
        sys.exit(EXIT_USAGE)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # argparse's own check, with the closest choice named (a command, a --to target).
        if action.choices is not None and value not in action.choices:
            choices = [str(c) for c in action.choices]
            raise argparse.ArgumentError(
                action,
                f"invalid choice: {value!r} (choose from {', '.join(choices)})"
                + _did_you_mean(str(value), choices),
            )

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:  # type: ignore[override]
        ns, extra = self.parse_known_args(args, namespace)
        if extra:
            sub = self.commands.get(getattr(ns, "command", None) or "")
            options = (sub or self).options
            hint = next((_did_you_mean(a.split("=")[0], options) for a in extra), "")
            (sub or self).error(f"unrecognized arguments: {' '.join(extra)}{hint}")
        return ns


def _did_you_mean(word: str, candidates: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def _tol(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--rtol", type=_tolerance, default=1e-4, help="relative tolerance (default 1e-4)"
    )
    p.add_argument(
        "--atol", type=_tolerance, default=1e-5, help="absolute tolerance (default 1e-5)"
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the random inputs (default 0); bit i set empties the i-th optional "
        "input, and bit k + j (k optional inputs) the j-th sequence input",
    )


def _overlay_opts(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--html",
        metavar="OUT.html",
        help=f"write a page to explore A and B with {what} on each node",
    )
    p.add_argument(
        "--node-data",
        metavar="DIR",
        help=f"write Model Explorer node data ({what}) to DIR/A.json and DIR/B.json",
    )


def build_parser() -> argparse.ArgumentParser:
    import msc

    fmt = argparse.RawDescriptionHelpFormatter
    p = _Parser(
        prog="msc",
        description="msc: translate models between PyTorch, ONNX, TFLite, JAX and TVM Relax "
        "through one "
        "neutral graph, and look inside them.",
        epilog=_EPILOG,
        formatter_class=fmt,
    )
    p.add_argument("--version", action="version", version=f"msc {msc.__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    c = sub.add_parser(
        "convert",
        help="convert a model to PyTorch source, ONNX, TFLite, JAX, TVM Relax or an msc graph, "
        "and check it",
        description="Convert SRC and write OUT; then re-import OUT, compare it with the "
        "converted graph as msc diff does, and run both on random inputs (unless --no-check). "
        "Nothing is written if anything fails: outputs that differ, or real changes (unless "
        "--allow-changes).",
        epilog=_EPILOG,
        formatter_class=fmt,
    )
    c.add_argument("src", metavar="SRC", help="the model to convert")
    c.add_argument("-o", "--output", required=True, metavar="OUT", help="where to write it")
    c.add_argument(
        "--to",
        choices=TARGETS,
        help="target (default: onnx for *.onnx, tflite for *.tflite, keras for *.keras, msc "
        "for *.msc, else a torch directory; relax: a TVM Relax directory, needs apache-tvm; "
        "keras: a Keras 3 directory (a .keras file for *.keras), needs keras; jax: a "
        "directory with model.py + weights.safetensors, needs the jax extra)",
    )
    c.add_argument(
        "--opset",
        type=int,
        help="ONNX opset to emit (default: the newest at which the installed onnxruntime has a "
        "kernel for every op)",
    )
    c.add_argument(
        "--no-optimize",
        action="store_true",
        help="onnx, tflite: write the graph node for node (default, onnx: constants folded "
        "into initializers, weights pre-transposed, BatchNorm folded into its Conv/Gemm; "
        "tflite: BatchNorm and zero pads folded into convs, activations fused); onnx still "
        "moves a Transpose or Reshape of dequantized integers before its DequantizeLinear, "
        "without which onnxruntime refuses the file",
    )
    c.add_argument(
        "--decompose",
        action="append",
        metavar="OP",
        help="onnx: write OP through its decomposition where the opset has it (repeatable; "
        "'attention': MatMul/Softmax, the form onnxruntime's transformer optimizer fuses "
        "around, instead of ONNX Attention)",
    )
    c.add_argument(
        "--for",
        dest="consumer",
        metavar="TOOL",
        help="onnx: write the file for TOOL: 'onnxruntime' (the default: ONNX Attention "
        "where onnxruntime has a kernel) or 'ort-optimizer' (onnxruntime.transformers."
        "optimizer, whose shape inference gives up on ONNX Attention: attention as "
        "MatMul/Softmax); the report says which",
    )
    _shape_opts(c)
    c.add_argument(
        "--flat",
        action="store_true",
        help="torch target: write one flat forward instead of one class per block of the "
        "source's module hierarchy; relax target: one main instead of one function per block "
        "type; keras target: one functional model instead of a Layer class per repeated block "
        "type; jax target: one forward over a flat params dict instead of one function per "
        "block type",
    )
    c.add_argument("--no-check", action="store_true", help="skip checking the output")
    c.add_argument(
        "--allow-changes",
        action="store_true",
        help="write OUT even when the check finds real changes (the output read back is "
        "neither equal nor equivalent to the converted graph, as msc diff says)",
    )
    c.add_argument(
        "--force", action="store_true", help="allow OUT to be SRC itself (it is replaced)"
    )
    _tol(c)
    c.add_argument("--json", action="store_true", help="print the result as JSON")
    _common(c)
    c.set_defaults(func=_cmd_convert)

    i = sub.add_parser(
        "inspect",
        help="inputs, outputs, ops, parameters, FLOPs and memory of a model",
        description="Show a model's inputs and outputs, op histogram, parameters per dtype, "
        "FLOPs/MACs per node and in total, and a peak activation memory estimate. Symbolic "
        "dims stay formulas unless bound with --input-shape.",
        epilog=_EPILOG,
        formatter_class=fmt,
    )
    i.add_argument("model", metavar="MODEL")
    _shape_opts(i)
    i.add_argument("--top", type=int, default=15, help="nodes listed by FLOPs (0: all)")
    i.add_argument(
        "--weights-only",
        action="store_true",
        help="only the weights (a model directory's, a generated model.py's or a .safetensors "
        "file's), read from the safetensors header: nothing runs, not even a generated model.py",
    )
    i.add_argument("--json", action="store_true", help="print the report as JSON")
    _common(i)
    i.set_defaults(func=_cmd_inspect)

    d = sub.add_parser(
        "diff",
        help="structural equality, else a node-level diff of two models",
        description="Compare two models of any formats: structural equality first, else "
        "matched, changed, added and removed nodes, after undoing the rewrites exporters are "
        "known to make (symbolic dims compare up to renaming). Exit 0 when equal or "
        "equivalent, 1 for real changes.",
        epilog=_EPILOG,
        formatter_class=fmt,
    )
    d.add_argument("a", metavar="A")
    d.add_argument("b", metavar="B")
    _shape_opts(d)
    d.add_argument("--all", action="store_true", help="list every change (default: 25 each)")
    d.add_argument("--json", action="store_true", help="print the diff as JSON")
    _overlay_opts(d, "same / changed / added / removed")
    _common(d)
    d.set_defaults(func=_cmd_diff)

    v = sub.add_parser(
        "verify",
        help="run two models on the same inputs and compare, localising a divergence",
        description="Run A and B on the same inputs (random and seeded, or --inputs) and "
        "report per-output errors; on a mismatch, name the first node where they diverge. "
        "Exit 0 on a match, 1 on a mismatch.",
        epilog=_EPILOG,
        formatter_class=fmt,
    )
    v.add_argument("a", metavar="A")
    v.add_argument("b", metavar="B")
    v.add_argument(
        "--inputs",
        metavar="FILE.npz",
        help="inputs by name (np.savez); a sequence input xs as xs[0], xs[1], ... (xs[]: "
        "empty); an optional input left out is empty; models that take different inputs "
        "need every input of both",
    )
    _tol(v)
    _shape_opts(v)
    v.add_argument("--no-localize", action="store_true", help="skip per-layer localisation")
    v.add_argument("--json", action="store_true", help="print the report as JSON")
    _overlay_opts(v, "each corresponding node's error")
    _common(v)
    v.set_defaults(func=_cmd_verify)

    r = sub.add_parser(
        "render",
        help="draw a model's graph (.svg, .dot or .html)",
        description="Write a picture of the graph: nodes labelled with op and shape, module "
        "paths as clusters. .svg needs Graphviz's `dot`; .dot and .html do not.",
        epilog=_EPILOG,
        formatter_class=fmt,
    )
    r.add_argument("model", metavar="MODEL")
    r.add_argument("-o", "--output", required=True, metavar="FILE", help=".svg, .dot or .html")
    _shape_opts(r)
    _common(r)
    r.set_defaults(func=_cmd_render)

    b = sub.add_parser(
        "batch",
        help="convert, verify or inspect many models, each in its own worker; resumable",
        description="Run the tasks of MANIFEST (JSON or YAML: models and what to do with each; "
        "or a directory of models) with each model in its own worker process under a time and "
        "memory limit; a crash, a hang or an unsupported op marks that model and the batch "
        "goes on. Prints a table and writes OUT/batch-report.json; a rerun skips the models "
        "whose input and output are unchanged since they were done. Exit 0 when every model is "
        "ok, 1 otherwise.",
        epilog=_EPILOG,
        formatter_class=fmt,
    )
    b.add_argument("manifest", metavar="MANIFEST", help="a .json/.yaml manifest or a directory")
    b.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help="output directory (default: the manifest's 'output', else MANIFEST.out beside it)",
    )
    b.add_argument(
        "--task",
        choices=("convert", "verify", "inspect"),
        help="for entries that name none (default: convert when a target is given, else inspect)",
    )
    b.add_argument(
        "--to",
        choices=TARGETS,
        help="target for convert entries that name none (default torch; relax needs apache-tvm)",
    )
    b.add_argument("-j", "--jobs", type=int, metavar="N", help="workers at once (default: CPUs)")
    b.add_argument("--timeout", type=float, metavar="SECONDS", help="per model (default 600)")
    b.add_argument(
        "--memory",
        metavar="SIZE",
        help="address-space limit per worker, e.g. 8GiB, or none (default: this machine's RAM)",
    )
    b.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="run on a Ray cluster "
        "(ADDRESS, or ray.init()'s default: a new local instance); paths must be "
        "shared by the cluster",
    )
    b.add_argument("--no-resume", action="store_true", help="redo models done before")
    b.add_argument("--json", action="store_true", help="print the report as JSON")
    _common(b)
    b.set_defaults(func=_cmd_batch)

    dm = sub.add_parser(
        "demo",
        help="run the main job on a small built-in example",
        description="Convert a built-in PyTorch model (msc.examples) to msc, ONNX and back to "
        "PyTorch source, verifying each step numerically, then inspect it.",
    )
    dm.add_argument("--model", choices=("cnn", "transformer"), default="cnn", help="which model")
    dm.add_argument(
        "--out", metavar="DIR", dest="keep", help="keep the files in DIR (default: temporary)"
    )
    _common(dm, reads_models=False)
    dm.set_defaults(func=_cmd_demo)
    p.commands.update(sub.choices)
    return p


# The Python API's spelling of an option, as errors from the library say it, and the command
# line's, as the user of the command needs it.
_CLI_SPELLING = (
    ("custom_ops='keep'", "--custom-ops keep"),
    ('custom_ops="keep"', "--custom-ops keep"),
    ("--trust-pickle (trust_pickle=True)", "--trust-pickle"),
    ("--trust-code (trust_pickle=True)", "--trust-code"),
    ("trust_pickle=True", "--trust-pickle"),
)


def _report_error(e: BaseException, err: TextIO) -> int:
    text = str(e).strip()
    for api, cli in _CLI_SPELLING:
        text = text.replace(api, cli)
    lines = text.splitlines() or [type(e).__name__]
    err.write(f"msc: error: {lines[0]}\n")
    for line in lines[1:]:
        err.write(f"  {line}\n")
    return EXIT_USAGE


class _Terminated(BaseException):
    """SIGTERM, raised where the process is so that every staging directory is removed on the
    way out (writers clean up on any exception), as Ctrl-C does with KeyboardInterrupt."""


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``msc ARGV``; returns the exit code. Without ``argv`` (the process's own command
    line) this process is the command: the work runs in a supervised child (msc.io.supervise),
    so even a fatal signal ends in one error line, and its exit is kept quiet too (unless
    ``--verbose``)."""
    from msc.errors import MscError
    from msc.io.files import deferring

    if argv is None:
        from msc.io.supervise import supervise

        code = supervise()
        if code is not None:
            return code
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_OK
    if getattr(args, "verbose", False):
        from msc.io.native import let_through

        let_through()  # TVM's logs inside msc's Relax paths too
    previous = {}
    if _main_thread():  # raised where the program is, or after the output step it is in
        for sig, make in ((signal.SIGTERM, _Terminated), (signal.SIGINT, KeyboardInterrupt)):
            previous[sig] = signal.signal(sig, deferring(make))
    try:
        with own_output(args.verbose) as (args.out, args.err):
            try:
                return int(args.func(args) or 0)
            except MscError as e:
                return _report_error(e, args.err)
            except FileNotFoundError as e:
                what = MscError(f"{e.filename or ''}: no such file or directory")
                return _report_error(what, args.err)
            except OSError as e:  # a path msc was told to read or write: permissions, ...
                where = f"{e.filename}: " if e.filename else ""
                return _report_error(MscError(f"{where}{e.strerror or e}"), args.err)
            except KeyboardInterrupt:
                args.err.write("msc: interrupted\n")
                return 130
            except _Terminated:
                args.err.write("msc: terminated\n")
                return 143
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if argv is None and not args.verbose:  # last registered: the first to run at exit
            import atexit

            atexit.register(quiet_exit)
