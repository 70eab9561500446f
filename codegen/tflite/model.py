"""The TFLite writer: an msc Graph as the records of one .tflite subgraph.

# NOTE: invariants
# - Every msc value is one tensor, named by the value (graph inputs and outputs also by the
#   signature ``serving_default``); weights and derived constants are constant tensors whose
#   buffers are deduplicated by content.
# - A symbolic dim is written as 1 in ``shape`` and -1 in ``shape_signature``.
# - Quantization: the tensor a ``dequantize`` reads and the tensor a ``quantize`` writes carry
#   that node's scale and zero point. A float op between dequantize and quantize is written as
#   LiteRT's quantized kernel on those integer tensors (``codegen.tflite.quant.plan``); where
#   it does not fit, the DEQUANTIZE / QUANTIZE stay around the float op.
# - Each operator's version is the lowest whose kernel has the features the node uses
#   (``codegen.tflite.versions``).
# - Every node no emitter nor decomposition can write is reported at once.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from codegen.tflite import flatbuf
from codegen.tflite.registry import EMITTERS, TFL_TYPE, Emit, EmitterRegistry, Ref
from codegen.tflite.versions import version
from msc.errors import Unsupported, UnsupportedOp, UnsupportedOpsError
from msc.ir.graph import Graph, Node, Value, Weight
from msc.ir.types import SymDim, TensorType
from msc.ops.decompose import NotDecomposable
from msc.ops.decompose import registry as DECOMPOSITIONS
from msc.ops.infer import InferError
from msc.ops.layout import LAYOUT_OPS, fold_batch_norm, sink_transposes, to_layout
from msc.ops.schema import OpError

__all__ = ["Writer", "to_records"]

SIGNATURE = "serving_default"


class Writer:
    def __init__(self, graph: Graph, emitters: EmitterRegistry = EMITTERS) -> None:
        self.graph = graph
        self.emitters = emitters
        self.tensors: list[flatbuf.Tensor] = []
        self.types: list[TensorType] = []
        self.buffers: list[Any] = [b""]
        self._by_hash: dict[tuple, int] = {}
        self.consts: dict[int, np.ndarray] = {}
        self.ops: list[flatbuf.Op] = []
        self.refs: dict[int, Ref] = {}  # id(msc value) -> tensor
        self.unsupported: list[UnsupportedOp] = []
        self._names: set[str] = set()
        self.unnamed: set[int] = set()  # tensors an emitter made, named after their value

    # ------------------------------------------------------------ tensors
    def _name(self, name: str) -> str:
        base, k = name or "t", 0
        out = base if name else f"t_{len(self.tensors)}"
        while out in self._names:
            k += 1
            out = f"{base}_{k}"
        self._names.add(out)
        return out

    def new_tensor(self, t: TensorType, name: str = "", buffer: int = 0) -> Ref:
        if t.shape is None:
            raise Unsupported("a tensor of unknown rank (TFLite needs every rank)")
        code = TFL_TYPE.get(t.dtype)
        if code is None:
            raise Unsupported(f"TFLite has no {t.dtype.short} tensors")
        shape = [d if isinstance(d, int) else 1 for d in t.shape]
        dynamic = any(not isinstance(d, int) for d in t.shape)
        sig = [d if isinstance(d, int) else -1 for d in t.shape] if dynamic else None
        self.tensors.append(flatbuf.Tensor(self._name(name), code, shape, buffer, sig))
        self.types.append(t)
        if not name:
            self.unnamed.add(len(self.tensors) - 1)
        return Ref(len(self.tensors) - 1, t)

    def _buffer(self, data: Any, dtype: Any) -> int:
        raw = np.ascontiguousarray(data)
        if raw.dtype.byteorder == ">":
            raw = raw.astype(raw.dtype.newbyteorder("<"))
        if raw.size == 0:
            return 0 if not raw.shape else self._add_buffer(b"\0", ("empty",))
        digest = hashlib.sha256(memoryview(raw).cast("B")).hexdigest()
        key = (str(dtype), digest, raw.nbytes)
        got = self._by_hash.get(key)
        if got is None:
            got = self._add_buffer(raw, key)
        return got

    def _add_buffer(self, raw: Any, key: tuple) -> int:
        self.buffers.append(raw)
        self._by_hash[key] = len(self.buffers) - 1
        return len(self.buffers) - 1

    def const_tensor(self, arr: np.ndarray, name: str = "") -> Ref:
        from msc.ir.dtype import DType

        arr = np.asarray(arr)
        dt = DType.from_numpy(arr.dtype)
        if dt.is_string:
            raise Unsupported("string constants are not written yet")
        buf = self._buffer(arr, dt)
        ref = self.new_tensor(TensorType(dt, arr.shape), name or "const", buf)
        self.consts[ref.index] = arr
        return ref

    def const_value(self, index: int) -> np.ndarray | None:
        return self.consts.get(index)

    def set_quant(self, ref: Ref, scale: np.ndarray, zero_point: np.ndarray, axis: int) -> None:
        t = self.tensors[ref.index]
        scale = np.asarray(scale, np.float32).reshape(-1)
        zp = np.asarray(zero_point, np.int64).reshape(-1)
        if zp.size == 1 and scale.size > 1:
            zp = np.repeat(zp, scale.size)
        if t.scale is not None and (
            list(t.scale) != scale.tolist() or list(t.zero_point or ()) != zp.tolist()
        ):
            raise Unsupported(f"tensor {t.name!r} is quantized with two different scales")
        t.scale, t.zero_point = scale.tolist(), zp.tolist()
        t.quantized_dimension = int(axis) % max(len(t.shape), 1) if scale.size > 1 else 0

    def add_op(self, name, inputs, outputs, options, options_type) -> None:
        self.ops.append(
            flatbuf.Op(
                name,
                [-1 if r is None else r.index for r in inputs],
                [r.index for r in outputs],
                {k: v for k, v in options.items() if v is not None},
                options_type,
            )
        )

    # ------------------------------------------------------------ values
    def ref(self, v: Value) -> Ref:
        got = self.refs.get(id(v))
        if got is not None:
            return got
        if isinstance(v, Weight):
            arr = v.numpy()
            ref = self.const_tensor(np.asarray(arr), v.name)
            self.refs[id(v)] = ref
            return ref
        raise Unsupported(f"value {v.name!r} is used before it is written")

    # ------------------------------------------------------------ nodes
    def emit_node(self, node: Node, ins: list[Ref | None]) -> list[Ref]:
        if node.op == "constant":
            return [self.const_tensor(np.asarray(node.attrs["value"]))]
        em = self.emitters.get(node.op)
        why = "no emitter"
        if em is not None:
            mark = (len(self.ops), len(self.tensors))
            try:
                out = em.fn(Emit(self, node), *ins, **node.attrs)
                return list(out) if isinstance(out, tuple | list) else [out]
            except (Unsupported, InferError, OpError) as e:
                why = str(e)
                self._rollback(mark)
        return self._decompose(node, ins, why)

    def _rollback(self, mark: tuple[int, int]) -> None:
        ops, tensors = mark
        del self.ops[ops:]
        for i, t in enumerate(self.tensors[tensors:], tensors):
            self._names.discard(t.name)
            self.unnamed.discard(i)
            self.consts.pop(i, None)
        del self.tensors[tensors:]
        del self.types[tensors:]
        # a weight first written by what is rolled back is written again when next read
        self.refs = {k: r for k, r in self.refs.items() if r.index < tensors}

    def _decompose(self, node: Node, ins: list[Ref | None], why: str) -> list[Ref]:
        if node.op not in DECOMPOSITIONS:
            raise Unsupported(why)
        try:
            new_nodes, outs = DECOMPOSITIONS.expand(node)
        except NotDecomposable as e:
            raise Unsupported(f"{why}; its decomposition: {e}") from None
        local: dict[int, Ref] = {id(v): r for v, r in zip(node.inputs, ins) if v is not None}
        for n in new_nodes:
            n_ins = [None if v is None else local.get(id(v)) or self.ref(v) for v in n.inputs]
            for v, r in zip(n.outputs, self.emit_node(n, n_ins)):
                local[id(v)] = r
        return [local[id(v)] for v in outs]

    def run(self) -> flatbuf.Model:
        g = self.graph
        inputs = []
        for v in g.inputs:
            if not isinstance(v.type, TensorType):
                raise Unsupported(f"input {v.name!r} is not a tensor ({v.type})")
            r = self.new_tensor(v.type, v.name)
            self.refs[id(v)] = r
            inputs.append(r.index)
        failed: set[int] = set()
        fused: set[int] = set()  # quantize nodes written by the quantized kernel before them
        graph_outputs = {id(v) for v in g.outputs}
        for node in g.nodes:
            if id(node) in fused:
                continue
            if any(id(v) in failed for v in node.inputs if v is not None):
                failed.update(id(v) for v in node.outputs)  # downstream of a refused node
                continue
            if any(isinstance(sub, Graph) for sub in node.attrs.values()):
                failed.update(id(v) for v in node.outputs)
                self._refuse(node, "control flow (subgraphs) is not written yet")
                continue
            skipped = self._quantized(node, graph_outputs)
            if skipped:
                fused.update(id(n) for n in skipped)
                continue
            try:
                ins = [None if v is None else self.ref(v) for v in node.inputs]
                outs = self.emit_node(node, ins)
            except (Unsupported, InferError, OpError) as e:
                self._refuse(node, str(e))
                failed.update(id(v) for v in node.outputs)
                continue
            for v, r in zip(node.outputs, outs):
                self.refs[id(v)] = r
                if r.index in self.unnamed and v.name:
                    t = self.tensors[r.index]
                    self._names.discard(t.name)
                    t.name = self._name(v.name)
                    self.unnamed.discard(r.index)
        if self.unsupported:
            raise UnsupportedOpsError(self.unsupported, what=f"graph {g.name!r} for TFLite")
        outputs = [self._output(v) for v in g.outputs]
        for op in self.ops:
            op.version = version(op, self.tensors)
        sub = flatbuf.Subgraph(self.tensors, inputs, outputs, self.ops, g.name or "main")
        sig = flatbuf.Signature(
            SIGNATURE,
            0,
            [(v.name, i) for v, i in zip(g.inputs, inputs)],
            [(_out_name(v, k), i) for k, (v, i) in enumerate(zip(g.outputs, outputs))],
        )
        if len({n for n, _ in sig.outputs}) != len(sig.outputs):
            sig.outputs = [(f"output_{k}", i) for k, (_, i) in enumerate(sig.outputs)]
        metadata = {}
        names = _symbol_names(g)
        if names:  # the -1 dims' names, which shape_signature cannot hold
            self.buffers.append(json.dumps(names, sort_keys=True).encode("utf-8"))
            metadata[SYMBOLS_METADATA] = len(self.buffers) - 1
        return flatbuf.Model([sub], self.buffers, [sig], metadata=metadata)

    def _quantized(self, node: Node, outputs: set[int]) -> list[Node]:
        """Write ``node`` as a quantized kernel when it sits between dequantize and quantize
        (``codegen.tflite.quant.plan``); the nodes after it the kernel wrote (a fused
        activation, the quantize), else []."""
        from codegen.tflite import quant

        try:
            f = quant.plan(self, node, outputs)
        except (Unsupported, InferError, OpError):
            return []
        if f is None:
            return []
        mark = (len(self.ops), len(self.tensors))
        try:
            out = quant.emit_fused(self, f)
        except (Unsupported, InferError, OpError):
            self._rollback(mark)
            return []
        v = f.q.output
        self.refs[id(v)] = out
        if out.index in self.unnamed and v.name:
            t = self.tensors[out.index]
            self._names.discard(t.name)
            t.name = self._name(v.name)
            self.unnamed.discard(out.index)
        return f.skipped

    def _output(self, v: Value) -> int:
        r = self.ref(v)
        return r.index

    def _refuse(self, node: Node, why: str) -> None:
        prov = node.provenance
        self.unsupported.append(
            UnsupportedOp(node.op, node.name or (node.outputs[0].name or ""), prov.module, why)
        )


def _out_name(v: Value, k: int) -> str:
    return v.name or f"output_{k}"


def to_records(graph: Graph, emitters: EmitterRegistry = EMITTERS) -> flatbuf.Model:
    """``graph`` as flatbuffer records (``flatbuf.write`` makes the file's bytes), its convs
    and pools brought to TFLite's NHWC first (``channels_last``)."""
    return Writer(channels_last(graph), emitters).run()


def channels_last(graph: Graph) -> Graph:
    """``graph`` with its convs and pools NHWC (kernels OHWI), batch norms with constant
    statistics folded to a multiply-add, and the transposes sunk: a transpose is left only
    where a graph input or output keeps its channels-first layout. The graph itself when it
    has no conv or pool."""
    if not any(n.op in LAYOUT_OPS for n in graph.nodes):
        return graph
    return sink_transposes(to_layout(fold_batch_norm(graph), "NHWC"))


# The metadata entry naming the graph inputs' symbolic dims: {"<input's signature name>":
# {"<axis>": "<symbol>"}} as JSON. A .tflite stores a symbolic dim as -1 (shape_signature),
# so without it msc.from_tflite names them itself (batch, <input>_<axis>) and ties none
# together across inputs; with it a dynamic graph reads back with its own symbols.
SYMBOLS_METADATA = "msc_symbols"


def _symbol_names(g: Graph) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for v in g.inputs:
        shape = v.type.shape if isinstance(v.type, TensorType) else None
        for axis, d in enumerate(shape or ()):
            if isinstance(d, SymDim):
                out.setdefault(v.name, {})[str(axis)] = d.name
    return out
