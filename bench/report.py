"""docs/performance.md from the bench's saved results: the targets, the tables, the Relax timings.

    python bench/report.py                # rewrite docs/performance.md from bench/results/
    python bench/report.py --stdout       # print it instead
    python bench/run.py --million --check --docs   # a new run, then the page from it

The page is only ever generated: tests/docs/test_generated.py fails when the committed page
differs from what this script makes of the committed JSON, so the figures cannot drift from
the run they came from.

# NOTE: reads JSON only (bench/results/bench.json, llama13b.json, relax.json,
# onnx_deploy.json); imports neither torch nor msc, so the page can be checked anywhere.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
PAGE = ROOT / "docs" / "performance.md"
MB = 1 << 20


def first_ok(r: dict) -> dict[str, tuple[str, dict]]:
    """Per ONNX -> PyTorch tool: (mark, result) on the first source it converted."""
    out: dict[str, tuple[str, dict]] = {}
    for tool in ("msc", "onnx2torch"):
        tried = [(src, tools[tool]) for src, tools in r["import"].items()]
        good = [(src, x) for src, x in tried if "median" in x]
        src, x = (good or tried or [("", {})])[0]
        out[tool] = (" (m)" if src.startswith("msc") and x else "", x)
    return out


def targets(results: dict) -> list[tuple[str, str, bool]]:
    """Issue 16's targets with the measured figures: (target, figure, met). Graph machinery
    is judged on process CPU µs per node (wall time on a shared machine measures the other
    processes too); both are in the JSON."""
    out: list[tuple[str, str, bool]] = []
    for m, r in results.get("models", {}).items():
        e = r.get("export", {})
        msc_r, peer = e.get("msc", {}), e.get("torch.onnx", {})
        cap, ph = msc_r.get("capture_s"), msc_r.get("phases")
        if cap and ph:
            own = max(0.0, ph["from_torch"] + ph["save"] - cap)
            out.append(
                (
                    f"{m}: msc's own part of torch -> ONNX <= 0.5x torch.export",
                    f"{own:.2f} s = {own / cap:.2f}x of {cap:.2f} s",
                    own <= 0.5 * cap,
                )
            )
        if "median" in msc_r and "median" in peer:
            speed = peer["median"] / msc_r["median"]
            out.append((f"{m}: torch -> ONNX >= 5x torch.onnx.export", f"{speed:.2f}x", speed >= 5))
        # issue 14: code generated from torch.onnx's ONNX file no slower than the eager model
        if r.get("import"):
            rt = first_ok(r)["msc"][1].get("runtime", {})
            if "ratio" in rt:
                out.append(
                    (
                        f"{m}: ONNX -> msc -> PyTorch code runs <= 1.0x eager",
                        f"{rt['ratio']:.2f}x" + ("" if rt.get("check", {}).get("ok") else " WRONG"),
                        rt["ratio"] <= 1.0 and bool(rt.get("check", {}).get("ok")),
                    )
                )
    gs = results.get("graph_scale") or {}
    scale = gs.get("scale") or []
    for row in scale:
        n = row["nodes"]
        for step, r in row["steps"].items():
            if "cpu_us_per_node" in r:
                us = r["cpu_us_per_node"]
                out.append(
                    (
                        f"graph {n} nodes: {step} <= {r['target_us']:g} us/node",
                        f"{us:.2f} us (wall {r['us_per_node']:.2f}"
                        + (
                            f", kernel {r['sys_us_per_node']:.2f})"
                            if "sys_us_per_node" in r
                            else ")"
                        ),
                        us <= r["target_us"],
                    )
                )
    if len(scale) > 1:
        lo, hi = scale[0], scale[-1]
        for step, r in hi["steps"].items():
            for key, what in (("cpu_us_per_node", "time"), ("mb_per_1k", "memory")):
                if key in r and lo["steps"][step].get(key):
                    grow = r[key] / lo["steps"][step][key]
                    out.append(
                        (
                            f"graph {step}: {what} per node grows at most 1.5x "
                            f"from {lo['nodes']} to {hi['nodes']} nodes",
                            f"{grow:.2f}x",
                            grow <= 1.5,
                        )
                    )
    elif gs and "error" in gs:
        out.append(("graph machinery ran", gs["error"]["summary"], False))
    # The 13B-parameter model beyond RAM takes ~4 min and 52 GB of disk: bench/llama13b.py runs
    # it on its own; its last figures are reported here with their date.
    big = RESULTS / "llama13b.json"
    if big.is_file():
        b = json.loads(big.read_text())
        for kind in ("to_torch", "to_onnx", "to_msc"):
            r = b.get(kind)
            if r:
                out.append(
                    (
                        f"13B fp16 Llama ({b['weight_bytes'] / 1e9:.0f} GB) ONNX {kind} beyond RAM "
                        "(last bench/llama13b.py run, results/llama13b.json)",
                        f"{r['seconds']:.0f} s, peak RSS +{r['peak_rss'] / MB:.0f} MB",
                        bool(r.get("weights_equal")) and r["peak_rss"] <= 0.25 * b["weight_bytes"],
                    )
                )
    return out


def check(results: dict) -> int:
    """Print each target with its figure; 1 if one is missed (or nothing was measured)."""
    rows = targets(results)
    print("\ntargets (issue 16)")
    for target, figure, ok in rows:
        print(f"  {'met   ' if ok else 'MISSED'}  {target}: {figure}")
    missed = sum(not ok for _, _, ok in rows)
    print(f"{len(rows) - missed} of {len(rows)} targets met" if rows else "nothing measured")
    return 1 if missed or not rows else 0


def _relax_section(rows: list[dict]) -> list[str]:
    """Translation to TVM Relax: msc against TVM's own torch frontend (bench/relax.py)."""
    lines = [
        "## Translating to TVM Relax",
        "",
        "Generated from `bench/results/relax.json`, written by `python bench/relax.py`: the",
        "same ExportedProgram translated by msc",
        "(`codegen.relax.to_module(msc.from_exported_program(ep))`) and by TVM's",
        "`tvm.relax.frontend.torch.from_exported_program` (which first runs torch's",
        "decompositions), best of the runs; the module msc writes is compiled and run on the",
        "example inputs and compared with eager PyTorch.",
        "",
        "| model | torch.export s | msc s | TVM frontend s | msc speedup | max abs diff vs eager |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['export_s']:.2f} | {r['msc_s']:.2f} | {r['tvm_s']:.2f} | "
            f"{r['tvm_s'] / r['msc_s']:.1f}x | {r['max_abs_diff']:.1e} |"
        )
    return lines


def _deploy_section(d: dict) -> list[str]:
    """msc's ONNX files against torch.onnx's as a deployment engineer sees them
    (bench/onnx_deploy.py)."""
    env = d["environment"]
    lines = [
        "## ONNX files for deployment",
        "",
        "Generated from `bench/results/onnx_deploy.json`, written by",
        "`python bench/onnx_deploy.py --json bench/results/onnx_deploy.json`",
        f"({env['date']}, commit {env['commit']}, torch {env['torch']}, onnxruntime "
        f"{env['onnxruntime']}{', quick sizes' if env['quick'] else ''}).",
        "Per model: msc's default file; msc's written node for node (`optimize=False`); msc's",
        'with attention as MatMul/Softmax (`decompose=("attention",)`, the file for',
        "onnxruntime's transformer optimizer); torch.onnx's (dynamo).",
        f"One onnxruntime thread, CPU. Load: median session creation of {env['loads']}. Run:",
        f"median `session.run` of {env['iters']}, calls interleaved across the files. (x): the",
        "ratio to torch.onnx's file. ort nodes: after onnxruntime's own optimizations.",
        "Fusions: `onnxruntime.transformers.optimizer`'s fused-op counts (its `Attention` count",
        "includes ONNX's own `Attention` op, which it counts but does not fuse).",
        "",
        "| model | file | nodes | ort nodes | load ms | run ms | optimizer fusions |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for model, r in d["models"].items():
        ref = r["files"].get("torch.onnx")
        for key, f in r["files"].items():
            load, run = f"{f['load_s'] * 1e3:.1f}", f"{f['run_s'] * 1e3:.2f}"
            if ref and key != "torch.onnx":
                load += f" ({f['load_s'] / ref['load_s']:.2f}x)"
                run += f" ({f['run_s'] / ref['run_s']:.2f}x)"
            fu = f["fusions"]
            if fu is None:
                fused = "-"
            elif isinstance(fu, str):
                fused = fu.replace("|", "/")
            else:
                fused = ", ".join(f"{k} {v}" for k, v in fu.items()) or "none"
            lines.append(
                f"| {model} | {key} | {f['nodes']} | {f['ort_nodes']} | {load} | {run} | {fused} |"
            )
    return lines


def page(results: dict, relax: list[dict] | None = None, deploy: dict | None = None) -> str:
    """docs/performance.md, generated from one bench run (and the last Relax timings): how to
    reproduce it, the machine and commit, every target with its figure, and the tables."""
    env = results["environment"]
    rows = targets(results)
    met = sum(ok for _, _, ok in rows)
    lines = [
        "# Performance",
        "",
        "<!-- Generated by `python bench/report.py` from bench/results/*.json; do not edit:",
        "     tests/docs/test_generated.py checks it. -->",
        "",
        "Generated by `python bench/run.py --million --check --docs` from one run (models from",
        "`transformers` configs with random weights, nothing downloaded; every output checked",
        "against the eager model, so a fast wrong answer counts as a failure; each conversion in a",
        "fresh process). Raw figures: `bench/results/bench.json`; `python bench/report.py`",
        "rebuilds this page from them.",
        "",
        f"Run {env['date']}, commit {env['commit']}, {env['cpus']} CPUs (load average "
        f"{env['loadavg_start'][0]:.1f} at the start), Python {env['python']}, torch "
        f"{env['torch']}, onnxruntime {env['onnxruntime']}; {env['total_s'] / 60:.0f} min.",
        "",
        "## Targets",
        "",
        f"Issues 14 and 16 set these targets: {met} of {len(rows)} met.",
        "",
        "| target | measured | |",
        "|---|---|---|",
    ]
    lines += [f"| {t} | {f} | {'met' if ok else '**missed**'} |" for t, f, ok in rows]
    lines += ["", "## Tables", "", "```", results["table"].rstrip(), "```"]
    if relax:
        lines += ["", *_relax_section(relax)]
    if deploy:
        lines += ["", *_deploy_section(deploy)]
    return "\n".join(lines) + "\n"


def _load(path: Path) -> dict | list | None:
    return json.loads(path.read_text()) if path.is_file() else None


def _extra() -> tuple:
    """The sections from the other benches' saved results (None where there are none)."""
    return _load(RESULTS / "relax.json"), _load(RESULTS / "onnx_deploy.json")


def build(bench: Path = RESULTS / "bench.json") -> str:
    """The page from the committed results (what the test compares docs/performance.md with)."""
    results = _load(bench)
    if results is None:
        raise SystemExit(f"{bench}: no bench results; run bench/run.py first")
    return page(results, *_extra())


def write_page(results: dict, path: Path = PAGE) -> None:
    """Rewrite docs/performance.md from a run's results."""
    path.write_text(page(results, *_extra()))
    print(f"rewrote {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--from-json", default=str(RESULTS / "bench.json"), help="a saved run")
    ap.add_argument("--stdout", action="store_true", help="print the page instead of writing it")
    a = ap.parse_args()
    text = build(Path(a.from_json))
    if a.stdout:
        sys.stdout.write(text)
    else:
        PAGE.write_text(text)
        print(f"rewrote {PAGE}")


if __name__ == "__main__":
    main()
