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
