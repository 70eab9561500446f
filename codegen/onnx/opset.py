"""Which opsets the codegen targets, the IR version that goes with one, and the one rule for
the opset a graph is written at when the caller does not say (``choose_opset``: the API and
the CLI alike).

# NOTE: the rule. The default opset is the newest at which every default-domain op of the
# written model has a kernel in the installed onnxruntime (CPU), checked against
# onnxruntime's kernel registry: a model that loads is not enough, since onnxruntime expands
# an op it has no kernel for through the op's function body without a word (at opset 28, ONNX
# Attention-25 became ~60 nodes in onnxruntime 1.32, which has Attention kernels for 23 and
# 24). It starts at the newest opset onnxruntime loads (``default_opset``, found once per
# process by loading a one-Identity model) and steps down to where the ops lacking a kernel
# have one, re-emitting the graph there (emitters differ by opset). An op with no kernel at
# any version (Constant, which onnxruntime folds) does not bound it. A lower opset that
# cannot express the graph stops the descent. Default-domain ops kept as custom nodes bound
# it to where they are still that op. Without onnxruntime: the newest opset onnx defines.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

import onnx
from onnx import helper

from msc.ops.custom import parse_custom

__all__ = [
    "MIN_OPSET",
    "max_opset",
    "default_opset",
    "ir_version_for",
    "unchanged_until",
    "choose_opset",
    "pick_opset",
    "has_kernel",
]

MIN_OPSET = 9  # the oldest opset the emitters target (Where, Erf, Sign, Shrink, IsNaN: 9)
_MIN_IR = 10  # nodes carry provenance in metadata_props (IR 10, onnx 1.16)


def max_opset() -> int:
    """The newest default-domain opset the installed ``onnx`` defines."""
    return onnx.defs.onnx_opset_version()


def ir_version_for(opset: int) -> int:
    """The IR version to write with ``opset``: what the opset needs, at least IR 10."""
    need = helper.find_min_ir_version_for([helper.make_opsetid("", opset)])
    return max(need, _MIN_IR)


def _probe_model(opset: int) -> bytes:
    """A one-Identity model at ``opset``."""
    tp = onnx.TensorProto
    x = helper.make_tensor_value_info("x", tp.FLOAT, [1])
    y = helper.make_tensor_value_info("y", tp.FLOAT, None)
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe", [x], [y])
    m = helper.make_model(
        g, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version_for(opset)
    )
    return m.SerializeToString()


def _runs(opset: int) -> bool:
    """Does the installed onnxruntime load a model of this opset?"""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    try:
        ort.InferenceSession(_probe_model(opset), opts, providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - any failure means "not at this opset"
        return False
    return True


@functools.cache
def unchanged_until(name: str, version: int) -> int:
    """The last opset at which default-domain op ``name`` is still the op of opset
    ``version`` (``max_opset()`` when it has not changed since, or ONNX does not know it)."""
    try:
        since = onnx.defs.get_schema(name, version, "").since_version
    except onnx.defs.SchemaError:
        return max_opset()
    for opset in range(version + 1, max_opset() + 1):
        if onnx.defs.get_schema(name, opset, "").since_version != since:
            return opset - 1
    return max_opset()


@functools.cache
def default_opset() -> int:
    """The newest opset the installed onnxruntime loads (or ``onnx`` knows, without it): the
    most ``choose_opset`` can give, not the default itself."""
    try:
        import onnxruntime as ort
    except ImportError:
        return max_opset()
    del ort
    for opset in range(max_opset(), MIN_OPSET - 1, -1):
        if _runs(opset):
            return opset
    return MIN_OPSET


_OPEN = 2**31 - 1  # the end of an onnxruntime kernel's version range with no end


@functools.cache
def _kernels() -> dict[tuple[str, str], frozenset[tuple[int, int]]] | None:
    """(domain, op) -> the version ranges of onnxruntime's CPU kernels for it; None when
    onnxruntime (or its kernel registry) is not there."""
    try:
        from onnxruntime.capi import _pybind_state as ort_c
    except ImportError:
        return None
    listing = getattr(ort_c, "get_all_opkernel_def", None)
    if listing is None:
        return None
    out: dict[tuple[str, str], set[tuple[int, int]]] = {}
    for k in listing():
        if k.provider == "CPUExecutionProvider":
            domain = "" if k.domain == "ai.onnx" else k.domain
            out.setdefault((domain, k.op_name), set()).add(tuple(k.version_range))
    return {key: frozenset(v) for key, v in out.items()}


def has_kernel(op: str, since: int, domain: str = "") -> bool | None:
    """Does onnxruntime have a CPU kernel for version ``since`` of ``op``? None when it has
    none for any version (or onnxruntime's registry is not there).

    onnxruntime takes a kernel for a node whose op version is the kernel's first version, or
    lies inside a kernel's closed range; a kernel open to later versions (the newest it has)
    serves its first version only, not a newer version of the op.
    """
    kernels = _kernels()
    ranges = None if kernels is None else kernels.get((domain, op))
    if not ranges:
        return None
    return any(lo == since or (lo < since <= hi != _OPEN) for lo, hi in ranges)


def _since(op: str, opset: int) -> int | None:
    try:
        return onnx.defs.get_schema(op, opset, "").since_version
    except onnx.defs.SchemaError:
        return None


def _newest_with_kernel(op: str, below: int) -> int | None:
    """The newest opset under ``below`` whose version of default-domain ``op`` onnxruntime
    has a kernel for."""
    for opset in range(below - 1, MIN_OPSET - 1, -1):
        since = _since(op, opset)
        if since is None:
            return None
        if has_kernel(op, since):
            return opset
    return None


def _default_nodes(nodes: Iterable[onnx.NodeProto]) -> list[onnx.NodeProto]:
    """The default-domain ones of ``nodes`` and of their subgraphs."""
    out: list[onnx.NodeProto] = []

    def walk(ns: Iterable[onnx.NodeProto]) -> None:
        for n in ns:
            if n.domain in ("", "ai.onnx"):
                out.append(n)
            for a in n.attribute:
                if a.HasField("g"):
                    walk(a.g.node)
                for sub in a.graphs:
                    walk(sub.node)

    walk(nodes)
    return out


def _lacking(nodes: Iterable[onnx.NodeProto], opset: int) -> dict[str, int]:
    """Default-domain op -> its version at ``opset``, for the ops of ``nodes`` onnxruntime
    has kernels for, but not for that version."""
    out: dict[str, int] = {}
    for n in _default_nodes(nodes):
        since = _since(n.op_type, opset)
        if since is not None and has_kernel(n.op_type, since) is False:
            out[n.op_type] = since
    return out


def _ops(graph: Any) -> set[str]:
    ops: set[str] = set()
    for n in graph.nodes:
        ops.add(n.op)
        for sub in n.subgraphs():
            ops |= _ops(sub)
    return ops


def _no_data(w: Any) -> onnx.TensorProto:
    """A weight as an external reference to nothing: a trial emission copies no bytes."""
    t = onnx.TensorProto()
    t.data_location = onnx.TensorProto.EXTERNAL
    return t


def choose_opset(graph: Any, **kwargs: Any) -> tuple[int, str]:
    """The opset to write ``graph`` at when the caller did not say, and why (the rule is in
    the module note). ``to_model``, ``save`` and ``msc convert`` all follow it.

    Args:
        graph: the msc Graph.
        **kwargs: ``emitters`` / ``decompositions`` / ``decompose`` for the trial emissions,
            as for ``ModelBuilder``.

    Raises:
        UnsupportedOpsError: the graph cannot be written at the newest opset either (the
            error writing it there gives).
    """
    from codegen.onnx.model import ModelBuilder

    kw = {k: v for k, v in kwargs.items() if k in ("emitters", "decompositions", "decompose")}
    builder = ModelBuilder(graph, None, external=_no_data, value_infos=False, **kw)
    opset, why, _ = pick_opset(graph, builder.emit_nodes, builder.sample_nodes)
    return opset, why


Emit = Callable[[int], list[onnx.NodeProto]]


def pick_opset(
    graph: Any, emit: Emit, sample: Emit | None = None
) -> tuple[int, str, list[onnx.NodeProto]]:
    """``choose_opset``'s search, with ``emit(opset)`` writing the graph's nodes at an opset
    (raising ConversionError where it cannot): (opset, why, the nodes ``emit`` wrote last,
    which are those at the chosen opset). ``sample(opset)``, one node of each op, finds
    where to start, so that the whole graph is usually written once."""
    from msc.errors import ConversionError

    top, why = default_opset(), ""
    for op in sorted(_ops(graph)):
        custom = parse_custom(op)
        if custom is not None and custom.domain == "ai.onnx":
            last = max(unchanged_until(custom.name, custom.version), MIN_OPSET)
            if last < top:
                top = last
                why = f"{custom.name}-{custom.version}, kept as written, is that op up to {last}"
    if _kernels() is None:
        how = (
            "onnxruntime does not list its kernels"
            if _has_onnxruntime()
            else f"onnxruntime is not installed; the newest opset onnx {onnx.__version__} defines"
        )
        return top, why or how, emit(top)

    import onnxruntime

    runtime = f"onnxruntime {onnxruntime.__version__}"
    missing: dict[str, int] = {}  # op -> the version first found without a kernel
    opset, best = top, 0
    while sample is not None:  # lower ``opset`` by what one node of each op shows
        lacking = _lacking(sample(opset), opset)
        for op, since in lacking.items():
            missing.setdefault(op, since)
        lower = [_newest_with_kernel(op, opset) for op in lacking]
        if not lacking or None in lower:
            break
        opset = min(lower)  # type: ignore[type-var]
    nodes: list[onnx.NodeProto] = []
    still: dict[str, int] = {}  # the same at ``best``
    while True:
        try:
            nodes = emit(opset)
        except ConversionError:
            if not best and opset == top:
                raise
            best = best or top  # a lower opset cannot express the graph: the last that could
            nodes = emit(best)
            still = _lacking(nodes, best)
            break
        best, still = opset, _lacking(nodes, opset)
        for op, since in still.items():
            missing.setdefault(op, since)
        lower = [_newest_with_kernel(op, opset) for op in still]
        if not still or None in lower:
            break
        opset = min(lower)  # type: ignore[type-var]
    if not missing:
        if why:
            return best, f"{why}; {runtime} has a kernel for every op at {best}", nodes
        why = f"the newest opset {runtime} loads, and it has a kernel for every op there"
        return best, why, nodes
    if not still:
        lacks = ", ".join(f"{op}-{v}" for op, v in sorted(missing.items()))
        why = f"{runtime} has no kernel for {lacks}; {best} is the newest opset at which it has "
        return best, why + "one for every op", nodes
    lacks = ", ".join(f"{op}-{v}" for op, v in sorted(still.items()))
    why = (
        f"{runtime} has no kernel for {lacks} here nor at an opset the graph can be written "
        "at (onnxruntime runs such an op through its function body, if it has one)"
    )
    return best, why, nodes


def _has_onnxruntime() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True
