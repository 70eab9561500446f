"""msc.ops.decompose: the registry, whole-graph rewriting, and every rule checked numerically.

Each rule is run on the op cases of test_codegen_onnx_ops (the same inputs and torch/numpy
references): the graph is decomposed, the lowered graph must no longer contain the op, and
onnxruntime running the lowered graph must agree with the reference for the high-level op.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import msc
from msc.ir import DType, Graph, SymDim, TensorType
from msc.ops.decompose import Builder, DecompositionRegistry, NotDecomposable, decompose
from msc.ops.decompose import registry as rules

ort = pytest.importorskip("onnxruntime", reason="onnxruntime runs the lowered graphs")
import codegen.onnx as conx  # noqa: E402
import tests.codegen.test_codegen_onnx_ops as ops_tests  # noqa: E402

RULE_CASES = [c for c in ops_tests.CASES if c.op in rules]
# Cases a rule declines, with the reason it must give.
DECLINED = {"adaptive_max_pool_indices": "indices are not decomposed"}


def test_every_rule_has_a_numeric_case() -> None:
    assert {r.op for r in rules} <= {c.op for c in RULE_CASES}


@pytest.mark.parametrize("case", RULE_CASES, ids=[c.id for c in RULE_CASES])
def test_rule_matches_the_high_level_op(case) -> None:
    g, feeds = ops_tests.build(case)
    before = msc.to_text(g)
    if case.id in DECLINED:
        with pytest.raises(NotDecomposable, match=DECLINED[case.id]):
            decompose(g, [case.op])
        return
    low = decompose(g, [case.op])
    assert msc.to_text(g) == before, "decompose changed its input graph"
    assert case.op not in {n.op for n in low.nodes}, f"{case.id}: {case.op} is still there"
    assert [v.name for v in low.outputs] == [v.name for v in g.outputs]
    assert [v.type for v in low.outputs] == [v.type for v in g.outputs]
    # Also fully lowered (every rule applied recursively) where that is possible.
    full = decompose(g, lambda n: n.op in rules and n.op != "softmax")
    want = case.ref(*case.inputs)
    want = list(want) if isinstance(want, (list, tuple)) else [want]
    for graph in (low, full):
        model = conx.to_model(graph)
        got = ops_tests.run(model, feeds)
        ops_tests.check_outputs(got, want, g, case.rtol * 10, case.atol * 10, case.id)


def test_weights_are_shared_not_copied() -> None:
    g = Graph("lin")
    x = g.add_input("x", TensorType(DType.FLOAT32, (2, 3, 4)))
    w = g.add_weight("layer.weight", np.ones((5, 4), np.float32))
    b = g.add_weight("layer.bias", np.zeros(5, np.float32))
    g.set_outputs([g.add_node("linear", [x, w, b], name="layer", output_names=["y"]).output])
    low = decompose(g)
    assert low.weights["layer.weight"].numpy() is w.numpy()
    assert [n.op for n in low.nodes] == ["transpose", "matmul", "add"]
    assert low.outputs[0].name == "y"
    assert all(n.name.startswith("layer/") for n in low.nodes)
    assert not w.uses or all(u[0] in g.nodes for u in w.uses)  # the source graph is untouched


def test_rule_that_cannot_apply_says_why() -> None:
    g = Graph("gn")
    c = SymDim("c")
    x = g.add_input("x", TensorType(DType.FLOAT32, (2, c, 4)))
    w = g.add_input("w", TensorType(DType.FLOAT32, (c,)))
    g.set_outputs([g.op("group_norm", x, w, w, num_groups=2)])
    with pytest.raises(NotDecomposable, match="static dim"):
        decompose(g)
    # The codegen reports it with both reasons (no emitter at 17, no decomposition).
    with pytest.raises(msc.errors.UnsupportedOpsError, match="group_norm.*static dim"):
        conx.to_model(g, 17)
    conx.to_model(g, 21)  # the emitter needs no static dims


def test_registry_is_scoped_and_rejects_duplicates() -> None:
    r = DecompositionRegistry()

    @r("relu")
    def relu(b: Builder, x):
        return b.op("maximum", x, b.scalar(0.0, x))

    with pytest.raises(ValueError, match="twice"):
        r.register("relu", relu)
    with pytest.raises(ValueError, match="unknown op"):
        r.register("no_such_op", relu)
    g = Graph("r")
    x = g.add_input("x", TensorType(DType.FLOAT32, (3,)))
    g.set_outputs([g.op("relu", x)])
    low = decompose(g, rules=r)
    assert [n.op for n in low.nodes] == ["constant", "maximum"]
    assert "relu" in r and "relu" not in rules


def test_unknown_dims_only_where_a_rule_needs_them() -> None:
    g = Graph("ln")
    x = g.add_input("x", TensorType(DType.FLOAT32, (SymDim("batch"), SymDim("seq"), 8)))
    g.set_outputs([g.op("layer_norm", x, eps=1e-5), g.op("gelu", x, approximate="tanh")])
    low = decompose(g)
    assert {n.op for n in low.nodes} >= {"reduce_mean", "tanh"}
    xv = np.random.default_rng(1).standard_normal((3, 5, 8)).astype(np.float32)
    got = ops_tests.run(conx.to_model(low, 13), {"x": xv})
    torch = pytest.importorskip("torch")
    ref = torch.nn.functional.layer_norm(torch.from_numpy(xv), (8,)).numpy()
    np.testing.assert_allclose(got[0], ref, rtol=1e-4, atol=1e-5)


def test_decompositions_import_no_framework() -> None:
    code = (
        "import sys, msc.ops.decompose; "
        "bad = [m for m in ('torch', 'onnx', 'onnxruntime') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
