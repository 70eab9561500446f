"""Every transformers architecture of a task, from a tiny random config, through msc.

    python bench/hf_models.py                                # causal LMs (~40 min, 2 cores)
    python bench/hf_models.py --task image-classification    # also masked-lm, audio-...
    python bench/hf_models.py --models llama gpt2 deepseek_v2
    python bench/hf_models.py --jobs 2 --timeout 300

For each model type in transformers' mapping for the task (``TASKS``): its config with small
sizes (the attributes below, where the config has them), random weights, eval mode, one input
of the kind the model reads (``main_input_name``: token ids [1, 8], pixels, audio samples).
torch.export (non-strict) must capture it; then msc.from_exported_program, generated PyTorch
(codegen.torch.to_module) and ONNX in onnxruntime (codegen.onnx) are compared with eager
logits (|a - b| <= 1e-4 max(1, max |b|) + 1e-4 |b|: random weights blow a deep conv stack's
outputs up to 1e12, where float32 rounding alone exceeds a fixed atol next to small values).
The other direction too: torch.onnx.export (dynamo) writes the same ExportedProgram as ONNX,
and msc.from_onnx + generated PyTorch must give the same logits (an export torch.onnx itself
cannot write is counted apart, not as a miss). Each model runs in its own process with a time
limit. Writes bench/results/hf_<task>.json and
prints the counts; no hub downloads.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

# Small sizes, applied to every config attribute of these names it has (and its text_config).
TINY: dict[str, Any] = {
    "vocab_size": 128,
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_hidden_layers": 2,
    "num_layers": 2,
    "n_layer": 2,
    "num_attention_heads": 4,
    "n_head": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "n_embd": 32,
    "d_model": 32,
    "n_positions": 64,
    "max_position_embeddings": 64,
    "ffn_dim": 48,
    "moe_intermediate_size": 16,
    "shared_expert_intermediate_size": 16,
    "num_experts": 4,
    "n_routed_experts": 4,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
    "first_k_dense_replace": 1,
    "kv_lora_rank": 16,
    "q_lora_rank": 16,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8,
    "v_head_dim": 8,
    "sliding_window": 16,
    "attention_chunk_size": 16,
    "n_group": 1,
    "rotary_dim": 8,
    "topk_group": 1,
    # vision and audio
    "image_size": 64,
    "patch_size": 8,
    "num_channels": 3,
    "num_mel_bins": 16,
    "max_length": 64,
    "max_source_positions": 32,
}
# Per-stage lists: as many stages, one block each.
ONES = ("depths", "num_blocks", "block_repeats")
SEQ = 8
TOL = 1e-4


# task -> (transformers' mapping of model types, the Auto class that builds the model)
TASKS = {
    "causal-lm": ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "AutoModelForCausalLM"),
    "masked-lm": ("MODEL_FOR_MASKED_LM_MAPPING_NAMES", "AutoModelForMaskedLM"),
    "image-classification": (
        "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
        "AutoModelForImageClassification",
    ),
    "audio-classification": (
        "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES",
        "AutoModelForAudioClassification",
    ),
    "semantic-segmentation": (
        "MODEL_FOR_SEMANTIC_SEGMENTATION_MAPPING_NAMES",
        "AutoModelForSemanticSegmentation",
    ),
    "sequence-classification": (
        "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
        "AutoModelForSequenceClassification",
    ),
    "question-answering": (
        "MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES",
        "AutoModelForQuestionAnswering",
    ),
    "depth-estimation": ("MODEL_FOR_DEPTH_ESTIMATION_MAPPING_NAMES", "AutoModelForDepthEstimation"),
    "video-classification": (
        "MODEL_FOR_VIDEO_CLASSIFICATION_MAPPING_NAMES",
        "AutoModelForVideoClassification",
    ),
}


def primary(out: Any) -> Any:
    """The output compared: ``logits`` where the model gives them, else its first tensor
    (question answering's start logits, depth estimation's predicted depth)."""
    if isinstance(out, dict):
        return out["logits"] if "logits" in out else next(iter(out.values()))
    if hasattr(out, "logits") and out.logits is not None:
        return out.logits
    return out[0] if isinstance(out, tuple | list) else out


# The keys a config whose other sizes depend on each other (per-stage widths and heads of a
# vision model) is still built with, when the whole of TINY makes a model that cannot run.
LAYERS_ONLY = ("num_hidden_layers", "num_layers", "image_size", "max_length", "num_mel_bins")


def tiny_config(model_type: str, only: tuple[str, ...] | None = None) -> Any:
    """The model type's default config with TINY's sizes (only the keys ``only`` when given)."""
    from transformers import AutoConfig

    cfg = AutoConfig.for_model(model_type)
    nested = ("text_config", "vision_config")
    targets = [cfg] + [getattr(cfg, k) for k in nested if getattr(cfg, k, None) is not None]
    for c in targets:
        for k, v in TINY.items():
            if only is not None and k not in only:
                continue
            if hasattr(c, k) and getattr(c, k) is not None:
                try:
                    setattr(c, k, v)
                except Exception:  # noqa: BLE001 - read-only properties stay as they are
                    pass
        for k in ONES:
            v = getattr(c, k, None)
            if isinstance(v, list | tuple) and all(isinstance(x, int) for x in v):
                try:
                    setattr(c, k, [1] * len(v))
                except Exception:  # noqa: BLE001
                    pass
        if getattr(c, "kv_lora_rank", None):  # multi-head latent attention: no kv grouping
            c.num_key_value_heads = c.num_attention_heads
        for k in ("layer_types",):  # per-layer lists sized to the layer count
            lt = getattr(c, k, None)
            if isinstance(lt, list) and lt:
                try:
                    setattr(c, k, (lt * 2)[:2])
                except Exception:  # noqa: BLE001 - a derived property: left as it is
                    pass
        vocab = getattr(c, "vocab_size", None)
        for k in ("pad_token_id", "bos_token_id", "eos_token_id"):  # ids inside the small vocab
            v = getattr(c, k, None)
            if isinstance(vocab, int) and isinstance(v, int) and v >= vocab:
                try:
                    setattr(c, k, vocab - 1)
                except Exception:  # noqa: BLE001
                    pass
        c.use_cache = False  # the text config of a multimodal model too: no cache in the output
    cfg.use_cache = False
    return cfg


def _close(a: Any, b: Any) -> str:
    import numpy as np

    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return f"shape {a.shape} != {b.shape}"
    scale = max(1.0, float(np.abs(b).max(initial=0.0)))
    bad = np.abs(a - b) > TOL * scale + TOL * np.abs(b)
    return f"max diff {np.abs(a - b).max():.3g} (max |b| {scale:.3g})" if bad.any() else ""


def example_input(model: Any, cfg: Any) -> tuple[str, Any]:
    """(argument name, tensor) of the one input ``model`` reads, sized from its config."""
    import torch

    name = getattr(model, "main_input_name", "input_ids")
    if name == "input_ids":
        return name, torch.randint(0, 128, (1, SEQ))
    video = name == "pixel_values_videos"
    if name == "pixel_values" or video or (name == "inputs" and hasattr(cfg, "image_size")):
        vc = getattr(cfg, "vision_config", None) or cfg  # a multimodal model's image tower
        size = getattr(vc, "image_size", 64)
        h, w = (size, size) if isinstance(size, int) else tuple(size)[:2]
        frames = getattr(vc, "num_frames", None) or getattr(vc, "frames_per_clip", None)
        if frames or video:  # a video: [1, frames, channels, h, w]
            return name, torch.randn(1, frames or 8, getattr(vc, "num_channels", 3), h, w)
        return name, torch.randn(1, getattr(vc, "num_channels", 3), h, w)
    if name == "input_values" and hasattr(cfg, "num_mel_bins"):  # a spectrogram
        return name, torch.randn(1, getattr(cfg, "max_length", 64), cfg.num_mel_bins)
    if name == "input_values":  # raw audio samples
        return name, torch.randn(1, 1600)
    if name == "input_features" and hasattr(cfg, "feature_projection_input_dim"):  # frames
        return name, torch.randn(1, 50, cfg.feature_projection_input_dim)
    if name == "input_features" and hasattr(cfg, "max_source_positions"):  # Whisper's mels
        return name, torch.randn(1, cfg.num_mel_bins, 2 * cfg.max_source_positions)
    raise ValueError(f"no example for a model reading {name!r}")


def run_one(model_type: str, task: str = "causal-lm") -> dict[str, Any]:
    """Export, convert and compare one architecture (in a worker process)."""
    import warnings

    warnings.filterwarnings("ignore")
    import logging

    logging.disable(logging.WARNING)
    import torch
    import transformers

    import codegen.onnx
    import codegen.torch
    import msc

    rec: dict[str, Any] = {}
    t0 = time.time()
    from transformers.models.auto import modeling_auto

    names = getattr(modeling_auto, TASKS[task][0])[model_type]
    # The mapping's (first) class itself: a config names no architecture to pick among several
    cls = getattr(transformers, names if isinstance(names, str) else names[0])
    for only in (None, LAYERS_ONLY, ()):  # all of TINY, the layer counts and input sizes, none
        try:
            torch.manual_seed(0)
            cfg = tiny_config(model_type, only)
            model = cls(cfg).eval()
            # Random weights everywhere: configs that zero-initialize a router give every
            # expert the same score, and top-k among ties is not specified (onnxruntime and
            # torch differ).
            g = torch.Generator().manual_seed(0)
            with torch.no_grad():
                for p in model.parameters():
                    if p.is_floating_point():
                        p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.2)
            arg, ids = example_input(model, cfg)
            with torch.no_grad():
                want = primary(model(**{arg: ids}))
            break
        except Exception as e:  # noqa: BLE001
            why = f"{type(e).__name__}: {str(e)[:200]}"
    else:
        return {"status": "no model", "why": why}
    try:
        with torch.no_grad():
            ep = torch.export.export(model, (), {arg: ids}, strict=False)
    except Exception as e:  # noqa: BLE001
        return {"status": "not exportable", "why": f"{type(e).__name__}: {str(e)[:200]}"}
    rec["export_s"] = round(time.time() - t0, 1)
    try:
        g = msc.from_exported_program(ep)
    except msc.errors.UnsupportedOpsError as e:
        rec.update(status="unsupported", why=str(e)[:600])
        return rec
    except Exception as e:  # noqa: BLE001
        rec.update(status="error", why=f"{type(e).__name__}: {str(e)[:300]}")
        return rec

    logits = primary

    try:
        with torch.no_grad():
            got = codegen.torch.to_module(g)(ids)
        rec["torch"] = _close(logits(got).numpy(), want.numpy()) or "ok"
    except Exception as e:  # noqa: BLE001
        rec["torch"] = f"{type(e).__name__}: {str(e)[:300]}"
    try:
        import tempfile

        import onnxruntime as ort

        with tempfile.TemporaryDirectory() as tmp:  # a file: weights over 2 GB go external
            path = Path(tmp) / "model.onnx"
            codegen.onnx.save(g, path)
            sess = ort.InferenceSession(str(path))
        outs = sess.run(None, {sess.get_inputs()[0].name: ids.numpy()})
        names = [o.name for o in sess.get_outputs()]
        i = names.index("logits") if "logits" in names else 0
        rec["onnx"] = _close(outs[i], want.numpy()) or "ok"
    except Exception as e:  # noqa: BLE001
        rec["onnx"] = f"{type(e).__name__}: {str(e)[:300]}"
    rec["from_onnx"] = _from_onnx(ep, arg, ids, want, logits)
    ok = rec["torch"] == rec["onnx"] == "ok" and rec["from_onnx"] in ("ok", NO_ONNX)
    rec["status"] = "ok" if ok else "wrong"
    rec["seconds"] = round(time.time() - t0, 1)
    return rec


NO_ONNX = "torch.onnx cannot export it"


def _from_onnx(ep: Any, arg: str, ids: Any, want: Any, logits: Callable[[Any], Any]) -> str:
    """ONNX -> msc -> PyTorch: torch.onnx's file of ``ep``, read by msc.from_onnx, generated
    as PyTorch; "ok", ``NO_ONNX`` (torch.onnx fails: not msc's miss), or what went wrong."""
    import contextlib
    import io
    import tempfile

    import torch

    import codegen.torch
    import msc

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                torch.onnx.export(ep, (), str(path), kwargs={arg: ids}, dynamo=True)
        except Exception:  # noqa: BLE001 - the exporter's own failure
            return NO_ONNX
        try:
            g = msc.from_onnx(str(path))
            with torch.no_grad():
                got = codegen.torch.to_module(g)(ids)
        except Exception as e:  # noqa: BLE001
            return f"{type(e).__name__}: {str(e)[:300]}"
    return _close(logits(got).numpy(), want.numpy()) or "ok"


def _worker(model_type: str, task: str, q: Any) -> None:
    try:
        q.put(run_one(model_type, task))
    except BaseException as e:  # noqa: BLE001
        q.put({"status": "error", "why": "".join(traceback.format_exception_only(e))[:300]})


def run_isolated(model_type: str, task: str, timeout: float) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_worker, args=(model_type, task, q))
    p.start()
    p.join(timeout)
    if p.is_alive():
        p.kill()
        p.join()
        return {"status": "timeout", "why": f"over {timeout:.0f} s"}
    try:
        return q.get(timeout=5)
    except Exception:  # noqa: BLE001
        return {"status": "crash", "why": f"worker exit code {p.exitcode}"}


def all_model_types(task: str) -> list[str]:
    from transformers.models.auto import modeling_auto

    return sorted(getattr(modeling_auto, TASKS[task][0]))


def markdown(results: dict[str, Any], summary: dict[str, Any], task: str) -> str:
    """docs/hf_<task>.md: the counts and every architecture that does not convert, why."""
    doc = f"docs/hf_{task.replace('-', '_')}.md"
    lines = [
        f"# transformers {task} architectures",
        "",
        f"Generated by `python bench/hf_models.py --task {task} --markdown {doc}`: every",
        f"model type in transformers' {task} mapping, from a tiny random config, exported with",
        "torch.export and compared with eager logits through generated PyTorch and ONNX",
        "(onnxruntime), and torch.onnx's ONNX file of it read back by msc.from_onnx.",
        "",
        f"- architectures: {summary['architectures']}",
        f"- captured by torch.export: {summary['captured_by_torch_export']}",
        f"- converted to PyTorch with equal logits: {summary['to_pytorch']}",
        f"- converted to ONNX with equal logits: {summary['to_onnx']}",
        f"- written by torch.onnx: {summary.get('torch_onnx_exports', '-')}; of these, read by "
        f"msc.from_onnx and generated as PyTorch with equal logits: "
        f"{summary.get('from_onnx', '-')}",
        "",
        "| architecture | status | PyTorch | ONNX | ONNX -> PyTorch | why |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for k, r in sorted(results.items()):
        if r["status"] == "ok":
            continue
        why = (r.get("why") or "").replace("|", "\\|").replace("\n", " ")[:220]
        cells = []
        for n in ("torch", "onnx", "from_onnx"):
            v = r.get(n, "-")
            cells.append("yes" if v == "ok" else "-" if v in ("-", NO_ONNX) else "no")
        if not why:
            bad = [
                n for n in ("torch", "onnx", "from_onnx") if r.get(n) not in (None, "ok", NO_ONNX)
            ]
            why = "; ".join(f"{n}: {r[n]}" for n in bad)
        lines.append(f"| {k} | {r['status']} | {' | '.join(cells)} | {why[:220]} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", choices=sorted(TASKS), default="causal-lm")
    ap.add_argument("--models", nargs="*")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", help="default bench/results/hf_<task>.json")
    ap.add_argument("--markdown", help="also write the table of misses here (docs/...)")
    ap.add_argument("--from-json", help="only write --markdown from a saved run")
    args = ap.parse_args(argv)
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        Path(args.markdown).write_text(markdown(saved["results"], saved["summary"], args.task))
        return 0
    out = Path(args.out or HERE / "results" / f"hf_{args.task.replace('-', '_')}.json")
    types = args.models or all_model_types(args.task)
    results: dict[str, Any] = {}
    t0 = time.time()
    from concurrent.futures import ThreadPoolExecutor

    def one(mt: str) -> None:
        r = run_isolated(mt, args.task, args.timeout)
        results[mt] = r
        why = r.get("why") or "; ".join(f"{n} {r.get(n)}" for n in ("torch", "onnx", "from_onnx"))
        print(f"{mt}: {r['status']}" + ("" if r["status"] == "ok" else f": {why[:200]}"),
              flush=True)  # fmt: skip

    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(one, types))
    captured = [k for k, r in results.items() if r["status"] not in ("no model", "not exportable")]
    torch_ok = [k for k in captured if results[k].get("torch") == "ok"]
    onnx_ok = [k for k in captured if results[k].get("onnx") == "ok"]
    written = [k for k in captured if results[k].get("from_onnx", NO_ONNX) != NO_ONNX]
    from_onnx_ok = [k for k in written if results[k]["from_onnx"] == "ok"]
    summary = {
        "architectures": len(results),
        "captured_by_torch_export": len(captured),
        "to_pytorch": len(torch_ok),
        "to_onnx": len(onnx_ok),
        "torch_onnx_exports": len(written),
        "from_onnx": len(from_onnx_ok),
        "seconds": round(time.time() - t0),
    }
    print(
        f"{len(results)} {args.task} architectures; torch.export captures {len(captured)}; msc "
        f"converts {len(torch_ok)} to PyTorch and {len(onnx_ok)} to ONNX with logits equal "
        f"to eager; torch.onnx writes {len(written)}, and msc reads {len(from_onnx_ok)} of them "
        "back to PyTorch with equal logits"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"summary": summary, "results": results}, indent=1))
    if args.markdown:
        Path(args.markdown).write_text(markdown(results, summary, args.task))
    return 0


if __name__ == "__main__":
    sys.exit(main())
