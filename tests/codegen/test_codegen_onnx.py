"""codegen.onnx at the model level: names, types, metadata, opsets, errors, saving."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime runs the generated models")

import codegen.onnx as conx  # noqa: E402
import codegen.onnx.writer as save_mod  # noqa: E402
import msc  # noqa: E402
from codegen.onnx.registry import ONNX_DTYPE, EmitterRegistry  # noqa: E402
from msc.errors import ConversionError, MscError, UnsupportedOpsError  # noqa: E402
from msc.examples import small_cnn_graph  # noqa: E402
from msc.ir import DType, Graph, Provenance, SymDim, TensorType  # noqa: E402


def session(model_or_path):
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    src = model_or_path if isinstance(model_or_path, str) else model_or_path.SerializeToString()
    return ort.InferenceSession(src, opts, providers=["CPUExecutionProvider"])


def cnn_inputs(batch: int = 2) -> dict:
    return {"x": np.random.default_rng(0).standard_normal((batch, 3, 16, 16)).astype(np.float32)}


def reference(g: Graph, feeds: dict) -> list[np.ndarray]:
    return session(conx.to_model(g)).run(None, feeds)


def test_names_types_and_dim_params_are_kept() -> None:
    g = small_cnn_graph()
    m = conx.to_model(g, optimize=False)  # node for node: the initializers are the weights
    onnx.checker.check_model(m, full_check=True)
    gp = m.graph
    assert [i.name for i in gp.input] == ["x"]
    dims = gp.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "batch" and [d.dim_value for d in dims[1:]] == [3, 16, 16]
    assert {t.name for t in gp.initializer} == set(g.weights)
    assert all(t.HasField("raw_data") for t in gp.initializer)
    assert [o.name for o in gp.output] == ["logits"]
    names = [n.name for n in gp.node]
    assert "features.0" in names and "features.1" in names and "classifier" in names
    made = {o for n in gp.node for o in n.output}
    assert {v.name for n in g.nodes for v in n.outputs} <= made
    conv = next(n for n in gp.node if n.name == "features.0")
    props = {p.key: p.value for p in conv.metadata_props}
    assert props["msc.provenance.op"] == "aten.conv2d.default"
    assert props["msc.provenance.module"] == "features.0"
    meta = {p.key: p.value for p in m.metadata_props}
    assert json.loads(meta["msc.dim_ranges"]) == {"batch": [1, 64]}
    assert json.loads(meta["msc.meta.producer"]) == "msc.examples"
    # value_info keeps intermediate types, symbolic batch included
    vi = {v.name: v for v in gp.value_info}
    assert vi["0"].type.tensor_type.shape.dim[0].dim_param == "batch"
    for batch in (1, 5):
        (out,) = session(m).run(None, cnn_inputs(batch))
        assert out.shape == (batch, 10)


def test_weight_and_value_sharing_a_name_and_boundary_outputs() -> None:
    g = Graph("clash")
    x = g.add_input("w", TensorType(DType.FLOAT32, (3,)))
    w = g.add_weight("w", np.arange(3, dtype=np.float32))
    y = g.add_node("add", [x, w], output_names=["y"]).output
    g.set_outputs([y, x, w, y])  # an input, a weight and a repeated value as outputs
    m = conx.to_model(g)
    onnx.checker.check_model(m, full_check=True)
    renamed = json.loads({p.key: p.value for p in m.metadata_props}["msc.renamed_values"])
    assert renamed == {"w": "w__1"}
    outs = session(m).run(None, {"w": np.ones(3, np.float32)})
    np.testing.assert_array_equal(outs[0], [1, 2, 3])
    np.testing.assert_array_equal(outs[1], [1, 1, 1])
    np.testing.assert_array_equal(outs[2], [0, 1, 2])
    np.testing.assert_array_equal(outs[3], outs[0])
    assert len({o.name for o in m.graph.output}) == 4


@pytest.mark.parametrize(
    "dtype", [DType.FLOAT16, DType.BFLOAT16, DType.FLOAT64, DType.INT8, DType.UINT16, DType.BOOL]
)
def test_dtypes_are_kept(dtype: DType) -> None:
    g = Graph("dt")
    x = g.add_input("x", TensorType(dtype, (2, SymDim("n"))))
    w = g.add_weight("w", np.ones((2, 1), dtype=dtype.to_numpy()))
    g.set_outputs([g.op("identity", x), g.op("identity", w)])
    m = conx.to_model(g)
    onnx.checker.check_model(m, full_check=True)
    assert m.graph.input[0].type.tensor_type.elem_type == ONNX_DTYPE[dtype]
    assert m.graph.initializer[0].data_type == ONNX_DTYPE[dtype]
    back = onnx.numpy_helper.to_array(m.graph.initializer[0])
    assert back.tobytes() == w.numpy().tobytes()


def test_unsupported_nodes_are_reported_all_at_once() -> None:
    g = Graph("old")
    x = g.add_input("x", TensorType(DType.FLOAT32, (SymDim("b"), 4, 4)))
    a = g.add_node("einsum", [x, x], {"equation": "bij,bjk->bik"}, name="mix").output
    b = g.add_node("trilu", [a], {"upper": True}, name="tri").output  # ok: static last dims
    c = g.add_node("cumprod", [x], {"axis": 0}, name="scan").output  # symbolic axis
    d = g.add_node("gelu", [b], name="act").output  # decomposes fine at 11
    g.set_outputs([c, d])
    with pytest.raises(UnsupportedOpsError) as err:
        conx.to_model(g, 11)
    ops = {(o.op, o.node) for o in err.value.ops}
    assert ops == {("einsum (opset 11)", "mix"), ("cumprod (opset 11)", "scan")}
    text = str(err.value)
    assert "no emitter before opset 12" in text and "cumprod: needs a static dim" in text
    if conx.max_opset() >= 26:  # CumProd exists from 26: then everything converts
        conx.to_model(g, 26)


def test_opset_range_and_default() -> None:
    g = small_cnn_graph()
    with pytest.raises(ConversionError, match="outside"):
        conx.to_model(g, conx.MIN_OPSET - 1)
    with pytest.raises(ConversionError, match="outside"):
        conx.to_model(g, conx.max_opset() + 1)
    d = conx.default_opset()  # the newest opset onnxruntime loads: the most a default can be
    assert conx.to_model(g).opset_import[0].version == conx.choose_opset(g)[0] <= d
    session(conx.to_model(g, d))  # onnxruntime runs it
    if d < conx.max_opset():  # and not the next one, else it would be higher
        with pytest.raises(Exception):  # noqa: B017 (onnxruntime's own error types)
            session(conx.to_model(g, d + 1))


def _attention_graph() -> Graph:
    g = Graph("attn")
    q = g.add_input("q", TensorType(DType.FLOAT32, (1, 2, 4, 8)))
    g.set_outputs([g.add_node("attention", [q, q, q], name="attn").output])
    return g


def _kernel_ops(model) -> set[str]:
    """The ops of the graph onnxruntime runs for ``model`` (no optimization: its function
    expansions only)."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        opts.optimized_model_filepath = os.path.join(d, "run.onnx")
        ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        return {n.op_type for n in onnx.load(opts.optimized_model_filepath).graph.node}


def test_default_opset_is_the_newest_with_a_kernel_for_every_op() -> None:
    # The API wrote the newest opset onnxruntime loads (28), where it has no kernel for
    # Attention-25 and silently ran each attention as its ~60-node function body; the CLI
    # wrote 20 by another rule. One rule now, for both.
    g = _attention_graph()
    opset, why = conx.choose_opset(g)
    model = conx.to_model(g)
    assert model.opset_import[0].version == opset
    assert "Attention" in _kernel_ops(model)  # onnxruntime runs it as one kernel
    since = onnx.defs.get_schema("Attention", conx.default_opset(), "").since_version
    if conx.has_kernel("Attention", since):
        assert opset == conx.default_opset() and "kernel for every op" in why, why
    else:  # onnxruntime 1.32: Attention kernels for versions 23 and 24 only
        assert opset < conx.default_opset()
        assert f"no kernel for Attention-{since}" in why and f"{opset} is the newest" in why, why
        expanded = conx.to_model(g, conx.default_opset())
        assert "Attention" not in _kernel_ops(expanded)  # what the old default did


def test_has_kernel_follows_onnxruntimes_matching() -> None:
    # A kernel registered from version v onwards serves version v, not a newer version.
    assert conx.has_kernel("Relu", 14) and not conx.has_kernel("Relu", 15)
    assert conx.has_kernel("Identity", 1) and conx.has_kernel("Identity", 11)  # range 1-12
    assert conx.has_kernel("Constant", 13) is None  # no kernel at all: onnxruntime folds it


def test_the_default_is_the_same_for_save_and_to_model(tmp_path) -> None:
    g = _attention_graph()
    path = conx.save(g, tmp_path / "a.onnx")
    assert onnx.load(path).opset_import[0].version == conx.to_model(g).opset_import[0].version


def test_emitter_registry_lookup_and_duplicates() -> None:
    r = EmitterRegistry()
    r.register("relu", 6, lambda e, x: e.op("Relu", x))
    r.register("relu", 14, lambda e, x: e.op("Relu", x))
    assert r.lookup("relu", 5) is None
    assert r.lookup("relu", 13).since == 6 and r.lookup("relu", 20).since == 14
    with pytest.raises(ValueError, match="twice"):
        r.register("relu", 14, lambda e, x: x)
    with pytest.raises(ValueError, match="unknown"):
        r.register("no_such_op", 1, lambda e, x: x)


def test_coverage_markdown_lists_every_op() -> None:
    text = conx.coverage_markdown()
    for op in msc.ops.registry.names():
        assert f"| `{op}` |" in text
    row = next(line for line in text.splitlines() if line.startswith("| `gelu` |"))
    assert row.split("|")[2].strip() == "20"
    assert "| D |" in row and "E/D" in row


# ----------------------------------------------------------------------------- saving
def big_graph(n_weights: int = 3, size: int = 4096) -> Graph:
    g = Graph("big")
    x = g.add_input("x", TensorType(DType.FLOAT32, (size,)))
    y = x
    rng = np.random.default_rng(0)
    for i in range(n_weights):
        w = g.add_weight(f"layer.{i}.weight", rng.standard_normal(size).astype(np.float32))
        y = g.op("add", y, w)
    small = g.add_weight("small", np.float32([2.0]))
    g.set_outputs([g.add_node("mul", [y, small], output_names=["out"]).output])
    return g


def test_save_external_data_loads_and_runs(tmp_path) -> None:
    g = big_graph()
    path = conx.save(g, tmp_path / "m.onnx", external_data=True)
    assert sorted(os.listdir(tmp_path)) == ["m.onnx", "m.onnx.data"]
    assert (tmp_path / "m.onnx.data").stat().st_size >= 3 * 4096 * 4
    m = onnx.load(str(path), load_external_data=False)
    ext = {t.name for t in m.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL}
    assert ext == {"layer.0.weight", "layer.1.weight", "layer.2.weight"}  # "small" stays inline
    onnx.checker.check_model(str(path), full_check=True)
    feeds = {"x": np.ones(4096, np.float32)}
    np.testing.assert_array_equal(session(str(path)).run(None, feeds)[0], reference(g, feeds)[0])
    full = onnx.load(str(path))
    for t in full.graph.initializer:
        np.testing.assert_array_equal(onnx.numpy_helper.to_array(t), g.weights[t.name].numpy())


def test_save_inline_by_default_and_named_data_file(tmp_path) -> None:
    g = big_graph(1)
    conx.save(g, tmp_path / "a.onnx")
    assert os.listdir(tmp_path) == ["a.onnx"]
    conx.save(g, tmp_path / "b.onnx", external_data="weights.bin", size_threshold=0)
    assert (tmp_path / "weights.bin").exists()
    m = onnx.load(str(tmp_path / "b.onnx"), load_external_data=False)
    assert all(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer)
    with pytest.raises(MscError, match="beside"):
        conx.save(g, tmp_path / "c.onnx", external_data="../escape.bin")


def test_save_goes_external_above_the_size_where_onnxruntime_loads_it_faster(tmp_path) -> None:
    """Over 4 MiB of weights, the default writes them to a data file beside the model; at
    4 MiB and below they stay inline, one file."""

    def graph(columns: int) -> Graph:
        g = Graph("m")
        x = g.add_input("x", TensorType(DType.FLOAT32, [1, 512]))
        w = np.zeros((512, columns), np.float32)
        y = g.op("matmul", x, g.add_weight("w", w, TensorType(DType.FLOAT32, list(w.shape))))
        g.set_outputs([y])
        return g

    conx.save(graph(2048 + 1), tmp_path / "big.onnx")  # 4 MiB and one column
    assert sorted(os.listdir(tmp_path)) == ["big.onnx", "big.onnx.data"]
    assert os.path.getsize(tmp_path / "big.onnx") < 1 << 20
    conx.save(graph(2048 + 1), tmp_path / "inline.onnx", external_data=False)
    assert os.path.getsize(tmp_path / "inline.onnx") > 1 << 22
    conx.save(graph(2048), tmp_path / "small.onnx")  # 4 MiB
    assert not (tmp_path / "small.onnx.data").exists()


def test_save_goes_external_above_the_protobuf_limit(tmp_path, monkeypatch) -> None:
    g = big_graph(2)
    monkeypatch.setattr(save_mod, "PROTO_LIMIT", 10_000)  # stands in for 2 GB
    conx.save(g, tmp_path / "m.onnx")
    assert (tmp_path / "m.onnx.data").exists()
    with pytest.raises(MscError, match="do not fit"):
        conx.save(g, tmp_path / "n.onnx", external_data=False)
    assert not (tmp_path / "n.onnx").exists()


def test_save_is_atomic(tmp_path, monkeypatch) -> None:
    g = big_graph()
    conx.save(g, tmp_path / "m.onnx", external_data=True)
    before = {p: (tmp_path / p).read_bytes() for p in os.listdir(tmp_path)}
    calls = []

    def failing(f, arr):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("disk full")
        return real(f, arr)

    real = save_mod._write_array
    monkeypatch.setattr(save_mod, "_write_array", failing)
    with pytest.raises(OSError, match="disk full"):
        conx.save(big_graph(3, 4096), tmp_path / "m.onnx", external_data=True)
    after = {p: (tmp_path / p).read_bytes() for p in os.listdir(tmp_path)}
    assert after == before  # no temporaries left, old files untouched
    # an unsupported op fails before anything is written
    bad = Graph("bad")
    x = bad.add_input("x", TensorType(DType.FLOAT32, (SymDim("n"),)))
    bad.set_outputs([bad.op("cumprod", x, axis=0)])
    with pytest.raises(UnsupportedOpsError):
        conx.save(bad, tmp_path / "bad.onnx", opset=11, external_data=True)
    assert sorted(os.listdir(tmp_path)) == sorted(before)


def test_lazy_weights_are_streamed(tmp_path) -> None:
    arr = np.arange(5000, dtype=np.float32)
    mm_path = tmp_path / "w.bin"
    arr.tofile(mm_path)
    loads = []

    def loader():
        loads.append(1)
        return np.memmap(mm_path, dtype=np.float32, mode="r", shape=(5000,))

    g = Graph("lazy")
    x = g.add_input("x", TensorType(DType.FLOAT32, (5000,)))
    w = g.add_weight("w", loader, type=TensorType(DType.FLOAT32, (5000,)))
    g.set_outputs([g.op("add", x, w)])
    conx.save(g, tmp_path / "m.onnx", external_data=True)
    assert loads == [1]
    out = session(str(tmp_path / "m.onnx")).run(None, {"x": np.zeros(5000, np.float32)})[0]
    np.testing.assert_array_equal(out, arr)


def test_type_only_graph_weights_become_inputs() -> None:
    g = Graph("typed")
    x = g.add_input("x", TensorType(DType.FLOAT32, (2,)))
    w = g.add_weight("w", None, type=TensorType(DType.FLOAT32, (2,)))
    g.set_outputs([g.op("mul", x, w)])
    m = conx.to_model(g)
    assert [i.name for i in m.graph.input] == ["x", "w"] and not m.graph.initializer


def test_provenance_of_decomposed_nodes() -> None:
    g = Graph("p")
    x = g.add_input("x", TensorType(DType.FLOAT32, (2, 8)))
    prov = Provenance("torch", "aten.gelu.default", "gelu", "mlp.act")
    g.add_node("gelu", [x], name="mlp.act", provenance=prov, output_names=["h"])
    g.set_outputs([g.nodes[0].output])
    m = conx.to_model(g, 17)  # no Gelu before 20: decomposed
    assert len(m.graph.node) > 1
    for n in m.graph.node:
        props = {p.key: p.value for p in n.metadata_props}
        assert props["msc.provenance.module"] == "mlp.act", n.name
        assert n.name.startswith("mlp.act")
    assert m.graph.output[0].name == "h"


def test_provenance_ranges_and_meta_survive_a_trip_through_onnx(tmp_path):
    """Module paths, symbol ranges and graph metadata come back from the ONNX file."""
    g = small_cnn_graph()
    g.meta["tags"] = (1, 2)
    path = tmp_path / "m.onnx"
    conx.save(g, path)
    back = msc.from_onnx(path)
    assert back.inputs[0].shape[0] == SymDim("batch", 1, 64)
    conv = next(n for n in back.nodes if n.op == "conv")
    assert conv.provenance == Provenance("torch", "aten.conv2d.default", "conv2d", "features.0")
    assert back.meta["tags"] == (1, 2)


@pytest.mark.parametrize("dtype", [DType.INT8, DType.INT16, DType.INT32, DType.INT64])
@pytest.mark.parametrize("op", ["bitshift_left", "bitshift_right"])
def test_signed_shifts_before_opset_28(op, dtype):
    """ONNX BitShift takes signed integers only from opset 28, and Pow no 8/16-bit integers:
    earlier opsets get an arithmetic form, checked in onnxruntime against numpy."""
    import onnxruntime as ort

    g = Graph()
    a = g.add_input("a", TensorType(dtype, (6,)))
    b = g.add_input("b", TensorType(dtype, (6,)))
    g.set_outputs([g.op(op, a, b)])
    model = conx.to_model(g, opset=26)
    npdt = dtype.to_numpy()
    x = np.array([-7, 5, 100, -100, 3, -1], dtype=npdt)
    y = np.array([1, 2, 1, 1, 0, 3], dtype=npdt)
    got = ort.InferenceSession(model.SerializeToString()).run(None, {"a": x, "b": y})[0]
    want = (x.astype(np.int64) << y) if op == "bitshift_left" else (x >> y)
    np.testing.assert_array_equal(got, want.astype(npdt))


@pytest.mark.parametrize(
    "batch,sizes,mode",
    [
        (SymDim("batch"), [8, 15], "nearest"),  # exact ratios: full-rank scales
        (SymDim("batch"), [6, 7], "linear"),  # 4 -> 6, 5 -> 7: Shape(x)[:2] ++ sizes
        (2, [6, 7], "nearest"),  # static N, C: full-rank sizes
    ],
)
def test_channels_last_resize_runs_with_onnxruntimes_layout_transformer(batch, sizes, mode):
    """transpose -> resize -> transpose (a channels-last model's upsampling) is written as a
    full-rank Resize: onnxruntime's layout transformer, which runs at its default level, drops
    the sizes of a Resize with opset 18's ``axes`` and refuses the session."""
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
    g = Graph("up")
    x = g.add_input("x", TensorType(DType.FLOAT32, [batch, 4, 5, 3]))
    y = g.op("transpose", x, perm=[0, 3, 1, 2])
    y = g.op(
        "resize",
        y,
        sizes=sizes,
        mode=mode,
        coordinate_transformation_mode="half_pixel",
        nearest_mode="round_prefer_ceil",  # torch's nearest-exact
    )
    g.set_outputs([g.op("transpose", y, perm=[0, 2, 3, 1])])
    model = conx.to_model(g)
    assert not any(a.name == "axes" for n in model.graph.node for a in n.attribute)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    xs = np.random.default_rng(0).standard_normal((2, 4, 5, 3)).astype(np.float32)
    got = sess.run(None, {"x": xs})[0]
    assert got.shape == (2, *sizes, 3)
    torch = pytest.importorskip("torch")
    ref = torch.nn.functional.interpolate(
        torch.from_numpy(xs).permute(0, 3, 1, 2),
        size=sizes,
        mode="nearest-exact" if mode == "nearest" else "bilinear",
        align_corners=None if mode == "nearest" else False,
    )
    np.testing.assert_allclose(got, ref.permute(0, 2, 3, 1).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [DType.INT32, DType.INT64])
@pytest.mark.parametrize("shapes", [([3], [3]), ([3, 1], [2])], ids=["same", "broadcast"])
def test_advanced_indexing_with_int32_indices(dtype, shapes):
    """index / index_put on two axes with indices of either integer type (a JAX or TFLite
    source gives int32): the indices are cast to int64 for GatherND / ScatterND."""
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((5, 4)).astype(np.float32)
    iv = rng.integers(0, 5, shapes[0]).astype(dtype.to_numpy())
    jv = rng.integers(0, 4, shapes[1]).astype(dtype.to_numpy())
    b = np.broadcast_shapes(iv.shape, jv.shape)
    vv = rng.standard_normal(b).astype(np.float32)
    want_index = xs[iv, jv]
    want_put = xs.copy()
    want_put[iv, jv] = vv
    for op in ("index", "index_put"):
        g = Graph(op)
        x = g.add_input("x", TensorType(DType.FLOAT32, [5, 4]))
        i = g.add_input("i", TensorType(dtype, list(iv.shape)))
        j = g.add_input("j", TensorType(dtype, list(jv.shape)))
        feeds = {"x": xs, "i": iv, "j": jv}
        if op == "index":
            y, want = g.op("index", x, i, j, axes=[0, 1]), want_index
        else:
            v = g.add_input("v", TensorType(DType.FLOAT32, list(b)))
            y, want = g.op("index_put", x, v, i, j, axes=[0, 1]), want_put
            feeds["v"] = vv
        g.set_outputs([y])
        sess = ort.InferenceSession(
            conx.to_model(g).SerializeToString(), providers=["CPUExecutionProvider"]
        )
        np.testing.assert_array_equal(sess.run(None, feeds)[0], want, err_msg=op)


@pytest.mark.parametrize("optimize", [True, False])
def test_external_data_holds_the_weights_as_written_not_the_callers(tmp_path, optimize) -> None:
    """A channels-last conv's kernel is made OIHW under its own name before writing; the
    external data file holds that kernel, not the caller's OHWI array of the same name (which
    read as a reshape: every k x k conv of a large TFLite or Keras CNN came out wrong)."""
    import torch

    rng = np.random.default_rng(0)
    kernel = rng.standard_normal((8, 3, 3, 4)).astype(np.float32)  # OHWI
    g = Graph("nhwc")
    x = g.add_input("x", TensorType(DType.FLOAT32, (1, 6, 6, 4)))
    y = g.add_node(
        "conv",
        [x, g.add_weight("conv.kernel", kernel), None],
        {
            "stride": [1, 1],
            "padding": [1, 1, 1, 1],
            "dilation": [1, 1],
            "groups": 1,
            "data_layout": "NHWC",
            "kernel_layout": "OHWI",
        },
    ).output
    g.outputs.append(y)
    path = conx.save(
        g, tmp_path / "m.onnx", external_data=True, size_threshold=0, optimize=optimize
    )
    assert g.weights["conv.kernel"].numpy().shape == (8, 3, 3, 4)  # the caller's, untouched
    feeds = {"x": rng.standard_normal((1, 6, 6, 4)).astype(np.float32)}
    want = torch.nn.functional.conv2d(
        torch.from_numpy(feeds["x"]).permute(0, 3, 1, 2),
        torch.from_numpy(kernel).permute(0, 3, 1, 2),
        padding=1,
    ).permute(0, 2, 3, 1)
    got = session(str(path)).run(None, feeds)[0]
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


def test_relu6_converts_to_onnx_with_its_check(tmp_path) -> None:
    """ReLU6 is hardtanh(0, 6), written as Clip with constant bounds, which reads back as a
    clamp of two constants: convert's structural check names the rewrite instead of failing
    (every MobileNet from PyTorch, TFLite or a SavedModel did)."""
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3)

        def forward(self, x):
            return torch.nn.functional.relu6(self.conv(x))

    src = tmp_path / "relu6.pt2"
    torch.export.save(torch.export.export(Net().eval(), (torch.randn(1, 3, 8, 8),)), src)
    r = msc.convert(src, tmp_path / "relu6.onnx")
    assert r.ok, r
    assert "clamp by constant bounds -> hardtanh" in str(r.to_json()), r.to_json()
