"""The Relax frontend: a TVM Relax function as an msc Graph.

    g = msc.from_relax(ir_module, function="main")
    mod = parse_script(text, "module.py")   # TVMScript, read without running its Python

Needs apache-tvm (the ``tvm`` extra). One converter per Relax op, registered by the op's name
(``relax.nn.conv2d``) in the module of its canonical family (elementwise.py, nn.py, ...).
"""

from __future__ import annotations

from typing import Any

from msc.frontend.relax.importer import CONVERTERS, RelaxImporter, converter
from msc.frontend.relax.script import ScriptRefused, check_script, parse_script
from msc.ir.graph import Graph
from msc.ops import import_families

__all__ = [
    "from_relax",
    "parse_script",
    "check_script",
    "ScriptRefused",
    "CONVERTERS",
    "converter",
    "RelaxImporter",
]


def from_relax(module: Any, function: str = "main") -> Graph:
    """Translate a Relax function of ``module`` (an IRModule, or a relax.Function).

    ``main``'s first ``num_input`` parameters are the inputs; the others are weights (with the
    data of the ``params`` attribute when present). Dataflow blocks, tuples, relax.If (an ``if``
    node with its branches as subgraphs), shape variables (with their bound attributes) and
    bound constants are read.

    Raises:
        UnsupportedOpsError: every call (call_tir, call_dps_packed, ops without a converter,
            or inside a relax.If branch) that has no canonical form, all at once.
    """
    return RelaxImporter(module, function).run()


FAMILIES = tuple(import_families(__name__))
