"""PyTorch codegen: an msc Graph to readable ``nn.Module`` source plus safetensors weights.

    src = codegen.torch.generate(g)        # Python source a user can commit
    module = codegen.torch.to_module(g)    # compiled in memory, weights loaded, eval mode
    codegen.torch.save(g, "out/")          # out/model.py + out/model.safetensors, atomically

# NOTE: invariants
# - The generated code imports only torch (and safetensors inside its ``load``), never msc.
# - Model strings reach the code only through ``repr`` or a sanitized identifier (names.py).
# - ``to_module`` compiles with ``compile(src, "<msc-generated-N>", "exec")`` and registers the
#   source with ``linecache``, so tracebacks show generated lines; no file is written. The code
#   runs as a module registered in sys.modules as ``msc_generated_N`` (torch.export's tracing of
#   torch.cond branches imports it).
# - Weights are shared with the graph, not copied, where numpy allows: writable arrays are
#   wrapped with ``torch.from_numpy``; read-only memory maps are re-mapped copy-on-write.
"""

from __future__ import annotations

import itertools
import linecache
import mmap
import os
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np

from codegen.torch import emitters as _emitters  # noqa: F401  (registers every emitter)
from codegen.torch import lowbit
from codegen.torch.core import Arg, NodeEmit, TorchCodegen
from codegen.torch.registry import EMITTERS, MODULE_RULES, emitter, module_rule, unsupported
from msc.io import atomic_dir, safetensors, source
from msc.ir.dtype import DType
from msc.ir.graph import Graph

__all__ = [
    "generate",
    "to_module",
    "save",
    "coverage_markdown",
    "TorchCodegen",
    "Arg",
    "NodeEmit",
    "EMITTERS",
    "MODULE_RULES",
    "emitter",
    "module_rule",
    "unsupported",
    "MODEL_FILE",
    "WEIGHTS_FILE",
    "as_generated",
    "constants_as_nodes",
    "unrolled_nodes",
]

MODEL_FILE = "model.py"
WEIGHTS_FILE = "model.safetensors"
_counter = itertools.count()


def generate(
    graph: Graph,
    codegen: type[TorchCodegen] = TorchCodegen,
    *,
    keep_unused: bool = False,
    drop_unused: bool = False,
    flat: bool = False,
) -> str:
    """Python source of an ``nn.Module`` computing ``graph`` (plus a ``load(path)`` function).

    Weights no node reads are kept when they are the source's state (parameters and
    persistent buffers: its state_dict loads with strict=True) and left out otherwise
    (constants, ONNX initializers; listed in a comment at the top). ``keep_unused`` keeps
    every weight of the graph; ``drop_unused`` leaves out unused parameters too (a persistent
    buffer always stays).

    The module follows the source's hierarchy where the graph records it (torch.export's
    module stack, torch.onnx's scope names): one class per block type, a ``for`` loop over a
    run of equal blocks, state_dict keys unchanged. ``flat=True`` writes one forward instead.

    Raises:
        UnsupportedOpsError: listing every node whose op has no emitter.
    """
    return codegen(graph, keep_unused=keep_unused, drop_unused=drop_unused, flat=flat).generate()


def to_module(
    graph: Graph,
    codegen: type[TorchCodegen] = TorchCodegen,
    *,
    keep_unused: bool = False,
    drop_unused: bool = False,
    flat: bool = False,
) -> Any:
    """Compile the generated module in memory and load the graph's weights (eval mode).

    The module's ``msc_source`` attribute holds the source; tracebacks point into it.
    ``keep_unused``, ``drop_unused`` and ``flat`` as for ``generate``.
    """
    import torch

    cg = codegen(graph, keep_unused=keep_unused, drop_unused=drop_unused, flat=flat)
    src = cg.generate()
    n = next(_counter)
    filename = f"<msc-generated-{n}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    # A module registered by name: torch.export traces torch.cond / torch.while_loop branches
    # with dynamo, which imports the module a function's globals belong to.
    module = types.ModuleType(f"msc_generated_{n}")
    sys.modules[module.__name__] = module
    namespace: dict[str, Any] = module.__dict__
    exec(compile(src, filename, "exec"), namespace)
    with torch.device("meta"):
        model = namespace[cg.class_name_]()
    state = {
        ".".join(cg.plan_.paths[w.name]): tensor_from_numpy(w.numpy())  # type: ignore[union-attr]
        for w in cg.kept_weights()
    }
    state.update({k: tensor_from_numpy(v) for k, v in cg.constants_.items()})
    namespace["_msc_load_weights"](model, state)
    model.eval()
    model.msc_source = src
    return model


def save(
    graph: Graph,
    directory: str | os.PathLike,
    codegen: type[TorchCodegen] = TorchCodegen,
    *,
    keep_unused: bool = False,
    drop_unused: bool = False,
    flat: bool = False,
) -> Path:
    """Write ``model.py`` and ``model.safetensors`` into ``directory`` (replaced atomically).

    ``model.py`` has a ``load(path=None)`` that builds the module and loads the weights.
    ``keep_unused``, ``drop_unused`` and ``flat`` as for ``generate``: the weights left out
    are not written either.
    """
    cg = codegen(graph, keep_unused=keep_unused, drop_unused=drop_unused, flat=flat)
    src = cg.generate()
    tensors = [(w.name, w.type.dtype, w.type.shape, source(w)) for w in cg.kept_weights()]
    # The forward pass's tensor constants (non-persistent buffers), under their buffer keys.
    tensors += [(k, DType.from_numpy(v.dtype), v.shape, v) for k, v in cg.constants_.items()]
    target = Path(directory)
    with atomic_dir(target) as tmp:
        (tmp / MODEL_FILE).write_text(src, encoding="utf-8")
        safetensors.write_lazy(tmp / WEIGHTS_FILE, tensors, metadata={"format": "pt"})
    return target


# ---------------------------------------------------------------- comparing a re-import
def as_generated(graph: Graph, *, keep_unused: bool = False, drop_unused: bool = False) -> Graph:
    """``graph`` as the generated module computes it, to compare a re-import of the module
    with: the ops torch has no counterpart for lowered through their decompositions (as
    ``generate`` writes them), exact no-op arithmetic folded, small integer initializers made
    constants, and the weights ``generate`` leaves out (same flags) left out. ``graph``
    itself is not changed."""
    from msc.ops.decompose import NotDecomposable, decompose
    from msc.ops.decompose import registry as rules
    from msc.ops.rewrite import copy_graph

    cg = TorchCodegen(graph, keep_unused=keep_unused, drop_unused=drop_unused)
    out = cg.graph  # lowered and simplified, as emitted

    def spelled(n: Any) -> bool:  # a helper torch.export captures as the op's decomposition
        if not getattr(cg.emitters.get(n.op), "spelled_out", False):
            return False
        try:
            rules.expand(n)
        except NotDecomposable:
            return False
        return True

    if any(spelled(n) for n in out.nodes):
        out = decompose(out, spelled)
    unused = cg.unused_weights()
    if unused:
        out = copy_graph(out) if out is graph else out
        for name in unused:
            del out.weights[name]
    return out


def unrolled_nodes(graph: Graph) -> list[str]:
    """Names of the nodes of ``graph`` that the generated module computes through a run-time
    helper torch.export unrolls (``registry.unrolled``: a recurrent layer torch's modules do
    not compute, looped over its time steps), so a re-import of the module reads them back
    as their steps; empty when there are none."""
    cg = TorchCodegen(graph)
    ops = {n.op for n in cg.graph.nodes if getattr(cg.emitters.get(n.op), "unrolled", False)}
    if not ops:
        return []
    as_modules = {id(n) for rule in cg.group_rules for g in rule(cg.graph) for n in g.nodes}
    return [n.name or n.op for n in cg.graph.nodes if n.op in ops and id(n) not in as_modules]


def constants_as_nodes(reimported: Graph, source: Graph) -> Graph:
    """``reimported`` (a graph imported from generated code; changed in place) with its
    constant weights that ``source`` does not have made ``constant`` nodes again: the generated
    module holds the forward pass's tensor constants as non-persistent buffers."""
    known = set(source.weights) | {a for w in source.weights.values() for a in w.aliases}
    for name in [n for n, w in reimported.weights.items() if w.role == "constant"]:
        if name not in known:
            w = reimported.weights.pop(name)
            w.replace_all_uses_with(reimported.op("constant", value=w.numpy()))
    reimported.sort()
    return reimported


# ---------------------------------------------------------------- numpy -> torch, no copy
_VIEW_AS = {
    DType.BFLOAT16: (np.int16, "bfloat16"),
    DType.FLOAT8_E4M3FN: (np.uint8, "float8_e4m3fn"),
    DType.FLOAT8_E4M3FNUZ: (np.uint8, "float8_e4m3fnuz"),
    DType.FLOAT8_E5M2: (np.uint8, "float8_e5m2"),
    DType.FLOAT8_E5M2FNUZ: (np.uint8, "float8_e5m2fnuz"),
}


def tensor_from_numpy(arr: np.ndarray) -> Any:
    """A torch tensor sharing ``arr``'s memory where possible (a copy only when it must)."""
    import torch

    if not arr.flags.writeable:
        arr = _copy_on_write(arr)
    if not arr.flags.c_contiguous or arr.dtype.byteorder == ">":
        arr = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("="))
    arr = np.asarray(arr)
    dt = DType.from_numpy(arr.dtype)
    if dt in lowbit.TORCH_NAMES:  # sub-byte types: their carrier (a copy); float8_e8m0
        return lowbit.to_torch(arr)
    if dt in _VIEW_AS:
        raw, name = _VIEW_AS[dt]
        return torch.from_numpy(arr.view(raw)).view(getattr(torch, name))
    return torch.from_numpy(arr)


def _copy_on_write(arr: np.ndarray) -> np.ndarray:
    """A writable view of a read-only file mapping (private pages), else a copy."""
    root = arr
    while isinstance(root.base, np.ndarray):
        root = root.base
    filename = getattr(root, "filename", None)
    if isinstance(root.base, mmap.mmap) and filename and arr.flags.c_contiguous and arr.size:
        start = arr.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        try:
            return np.memmap(
                filename, dtype=arr.dtype, mode="c", offset=root.offset + start, shape=arr.shape
            )
        except (OSError, ValueError):
            pass
    return arr.copy()


def coverage_markdown() -> str:
    """The codegen's section of docs/ops.md: emitted ops, module rules, gaps with reasons."""
    from codegen.torch import emitters as fam
    from msc.ops import registry

    by_family: dict[str, list[str]] = {}
    for op in EMITTERS:
        fn = EMITTERS.get(op)
        family = fn.__module__.rsplit(".", 1)[-1] if fn else "?"
        by_family.setdefault(family, []).append(op)
    from msc.ops.decompose import registry as decompositions

    canon = registry.names()
    covered = [op for op in canon if op in EMITTERS]
    lowered = [op for op in canon if op not in EMITTERS and op in decompositions]
    through = (
        "; written through their decomposition (`msc.ops.decompose`), as torch has no such "
        "op: " + ", ".join(f"`{op}`" for op in lowered)
        if lowered
        else ""
    )
    lines = [
        "## PyTorch codegen (`codegen.torch`)",
        "",
        f"{len(covered)} of {len(canon)} canonical ops have an emitter{through}. "
        "Ops with a module rule become a torch module when their weights are exactly its "
        "parameters: " + ", ".join(f"`{op}`" for op in MODULE_RULES) + ".",
        "",
        "| family | ops |",
        "|---|---|",
    ]
    order = list(fam.FAMILIES) + sorted(set(by_family) - set(fam.FAMILIES))
    for family in order:
        ops = sorted(by_family.get(family, []))
        lines.append(f"| {family} | {', '.join(f'`{o}`' for o in ops)} |")
    missing = [op for op in canon if op not in EMITTERS and op not in decompositions]
    if missing:
        lines += ["", "Not emitted:", ""]
        lines += [f"- `{op}`: {EMITTERS.reason(op)}" for op in missing]
    lines.append("")
    return "\n".join(lines)
