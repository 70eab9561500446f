"""Every transformers causal-LM architecture, from a tiny random config, through msc.

    python bench/hf_causal_lm.py                     # all architectures (~30 min, 2 cores)
    python bench/hf_causal_lm.py --models llama gpt2 deepseek_v2
    python bench/hf_causal_lm.py --jobs 2 --timeout 300

For each model type in transformers' causal-LM mapping: its config with small sizes (the
attributes below, where the config has them), random weights, eval mode, input ids [1, 8].
torch.export (non-strict) must capture it; then msc.from_exported_program, generated PyTorch
(codegen.torch.to_module) and ONNX in onnxruntime (codegen.onnx.to_model) are compared with
eager logits (|a - b| <= 1e-4 + 1e-4 |b|). Each model runs in its own process with a time
limit. Writes bench/results/hf_causal_lm.json and prints the counts; no hub downloads.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
import traceback
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
}
SEQ = 8
TOL = 1e-4


def tiny_config(model_type: str) -> Any:
    from transformers import AutoConfig

    cfg = AutoConfig.for_model(model_type)
    targets = [cfg] + [getattr(cfg, k) for k in ("text_config",) if hasattr(cfg, k)]
    for c in targets:
        for k, v in TINY.items():
            if hasattr(c, k) and getattr(c, k) is not None:
                try:
                    setattr(c, k, v)
                except Exception:  # noqa: BLE001 - read-only properties stay as they are
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
    bad = np.abs(a - b) > TOL + TOL * np.abs(b)
    return f"max diff {np.abs(a - b).max():.3g}" if bad.any() else ""


def run_one(model_type: str) -> dict[str, Any]:
    """Export, convert and compare one architecture (in a worker process)."""
    import warnings

    warnings.filterwarnings("ignore")
    import logging

    logging.disable(logging.WARNING)
    import torch
    from transformers import AutoModelForCausalLM

    import codegen.onnx
    import codegen.torch
    import msc

    rec: dict[str, Any] = {}
    t0 = time.time()
    try:
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(tiny_config(model_type)).eval()
        # Random weights everywhere: configs that zero-initialize a router give every expert
        # the same score, and top-k among ties is not specified (onnxruntime and torch differ).
        g = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for p in model.parameters():
                if p.is_floating_point():
                    p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.2)
        ids = torch.randint(0, 128, (1, SEQ))
        with torch.no_grad():
            want = model(input_ids=ids).logits
    except Exception as e:  # noqa: BLE001
        return {"status": "no model", "why": f"{type(e).__name__}: {str(e)[:200]}"}
    try:
        with torch.no_grad():
            ep = torch.export.export(model, (), {"input_ids": ids}, strict=False)
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

    def logits(out: Any) -> Any:
        if isinstance(out, dict):
            return out["logits"]
        return out[0] if isinstance(out, tuple | list) else out

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
    rec["status"] = "ok" if rec["torch"] == rec["onnx"] == "ok" else "wrong"
    rec["seconds"] = round(time.time() - t0, 1)
    return rec


def _worker(model_type: str, q: Any) -> None:
    try:
        q.put(run_one(model_type))
    except BaseException as e:  # noqa: BLE001
        q.put({"status": "error", "why": "".join(traceback.format_exception_only(e))[:300]})


def run_isolated(model_type: str, timeout: float) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_worker, args=(model_type, q))
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


def all_model_types() -> list[str]:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def markdown(results: dict[str, Any], summary: dict[str, Any]) -> str:
    """docs/hf_causal_lm.md: the counts and every architecture that does not convert, why."""
    lines = [
        "# transformers causal-LM architectures",
        "",
        "Generated by `python bench/hf_causal_lm.py --markdown docs/hf_causal_lm.md`: every model",
        "type in transformers' causal-LM mapping, from a tiny random config, exported with",
        "torch.export and compared with eager logits through generated PyTorch and ONNX",
        "(onnxruntime).",
        "",
        f"- architectures: {summary['architectures']}",
        f"- captured by torch.export: {summary['captured_by_torch_export']}",
        f"- converted to PyTorch with equal logits: {summary['to_pytorch']}",
        f"- converted to ONNX with equal logits: {summary['to_onnx']}",
        "",
        "| architecture | status | PyTorch | ONNX | why |",
        "| --- | --- | --- | --- | --- |",
    ]
    for k, r in sorted(results.items()):
        if r["status"] == "ok":
            continue
        why = (r.get("why") or "").replace("|", "\\|").replace("\n", " ")[:220]
        t, o = r.get("torch", "-"), r.get("onnx", "-")
        t = "yes" if t == "ok" else ("-" if t == "-" else "no")
        o = "yes" if o == "ok" else ("-" if o == "-" else "no")
        if not why:
            bad = [n for n in ("torch", "onnx") if r.get(n) not in (None, "ok")]
            why = "; ".join(f"{n}: {r[n]}" for n in bad)
        lines.append(f"| {k} | {r['status']} | {t} | {o} | {why[:220]} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", default=str(HERE / "results" / "hf_causal_lm.json"))
    ap.add_argument("--markdown", help="also write the table of misses here (docs/...)")
    ap.add_argument("--from-json", help="only write --markdown from a saved run")
    args = ap.parse_args(argv)
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        Path(args.markdown).write_text(markdown(saved["results"], saved["summary"]))
        return 0
    types = args.models or all_model_types()
    results: dict[str, Any] = {}
    t0 = time.time()
    from concurrent.futures import ThreadPoolExecutor

    def one(mt: str) -> None:
        r = run_isolated(mt, args.timeout)
        results[mt] = r
        why = r.get("why") or f"torch {r.get('torch')}; onnx {r.get('onnx')}"
        print(f"{mt}: {r['status']}" + ("" if r["status"] == "ok" else f": {why[:200]}"),
              flush=True)  # fmt: skip

    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(one, types))
    captured = [k for k, r in results.items() if r["status"] not in ("no model", "not exportable")]
    torch_ok = [k for k in captured if results[k].get("torch") == "ok"]
    onnx_ok = [k for k in captured if results[k].get("onnx") == "ok"]
    summary = {
        "architectures": len(results),
        "captured_by_torch_export": len(captured),
        "to_pytorch": len(torch_ok),
        "to_onnx": len(onnx_ok),
        "seconds": round(time.time() - t0),
    }
    print(
        f"{len(results)} causal-LM architectures; torch.export captures {len(captured)}; msc "
        f"converts {len(torch_ok)} to PyTorch and {len(onnx_ok)} to ONNX with logits equal "
        "to eager"
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"summary": summary, "results": results}, indent=1))
    if args.markdown:
        Path(args.markdown).write_text(markdown(results, summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
