"""The adapter class Model Explorer loads (``--extensions=msc.explorer`` imports this module).

# NOTE: a model file is untrusted input: .onnx, .pt2, saved msc graphs, TVMScript .py files and
# codegen.relax directories load without running anything they contain (a TVMScript file
# outside the subset msc reads is refused; the adapter never trusts code); a generated PyTorch
# directory's model.py is code and runs, as the ``msc`` command documents.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from model_explorer import Adapter, AdapterMetadata, graph_builder

from msc.analysis.explorer import to_explorer
from msc.analysis.model import load_model

__all__ = ["MscAdapter", "model_source", "to_graphs"]


def model_source(path: str) -> str:
    """What ``load_model`` should read for a path Model Explorer hands over: a ``graph.msc``
    or ``model.py`` inside a saved directory stands for the directory."""
    p = Path(path)
    if p.name == "graph.msc" and (p.parent / "weights.safetensors").exists():
        return str(p.parent)
    if p.suffix == ".py" and (p.parent / "model.safetensors").exists():
        return str(p.parent)
    return str(p)


def _kvs(items: list[dict[str, Any]]) -> list[graph_builder.KeyValue]:
    return [graph_builder.KeyValue(key=x["key"], value=x["value"]) for x in items]


def _meta(items: list[dict[str, Any]]) -> list[graph_builder.MetadataItem]:
    return [graph_builder.MetadataItem(id=m["id"], attrs=_kvs(m["attrs"])) for m in items]


def to_graphs(data: dict[str, Any]) -> list[graph_builder.Graph]:
    """``to_explorer``'s JSON as Model Explorer's graph_builder objects."""
    graphs = []
    for gd in data["graphs"]:
        nodes = []
        for n in gd["nodes"]:
            style = n.get("style")
            nodes.append(
                graph_builder.GraphNode(
                    id=n["id"],
                    label=n["label"],
                    namespace=n.get("namespace", ""),
                    subgraphIds=list(n.get("subgraphIds", [])),
                    attrs=_kvs(n.get("attrs", [])),
                    incomingEdges=[
                        graph_builder.IncomingEdge(**e) for e in n.get("incomingEdges", [])
                    ],
                    outputsMetadata=_meta(n.get("outputsMetadata", [])),
                    inputsMetadata=_meta(n.get("inputsMetadata", [])),
                    style=graph_builder.GraphNodeStyle(**style) if style else None,
                )
            )
        graphs.append(
            graph_builder.Graph(
                id=gd["id"], nodes=nodes, groupNodeAttributes=gd.get("groupNodeAttributes")
            )
        )
    return graphs


class MscAdapter(Adapter):
    """Any model msc reads, as msc's graph."""

    metadata = AdapterMetadata(
        id="msc",
        name="msc adapter",
        description="Models msc reads (.onnx, .pt2, saved msc graphs, generated PyTorch, "
        "codegen.relax directories and TVMScript files), "
        "shown as msc's framework-neutral graph with module namespaces.",
        source_repo="",
        fileExts=["onnx", "pt2", "msc", "py"],
    )

    def __init__(self) -> None:
        super().__init__()

    def convert(self, model_path: str, settings: dict) -> dict[str, Any]:
        m = load_model(model_source(model_path))
        name = Path(m.path).name or "graph"
        return {"graphs": to_graphs(to_explorer(m.graph, graph_id=name))}
