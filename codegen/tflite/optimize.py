"""The export-time optimization pass: a .tflite as a deployed one reads (litert-torch's, the
TFLite converter's), not one operator per msc node.

- on the msc graph, before it is written (``msc.ops.folds``): an inference BatchNorm folded
  into the weights and bias of the conv or linear before it (CONV_2D, DEPTHWISE_CONV_2D,
  FULLY_CONNECTED), where today it is a MUL and an ADD; a constant pad by zeros before a conv
  folded into the conv's own padding, which the conv emitter writes as ``padding=SAME`` where
  the amounts are SAME's for that size, stride and kernel (else a PAD, as before), and a
  -inf pad before a max pool alike (a zero pad before a pool is not its padding: a max pool
  pads with -inf, TFLite's SAME average leaves the pad out of the count); an
  adaptive average pool to 1 (a classifier's pooler, a squeeze-excitation block) as one
  MEAN, which the layout pass moves through, where its decomposition was a STRIDED_SLICE and
  a MEAN per dim behind a TRANSPOSE to channels first;
- on the written operators (``fuse_activations``): a RELU, RELU6 or RELU_N1_TO_1 whose input
  only it reads, made the ``fused_activation_function`` of the operator producing that input,
  for the operators whose float kernels apply one (``FUSES``).

    data = codegen.tflite.to_bytes(g)                   # optimized
    data = codegen.tflite.to_bytes(g, optimize=False)   # node for node

# NOTE: invariants
# - Float only: a fused activation needs float32 tensors on both sides of it, unquantized;
#   the graph folds need a constant float filter (a dequantized one is a quantized graph's,
#   whose kernels ``codegen.tflite.quant`` fuses its own way).
# - Every rewrite is exact up to the rounding of the folded constants (BatchNorm's scale in
#   float64, rounded once), and ``msc diff`` knows each: the fused activation reads back as
#   its own node (``msc.frontend.tflite`` splits it), the folds are rules of its canonical
#   form, so the re-import of an optimized file is equivalent to the graph it came from.
# - A subgraph output keeps its tensor: an activation reading one is not fused. The
#   activation's output tensor (its name) is kept; the pre-activation tensor goes.
# - TANH is not fused: LiteRT's conv, fully-connected and elementwise kernels clamp to the
#   fused activation's range (``CalculateActivationRange``) and read TANH as no clamp at all,
#   so a fused TANH would be dropped silently.
"""

from __future__ import annotations

from collections import Counter

from codegen.tflite import flatbuf
from msc.ir.graph import Graph
from msc.ops.folds import fold

__all__ = ["optimize_graph", "fuse_activations", "FUSES", "ACTIVATIONS"]

# activation operator -> its fused_activation_function code
ACTIVATIONS = {"RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3}
# Operators whose float kernels apply a fused activation (CONCATENATION's schema has the
# field, but LiteRT's kernel refuses any but NONE).
FUSES = frozenset(
    """CONV_2D DEPTHWISE_CONV_2D FULLY_CONNECTED ADD SUB MUL DIV AVERAGE_POOL_2D
    MAX_POOL_2D""".split()
)
_F32 = 0


def optimize_graph(graph: Graph, done: Counter[str] | None = None) -> Graph:
    """``graph`` with BatchNorms and zero pads folded into the convs and linears next to them
    and global pools as means (``msc.ops.folds``); ``done`` counts the folds."""
    return fold(graph, done)


def _float(t: flatbuf.Tensor) -> bool:
    return t.type == _F32 and t.scale is None


def fuse_activations(model: flatbuf.Model, done: Counter[str] | None = None) -> int:
    """Fuse activations into their producers in every subgraph of ``model`` (in place);
    returns how many (also counted in ``done`` as "activations fused")."""
    count = 0
    for sg in model.subgraphs:
        producer = {o: op for op in sg.ops for o in op.outputs}
        reads: Counter[int] = Counter(i for op in sg.ops for i in op.inputs if i >= 0)
        outputs = set(sg.outputs)
        gone: set[int] = set()
        for act in sg.ops:
            code = ACTIVATIONS.get(act.op)
            if code is None or act.custom or len(act.inputs) != 1 or len(act.outputs) != 1:
                continue
            x, y = act.inputs[0], act.outputs[0]
            prev = producer.get(x)
            if prev is None or prev.op not in FUSES or prev.custom or len(prev.outputs) != 1:
                continue
            if prev.options.get("fused_activation_function", 0) or reads[x] != 1 or x in outputs:
                continue
            if not (_float(sg.tensors[x]) and _float(sg.tensors[y])):
                continue
            prev.options["fused_activation_function"] = code
            prev.outputs = [y]
            producer[y] = prev
            gone.add(id(act))
            count += 1
        sg.ops = [op for op in sg.ops if id(op) not in gone]
    if done is not None and count:
        done["activations fused"] += count
    return count
