"""codegen.relax with shape-setting inputs fed at run time (tests/codegen/relax_runtime_cases.py):
each run-time form compiled once and run with several values against ONNX's reference, values
that do not fit stopped by the VM, and the TVMScript of each form read back."""

from __future__ import annotations

import numpy as np
import pytest

tvm = pytest.importorskip("tvm", reason="apache-tvm (the tvm extra) runs the Relax codegen")

import codegen.relax as cr  # noqa: E402
from tests.codegen.relax_runtime_cases import (  # noqa: E402
    EXTREME_SLICES,
    RUNTIME_FORMS,
    RUNTIME_MISFITS,
    drop_empty_inputs,
    i64,
)


# --------------------------------------------------------------- run-time shape inputs
def _runtime_form(name):
    """(compiled function, graph, model, feeds) of a RUNTIME_FORMS row."""
    import msc

    model, feeds = RUNTIME_FORMS[name]
    model = drop_empty_inputs(model)
    g = msc.from_onnx(model)
    return cr.build(g), g, model, feeds


@pytest.mark.parametrize("name", sorted(RUNTIME_FORMS))
def test_runtime_shape_input_against_onnx_reference(name: str) -> None:
    """Each op whose shape-setting operand is a graph input runs through Relax with it fed at
    run time: one compiled function, several values (so several output shapes), each equal to
    ONNX's reference implementation."""
    from onnx.reference import ReferenceEvaluator

    f, g, model, feed_sets = _runtime_form(name)
    ref = ReferenceEvaluator(model)
    shapes = set()
    for feeds in feed_sets:
        want = ref.run(None, feeds)
        got = f(*[feeds[v.name] for v in g.inputs])
        got = list(got) if isinstance(got, (tuple, list)) else [got]
        assert len(got) == len(want), name
        for a, b in zip(got, want):
            a = a.numpy()
            assert a.shape == b.shape and a.dtype == b.dtype, (name, feeds, a.shape, b.shape)
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"{name} {feeds}")
        shapes.add(tuple(got[0].shape))
    if not name.startswith(
        ("trilu", "cumsum", "cumprod", "reducesumsquare_empty")
    ):  # their run-time input sets values only
        assert len(shapes) == len(feed_sets), f"{name}: the output shape did not follow the input"


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "wrap"])
def test_runtime_negative_pads_crop(mode: str) -> None:
    """Negative run-time pads crop (ONNX's reference refuses them; numpy is the reference)."""
    f, g, _, feed_sets = _runtime_form(f"pad_{mode}")
    x, v = feed_sets[0]["x"], np.float32(7.0)
    feeds = {"x": x, "p": i64(0, -1, 2, -2), "v": v}
    got = f(*[feeds[n.name] for n in g.inputs]).numpy()
    kw = {"constant_values": v} if mode == "constant" else {}
    np_mode = {"edge": "edge", "reflect": "reflect", "wrap": "wrap"}.get(mode, "constant")
    want = np.pad(x[:, 1:2], [(0, 2), (0, 0)], mode=np_mode, **kw)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("bounds", EXTREME_SLICES, ids=range(len(EXTREME_SLICES)))
def test_runtime_slice_at_int64_extremes(bounds) -> None:
    from onnx.reference import ReferenceEvaluator

    f, g, model, feed_sets = _runtime_form("slice")
    feeds = {"x": feed_sets[0]["x"], **{k: i64(*v) for k, v in zip("beas", bounds)}}
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    got = f(*[feeds[v.name] for v in g.inputs]).numpy()
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "name, bad", RUNTIME_MISFITS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(RUNTIME_MISFITS)]
)
def test_runtime_shape_that_does_not_fit_is_refused_at_run_time(name, bad) -> None:
    f, g, _, feed_sets = _runtime_form(name)
    feeds = {**feed_sets[0], **bad}
    with pytest.raises(Exception, match="match_cast"):
        f(*[feeds[v.name] for v in g.inputs])


@pytest.mark.parametrize("name", sorted(RUNTIME_FORMS))
def test_runtime_form_script_reads_back_structurally_equal(name: str) -> None:
    """The TVMScript of each run-time form (match_cast, tensor_to_shape, symbolic dims) reads
    back to a structurally equal module."""
    import msc

    g = msc.from_onnx(drop_empty_inputs(RUNTIME_FORMS[name][0]))
    text = cr.to_script(g)
    assert "match_cast" in text or name.startswith(("trilu", "reducesumsquare_empty")), name
    tvm.ir.assert_structural_equal(tvm.script.from_source(text), cr.script_module(g)[0])
