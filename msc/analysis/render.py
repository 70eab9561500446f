"""``render``: a picture of a graph as Graphviz .dot, .svg (via the ``dot`` binary) or a
self-contained .html page.

Nodes are labelled with their op, name and output shape; weights are folded into the label of
the node that uses them; nodes sharing a module path are drawn inside one cluster per module
(nested: ``layer1`` holds ``layer1.0``), one cluster per call of a module. The .html page is an
explorer of its own (``msc.analysis.page``): one file, no network access needed to view it.

# NOTE: every model-supplied string is escaped for the output language (dot strings, XML,
# HTML); nothing from the model is ever interpreted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from msc.analysis.graphview import Overlay, module_calls
from msc.analysis.page import graph_data, to_page
from msc.errors import MscError
from msc.io import files
from msc.ir.graph import Graph, Node, Weight
from msc.text.printer import format_type

__all__ = ["to_dot", "to_svg", "to_html", "render", "have_graphviz"]

_CLUSTER_STYLE = 'style="rounded"; color="#999999"; fontsize=9;'
_MAX_W = 3  # weights listed in a node label before "+N more"


def have_graphviz() -> bool:
    return shutil.which("dot") is not None


def _q(s: str) -> str:
    """A dot double-quoted string."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _label_lines(n: Node, i: int) -> list[str]:
    lines = [n.op]
    if n.name and n.name != n.op:
        lines.append(n.name)
    ws = [v for v in n.inputs if isinstance(v, Weight)]
    for w in ws[:_MAX_W]:
        lines.append(f"@{w.name.rsplit('.', 1)[-1]}: {format_type(w.type)}")
    if len(ws) > _MAX_W:
        lines.append(f"+{len(ws) - _MAX_W} weights")
    lines += ["-> " + format_type(v.type) for v in n.outputs]
    return lines


def to_dot(g: Graph) -> str:
    """Graphviz source for ``g``."""
    out = [
        f"digraph {_q(g.name or 'graph')} {{",
        "  // generator: msc",  # what marks the file as msc's (msc.io.marker)
        "  rankdir=TB;",
        '  node [shape=box, style="rounded,filled", fillcolor="#eef3fb", fontname="Helvetica",'
        " fontsize=10];",
        '  edge [fontname="Helvetica", fontsize=8, color="#555555"];',
    ]
    src: dict[int, str] = {}
    for i, v in enumerate(g.inputs):
        key = f"in{i}"
        src[id(v)] = key
        out.append(
            f'  {key} [shape=ellipse, fillcolor="#dff0d8", '
            f"label={_q(v.name + chr(10) + format_type(v.type))}];"
        )
    # Clusters: one per module call, nested (graphview.module_calls).
    groups, root, _ = module_calls(g)
    decl = {
        i: f"  n{i} [label={_q(chr(10).join(_label_lines(n, i)))}];" for i, n in enumerate(g.nodes)
    }

    def emit(items: list[tuple[str, int]], depth: int) -> None:
        pad = "  " * depth
        for kind, i in items:
            if kind == "n":
                out.append(pad + decl[i].lstrip())
                continue
            out.append(f"{pad}subgraph cluster_{i} {{")
            out.append(f"{pad}  label={_q(groups[i].path)}; {_CLUSTER_STYLE}")
            emit(groups[i].items, depth + 1)
            out.append(f"{pad}}}")

    emit(root, 1)
    for i, n in enumerate(g.nodes):
        for v in n.inputs:
            if v is not None and id(v) in src:
                out.append(f"  {src[id(v)]} -> n{i};")
        for v in n.outputs:
            src[id(v)] = f"n{i}"
    for i, v in enumerate(g.outputs):
        key = f"out{i}"
        out.append(
            f'  {key} [shape=ellipse, fillcolor="#fbe9d0", '
            f"label={_q(v.name + chr(10) + format_type(v.type))}];"
        )
        if id(v) in src:
            out.append(f"  {src[id(v)]} -> {key};")
    out.append("}")
    return "\n".join(out) + "\n"


def to_svg(g: Graph, timeout: float = 120.0) -> str:
    """SVG laid out by Graphviz. Raises MscError when ``dot`` is not installed."""
    exe = shutil.which("dot")
    if exe is None:
        raise MscError(
            "rendering .svg needs Graphviz's `dot` program, which is not installed "
            "(apt-get install graphviz / brew install graphviz); .dot and .html work without it"
        )
    try:
        r = subprocess.run(
            [exe, "-Tsvg"], input=to_dot(g).encode(), capture_output=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        raise MscError(f"graphviz took longer than {timeout:.0f}s on this graph") from None
    if r.returncode != 0:
        raise MscError(f"graphviz failed: {r.stderr.decode(errors='replace').strip()}")
    svg = r.stdout.decode("utf-8")
    # What marks the file as msc's (msc.io.marker): after the XML declaration, which must
    # come first.
    head, nl, rest = svg.partition("\n") if svg.startswith("<?xml") else ("", "", svg)
    return head + nl + "<!-- generator: msc -->\n" + rest


def to_html(g: Graph, overlay: Overlay | None = None, title: str = "") -> str:
    """One self-contained page to explore ``g`` (see ``msc.analysis.page``), optionally with
    a per-node overlay of diff or verify results."""
    return to_page([graph_data(g, overlay=overlay)], title or g.name or "graph")


_FORMATS: Mapping[str, str] = {".dot": "dot", ".gv": "dot", ".svg": "svg", ".html": "html"}


def render(g: Graph, path: str | os.PathLike) -> Path:
    """Write ``g`` to ``path``; the format follows the suffix (.dot, .svg, .html)."""
    p = Path(path)
    kind = _FORMATS.get(p.suffix.lower())
    if kind is None:
        raise MscError(f"cannot render to {p.name!r}: use a .svg, .dot or .html file name")
    files.check_output(p, "file", kind)
    text = {"dot": to_dot, "svg": to_svg, "html": to_html}[kind](g)
    return files.write_text(p, text, kind)
