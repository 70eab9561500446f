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
    assert {"layer3.0.conv2" if how == "legacy" else "layer3.0.bn2", "fc"} <= modules
    assert "layer3.0.conv2.weight" in g.weights
    assert "layer2.0.downsample.0.weight" in g.weights
    assert not [k for k in g.weights if k.startswith("onnx::") or k.startswith("val_")]
    src = codegen.torch.generate(g)
    assert "self.layer3[0].conv2(" in src and "onnx::" not in src

    gb = msc.from_onnx(files("bert", how))
    mods = {n.provenance.module for n in gb.nodes}
    assert "bert.encoder.layer.1.intermediate.dense" in mods
    assert "bert.encoder.layer.1.intermediate.dense.weight_t" in gb.weights
    assert "onnx::" not in codegen.torch.generate(gb)


def test_dynamo_nodes_carry_the_fx_node_and_aten_op(files):
    import msc

    g = msc.from_onnx(files("bert", "dynamo"))
    ln = [n for n in g.nodes if n.op == "layer_norm"][0]
    assert ln.provenance.module == "bert.embeddings.LayerNorm"
    assert ln.provenance.op == "aten.layer_norm.default" and ln.provenance.name == "layer_norm"
