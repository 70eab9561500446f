"""The Keras 3 frontend: ``from_keras(model | path)`` -> msc Graph.

A Keras model object (Sequential or functional) is walked layer by layer; a ``.keras`` file is
first checked as data (no Lambda layer, no class outside Keras in its config but codegen.keras'
``msc>SourceWeight``, built with msc's own class) and then loaded by Keras itself with
``safe_mode=True`` on the torch backend (no TensorFlow). One converter per
layer class (``@converter("Conv2D")``), grouped by op family in this package.

# NOTE: invariants
# - Layer names are the graph's value names (a nested model's layers as ``outer/inner``);
#   weights are named by their Keras variable path (``block1_conv1/kernel``) and kept in
#   Keras' layout.
# - channels_last stays the graph's interface layout (transposes around layout-sensitive ops).
# - Every unsupported layer is reported at once (UnsupportedOpsError).
"""

from __future__ import annotations

import os
from typing import Any

from msc.frontend.keras.coverage import coverage_markdown
from msc.frontend.keras.importer import Importer, keras_module, load_keras
from msc.frontend.keras.registry import CONVERTERS, ConverterRegistry, converter
from msc.ir import Graph
from msc.ops import import_families

__all__ = [
    "coverage_markdown",
    "from_keras",
    "load_keras",
    "converter",
    "CONVERTERS",
    "ConverterRegistry",
    "supported_layers",
    "is_subclassed",
]


def from_keras(
    model: Any,
    *,
    registry: ConverterRegistry = CONVERTERS,
    name: str = "",
    trust_code: bool = False,
    translate_export: Any = None,
) -> Graph:
    """Translate a Keras 3 model into an msc Graph.

    Args:
        model: a Keras model object (Sequential or functional; a nested model is flattened
            with its name as a path prefix; a layer of a class outside Keras, as KerasHub's
            ``TransformerEncoder``, is traced on the torch backend: msc.frontend.keras.traced),
            or the path of a ``.keras`` file (checked as data, then loaded by Keras with
            ``safe_mode=True``: Lambda layers and custom objects are refused by name;
            codegen.keras' SourceWeight is built with msc's own class).
        registry: the converter registry (tests may pass their own).
        name: the graph's name (default: the model's).
        trust_code: for a path: let Keras build classes the file names from installed
            packages (a KerasHub model's), which runs their code (see ``load_keras``).
        translate_export: ``msc.from_exported_program`` (msc.from_keras passes it): how a
            layer of a class outside Keras is read once traced; None refuses such layers.

    Returns:
        The graph, its inputs and outputs in channels_last as the model has them.

    Raises:
        UnsupportedOpsError: every layer (with its name) msc cannot translate.
        BadModelError: the file is not a readable .keras model, or loading it would run code.
    """
    if isinstance(model, str | os.PathLike):
        model = load_keras(model, trust_code=trust_code)
    else:
        keras_module()
    from msc.text.check import checked

    return checked(Importer(model, registry, name, translate_export).run())


def is_subclassed(model: Any) -> bool:
    """``model`` is a subclassed ``keras.Model`` (not Sequential, no functional graph)."""
    if isinstance(model, str | os.PathLike):
        return False
    keras = keras_module()
    return (
        isinstance(model, keras.Model)
        and not hasattr(model, "_nodes_by_depth")
        and type(model).__name__ != "Sequential"
    )


def supported_layers() -> list[str]:
    """The Keras layer classes msc reads, sorted."""
    return sorted(CONVERTERS)


# One module per op family, named as in msc.ops; importing one registers its converters.
import_families(__name__)
