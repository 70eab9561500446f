"""``inspect``: what a graph takes and gives, what it is made of, and what it costs.

Reports inputs and outputs (dtypes, symbolic shapes), an op histogram, parameters by dtype,
FLOPs and MACs per node and in total (formulas in ``msc.analysis.cost``), a peak activation
memory estimate, and ops a codegen cannot emit.

Peak activation memory walks the nodes in topological order. A value is live from the step
that produces it (graph inputs: from the start) to its last use (graph outputs: to the end).
At each node the live set is every value still needed plus the node's outputs; the estimate is
the largest such set in bytes. Weights are not activations (they are counted as parameters).
With symbolic dims the step is chosen at each symbol's upper bound (1024 when unbounded) and
the bytes of that step are reported as a formula.

# NOTE: the report is plain data (``InspectReport.to_json()`` is what ``--json`` prints); the
# text rendering is one function of it, so scripts and people see the same numbers.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from msc.analysis.cost import node_cost
from msc.analysis.shapes import specialize, symbols
from msc.analysis.symbolic import Poly, human, nbytes
from msc.ir.graph import Graph, Value
from msc.ir.types import tensor_of
from msc.ir.validate import non_numeric_values
from msc.ops.custom import is_custom
from msc.text.printer import format_type

__all__ = ["InspectReport", "inspect_graph", "format_report", "target_support"]

_UNBOUNDED = 1024


@dataclass
class NodeInfo:
    index: int
    name: str
    op: str
    module: str
    source_op: str
    outputs: list[str]
    flops: Poly | None
    macs: Poly | None
    counted: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "op": self.op,
            "module": self.module,
            "source_op": self.source_op,
            "outputs": self.outputs,
            "flops": _pj(self.flops),
            "macs": _pj(self.macs),
            "counted": self.counted,
        }


@dataclass
class InspectReport:
    """Everything ``msc inspect`` shows, as data."""

    name: str
    source: str
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    symbols: dict[str, dict[str, int | None]]
    binding: dict[str, int]
    op_histogram: dict[str, int]
    num_nodes: int
    params: int
    param_bytes: int
    params_by_dtype: dict[str, dict[str, int]]
    nodes: list[NodeInfo]
    flops: Poly | None
    macs: Poly | None
    not_counted: dict[str, int]
    peak_memory: Poly | None
    peak_at: str
    peak_is_lower_bound: bool
    unsupported: dict[str, list[str]] = field(default_factory=dict)
    # Ops outside the canonical vocabulary (domain::name@version -> count), listed apart.
    custom_ops: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "symbols": self.symbols,
            "binding": self.binding,
            "op_histogram": self.op_histogram,
            "num_nodes": self.num_nodes,
            "params": self.params,
            "param_bytes": self.param_bytes,
            "params_by_dtype": self.params_by_dtype,
            "flops": _pj(self.flops),
            "macs": _pj(self.macs),
            "not_counted": self.not_counted,
            "peak_activation_bytes": _pj(self.peak_memory),
            "peak_at": self.peak_at,
            "peak_is_lower_bound": self.peak_is_lower_bound,
            "unsupported": self.unsupported,
            "custom_ops": self.custom_ops,
            "nodes": [n.to_json() for n in self.nodes],
        }


def _pj(p: Poly | None) -> int | str | None:
    return None if p is None else p.json()


def _io(v: Value) -> dict[str, Any]:
    t = tensor_of(v.type)  # a sequence's or optional's element: its dtype, no shape
    return {
        "name": v.name,
        "dtype": t.dtype.short,
        "shape": None
        if t.shape is None or t is not v.type
        else [d if d is None or isinstance(d, int) else d.name for d in t.shape],
        "type": format_type(v.type),
    }


# Each codegen's emitter registry (``codegen.<target>.EMITTERS``), and whether it writes a
# custom node (an op outside the canonical set) as it came: ONNX keeps its domain; PyTorch
# calls it only when it is a registered torch.library op, which inspect cannot know.
_CODEGENS = (("torch", False), ("onnx", True), ("relax", False))


def target_support(g: Graph) -> dict[str, list[str]]:
    """Ops of ``g`` each installed codegen can neither emit nor lower through a registered
    decomposition, by target (an empty list: every op). Codegens that do not import (Relax
    without apache-tvm) are left out. (A decomposition may still refuse a particular node;
    convert reports that.)"""
    from msc.ops.custom import is_custom
    from msc.ops.decompose import registry as decompositions

    ops = sorted({n.op for n in _walk(g)})
    out: dict[str, list[str]] = {}
    for target, keeps_custom in _CODEGENS:
        reg = _emitted_ops(target)
        if reg is None:
            continue
        out[target] = [
            op
            for op in ops
            if op not in reg and op not in decompositions and not (keeps_custom and is_custom(op))
        ]
    if "torch" in out and (held := non_numeric_values(g)):  # torch has no tensors for them
        out["torch"].insert(0, f"{len(held)} str, sequence or optional value(s)")
    return out


def _emitted_ops(target: str):
    """The ops ``codegen.<target>`` emits, or None when it is not usable here. Relax's list is
    read from ``codegen/relax/ops.txt`` (kept equal to its registry by a test) while TVM is not
    imported yet: importing TVM costs seconds of CPU that an inspect would spend for one list."""
    if target == "relax" and "tvm" not in sys.modules:
        if importlib.util.find_spec("tvm") is None:
            return None
        import codegen

        listed = Path(codegen.__file__).parent / "relax" / "ops.txt"
        return frozenset(listed.read_text().split())
    try:
        return importlib.import_module(f"codegen.{target}").EMITTERS
    except Exception:  # noqa: BLE001 - a codegen that fails to import is not reported
        return None


def _by_count(item: tuple[str, int]) -> int:
    return -item[1]


def _walk(g: Graph):
    for n in g.nodes:
        yield n
        for sub in n.subgraphs():
            yield from _walk(sub)


def _peak(g: Graph, scale: Mapping[str, int]) -> tuple[Poly | None, str, bool]:
    """Peak live activation bytes, the node where it happens, and whether unknown dims made it
    a lower bound."""
    last: dict[int, int] = {}
    end = len(g.nodes)
    for i, n in enumerate(g.nodes):
        for v in n.inputs:
            if v is not None:
                last[id(v)] = i
    for v in g.outputs:
        last[id(v)] = end
    live: dict[int, Poly] = {}
    lower = False

    def size(v: Value) -> Poly:
        nonlocal lower
        b = nbytes(v.type)
        if b is None:
            lower = True
            return Poly()
        return b

    for v in g.inputs:
        live[id(v)] = size(v)
    best, best_at, best_val = Poly(), "(inputs)", -1
    total = sum(live.values(), Poly())
    best, best_val = total, total.evaluate(scale, _UNBOUNDED)
    for i, n in enumerate(g.nodes):
        for v in n.outputs:
            live[id(v)] = size(v)
        total = sum(live.values(), Poly())
        val = total.evaluate(scale, _UNBOUNDED)
        if val > best_val:
            best, best_val, best_at = total, val, n.name or f"#{i} {n.op}"
        for v in list(n.inputs) + list(n.outputs):
            if v is not None and id(v) in live and last.get(id(v), i) <= i:
                del live[id(v)]
    return best, best_at, lower


def inspect_graph(
    g: Graph, binding: Mapping[str, int] | None = None, source: str = ""
) -> InspectReport:
    """Analyse ``g``; with ``binding`` (symbol -> size) counts are numbers, else formulas."""
    binding = dict(binding or {})
    syms = symbols(g)
    sg = specialize(g, binding)
    nodes: list[NodeInfo] = []
    flops: Poly | None = Poly()
    macs: Poly | None = Poly()
    not_counted: Counter[str] = Counter()
    for i, n in enumerate(sg.nodes):
        c = node_cost(n)
        if c is None:
            not_counted[n.op] += 1
        elif c.flops is None or c.macs is None:
            flops = macs = None
        elif flops is not None and macs is not None:
            flops, macs = flops + c.flops, macs + c.macs
        nodes.append(
            NodeInfo(
                index=i,
                name=n.name,
                op=n.op,
                module=n.provenance.module,
                source_op=n.provenance.op,
                outputs=[format_type(v.type) for v in n.outputs],
                flops=None if c is None else c.flops,
                macs=None if c is None else c.macs,
                counted=c is not None,
            )
        )
    if flops is not None:
        flops, macs = flops.subs(binding), macs.subs(binding)  # type: ignore[union-attr]
    by_dtype: dict[str, dict[str, int]] = {}
    params = pbytes = 0
    for w in g.weights.values():
        n = w.type.numel() or 0
        # As stored: int4 two to a byte; str as its UTF-8 bytes.
        b = w.nbytes if w.type.dtype.is_string else -(-n * w.type.dtype.bits // 8)
        d = by_dtype.setdefault(w.type.dtype.short, {"count": 0, "bytes": 0, "tensors": 0})
        d["count"] += n
        d["bytes"] += b
        d["tensors"] += 1
        params += n
        pbytes += b
    scale = {s.name: (s.max if s.max is not None else _UNBOUNDED) for s in syms.values()}
    scale.update(binding)
    peak, peak_at, lower = _peak(sg, scale)
    return InspectReport(
        name=g.name,
        source=source,
        inputs=[_io(v) for v in g.inputs],
        outputs=[_io(v) for v in g.outputs],
        symbols={s.name: {"min": s.min, "max": s.max} for s in syms.values()},
        binding=binding,
        op_histogram=dict(
            sorted(Counter(n.op for n in g.nodes if not is_custom(n.op)).items(), key=_by_count)
        ),
        custom_ops=dict(
            sorted(Counter(n.op for n in _walk(g) if is_custom(n.op)).items(), key=_by_count)
        ),
        num_nodes=len(g.nodes),
        params=params,
        param_bytes=pbytes,
        params_by_dtype=by_dtype,
        nodes=nodes,
        flops=flops,
        macs=macs,
        not_counted=dict(not_counted),
        peak_memory=None if peak is None else peak.subs(binding),
        peak_at=peak_at,
        peak_is_lower_bound=lower,
        unsupported=target_support(g),
    )


def _count(p: Poly | None, unit: str = "", exact: bool = True) -> str:
    """A count for people: ``484K (484,008)``; a formula exact, with a rounded reading."""
    if p is None:
        return "unknown (a dim is unknown; bind it with --input-shape)" if exact else "?"
    if p.is_constant:
        n = p.constant()
        if exact and n >= 1000 and unit != "B":
            return f"{human(n, unit)} ({n:,})"
        return human(n, unit)
    s = p.format() + (" bytes" if unit == "B" else "")
    rounded = p.format(human_units=True, unit=unit)
    if exact and rounded != p.format():
        s += f" (~{rounded})"
    return s if exact else rounded


def _range(lo: int | None, hi: int | None) -> str:
    if lo is None and hi is None:
        return "(no range)"
    return f"{'' if lo is None else lo}..{'' if hi is None else hi}"


def _table(rows: list[list[str]], indent: str = "  ") -> list[str]:
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def format_report(r: InspectReport, top: int = 15) -> str:
    """The text ``msc inspect`` prints: sections of aligned columns."""
    lines: list[str] = []
    title = f"{r.name or '(unnamed graph)'}"
    if r.source:
        title += f"  ({r.source})"
    lines.append(title)
    lines.append(f"  {r.num_nodes} nodes, {len(r.op_histogram)} op kinds")
    if r.binding:
        lines.append("  bound: " + ", ".join(f"{k}={v}" for k, v in r.binding.items()))
    lines.append("inputs")
    lines += _table([[i["name"], i["type"]] for i in r.inputs])
    lines.append("outputs")
    lines += _table([[o["name"], o["type"]] for o in r.outputs])
    if r.symbols:
        lines.append("symbols")
        lines += _table(
            [
                [
                    k,
                    _range(v["min"], v["max"]),
                ]
                for k, v in r.symbols.items()
            ]
        )
    lines.append("ops")
    hist = [f"{op} x{k}" for op, k in r.op_histogram.items()]
    for i in range(0, len(hist), 6):
        lines.append("  " + "  ".join(hist[i : i + 6]))
    if r.custom_ops:
        lines.append("custom ops (outside msc's vocabulary, kept as the source wrote them)")
        lines += _table([[op, f"x{k}"] for op, k in r.custom_ops.items()])
    lines.append(f"parameters  {human(r.params)} ({r.params:,}), {human(r.param_bytes, 'B')}")
    lines += _table(
        [
            [dt, f"{d['count']:,}", human(d["bytes"], "B"), f"{d['tensors']} tensors"]
            for dt, d in r.params_by_dtype.items()
        ]
    )
    lines.append("compute")
    lines.append(f"  FLOPs  {_count(r.flops)}")
    lines.append(f"  MACs   {_count(r.macs)}")
    if r.not_counted:
        lines.append(
            "  not counted (no formula): "
            + ", ".join(f"{op} x{k}" for op, k in sorted(r.not_counted.items()))
        )
    peak = _count(r.peak_memory, "B")
    lower = " (lower bound: some sizes unknown)" if r.peak_is_lower_bound else ""
    lines.append(f"peak activation memory  {peak} at {r.peak_at}{lower}")
    counted = [n for n in r.nodes if n.flops is not None and n.flops]
    if counted:
        scale = {k: (v["max"] or _UNBOUNDED) for k, v in r.symbols.items()}
        ranked = sorted(counted, key=lambda n: -n.flops.evaluate(scale, _UNBOUNDED))  # type: ignore[union-attr]
        shown = ranked if top <= 0 else ranked[:top]
        note = "" if len(shown) == len(ranked) else f", top {len(shown)} of {len(ranked)}"
        lines.append(f"nodes by FLOPs{note}")
        rows = [["node", "op", "module", "output", "MACs", "FLOPs"]]
        for n in shown:
            rows.append(
                [
                    n.name or f"#{n.index}",
                    n.op,
                    n.module or "-",
                    ", ".join(n.outputs),
                    _count(n.macs, exact=False) if n.macs else "0",
                    _count(n.flops, exact=False),
                ]
            )
        lines += _table(rows)
    if r.unsupported:
        lines.append("codegen support")
        for target, missing in r.unsupported.items():
            lines.append(
                f"  {target}: " + ("every op" if not missing else "missing " + ", ".join(missing))
            )
    return "\n".join(lines) + "\n"
