"""TVM Relax codegen: an msc Graph as a Relax ``IRModule``, TVMScript, or a compiled function.

    mod = codegen.relax.to_module(g, params="inputs")   # tvm.IRModule: "main", a function
                                                        # per block type (flat=True: main)
    text = codegen.relax.to_script(g)                   # TVMScript; tvm.script.from_source reads it
    f = codegen.relax.build(g, target="llvm")           # runs on the Relax VM
    outputs = f(*inputs)                                # torch tensors / numpy in, torch out
    codegen.relax.save(g, "out/")                       # module.py + model.safetensors + load.py

Needs apache-tvm (the ``tvm`` extra). Each canonical op has an emitter in the module of its
family (elementwise.py, nn.py, shape.py, ...); an op Relax lacks is lowered through
``msc.ops.decompose``. Every node that can be expressed neither way is reported at once in one
``msc.errors.UnsupportedOpsError``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from codegen.relax.module import PARAMS, RelaxBuilder, lift_constants
from codegen.relax.registry import (
    EMITTERS,
    RELAX_DTYPE,
    Emit,
    EmitterRegistry,
    Unsupported,
    emitter,
    relax_dtype,
    unsupported,
)
from msc.io import atomic_dir, safetensors, source
from msc.io.native import native_stderr_captured
from msc.ir import structure
from msc.ir.dtype import DType
from msc.ir.graph import Graph
from msc.ops import import_families

__all__ = [
    "to_module",
    "to_script",
    "script_text",
    "script_module",
    "build",
    "save",
    "EMITTERS",
    "emitter",
    "unsupported",
    "Emit",
    "EmitterRegistry",
    "RelaxBuilder",
    "Unsupported",
    "RELAX_DTYPE",
    "relax_dtype",
    "PARAMS",
    "SCRIPT_FILE",
    "WEIGHTS_FILE",
    "LOADER_FILE",
    "coverage_markdown",
]

SCRIPT_FILE = "module.py"
WEIGHTS_FILE = "model.safetensors"
LOADER_FILE = "load.py"


def to_module(graph: Graph, *, params: str = "inputs", **kwargs: Any) -> Any:
    """Translate ``graph`` to a ``tvm.IRModule``: ``main``, and one private function per block
    type of the source's module hierarchy (``GPT2Block``, called once per layer with that
    layer's weights; codegen.relax.blocks), unless ``flat=True``.

    Args:
        graph: the graph to translate (left unchanged).
        params: "inputs": the graph inputs, then the parameters, are ``main``'s parameters
            (``num_input`` and ``params`` attributes as TVM's frontends write them; buffers and
            constants bound); "bound": every weight is a constant.
        **kwargs: passed to ``RelaxBuilder`` (``emitters``, ``decompositions``, ``flat``).

    Raises:
        UnsupportedOpsError: every node (custom ops included) that neither an emitter nor a
            decomposition can express, all at once.
    """
    with native_stderr_captured():  # TVM's type inference logs notes to stderr
        return RelaxBuilder(graph, params=params, **kwargs).run()


def _detached(mod: Any) -> Any:
    from tvm import relax

    return relax.frontend.detach_params(mod)[0]


def script_module(graph: Graph, *, flat: bool = False) -> tuple[Any, list, list]:
    """The module ``to_script`` prints: ``to_module(graph, flat=flat)`` without its ``params``
    data, with every array constant (buffers, constant nodes, emitters' arrays) lifted to a
    parameter after the weights (a block function's own arrays are passed by its calls).
    Returns (module, the weights taken as parameters, the lifted arrays)."""
    builder = RelaxBuilder(graph, params="inputs", flat=flat)
    with native_stderr_captured():
        mod, arrays = lift_constants(_detached(builder.run()))
    return mod, builder.param_weights, arrays


# TVM's printer writes a non-finite scalar as R.const("-inf", "float32"), which its parser
# refuses ("value has to be scalar or Tensor"); float("-inf") is what it reads.
_NONFINITE = re.compile(r'R\.const\("([+-]?(?:inf|nan))", ')


def script_text(mod: Any) -> str:
    """TVMScript of a Relax module, every constant written as TVM's parser reads it back."""
    return _NONFINITE.sub(r'R.const(float("\1"), ', mod.script(show_meta=False))


def to_script(graph: Graph, *, flat: bool = False) -> str:
    """TVMScript of ``script_module(graph, flat=flat)``: ``main`` takes the graph inputs, the
    weights, then the array constants as parameters (scalars stay inline, non-finite ones as
    ``float("-inf")``); ``tvm.script.from_source`` reads it back to a structurally equal
    module."""
    return script_text(script_module(graph, flat=flat)[0])


def _to_tvm(x: Any) -> Any:
    import tvm

    if hasattr(x, "detach") and hasattr(x, "numpy"):  # a torch tensor: numpy owns alignment
        x = x.detach().cpu().contiguous().numpy()
    return tvm.runtime.tensor(np.array(x, order="C"))  # 0-d stays 0-d


def _from_tvm(x: Any) -> Any:
    import torch

    if hasattr(x, "numpy"):
        arr = np.array(x.numpy())
        if arr.dtype.name == "bfloat16":  # ml_dtypes' bfloat16: torch reads its bits
            return torch.from_numpy(arr.view(np.uint16)).view(torch.bfloat16)
        return torch.from_numpy(arr)
    if isinstance(x, tuple | list) or type(x).__name__ == "Array":
        return [_from_tvm(v) for v in x]
    return x


def inline_blocks(mod: Any) -> Any:
    """``mod`` with its private functions (the block types ``to_module`` writes) inlined into
    their callers, as compiled: the functions are how the source reads, and inlined, TVM's
    passes see what the flat graph gives them (constants bound in ``main`` folded into each
    layer's operators; measured: GPT-2's compiled run took about twice as long uninlined)."""
    from tvm import relax

    return relax.transform.InlinePrivateFunctions()(mod)


def build(graph: Graph, target: str = "llvm", *, flat: bool = False) -> Any:
    """Compile ``graph`` with ``tvm.compile`` (weights bound) for the Relax VM (``flat``: as
    ``to_module``).

    Returns:
        A callable taking torch tensors or numpy arrays in graph-input order and returning
        torch tensors in the source's output structure. Its ``module`` attribute holds the
        compiled IRModule.
    """
    import tvm
    from tvm import relax

    mod = to_module(graph, params="bound", flat=flat)
    with native_stderr_captured():
        ex = tvm.compile(inline_blocks(mod), target=target)
    vm = relax.VirtualMachine(ex, tvm.cpu())
    n_out = len(graph.outputs)
    tree = graph.output_tree

    def run(*inputs: Any) -> Any:
        if len(inputs) != len(graph.inputs):
            raise TypeError(f"expected {len(graph.inputs)} inputs, got {len(inputs)}")
        out = vm["main"](*[_to_tvm(x) for x in inputs])
        flat = _from_tvm(out)
        if not isinstance(flat, list):
            flat = [flat]
        if len(flat) != n_out:
            raise AssertionError(f"Relax returned {len(flat)} outputs for {n_out}")
        if tree is None:
            return flat[0] if n_out == 1 else tuple(flat)
        return structure.rebuild(tree, flat)

    run.module = mod  # type: ignore[attr-defined]
    return run


_LOADER = '''"""Load the Relax module saved beside this file and compile it (needs apache-tvm).

    import load
    f = load.load()            # a Relax VM function; f(*inputs) returns TVM tensors
"""

import json
from pathlib import Path

import numpy as np
import tvm
from safetensors.numpy import load_file, safe_open
from tvm import relax

HERE = Path(__file__).resolve().parent


def module(directory=None):
    """The IRModule with the saved weights bound as constants."""
    d = Path(directory) if directory else HERE
    mod = tvm.script.from_source((d / "module.py").read_text(encoding="utf-8"))
    with safe_open(str(d / "model.safetensors"), framework="numpy") as f:
        names = json.loads(f.metadata()["msc.relax.params"])
    weights = load_file(str(d / "model.safetensors"))
    main = mod["main"]
    num_input = int(main.attrs["num_input"]) if main.attrs and "num_input" in main.attrs else 0
    binding = {
        p: tvm.runtime.tensor(np.ascontiguousarray(weights[n]))
        for p, n in zip(main.params[num_input:], names)
    }
    return relax.transform.BindParams("main", binding)(mod)


def load(directory=None, target="llvm"):
    """Compile the module for ``target`` and return its ``main`` on the Relax VM. The block
    functions are inlined first: the compiled code is the flat graph's, folded across calls."""
    mod = relax.transform.InlinePrivateFunctions()(module(directory))
    ex = tvm.compile(mod, target=target)
    return relax.VirtualMachine(ex, tvm.cpu())["main"]
'''


def save(graph: Graph, directory: str | os.PathLike, *, flat: bool = False) -> Path:
    """Write ``module.py`` (TVMScript of ``script_module(graph, flat=flat)``),
    ``model.safetensors`` (the
    parameters ``main`` takes after its inputs, by name; lifted constants as
    ``__msc_const_<k>``) and ``load.py`` (``load(directory=None, target="llvm")``) into
    ``directory``, replaced atomically."""
    mod, weights, arrays = script_module(graph, flat=flat)
    text = script_text(mod)
    names = [w.name for w in weights] + [f"__msc_const_{i}" for i in range(len(arrays))]
    specs = [(w.name, w.type.dtype, w.type.shape, source(w)) for w in weights]
    specs += [
        (n, DType.from_numpy(a.dtype), a.shape, a) for n, a in zip(names[len(weights) :], arrays)
    ]
    target = Path(directory)
    with atomic_dir(target) as tmp:
        (tmp / SCRIPT_FILE).write_text(text, encoding="utf-8")
        safetensors.write_lazy(
            tmp / WEIGHTS_FILE,
            specs,
            metadata={"format": "np", "msc.relax.params": json.dumps(names)},
        )
        (tmp / LOADER_FILE).write_text(_LOADER, encoding="utf-8")
    return target


# One module per op family, named as in msc.ops; importing one registers its emitters.
FAMILIES = tuple(import_families(__name__))


def coverage_markdown() -> str:
    """The codegen's section of docs/ops.md: per family, the ops with a Relax emitter and the
    ops lowered through a decomposition; then every op Relax cannot express, with the reason."""
    from msc.ops import registry
    from msc.ops.decompose import registry as rules

    canon = registry.names()
    emitted = [op for op in canon if op in EMITTERS]
    decomposed = [op for op in canon if op not in EMITTERS and op in rules]
    by_family: dict[str, tuple[list[str], list[str]]] = {}
    for op in canon:
        fam = registry.get(op).family
        em, de = by_family.setdefault(fam, ([], []))
        if op in EMITTERS:
            em.append(op)
        elif op in rules:
            de.append(op)
    lines = [
        "## TVM Relax codegen (`codegen.relax`)",
        "",
        f"{len(emitted)} of {len(canon)} canonical ops have a Relax emitter and "
        f"{len(decomposed)} more are lowered through their decomposition (`msc.ops.decompose`) "
        "into ops that have one. Shapes, sizes, scales, axes, pads, k and limits computed at "
        "run time are read as symbolic dims (checked at run time to fit). An emitter may "
        "still refuse a particular node (an attribute value Relax lacks); the node then goes "
        "through the op's decomposition if it has one.",
        "",
        "| family | emitted | decomposed |",
        "|---|---|---|",
    ]
    for fam in sorted(by_family):
        em, de = by_family[fam]
        cells = [", ".join(f"`{o}`" for o in sorted(ops)) or "-" for ops in (em, de)]
        lines.append(f"| {fam} | {cells[0]} | {cells[1]} |")
    missing = [op for op in canon if op not in EMITTERS and op not in rules]
    if missing:
        lines += ["", "Not expressed in Relax:", ""]
        lines += [f"- `{op}`: {EMITTERS.reason(op)}" for op in sorted(missing)]
    lines.append("")
    return "\n".join(lines)
