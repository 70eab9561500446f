"""The tools an ONNX file is written for, and the spellings each needs (``CONSUMERS``).

    codegen.onnx.save(g, "m.onnx", decompose=codegen.onnx.decompose_for("ort-optimizer"))
    msc convert model.msc -o m.onnx --for ort-optimizer

# NOTE: one file cannot suit every tool. The default (``onnxruntime``) writes the ops
# onnxruntime runs as one kernel (ONNX ``Attention`` from opset 23). onnxruntime's transformer
# optimizer (``onnxruntime.transformers.optimizer.optimize_model``) fuses Add + LayerNorm into
# SkipLayerNormalization (Add + RMSNorm: SkipSimplifiedLayerNormalization) only when its
# symbolic shape inference (``onnxruntime/tools/symbolic_shape_infer.py``) completes, and that
# inference dispatches on ``op_type`` without the domain: ONNX ``Attention`` goes to
# ``_infer_Attention``, written for com.microsoft's Attention, which asserts its third input
# (com.microsoft's bias, ONNX's V) is 1-D. ONNX's V is 3-D or 4-D in every valid file, so no
# file with ONNX ``Attention`` passes it (onnxruntime 1.32); its ``enable_shape_inference=
# False`` option fuses BERT's SkipLayerNorm without the check but not Llama's. The file for it
# writes attention as MatMul/Softmax, which it fuses around as in torch.onnx's file.
# An entry names ops written through their decompositions (``msc.ops.decompose``) and why;
# ``msc convert --for NAME`` records both in its report.
"""

from __future__ import annotations

from dataclasses import dataclass

from msc.errors import MscError

__all__ = ["Consumer", "CONSUMERS", "DEFAULT_CONSUMER", "consumer", "decompose_for"]


@dataclass(frozen=True, slots=True)
class Consumer:
    """A tool msc's ONNX files are written for: the canonical ops written through their
    decompositions for it (``decompose``), and why (``reason``)."""

    name: str
    decompose: tuple[str, ...]
    reason: str


CONSUMERS: dict[str, Consumer] = {
    c.name: c
    for c in (
        Consumer(
            "onnxruntime",
            (),
            "ops onnxruntime runs as one kernel kept whole (ONNX Attention where it has one)",
        ),
        Consumer(
            "ort-optimizer",
            ("attention",),
            "attention as MatMul/Softmax: onnxruntime.transformers.optimizer's shape "
            "inference reads ONNX Attention as com.microsoft's and gives up, leaving Add + "
            "LayerNorm unfused",
        ),
    )
}
DEFAULT_CONSUMER = "onnxruntime"


def consumer(name: str) -> Consumer:
    """The entry of ``CONSUMERS`` named ``name``; an MscError naming the choices otherwise."""
    try:
        return CONSUMERS[name]
    except KeyError:
        raise MscError(f"no ONNX consumer {name!r} (choose from {', '.join(CONSUMERS)})") from None


def decompose_for(name: str) -> tuple[str, ...]:
    """The ops written through their decompositions for the consumer ``name``."""
    return consumer(name).decompose
