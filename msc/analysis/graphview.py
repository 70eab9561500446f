"""What a picture of a graph needs, computed once for every viewer (the ``msc render`` page,
the Model Explorer adapter): module calls as nested groups, typed attributes, weights' stats,
and per-node overlays of diff and verify results.

Module calls: a node's module path (``layer1.0.conv1``) puts it in the nested groups
``layer1`` > ``layer1.0`` > ``layer1.0.conv1``. A group is one *call* of a module: nodes are in
execution order, and a group ends where a node outside its module comes, or where its first
child module starts again (``self.mlp(self.mlp(x))``), so a module called twice is two groups
(the frontends keep the module path, not torch.export's call index). A group of one node is
dissolved into that node, and a group whose only member is another group is merged with it.

# NOTE: nothing here interprets a model-supplied string; viewers escape what they show.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from msc.ir.attrs import infer_kind
from msc.ir.graph import Graph, Node, Weight
from msc.ops.custom import is_custom
from msc.text.printer import format_attr, format_type

__all__ = [
    "Group",
    "module_calls",
    "attr_rows",
    "weight_stats",
    "node_kind",
    "Overlay",
    "diff_overlays",
    "verify_overlays",
]

_QUANT = ("quantize", "dequantize")
_MAX_ATTR = 200  # characters of an attribute value shown before it is cut


@dataclass
class Group:
    """One call of a module: its path, parent group (-1: the graph) and ordered members,
    each ``("n", node index)`` or ``("g", group index)``."""

    path: str
    parent: int
    items: list[tuple[str, int]] = field(default_factory=list)

    def label(self, groups: list[Group]) -> str:
        """The path relative to the parent's (``0`` under ``layer1`` reads ``layer1.0``)."""
        if self.parent < 0:
            return self.path
        up = groups[self.parent].path
        rel = self.path[len(up) + 1 :] if self.path.startswith(up + ".") else self.path
        if rel[:1].isdigit():
            rel = up.rsplit(".", 1)[-1] + "." + rel
        return rel


def _prefixes(module: str) -> list[str]:
    parts = module.split(".") if module else []
    return [".".join(parts[: k + 1]) for k in range(len(parts))]


def module_calls(g: Graph) -> tuple[list[Group], list[tuple[str, int]], list[int]]:
    """The module calls of ``g`` (see the module docstring).

    Returns:
        ``(groups, root_items, group_of_node)``: every group, the graph's own members in
        order, and each node's innermost group (-1 for none).
    """
    groups: list[Group] = []
    root: list[tuple[str, int]] = []
    stack: list[int] = []
    first: dict[int, str] = {}  # group -> the path of its first child group
    closed: dict[int, set[str]] = {}  # group -> child paths whose call has ended

    def open_group(path: str) -> None:
        parent = stack[-1] if stack else -1
        groups.append(Group(path, parent))
        (groups[parent].items if parent >= 0 else root).append(("g", len(groups) - 1))
        if parent >= 0:
            first.setdefault(parent, path)
        stack.append(len(groups) - 1)

    def close_to(k: int) -> None:
        while len(stack) > k:
            gone = stack.pop()
            if stack:
                closed.setdefault(stack[-1], set()).add(groups[gone].path)

    for i, n in enumerate(g.nodes):
        prefixes = _prefixes(n.provenance.module)
        k = 0
        while k < len(stack) and k < len(prefixes) and groups[stack[k]].path == prefixes[k]:
            k += 1
        close_to(k)
        for p in prefixes[k:]:
            top = stack[-1] if stack else -1
            if top >= 0 and first.get(top) == p and p in closed.get(top, ()):
                # The first child again after it ended: the module is called again
                # (``self.mlp(self.mlp(x))``), so a new call of it starts here.
                close_to(len(stack) - 1)
                open_group(groups[top].path)
            open_group(p)
        (groups[stack[-1]].items if stack else root).append(("n", i))
    return _simplify(groups, root, len(g.nodes))


def _simplify(
    groups: list[Group], root: list[tuple[str, int]], n_nodes: int
) -> tuple[list[Group], list[tuple[str, int]], list[int]]:
    def flat(items: list[tuple[str, int]]) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        for kind, i in items:
            while kind == "g" and len(groups[i].items) == 1:
                kind, i = groups[i].items[0]  # one member: the member stands for the group
            if kind == "g":
                groups[i].items = flat(groups[i].items)
            out.append((kind, i))
        return out

    root = flat(root)
    keep: dict[int, int] = {}
    new: list[Group] = []
    owner = [-1] * n_nodes

    def renumber(items: list[tuple[str, int]], parent: int) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        for kind, i in items:
            if kind == "n":
                owner[i] = parent
                out.append(("n", i))
                continue
            keep[i] = len(new)
            g = Group(groups[i].path, parent)
            new.append(g)
            g.items = renumber(groups[i].items, keep[i])
            out.append(("g", keep[i]))
        return out

    root = renumber(root, -1)
    return new, root, owner


def node_kind(n: Node) -> str:
    """ "custom", "quant" or "" (canonical): what a viewer marks."""
    if is_custom(n.op):
        return "custom"
    if n.op in _QUANT:
        return "quant"
    return ""


def attr_rows(n: Node) -> list[tuple[str, str, str]]:
    """``(name, kind, value)`` for each attribute, sorted; big values are summarised."""
    out = []
    for k in sorted(n.attrs):
        v = n.attrs[k]
        try:
            kind = infer_kind(v).value
        except TypeError:
            kind = type(v).__name__
        if isinstance(v, Graph):
            text = f"<graph {v.name!r}: {len(v.nodes)} nodes>"
        elif isinstance(v, np.ndarray) and v.size > 16:
            text = f"tensor {v.dtype}{list(v.shape)}"
        elif isinstance(v, bytes) and len(v) > 16:
            text = f"<{len(v)} bytes>"
        else:
            text = format_attr(v)
        if len(text) > _MAX_ATTR:
            text = text[: _MAX_ATTR - 3] + "..."
        out.append((k, kind, text))
    return out


def weight_stats(w: Weight) -> dict[str, Any]:
    """Shape, role and summary statistics of a weight's values (empty when it has no data
    or its dtype has no arithmetic in numpy)."""
    info: dict[str, Any] = {"type": format_type(w.type), "role": w.role, "bytes": w.nbytes}
    if not w.has_data:
        return info
    try:
        a = np.asarray(w.numpy())
        if a.size == 0 or a.dtype.kind not in "biuf":
            return info
        x = a.astype(np.float64) if a.dtype.kind == "b" or a.dtype.itemsize < 2 else a
        info.update(
            min=float(np.min(x)),
            max=float(np.max(x)),
            mean=float(np.mean(x, dtype=np.float64)),
            std=float(np.std(x, dtype=np.float64)),
            zeros=float(np.count_nonzero(a == 0) / a.size),
        )
    except Exception:  # an exotic storage (packed sub-byte, float8): shape only
        pass
    return info


# ------------------------------------------------------------------------------ overlays
_COLORS = {
    "same": "#e8f3e8",
    "changed": "#ffd89b",
    "removed": "#f7a1a1",
    "added": "#a8e6a1",
    "ok": "#c8ecc8",
    "diverged": "#f28b82",
    "first divergence": "#d93025",
}


@dataclass
class Overlay:
    """Per-node results to draw on one graph: node index -> (status, detail, value)."""

    title: str
    items: dict[int, tuple[str, str, float | None]] = field(default_factory=dict)

    def legend(self) -> list[tuple[str, str, int]]:
        """``(status, color, count)`` for each status present."""
        counts = Counter(s for s, _, _ in self.items.values())
        return [(s, _COLORS.get(s, "#dddddd"), counts[s]) for s in _COLORS if counts[s]]

    @staticmethod
    def color(status: str) -> str:
        return _COLORS.get(status, "#dddddd")


def diff_overlays(report: Any) -> tuple[Overlay, Overlay]:
    """Overlays of a ``DiffReport`` on A (same / changed / removed) and B (same / changed /
    added)."""
    oa, ob = Overlay("diff: A"), Overlay("diff: B")
    detail = {c.a_index: "; ".join(c.changes) for c in report.changed}
    for i, s in report.node_status_a.items():
        oa.items[i] = (s, detail.get(i, ""), None)
    bdetail = {c.b_index: "; ".join(c.changes) for c in report.changed}
    for i, s in report.node_status_b.items():
        ob.items[i] = (s, bdetail.get(i, ""), None)
    return oa, ob


def verify_overlays(report: Any) -> tuple[Overlay, Overlay]:
    """Overlays of a ``VerifyReport`` on A and B: each compared node's max abs error, ok or
    diverged, and the first divergence marked."""
    oa, ob = Overlay("verify: A"), Overlay("verify: B")
    first = True
    for e in report.node_errors:
        status = "ok" if e.ok else ("first divergence" if first else "diverged")
        first = first and e.ok
        text = f"{e.name}: max abs {e.max_abs:.3g}, max rel {e.max_rel:.3g}"
        for o, i in ((oa, e.a_index), (ob, e.b_index)):
            old = o.items.get(i)
            if old is None or (old[0] == "ok" and status != "ok"):
                o.items[i] = (status, text, e.max_abs)
    return oa, ob
