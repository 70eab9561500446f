"""One-op TFLite models built by the tests' own writer (codegen.tflite.flatbuf), and runners:
LiteRT's interpreter (the reference), generated PyTorch, ONNX through onnxruntime.

A case is a builtin op, its inputs (run-time arrays or constants), its options and a stated
tolerance. ``build`` writes the model twice: once to let LiteRT compute the output shapes
(its kernels resize outputs when they prepare), then with those shapes declared.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codegen.tflite import flatbuf
from codegen.tflite.registry import OPTIONS_OF, TFL_TYPE
from codegen.tflite.versions import version
from msc.ir.dtype import DType

RNG = np.random.default_rng(0)


@dataclass
class In:
    """An input: a run-time array, a constant (``const``), or a variable tensor (``variable``:
    state the kernel keeps between runs, zeros at the first; ``value`` gives its shape),
    quantized when ``scale`` is set."""

    value: np.ndarray
    const: bool = False
    scale: list[float] | None = None
    zero_point: list[int] | None = None
    axis: int = 0
    variable: bool = False


@dataclass
class Case:
    op: str
    inputs: list[In | None]
    options: dict[str, Any] = field(default_factory=dict)
    outputs: int = 1
    atol: float = 1e-5
    rtol: float = 1e-5
    out_quant: tuple[list[float], list[int]] | None = None  # the output's scale, zero point
    out_dtype: Any = None  # the outputs' dtype (or a list, one per output) when not the input's
    out_shapes: list[list[int]] | None = None  # declared as given (ops that check them)
    id: str = ""

    def __post_init__(self) -> None:
        self.id = self.id or self.op


def f32(*shape: int, lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def i32(values) -> np.ndarray:
    return np.asarray(values, np.int32)


@contextlib.contextmanager
def quiet():
    sys.stderr.flush()
    keep = os.dup(2)
    with open(os.devnull, "wb") as sink:
        os.dup2(sink.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(keep, 2)
        os.close(keep)


def _model(case: Case, out_shapes: list[list[int]], out_types: list[int]) -> bytes:
    tensors, buffers, ins, feeds = [], [b""], [], []
    for k, x in enumerate(case.inputs):
        if x is None:
            ins.append(-1)
            continue
        code = TFL_TYPE[DType.from_numpy(x.value.dtype)]
        buf = 0
        if x.const:
            buffers.append(np.ascontiguousarray(x.value).tobytes())
            buf = len(buffers) - 1
        t = flatbuf.Tensor(f"in{k}", code, list(x.value.shape), buf, is_variable=x.variable)
        if x.scale is not None:
            t.scale, t.zero_point = x.scale, x.zero_point or [0] * len(x.scale)
            t.quantized_dimension = x.axis
        tensors.append(t)
        ins.append(len(tensors) - 1)
        if not x.const and not x.variable:
            feeds.append(len(tensors) - 1)
    outs = []
    for k, (shape, code) in enumerate(zip(out_shapes, out_types)):
        t = flatbuf.Tensor(f"out{k}", code, shape)
        if case.out_quant is not None:
            t.scale, t.zero_point = case.out_quant
        tensors.append(t)
        outs.append(len(tensors) - 1)
    op = flatbuf.Op(case.op, ins, outs, case.options, OPTIONS_OF.get(case.op, ""))
    op.version = version(op, tensors)
    sg = flatbuf.Subgraph(tensors, feeds, outs, [op], "main")
    return flatbuf.write(flatbuf.Model([sg], buffers))


def feeds(case: Case) -> list[np.ndarray]:
    return [x.value for x in case.inputs if x is not None and not x.const and not x.variable]


def run_litert(data: bytes, arrays: list[np.ndarray]) -> list[np.ndarray]:
    from ai_edge_litert.interpreter import Interpreter

    with quiet():
        it = Interpreter(model_content=data)
        for d, a in zip(it.get_input_details(), arrays):
            if list(d["shape"]) != list(a.shape):
                it.resize_tensor_input(d["index"], list(a.shape))
        it.allocate_tensors()
        for d, a in zip(it.get_input_details(), arrays):
            it.set_tensor(d["index"], a)
        it.invoke()
        return [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]


def build(case: Case) -> bytes:
    """The one-op model with its outputs' shapes as LiteRT computes them."""
    first = next((x for x in case.inputs if x is not None and not x.const and not x.variable), None)
    first = first or case.inputs[0]
    dts = case.out_dtype if case.out_dtype is not None else first.value.dtype
    dts = dts if isinstance(dts, list) else [dts] * case.outputs
    codes = [TFL_TYPE[DType.from_numpy(np.dtype(dt))] for dt in dts]
    if case.out_shapes is not None:
        return _model(case, case.out_shapes, codes)
    probe = _model(case, [[1] * first.value.ndim] * case.outputs, codes)
    got = run_litert(probe, feeds(case))
    return _model(
        case, [list(g.shape) for g in got], [TFL_TYPE[DType.from_numpy(g.dtype)] for g in got]
    )


def run_torch(graph, arrays: list[np.ndarray]) -> list[np.ndarray]:
    import torch

    import codegen.torch

    m = codegen.torch.to_module(graph)
    with torch.no_grad():
        out = m(*[torch.from_numpy(np.array(a)) for a in arrays])
    return [o.numpy() for o in _flat(out)]


def _flat(out) -> list:
    """The tensors of a module's outputs in order, through the nesting a source's output
    structure gives them (jnp.histogramdd's ``(counts, [edges, ...])``)."""
    if isinstance(out, tuple | list):
        return [t for o in out for t in _flat(o)]
    return [out]


def run_onnx(graph, arrays: list[np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    import codegen.onnx

    proto = codegen.onnx.to_model(graph)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return list(sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), arrays)}))


def close(got: list[np.ndarray], ref: list[np.ndarray], atol: float, rtol: float) -> str:
    """ "" when every output agrees within the tolerance, else what differs."""
    if len(got) != len(ref):
        return f"{len(got)} outputs for {len(ref)}"
    for k, (a, r) in enumerate(zip(got, ref)):
        a, r = np.asarray(a), np.asarray(r)
        if a.shape != r.shape:
            return f"output {k}: shape {a.shape} vs {r.shape}"
        if r.dtype.kind in "biu" and a.dtype.kind in "biu":
            err = np.abs(a.astype(np.int64) - r.astype(np.int64)).max(initial=0)
            if err > atol:
                return f"output {k}: off by {err}"
            continue
        a64, r64 = a.astype(np.float64), r.astype(np.float64)
        if not np.allclose(a64, r64, atol=atol, rtol=rtol, equal_nan=True):
            return f"output {k}: max abs {np.nanmax(np.abs(a64 - r64)):.3g}"
    return ""
