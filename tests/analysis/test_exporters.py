"""diff and verify on the files users actually have: a ResNet-like CNN with BatchNorm and a
small BERT, as .pt2 and as torch.onnx's files (dynamo and legacy exporters), one layer changed.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

from tests.analysis import exporters  # noqa: E402
from tests.security import run_cli  # noqa: E402

SUFFIX = {"pt2": "pt2", "dynamo": "onnx", "legacy": "onnx", "ep": "msc"}
CHANGED = {
    "resnet": ("layer3.0.conv2.weight", "layer3.0.conv2"),
    "bert": (
        "bert.encoder.layer.1.intermediate.dense.weight",
        "bert.encoder.layer.1.intermediate.dense",
    ),
    "bert_mlm": (
        "model.bert.encoder.layer.1.intermediate.dense.weight",
        "model.bert.encoder.layer.1.intermediate.dense",
    ),
    "llama": ("model.model.layers.1.mlp.up_proj.weight", "model.model.layers.1.mlp.up_proj"),
}
# A changed op: (submodule, its replacement, diff's line for it).
CHANGED_OP = {
    "bert_mlm": (
        "model.bert.encoder.layer.1.intermediate.intermediate_act_fn",
        "relu",
        "op gelu -> relu",
    ),
    "llama": ("model.model.layers.1.mlp.act_fn", "gelu", "op silu -> gelu"),
}


@pytest.fixture(scope="session")
def files(tmp_path_factory):
    """``files(model, how, changed=False, dynamic=False)``: the exported file, made once per
    session (``changed``: True for a scaled weight, "op" for a replaced activation)."""
    import torch

    root = tmp_path_factory.mktemp("exports")
    made: dict[tuple, object] = {}

    def get(model: str, how: str, changed: bool | str = False, dynamic: bool = False):
        key = (model, how, changed, dynamic)
        if key not in made:
            module, args = getattr(exporters, model)()
            if changed == "op":
                path, act, _ = CHANGED_OP[model]
                exporters.change_op(
                    module, path, torch.nn.ReLU() if act == "relu" else torch.nn.GELU()
                )
            elif changed:
                exporters.change(module, CHANGED[model][0])
            tag = ("_changed" if changed is True else f"_{changed}" if changed else "") + (
                "_dyn" if dynamic else ""
            )
            path = root / f"{model}{tag}.{how}.{SUFFIX[how]}"
            made[key] = exporters.export(module, args, path, how, dynamic=dynamic)
        return made[key]

    return get


@pytest.mark.parametrize("how", ["pt2", "dynamo", "legacy"])
def test_diff_of_a_batchnorm_cnn_against_itself(files, how):
    # It crashed on BatchNorm's 0-d num_batches_tracked (ValueError changing a 0-d dtype).
    path = str(files("resnet", how))
    code, out, err = run_cli("diff", path, path)
    assert code == 0, out + err
    assert "equal" in out and "Traceback" not in err


# ------------------------------------------------- module paths and weight names from torch.onnx
@pytest.mark.parametrize("how", ["dynamo", "legacy"])
def test_onnx_frontend_recovers_module_paths_and_weight_names(files, how):
    # Nodes of torch.onnx's files showed "module -", and codegen.torch wrote
    # getattr(self, 'onnx::Conv_193') for the weights BatchNorm folding had made.
    import codegen.torch
    import msc

    g = msc.from_onnx(files("resnet", how))
    modules = {n.provenance.module for n in g.nodes}
    assert {"layer3.0.conv2", "layer3.0.relu", "fc"} <= modules
    assert "layer3.0.conv2.weight" in g.weights
    assert "layer2.0.downsample.0.weight" in g.weights
    assert not [k for k in g.weights if k.startswith("onnx::") or k.startswith("val_")]
    # The flat form names every module call by its path (the default writes a class per block).
    src = codegen.torch.generate(g, flat=True)
    assert "self.layer3[0].conv2(" in src and "onnx::" not in src
    # Values named after their module, not the exporter's names for them
    # (layer1_layer1_0_conv1_Conv_output_0, getitem_27).
    forward = src[src.index("def forward") :]
    assert "layer3_0_conv2 = self.layer3[0].conv2(" in forward, forward
    assert "_output_0" not in forward and "getitem" not in forward

    gb = msc.from_onnx(files("bert", how))
    mods = {n.provenance.module for n in gb.nodes}
    assert "bert.encoder.layer.1.intermediate.dense" in mods
    # A linear's weight the file stores transposed (val_N, onnx::MatMul_N) is the source's
    # weight again, in linear's layout.
    assert "bert.encoder.layer.1.intermediate.dense.weight" in gb.weights
    assert not [k for k in gb.weights if k.endswith(("weight_t", "~T"))]
    assert "onnx::" not in codegen.torch.generate(gb)
    # The legacy exporter folds the position-id gather into an initializer named like the
    # value it computed (/bert/embeddings/position_embeddings/Gather_output_0).
    assert not [k for k in gb.weights if "/" in k]
    if how == "legacy":
        assert "bert.embeddings.position_embeddings.gather_output" in gb.weights


def test_dynamo_nodes_carry_the_fx_node_and_aten_op(files):
    import msc

    g = msc.from_onnx(files("bert", "dynamo"))
    ln = [n for n in g.nodes if n.op == "layer_norm"][0]
    assert ln.provenance.module == "bert.embeddings.LayerNorm"
    assert ln.provenance.op == "aten.layer_norm.default" and ln.provenance.name == "layer_norm"


# ------------------------------------------------- canonical-form diff, verify across exporters
@pytest.mark.parametrize("how", ["dynamo", "legacy"])
def test_diff_across_exporters_says_equivalent_up_to_known_rewrites(files, how):
    # It reported "10 matched, 59 removed, 43 added" and exit 1 for the same ResNet.
    code, out, err = run_cli("diff", str(files("resnet", "pt2")), str(files("resnet", how)))
    assert code == 0, out + err
    first = out.splitlines()[0]
    assert first.startswith("verdict: equivalent (up to "), out
    assert "batch_norm folded into conv x10 (A)" in first
    assert "gemm" not in first  # the file's Gemm of the fc weight reads as the linear it is


@pytest.mark.parametrize("how", ["dynamo", "legacy"])
def test_diff_of_bert_across_exporters_says_equivalent(files, how):
    # It said "4 real changes" (dynamo) and "16 real changes" (legacy), exit 1: a bool mask
    # that masks nothing against a float one, dynamo's NaN guard, a no-op reshape, the legacy
    # file's attention spelled out with K^T by one transpose, LayerNorms without their
    # all-ones weight.
    code, out, err = run_cli("diff", str(files("bert", "pt2")), str(files("bert", how)))
    assert code == 0, out + err
    first = out.splitlines()[0]
    assert first.startswith("verdict: equivalent (up to "), out
    assert "real change" not in out


@pytest.mark.parametrize("model", ["resnet", "bert"])
@pytest.mark.parametrize("how", ["dynamo", "legacy"])
def test_diff_across_exporters_names_the_one_real_change(files, model, how):
    code, out, err = run_cli("diff", str(files(model, "pt2")), str(files(model, how, changed=True)))
    assert code == 1, out + err
    assert out.startswith("verdict: 1 real change (after "), out
    assert f"  {CHANGED[model][1]}: " in out and "values differ (max abs" in out


@pytest.mark.parametrize(
    "src,target",
    [("pt2", "onnx"), ("pt2", "torch"), ("dynamo", "torch"), ("legacy", "torch")],
)
def test_convert_of_bert_checks_equivalent(files, tmp_path, src, target):
    # The re-imported output was "6 real changes" (pt2 -> onnx) and "61 real changes"
    # (legacy .onnx -> torch) for a conversion that changed nothing.
    out_path = tmp_path / ("out.onnx" if target == "onnx" else "out")
    code, out, err = run_cli("convert", str(files("bert", src)), "-o", str(out_path))
    assert code == 0, out + err
    check = next(ln for ln in out.splitlines() if "re-imported output" in ln)
    assert "real change" not in out and ("equivalent" in check or "equal" in check), out


@pytest.mark.parametrize("model", ["resnet", "bert"])
@pytest.mark.parametrize("how", ["dynamo", "legacy"])
def test_verify_across_exporters_names_the_changed_layer(files, model, how):
    # It blamed layer4.0.bn2 ("0 corresponding values before it agree") for a change in
    # layer3.0.conv2, and paired unrelated BERT constants ("max abs inf (shapes differ)").
    a, b = str(files(model, "pt2")), str(files(model, how, changed=True))
    for x, y in ((a, b), (b, a)):
        code, out, err = run_cli("verify", x, y)
        assert code == 1, out + err
        line = next(ln for ln in out.splitlines() if "divergence" in ln or "diverges" in ln)
        assert line.startswith("first divergence: "), out
        assert line.endswith(f"in module {CHANGED[model][1]!r}"), out
        assert "shapes differ" not in out


@pytest.mark.parametrize("how", ["dynamo", "legacy"])
def test_verify_across_exporters_of_the_same_model_matches(files, how):
    code, out, err = run_cli("verify", str(files("bert", "pt2")), str(files("bert", how)))
    assert code == 0 and "result: match" in out, out + err


def test_canonical_form_keeps_the_models_values(files):
    # Every value of the canonical graph is a value of the model (verify reads them there),
    # and the original graph is not modified.
    import msc
    from msc.analysis.canonical import canonicalize
    from msc.analysis.model import load_model

    g = load_model(files("resnet", "pt2")).graph
    before = msc.to_text(g)
    c = canonicalize(g)
    assert msc.to_text(g) == before
    names = {v.name for v in g.values()}
    assert {v.name for v in c.graph.values()} <= names
    assert c.rewrites["batch_norm folded into conv"] == 10


# ------------------------------------------------- dynamic exports (issue #29, 4 and 9)
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("how", ["dynamo", "legacy"])
def test_diff_of_an_upsampling_cnn_across_exporters_says_equivalent(files, how, dynamic):
    # It said "1 real change" (static) and 3-4 (dynamic batch): Resize's pytorch_half_pixel
    # against half_pixel, a linear resize's nearest_mode, the nearest resize's sizes
    # computed from a Shape at run time, and every node's type s77 against batch.
    a, b = files("upsample", "pt2", dynamic=dynamic), files("upsample", how, dynamic=dynamic)
    code, out, err = run_cli("diff", str(a), str(b))
    assert code == 0, out + err
    assert out.startswith("verdict: equivalent (up to "), out
    assert "real change" not in out


@pytest.mark.parametrize("how", ["dynamo", "legacy"])
def test_diff_of_a_cnn_with_untrained_batch_norms_says_equivalent(files, how):
    # A BatchNorm of fresh statistics folds to an all-zero bias, which torch.onnx (dynamo)
    # leaves out: it said "10 real changes" ("inputs: 3 -> 2" on every conv).
    a, b = files("fresh_resnet", "pt2", dynamic=True), files("fresh_resnet", how, dynamic=True)
    code, out, err = run_cli("diff", str(a), str(b))
    assert code == 0, out + err
    assert out.startswith("verdict: equivalent (up to "), out


TRANSFORMERS = ["bert_mlm", "llama"]


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("how", ["dynamo", "legacy"])
@pytest.mark.parametrize("model", TRANSFORMERS)
def test_diff_of_a_transformer_across_exporters_says_equivalent(files, model, how, dynamic):
    # BertForMaskedLM / LlamaForCausalLM called with an attention mask, as a .pt2
    # (torch.export.save) against torch.onnx's files. It said 82 (BERT) and 106 (Llama)
    # real changes for dynamo's dynamic exports, 114 and 428 for the legacy exporter's,
    # 10-15 (BERT) and 191 (Llama, legacy) for static ones: symbols named apart, shape
    # computations spelled three ways, masks built with gather_nd or a linear index, an
    # additive float mask against a bool one, RMSNorm as 1 / sqrt.
    a, b = files(model, "pt2", dynamic=dynamic), files(model, how, dynamic=dynamic)
    code, out, err = run_cli("diff", str(a), str(b))
    assert code == 0, out + err
    assert out.startswith("verdict: equivalent (up to "), out
    assert "real change" not in out and "removed (only in A)" not in out


@pytest.mark.parametrize("how", ["dynamo", "legacy"])
@pytest.mark.parametrize("model", TRANSFORMERS)
def test_diff_of_dynamic_transformer_exports_names_the_changed_weight(files, model, how):
    a, b = files(model, "pt2", dynamic=True), files(model, how, changed=True, dynamic=True)
    code, out, err = run_cli("diff", str(a), str(b))
    assert code == 1, out + err
    assert out.startswith("verdict: 1 real change (after "), out
    assert f"  {CHANGED[model][1]}: " in out and "values differ (max abs" in out


@pytest.mark.parametrize("how", ["dynamo", "legacy"])
@pytest.mark.parametrize("model", TRANSFORMERS)
def test_diff_of_dynamic_transformer_exports_names_the_changed_op(files, model, how):
    a, b = files(model, "pt2", dynamic=True), files(model, how, changed="op", dynamic=True)
    code, out, err = run_cli("diff", str(a), str(b))
    assert code == 1, out + err
    assert out.startswith("verdict: 1 real change (after "), out
    path, _, line = CHANGED_OP[model]
    assert f"  {path}: " in out and line in out


@pytest.mark.parametrize("model", ["upsample", "bert_mlm"])
def test_convert_onnx_round_trip_of_a_dynamic_export_checks_equal(files, tmp_path, model):
    # ONNX -> ONNX of the upsampling CNN said "1 real change" (codegen.onnx dropped a linear
    # Resize's nearest_mode, read back as the default); BERT's legacy file 13 (a flatten
    # written as Reshape, the attention's masked-row guard); BERT from torch.export 10 (its
    # mask's index written as GatherND of indices broadcast by adding zeros).
    for how in ("dynamo", "legacy", "pt2"):
        out_path = tmp_path / f"{model}_{how}.onnx"
        code, out, err = run_cli(
            "convert", str(files(model, how, dynamic=True)), "-o", str(out_path)
        )
        assert code == 0, out + err
        check = next(ln for ln in out.splitlines() if "re-imported output" in ln)
        assert "real change" not in out and ("equivalent" in check or "equal" in check), out
    if model == "upsample":
        import onnx

        written = onnx.load(tmp_path / f"{model}_dynamo.onnx")  # torch.onnx wrote "floor"
        resize = [n for n in written.graph.node if n.op_type == "Resize"]
        linear = next(n for n in resize if onnx.helper.get_node_attr_value(n, "mode") == b"linear")
        assert onnx.helper.get_node_attr_value(linear, "nearest_mode") == b"floor"


def test_convert_fails_on_a_real_change_unless_allowed(files, tmp_path, monkeypatch):
    # The check printed "N real changes" and exited 0, wrote the output, while msc diff of
    # the same pair exits 1. A written file that reads back with a Relu as LeakyRelu(0) (the
    # same values, another op: a real change to diff) now fails the conversion.
    import importlib

    import onnx

    conv = importlib.import_module("msc.analysis.convert")  # the module, not msc.convert
    write = conv._write

    def corrupting(g, target, dest, opset, report, *args):
        write(g, target, dest, opset, report, *args)
        m = onnx.load(dest)
        relu = next(n for n in m.graph.node if n.op_type == "Relu")
        relu.op_type = "LeakyRelu"
        relu.attribute.append(onnx.helper.make_attribute("alpha", 0.0))
        onnx.save(m, dest)

    monkeypatch.setattr(conv, "_write", corrupting)
    src = str(files("upsample", "dynamo", dynamic=True))
    out_path = tmp_path / "out.onnx"
    code, out, err = run_cli("convert", src, "-o", str(out_path))
    assert code == 1, out + err
    assert "1 real change" in out and "op relu -> leaky_relu" in out
    assert "check: outputs match" in out and "--allow-changes writes it anyway" in out
    assert not out_path.exists()
    code, out, err = run_cli("convert", src, "-o", str(out_path), "--allow-changes", "--json")
    assert code == 0, out + err
    import json

    data = json.loads(out)
    assert data["changes_allowed"] and not data["equivalent"] and out_path.exists()


@pytest.mark.parametrize("how", ["pt2", "ep", "dynamo", "legacy"])
@pytest.mark.parametrize("model", TRANSFORMERS)
def test_canonical_form_of_a_dynamic_export_computes_the_same(files, model, how):
    # Every rewrite is exact: the canonical graph (shape computations re-derived, masks and
    # indexing respelled, attention fused) gives the graph's outputs at sizes other than the
    # export's, with keys masked in one row.
    import numpy as np

    import msc
    from msc.analysis.canonical import canonicalize
    from msc.analysis.model import load_model, run_graph

    g = load_model(files(model, how, dynamic=True)).graph
    c = canonicalize(g).graph
    assert msc.to_text(c) != msc.to_text(g)
    rng = np.random.default_rng(0)
    for batch, seq in ((1, 5), (3, 11)):
        ids = rng.integers(0, 64, (batch, seq)).astype(np.int64)
        mask = np.ones((batch, seq), np.int64)
        mask[-1, -2:] = 0
        want, _ = run_graph(g, [ids, mask])
        got, _ = run_graph(c, [ids, mask])
        np.testing.assert_allclose(np.asarray(got[0]), np.asarray(want[0]), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("how", ["ep", "dynamo", "legacy"])
def test_shape_values_pass_is_idempotent(files, how):
    # Canonical shape computations are found again, not rebuilt: a second pass changed two
    # values every time, so canonicalize never reached its fixed point.
    from collections import Counter

    from msc.analysis.canonical import copy_graph
    from msc.analysis.model import load_model
    from msc.analysis.shape_values import resolve_shape_values

    g = copy_graph(load_model(files("bert_mlm", how, dynamic=True)).graph)
    first: Counter[str] = Counter()
    resolve_shape_values(g, first)
    assert first, "the export computes shapes"
    again: Counter[str] = Counter()
    resolve_shape_values(g, again)
    assert not again
