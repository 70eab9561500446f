"""The export-time optimization pass: a written ModelProto as a deployment engineer wants it.

``optimize_model`` rewrites the main graph of a model ``ModelBuilder`` wrote, in place:

- constants as initializers: every ``Constant`` node becomes an initializer of its output's
  name (torch.onnx writes none; tools without a folder see fewer nodes);
- constant folding: a node whose inputs are all initializers is computed (by
  ``onnx.reference``) and its outputs become initializers, when each is at most
  ``FOLD_LIMIT`` elements (the budget ``msc diff`` folds under) or the fold frees at least as
  many bytes as it adds (a ``Transpose`` of a Linear weight read nowhere else: the weight is
  stored pre-transposed, as ``<weight>~T``); never when it would store a copy of a weight
  that something else still reads (a tied embedding's transpose stays, so the embedding is
  stored once);
- ``BatchNormalization`` (inference: no ``training_mode``) folded into the ``Conv`` or
  ``Gemm`` before it when that node's output feeds only the BatchNorm and every parameter is
  an initializer; a folded bias that is all zeros (a fresh BatchNorm after a conv without one)
  is not written: the Conv or Gemm without a bias computes the same (torch.onnx writes none);
- ``GlobalAveragePool`` of a value the graph also returns written ``ReduceMean`` over the
  spatial axes (keepdims): onnxruntime's NCHWc layout pass turns the returned value back to
  NCHW anyway, and a pool left on the blocked layout takes a second ``ReorderOutput`` of its
  own (ResNet's pooled output beside its last hidden state); a pool that a conv reads (a
  squeeze-and-excitation block) stays on the blocked layout, as ``GlobalAveragePool``;
- ``Mul(x, x)`` written ``Pow(x, 2)`` (RMSNorm's square as onnxruntime's transformer
  optimizer matches it; onnxruntime computes ``Pow(x, 2)`` as ``x * x``);
- a data movement (``Transpose``, ``Reshape``, ``Squeeze``, ``Unsqueeze``, ``Flatten``) of a
  run-time ``DequantizeLinear``'s output that a float op reads written on the integers,
  before a DequantizeLinear of its own (a per-axis one only through a Transpose, its axis
  moved with it): the QDQ form onnxruntime's quantization passes expect (a move that only
  QuantizeLinear reads is a quantized move already, and stays). Left after the dequantize,
  onnxruntime 1.32's QDQPropagationTransformer copies the pair past the move as a
  QuantizeLinear that QDQS8ToU8Transformer then gives a uint8 zero point for an int8 output,
  and the session refuses the file (microWakeWord's int8 models: the layout Transpose of a
  tensor a slice also reads, the Reshape in front of a fully-connected layer). This one
  rewrite is made without ``optimize`` too (``moves_before_dequantize``);
- identical constants shared (one initializer of each dtype, shape and bytes; the graph's
  weights are never merged: msc keeps a tied weight as one already), unread ones dropped.

# NOTE: invariants
# - Only the main graph's nodes are rewritten; a subgraph (If/Loop body, a custom op's graph)
#   is left as written, and the names it reads from outside are kept.
# - Graph inputs, graph outputs, initializers that are also graph inputs and what a
#   control-flow node (If, Loop, Scan) reads are never folded, renamed or dropped. A folded
#   value keeps its name (the initializer is named as the value it replaces), except a
#   weight's folded Transpose, named ``<weight>~T`` after the weight it holds; a conv that
#   absorbed a BatchNorm keeps its weight's and bias's names and takes the BatchNorm's
#   output name, so names the model's metadata and ``verify`` read stay.
# - Every rewrite is exact up to float rounding of the folded arithmetic (BatchNorm's scale
#   is computed in float64 and rounded once to the weight's dtype); ``msc diff`` knows each
#   (constants folded, matmul of a transposed weight, batch_norm folded into conv/linear, a
#   move of dequantized values made on the integers), so the re-import of an optimized file
#   is equivalent to the graph it was written from. A dequantize other nodes read too stays
#   for them; the moved value keeps its name (its new DequantizeLinear's output).
# - Data of external initializers is read through ``arrays`` only when a rewrite needs it.
#   A weight the pass makes (a pre-transposed or BatchNorm-scaled weight) goes to ``store``
#   as soon as it is made, when one is given (``codegen.onnx.save`` writes it to the data file
#   there and then), so the pass holds one such weight at a time, not all of them; a later
#   rewrite that reads one computes it again. Other initializers the pass makes are inline.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from msc.ops.folds import batch_norm_scale, batch_norm_shift
from msc.ops.simplify import FOLD_LIMIT

__all__ = ["optimize_model", "moves_before_dequantize", "FOLD_LIMIT", "Blocks", "Store"]

# Never computed at export time: outputs that differ from run to run, and quantization, which
# stays as its Q/DQ nodes (a runtime runs those as quantized kernels; folded they are floats).
_NOT_FOLDED = {
    "QuantizeLinear",
    "DequantizeLinear",
    "DynamicQuantizeLinear",
    "RandomNormal",
    "RandomNormalLike",
    "RandomUniform",
    "RandomUniformLike",
    "Multinomial",
    "Bernoulli",
    "Dropout",
}
_PLAIN_KINDS = "biuf"  # numpy kinds whose dtypes numpy_helper writes back exactly
_COPY_LIMIT = 1024  # bytes: a fold does not store a copy of a weight this large
_SHARE_LIMIT = 1 << 26  # bytes: larger initializers are not compared for sharing


class _Data:
    """Initializer name -> numpy array, read on first use (external ones through ``arrays``)."""

    def __init__(self, graph: onnx.GraphProto, arrays: Callable[[str], np.ndarray] | None):
        self.protos = {t.name: t for t in graph.initializer}
        self.arrays = arrays
        self.cache: dict[str, np.ndarray] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.cache or name in self.protos

    def get(self, name: str) -> np.ndarray | None:
        if name in self.cache:
            return self.cache[name]
        t = self.protos.get(name)
        if t is None:
            return None
        if t.data_location == onnx.TensorProto.EXTERNAL or (
            t.external_data and not t.HasField("raw_data")
        ):
            if self.arrays is None:
                return None
            arr = np.asarray(self.arrays(name))
        else:
            arr = numpy_helper.to_array(t)
        self.cache[name] = arr
        return arr

    def nbytes(self, name: str) -> int:
        if name in self.cache:
            return int(self.cache[name].nbytes)
        t = self.protos.get(name)
        if t is None:
            return 0
        size = int(np.prod(t.dims)) if t.dims else 1
        try:
            return size * onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
        except (KeyError, ValueError, TypeError):
            return 0


def _plain(arr: np.ndarray) -> bool:
    return arr.dtype.kind in _PLAIN_KINDS and type(arr.dtype).__module__.startswith("numpy")


def _opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def _evaluate(node: onnx.NodeProto, feeds: dict[str, np.ndarray], opset: int) -> list | None:
    """``node``'s outputs computed by onnx's reference evaluator, or None when it cannot."""
    from onnx.reference import ReferenceEvaluator

    if node.op_type == "Constant" and [a.name for a in node.attribute] == ["value"]:
        return [numpy_helper.to_array(node.attribute[0].t)]  # what the emitters write

    try:
        ref = ReferenceEvaluator(node, opsets={"": opset})
        outs = ref.run(None, feeds)
    except Exception:  # noqa: BLE001 - an op the reference cannot compute: left to run
        return None
    if not all(isinstance(o, np.ndarray | np.generic) for o in outs):
        return None  # a sequence or optional value: not an initializer
    return [np.asarray(o) for o in outs]


def _uses(graph: onnx.GraphProto) -> Counter[str]:
    """Name -> how many node inputs (subgraphs included) and graph outputs read it."""
    used: Counter[str] = Counter()

    def walk(g: onnx.GraphProto) -> None:
        for n in g.node:
            used.update(i for i in n.input if i)
            for a in n.attribute:
                for sub in [a.g] if a.HasField("g") else list(a.graphs):
                    walk(sub)
        used.update(o.name for o in g.output)

    walk(graph)
    return used


def _names(graph: onnx.GraphProto) -> set[str]:
    """Every value name of ``graph`` and of its subgraphs."""
    out = {v.name for v in [*graph.input, *graph.output, *graph.initializer, *graph.value_info]}
    for n in graph.node:
        out.update(n.input)
        out.update(n.output)
        for a in n.attribute:
            for sub in [a.g] if a.HasField("g") else list(a.graphs):
                out |= _names(sub)
    return out


def _fresh(name: str, taken: set[str]) -> str:
    k, out = 0, name
    while out in taken:
        k += 1
        out = f"{name}__{k}"
    taken.add(out)
    return out


def _rename_inputs(graph: onnx.GraphProto, renames: dict[str, str]) -> None:
    for n in graph.node:
        for i, name in enumerate(n.input):
            if name in renames:
                n.input[i] = renames[name]
        for a in n.attribute:
            for sub in [a.g] if a.HasField("g") else list(a.graphs):
                _rename_inputs(sub, renames)


class _Stored:
    """A weight the pass made and handed to ``store``: its external-data TensorProto, and how
    to compute it again should a later rewrite read it."""

    def __init__(
        self, proto: onnx.TensorProto, arr: np.ndarray | Blocks, remake: Callable[[], np.ndarray]
    ):
        self.proto = proto
        self.dtype = arr.dtype
        self.nbytes = int(arr.nbytes)
        self.remake = remake


Store = Callable[["np.ndarray | Blocks"], "onnx.TensorProto | None"]


def optimize_model(
    model: onnx.ModelProto,
    arrays: Callable[[str], np.ndarray] | None = None,
    store: Store | None = None,
) -> Counter[str]:
    """Optimize ``model``'s main graph in place (see the module docstring).

    Args:
        model: a model ``ModelBuilder`` wrote.
        arrays: initializer name -> its data, for initializers stored as external data.
        store: writes the data of a weight the pass makes (pre-transposed, BatchNorm-scaled)
            somewhere outside the model and returns the external-data TensorProto that
            refers to it (its name is set here), or None to keep it inline.

    Returns:
        What was done: a count per rewrite ("constants as initializers", "nodes folded",
        "batch norms folded", "squares as Pow", "returned values pooled as ReduceMean",
        "moves before dequantize", "initializers shared", "initializers dropped").
    """
    g = model.graph
    opset = _opset(model)
    done: Counter[str] = Counter()
    data = _Data(g, arrays)
    pinned = {i.name for i in g.input} | {o.name for o in g.output}
    uses = _uses(g)
    new: dict[str, np.ndarray | _Stored] = {}  # initializers this pass makes, by name
    removed: set[int] = set()

    def const(name: str) -> bool:
        return bool(name) and name not in pinned and (name in new or name in data)

    def value(name: str) -> np.ndarray | None:
        if name not in new:
            return data.get(name)
        v = new[name]
        return v.remake() if isinstance(v, _Stored) else v

    def nbytes(name: str) -> int:
        return int(new[name].nbytes) if name in new else data.nbytes(name)

    def made(arr: np.ndarray | Blocks, remake: Callable[[], np.ndarray]) -> np.ndarray | _Stored:
        """A weight the pass made (an array, or its pieces): handed to ``store`` now where one
        takes it, else kept as an array."""
        proto = store(arr) if store is not None else None
        if proto is not None:
            return _Stored(proto, arr, remake)
        return remake() if isinstance(arr, Blocks) else arr

    # A constant a control-flow node reads (a Loop's condition) stays a Constant node: msc's
    # ONNX frontend reads those as constants, not as weights.
    for n in g.node:
        if any(a.HasField("g") or a.graphs for a in n.attribute):
            pinned.update(i for i in n.input if i)

    taken = _names(g)
    renames: dict[str, str] = {}  # a folded Transpose's output -> its weight, then its name
    # Constants are shared, the graph's weights are not: two parameters equal today (zero
    # biases of a fresh model) are two parameters (a quantizer or an editor treats them so).
    weights = set(data.protos)

    def foldable(n: onnx.NodeProto) -> bool:
        return not (
            n.domain not in ("", "ai.onnx")
            or n.op_type in _NOT_FOLDED
            or any(a.HasField("g") or a.graphs for a in n.attribute)
            or any(o in pinned for o in n.output)
        )

    # The nodes that might fold (those whose inputs might all be constant): a fold's output
    # that none of them reads is final, and can be stored as soon as it is made.
    maybe: set[str] = set()
    may_fold: set[int] = set()
    readers: dict[str, list[int]] = {}
    for k, n in enumerate(g.node):
        for i in n.input:
            readers.setdefault(i, []).append(k)
        if foldable(n) and all(i == "" or i in maybe or const(i) for i in n.input):
            may_fold.add(k)
            maybe.update(n.output)

    # Constants and constant subgraphs, in topological order.
    for k, n in enumerate(g.node):
        if not foldable(n) or not all(i == "" or const(i) for i in n.input):
            continue
        feeds = {}
        for i in n.input:
            if i and i not in feeds:
                arr = value(i)
                if arr is None or not _plain(arr):
                    break
                feeds[i] = arr
        else:
            outs = _evaluate(n, feeds, opset)
            if outs is None or len(outs) != len(n.output) or not all(map(_plain, outs)):
                continue
            if n.op_type != "Constant":
                kept = [i for i in set(feeds) if uses[i] != list(n.input).count(i)]
                freed = sum(nbytes(i) for i in set(feeds) if i not in kept)
                added = sum(o.nbytes for o in outs)
                if any(o.size > FOLD_LIMIT for o in outs) and added > freed:
                    continue
                if any(i in data.protos and data.nbytes(i) >= _COPY_LIMIT for i in kept):
                    continue  # a copy of a weight still read elsewhere (a tied embedding's ^T)
            removed.add(k)
            for i in n.input:
                if i:
                    uses[i] -= 1
            # A large output computed from a weight is a weight (a Transpose of a Linear
            # weight: the fold frees the weight's bytes); smaller ones and those computed
            # from constants alone (masks, tables) stay here, where they can be shared.
            weighty = store is not None and any(i in data.protos for i in feeds)
            for j, (name, o) in enumerate(zip(n.output, outs)):
                if not name:
                    continue
                final = not any(c in may_fold for c in readers.get(name, ()))
                new[name] = made(o, _Again(n, feeds, opset, j)) if weighty and final else o
            del outs
            source = n.input[0] if n.op_type == "Transpose" else ""
            if source in data.protos and not uses[source]:
                renames[n.output[0]] = source
            done["constants as initializers" if n.op_type == "Constant" else "nodes folded"] += 1
    # A weight stored pre-transposed is named after the weight it is (``<weight>~T``), not
    # after the Transpose's output.
    for old, source in list(renames.items()):
        if uses[old] and old in new:
            name = renames[old] = _fresh(f"{source}~T", taken)
            new[name] = new.pop(old)
            uses[name] = uses.pop(old)
            weights.add(name)
        else:
            del renames[old]
    if renames:
        _rename_inputs(g, renames)

    producer = {o: k for k, n in enumerate(g.node) if k not in removed for o in n.output}
    done["batch norms folded"] += _fold_batch_norms(
        g, producer, removed, uses, const, value, new, made
    )
    done["squares as Pow"] += _squares_as_pow(g, removed, new, value)
    done["returned values pooled as ReduceMean"] += _pools_of_outputs_as_mean(
        g, removed, new, opset
    )

    keep = [n for k, n in enumerate(g.node) if k not in removed]
    del g.node[:]
    g.node.extend(keep)
    done["moves before dequantize"] += _moves_before_dequantize(g, new, taken)
    weights |= {n for n in new if n.endswith(("~bn", "~bias"))}  # BN-folded
    shareable = {n for n in new if n not in weights}
    _write_initializers(g, new, shareable, pinned, done)
    made = {o for n in g.node for o in n.output}
    vi = [v for v in g.value_info if v.name in made]
    del g.value_info[:]
    g.value_info.extend(vi)
    return done


class _Again:
    """Output ``j`` of ``node`` computed again from the same inputs (a stored fold read later)."""

    def __init__(self, node: onnx.NodeProto, feeds: dict[str, np.ndarray], opset: int, j: int):
        self.node, self.feeds, self.opset, self.j = node, feeds, opset, j

    def __call__(self) -> np.ndarray:
        outs = _evaluate(self.node, self.feeds, self.opset)
        assert outs is not None  # it computed the first time
        return outs[self.j]


class Blocks:
    """A tensor given as consecutive C-order pieces (``pieces()``), for a ``store`` that
    writes it out without the whole tensor in memory at once."""

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, pieces: Callable[[], Any]):
        self.shape, self.dtype, self._pieces = tuple(shape), np.dtype(dtype), pieces
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def pieces(self):
        return self._pieces()


_BLOCK = 1 << 16  # elements per float64 block of a BatchNorm-scaled weight


def _scaled_blocks(w: np.ndarray, scale: np.ndarray, axis: int):
    """``w * scale`` along ``axis``, computed in float64 and rounded once to ``w``'s dtype, a
    block of channels at a time (a float64 copy of a whole weight is four times its bytes):
    the blocks in order, each ``w``'s dtype; C-order pieces of the result when axis is 0."""
    c = w.shape[axis]
    step = max(1, _BLOCK // max(1, w[:1].size if axis == 0 else w.shape[0]))
    for i in range(0, c, step):
        part = (slice(None),) * axis + (slice(i, i + step),)
        s = scale[i : i + step].reshape((-1,) + (1,) * (w.ndim - 1 - axis))
        yield part, (w[part].astype(np.float64) * s).astype(w.dtype)


def _scaled(w: np.ndarray, scale: np.ndarray, axis: int) -> np.ndarray:
    """``w * scale`` along ``axis`` (``_scaled_blocks``), as one array."""
    out = np.empty(w.shape, w.dtype)
    for part, block in _scaled_blocks(w, scale, axis):
        out[part] = block
    return out


def _fold_batch_norms(g, producer, removed, uses, const, value, new, made) -> int:
    """BatchNormalization(Conv|Gemm(...)) -> the Conv|Gemm with scaled weight and bias."""
    count = 0
    for k, bn in enumerate(g.node):
        if k in removed or bn.op_type != "BatchNormalization" or bn.domain not in ("", "ai.onnx"):
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in bn.attribute}
        if attrs.get("training_mode", 0) or len(bn.output) != 1 or len(bn.input) != 5:
            continue
        if not all(const(i) for i in bn.input[1:]):
            continue
        x = bn.input[0]
        p = producer.get(x)
        if p is None or uses[x] != 1:
            continue
        prev = g.node[p]
        if prev.op_type not in ("Conv", "Gemm") or not const(prev.input[1]):
            continue
        if len(prev.input) > 2 and prev.input[2] and not const(prev.input[2]):
            continue
        gamma, beta, mean, var = (value(i) for i in bn.input[1:])
        w = value(prev.input[1])
        b = value(prev.input[2]) if len(prev.input) > 2 and prev.input[2] else None
        if any(a is None or a.dtype.kind != "f" for a in (gamma, beta, mean, var, w)):
            continue
        eps = float(attrs.get("epsilon", 1e-5))
        scale = batch_norm_scale(gamma, var, eps)
        c = scale.shape[0] if scale.ndim == 1 else None
        if c is None or any(a.shape != (c,) for a in (beta, mean, var)):
            continue
        if prev.op_type == "Conv":
            if w.shape[0] != c:
                continue
            axis, wscale = 0, scale
            bias = np.zeros(c) if b is None else b.astype(np.float64)
            conv_attrs = {}
        else:
            ga = {a.name: onnx.helper.get_attribute_value(a) for a in prev.attribute}
            alpha, beta_g = float(ga.get("alpha", 1.0)), float(ga.get("beta", 1.0))
            trans_b = int(ga.get("transB", 0))
            if w.ndim != 2 or w.shape[0 if trans_b else 1] != c:
                continue
            axis, wscale = (0 if trans_b else 1), scale * alpha
            if b is None:
                bias = np.zeros(c)
            elif b.shape in ((), (1,), (c,), (1, 1), (1, c)):  # one bias per column
                bias = np.broadcast_to(b.astype(np.float64).reshape(-1), (c,)) * beta_g
            else:
                continue
            conv_attrs = {"alpha": 1.0, "beta": 1.0}
        bias = batch_norm_shift(bias, mean, scale, beta).astype(w.dtype)
        for i in list(prev.input[1:]) + list(bn.input[1:]):
            if i:
                uses[i] -= 1
        # The conv's own names where nothing else reads its weight and bias (torch.onnx's).
        wname, bname = prev.input[1], prev.input[2] if len(prev.input) > 2 else ""
        wname = wname if not uses[wname] else f"{wname}~bn"
        again = _ScaledAgain(value, prev.input[1], wscale, axis)
        new[wname] = made(again.blocks(w), again)
        uses[wname] = 1
        del prev.input[1:]
        prev.input.append(wname)
        if b is not None or np.any(bias):  # a zero bias only adds zeros: not written
            bname = bname if bname and not uses[bname] else f"{bn.output[0]}~bias"
            new[bname] = bias
            uses[bname] = 1
            prev.input.append(bname)
        if conv_attrs:
            kept = [a for a in prev.attribute if a.name not in conv_attrs]
            del prev.attribute[:]
            prev.attribute.extend(kept)
        prev.output[0] = bn.output[0]
        removed.add(k)
        count += 1
    return count


class _ScaledAgain:
    """A BatchNorm-scaled weight: ``weight`` (read through ``value``) times ``scale``."""

    def __init__(self, value, weight: str, scale: np.ndarray, axis: int):
        self.value, self.weight, self.scale, self.axis = value, weight, scale, axis

    def __call__(self, w: np.ndarray | None = None) -> np.ndarray:
        return _scaled(self.value(self.weight) if w is None else w, self.scale, self.axis)

    def blocks(self, w: np.ndarray) -> np.ndarray | Blocks:
        """The scaled weight as C-order pieces where the channels lead (a conv's), else whole."""
        if self.axis != 0:
            return self(w)

        def pieces():
            for _, block in _scaled_blocks(w, self.scale, 0):
                yield block

        return Blocks(w.shape, w.dtype, pieces)


def _squares_as_pow(g, removed, new, value) -> int:
    """``Mul(x, x)`` -> ``Pow(x, 2)`` for float x (exponent of x's dtype when known)."""
    types = {v.name: v.type.tensor_type.elem_type for v in [*g.input, *g.value_info, *g.output]}
    for t in g.initializer:
        types[t.name] = t.data_type
    for name, arr in new.items():
        types[name] = onnx.helper.np_dtype_to_tensor_dtype(arr.dtype)
    floats = {
        onnx.TensorProto.FLOAT: np.float32,
        onnx.TensorProto.DOUBLE: np.float64,
        onnx.TensorProto.FLOAT16: np.float16,
    }
    count = 0
    for k, n in enumerate(g.node):
        if k in removed or n.op_type != "Mul" or n.domain not in ("", "ai.onnx"):
            continue
        if len(n.input) != 2 or n.input[0] != n.input[1]:
            continue
        dt = floats.get(types.get(n.input[0], 0))
        if dt is None:
            continue
        two = f"{n.output[0]}~two"
        new[two] = np.asarray(2, dtype=dt)
        n.op_type = "Pow"
        n.input[1] = two
        count += 1
    return count


def _pools_of_outputs_as_mean(g, removed, new, opset: int) -> int:
    """``GlobalAveragePool(x)`` with ``x`` a graph output -> ``ReduceMean(x)`` over the spatial
    axes, keepdims (see the module docstring); x's rank from the graph's types."""
    returned = {o.name for o in g.output}
    ranks = {
        v.name: len(v.type.tensor_type.shape.dim)
        for v in [*g.input, *g.value_info, *g.output]
        if v.type.tensor_type.HasField("shape")
    }
    count = 0
    for k, n in enumerate(g.node):
        if k in removed or n.op_type != "GlobalAveragePool" or n.domain not in ("", "ai.onnx"):
            continue
        x = n.input[0]
        rank = ranks.get(x, 0) or ranks.get(n.output[0], 0)
        if x not in returned or rank < 3:
            continue
        axes = list(range(2, rank))
        n.op_type = "ReduceMean"
        del n.attribute[:]
        n.attribute.append(onnx.helper.make_attribute("keepdims", 1))
        if opset >= 18:  # axes an input since opset 18
            name = f"{n.output[0]}~axes"
            new[name] = np.asarray(axes, np.int64)
            n.input.append(name)
        else:
            n.attribute.append(onnx.helper.make_attribute("axes", axes))
        count += 1
    return count


# Ops that only move elements: on dequantized values, the same op on the integers before the
# dequantize computes the same (a per-tensor scale and zero point apply to every element).
_MOVES = ("Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten")
# Integer types every opset moves (int4 and float8 Reshape / Transpose need newer opsets).
_MOVED_INTEGERS = {
    onnx.TensorProto.INT8,
    onnx.TensorProto.UINT8,
    onnx.TensorProto.INT16,
    onnx.TensorProto.UINT16,
    onnx.TensorProto.INT32,
}


def moves_before_dequantize(model: onnx.ModelProto) -> int:
    """The moves of dequantized run-time integers in ``model``'s main graph written on the
    integers (see the module docstring), in place; how many. ``ModelBuilder`` makes this
    rewrite of a model written without ``optimize`` too: left as it is, onnxruntime 1.32's
    session (at its default optimization level) refuses the file."""
    g = model.graph
    return _moves_before_dequantize(g, {}, _names(g))


def _moves_before_dequantize(g, new, taken) -> int:
    """``Move(DequantizeLinear(q, s, z))`` -> ``DequantizeLinear(Move(q), s, z)`` for a
    run-time q of an integer type, per-tensor (or per-axis through a Transpose, the axis
    permuted); the dequantize stays where other nodes read it too."""
    types = {v.name: v.type.tensor_type.elem_type for v in [*g.input, *g.value_info, *g.output]}
    consts = {t.name for t in g.initializer} | set(new)
    producer = {o: n for n in g.node for o in n.output}
    reads = _uses(g)
    quantized = Counter(n.input[0] for n in g.node if n.op_type == "QuantizeLinear" and n.input)
    node_names = {n.name for n in g.node}
    out: list[onnx.NodeProto] = []
    gone: set[int] = set()
    count = 0
    for n in g.node:
        out.append(n)
        if n.op_type not in _MOVES or n.domain not in ("", "ai.onnx") or not n.input:
            continue
        d = producer.get(n.input[0])
        if d is None or d.op_type != "DequantizeLinear" or d.domain not in ("", "ai.onnx"):
            continue
        q = d.input[0]
        if q in consts or types.get(q) not in _MOVED_INTEGERS:
            continue  # a weight's integers are stored as they are
        if quantized[n.output[0]] == reads[n.output[0]]:
            continue  # DequantizeLinear -> move -> QuantizeLinear: a quantized move already
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in d.attribute}
        if attrs.get("block_size"):
            continue
        if "axis" in attrs:  # per axis (codegen.onnx writes axis for nothing else)
            perm = next((list(a.ints) for a in n.attribute if a.name == "perm"), None)
            if n.op_type != "Transpose" or not perm:
                continue
            attrs["axis"] = perm.index(attrs["axis"] % len(perm))
        x, y = n.input[0], n.output[0]
        moved = _fresh(f"{y}~q", taken)
        n.input[0], n.output[0] = q, moved
        reads[x] -= 1
        alone = not reads[x]
        name = d.name if alone else _fresh(f"{d.name}~{n.name or 'moved'}", node_names)
        dq = onnx.helper.make_node("DequantizeLinear", [moved, *d.input[1:]], [y], name=name)
        dq.attribute.extend(onnx.helper.make_attribute(k, v) for k, v in attrs.items())
        dq.metadata_props.extend(d.metadata_props)
        out.append(dq)
        if alone:
            gone.add(id(d))
        count += 1
    if count:
        del g.node[:]
        g.node.extend(m for m in out if id(m) not in gone)
    return count


def _write_initializers(g, new, shareable, pinned, done) -> None:
    """The graph's initializers: the ones still read, then the new ones; identical constants
    (``shareable``: dtype, shape, bytes) shared under the first one's name."""
    uses = _uses(g)
    out: list[onnx.TensorProto] = []
    seen: dict[tuple, str] = {}
    renames: dict[str, str] = {}

    def add(name: str, proto: onnx.TensorProto) -> None:
        if not uses[name] and name not in pinned:
            done["initializers dropped"] += 1
            return
        if name in shareable and name not in pinned:
            if proto.HasField("raw_data"):
                body = proto.raw_data
            else:
                bare = onnx.TensorProto()
                bare.CopyFrom(proto)
                bare.ClearField("name")
                body = bare.SerializeToString()
            if len(body) <= _SHARE_LIMIT:
                key = (proto.data_type, tuple(proto.dims), body)
                if key in seen:
                    renames[name] = seen[key]
                    done["initializers shared"] += 1
                    return
                seen[key] = name
        out.append(proto)

    for t in g.initializer:
        if t.name not in new:
            add(t.name, t)
    for name, arr in new.items():
        if isinstance(arr, _Stored):
            arr.proto.name = name
            add(name, arr.proto)
            continue
        # (np.ascontiguousarray would make a 0-d array 1-d)
        add(name, numpy_helper.from_array(arr if arr.flags.c_contiguous else arr.copy(), name))
    if renames:
        _rename_inputs(g, renames)
    del g.initializer[:]
    g.initializer.extend(out)
