"""Clean-ups on the written records before they become bytes: transposes that undo each
other are removed (an emitter's NHWC -> NCHW followed by the next one's NCHW -> NHWC), chains
of transposes become one, and tensors and buffers no operator or output uses are dropped.

# NOTE: invariants
# - Only TRANSPOSE operators with a constant permutation are touched; every other operator is
#   kept as written, its tensors renumbered.
# - A subgraph output keeps its tensor (and name): a transpose producing one is not removed.
"""

from __future__ import annotations

import numpy as np

from codegen.tflite import flatbuf

__all__ = ["simplify", "count_ops"]


def _perm(model: flatbuf.Model, sg: flatbuf.Subgraph, op: flatbuf.Op) -> list[int] | None:
    if op.op != "TRANSPOSE" or op.custom or len(op.inputs) != 2:
        return None
    t = sg.tensors[op.inputs[1]]
    if t.buffer <= 0:
        return None
    data = model.buffers[t.buffer]
    arr = np.frombuffer(memoryview(np.ascontiguousarray(data)).cast("B"), "<i4")
    return [int(v) for v in arr]


def _cancel_transposes(model: flatbuf.Model, sg: flatbuf.Subgraph) -> bool:
    producer = {o: k for k, op in enumerate(sg.ops) for o in op.outputs}
    uses: dict[int, int] = {}
    for op in sg.ops:
        for i in op.inputs:
            uses[i] = uses.get(i, 0) + 1
    outputs = set(sg.outputs)
    changed = False
    for op in sg.ops:
        q = _perm(model, sg, op)
        if q is None:
            continue
        src = op.inputs[0]
        k = producer.get(src)
        if k is None:
            continue
        first = sg.ops[k]
        p = _perm(model, sg, first)
        if p is None or len(p) != len(q):
            continue
        composed = [p[i] for i in q]
        if composed == list(range(len(q))) and op.outputs[0] not in outputs:
            # the pair is the identity: readers of op's output read first's input instead
            orig = first.inputs[0]
            for other in sg.ops:
                other.inputs = [orig if i == op.outputs[0] else i for i in other.inputs]
            op.inputs = [orig, op.inputs[1]]
            changed = True
        elif uses.get(src, 0) == 1:
            # a chain: one transpose by the composed permutation
            op.inputs = [first.inputs[0], _perm_tensor(model, sg, composed)]
            changed = True
    return changed


def _perm_tensor(model: flatbuf.Model, sg: flatbuf.Subgraph, perm: list[int]) -> int:
    data = np.asarray(perm, np.int32)
    model.buffers.append(data)
    sg.tensors.append(flatbuf.Tensor("perm", 2, [len(perm)], len(model.buffers) - 1))
    return len(sg.tensors) - 1


def _dead(sg: flatbuf.Subgraph) -> bool:
    """Drop operators whose outputs nothing reads (builtin ops without side effects)."""
    live = set(sg.outputs)
    keep = []
    for op in reversed(sg.ops):
        if op.custom or any(o in live for o in op.outputs) or op.op in _EFFECTS:
            keep.append(op)
            live.update(i for i in op.inputs if i >= 0)
    changed = len(keep) != len(sg.ops)
    sg.ops = list(reversed(keep))
    return changed


_EFFECTS = {"ASSIGN_VARIABLE", "CALL_ONCE", "WHILE", "IF", "CALL"}


def _compact(model: flatbuf.Model) -> None:
    """Renumber tensors to those used, and buffers to those tensors name (0 stays empty)."""
    used_buffers = {0}
    for sg in model.subgraphs:
        used = set(sg.inputs) | set(sg.outputs)
        for op in sg.ops:
            used.update(i for i in [*op.inputs, *op.outputs] if i >= 0)
        order = sorted(used)
        remap = {old: new for new, old in enumerate(order)}
        sg.tensors = [sg.tensors[i] for i in order]
        sg.inputs = [remap[i] for i in sg.inputs]
        sg.outputs = [remap[i] for i in sg.outputs]
        for op in sg.ops:
            op.inputs = [remap[i] if i >= 0 else -1 for i in op.inputs]
            op.outputs = [remap[i] for i in op.outputs]
        for s in model.signatures:
            if model.subgraphs[s.subgraph] is sg:
                s.inputs = [(n, remap[i]) for n, i in s.inputs]
                s.outputs = [(n, remap[i]) for n, i in s.outputs]
        used_buffers.update(t.buffer for t in sg.tensors)
    used_buffers.update(model.metadata.values())  # metadata entries name their buffers
    order = sorted(used_buffers)
    remap = {old: new for new, old in enumerate(order)}
    model.buffers = [model.buffers[i] for i in order]
    for sg in model.subgraphs:
        for t in sg.tensors:
            t.buffer = remap[t.buffer]
    model.metadata = {k: remap[b] for k, b in model.metadata.items()}


def simplify(model: flatbuf.Model) -> flatbuf.Model:
    """``model`` with cancelling transposes removed and unused tensors dropped (in place)."""
    for sg in model.subgraphs:
        for _ in range(8):
            a = _cancel_transposes(model, sg)
            b = _dead(sg)
            if not (a or b):
                break
    _compact(model)
    return model


def count_ops(data_or_model) -> dict[str, int]:
    """Operators by name in a written model (records), for reports and tests."""
    counts: dict[str, int] = {}
    for sg in data_or_model.subgraphs:
        for op in sg.ops:
            counts[op.op] = counts.get(op.op, 0) + 1
    return counts
