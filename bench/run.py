"""The msc benchmark: the hub against torch.onnx and onnx2torch on the same models, same run.

    python bench/run.py                 # everything (~15 min on 2 cores)
    python bench/run.py --quick         # small configs, one run each (~3 min)
    python bench/run.py --models bert-base gpt2 --skip beyond_ram
    python bench/run.py --check         # then compare with issue 16's targets; exit 1 if missed
    python bench/run.py --check --from-json bench/results/bench.json   # check a saved run
    python bench/export_phases.py       # msc's part of torch -> ONNX vs torch.export, CPU time

Prints one table per measurement (medians of --repeat runs, ratios against the peer, the
target) and writes the same, with every worker's raw result, to bench/results/bench.json
(bench-quick.json with --quick). Every conversion runs in a fresh process (bench/worker.py).

1. torch -> ONNX: msc.from_torch + codegen.onnx.save vs torch.onnx.export(dynamo=True), both
   with external data; both files run in onnxruntime against the eager model.
2. ONNX -> PyTorch: msc.from_onnx + codegen.torch.to_module vs onnx2torch.convert on the
   torch.onnx opset-17 export; where onnx2torch cannot read that, also on msc's opset-17 file.
3. Peak memory of each conversion above the RSS before it, in multiples of the weight bytes.
4. Run time: generated PyTorch modules vs the eager model; msc's ONNX vs torch.onnx's in
   onnxruntime.
5. Graph machinery at scale (bench/graph_scale.py).
6. Beyond RAM: a multi-GB external-data ONNX model to PyTorch source + safetensors
   (bench/beyond_ram.py).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from models import MODELS  # noqa: E402
from report import check, first_ok, write_page  # noqa: E402

MB = 1 << 20


# ----------------------------------------------------------------------------- workers
def run_worker(args: list[str], json_path: Path, log: Path, timeout: int = 1800) -> dict:
    """Run a worker script in a fresh process; its JSON, or an error naming the crash."""
    env = {k: v for k, v in os.environ.items() if k != "MSC_CHECK"}
    env["PYTHONWARNINGS"] = "ignore"
    with open(log, "ab") as f:
        f.write(f"\n$ {' '.join(args)}\n".encode())
        f.flush()
        try:
            proc = subprocess.run(
                [sys.executable, *args], cwd=ROOT, env=env, stdout=f, stderr=f, timeout=timeout
            )
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    if json_path.exists():
        return json.loads(json_path.read_text())
    tail = log.read_text(errors="replace").strip().splitlines()[-3:]
    msg = f"worker died (exit {rc}): {' | '.join(tail)}"
    return {"error": {"type": "WorkerError", "summary": msg[:300], "message": msg}}


def model_bench(name: str, a: argparse.Namespace, work: Path, log: Path) -> dict:
    d = work / name
    d.mkdir(parents=True, exist_ok=True)
    common = ["--model", name, "--repeat", str(a.repeat), "--iters", str(a.iters)]
    common += ["--threads", str(a.threads)] + (["--quick"] if a.quick else [])
    res: dict[str, Any] = {"export": {}, "import": {}}

    def w(task: str, tag: str, extra: list[str]) -> dict:
        t = time.perf_counter()
        out = run_worker(
            [str(HERE / "worker.py"), task, *common, *extra, "--json", str(d / f"{tag}.json")],
            d / f"{tag}.json",
            log,
        )
        status = "FAILED " + out["error"]["summary"][:100] if "error" in out else "ok"
        print(f"  [{name}] {tag}: {time.perf_counter() - t:.0f} s, {status}", flush=True)
        return out

    for tool in ("msc", "torch.onnx"):
        res["export"][tool] = w("export", f"export-{tool}", ["--tool", tool, "--out", str(d)])
    files = [f"{t}={r['file']}" for t, r in res["export"].items() if r.get("file")]
    res["ort"] = (
        w("ort", "ort", [x for f in files for x in ("--onnx", f)]) if files else {"files": {}}
    )

    sources = []
    if res["export"]["torch.onnx"].get("opset17_file"):
        sources.append(("torch.onnx opset 17", res["export"]["torch.onnx"]["opset17_file"]))
    for label, src in sources:
        res["import"][label] = {
            tool: w("import", f"import-{tool}-{label.split()[0]}", ["--tool", tool, "--src", src])
            for tool in ("msc", "onnx2torch")
        }
    o2t_failed = all("error" in r["onnx2torch"] for r in res["import"].values())
    if o2t_failed and res["export"]["msc"].get("opset17_file"):
        src = res["export"]["msc"]["opset17_file"]
        res["import"]["msc opset 17"] = {
            tool: w(
                "import",
                f"import-{tool}-msc17",
                ["--tool", tool, "--src", src] + (["--no-timing"] if tool == "msc" else []),
            )
            for tool in ("msc", "onnx2torch")
        }
    return res


# ----------------------------------------------------------------------------- formatting
def fmt_s(r: dict) -> str:
    return "FAIL" if "error" in r or "median" not in r else f"{r['median']:.2f}"


def fmt_ratio(x: float | None, unit: str = "x") -> str:
    return "-" if x is None else f"{x:.2f}{unit}"


def fmt_check(c: dict | None) -> str:
    if not c:
        return "-"
    return f"{'ok' if c['ok'] else 'WRONG'} {c['max_abs_err']:.0e}" + (
        f" ({c['note']})" if c.get("note") and not c["ok"] else ""
    )


def fmt_mem(r: dict) -> str:
    if "peak_extra" not in r or not r.get("weight_bytes"):
        return "FAIL" if "error" in r else "-"
    return f"{r['peak_extra'] / r['weight_bytes']:.2f}x"


def verdict(ok: bool | None) -> str:
    return "-" if ok is None else ("met" if ok else "MISSED")


def table(title: str, headers: list[str], rows: list[list[str]], notes: list[str]) -> str:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    out = [title, line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    out += [f"  [{i + 1}] {n}" for i, n in enumerate(notes)]
    return "\n".join(out) + "\n"


class Notes(list):
    def ref(self, where: str, r: dict) -> str:
        self.append(f"{where}: {r['error']['message'][:600]}")
        return f"FAIL[{len(self)}]"


def summarize(results: dict, a: argparse.Namespace) -> tuple[str, dict]:
    out = []
    summary: dict[str, list] = {k: [] for k in ("to_onnx", "to_torch", "memory", "runtime")}

    # 1. torch -> ONNX
    rows, notes = [], Notes()
    for m, r in results["models"].items():
        e, ort = r["export"], r["ort"].get("files", {})
        cells = [m]
        for tool in ("msc", "torch.onnx"):
            cells.append(
                notes.ref(f"{m} {tool}", e[tool]) if "error" in e[tool] else fmt_s(e[tool])
            )
        ok = "error" not in e["msc"] and "error" not in e["torch.onnx"]
        speed = e["torch.onnx"]["median"] / e["msc"]["median"] if ok else None
        checks = [ort.get(t, {}) for t in ("msc", "torch.onnx")]
        right = all(c.get("check", {}).get("ok") for c in checks) if ok else None
        ph, cap = e["msc"].get("phases", {}), e["msc"].get("capture_s")
        cells.insert(2, f"{ph['from_torch']:.2f} + {ph['save']:.2f}" if ph else "-")
        cells += [f"{cap:.2f}" if cap else "-"]
        ceiling = e["torch.onnx"]["median"] / cap if cap and ok else None
        cells += [
            fmt_ratio(speed),
            fmt_ratio(ceiling),
            *(
                notes.ref(f"{m} {t} in onnxruntime", c)
                if "error" in c
                else fmt_check(c.get("check"))
                for t, c in zip(("msc", "torch.onnx"), checks)
            ),
            verdict(None if speed is None else speed >= 5 and bool(right)),
        ]
        rows.append(cells)
        summary["to_onnx"].append(
            {
                "model": m,
                "msc_s": e["msc"].get("median"),
                "torch_onnx_s": e["torch.onnx"].get("median"),
                "speedup": speed,
                "outputs_ok": right,
            }
        )
    out.append(
        table(
            f"1. torch -> ONNX, wall s (median of {a.repeat}); outputs checked in onnxruntime "
            "against eager (max abs err)",
            [
                "model",
                "msc",
                "= from_torch + save",
                "torch.onnx",
                "torch.export alone",
                "speedup",
                "ceiling",
                "msc output",
                "torch.onnx output",
                "target >=5x",
            ],
            rows,
            [
                *notes,
                "ceiling = torch.onnx / torch.export alone: the speedup if msc's own work took "
                "no time; save includes the fsync of data and model",
            ],
        )
    )

    # 2. ONNX -> PyTorch
    rows, notes = [], Notes()
    for m, r in results["models"].items():
        if not r["import"]:
            rows.append(
                [
                    m,
                    "-",
                    "no opset-17 file: "
                    + notes.ref(
                        f"{m} torch.onnx opset 17",
                        {
                            "error": r["export"]["torch.onnx"].get("opset17_error")
                            or r["export"]["torch.onnx"].get("error", {"message": "?"})
                        },
                    ),
                    "",
                    "",
                    "",
                    "",
                    "",
                ]
            )
            continue
        for src, tools in r["import"].items():
            cells = [m, src]
            for tool in ("msc", "onnx2torch"):
                cells.append(
                    notes.ref(f"{m} {tool} on {src}", tools[tool])
                    if "error" in tools[tool]
                    else fmt_s(tools[tool])
                )
            ok = all("median" in tools[t] for t in ("msc", "onnx2torch"))
            speed = tools["onnx2torch"]["median"] / tools["msc"]["median"] if ok else None
            checks = [tools[t].get("runtime", {}).get("check") for t in ("msc", "onnx2torch")]
            hub_ok = "median" in tools["msc"] and bool(checks[0] and checks[0]["ok"])
            target = (speed is None or speed > 1) and hub_ok if "median" in tools["msc"] else False
            cells += [fmt_ratio(speed), fmt_check(checks[0]), fmt_check(checks[1]), verdict(target)]
            rows.append(cells)
            summary["to_torch"].append(
                {
                    "model": m,
                    "source": src,
                    "msc_s": tools["msc"].get("median"),
                    "onnx2torch_s": tools["onnx2torch"].get("median"),
                    "speedup": speed,
                    "onnx2torch_error": tools["onnx2torch"].get("error", {}).get("summary"),
                    "msc_error": tools["msc"].get("error", {}).get("summary"),
                }
            )
    out.append(
        table(
            f"2. ONNX -> PyTorch module, wall s (median of {a.repeat}), "
            "outputs checked against eager",
            [
                "model",
                "source file",
                "msc",
                "onnx2torch",
                "speedup",
                "msc output",
                "onnx2torch output",
                "target: faster, reads it",
            ],
            rows,
            notes,
        )
    )

    # 3. memory
    rows = []
    for m, r in results["models"].items():
        e = r["export"]
        wb = e["msc"].get("weight_bytes") or e["torch.onnx"].get("weight_bytes")
        imp = first_ok(r)
        cells = [m, f"{wb / MB:.0f}" if wb else "-"]
        cells += [fmt_mem(e["msc"]), fmt_mem(e["torch.onnx"])]
        cells += [
            fmt_mem({**imp[t][1], "weight_bytes": wb}) + imp[t][0] for t in ("msc", "onnx2torch")
        ]
        hub = e["msc"].get("peak_extra")
        cells.append(verdict(None if hub is None or not wb else hub / wb <= 0.2))
        rows.append(cells)
        summary["memory"].append(
            {
                "model": m,
                "weight_bytes": wb,
                "to_onnx_msc": e["msc"].get("peak_extra"),
                "to_onnx_torch_onnx": e["torch.onnx"].get("peak_extra"),
                "to_torch_msc": imp["msc"][1].get("peak_extra"),
                "to_torch_onnx2torch": imp["onnx2torch"][1].get("peak_extra"),
            }
        )
    out.append(
        table(
            "3. Peak memory of one conversion above the RSS before it "
            "(->ONNX: model loaded; ->torch: nothing loaded), x weight bytes",
            [
                "model",
                "weights MB",
                "->ONNX msc",
                "->ONNX torch.onnx",
                "->torch msc",
                "->torch onnx2torch",
                "target msc ->ONNX <=0.2x",
            ],
            rows,
            [
                "->torch columns: the first file the tool read ((m) = msc's opset-17 file, "
                "else torch.onnx's); the module holds the weights, so 1x is the floor unless "
                "they stay memory-mapped"
            ],
        )
    )

    # 4. runtime
    rows, notes = [], Notes()
    for m, r in results["models"].items():
        e, ort = r["export"], r["ort"].get("files", {})
        rt = e["msc"].get("roundtrip", {})
        imp = {t: x[1] for t, x in first_ok(r).items()}
        eager = rt.get("eager_s") or imp.get("msc", {}).get("runtime", {}).get("eager_s")
        cells = [m, f"{eager * 1e3:.1f}" if eager else "-"]
        ratios = []
        for label, x in (
            ("torch->msc->torch", rt),
            ("ONNX->msc->torch", imp.get("msc", {}).get("runtime", {})),
            ("onnx2torch", imp.get("onnx2torch", {}).get("runtime", {})),
        ):
            if "error" in x:
                cells.append(notes.ref(f"{m} {label}", x))
            elif "ratio" in x:
                cells.append(f"{x['ratio']:.2f}" + ("" if x["check"]["ok"] else " WRONG"))
                ratios.append(x["ratio"])
            else:
                cells.append("-")
        a_, b_ = ort.get("msc", {}).get("latency_s"), ort.get("torch.onnx", {}).get("latency_s")
        cells += [
            f"{a_ * 1e3:.1f}" if a_ else "-",
            f"{b_ * 1e3:.1f}" if b_ else "-",
            fmt_ratio(a_ / b_ if a_ and b_ else None, ""),
        ]
        torch_ok = ratios[0] <= 1.05 if rt.get("ratio") else None
        ort_ok = a_ / b_ <= 1.05 if a_ and b_ else None
        cells.append(
            verdict(
                None
                if torch_ok is None and ort_ok is None
                else bool(torch_ok is not False and ort_ok is not False)
            )
        )
        rows.append(cells)
        summary["runtime"].append(
            {
                "model": m,
                "eager_s": eager,
                "torch_roundtrip_ratio": rt.get("ratio"),
                "torch_roundtrip_cpu_ratio": rt.get("cpu_ratio"),
                "onnx_import_ratio": imp.get("msc", {}).get("runtime", {}).get("ratio"),
                "onnx2torch_ratio": imp.get("onnx2torch", {}).get("runtime", {}).get("ratio"),
                "ort_msc_s": a_,
                "ort_torch_onnx_s": b_,
            }
        )
    out.append(
        table(
            f"4. Run time of what is generated ({a.threads} thread(s), median of {a.iters} "
            "interleaved calls): "
            "PyTorch modules as a ratio to eager, ONNX files in onnxruntime",
            [
                "model",
                "eager ms",
                "torch->msc->torch",
                "ONNX->msc->torch",
                "onnx2torch",
                "ORT msc ms",
                "ORT torch.onnx ms",
                "msc/torch.onnx",
                "targets <=1.05 (ONNX->msc->torch: <=1.0)",
            ],
            rows,
            notes,
        )
    )

    # 5. graph scale
    gs = results.get("graph_scale")
    if gs and "rows" in gs:
        rows = [
            [
                r["step"],
                f"{r['msc_s']:.3f}",
                r["peer"] or "-",
                f"{r['peer_s']:.3f}" if r["peer_s"] else "-",
                fmt_ratio(r["ratio"]),
            ]
            for r in gs["rows"]
        ]
        out.append(
            table(
                f"5. Graph machinery, synthetic {gs['nodes']}-node graph, s",
                ["step", "msc", "peer", "peer s", "msc/peer"],
                rows,
                [],
            )
        )
    if gs and gs.get("scale"):
        scale = gs["scale"]
        rows = []
        for step in scale[0]["steps"]:
            cells = [step]
            for row in scale:
                r = row["steps"][step]
                cells.append(
                    f"{r['us_per_node']:.2f} / {r['cpu_us_per_node']:.2f}"
                    if "us_per_node" in r
                    else "-"
                )
                cells.append(f"{r['mb_per_1k']:.2f}" if "mb_per_1k" in r else "-")
            t = scale[0]["steps"][step].get("target_us")
            cells.append(f"<= {t:g}" if t else "-")
            rows.append(cells)
        heads = ["step"]
        for row in scale:
            heads += [f"{row['nodes']}: us/node wall / cpu", "MB/1k nodes"]
        out.append(
            table(
                "5b. Graph machinery per node (peak traced MB per 1k nodes)",
                heads + ["target us"],
                rows,
                [],
            )
        )
    if gs and "rows" not in gs and "scale" not in gs:
        out.append(f"5. Graph machinery: FAILED {gs.get('error', {}).get('summary')}\n")

    # 6. beyond RAM
    br = results.get("beyond_ram")
    if br and "error" not in br:
        rows = []
        for kind, label in (
            ("torch", "PyTorch source + safetensors (codegen.torch.save)"),
            ("onnx", "ONNX with external data (codegen.onnx.save)"),
            ("msc", "saved msc graph (msc.save)"),
        ):
            r = br.get(f"to_{kind}", br if kind == "torch" else None)
            if r is None:
                continue
            output = "-"
            if kind == "torch":
                o = br.get("output", {})
                output = "ok" if o.get("ok") else str(o.get("note") or "-")
            rows.append(
                [
                    label,
                    f"{br['weight_bytes'] / 2**30:.2f} GiB",
                    f"{r['seconds']:.1f}",
                    f"{r['peak_rss'] / MB:.0f} MB ({r['peak_rss'] / br['weight_bytes']:.3f}x)",
                    f"{r['peak_anon'] / MB:.0f} MB ({r['peak_anon'] / br['weight_bytes']:.3f}x)",
                    "ok" if r.get("weights_equal", br.get("weights_equal")) else "WRONG",
                    output,
                    verdict(r["peak_rss"] <= 0.25 * br["weight_bytes"]),
                ]
            )
        out.append(
            table(
                "6. Beyond RAM: external-data ONNX MLP (msc.from_onnx) -> each target, "
                "one process each",
                [
                    "to",
                    "weights",
                    "s",
                    "peak RSS above start",
                    "peak anon",
                    "weights equal",
                    "output",
                    "target RSS far below weights (<=0.25x)",
                ],
                rows,
                [
                    "weights load as file regions and are copied file to file (copy_file_range), "
                    "so neither RSS nor private memory grows with them"
                ],
            )
        )
    elif br:
        out.append(f"6. Beyond RAM: FAILED {br['error']['summary']}\n")
    return "\n".join(out), summary


# ----------------------------------------------------------------------------- targets
# ----------------------------------------------------------------------------- main
def environment() -> dict:
    def version(mod: str) -> str | None:
        try:
            from importlib.metadata import version as v

            return v(mod)
        except Exception:  # noqa: BLE001
            return None

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "commit": commit,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
        **{
            k: version(k)
            for k in ("torch", "onnx", "onnxruntime", "onnxscript", "transformers", "onnx2torch")
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small configs, one run, small scale")
    ap.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--repeat", type=int, default=None, help="runs per conversion (default 3)")
    ap.add_argument("--iters", type=int, default=None, help="calls per run-time measurement")
    ap.add_argument(
        "--threads", type=int, default=1, help="torch/onnxruntime threads in workers (default 1)"
    )
    ap.add_argument(
        "--skip", nargs="*", default=[], choices=["models", "graph_scale", "beyond_ram"]
    )
    ap.add_argument("--beyond-gb", type=float, default=None, help="beyond-RAM weights (default 4)")
    ap.add_argument("--million", action="store_true", help="graph machinery at 1M nodes too")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--check", action="store_true", help="compare with the targets; exit 1 if one is missed"
    )
    ap.add_argument("--from-json", default=None, help="a saved run instead of a new one")
    ap.add_argument(
        "--docs", action="store_true", help="rewrite docs/performance.md from it (bench/report.py)"
    )
    a = ap.parse_args()
    if a.from_json:
        saved = json.loads(Path(a.from_json).read_text())
        if a.docs:
            write_page(saved)
        sys.exit(check(saved) if a.check else 0)
    a.repeat = a.repeat or (1 if a.quick else 3)
    a.iters = a.iters or (5 if a.quick else 10)
    a.beyond_gb = a.beyond_gb if a.beyond_gb is not None else (0.25 if a.quick else 4.0)
    results_dir = HERE / "results"
    results_dir.mkdir(exist_ok=True)
    json_path = (
        Path(a.json) if a.json else results_dir / ("bench-quick.json" if a.quick else "bench.json")
    )
    work = Path(tempfile.mkdtemp(prefix="msc-bench-"))
    log = work / "workers.log"
    t0 = time.perf_counter()
    env = environment()
    print(f"msc bench: work dir {work}, log {log}; load average {env['loadavg_start']}", flush=True)
    results: dict[str, Any] = {"environment": env, "args": vars(a), "models": {}}
    try:
        if "models" not in a.skip:
            for m in a.models:
                results["models"][m] = model_bench(m, a, work, log)
        if "graph_scale" not in a.skip:
            t = time.perf_counter()
            gs_json = work / "graph_scale.json"
            extra = ["--nodes", "10000", "--sizes", "10000", "--repeat", "1"] if a.quick else []
            extra += ["--million"] if a.million else []
            results["graph_scale"] = run_worker(
                [str(HERE / "graph_scale.py"), *extra, "--json", str(gs_json)], gs_json, log
            )
            print(f"  graph_scale: {time.perf_counter() - t:.0f} s", flush=True)
        if "beyond_ram" not in a.skip:
            t = time.perf_counter()
            br_json = work / "beyond_ram.json"
            results["beyond_ram"] = run_worker(
                [
                    str(HERE / "beyond_ram.py"),
                    "--gb",
                    str(a.beyond_gb),
                    "--dir",
                    str(work / "beyond"),
                    "--json",
                    str(br_json),
                ],
                br_json,
                log,
            )
            print(f"  beyond_ram: {time.perf_counter() - t:.0f} s", flush=True)
    finally:
        if not a.keep:
            for p in work.iterdir():
                if p.name != "workers.log":
                    shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink()
    env["loadavg_end"] = os.getloadavg()
    env["total_s"] = time.perf_counter() - t0
    text, summary = summarize(results, a)
    header = (
        f"msc bench {env['date']} commit {env['commit']}, {env['cpus']} CPUs, load average "
        f"{env['loadavg_start'][0]:.1f} -> {env['loadavg_end'][0]:.1f}; torch {env['torch']}, "
        f"onnxruntime {env['onnxruntime']}, onnxscript {env['onnxscript']}, transformers "
        f"{env['transformers']}, onnx2torch {env['onnx2torch']}; total {env['total_s']:.0f} s\n"
    )
    print("\n" + header + "\n" + text)
    results["summary"] = summary
    results["table"] = header + "\n" + text
    json_path.write_text(json.dumps(results, indent=1, default=str) + "\n")
    print(f"wrote {json_path} (worker log: {log})")
    if a.docs:
        write_page(results)
    if a.check:
        sys.exit(check(results))


if __name__ == "__main__":
    main()
