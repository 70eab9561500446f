"""The self-contained HTML page of ``msc render`` (and of ``msc diff/verify --html``).

The page holds the graph as JSON data and a viewer written for it (``page.js``, ``page.css``
beside this file, inlined: the page needs no network). The viewer lays the graph out top-down
in the browser, one box per module call (``graphview.module_calls``), so that collapsing or
expanding a module lays it out again; it pans and zooms, shows a node's or module's details
on click (attributes with their kinds, input and output types, weights' shapes and
statistics, provenance), searches and highlights, and colours nodes by an overlay (diff:
same / changed / added / removed; verify: per-node error). Graphs over ``COLLAPSE_ABOVE``
nodes open with modules collapsed.

# NOTE: model-supplied strings travel only inside the JSON data (with ``<`` escaped, so no
# ``</script>`` can end the data block) and the viewer sets them as text, never as markup.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from msc.analysis.graphview import (
    Overlay,
    attr_rows,
    module_calls,
    node_kind,
    weight_stats,
)
from msc.ir.graph import Graph, Weight
from msc.text.printer import format_type

__all__ = ["graph_data", "to_page", "COLLAPSE_ABOVE"]

COLLAPSE_ABOVE = 150  # nodes: bigger graphs open with their modules collapsed
_HERE = Path(__file__).parent


def graph_data(g: Graph, title: str = "", overlay: Overlay | None = None) -> dict[str, Any]:
    """The viewer's data for one graph. Node ids: graph inputs ``0..I-1``, then the graph's
    nodes, then its outputs."""
    groups, root, owner = module_calls(g)
    n_in = len(g.inputs)
    n_ops = len(g.nodes)
    src: dict[int, int] = {id(v): i for i, v in enumerate(g.inputs)}
    weights: dict[int, int] = {}
    wlist: list[dict[str, Any]] = []
    nodes: list[dict[str, Any]] = []
    edges: list[list[Any]] = []
    for v in g.inputs:
        nodes.append(
            {"k": "input", "op": "input", "name": v.name, "outs": [[v.name, format_type(v.type)]]}
        )
    for i, n in enumerate(g.nodes):
        nid = n_in + i
        ins = []
        for j, v in enumerate(n.inputs):
            if v is None:
                ins.append(["_", "", None])
            elif isinstance(v, Weight):
                if id(v) not in weights:
                    weights[id(v)] = len(wlist)
                    wlist.append({"name": v.name, **weight_stats(v)})
                ins.append([v.name, format_type(v.type), {"w": weights[id(v)]}])
            else:
                s = src.get(id(v))
                ins.append([v.name, format_type(v.type), s])
                if s is not None:
                    edges.append([s, nid, format_type(v.type), j])
        p = n.provenance
        d: dict[str, Any] = {
            "k": node_kind(n) or "op",
            "op": n.op,
            "name": n.name,
            "module": p.module,
            "prov": [p.framework, p.op, p.name],
            "attrs": attr_rows(n),
            "ins": ins,
            "outs": [[v.name, format_type(v.type)] for v in n.outputs],
        }
        if overlay is not None and i in overlay.items:
            s_, text, value = overlay.items[i]
            d["ov"] = [s_, text, value]
        nodes.append(d)
        for v in n.outputs:
            src[id(v)] = nid
    for i, v in enumerate(g.outputs):
        nid = n_in + n_ops + i
        nodes.append(
            {"k": "output", "op": "output", "name": v.name, "outs": [[v.name, format_type(v.type)]]}
        )
        if id(v) in src:
            edges.append([src[id(v)], nid, format_type(v.type), 0])

    def shift(items: list[tuple[str, int]]) -> list[list[Any]]:
        return [[k, i + n_in if k == "n" else i] for k, i in items]

    root_items = [["n", i] for i in range(n_in)] + shift(root)
    root_items += [["n", n_in + n_ops + i] for i in range(len(g.outputs))]
    return {
        "title": title or g.name or "graph",
        "nodes": nodes,
        "edges": edges,
        "weights": wlist,
        "groups": [
            {
                "path": gr.path,
                "label": gr.label(groups),
                "parent": gr.parent,
                "items": shift(gr.items),
            }
            for gr in groups
        ],
        "root": root_items,
        "owner": [-1] * n_in + owner + [-1] * len(g.outputs),
        "collapsed": n_ops > COLLAPSE_ABOVE,
        "overlay": None
        if overlay is None
        else {
            "title": overlay.title,
            "legend": overlay.legend(),
            "colors": {s: Overlay.color(s) for s, _, _ in overlay.legend()},
        },
        "summary": f"{n_in} inputs, {n_ops} nodes, {len(g.weights)} weights, "
        f"{len(g.outputs)} outputs, {len(groups)} module calls",
    }


def _json(data: Any) -> str:
    text = json.dumps(data, separators=(",", ":"), allow_nan=False, default=str)
    # Inside <script>: no "</" or "<!--" can end or change the block.
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _clean(x: Any) -> Any:
    """NaN and infinities as strings (JSON has none)."""
    if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
        return str(x)
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean(v) for v in x]
    return x


def to_page(graphs: list[dict[str, Any]], title: str) -> str:
    """One self-contained page showing ``graphs`` (``graph_data`` results)."""
    js = (_HERE / "page.js").read_text(encoding="utf-8")
    css = (_HERE / "page.css").read_text(encoding="utf-8")
    data = _json(_clean({"title": title, "graphs": graphs}))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="generator" content="msc">'
        f"<title>{html.escape(title)}</title>\n<style>\n{css}</style></head>\n<body>\n"
        '<div id="bar"><b id="title"></b> <select id="graphsel"></select>'
        ' <input id="q" type="search" placeholder="search nodes: name, op, module" size="32">'
        ' <span id="hits"></span>'
        ' <button id="fit" title="fit to window">fit</button>'
        ' <button id="zin" title="zoom in">+</button><button id="zout" title="zoom out">&minus;'
        "</button>"
        ' <button id="expand">expand all</button><button id="collapse">collapse all</button>'
        ' <span id="legend"></span> <span id="summary"></span></div>\n'
        '<div id="main"><svg id="canvas" xmlns="http://www.w3.org/2000/svg"><g id="vp"></g>'
        '</svg><div id="panel"><p class="hint">Click a node or a module to inspect it; click a '
        "module's title to collapse it, a collapsed module to expand it. Drag to pan, wheel to "
        "zoom.</p></div></div>\n"
        f'<script type="application/json" id="msc-data">{data}</script>\n'
        f"<script>\n{js}</script>\n</body></html>\n"
    )
