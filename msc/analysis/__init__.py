"""Analysis on msc graphs, and the functions behind the ``msc`` command.

    report = msc.inspect(g_or_path, shapes={"x": (1, 3, 224, 224)})   # or {"batch": 8}
    print(report); report.to_json()
    d = msc.diff(a, b)               # structural equality, else a node-level diff
    r = msc.verify(a, b)             # same inputs, per-output errors, first divergence
    msc.render(g, "graph.svg")       # .svg / .dot / .html
    msc.convert("model.onnx", "out_dir", to="torch")
    msc.batch("models.yaml")         # many models, each in its own worker; resumable

Models may be graphs, ``Model`` objects or paths in any format ``load_model`` reads. FLOP and
MAC formulas: ``msc.analysis.cost``; peak memory: ``msc.analysis.inspect``; the diff's node
pairing: ``msc.analysis.diff``; localisation: ``msc.analysis.verify``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from msc.analysis.batch import BatchReport, batch, format_batch
from msc.analysis.convert import ConvertReport, convert
from msc.analysis.diff import DiffReport, diff_graphs, format_diff, match
from msc.analysis.inspect import InspectReport, format_report, inspect_graph
from msc.analysis.model import Model, graph_of, load_model
from msc.analysis.render import render as _render
from msc.analysis.shapes import InputShape, bind
from msc.analysis.verify import VerifyReport, format_verify, verify_models
from msc.ir.graph import Graph

__all__ = [
    "inspect",
    "diff",
    "verify",
    "render",
    "convert",
    "batch",
    "load_model",
    "Model",
    "match",
    "InspectReport",
    "DiffReport",
    "VerifyReport",
    "ConvertReport",
    "BatchReport",
]

Source = Graph | Model | str | os.PathLike

InspectReport.__str__ = lambda self: format_report(self)  # type: ignore[method-assign]
DiffReport.__str__ = lambda self: format_diff(self)  # type: ignore[method-assign]
VerifyReport.__str__ = lambda self: format_verify(self)  # type: ignore[method-assign]
BatchReport.__str__ = lambda self: format_batch(self)  # type: ignore[method-assign]


def _binding(g: Graph, shapes: Mapping[str, int | Sequence[int]] | None) -> dict[str, int]:
    specs = [
        InputShape(k, (v,) if isinstance(v, int) else tuple(v)) for k, v in (shapes or {}).items()
    ]
    return bind(g, specs)


def inspect(
    model: Source,
    shapes: Mapping[str, int | Sequence[int]] | None = None,
    *,
    trust_pickle: bool = False,
) -> InspectReport:
    """Analyse a model: inputs/outputs, ops, parameters, FLOPs/MACs, peak activation memory.

    Args:
        model: a Graph, a Model, or a path in any supported format.
        shapes: input shapes by input name (``{"x": (1, 3, 224, 224)}``) or symbol sizes
            (``{"batch": 8}``); unbound symbolic dims are reported as formulas.
        trust_pickle: allow unpickling .pt2 members (runs code the file contains).
    """
    g = graph_of(model, trust_pickle=trust_pickle)
    src = (
        model.label if isinstance(model, Model) else "" if isinstance(model, Graph) else str(model)
    )
    return inspect_graph(g, _binding(g, shapes), source=src)


def diff(a: Source, b: Source, *, trust_pickle: bool = False) -> DiffReport:
    """Structural equality of two models, else a node-level diff (matched, changed, added,
    removed)."""
    return diff_graphs(
        graph_of(a, trust_pickle=trust_pickle), graph_of(b, trust_pickle=trust_pickle)
    )


def verify(
    a: Source,
    b: Source,
    inputs: str | os.PathLike | Mapping[str, Any] | None = None,
    *,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    seed: int = 0,
    shapes: Mapping[str, int | Sequence[int]] | None = None,
    localize: bool = True,
    trust_pickle: bool = False,
) -> VerifyReport:
    """Run ``a`` and ``b`` on the same inputs and compare their outputs; on a mismatch, name
    the first node where they diverge. Graphs run through ``codegen.torch`` (through
    ``codegen.onnx`` and onnxruntime when they hold strings, sequences or optionals).

    Args:
        inputs: arrays by input name (a list of arrays for a sequence input, None for an
            empty optional), or an .npz path; None: random (seeded) inputs
            (``msc.analysis.verify.make_inputs``).
        shapes: sizes for symbolic dims of the random inputs (else 2, within range).
    """
    ma, mb = Model.of(a, trust_pickle=trust_pickle), Model.of(b, trust_pickle=trust_pickle)
    binding = _binding(ma.graph, shapes)
    return verify_models(
        ma, mb, inputs, rtol=rtol, atol=atol, seed=seed, binding=binding, localize=localize
    )


def render(model: Source, path: str | os.PathLike, *, trust_pickle: bool = False) -> Path:
    """Draw a model to ``path`` (.svg via Graphviz, .dot, or a self-contained .html)."""
    return _render(graph_of(model, trust_pickle=trust_pickle), path)
