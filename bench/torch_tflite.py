"""PyTorch -> TFLite on the bench's models, through msc and through litert-torch (issue 31).

    python bench/torch_tflite.py --quick                   # small configs (~3 min, 2 cores)
    python bench/torch_tflite.py                           # bench/models.py's sizes
    python bench/torch_tflite.py --litert-python /venv/bin/python --markdown docs/torch_tflite.md
    python bench/torch_tflite.py --litert-from old.json ...  # litert-torch's rows of a run
                                                             # where it was installed

The models are bench/models.py's (a ResNet from transformers' ResNetConfig, the CNN of
torchvision's layout; BERT and ViT encoders; GPT-2 and Llama decoders) and three more CNNs of
torchvision's families from transformers' configs (``CNNS``: MobileNetV2's depthwise convs and
ReLU6, ConvNeXt-T's channels-last LayerNorm between permutes, EfficientNet-B0's SiLU and
squeeze-excitation), random weights, eval mode, seeded. For each model and converter, in a
fresh process with a time limit:

- msc: ``msc.from_torch`` (torch.export) then ``codegen.tflite.to_bytes``;
- litert-torch: ``litert_torch.convert(model, args)`` then its flatbuffer, run in the
  interpreter named by ``--litert-python`` (default: this one) when litert-torch imports
  there, else the reason it does not;

and the file written is run by LiteRT's interpreter (ai-edge-litert) on the model's example
inputs and compared with eager PyTorch: the largest |a - b| over the outputs, and whether each
output agrees within |a - b| <= 1e-4 max(1, max |eager|) + 1e-4 |eager| (float32 rounding of
a deep stack; bench/hf_models.py's rule). Counted in the file: operators in all, TRANSPOSE
operators (the layout changes a channels-last runtime pays for) and the file's size; timed: the
conversion from the eager module to the flatbuffer's bytes (torch.export included for both).
Writes bench/results/torch_tflite.json, prints a table, and with ``--markdown`` a page.

litert-torch 0.10.0 installs beside torch 2.13 (it asks torch < 2.15 and ai-edge-litert 2.3,
what msc's venv has) but pins typing-extensions < 4.13 (through xdsl) below this venv's, so it
goes in a venv of its own that reads this venv's packages (torch among them) through a .pth
file, and the venv msc runs in stays as it is::

    python -m venv /tmp/lt
    echo "$VIRTUAL_ENV/lib/python3.11/site-packages" > /tmp/lt/lib/python3.11/site-packages/v.pth
    pip freeze | grep -E '^(torch|numpy|ai-edge-litert|transformers)==' > /tmp/lt-pins.txt
    /tmp/lt/bin/python -m pip install -c /tmp/lt-pins.txt litert-torch==0.10.0
    python bench/torch_tflite.py --litert-python /tmp/lt/bin/python
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

CONVERTERS = ("msc", "litert-torch")


def _cnn(config: str, model: str, small: dict[str, Any]):
    """A transformers vision backbone at its config's size (``quick``: ``small``), on one
    224 x 224 image."""

    def make(quick: bool):
        import torch
        import transformers

        cfg = getattr(transformers, config)(**(small if quick else {}))
        desc = f"{model}({config}()) 1x3x224x224"
        return getattr(transformers, model)(cfg), (torch.randn(1, 3, 224, 224),), desc

    return make


# More CNNs than bench/models.py's ResNet, torchvision's other families.
CNNS = {
    "mobilenet-v2": _cnn("MobileNetV2Config", "MobileNetV2Model", {"depth_multiplier": 0.35}),
    "convnext-tiny": _cnn(
        "ConvNextConfig",
        "ConvNextModel",
        {"depths": [1, 1, 1, 1], "hidden_sizes": [16, 32, 48, 64]},
    ),
    "efficientnet-b0": _cnn("EfficientNetConfig", "EfficientNetModel", {"depth_coefficient": 0.5}),
}


def _models() -> dict[str, Any]:
    from models import MODELS

    return {**MODELS, **CNNS}


def _build(name: str, quick: bool):
    from models import Built, build

    if name not in CNNS:
        return build(name, quick)
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    model, args, desc = CNNS[name](quick)
    # Random convs shrink the signal layer by layer (MobileNetV2's output falls to 1e-27, where
    # any converter agrees): the BatchNorms' statistics are set to the example's own (one
    # training-mode pass), so each layer's output is of order 1.
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.momentum = 1.0
    with torch.no_grad():
        model.train()(*args)
    return Built(name, model.eval(), args, desc)


RTOL = 1e-4  # of |eager| and of max(1, max |eager|): bench/hf_models.py's tolerance


def _msc(model, args) -> bytes:
    import codegen.tflite
    import msc

    return codegen.tflite.to_bytes(msc.from_torch(model, args))


def _litert_torch(model, args) -> bytes:
    import tempfile

    import litert_torch

    edge = litert_torch.convert(model, args)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.tflite"
        edge.export(str(path))
        return path.read_bytes()


def _ops(data: bytes) -> Counter[str]:
    """Operators of every subgraph of a .tflite file, by name."""
    from msc.frontend.tflite.reader import read_model

    m = read_model(data)
    try:
        return Counter(op.op for sg in m.subgraphs for op in sg.operators)
    finally:
        m.close()


def _run_litert(data: bytes, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """The file's outputs for ``arrays``: through its signature (args_<k> -> output_<k>,
    litert-torch's names) when it has one, else by input and output order."""
    import re

    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=data)
    sigs = it.get_signature_list()
    numbered = lambda names: all(re.fullmatch(r"(args|output)_\d+", n) for n in names)  # noqa: E731
    if sigs and all(numbered(s["inputs"]) and numbered(s["outputs"]) for s in sigs.values()):
        key = next(iter(sigs))
        ins = sorted(sigs[key]["inputs"], key=lambda s: int(s.rsplit("_", 1)[-1]))
        outs = sorted(sigs[key]["outputs"], key=lambda s: int(s.rsplit("_", 1)[-1]))
        got = it.get_signature_runner(key)(**dict(zip(ins, arrays)))
        return [np.asarray(got[o]) for o in outs]
    it.allocate_tensors()
    for d, a in zip(it.get_input_details(), arrays):
        it.set_tensor(d["index"], np.ascontiguousarray(a, dtype=d["dtype"]))
    it.invoke()
    return [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]


def _compare(got: list[np.ndarray], want: list[np.ndarray]) -> tuple[str, float | None]:
    """("ok" or how the outputs differ, the largest |a - b| over the outputs compared)."""
    if len(got) != len(want):
        return f"{len(got)} outputs for eager's {len(want)}", None
    worst, verdict = 0.0, "ok"
    for k, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        if g.shape != w.shape:
            return f"output {k}: shape {list(g.shape)} for eager's {list(w.shape)}", None
        err = np.abs(g.astype(np.float64) - w.astype(np.float64))
        worst = max(worst, float(err.max(initial=0)))
        bound = RTOL * max(1.0, float(np.abs(w).max(initial=0))) + RTOL * np.abs(w)
        if verdict == "ok" and not np.all(err <= bound):
            verdict = f"output {k} differs"
    return verdict, worst


def run_one(name: str, converter: str, quick: bool) -> dict[str, Any]:
    """One model through one converter: the file's counts, the time, LiteRT against eager."""
    import warnings

    import torch
    from models import leaves

    warnings.simplefilter("ignore")
    built = _build(name, quick)
    args = built.args
    with torch.no_grad():
        want = [t.detach().numpy() for t in leaves(built.model(*args))]
    convert = _msc if converter == "msc" else _litert_torch
    res: dict[str, Any] = {"model": built.description + (" (--quick: smaller)" if quick else "")}
    res["eager_max_abs"] = max(float(np.abs(w).max(initial=0)) for w in want)
    t = time.perf_counter()
    try:
        data = convert(built.model, args)
    except Exception as e:  # noqa: BLE001 - recorded as this model's result
        res["converts"] = f"{type(e).__name__}: {str(e)[:300]}"
        return res
    res["convert_s"] = round(time.perf_counter() - t, 2)
    res["converts"] = "ok"
    res["bytes"] = len(data)
    ops = _ops(data)
    res["ops"] = sum(ops.values())
    res["transposes"] = ops.get("TRANSPOSE", 0)
    res["op_counts"] = dict(ops.most_common())
    try:
        got = _run_litert(data, [a.numpy() for a in args])
        res["litert"], res["max_abs_diff"] = _compare(got, want)
    except Exception as e:  # noqa: BLE001
        res["litert"] = f"{type(e).__name__}: {str(e)[:300]}"
    return res


def _child(name: str, converter: str, quick: bool, python: str, timeout: float) -> dict:
    """``run_one`` in a fresh ``python`` process (its JSON on the last line of stdout)."""
    cmd = [python, str(Path(__file__).resolve()), "--worker", name, converter]
    cmd += ["--quick"] if quick else []
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=HERE.parent)
    except subprocess.TimeoutExpired:
        return {"converts": f"timed out after {timeout:.0f} s"}
    lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
    if p.returncode or not lines:
        tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
        return {"converts": f"worker exited with code {p.returncode}: {tail[:300]}"}
    return json.loads(lines[-1])


def _litert_torch_available(python: str) -> str:
    """ "ok", or why litert-torch does not import in ``python``."""
    code = "import litert_torch, torch; print(litert_torch.__version__, torch.__version__)"
    p = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=300)
    if p.returncode:
        lines = p.stderr.strip().splitlines() or ["no output"]
        return f"litert-torch does not import in {python}: {lines[-1][:200]}"
    return "ok " + p.stdout.strip().splitlines()[-1]


def _fmt(r: dict[str, Any] | None) -> list[str]:
    if r is None:
        return ["-"] * 6
    if r.get("converts") != "ok":
        why = " / ".join(x.strip(" -") for x in str(r.get("converts", "-")).splitlines())
        return [why.replace("|", "\\|")[:200]] + ["-"] * 5
    diff = r.get("max_abs_diff")
    agree = " / ".join(str(r.get("litert", "-")).splitlines()).replace("|", "\\|")[:200]
    if diff is not None:
        agree += f" ({diff:.2g} of {r['eager_max_abs']:.2g})"
    return [
        "ok",
        f"{r['convert_s']:.1f}",
        str(r["ops"]),
        str(r["transposes"]),
        agree,
        f"{r['bytes'] / 1e6:.1f}",
    ]


def markdown(results: dict[str, dict[str, Any]], meta: dict[str, Any]) -> str:
    head = ["converts", "convert s", "ops", "TRANSPOSE", "LiteRT vs eager", "MB"]
    lines = [
        "# PyTorch -> TFLite: msc and litert-torch",
        "",
        f"Generated by `python bench/torch_tflite.py{' --quick' if meta['quick'] else ''} "
        "--markdown docs/torch_tflite.md`: bench/models.py's models and three more CNNs "
        "(MobileNetV2, ConvNeXt-T, EfficientNet-B0; random weights from transformers "
        "configs"
        + (", the small sizes of `--quick`" if meta["quick"] else "")
        + "), each converted from the eager module by msc (`msc.from_torch` + "
        "`codegen.tflite.to_bytes`) and by litert-torch (`litert_torch.convert`), and the "
        "file run by LiteRT's interpreter (ai-edge-litert) on the example inputs against eager "
        "PyTorch: ok when every output is within 1e-4 x max(1, max |eager|) + 1e-4 x |eager|, "
        "with the largest |difference| of the largest |eager| value (random weights leave "
        "some models' outputs tiny: there the agreement says little). ops and TRANSPOSE "
        "count the operators in the file (every subgraph); convert s is the time from the "
        "eager module to the file's bytes, torch.export included, on a machine shared with "
        "other work (2 cores).",
        "",
        f"litert-torch: {meta['litert_torch']}.",
        "",
        "| model | converter | " + " | ".join(head) + " |",
        "|---|---|" + "---|" * len(head),
    ]
    for name, per in results.items():
        for conv in CONVERTERS:
            lines.append(f"| {name} | {conv} | " + " | ".join(_fmt(per.get(conv))) + " |")
    lines += [
        "",
        "Where the operator counts differ (msc's count minus litert-torch's, by operator; "
        "both fold BatchNorm into CONV_2D and fuse ReLU / ReLU6 into it, msc with "
        "codegen.tflite.optimize):",
        "",
    ]
    for name, per in results.items():
        a, b = ((per.get(c) or {}).get("op_counts") for c in CONVERTERS)
        if a and b:
            delta = {k: a.get(k, 0) - b.get(k, 0) for k in {*a, *b}}
            moved = sorted((k for k in delta if delta[k]), key=lambda k: (-abs(delta[k]), k))
            diff = ", ".join(f"{k} {delta[k]:+d}" for k in moved[:10]) or "none"
            lines.append(f"- {name}: {sum(a.values()) - sum(b.values()):+d} ({diff})")
    lines += ["", "Operators by model (msc / litert-torch), most frequent first:", ""]
    for name, per in results.items():
        for conv in CONVERTERS:
            ops = (per.get(conv) or {}).get("op_counts")
            if ops:
                top = ", ".join(f"{k} {v}" for k, v in list(ops.items())[:12])
                lines.append(f"- {name}, {conv}: {top}")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="bench/models.py's small configs")
    ap.add_argument("--only", nargs="*", default=[], help="models whose name contains these")
    ap.add_argument("--litert-python", default=sys.executable, help="a python with litert-torch")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--markdown", type=Path)
    ap.add_argument("--json", type=Path, default=HERE / "results" / "torch_tflite.json")
    ap.add_argument(
        "--litert-from",
        type=Path,
        help="where litert-torch does not import: its rows from this earlier run's JSON "
        "(said so on the page)",
    )
    ap.add_argument("--worker", nargs=2, metavar=("MODEL", "CONVERTER"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        try:
            out = run_one(*a.worker, a.quick)
        except BaseException as e:  # noqa: BLE001 - the parent records it
            out = {"converts": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-1500:]}
        print(json.dumps(out), flush=True)
        return

    lt = _litert_torch_available(a.litert_python)
    meta = {"quick": a.quick, "litert_torch": lt if lt.startswith("ok") else lt}
    if lt.startswith("ok"):
        meta["litert_torch"] = f"litert-torch {lt.split()[1]} beside torch {lt.split()[2]}"
    carried: dict[str, Any] = {}
    if not lt.startswith("ok") and a.litert_from:
        before = json.loads(a.litert_from.read_text())
        if before["meta"]["quick"] == a.quick:
            carried = {k: v.get("litert-torch") for k, v in before["models"].items()}
            meta["litert_torch"] = (
                f"not installed here ({lt}); its rows are those of an earlier run "
                f"({before['meta']['litert_torch']}), its time measured then"
            )
    results: dict[str, dict[str, Any]] = {}
    models = _models()
    for name in [n for n in models if not a.only or any(w in n for w in a.only)]:
        results[name] = {}
        for conv in CONVERTERS:
            if conv == "litert-torch" and not lt.startswith("ok"):
                results[name][conv] = carried.get(name) or {"converts": "not installed (see above)"}
                continue
            python = sys.executable if conv == "msc" else a.litert_python
            r = _child(name, conv, a.quick, python, a.timeout)
            results[name][conv] = r
            print(f"{name:12s} {conv:13s} " + "  ".join(_fmt(r)), flush=True)
    if a.only and a.json.exists():  # a partial run updates its rows of the last full one
        before = json.loads(a.json.read_text())
        if before["meta"]["quick"] == a.quick:
            results = {k: results.get(k, before["models"].get(k)) for k in models}
            results = {k: v for k, v in results.items() if v is not None}
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps({"meta": meta, "models": results}, indent=1) + "\n")
    if a.markdown:
        a.markdown.write_text(markdown(results, meta))


if __name__ == "__main__":
    main()
