"""``render``: a picture of a graph as Graphviz .dot, .svg (via the ``dot`` binary) or a
self-contained .html page.

Nodes are labelled with their op, name and output shape; weights are folded into the label of
the node that uses them; nodes sharing a module path are drawn inside one cluster per module
(nested: ``layer1`` holds ``layer1.0``). The .html page embeds the SVG (Graphviz's layout when
``dot`` is installed, else a built-in layered layout) and a searchable node table: one file,
no network access needed to view it.

# NOTE: every model-supplied string is escaped for the output language (dot strings, XML,
# HTML); nothing from the model is ever interpreted.
"""

from __future__ import annotations

import html
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from msc.errors import MscError
from msc.io import files
from msc.ir.graph import Graph, Node, Weight
from msc.text.printer import format_type

__all__ = ["to_dot", "to_svg", "to_html", "render", "have_graphviz"]

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


def _module_tree(g: Graph) -> dict[str, list[int]]:
    by_mod: dict[str, list[int]] = {}
    for i, n in enumerate(g.nodes):
        if n.provenance.module:
            by_mod.setdefault(n.provenance.module, []).append(i)
    return by_mod


def to_dot(g: Graph) -> str:
    """Graphviz source for ``g``."""
    out = [
        f"digraph {_q(g.name or 'graph')} {{",
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
    # Clusters: one per module path prefix, nested by dots.
    by_mod = _module_tree(g)
    paths: set[str] = set()
    for m in by_mod:
        parts = m.split(".")
        paths.update(".".join(parts[: k + 1]) for k in range(len(parts)))
    children: dict[str, list[str]] = {}
    for p in sorted(paths):
        parent = p.rsplit(".", 1)[0] if "." in p else ""
        while parent and parent not in paths:
            parent = parent.rsplit(".", 1)[0] if "." in parent else ""
        children.setdefault(parent, []).append(p)
    decl = {
        i: f"  n{i} [label={_q(chr(10).join(_label_lines(n, i)))}];" for i, n in enumerate(g.nodes)
    }
    placed: set[int] = set()
    ids = {p: k for k, p in enumerate(sorted(paths))}

    def emit(p: str, depth: int) -> None:
        kids = children.get(p, [])
        if not by_mod.get(p) and len(kids) == 1:  # a cluster holding one cluster: skip a level
            emit(kids[0], depth)
            return
        pad = "  " * depth
        out.append(f"{pad}subgraph cluster_{ids[p]} {{")
        out.append(f'{pad}  label={_q(p)}; style="rounded"; color="#999999"; fontsize=9;')
        for i in by_mod.get(p, []):
            out.append(pad + decl[i])
            placed.add(i)
        for c in children.get(p, []):
            emit(c, depth + 1)
        out.append(f"{pad}}}")

    for p in children.get("", []):
        emit(p, 1)
    for i in range(len(g.nodes)):
        if i not in placed:
            out.append(decl[i])
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
    return r.stdout.decode("utf-8")


def _builtin_svg(g: Graph) -> str:
    """A layered layout without Graphviz: a node's row is its longest path from the inputs."""
    row: dict[int, int] = {}
    level: dict[int, int] = {id(v): 0 for v in g.inputs}
    for i, n in enumerate(g.nodes):
        r = 1 + max((level.get(id(v), 0) for v in n.inputs if v is not None), default=0)
        row[i] = r
        for v in n.outputs:
            level[id(v)] = r
    rows: dict[int, list[tuple[str, list[str]]]] = {}
    pos: dict[str, tuple[int, int]] = {}
    items: list[tuple[str, int, list[str]]] = [
        (f"in{i}", 0, [v.name, format_type(v.type)]) for i, v in enumerate(g.inputs)
    ]
    items += [(f"n{i}", row[i], _label_lines(n, i)) for i, n in enumerate(g.nodes)]
    last = max(row.values(), default=0) + 1
    items += [(f"out{i}", last, [v.name, format_type(v.type)]) for i, v in enumerate(g.outputs)]
    for key, r, lines in items:
        rows.setdefault(r, []).append((key, lines))
    bw, gap, lh = 220, 30, 13
    heights = {r: max(len(ls) for _, ls in its) * lh + 12 for r, its in rows.items()}
    width = max(len(its) for its in rows.values()) * (bw + gap) + gap
    y = gap
    body: list[str] = []
    boxes: list[str] = []
    for r in sorted(rows):
        its = rows[r]
        x0 = (width - len(its) * (bw + gap) + gap) // 2
        for k, (key, lines) in enumerate(its):
            x = x0 + k * (bw + gap)
            h = heights[r]
            pos[key] = (x + bw // 2, y, y + h)  # type: ignore[assignment]
            fill = (
                "#dff0d8"
                if key.startswith("in")
                else "#fbe9d0"
                if key.startswith("out")
                else "#eef3fb"
            )
            boxes.append(
                f"<g><title>{html.escape(chr(10).join(lines))}</title>"
                f'<rect x="{x}" y="{y}" width="{bw}" height="{h}" rx="6" fill="{fill}" '
                f'stroke="#444"/>'
                + "".join(
                    f'<text x="{x + bw // 2}" y="{y + 14 + j * lh}" text-anchor="middle" '
                    f'font-family="Helvetica" font-size="{11 if j == 0 else 9}">'
                    f"{html.escape(s if len(s) <= 34 else s[:31] + '...')}</text>"
                    for j, s in enumerate(lines)
                )
                + "</g>"
            )
        y += heights[r] + gap
    src: dict[int, str] = {id(v): f"in{i}" for i, v in enumerate(g.inputs)}
    edges: list[tuple[str, str]] = []
    for i, n in enumerate(g.nodes):
        edges += [(src[id(v)], f"n{i}") for v in n.inputs if v is not None and id(v) in src]
        for v in n.outputs:
            src[id(v)] = f"n{i}"
    edges += [(src[id(v)], f"out{i}") for i, v in enumerate(g.outputs) if id(v) in src]
    for a, b in edges:
        xa, _, ya = pos[a]  # type: ignore[misc]
        xb, yb, _ = pos[b]  # type: ignore[misc]
        body.append(
            f'<line x1="{xa}" y1="{ya}" x2="{xb}" y2="{yb}" stroke="#777" '
            f'marker-end="url(#arrow)"/>'
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y}" '
        f'viewBox="0 0 {width} {y}"><defs><marker id="arrow" viewBox="0 0 10 10" refX="10" '
        'refY="5" markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0L10,5L0,10z" '
        f'fill="#777"/></marker></defs>{"".join(body)}{"".join(boxes)}</svg>'
    )


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: Helvetica, Arial, sans-serif; margin: 1em; }}
#graph {{ overflow: auto; border: 1px solid #ccc; max-height: 75vh; }}
table {{ border-collapse: collapse; font-size: 12px; margin-top: 1em; }}
td, th {{ border: 1px solid #ddd; padding: 2px 6px; text-align: left; }}
tr.hide {{ display: none; }}
</style></head><body>
<h2>{title}</h2>
<p>{summary}</p>
<div id="graph">{svg}</div>
<p><input id="q" placeholder="filter nodes by name, op or module" size="50"></p>
<table><thead><tr><th>#</th><th>node</th><th>op</th><th>module</th><th>source op</th>
<th>inputs</th><th>outputs</th></tr></thead><tbody id="rows">
{rows}
</tbody></table>
<script>
document.getElementById("q").addEventListener("input", function (e) {{
  var q = e.target.value.toLowerCase();
  document.querySelectorAll("#rows tr").forEach(function (r) {{
    r.className = r.textContent.toLowerCase().indexOf(q) < 0 ? "hide" : "";
  }});
}});
</script>
</body></html>
"""


def to_html(g: Graph) -> str:
    """One self-contained page: the drawing and a filterable node table."""
    svg = to_svg(g) if have_graphviz() else _builtin_svg(g)
    if svg.startswith("<?xml"):
        svg = svg[svg.index("<svg") :]
    e = html.escape
    rows = []
    for i, n in enumerate(g.nodes):
        ins = ", ".join(
            "_" if v is None else e(("@" if isinstance(v, Weight) else "%") + v.name)
            for v in n.inputs
        )
        outs = ", ".join(e(f"%{v.name}: {format_type(v.type)}") for v in n.outputs)
        rows.append(
            f"<tr><td>{i}</td><td>{e(n.name)}</td><td>{e(n.op)}</td>"
            f"<td>{e(n.provenance.module)}</td><td>{e(n.provenance.op)}</td>"
            f"<td>{ins}</td><td>{outs}</td></tr>"
        )
    summary = (
        f"{len(g.inputs)} inputs, {len(g.nodes)} nodes, {len(g.weights)} weights, "
        f"{len(g.outputs)} outputs"
    )
    return _PAGE.format(
        title=e(g.name or "graph"), summary=e(summary), svg=svg, rows="\n".join(rows)
    )


_FORMATS: Mapping[str, str] = {".dot": "dot", ".gv": "dot", ".svg": "svg", ".html": "html"}


def render(g: Graph, path: str | os.PathLike) -> Path:
    """Write ``g`` to ``path``; the format follows the suffix (.dot, .svg, .html)."""
    p = Path(path)
    kind = _FORMATS.get(p.suffix.lower())
    if kind is None:
        raise MscError(f"cannot render to {p.name!r}: use a .svg, .dot or .html file name")
    files.check_output(p, "file")
    text = {"dot": to_dot, "svg": to_svg, "html": to_html}[kind](g)
    return files.write_text(p, text)
