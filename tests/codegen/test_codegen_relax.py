"""codegen.relax: every case of the shared canonical op table
(tests/codegen/test_codegen_onnx_ops.py) compiled with ``build`` and run on the Relax VM against
the table's reference, the test models against eager torch, and the module, script and save
forms.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

tvm = pytest.importorskip("tvm", reason="apache-tvm (the tvm extra) runs the Relax codegen")
torch = pytest.importorskip("torch", reason="torch is the reference of the op table")

import codegen.relax as cr  # noqa: E402
import tests.codegen.test_codegen_onnx_ops as table  # noqa: E402

F = torch.nn.functional
C, t, f32 = table.C, table.t, table.f32


def _lrn_onnx(x, size, alpha, beta, bias):
    """ONNX LRN by its definition (torch's local_response_norm differs for even sizes)."""
    sq = np.pad(x * x, [(0, 0), ((size - 1) // 2, size // 2)] + [(0, 0)] * (x.ndim - 2))
    total = sum(sq[:, i : i + x.shape[1]] for i in range(size))
    return (x / (bias + alpha / size * total) ** beta).astype(x.dtype)


def _window_sum_2d(x, kernel, stride, out):
    """Sums over the windows of x (zeros past its end), ``out`` windows per dim."""
    (kh, kw), (oh, ow) = kernel, out
    h, w = (oh - 1) * stride + kh, (ow - 1) * stride + kw
    xp = np.pad(x, [(0, 0), (0, 0), (0, h - x.shape[2]), (0, w - x.shape[3])])
    rows = [
        [xp[:, :, i * stride : i * stride + kh, j * stride : j * stride + kw].sum((2, 3))
         for j in range(ow)]
        for i in range(oh)
    ]  # fmt: skip
    return np.stack([np.stack(r, -1) for r in rows], -2)


_IMG5 = f32(1, 2, 3, 4, 5)
# Cases beyond the shared table for what the Relax emitters add (window sums with ceil mode,
# padding and dilation; resize ranks and coordinate modes); run the same way as the table.
RELAX_CASES = [
    C(
        "lp_pool",
        [f32(2, 3, 8, 7)],
        {"kernel": [3, 2], "stride": [2, 2], "ceil_mode": True, "p": 3.0},
        lambda x: _window_sum_2d(np.abs(x) ** 3, (3, 2), 2, (4, 4)) ** (1 / 3),
        rtol=1e-4,
        atol=1e-5,
        id="lp_pool_ceil_p3",
    ),
    C(
        "lp_pool",
        [f32(2, 3, 9)],
        {"kernel": [3], "stride": [2], "padding": [1, 1], "dilation": [2], "p": 2.0},
        lambda x: np.sqrt(
            np.stack(
                [
                    (np.pad(x, [(0, 0), (0, 0), (1, 1)])[..., j : j + 5 : 2] ** 2).sum(-1)
                    for j in range(0, 11 - 5 + 1, 2)
                ],
                -1,
            )
        ),
        rtol=1e-4,
        atol=1e-5,
        id="lp_pool_1d_dilated_padded",
    ),
    C(
        "avg_pool",
        [table.IMG],
        {
            "kernel": [3, 3],
            "stride": [2, 2],
            "padding": [1, 1, 1, 1],
            "ceil_mode": True,
            "divisor_override": 2,
        },
        t(lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, divisor_override=2)),
        rtol=1e-5,
        atol=1e-5,
        id="avg_pool_divisor_padded_ceil",
    ),  # fmt: skip
    C(
        "lrn",
        [f32(2, 6, 3, 4)],
        {"size": 4, "alpha": 0.3, "beta": 0.6, "bias": 2.0},
        lambda x: _lrn_onnx(x, 4, 0.3, 0.6, 2.0),
        rtol=1e-5,
        atol=1e-6,
        id="lrn_even_size",
    ),
    C(
        "lrn",
        [f32(2, 5, 7)],
        {"size": 3, "alpha": 0.1},
        t(lambda x: F.local_response_norm(x, 3, 0.1)),
        rtol=1e-5,
        atol=1e-6,
        id="lrn_3d",
    ),
    C(
        "resize",
        [f32(2, 3, 5)],
        {"sizes": [8], "mode": "linear"},
        t(lambda x: F.interpolate(x, size=8, mode="linear")),
        rtol=1e-5,
        atol=1e-6,
        id="resize_1d_linear",
    ),
    C(
        "resize",
        [_IMG5],
        {"sizes": [5, 3, 7], "mode": "linear"},
        t(lambda x: F.interpolate(x, size=(5, 3, 7), mode="trilinear")),
        rtol=1e-5,
        atol=1e-6,
        id="resize_3d_linear",
    ),
    C(
        "resize",
        [table.IMG],
        {"sizes": [9, 4], "mode": "linear", "coordinate_transformation_mode": "align_corners"},
        t(lambda x: F.interpolate(x, size=(9, 4), mode="bilinear", align_corners=True)),
        rtol=1e-5,
        atol=1e-6,
        id="resize_align_corners",
    ),
    C(
        "resize",
        [table.IMG],
        {
            "sizes": [9, 4],
            "mode": "nearest",
            "coordinate_transformation_mode": "asymmetric",
            "nearest_mode": "floor",
        },
        t(lambda x: F.interpolate(x, size=(9, 4), mode="nearest")),
        id="resize_nearest_sizes",
    ),  # fmt: skip
]
_IPX, _IPI = f32(3, 4, 5), np.array([[0, 4], [-1, 0]], np.int64)


def _ip_last_acc(x, v, i):
    y = x.copy()
    np.add.at(y, (slice(None), slice(None), i), v)
    return y


# A float mask shared by the heads ([B, 1, L, S], as transformers build it; one batch's key
# masked out) whose 1 is a size known at run time only (torch.onnx's BERT): TOPI broadcast it
# as if it were the heads' count and read other batches' rows.
_AMASK = table.f32(2, 1, 5, 6)
_AMASK[1, :, :, 2] = -np.inf
RELAX_CASES += [
    C(
        "attention",
        [table.Q, table.K, table.V, _AMASK],
        {},
        t(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m)),
        rtol=1e-4,
        atol=1e-5,
        sym={3: {1: "mask_heads"}},
        id="attention_mask_broadcast_over_heads",
    ),
    C(
        "index_put",
        [_IPX, f32(2), _IPI],
        {"axes": [2], "accumulate": True},
        _ip_last_acc,
        id="index_put_last_2d_index_acc",
    ),
    C(
        "index_put",
        [_IPX, f32(4, 5), np.array([2, 0], np.int32)],
        {"axes": [0]},
        lambda x, v, i: _ip_first(x, v, i),
        id="index_put_leading_i32",
    ),
    C(
        "pad",
        [table.X],
        {"pads": [-1, 0, -2, 0, 2, 1], "mode": "reflect"},
        lambda x: np.pad(x[1:, :, 2:], [(0, 0), (0, 2), (0, 1)], mode="reflect"),
        id="pad_negative_reflect",
    ),
]


def _ip_first(x, v, i):
    y = x.copy()
    y[i] = v
    return y


CASES = table.CASES + RELAX_CASES

# Op-table cases that do not run through Relax yet, with the reason. The test fails when one
# of them starts passing, so the list stays exact.
EXPECTED_FAILURES: dict[str, str] = {
    "max_pool_indices": "Relax's max_pool returns values only, and no decomposition gives indices",
    "adaptive_max_pool_indices": "no Relax op returns the indices of an adaptive max pool",
    "reshape_zero": "Relax's reshape refuses a zero-size input reshaped by a shape with a 0",
    "nonzero": "Relax's VM codegen cannot lower permute_dims of nonzero's data-dependent shape",
}


def _run_case(case) -> None:
    g, feeds = table.build(case)
    f = cr.build(g)
    out = f(*[feeds[v.name] for v in g.inputs])
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    got = [o.numpy() for o in outs]
    want = case.ref(*case.inputs)
    want = list(want) if isinstance(want, (list, tuple)) else [want]
    table.check_outputs(got, want, g, case.rtol, case.atol, f"{case.id} via codegen.relax")


def test_every_canonical_op_has_an_emitter_a_decomposition_or_a_reason() -> None:
    from msc.ops import registry as ops
    from msc.ops.decompose import registry as rules

    gaps = cr.EMITTERS.gaps()
    missing = [op for op in ops.names() if op not in cr.EMITTERS and op not in rules]
    missing = [op for op in missing if op not in gaps]
    assert not missing, (
        f"canonical ops with neither a Relax emitter, a decomposition nor a reason: {missing}"
    )
    for op, reason in gaps.items():
        assert reason.strip(), op
    # An op Relax reaches only through its decomposition has an op-table case that runs
    # through build() and is expected to pass: that is what says Relax can use the rule.
    passing = {c.op for c in CASES if c.id not in EXPECTED_FAILURES}
    only_rule = [op for op in ops.names() if op not in cr.EMITTERS and op in rules]
    untested = [op for op in only_rule if op not in passing and op not in gaps]
    assert not untested, f"decomposed for Relax but no passing op-table case: {untested}"


def test_coverage_markdown_lists_every_op() -> None:
    from msc.ops import registry as ops

    md = cr.coverage_markdown()
    assert md.startswith("## TVM Relax codegen")
    for op in ops.names():
        assert f"`{op}`" in md, op
    for op, reason in cr.EMITTERS.gaps().items():
        assert f"- `{op}`: {reason}" in md, op


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_op_case(case) -> None:
    reason = EXPECTED_FAILURES.get(case.id)
    if reason is None:
        _run_case(case)
        return
    try:
        _run_case(case)
    except Exception:
        return
    pytest.fail(f"{case.id} now passes through Relax; drop it from EXPECTED_FAILURES ({reason})")


# ------------------------------------------------------------------------------ models
def _model_cases() -> dict:
    import tests.torch_cases as tc

    return dict(tc.MODEL_CASES)


MODEL_CASES = _model_cases()
# Models that do not run through Relax yet, with the reason (fails when one starts passing).
EXPECTED_MODEL_FAILURES: dict[str, str] = {}


def _flat(out) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for v in out.values() for t in _flat(v)]
    if isinstance(out, (tuple, list)):
        return [t for v in out for t in _flat(v)]
    if hasattr(out, "to_tuple"):  # transformers' ModelOutput
        return _flat(out.to_tuple())
    return []


def _run_model(name: str) -> None:
    import msc
    from tests.torch_cases import build_model

    module, args, dynamic = build_model(name)
    g = msc.from_torch(module, args, dynamic_shapes=dynamic)
    f = cr.build(g)
    with torch.no_grad():
        want = _flat(module(*args))
    got = _flat(f(*args))
    assert len(got) == len(want), name
    for k, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape), (name, k)
        np.testing.assert_allclose(
            a.float().numpy(), b.float().numpy(), rtol=1e-4, atol=1e-4, err_msg=f"{name} {k}"
        )


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_through_relax(name: str) -> None:
    """A whole PyTorch model -> graph -> Relax (compiled for llvm) agrees with eager torch."""
    reason = EXPECTED_MODEL_FAILURES.get(name)
    if reason is None:
        _run_model(name)
        return
    try:
        _run_model(name)
    except Exception:
        return
    pytest.fail(f"{name} now runs through Relax; drop it from EXPECTED_MODEL_FAILURES ({reason})")


# ------------------------------------------------------------------------------ forms
def _cnn_graph():
    import msc
    from tests.torch_cases import build_model

    module, args, _ = build_model("small_cnn")
    return msc.from_torch(module, args), module, args


def test_module_parameters_attributes_and_dataflow() -> None:
    from tvm import relax

    g, module, _ = _cnn_graph()
    mod = cr.to_module(g)
    main = mod["main"]
    params = [w for w in g.weights.values() if w.role == "parameter"]
    assert int(main.attrs["num_input"]) == len(g.inputs) == 1
    assert len(main.params) == 1 + len(params) and len(main.attrs["params"]) == len(params)
    assert isinstance(main.body.blocks[0], relax.DataflowBlock)
    bound = cr.to_module(g, params="bound")["main"]
    assert len(bound.params) == 1 and "params" not in (bound.attrs or {})
    with pytest.raises(Exception, match="params must be one of"):
        cr.to_module(g, params="weights")


def test_script_reads_back_structurally_equal() -> None:
    g, _, _ = _cnn_graph()
    text = cr.to_script(g)
    assert "metadata" not in text  # arrays are lifted to parameters; TVM 0.27 cannot print them
    tvm.ir.assert_structural_equal(tvm.script.from_source(text), cr.script_module(g)[0])


def test_save_writes_a_loader_that_runs(tmp_path) -> None:
    import importlib.util

    g, module, args = _cnn_graph()
    out = cr.save(g, tmp_path / "relax")
    assert sorted(p.name for p in out.iterdir()) == [
        ".msc-output.json",
        "load.py",
        "model.safetensors",
        "module.py",
    ]
    spec = importlib.util.spec_from_file_location("msc_relax_loader", out / "load.py")
    loader = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loader)
    f = loader.load(out)
    got = f(tvm.runtime.tensor(args[0].numpy()))
    got = got[0] if not hasattr(got, "numpy") else got
    with torch.no_grad():
        want = module(*args)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-4)


def test_symbolic_dims_are_int64_vars_with_bounds() -> None:
    from msc.ir import DType, Graph, SymDim, TensorType

    g = Graph("sym")
    n = SymDim("batch size", 1, 64)
    x = g.add_input("x", TensorType(DType.FLOAT32, (n, 4)))
    g.set_outputs([g.op("relu", x)])
    main = cr.to_module(g)["main"]
    (var,) = [d for d in main.params[0].ty.shape.values if not hasattr(d, "value")]
    assert str(var.ty) == "int64" and var.name == "batch_size"
    assert dict(main.attrs["tir_var_lower_bound"]) == {"batch_size": 1}
    assert dict(main.attrs["tir_var_upper_bound"]) == {"batch_size": 64}
    f = cr.build(g)
    for rows in (1, 5):
        xv = np.linspace(-1, 1, rows * 4, dtype=np.float32).reshape(rows, 4)
        np.testing.assert_array_equal(f(xv).numpy(), np.maximum(xv, 0))


def test_unsupported_and_custom_ops_are_all_reported() -> None:
    from msc.errors import UnsupportedOpsError
    from msc.ir import DType, Graph, TensorType

    reg = cr.EMITTERS.copy(without=("relu", "sigmoid"))
    g = Graph("g")
    x = g.add_input("x", TensorType(DType.FLOAT32, (2,)))
    y = g.add_node("acme::frob@1", [x], {}, output_types=[TensorType(DType.FLOAT32, (2,))])
    g.set_outputs([g.op("sigmoid", g.op("relu", g.op("relu", x))), y.outputs[0]])
    with pytest.raises(UnsupportedOpsError) as err:
        cr.to_module(g, emitters=reg)
    ops = [o.op for o in err.value.ops]
    assert sorted(ops) == ["acme::frob@1", "relu", "relu", "sigmoid"], ops
    assert "custom op acme::frob" in str(err.value)


def test_hostile_names_stay_out_of_the_script() -> None:
    from msc.ir import DType, Graph, TensorType

    g = Graph("g")
    x = g.add_input('x"); __import__("os").system("echo pwned', TensorType(DType.FLOAT32, (2,)))
    g.set_outputs([g.op("relu", x)])
    text = cr.to_script(g)
    assert "__import__" not in text.replace("___import__", "") or '"os"' not in text
    assert "system(" not in text
    tvm.script.from_source(text)


def test_if_becomes_relax_if_reading_outer_values() -> None:
    from tvm import relax

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
    main = cr.to_module(g)["main"]
    assert not isinstance(main.body.blocks[0], relax.DataflowBlock)  # If may not sit in one
    found = []
    relax.analysis.post_order_visit(main.body, lambda n: found.append(isinstance(n, relax.If)))
    assert any(found)
    f = cr.build(g)
    xv, wv = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3), w.numpy()
    for c, want in ((True, [np.maximum(xv, 0) + wv, xv]), (False, [-xv, xv * wv])):
        got = f(np.array(c), xv)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.numpy(), b, rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------ ONNX backend cases
# The ONNX backend node cases (their models, inputs and expected outputs) of the ops the op
# table does not hold: imported with msc.from_onnx, compiled with build(), compared with the
# expected outputs at the case's tolerance.
ONNX_PREFIXES = (
    "test_rotary_embedding",
    "test_swiglu",
    "test_rnn_",
    "test_simple_rnn",
    "test_gru",
    "test_lstm",
    "test_loop11",  # test_loop13_seq, test_loop16_seq_none: sequence inputs msc does not hold
    "test_scan",
    "test_reversesequence",
    "test_causal_conv_with_state",
    "test_gridsample",
    "test_affine_grid",
    "test_roialign",
    "test_dft",
    "test_stft",
)
# The cases of the ops that take a shape, sizes, axes, pads, repeats, k or limits as an input:
# the case feeds it at run time, and so does the test (unless BOUND_INPUTS says otherwise).
RUNTIME_PREFIXES = (
    "test_reshape_",
    "test_expand_",
    "test_range_",
    "test_slice",
    "test_constantofshape",
    "test_tile",
    "test_resize_",
    "test_upsample_",
    "test_constant_pad",
    "test_edge_pad",
    "test_reflect_pad",
    "test_wrap_pad",
    "test_center_crop_pad",
    "test_top_k",
    "test_split_variable_parts",
    "test_split_zero_size",
    "test_squeeze",
    "test_unsqueeze",
    "test_onehot",
    "test_tril",
    "test_triu",
    "test_cumsum",
    "test_cumprod",
    "test_reduce_",
    "test_blackmanwindow",
    "test_hannwindow",
    "test_hammingwindow",
)
# Cases that do not run through Relax yet, with the reason (fails when one starts passing).
EXPECTED_ONNX_FAILURES: dict[str, str] = {}


# Inputs that Relax cannot take at run time, bound as constants at import, by case-name
# prefix; each must be refused when fed at run time (test_bound_inputs_are_needed), so the
# list holds only what needs it.
BOUND_INPUTS: dict[str, tuple[str, ...]] = {
    # the transform length (and so the matrix it is a product with) must be static
    "test_dft": ("axis",),
    "test_stft": ("frame_step", "frame_length"),
}


@functools.cache
def _onnx_cases() -> dict:
    from tests.onnx_cases import backend_cases

    return {
        c.name: c
        for c in backend_cases()
        if c.name.startswith(ONNX_PREFIXES + RUNTIME_PREFIXES) and "_expanded" not in c.name
    }


def _bound_names(case) -> list[str]:
    feeds = case.feeds()
    names = [n for k, v in BOUND_INPUTS.items() if case.name.startswith(k) for n in v]
    return [n for n in names if n in feeds]


# Cases whose atol is scaled by max(1, max |expected|): the expected DFTs are float32 FFTs whose
# zeros carry rounding of their largest outputs (1.9e-7 next to 45), beyond the case's 1e-7;
# the Relax DFT, a product with an exact matrix, gives 3e-15 there.
SCALED_ATOL = ("test_dft",)


def _run_onnx_case(case) -> None:
    import msc
    from tests.frontend.test_onnx_conformance import to_numpy

    feeds = case.feeds()
    bound = {n: feeds[n] for n in _bound_names(case)}
    g = msc.from_onnx(case.model, constant_inputs=bound)
    f = cr.build(g)
    out = f(*[feeds[v.name] for v in g.inputs])
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    assert len(outs) == len(case.expected), case.name
    for k, (got, want) in enumerate(zip(outs, case.expected)):
        want = np.asarray(want)
        got = to_numpy(got, want.dtype)
        assert got.dtype == want.dtype and got.shape == want.shape, (case.name, k, got.shape)
        atol = case.atol
        if case.name.startswith(SCALED_ATOL) and want.size:
            atol *= max(1.0, float(np.max(np.abs(want))))
        np.testing.assert_allclose(
            got, want, rtol=case.rtol, atol=atol, err_msg=f"{case.name} output {k}"
        )


@pytest.mark.parametrize("name", sorted(_onnx_cases()))
def test_onnx_backend_case(name: str) -> None:
    case = _onnx_cases()[name]
    reason = EXPECTED_ONNX_FAILURES.get(name)
    if reason is None:
        _run_onnx_case(case)
        return
    try:
        _run_onnx_case(case)
    except Exception:
        return
    pytest.fail(f"{name} now runs through Relax; drop it from EXPECTED_ONNX_FAILURES ({reason})")


def test_bound_inputs_are_needed() -> None:
    """Every case BOUND_INPUTS binds is refused, naming why, when the input is fed at run time."""
    import msc
    from msc.errors import UnsupportedOpsError

    for case in _onnx_cases().values():
        if _bound_names(case):
            with pytest.raises(UnsupportedOpsError, match="computed at run time"):
                cr.to_module(msc.from_onnx(case.model))


def _recurrent_model(op: str, layout: int, **attrs):
    from onnx import TensorProto, helper

    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    seq, batch, inp, hid, nd = 4, 3, 5, 6, 2
    rng = np.random.default_rng(1)
    x_shape = [seq, batch, inp] if layout == 0 else [batch, seq, inp]
    s_shape = [nd, batch, hid] if layout == 0 else [batch, nd, hid]
    inits = {
        "w": rng.uniform(-0.5, 0.5, (nd, gates * hid, inp)).astype(np.float32),
        "r": rng.uniform(-0.5, 0.5, (nd, gates * hid, hid)).astype(np.float32),
        "b": rng.uniform(-0.5, 0.5, (nd, 2 * gates * hid)).astype(np.float32),
    }
    feeds = {
        "x": rng.uniform(-1, 1, x_shape).astype(np.float32),
        "lens": np.array([4, 2, 3], np.int32),
        "h0": rng.uniform(-1, 1, s_shape).astype(np.float32),
    }
    names = ["x", "w", "r", "b", "lens", "h0"]
    outs = ["y", "y_h"]
    if op == "LSTM":
        feeds["c0"] = rng.uniform(-1, 1, s_shape).astype(np.float32)
        inits["p"] = rng.uniform(-0.5, 0.5, (nd, 3 * hid)).astype(np.float32)
        names += ["c0", "p"]
        outs.append("y_c")
    node = helper.make_node(
        op, names, outs, hidden_size=hid, direction="bidirectional", layout=layout, **attrs
    )
    types = {"lens": TensorProto.INT32}
    graph = helper.make_graph(
        [node],
        op.lower(),
        [
            helper.make_tensor_value_info(n, types.get(n, TensorProto.FLOAT), a.shape)
            for n, a in feeds.items()
        ],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outs],
        [onnx_numpy(a, n) for n, a in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model, feeds


def onnx_numpy(a, name):
    from onnx import numpy_helper

    return numpy_helper.from_array(a, name)


RECURRENT = {
    "rnn_relu_clip": (
        "RNN", 0, {"activations": ["Relu", "Tanh"], "clip": 0.7}
    ),
    "gru_lbr_activations": (
        "GRU", 0, {"linear_before_reset": 1,
                   "activations": ["HardSigmoid", "Softsign", "Sigmoid", "Elu"],
                   "activation_alpha": [0.3, 1.0], "activation_beta": [0.4]},
    ),
    "gru_clip": ("GRU", 0, {"clip": 1.5}),
    "lstm_peepholes_lens": ("LSTM", 0, {}),
    "lstm_input_forget_activations": (
        "LSTM", 0, {"input_forget": 1,
                    "activations": ["Sigmoid", "Softsign", "ScaledTanh", "HardSigmoid",
                                    "Tanh", "Tanh"],
                    "activation_alpha": [1.2, 0.3], "activation_beta": [0.8, 0.4]},
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(RECURRENT))
def test_recurrent_against_onnxruntime(name: str) -> None:
    """rnn/gru/lstm unrolled in Relax agree with onnxruntime: both directions, sequence_lens,
    initial states, clip and non-default activations (onnxruntime has no layout 1; the
    backend's batchwise cases above cover it)."""
    import msc

    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference here")
    op, layout, attrs = RECURRENT[name]
    model, feeds = _recurrent_model(op, layout, **attrs)
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    g = msc.from_onnx(model)
    assert [n.op for n in g.nodes] == [op.lower()]
    got = cr.build(g)(*[feeds[v.name] for v in g.inputs])
    for k, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-5, atol=1e-5, err_msg=f"{name} {k}")


# ------------------------------------------------------------------------------ loops
def _loop_model(trip, cond, grow: bool):
    """An ONNX Loop (tests/frontend/test_onnx_control.py's body): carried acc (adds x * i, or
    grows by concatenation) and a count that ends the loop at 3; scan output: sum(acc)."""
    from onnx import TensorProto as TP
    from onnx import helper as oh
    from onnx import numpy_helper

    from tests.frontend.test_onnx_control import _loop_body, _model, _vi

    consts = [
        numpy_helper.from_array(np.array(1, np.int64), "one"),
        numpy_helper.from_array(np.array(3, np.int64), "limit"),
    ]
    ins = [("M", TP.INT64, trip), ("cond", TP.BOOL, cond)]
    names = [n if v is not None else "" for n, _, v in ins]
    node = oh.make_node(
        "Loop", [*names, "acc0", "n0"], ["acc", "n", "totals"], body=_loop_body(grow)
    )
    inputs = [_vi(n, t, []) for n, t, v in ins if v is not None]
    inputs += [_vi("x", TP.FLOAT, [3]), _vi("acc0", TP.FLOAT, [3]), _vi("n0", TP.INT64, [])]
    outs = [_vi("acc", TP.FLOAT, None), _vi("n", TP.INT64, []), _vi("totals", TP.FLOAT, None)]
    feeds = {
        n: np.array(v, np.int64 if t == TP.INT64 else bool) for n, t, v in ins if v is not None
    }
    feeds |= {"x": np.array([1, 2, 3], np.float32), "acc0": np.ones(3, np.float32),
              "n0": np.array(0, np.int64)}  # fmt: skip
    return _model([node], inputs, outs, consts), feeds


def _functions_with_if(mod) -> list[str]:
    from tvm import relax

    found = []
    for gv, func in mod.functions.items():
        seen: list[bool] = []
        relax.analysis.post_order_visit(
            func, lambda n, seen=seen: seen.append(isinstance(n, relax.If))
        )
        if gv.name_hint != "main" and any(seen):
            found.append(gv.name_hint)
    return found


@pytest.mark.parametrize(
    "trip, cond, grow",
    [(5, True, False), (5, None, False), (None, True, False), (4, True, True), (0, True, False),
     (2, False, False)],
)  # fmt: skip
def test_loop_is_a_recursive_function_against_onnxruntime(trip, cond, grow) -> None:
    """An ONNX Loop becomes a recursive Relax function with a relax.If: trip count and
    condition each present or absent, a carried value that grows, a scan output, zero runs."""
    import msc

    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference here")
    model, feeds = _loop_model(trip, cond, grow)
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    g = msc.from_onnx(model)
    assert "loop" in {n.op for n in g.nodes}
    f = cr.build(g)
    assert _functions_with_if(f.module) == ["loop0"]
    got = f(*[feeds[v.name] for v in g.inputs])
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.numpy().shape == b.shape
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-6, atol=1e-6)


def test_loop_body_with_a_nested_if_reading_the_outermost_scope() -> None:
    import msc
    from tests.frontend.test_onnx_control import nested_if_loop_model

    model = nested_if_loop_model()
    g = msc.from_onnx(model)
    f = cr.build(g)
    bias = np.array([1.0, 10.0], np.float32)
    for m in (0, 1, 3, 4):
        # i = 0 subtracts, every i > 0 adds (Cast to bool is i != 0)
        want = bias * (-1.0 + (m - 1)) if m else np.zeros(2, np.float32)
        got = f(np.array(m, np.int64), np.zeros(2, np.float32), bias)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)


def test_torch_while_loop_runs_through_relax() -> None:
    import msc
    from tests.frontend.test_torch_control import _While

    m, x = _While().eval(), torch.randn(3)
    g = msc.from_torch(m, (x, torch.tensor(4)))
    assert [n.op for n in g.nodes].count("loop") == 1
    f = cr.build(g)
    for k in (0, 1, 5):  # trip counts the example did not have
        kk = torch.tensor(k)
        with torch.no_grad():
            want = m(x, kk)
        got = f(x, kk)
        assert len(got) == len(want)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-6)
    # The script form keeps the loop function and reads back structurally equal.
    text = cr.to_script(g)
    assert "def loop0(" in text
    tvm.ir.assert_structural_equal(tvm.script.from_source(text), cr.script_module(g)[0])


@pytest.mark.parametrize(
    "in_axis, in_dir, out_axis, out_dir",
    [(0, 0, 0, 0), (1, 1, 0, 0), (0, 0, 1, 1), (-1, 1, -1, 0)],
)
def test_scan_axes_and_directions_against_onnxruntime(in_axis, in_dir, out_axis, out_dir) -> None:
    """An ONNX Scan runs the loop's recursive function over its slices: input and output
    axes and directions, a weight read from the outer scope."""
    from onnx import TensorProto as TP
    from onnx import numpy_helper

    import msc
    from tests.frontend.test_onnx_control import _model, _vi, accumulating_scan

    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference here")
    node = accumulating_scan(
        scan_input_axes=[in_axis], scan_input_directions=[in_dir],
        scan_output_axes=[out_axis], scan_output_directions=[out_dir],
    )  # fmt: skip
    xshape = [4, 2] if in_axis == 0 else [2, 4]
    w = numpy_helper.from_array(np.array([0.5, -2.0], np.float32), "w")
    model = _model(
        [node], [_vi("s0", TP.FLOAT, [2]), _vi("x", TP.FLOAT, xshape)],
        [_vi("s", TP.FLOAT, [2]), _vi("ys", TP.FLOAT, None)], [w],
    )  # fmt: skip
    feeds = {"s0": np.zeros(2, np.float32), "x": f32(*xshape)}
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    g = msc.from_onnx(model)
    f = cr.build(g)
    assert _functions_with_if(f.module) == ["loop0"]
    got = f(*[feeds[v.name] for v in g.inputs])
    for a, b in zip(got, want):
        assert a.numpy().shape == b.shape
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-6, atol=1e-6)
