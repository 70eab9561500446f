"""Which opsets the codegen targets, and the IR version that goes with one.

# NOTE: the default opset is the newest one the installed onnxruntime loads, found by loading
# a one-node model at each opset from the newest ``onnx`` knows downwards (cached per process);
# a graph with ops the runtime lacks newest kernels for gets the newest opset that has them
# (``default_opset_for``);
# without onnxruntime it is the newest opset ``onnx`` knows.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import onnx
from onnx import helper

from msc.ops.custom import parse_custom

__all__ = [
    "MIN_OPSET",
    "max_opset",
    "default_opset",
    "default_opset_for",
    "ir_version_for",
    "unchanged_until",
    "choose_opset",
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


def _probe_model(opset: int, probe: str = "Identity") -> bytes:
    """A small model at ``opset``: one Identity, or the probe of an op in ``_KERNEL_PROBES``."""
    tp = onnx.TensorProto
    xt = tp.UINT8 if probe == "DequantizeLinear" else tp.FLOAT
    x = helper.make_tensor_value_info("x", xt, [1])  # a graph input: nothing constant-folds
    y = helper.make_tensor_value_info("y", tp.FLOAT, None)
    inits = [
        helper.make_tensor("s", tp.FLOAT, [], [1.0]),
    ]
    node = {
        "Identity": helper.make_node("Identity", ["x"], ["y"]),
        "QuantizeLinear": helper.make_node("QuantizeLinear", ["x", "s"], ["y"]),
        "DequantizeLinear": helper.make_node("DequantizeLinear", ["x", "s"], ["y"]),
    }[probe]
    if probe == "QuantizeLinear":
        y = helper.make_tensor_value_info("y", tp.UINT8, None)
    g = helper.make_graph([node], "probe", [x], [y], initializer=inits)
    m = helper.make_model(
        g, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version_for(opset)
    )
    return m.SerializeToString()


# Canonical op -> the ONNX op it becomes, whose newest version onnxruntime may lack a kernel
# for at an opset it otherwise loads (onnxruntime 1.32 loads opset 28 but has no
# QuantizeLinear-28 or DequantizeLinear-28 kernels).
_KERNEL_PROBES = {
    "quantize": "QuantizeLinear",
    "dequantize": "DequantizeLinear",
}


def _runs(opset: int, probe: str) -> bool:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    try:
        ort.InferenceSession(_probe_model(opset, probe), opts, providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - any failure means "not at this opset"
        return False
    return True


@functools.cache
def _newest_with_kernel(probe: str, start: int) -> int:
    for opset in range(start, MIN_OPSET - 1, -1):
        if _runs(opset, probe):
            return opset
    return start


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


def default_opset_for(ops: Iterable[str]) -> int:
    """The default opset for a graph holding the canonical ``ops``: ``default_opset()``,
    lowered to where onnxruntime has kernels for the ONNX ops some of them become, and to
    where the default-domain custom ops among them (``ai.onnx::Dropout@13``) are unchanged."""
    best = default_opset()
    for op in set(ops):
        custom = parse_custom(op)
        if custom is not None and custom.domain == "ai.onnx":
            best = max(min(best, unchanged_until(custom.name, custom.version)), MIN_OPSET)
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return best
    for op in sorted(set(ops) & _KERNEL_PROBES.keys()):
        best = min(best, _newest_with_kernel(_KERNEL_PROBES[op], best))
    return best


@functools.cache
def default_opset() -> int:
    """The newest opset the installed onnxruntime runs (or ``onnx`` knows, without it)."""
    try:
        import onnxruntime as ort
    except ImportError:
        return max_opset()
    del ort
    for opset in range(max_opset(), MIN_OPSET - 1, -1):
        if _runs(opset, "Identity"):
            return opset
    return MIN_OPSET


# torch.onnx's default opset (torch 2.9 and later): what a PyTorch user's runtime already loads.
TORCH_ONNX_DEFAULT = 20


def choose_opset(graph: Any) -> tuple[int, str]:
    """The opset to write ``graph`` at when the user did not say, and why.

    The lowest opset at which every op of the graph (subgraphs included) has its own ONNX
    operator, but not below torch.onnx's default (runtimes that load PyTorch's exports load it)
    nor above what the installed onnxruntime runs (an op newer than that is decomposed).
    """
    from codegen.onnx.registry import EMITTERS

    ops: set[str] = set()

    def collect(g: Any) -> None:
        for n in g.nodes:
            ops.add(n.op)
            for sub in n.subgraphs():
                collect(sub)

    collect(graph)
    top = default_opset_for(ops)
    floor = min(TORCH_ONNX_DEFAULT, top)
    need: dict[str, int] = {}

    def walk(g: Any) -> None:
        for n in g.nodes:
            vs = [v for v in EMITTERS.versions(n.op) if v <= top]
            if vs and min(vs) > floor:
                need[n.op] = min(vs)
            for sub in n.subgraphs():
                walk(sub)

    walk(graph)
    if not need:
        return floor, f"torch.onnx's default; every op has an ONNX operator at {floor}"
    opset = max(need.values())
    ops = sorted((op for op, v in need.items() if v == opset))
    return opset, (
        f"the lowest with an ONNX operator for {', '.join(ops)}; --opset {floor} spells "
        f"{'them' if len(ops) > 1 else 'it'} out in older operators"
    )
