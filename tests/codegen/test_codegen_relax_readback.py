"""Everything codegen.relax writes, read back by msc.from_relax.

Table-driven over the emitter registry: every case of the shared op table
(tests/codegen/test_codegen_onnx_ops.py, with test_codegen_relax's RELAX_CASES) and every ONNX
backend case test_codegen_relax runs (the ops the table lacks, and the run-time shapes, sizes,
axes and pads that codegen.relax writes as ``tensor_to_shape`` + ``match_cast``) goes through
``to_module`` -> ``from_relax``, and the graph read back runs (through codegen.torch) to the
case's expected outputs. ``convert --to relax`` checks its output this way.

Each row's TVMScript also goes through the checked parser (msc.frontend.relax.script): what
codegen.relax writes is inside the subset msc reads without running it.

The rows msc cannot read back are listed in UNREAD with the reason; a listed row that reads
back fails too, so the list stays exact. Every op with a Relax emitter must have a row that
reads back, or be in UNREAD_OPS with the reason.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

tvm = pytest.importorskip("tvm", reason="apache-tvm (the tvm extra) runs the Relax codegen")
torch = pytest.importorskip("torch", reason="codegen.torch runs the graphs read back")

import codegen.relax as cr  # noqa: E402
import msc  # noqa: E402
import tests.codegen.test_codegen_onnx_ops as table  # noqa: E402
import tests.codegen.test_codegen_relax as relax_tests  # noqa: E402
from msc.analysis.model import run_graph  # noqa: E402
from msc.errors import MscError, UnsupportedOpsError  # noqa: E402

_LOOP = (
    "codegen.relax writes a loop as a recursive Relax function; from_relax reads no recursion "
    "back into msc's loop / scan"
)
# Rows (case ids, or an ONNX case-name prefix ending in "*") from_relax cannot read back.
UNREAD: dict[str, str] = {
    "test_loop11": _LOOP,
    "test_scan*": _LOOP,
    # the polynomials of a run-time degree are a loop over the degree
    **{op: _LOOP for op in table.POLYNOMIALS},
}
# Op-table cases codegen.relax does not write at all (test_codegen_relax's expected failures
# that fail in to_module, not on the VM).
NOT_WRITTEN = ("max_pool_indices", "adaptive_max_pool_indices", "reshape_zero")
# Ops with a Relax emitter and no row that reads back, with the reason.
UNREAD_OPS: dict[str, str] = {
    "loop": _LOOP,
    "scan": _LOOP,
}


def _unread(row: str, table: dict[str, str] | None = None) -> str | None:
    for key, why in (UNREAD if table is None else table).items():
        if row == key or (key.endswith("*") and row.startswith(key[:-1])):
            return why
    return None


@functools.cache
def _rows() -> dict[str, tuple]:
    """row id -> (make: () -> (graph, inputs in graph order, expected outputs), rtol, atol)."""
    rows: dict[str, tuple] = {}
    for case in relax_tests.CASES:
        if case.id in NOT_WRITTEN:
            continue

        def make(case=case):
            g, feeds = table.build(case)
            want = case.ref(*case.inputs)
            want = list(want) if isinstance(want, list | tuple) else [want]
            return g, [feeds[v.name] for v in g.inputs], want

        rows[case.id] = (make, case.rtol, case.atol)
    for name, case in relax_tests._onnx_cases().items():
        if name in relax_tests.EXPECTED_ONNX_FAILURES:
            continue

        def make(case=case):
            feeds = case.feeds()
            bound = {n: feeds[n] for n in relax_tests._bound_names(case)}
            g = msc.from_onnx(case.model, constant_inputs=bound)
            return g, [feeds[v.name] for v in g.inputs], [np.asarray(w) for w in case.expected]

        scaled = name.startswith(relax_tests.SCALED_ATOL)
        rows[name] = (make, case.rtol, -case.atol if scaled else case.atol)
    for c in (True, False):
        rows[f"if_{str(c).lower()}"] = (functools.partial(_if_row, c), 1e-6, 1e-6)
    return rows


def _if_row(c: bool):
    """An ``if`` whose branches read outer values (a relax.If; the op table has none)."""
    from msc.ir import DType, Graph, TensorType

    g = Graph("if")
    cond = g.add_input("cond", TensorType(DType.BOOL, ()))
    x = g.add_input("x", TensorType(DType.FLOAT32, (2, 3)))
    w = g.add_weight("w", np.linspace(-1, 1, 3, dtype=np.float32))
    then_g, else_g = Graph("then"), Graph("else")
    then_g.set_outputs([then_g.op("add", then_g.op("relu", x), w), x])
    else_g.set_outputs([else_g.op("neg", x), else_g.op("mul", x, w)])
    node = g.add_node("if", [cond], {"then_branch": then_g, "else_branch": else_g}, name="br")
    g.set_outputs(node.outputs)
    xv, wv = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3), w.numpy()
    want = [np.maximum(xv, 0) + wv, xv] if c else [-xv, xv * wv]
    return g, [np.array(c), xv], want


def test_cases_not_written_are_refused_by_to_module() -> None:
    cases = {c.id: c for c in relax_tests.CASES}
    for name in NOT_WRITTEN:
        g, _ = table.build(cases[name])
        with pytest.raises((UnsupportedOpsError, ValueError)):
            cr.to_module(g)


def _read_back(row: str):
    make, _, _ = _rows()[row]
    g, args, want = make()
    return g, msc.from_relax(cr.to_module(g)), args, want


def _check(row: str) -> None:
    _, rtol, atol = _rows()[row]
    g, back, args, want = _read_back(row)
    got, _ = run_graph(back, args)  # inputs by position: Relax renames some (R -> v_R)
    assert len(got) == len(want), row
    for k, (a, b) in enumerate(zip(got, want)):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, (row, k, a.dtype, a.shape, b.shape)
        tol = abs(atol) * (max(1.0, float(np.max(np.abs(b)))) if atol < 0 and b.size else 1.0)
        if a.dtype.kind in "fc":
            np.testing.assert_allclose(a, b, rtol=rtol, atol=tol, equal_nan=True, err_msg=row)
        else:
            np.testing.assert_array_equal(a, b, err_msg=row)


@pytest.mark.parametrize("row", sorted(_rows()))
def test_read_back_runs_as_the_case_expects(row: str) -> None:
    why = _unread(row)
    if why is None:
        _check(row)
        return
    with pytest.raises(UnsupportedOpsError):
        _read_back(row)


# Rows whose TVMScript does not read back as the module it prints, and why.
_LOOP_SCRIPT = (
    "the loop's recursive function keeps its array constants (TVMScript holds arrays as "
    "metadata only, which the text leaves out; main's are lifted to parameters), or TVM's "
    "parser types its If branches other than its printer shows them"
)
SCRIPT_UNREAD: dict[str, str] = {"test_loop11": _LOOP_SCRIPT, "test_scan*": _LOOP_SCRIPT}


def _script_round_trip(row: str) -> None:
    from msc.frontend.relax.script import parse_script

    g, _, _ = _rows()[row][0]()
    mod = cr.script_module(g)[0]
    tvm.ir.assert_structural_equal(parse_script(cr.script_text(mod), row), mod)


@pytest.mark.parametrize("row", sorted(_rows()))
def test_script_reads_through_the_checked_parser(row: str) -> None:
    """The TVMScript codegen.relax writes for the row is inside the subset msc reads without
    running it (msc.frontend.relax.script), and reads back structurally equal."""
    why = _unread(row, SCRIPT_UNREAD)
    if why is None:
        _script_round_trip(row)
        return
    with pytest.raises((MscError, ValueError)):
        _script_round_trip(row)


@functools.cache
def _ops_read_back() -> dict[str, str]:
    """op -> a row that has a node of it and reads back."""
    found: dict[str, str] = {}
    for row, (make, _, _) in sorted(_rows().items()):
        if _unread(row) is not None:
            continue
        g, _, _ = make()
        for node in g.nodes:
            found.setdefault(node.op, row)
    return found


def test_every_emitter_has_a_row_that_reads_back() -> None:
    have = _ops_read_back()
    missing = sorted(op for op in cr.EMITTERS if op not in have and op not in UNREAD_OPS)
    assert not missing, f"Relax emitters without a row that from_relax reads back: {missing}"
    stale = sorted(op for op in UNREAD_OPS if op in have)
    assert not stale, f"read back by {[have[op] for op in stale]}: drop {stale} from UNREAD_OPS"
    for op, why in {**UNREAD, **UNREAD_OPS}.items():
        assert why.strip(), op


def test_unread_rows_exist() -> None:
    rows = _rows()
    for key in [*UNREAD, *SCRIPT_UNREAD]:
        hit = key in rows or (key.endswith("*") and any(r.startswith(key[:-1]) for r in rows))
        assert hit, f"UNREAD names {key!r}, which is no row"
