"""Every public function of jax.numpy and jax.nn, one small sample each (tests/jax_op_table.py),
through msc.from_jax, generated PyTorch and ONNX against JAX: each function's outcome must be
what bench/results/jax_op_coverage.json (and so docs/jax_op_coverage.md) says, both ways: a
function that stops converting fails, and so does one listed as a miss that converts now
(rerun `python bench/jax_op_coverage.py --markdown docs/jax_op_coverage.md`). A sweep of a few
hundred exports: marked slow (`make test-slow`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("jax", reason="the jax extra (jax, jaxlib) is not installed")

from tests import jax_op_table  # noqa: E402

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "jax_op_coverage.json"
RECORDED = json.loads(RESULTS.read_text())["functions"]


def test_the_table_lists_every_function():
    names = jax_op_table.functions()
    assert sorted(RECORDED) == sorted(names), (
        "jax.numpy / jax.nn changed: rerun `python bench/jax_op_coverage.py --markdown "
        "docs/jax_op_coverage.md`"
    )


def test_most_counted_functions_convert():
    counted = [r for r in RECORDED.values() if r["counted"]]
    both = [r for r in counted if r["pytorch"] and r["onnx"]]
    assert len(counted) >= 300 and len(both) >= 0.85 * len(counted), (len(both), len(counted))
    for name, r in RECORDED.items():
        assert r["counted"] or r["reason"].startswith("not counted: "), name
        assert r["reason"] or (r["pytorch"] and r["onnx"]), f"{name}: a miss with no reason"


# In `make test` too: one function per frontend fix the table drove (a reduction over all axes
# kept 3-d by broadcasts JAX spells out, out-of-range scatter updates dropped, round half away
# from zero, arithmetic right shift, argmax of a mask, an argument the function ignores).
FAST = ["var", "std", "nonzero", "insert", "floor_divide", "right_shift", "select", "iscomplex"]


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=[] if n in FAST else [pytest.mark.slow]) for n in RECORDED]
)
def test_function(name):
    got = jax_op_table.outcome(name)
    want = RECORDED[name]
    for key in ("counted", "pytorch", "onnx"):
        assert got.get(key) == want.get(key), (
            f"{name}: {key} is {got.get(key)}, the table says {want.get(key)} ({got['reason']})"
        )
