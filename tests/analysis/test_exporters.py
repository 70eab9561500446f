"""diff and verify on the files users actually have: a ResNet-like CNN with BatchNorm and a
small BERT, as .pt2 and as torch.onnx's files (dynamo and legacy exporters), one layer changed.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

from tests.analysis import exporters  # noqa: E402
from tests.security import run_cli  # noqa: E402

SUFFIX = {"pt2": "pt2", "dynamo": "onnx", "legacy": "onnx"}
CHANGED = {
    "resnet": ("layer3.0.conv2.weight", "layer3.0.conv2"),
    "bert": (
        "bert.encoder.layer.1.intermediate.dense.weight",
        "bert.encoder.layer.1.intermediate.dense",
    ),
}


@pytest.fixture(scope="session")
def files(tmp_path_factory):
    """``files(model, how, changed=False)``: the exported file, made once per session."""
    root = tmp_path_factory.mktemp("exports")
    made: dict[tuple[str, str, bool], object] = {}

    def get(model: str, how: str, changed: bool = False):
        key = (model, how, changed)
        if key not in made:
            module, args = getattr(exporters, model)()
            if changed:
                exporters.change(module, CHANGED[model][0])
            tag = "_changed" if changed else ""
            path = root / f"{model}{tag}.{how}.{SUFFIX[how]}"
            made[key] = exporters.export(module, args, path, how)
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
    src = codegen.torch.generate(g)
    assert "self.layer3[0].conv2(" in src and "onnx::" not in src
    # Values named after their module, not the exporter's names for them
    # (layer1_layer1_0_conv1_Conv_output_0, getitem_27).
    forward = src[src.index("def forward") :]
    assert "layer3_0_conv2 = self.layer3[0].conv2(" in forward, forward
    assert "_output_0" not in forward and "getitem" not in forward

    gb = msc.from_onnx(files("bert", how))
    mods = {n.provenance.module for n in gb.nodes}
    assert "bert.encoder.layer.1.intermediate.dense" in mods
    assert "bert.encoder.layer.1.intermediate.dense.weight_t" in gb.weights
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
    assert "batch_norm folded into conv x10 (A)" in first and "gemm -> linear x1 (B)" in first


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
