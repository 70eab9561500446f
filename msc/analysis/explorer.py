"""msc graphs as Google's Model Explorer sees graphs, and per-node results as its node data.

``to_explorer(g)`` returns the JSON Model Explorer's adapters return (``{"graphs": [...]}``;
the same fields as ``model_explorer.graph_builder``): one Model Explorer node per graph input,
node and output; namespaces are module calls (``layer1/layer1.0/conv1``; a module's second
call gets ``@1`` as torch.export spells it); attributes carry their kinds; weights appear on
the node that reads them with their types and statistics; edges carry tensor types (the
``shape`` output metadata Model Explorer can draw on edges); custom and quantization ops are
marked and coloured. A node's id is its position (``"12"``); graph inputs and outputs are
``input_0``..., ``output_0``...; a control-flow node's body is a graph of its own, linked by
``subgraphIds``.

``node_data(overlay)`` is a Model Explorer node-data file (``GraphNodeData``) for the overlay of
a diff or verify (``msc diff/verify --node-data``), keyed by the same node ids.

This module does not need Model Explorer; ``msc.explorer`` is the adapter that plugs it in.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from msc.analysis.graphview import Group, Overlay, attr_rows, module_calls, node_kind, weight_stats
from msc.ir.graph import Graph, Weight
from msc.text.printer import format_type

__all__ = ["to_explorer", "node_data", "KIND_COLORS"]

KIND_COLORS = {"custom": "#f6d5f7", "quant": "#fff3c4"}


def _kv(key: str, value: Any) -> dict[str, Any]:
    return {"key": key, "value": str(value)}


def _edge(source: str, output: int, input: int) -> dict[str, str]:
    return {
        "sourceNodeId": source,
        "sourceNodeOutputId": str(output),
        "targetNodeInputId": str(input),
    }


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _weight_text(w: Weight) -> str:
    s = weight_stats(w)
    parts = [s["type"]] + ([s["role"]] if s["role"] else [])
    if "mean" in s:
        parts.append(
            f"min {_fmt(s['min'])} max {_fmt(s['max'])} mean {_fmt(s['mean'])} "
            f"std {_fmt(s['std'])} zeros {100 * s['zeros']:.1f}%"
        )
    return ", ".join(parts)


def _namespaces(groups: list[Group], owner: list[int]) -> list[str]:
    """Each node's namespace: the labels of its module calls, outermost first; a repeated
    call of a module among its siblings gets ``@k``."""
    name: dict[int, str] = {}
    seen: Counter[tuple[int, str]] = Counter()
    for x, gr in enumerate(groups):  # parents come before children
        label = gr.label(groups).replace("/", "_")
        k = seen[(gr.parent, gr.path)]
        seen[(gr.parent, gr.path)] += 1
        own = label if k == 0 else f"{label}@{k}"
        name[x] = own if gr.parent < 0 else f"{name[gr.parent]}/{own}"
    return [name[o] if o >= 0 else "" for o in owner]


def _convert(g: Graph, gid: str, out: list[dict[str, Any]]) -> None:
    groups, _, owner = module_calls(g)
    spaces = _namespaces(groups, owner)
    nodes: list[dict[str, Any]] = []
    src: dict[int, tuple[str, int]] = {}
    for i, v in enumerate(g.inputs):
        nid = f"input_{i}"
        src[id(v)] = (nid, 0)
        nodes.append(
            {
                "id": nid,
                "label": "Input",
                "namespace": "",
                "attrs": [_kv("name", v.name), _kv("type", format_type(v.type))],
                "outputsMetadata": [_out_meta(0, v.name, format_type(v.type))],
            }
        )
    for i, n in enumerate(g.nodes):
        nid = str(i)
        p = n.provenance
        attrs = [_kv("op", n.op), _kv("name", n.name), _kv("module", p.module or "-")]
        if p.framework or p.op:
            attrs.append(_kv("source op", f"{p.framework} {p.op}".strip()))
        if p.name:
            attrs.append(_kv("source name", p.name))
        kind = node_kind(n)
        if kind:
            attrs.append(_kv("kind", "custom op" if kind == "custom" else "quantization"))
        attrs += [_kv(k, f"{text}  ({t})") for k, t, text in attr_rows(n)]
        edges, in_meta = [], []
        for j, v in enumerate(n.inputs):
            if v is None:
                continue
            if isinstance(v, Weight):
                attrs.append(_kv(f"input {j}: @{v.name}", _weight_text(v)))
                in_meta.append(
                    {
                        "id": str(j),
                        "attrs": [
                            _kv("__tensor_tag", f"@{v.name}"),
                            _kv("shape", format_type(v.type)),
                        ],
                    }
                )
                continue
            in_meta.append(
                {
                    "id": str(j),
                    "attrs": [_kv("__tensor_tag", f"%{v.name}"), _kv("shape", format_type(v.type))],
                }
            )
            if id(v) in src:
                s, k = src[id(v)]
                edges.append(_edge(s, k, j))
        subs = []
        for k, val in sorted(n.attrs.items()):
            if isinstance(val, Graph):
                sid = f"{gid}/{nid}:{k}"
                subs.append(sid)
                _convert(val, sid, out)
        node: dict[str, Any] = {
            "id": nid,
            "label": n.op,
            "namespace": spaces[i],
            "subgraphIds": subs,
            "attrs": attrs,
            "incomingEdges": edges,
            "inputsMetadata": in_meta,
            "outputsMetadata": [
                _out_meta(k, v.name, format_type(v.type)) for k, v in enumerate(n.outputs)
            ],
        }
        if kind:
            node["style"] = {
                "backgroundColor": KIND_COLORS[kind],
                "borderColor": "#7a2b8c" if kind == "custom" else "#a07a00",
                "hoveredBorderColor": "#1a56db",
            }
        nodes.append(node)
        for k, v in enumerate(n.outputs):
            src[id(v)] = (nid, k)
    for i, v in enumerate(g.outputs):
        edges = []
        if id(v) in src:
            s, k = src[id(v)]
            edges.append(_edge(s, k, 0))
        nodes.append(
            {
                "id": f"output_{i}",
                "label": "Output",
                "namespace": "",
                "attrs": [_kv("name", v.name), _kv("type", format_type(v.type))],
                "incomingEdges": edges,
            }
        )
    group_attrs = {
        "/".join(spaces[i].split("/")[: d + 1]): {}
        for i in range(len(g.nodes))
        for d in range(spaces[i].count("/") + 1)
        if spaces[i]
    }
    counts = Counter(s for s in spaces if s)
    for ns in group_attrs:
        group_attrs[ns] = {
            "nodes": str(sum(c for s, c in counts.items() if s == ns or s.startswith(ns + "/")))
        }
    group_attrs[""] = {
        "graph": g.name or gid,
        "inputs": str(len(g.inputs)),
        "nodes": str(len(g.nodes)),
        "weights": str(len(g.weights)),
        "outputs": str(len(g.outputs)),
    }
    out.append({"id": gid, "nodes": nodes, "groupNodeAttributes": group_attrs})


def _out_meta(k: int, name: str | None, type_text: str) -> dict[str, Any]:
    return {
        "id": str(k),
        "attrs": [
            _kv("tensor_name", name),
            _kv("__tensor_tag", f"%{name}"),
            _kv("shape", type_text),
        ],
    }


def to_explorer(g: Graph, graph_id: str = "") -> dict[str, Any]:
    """Model Explorer's JSON for ``g`` (``{"graphs": [main graph, subgraphs...]}``)."""
    out: list[dict[str, Any]] = []
    gid = graph_id or g.name or "graph"
    _convert(g, gid, out)
    out.sort(key=lambda x: x["id"] != gid)  # the main graph first, then the bodies
    return {"graphs": out}


def node_data(overlay: Overlay) -> dict[str, Any]:
    """A Model Explorer node-data file (GraphNodeData) for ``overlay``: numeric values (the
    per-node max abs error of verify) keep their number, status values (diff) are labels; the
    colour is the status's either way."""
    results: dict[str, Any] = {}
    for i, (status, _text, value) in sorted(overlay.items.items()):
        results[str(i)] = {
            "value": value if value is not None and math.isfinite(value) else status,
            "bgColor": Overlay.color(status),
        }
    # "generator" marks the file as msc's (msc.io.marker); Model Explorer reads the others.
    return {"generator": "msc", "name": overlay.title, "results": results}
