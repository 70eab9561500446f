"""One family vocabulary: an op's schema, converters and emitters are found from its family.

A family is a module of msc.ops (control, elementwise, nn, ...); each canonical op's torch and
ONNX emitters live in the codegen module of that name, and every converter of both frontends
lives in a module named after a family (or in the listed infrastructure modules).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import codegen.onnx  # noqa: F401 - registers the emitters
import codegen.torch  # noqa: F401 - registers the emitters
import msc.frontend.onnx  # noqa: F401 - registers the converters
import msc.frontend.torch  # noqa: F401
from codegen.onnx.registry import EMITTERS as onnx_emitters
from codegen.torch.registry import EMITTERS as torch_emitters
from msc.frontend.onnx.registry import CONVERTERS as onnx_converters
from msc.frontend.torch.registry import CONVERTERS as torch_converters
from msc.ops import registry as ops

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = {
    p.stem
    for p in (ROOT / "msc" / "ops").glob("*.py")
    if p.stem not in ("__init__", "schema", "infer", "doc")
}


def _family(op: str) -> str:
    return ops.get(op).family


def test_every_schema_lives_in_a_family_module():
    assert {_family(op) for op in ops.names()} <= FAMILIES


@pytest.mark.parametrize("op", ops.names())
def test_emitters_live_in_the_family_module_of_their_op(op):
    fam = _family(op)
    fn = torch_emitters.get(op)
    if fn is not None:
        assert fn.__module__ == f"codegen.torch.emitters.{fam}", (op, fn.__module__)
    for since in onnx_emitters.versions(op):
        em = onnx_emitters.lookup(op, since)
        assert em.fn.__module__ == f"codegen.onnx.{fam}", (op, since, em.fn.__module__)


def test_frontend_converters_live_in_family_modules():
    infrastructure = {"fx", "fx_modules", "translate", "export", "importer", "registry"}
    fns = [torch_converters.lookup(k)[0] for k in torch_converters.keys()]
    for domain, op_type, versions in onnx_converters.ops():
        fns += [onnx_converters.lookup(op_type, v, domain).fn for v in versions]
    modules = {fn.__module__.rsplit(".", 1)[1] for fn in fns if fn is not None}
    assert modules <= FAMILIES | infrastructure, sorted(modules - FAMILIES - infrastructure)


def test_no_grab_bag_modules():
    names = {p.stem for tree in ("msc", "codegen") for p in (ROOT / tree).rglob("*.py")}
    assert not {n for n in names if n in ("ext", "extra", "helpers_ext", "helpers_rnn")}
    assert not {n for n in names if n.startswith("ops_")}


def test_relax_emitters_and_converters_live_in_family_modules():
    pytest.importorskip("tvm", reason="apache-tvm (the tvm extra) is needed for codegen.relax")
    import codegen.relax as cr
    from msc.frontend.relax import CONVERTERS as relax_converters

    misplaced = [
        (op, cr.EMITTERS.get(op).__module__)
        for op in cr.EMITTERS
        if cr.EMITTERS.get(op).__module__ != f"codegen.relax.{_family(op)}"
    ]
    assert not misplaced, misplaced
    modules = {fn.__module__.rsplit(".", 1)[1] for _, fn in relax_converters.items()}
    assert modules <= FAMILIES, sorted(modules - FAMILIES)


def test_keras_emitters_and_converters_live_in_family_modules():
    # neither package imports keras until a model is read or built
    import codegen.keras as ck
    from msc.frontend.keras import CONVERTERS as keras_converters

    misplaced = [
        (op, ck.EMITTERS.get(op).__module__)
        for op in ck.EMITTERS
        if ck.EMITTERS.get(op).__module__ != f"codegen.keras.{_family(op)}"
    ]
    assert not misplaced, misplaced
    modules = {keras_converters.get(c).__module__.rsplit(".", 1)[1] for c in keras_converters}
    assert modules <= FAMILIES, sorted(modules - FAMILIES)
