"""KerasHub backbones (issue 32) through msc: built from code with tiny configs and random
weights (no preset download), read by ``msc.from_keras`` and run as generated PyTorch and as
ONNX (onnxruntime) against Keras itself on the torch backend; then saved as a ``.keras`` file
and converted by the CLI (``msc convert M.keras --trust-code``: KerasHub's classes are
imported by Keras from the installed package) with convert's structural and numeric checks.

    python bench/keras_hub_models.py                      # every model, a table
    python bench/keras_hub_models.py --markdown docs/keras_hub_models.md
    python bench/keras_hub_models.py gpt2 vit             # some

KerasHub's layers (``TransformerEncoder``, ``PositionEmbedding``, ``ReversibleEmbedding``,
its own ``RMSNormalization``...) are classes outside Keras: msc traces each on the torch
backend (msc.frontend.keras.traced); Keras' own layers are read by their converters.

KerasHub is not one of msc's extras: it requires tensorflow-text (so TensorFlow) on Linux,
which it does not import on the torch backend. Install it without its dependencies beside
the ``[keras]`` extra::

    pip install --no-deps keras-hub && pip install kagglehub

Agreement: |a - b| <= 1e-4 + 1e-4 |keras| on every output (float32 through a few layers).
Writes bench/results/keras_hub.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("KERAS_BACKEND", "torch")
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
RESULTS = HERE / "results" / "keras_hub.json"
RTOL = ATOL = 1e-4


def _text(vocab: int = 100, seq: int = 9, segments: bool = False) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    feeds = {
        "token_ids": rng.integers(0, vocab, (2, seq)).astype(np.int32),
        "padding_mask": np.ones((2, seq), np.int32),
    }
    feeds["padding_mask"][1, seq - 3 :] = 0
    if segments:
        feeds["segment_ids"] = np.zeros((2, seq), np.int32)
    return feeds


def _images(size: int = 32) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"images": rng.standard_normal((2, size, size, 3)).astype(np.float32)}


def _models() -> dict[str, tuple[Any, Any]]:
    import keras_hub

    m = keras_hub.models
    text = dict(vocabulary_size=100, num_layers=2, hidden_dim=32, intermediate_dim=64)
    return {
        "BertBackbone": (
            lambda: m.BertBackbone(**text, num_heads=2, max_sequence_length=16),
            lambda: _text(segments=True),
        ),
        "DistilBertBackbone": (
            lambda: m.DistilBertBackbone(**text, num_heads=2, max_sequence_length=16),
            _text,
        ),
        "RobertaBackbone": (
            lambda: m.RobertaBackbone(**text, num_heads=2, max_sequence_length=16),
            _text,
        ),
        "GPT2Backbone": (
            lambda: m.GPT2Backbone(**text, num_heads=2, max_sequence_length=16),
            _text,
        ),
        "LlamaBackbone": (
            lambda: m.LlamaBackbone(**text, num_query_heads=4, num_key_value_heads=2),
            _text,
        ),
        "MistralBackbone": (
            lambda: m.MistralBackbone(**text, num_query_heads=4, num_key_value_heads=2),
            _text,
        ),
        "GemmaBackbone": (
            lambda: m.GemmaBackbone(**text, num_query_heads=2, num_key_value_heads=1, head_dim=16),
            _text,
        ),
        "ViTBackbone": (
            lambda: m.ViTBackbone(
                image_shape=(32, 32, 3),
                patch_size=8,
                num_layers=2,
                num_heads=2,
                hidden_dim=32,
                mlp_dim=64,
            ),  # fmt: skip
            _images,
        ),
        "ResNetBackbone": (
            lambda: m.ResNetBackbone(
                input_conv_filters=[64],
                input_conv_kernel_sizes=[7],
                stackwise_num_filters=[64, 32],
                stackwise_num_blocks=[2, 2],
                stackwise_num_strides=[1, 2],
                block_type="bottleneck_block",
                image_shape=(32, 32, 3),
            ),  # fmt: skip
            _images,
        ),
    }


def _agree(got: list[np.ndarray], ref: list[np.ndarray]) -> tuple[bool, float]:
    worst, ok = 0.0, len(got) == len(ref)
    for a, r in zip(got, ref):
        a, r = np.asarray(a, np.float64), np.asarray(r, np.float64)
        if a.shape != r.shape:
            return False, float("inf")
        err = np.abs(a - r)
        worst = max(worst, float(err.max(initial=0)))
        ok = ok and bool(np.all(err <= ATOL + RTOL * np.abs(r)))
    return ok, worst


def _cli(path: Path, target: str, out: Path) -> str:
    """``msc convert`` of the saved file: "ok", or the reason (the check's or the error)."""
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "msc",
            "convert",
            str(path),
            "--to",
            target,
            "-o",
            str(out),
            "--trust-code",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        env=dict(
            os.environ,
            PYTHONPATH=os.pathsep.join(
                p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
            ),
        ),
        timeout=900,
    )
    text = (p.stdout + p.stderr).strip()
    lines = text.splitlines()
    changes = [x for x in lines if x.startswith("check: ") and "real change" in x]
    if p.returncode != 0 or not out.exists():
        if changes:  # the structural check refused it: how many changes, and which
            head = changes[0].removeprefix("check: re-imported output: ").split(" (after")[0]
            return f"not written: {head}; " + changes[0].rsplit("; ", 1)[-1][:120]
        return lines[-1] if lines else f"exit {p.returncode}"
    bad = [x for x in lines if x.startswith("check: ") and "differ" in x]
    return "ok" if not bad else bad[0][:160]


def run_one(name: str, make: Any, feed: Any, files: bool) -> dict[str, Any]:
    import keras

    import msc
    from tests.tflite_cases import run_onnx, run_torch

    row: dict[str, Any] = {"model": name}
    keras.utils.set_random_seed(0)
    model, feeds = make(), feed()
    t0 = time.perf_counter()
    try:
        g = msc.from_keras(model)
    except Exception as e:  # noqa: BLE001 - the row says why
        lines = str(e).splitlines()
        row["read"] = f"{type(e).__name__}: " + " ".join(x.strip() for x in lines[:3])[:300]
        return row
    row["read_s"] = round(time.perf_counter() - t0, 2)
    row["read"] = "ok"
    row["nodes"] = len(g.nodes)
    row["traced"] = sorted(
        {n.provenance.op for n in g.nodes if not type_is_keras(model, n.provenance.name)}
    )
    out = model(feeds if len(feeds) > 1 else next(iter(feeds.values())), training=False)
    outs = list(out.values()) if isinstance(out, dict) else [out]
    ref = [np.asarray(keras.ops.convert_to_numpy(o)) for o in outs]
    arrays = [feeds[v.name] if v.name in feeds else next(iter(feeds.values())) for v in g.inputs]
    for target, run in (("torch", run_torch), ("onnx", run_onnx)):
        try:
            ok, worst = _agree(run(g, arrays), ref)
            row[target] = f"{'agrees' if ok else 'differs'} ({worst:.1e})"
        except Exception as e:  # noqa: BLE001
            row[target] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    if files:
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / f"{name}.keras"
            model.save(path)
            row["cli_torch"] = _cli(path, "torch", Path(d) / "t")
            row["cli_onnx"] = _cli(path, "onnx", Path(d) / "m.onnx")
    return row


def type_is_keras(model: Any, path: str) -> bool:
    """The layer at ``path`` (a layer name) is one of Keras' own classes."""
    try:
        layer = model.get_layer(path.split("/")[0])
    except ValueError:
        return True
    module = type(layer).__module__
    return module == "keras" or module.startswith("keras.")


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "# KerasHub backbones",
        "",
        "Generated by `python bench/keras_hub_models.py --markdown docs/keras_hub_models.md`"
        " (tiny configs, random weights, the torch backend). Each backbone is read by"
        " `msc.from_keras` (KerasHub's own layer classes traced through PyTorch), run as"
        " generated PyTorch and as ONNX against Keras (|a - b| <= 1e-4 + 1e-4 |keras|),"
        " then saved as `.keras` and converted by `msc convert --trust-code` with its checks.",
        "",
        "| model | read | nodes | traced classes | PyTorch | ONNX | CLI -> torch | CLI -> onnx |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        traced = ", ".join(r.get("traced", [])) or "-"
        cells = [r["model"], r["read"], str(r.get("nodes", "")), traced, r.get("torch", ""),
                 r.get("onnx", ""), r.get("cli_torch", ""), r.get("cli_onnx", "")]  # fmt: skip
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", help="model names (default: all)")
    ap.add_argument("--markdown", type=Path, help="write the table as a docs page")
    ap.add_argument("--no-files", action="store_true", help="skip the saved-file CLI runs")
    args = ap.parse_args()
    try:
        models = _models()
    except ImportError as e:
        print(f"keras_hub is not installed ({e}): see this script's docstring", file=sys.stderr)
        return 2
    rows = []
    for name in args.models or list(models):
        make, feed = models[name]
        try:
            row = run_one(name, make, feed, not args.no_files)
        except Exception:  # noqa: BLE001 - the row says why
            row = {"model": name, "read": traceback.format_exc().splitlines()[-1][:200]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    RESULTS.write_text(json.dumps(rows, indent=1) + "\n")
    if args.markdown:
        args.markdown.write_text(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
