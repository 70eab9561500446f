"""The ONNX codegen against the frontends.

- ONNX backend node cases, every input fed at run time: ONNX -> msc graph -> regenerated ONNX
  -> onnxruntime agrees with onnxruntime on the original model wherever onnxruntime runs the
  original (a case the frontend cannot import must be excluded, with its reason, in
  tests/onnx_conformance_excludes.py), and ONNX -> graph -> ONNX -> graph is structurally
  equal to the first graph, except where an op has no one-to-one ONNX form (each such op
  listed with its reason). A case msc cannot translate (excluded with an ``import:`` reason)
  is imported again with ``custom_ops="keep"``: its regenerated model keeps the custom nodes
  in their domains, re-imports structurally equal, and agrees with the original in
  onnxruntime, or in onnx's reference evaluator where onnxruntime has no kernel (training
  ops, FlexAttention, Bernoulli); random outputs are compared by shape and dtype unless every
  random node is seeded. ImageDecoder runs in neither (no kernel; the reference needs Pillow)
  and is checked structurally only. The summary counts the cases onnxruntime passes on the
  original that pass after the round trip, and lists the rest by reason (str is an msc dtype,
  text ops are kept as custom nodes). Sequences and optionals:
  tests/codegen/test_codegen_onnx_sequences.py.
- PyTorch models from the frontend's test cases: torch -> graph -> ONNX -> onnxruntime agrees
  with torch, and -> graph -> codegen.torch agrees too.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime runs the generated models")

import codegen.onnx as conx  # noqa: E402
import msc  # noqa: E402

CHUNKS = 6

# Canonical ops whose ONNX form re-imports as a different canonical graph, so a graph holding
# one cannot round-trip structurally (numbers still agree; that is checked separately).
NOT_ONE_TO_ONE = {
    "ne": "ONNX has no NotEqual: emitted as Not(Equal), re-imported as two nodes",
    "var": "ONNX has no variance op: emitted through its decomposition",
    "one_hot": "ONNX OneHot wraps negative indices, the canonical op does not: the frontend "
    "adds the wrap on import",
    "nonzero": "ONNX NonZero is [rank, n], canonical [n, rank]: a Transpose on each side",
    "max_pool": "ONNX MaxPool indices count over the whole tensor, torch's per channel: an "
    "offset on each side",
    "max_unpool": "ONNX MaxUnpool indices count over the whole tensor, torch's per channel: "
    "an offset on each side",
    "flatten": "ONNX Flatten is always 2-d: other flattens are emitted as Reshape",
    "full_like": "emitted as ConstantOfShape(Shape(x)), which the frontend folds for a static x",
    "silu": "onnxruntime has no Swish kernel: silu is emitted through its decomposition",
    "rsqrt": "ONNX has no rsqrt: emitted as Reciprocal(Sqrt)",
    "log_sigmoid": "ONNX has no log-sigmoid: emitted through its decomposition",
    "remainder": "ONNX Mod on floats is C fmod: a sign fix-up follows it",
    "clamp": "a clamp with tensor bounds is emitted as Max and Min",
    "reduce_any": "ONNX has no boolean reduction: emitted through int32 ReduceMax",
    "reduce_all": "ONNX has no boolean reduction: emitted through int32 ReduceMin",
    "max_dim": "emitted as ReduceMax and ArgMax",
    "min_dim": "emitted as ReduceMin and ArgMin",
    "index": "multi-tensor indexing is emitted as GatherND on a transposed input",
    "floor_divide": "ONNX has no floor division: emitted through its decomposition",
    "shape": "the frontend folds Shape of a statically shaped input into a constant",
}
MASKED_ATTENTION = (
    "ONNX Attention gives 0 for a fully masked row where the canonical op (torch's) gives NaN: "
    "the frontend adds a fix-up on each import of a masked Attention"
)


FLOAT8_CAST = (
    "a float8 cast is emitted as ONNX Cast, which saturates by default: the frontend states "
    "the saturation with a clamp on import"
)


def _op_reason(g: msc.Graph) -> str | None:
    default = conx.default_opset()
    for n in g.nodes:
        if n.op == "attention" and len(n.inputs) > 3 and n.inputs[3] is not None:
            return MASKED_ATTENTION
        if n.op in NOT_ONE_TO_ONE:
            return NOT_ONE_TO_ONE[n.op]
        if n.op == "cast" and n.attrs["to"].name.startswith("FLOAT8"):
            return FLOAT8_CAST
        if conx.EMITTERS.lookup(n.op, default) is None:
            return f"{n.op} has no ONNX op at opset {default}: decomposed"
    return None


# Cases where the regenerated model is right and something else is not.
NUMERIC_EXCLUDES: dict[str, str] = {}


def _session(model):
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def _close(got, want, rtol, atol) -> bool:
    for a, b in zip(got, want):
        if isinstance(a, list) or isinstance(b, list) or a is None or b is None:
            # a sequence output (a list of arrays) or an empty optional (None)
            if type(a) is not type(b) or (a is not None and not _close(a, b, rtol, atol)):
                return False
            continue
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.dtype.kind in "fc":
            if not np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
                return False
        elif not np.array_equal(a, b):
            return False
    return len(got) == len(want)


def _gaps(opset: int) -> set[str]:
    """Canonical ops with neither an emitter at ``opset`` nor a decomposition: the codegen's
    declared gaps (docs/ops.md lists them); a case that needs one is counted, not failed."""
    from msc.ops.decompose import registry as rules

    return {op for op in msc.ops.registry.names() if conx.EMITTERS.lookup(op, opset) is None} - {
        r.op for r in rules
    }


@pytest.fixture(scope="module")
def cases():
    import msc.frontend.onnx  # noqa: F401
    import tests.onnx_cases as oc

    return list(oc.backend_cases())


# ONNX ops whose outputs are random: compared by shape and dtype, or exactly when every one is
# seeded (onnxruntime and onnx's reference are deterministic for a given seed).
RANDOM_OPS = {
    "Bernoulli",
    "Dropout",  # kept only when its training_mode is computed at run time
    "RandomUniform",
    "RandomUniformLike",
    "RandomNormal",
    "RandomNormalLike",
    "Multinomial",
}


def _reference(model, feeds) -> list:
    """onnx's reference evaluator on ``model``: the judge where onnxruntime has no kernel."""
    from onnx.reference import ReferenceEvaluator

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return list(ReferenceEvaluator(model).run(None, feeds))


def _graphs(g: msc.Graph):
    yield g
    for n in g.nodes:
        for sub in n.subgraphs():
            yield from _graphs(sub)


def _onnx_graphs(g):
    yield g
    for n in g.node:
        for a in n.attribute:
            for sub in [a.g] if a.type == onnx.AttributeProto.GRAPH else a.graphs:
                yield from _onnx_graphs(sub)


def _custom_kept(g: msc.Graph, m) -> str:
    """'' when every custom node of ``g`` is a node of ``m`` in its domain, the domain
    imported at the node's version (ai.onnx ops carry their own version); else what is not."""
    from msc.ops.custom import parse_custom

    have = {(n.domain or "ai.onnx", n.op_type) for sg in _onnx_graphs(m.graph) for n in sg.node}
    imports = {o.domain or "ai.onnx": o.version for o in m.opset_import}
    for sg in _graphs(g):
        for n in sg.nodes:
            op = parse_custom(n.op)
            if op is None:
                continue
            if (op.domain, op.name) not in have:
                return f"{op} is not in the regenerated model"
            if op.domain != "ai.onnx" and imports.get(op.domain) != op.version:
                return f"{op}: the model imports {op.domain} at {imports.get(op.domain)}"
    return ""


def _random_nodes(model) -> list:
    return [n for sg in _onnx_graphs(model.graph) for n in sg.node if n.op_type in RANDOM_OPS]


def _same_shapes(got, want) -> bool:
    return len(got) == len(want) and all(
        np.asarray(a).shape == np.asarray(b).shape and np.asarray(a).dtype == np.asarray(b).dtype
        for a, b in zip(got, want)
    )


def _kept_case(c, want, gaps) -> tuple[str, str]:
    """A case msc imports only with custom_ops="keep": (outcome, detail). Outcomes: "pass"
    (the regenerated model agrees with the original where onnxruntime or onnx's reference runs
    it, the custom nodes kept in their domains, the re-import structurally equal), "unrun"
    (the same, but neither runtime runs the original: checked structurally only), "out"
    (keep cannot import it either: detail says why), "gap", "fail"."""
    from tests.frontend.test_onnx_conformance import ort_feeds

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = msc.from_onnx(c.model, custom_ops="keep")
    except Exception as e:  # noqa: BLE001 - what keep cannot import is listed, by reason
        return "out", str(e)
    if {n.op for n in g.nodes} & gaps:
        return "gap", ""
    try:
        m = conx.to_model(g)
        onnx.checker.check_model(m)
    except Exception as e:  # noqa: BLE001
        return "fail", f"codegen: {str(e)[:300]}"
    if why := _custom_kept(g, m):
        return "fail", why
    if not msc.structural_equal(g, again := msc.from_onnx(m, custom_ops="keep")):
        return "fail", f"round trip differs: {str(msc.structural_equal(g, again).diff)[:300]}"
    feeds = ort_feeds(c)
    run = None
    if want is not None:
        run = lambda model: _session(model).run(None, feeds)  # noqa: E731
    else:
        try:
            want = _reference(c.model, feeds)
            run = lambda model: _reference(model, feeds)  # noqa: E731
        except Exception:  # noqa: BLE001 - no runtime here runs this op
            return "unrun", ""
    try:
        got = run(m)
    except Exception as e:  # noqa: BLE001
        return "fail", f"run: {str(e)[:300]}"
    random = _random_nodes(c.model)
    if random and not all(any(a.name == "seed" for a in n.attribute) for n in random):
        ok = _same_shapes(got, want)  # unseeded random outputs: shapes and dtypes only
    else:
        ok = _close(got, want, max(c.rtol, 1e-5), max(c.atol, 1e-6))
    return ("pass", "") if ok else ("fail", "outputs differ from the original")


def _out_reason(why: str) -> str:
    """Why keep cannot import a case, as a short reason to group by."""
    if "STRING" in why or "string" in why:
        return "strings (msc graphs hold numeric dtypes)"
    if "sequence" in why.lower() or "optional" in why.lower():
        return "sequences / optionals (msc graphs hold tensors)"
    problems = [ln.strip(" -") for ln in why.splitlines() if ln.startswith("  - ")]
    return (problems[0] if problems else why.strip())[:120]


# Totals over the chunks: how many cases onnxruntime passes on the original, how many of those
# pass ONNX -> msc -> ONNX, and the rest by reason (printed when every chunk has run).
_TALLY: dict = {"chunks": set(), "ort_pass": 0, "rt_pass": 0, "rest": {}}


def _print_tally() -> None:
    print(
        f"ONNX -> msc -> ONNX: {_TALLY['rt_pass']}/{_TALLY['ort_pass']} of the backend cases "
        "onnxruntime passes on the original pass in onnxruntime after the round trip; the rest:"
    )
    for reason, names in sorted(_TALLY["rest"].items(), key=lambda kv: -len(kv[1])):
        more = " ..." if len(names) > 4 else ""
        print(f"  {len(names):3d}  {reason}: {', '.join(sorted(names)[:4])}{more}")


def _ort_original(c):
    """onnxruntime's outputs on the original (None if it cannot run it), and whether they
    equal the case's expected outputs."""
    from tests.frontend.test_onnx_conformance import compare, ort_feeds

    try:
        with np.errstate(all="ignore"):
            want = _session(c.model).run(None, ort_feeds(c))
    except Exception:  # noqa: BLE001 - onnxruntime cannot take the original
        return None, False
    try:
        ok = len(want) == len(c.expected) and not any(
            compare(e, np.asarray(a), c.rtol, c.atol) for e, a in zip(c.expected, want)
        )
    except Exception:  # noqa: BLE001 - a sequence or string output: counted as the suite does
        ok = False
    return want, ok


def _round_trip(c, want, gaps) -> tuple[str, str, str]:
    """One backend case: (count key, failure or "", why it does not pass or "")."""
    from tests.frontend.test_onnx_conformance import ort_feeds
    from tests.onnx_conformance_excludes import EXCLUDES

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = msc.from_onnx(c.model)
    except Exception as e:  # the frontend cannot: only where the exclude list says so
        if not EXCLUDES.get(c.name, "").startswith("import:"):
            return "failed", f"import failed, not excluded: {str(e)[:200]}", "import"
        outcome, detail = _kept_case(c, want, gaps)  # what msc has no converter for
        if outcome == "fail":
            return "failed", f"custom_ops='keep': {detail}", detail
        if outcome == "out":
            return "kept_out", "", _out_reason(detail)
        if outcome == "gap":
            return "gap", "", "an op with no ONNX emitter (a declared gap)"
        return ("kept" if outcome == "pass" else "kept_unrun"), "", ""
    if want is None:
        return "skipped", "", "onnxruntime cannot run the original"
    if {n.op for n in g.nodes} & gaps:
        return "gap", "", "an op with no ONNX emitter (a declared gap)"
    try:
        m = conx.to_model(g)
        onnx.checker.check_model(m)
        sess = _session(m)
        feeds = ort_feeds(c)
        got = sess.run(None, {i.name: feeds[i.name] for i in sess.get_inputs()})
    except Exception as e:  # noqa: BLE001
        return "failed", f"codegen/run: {str(e)[:300]}", "codegen/run"
    tol = (max(c.rtol, 1e-5), max(c.atol, 1e-6))
    why = ""
    if _close(got, want, *tol):
        pass
    elif _close(got, c.expected, *tol):  # right by the case, but not what the tally counts
        why = "equal to the case's expected outputs, not to onnxruntime on the original"
    else:
        why = NUMERIC_EXCLUDES.get(c.name, "")
        if not why:
            return "failed", "outputs differ from onnxruntime on the original", "numeric"
    # Run as optimized (the default); read back node for node, where each node must come back.
    plain = conx.to_model(g, optimize=False)
    eq = msc.structural_equal(g, msc.from_onnx(plain))
    if not eq and not _op_reason(g):
        return "failed", f"round trip differs: {str(eq.diff)[:300]}", why or "structure"
    return ("round_trip" if eq else "rt_excused"), "", why


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_backend_cases_regenerate_and_round_trip(cases, chunk: int) -> None:
    keys = ["round_trip", "rt_excused", "kept", "kept_unrun", "kept_out", "skipped", "gap"]
    counts = dict.fromkeys(keys + ["failed"], 0)
    failures = []
    gaps = _gaps(conx.default_opset())
    for c in cases[chunk::CHUNKS]:
        want, ort_ok = _ort_original(c)
        key, failure, why = _round_trip(c, want, gaps)
        counts[key] += 1
        if failure:
            failures.append(f"{c.name}: {failure}")
        if ort_ok:
            _TALLY["ort_pass"] += 1
            if why:
                _TALLY["rest"].setdefault(why, []).append(c.name)
            else:
                _TALLY["rt_pass"] += 1
    print(f"chunk {chunk}: {counts}")
    _TALLY["chunks"].add(chunk)
    if len(_TALLY["chunks"]) == CHUNKS:
        _print_tally()
    assert counts["round_trip"] + counts["rt_excused"] > 50, counts
    assert not failures, "\n".join(failures)


# ------------------------------------------------------------------------------ torch
def _torch_cases():
    try:
        import tests.torch_cases as tc
    except Exception:  # the frontend's case table is optional here
        return []
    return [c for c in tc.OP_CASES if not c.skip]


TORCH_CASES = _torch_cases()


def _np(x):
    import torch

    x = x.detach().cpu()
    if x.dtype == torch.bfloat16:
        import ml_dtypes

        return x.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return x.numpy()


def _tensor(a):
    import torch

    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _flat(out):
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    res = []
    for o in out:
        res += _flat(o) if not isinstance(o, (int, float, bool, type(None))) else []
    return res


# Valid ONNX (full_check passes) that this onnxruntime has no kernel for: expected failures
# by name. A listed case that starts running fails the test, so the list stays true.
ORT_NO_KERNEL = {"add_bf16": "onnxruntime's CPU provider has no bfloat16 Add(14)"}


@pytest.mark.parametrize("case", TORCH_CASES, ids=[c.id for c in TORCH_CASES])
def test_torch_case_through_onnx(case) -> None:
    torch = pytest.importorskip("torch")
    import msc.frontend.torch as ft

    g = ft.from_torch(case.module, case.args)  # every case must translate: a failure is red
    with torch.no_grad():
        want = [_np(t) for t in _flat(case.module(*case.args))]
    m = conx.to_model(g)
    onnx.checker.check_model(m, full_check=True)
    try:
        sess = _session(m)
    except ort.capi.onnxruntime_pybind11_state.NotImplemented:
        if case.id in ORT_NO_KERNEL:
            pytest.xfail(ORT_NO_KERNEL[case.id])
        raise
    assert case.id not in ORT_NO_KERNEL, f"{case.id} now runs: remove it from ORT_NO_KERNEL"
    feeds = {
        i.name: _np(a) for i, a in zip(g.inputs, [a for a in case.args if hasattr(a, "numpy")])
    }
    got = sess.run(None, feeds)
    low = any(b.dtype.name in ("float16", "bfloat16") for b in want)
    tol = max(case.tol, 2e-3 if low else 1e-5)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        _compare(a, b, tol)
    # the graph re-imported from the regenerated ONNX runs through codegen.torch too
    import codegen.torch as ct
    import msc.frontend.onnx as fo

    again = fo.from_onnx(m)
    mod = ct.to_module(again)
    with torch.no_grad():
        out = [_np(t) for t in _flat(mod(*[_tensor(v) for v in feeds.values()]))]
    for a, b in zip(out, want):
        _compare(a, b, tol)


def _compare(a: np.ndarray, b: np.ndarray, tol: float) -> None:
    if a.dtype.kind in "fcV" or a.dtype.name == "bfloat16":
        np.testing.assert_allclose(
            a.astype(np.float64), b.astype(np.float64), rtol=tol, atol=tol, equal_nan=True
        )
    else:
        np.testing.assert_array_equal(a, b)


def _model_cases():
    try:
        import tests.torch_cases as tc
    except Exception:
        return {}
    return dict(tc.MODEL_CASES)


MODEL_CASES = _model_cases()


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_torch_model_through_onnx(name: str) -> None:
    """A whole PyTorch model -> graph -> ONNX (default opset and 17) -> onnxruntime."""
    torch = pytest.importorskip("torch")
    import msc.frontend.torch as ft
    from tests.torch_cases import build_model

    module, args, dynamic = build_model(name)
    g = ft.from_torch(module, args, dynamic_shapes=dynamic)  # a failure to translate is red
    with torch.no_grad():
        want = [_np(t) for t in _flat(module(*args))]
    feeds = {v.name: _np(a) for v, a in zip(g.inputs, args)}
    for opset in (None, 17):
        m = conx.to_model(g, opset)
        onnx.checker.check_model(m, full_check=True)
        got = _session(m).run(None, feeds)
        assert len(got) == len(want)
        for a, b in zip(got, want):
            _compare(a, b, 1e-4)


# ONNX cannot spell some canonical attributes (msc.ops.ONNX_SILENT_ATTRS): a topk's ``stable``,
# gather/scatter_elements' ``negative_indices``. The ONNX frontend infers them (True for ONNX's
# own ops and run-time indices); msc's ONNX codegen records them in node metadata_props, so a
# graph from torch (where they are False) comes back from ONNX as it went in.
def _flags(g: msc.Graph) -> list[tuple[str, bool]]:
    keys = ("stable", "negative_indices")
    return [(n.op, n.attrs[k]) for n in g.nodes for k in keys if k in n.attrs]


def _through_onnx(g: msc.Graph) -> msc.Graph:
    m = conx.to_model(g)
    onnx.checker.check_model(m, full_check=True)
    return msc.from_onnx(m)


def test_torch_flags_survive_onnx_and_text() -> None:
    torch = pytest.importorskip("torch")

    class TopGatherScatter(torch.nn.Module):
        def forward(self, x, i):
            values, idx = torch.topk(x, 3, dim=1)
            picked = torch.gather(x, 1, i)
            return values, idx, picked, torch.scatter(x, 1, i, picked)

    args = (torch.randn(4, 6), torch.randint(0, 6, (4, 2)))
    g = msc.from_torch(TopGatherScatter(), args)
    flags = [("topk", False), ("gather_elements", False), ("scatter_elements", False)]
    assert _flags(g) == flags
    msc.assert_structural_equal(g, _through_onnx(g))
    msc.assert_structural_equal(g, msc.from_text(msc.to_text(g)))
    # Without the record the ONNX frontend reads ONNX's meaning: the flags come back True.
    m = conx.to_model(g)
    for n in m.graph.node:
        keep = [p for p in n.metadata_props if not p.key.startswith("msc.attr.")]
        del n.metadata_props[:]
        n.metadata_props.extend(keep)
    assert _flags(msc.from_onnx(m)) == [(op, True) for op, _ in flags]


def test_onnx_flags_survive_onnx_and_text() -> None:
    h, T = onnx.helper, onnx.TensorProto
    nodes = [
        h.make_node("TopK", ["x", "k"], ["v", "vi"], axis=1),
        h.make_node("GatherElements", ["x", "i"], ["g"], axis=1),
        h.make_node("ScatterElements", ["x", "i", "g"], ["s"], axis=1),
    ]
    ins = [h.make_tensor_value_info("x", T.FLOAT, [4, 6])]
    ins += [h.make_tensor_value_info(n, T.INT64, s) for n, s in (("k", [1]), ("i", [4, 2]))]
    outs = [h.make_tensor_value_info(n, T.UNDEFINED, None) for n in ("v", "vi", "g", "s")]
    m = h.make_model(h.make_graph(nodes, "m", ins, outs), opset_imports=[h.make_opsetid("", 18)])
    g = msc.from_onnx(m)
    assert _flags(g) == [("topk", True), ("gather_elements", True), ("scatter_elements", True)]
    again = _through_onnx(g)
    msc.assert_structural_equal(g, again)
    msc.assert_structural_equal(again, _through_onnx(again))
    msc.assert_structural_equal(g, msc.from_text(msc.to_text(g)))
