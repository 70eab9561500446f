"""ONNX backend node conformance: ONNX -> msc graph -> generated PyTorch -> compare.

Every case ``onnx.backend.test.case.node.collect_testcases`` generates runs through
``msc.from_onnx`` and ``codegen.torch.to_module``; outputs are compared with the case's expected
outputs at the case's rtol/atol, dtypes and shapes included. Every failing case must be in
tests/onnx_conformance_excludes.py with a reason, and an excluded case that passes fails the
test, so the list stays honest. Until ``codegen.torch`` exists the suite checks the import alone.

Every graph input is fed at run time, as a user runs a model: shape-setting inputs (ReduceSum
axes, Resize scales, Pad pads, Slice bounds, TopK k, ...) reach the generated module as tensors.
The exclude list is for this mode. The summary also counts the cases that pass when those inputs
are bound as constants at import (``constant_inputs=``, an option, never a need), and the cases
onnxruntime itself passes on the original models, which the run-time count must reach.
"""

from __future__ import annotations

import importlib
import traceback
from collections import Counter
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import pytest

import msc
from msc.frontend.onnx import OnnxUnsupportedOpsError
from tests.onnx_cases import BackendCase, backend_cases
from tests.onnx_conformance_excludes import EXCLUDES

# The issue asks for 0.85 (88% measured with control flow, RNNs and sub-byte dtypes).
TARGET = 0.85


def _torch_codegen():
    try:
        mod = importlib.import_module("codegen.torch")
    except ImportError:
        return None
    return mod if hasattr(mod, "to_module") else None


@dataclass
class Outcome:
    name: str
    stage: str  # "pass", or where it failed: import | codegen | run | compare
    detail: str = ""
    bound: bool = False


def import_case(case: BackendCase, bind: bool = True) -> tuple[msc.Graph, bool]:
    """from_onnx; with ``bind``, binding shape-setting graph inputs to the case's values when
    the frontend asks for them."""
    if not bind:
        return msc.from_onnx(case.model), False
    feeds = case.feeds()
    bound: dict[str, np.ndarray] = {}
    while True:  # a converter names the first input it needs; bind until none is asked for
        try:
            return msc.from_onnx(case.model, constant_inputs=bound), bool(bound)
        except OnnxUnsupportedOpsError as e:
            new = [n for n in e.runtime_inputs if n not in bound]
            if not new:
                raise
            bound.update({n: np.asarray(feeds[n]) for n in new})


# ---------------------------------------------------------------------------- numpy <-> torch
_VIEW = {
    np.dtype(ml_dtypes.bfloat16): ("uint16", "bfloat16"),
    np.dtype(ml_dtypes.float8_e4m3fn): ("uint8", "float8_e4m3fn"),
    np.dtype(ml_dtypes.float8_e4m3fnuz): ("uint8", "float8_e4m3fnuz"),
    np.dtype(ml_dtypes.float8_e5m2): ("uint8", "float8_e5m2"),
    np.dtype(ml_dtypes.float8_e5m2fnuz): ("uint8", "float8_e5m2fnuz"),
}


# Sub-byte types (and float8_e8m0) go in and out of generated modules through their carriers.
_LOWBIT = {
    np.dtype(ml_dtypes.int4),
    np.dtype(ml_dtypes.uint4),
    np.dtype(ml_dtypes.int2),
    np.dtype(ml_dtypes.uint2),
    np.dtype(ml_dtypes.float4_e2m1fn),
    np.dtype(ml_dtypes.float8_e8m0fnu),
}


def to_torch(a):
    import torch

    a = np.array(a, order="C")  # a copy, 0-d kept 0-d (ascontiguousarray makes it 1-d)
    if a.dtype in _LOWBIT:
        from codegen.torch.lowbit import to_torch as carrier

        return carrier(a)
    if a.dtype in _VIEW:
        raw, name = _VIEW[a.dtype]
        return torch.from_numpy(a.view(raw)).view(getattr(torch, name))
    return torch.from_numpy(a)


def to_numpy(t, like: np.dtype | None = None) -> np.ndarray:
    """``t`` as numpy; ``like``: the dtype expected, for outputs held in a carrier."""
    import torch

    if like is not None and np.dtype(like) in _LOWBIT:
        from codegen.torch.lowbit import from_torch

        return from_torch(t, msc.DType.from_numpy(like))
    t = t.detach().cpu()
    for np_dt, (raw, name) in _VIEW.items():
        if t.dtype == getattr(torch, name):
            return t.view(getattr(torch, raw)).numpy().view(np_dt)
    return t.numpy()


def compare(expected, actual: np.ndarray, rtol: float, atol: float) -> str:
    """'' when equal within tolerance, else what differs."""
    expected = np.asarray(expected)
    if expected.dtype != actual.dtype:
        return f"dtype {actual.dtype}, expected {expected.dtype}"
    if expected.shape != actual.shape:
        return f"shape {actual.shape}, expected {expected.shape}"
    if expected.dtype in _VIEW or expected.dtype in _LOWBIT or expected.dtype == np.float16:
        expected, actual = expected.astype(np.float64), actual.astype(np.float64)
    try:
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)
    except AssertionError as e:
        return str(e).strip().splitlines()[-1] if str(e).strip() else "values differ"
    return ""


def run_case(case: BackendCase, cg, bind: bool = False) -> Outcome:
    try:
        g, bound = import_case(case, bind)
    except Exception as e:  # noqa: BLE001 - every failure is recorded, never raised
        return Outcome(case.name, "import", f"{type(e).__name__}: {str(e)[:300]}")
    if cg is None:
        return Outcome(case.name, "pass", bound=bound)
    try:
        module = cg.to_module(g)
    except Exception as e:  # noqa: BLE001
        return Outcome(case.name, "codegen", f"{type(e).__name__}: {str(e)[:300]}", bound)
    try:
        import torch

        feeds = case.feeds()
        args = [to_torch(feeds[v.name]) for v in g.inputs]
        with torch.no_grad():
            out = module(*args)
        outs = list(out) if isinstance(out, tuple | list) else [out]
    except Exception as e:  # noqa: BLE001
        tb = traceback.format_exc(limit=-1).strip().splitlines()[-1]
        return Outcome(case.name, "run", f"{type(e).__name__}: {str(e)[:200]} [{tb[:200]}]", bound)
    if len(outs) != len(case.expected):
        return Outcome(case.name, "compare", f"{len(outs)} outputs, expected {len(case.expected)}")
    for i, (exp, act) in enumerate(zip(case.expected, outs)):
        why = compare(exp, to_numpy(act, np.asarray(exp).dtype), case.rtol, case.atol)
        if why:
            return Outcome(case.name, "compare", f"output {i}: {why}", bound)
    return Outcome(case.name, "pass", bound=bound)


def run_all(cg) -> tuple[list[Outcome], list[Outcome]]:
    """Each case with every input fed at run time, and (where that fails) with shape-setting
    inputs bound as constants: (fed, bound) outcomes in case order."""
    fed, bound = [], []
    with np.errstate(all="ignore"):
        for c in backend_cases():
            r = run_case(c, cg)
            fed.append(r)
            bound.append(r if r.stage == "pass" else run_case(c, cg, bind=True))
    return fed, bound


def ort_feeds(case: BackendCase) -> dict:
    """The case's inputs as onnxruntime takes them (numpy scalars as 0-d arrays)."""
    return {k: np.asarray(v) if isinstance(v, np.generic) else v for k, v in case.feeds().items()}


def onnxruntime_passes() -> int | None:
    """How many backend cases onnxruntime passes on the original models (outputs equal to the
    case's within its tolerance), or None without onnxruntime."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    n = 0
    for c in backend_cases():
        try:
            with np.errstate(all="ignore"):
                sess = ort.InferenceSession(c.model.SerializeToString(), opts)
                got = sess.run(None, ort_feeds(c))
            ok = len(got) == len(c.expected) and not any(
                compare(e, np.asarray(a), c.rtol, c.atol) for e, a in zip(c.expected, got)
            )
        except Exception:  # noqa: BLE001 - a case onnxruntime cannot run does not count
            ok = False
        n += ok
    return n


def test_exclude_list_is_well_formed():
    names = {c.name for c in backend_cases()}
    stale = sorted(set(EXCLUDES) - names)
    assert not stale, f"excluded cases the installed onnx does not generate: {stale[:20]}"
    empty = sorted(n for n, why in EXCLUDES.items() if not why.strip())
    assert not empty, f"excluded without a reason: {empty}"


@pytest.mark.slow  # the ONNX backend suite: ~24 s
def test_onnx_backend_conformance():
    cg = _torch_codegen()
    results, bound = run_all(cg)
    total = len(results)
    passed = [r for r in results if r.stage == "pass"]
    n_bound = sum(r.stage == "pass" for r in bound)
    mode = "ONNX -> msc -> PyTorch" if cg is not None else "ONNX -> msc (import only)"
    by_stage = Counter(r.stage for r in results if r.stage != "pass")
    ort_passes = onnxruntime_passes()
    print(
        f"\n{mode}: {len(passed)}/{total} backend node cases pass with every input fed at "
        f"run time ({len(passed) / total:.1%}); {n_bound}/{total} with shape-setting inputs "
        f"bound as constants; onnxruntime passes {ort_passes} of the originals; failures by "
        f"stage: {dict(by_stage)}"
    )
    unexpected = [r for r in results if r.stage != "pass" and r.name not in EXCLUDES]
    # Import-only mode cannot tell whether an excluded case would run, so it checks only cases
    # excluded because of the import.
    now_pass = [
        r.name
        for r in results
        if r.stage == "pass"
        and r.name in EXCLUDES
        and (cg is not None or EXCLUDES[r.name].startswith("import:"))
    ]
    msg = []
    if unexpected:
        msg.append(
            f"{len(unexpected)} cases fail and are not excluded:\n"
            + "\n".join(f"  {r.name} [{r.stage}] {r.detail}" for r in unexpected[:60])
        )
    if now_pass:
        msg.append(
            f"{len(now_pass)} excluded cases now pass (remove them from the list): "
            + ", ".join(now_pass[:60])
        )
    assert not msg, "\n".join(msg)
    if cg is None:
        pytest.skip(f"codegen.torch has no to_module yet: checked the import alone ({mode})")
    assert len(passed) / total >= TARGET, f"pass rate {len(passed) / total:.1%} < {TARGET:.0%}"
    assert n_bound >= len(passed), "binding inputs as constants lost cases"
    if ort_passes is not None:
        assert len(passed) >= ort_passes, f"{len(passed)} pass, onnxruntime passes {ort_passes}"
