"""How much of PyTorch's public operator set the PyTorch frontend converts, end to end.

    python bench/torch_op_coverage.py                  # every OpInfo entry (~15 min, 2 cores)
    python bench/torch_op_coverage.py --ops add cross  # just these
    python bench/torch_op_coverage.py --limit 40       # the first 40 entries

For each entry of PyTorch's own operator table (``op_db``, the OpInfos its test suite runs) the
first float32 CPU sample that torch.export captures is exported, translated with
``msc.from_exported_program``, and run through generated PyTorch (``codegen.torch.to_module``)
and through ONNX in onnxruntime (``codegen.onnx.to_model``); outputs are compared with eager
(floats: |a-b| <= 1e-4 + 1e-4*|b|, NaN where eager has NaN; ints and bools exact).

Counted two ways: per OpInfo entry (a public operator) and per ATen op that torch.export
emitted for the samples (an ATen op counts as converted when a program containing it passed).
Entries whose sample does not export, or whose eager result differs between two runs (random
ops), are not counted. Writes bench/results/op_coverage.json; the failures are listed with the
reason the frontend or codegen gave.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.utils._pytree as pytree

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import codegen.onnx  # noqa: E402
import codegen.torch  # noqa: E402
import msc  # noqa: E402

RTOL = ATOL = 1e-4


_INPUT = object()  # marks where a sample's tensor is a module input

# ATen ops that draw random numbers: msc graphs are deterministic functions of their inputs
# and have no random-number op, so entries using them are listed, not counted.
RANDOM_OPS = (
    "rand", "randn", "randint", "randperm", "normal", "uniform", "bernoulli", "multinomial",
    "exponential", "cauchy", "geometric", "log_normal", "poisson", "fractional_max_pool",
)  # fmt: skip


class _Call(torch.nn.Module):
    """``op(*sample)`` with the sample's tensors as the module's inputs."""

    def __init__(self, op: Any, spec: Any, leaves: list[Any]) -> None:
        super().__init__()
        self.op, self.spec = op, spec
        self.consts = [_INPUT if isinstance(x, torch.Tensor) else x for x in leaves]

    def forward(self, *tensors: torch.Tensor) -> Any:
        it = iter(tensors)
        leaves = [next(it) if c is _INPUT else c for c in self.consts]
        args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        return self.op(*args, **kwargs)


def _leaves(out: Any) -> list[Any]:
    return [x for x in pytree.tree_leaves(out)]


def _close(a: Any, b: Any) -> str:
    """'' when ``a`` (ours) matches ``b`` (eager), else what differs."""
    if isinstance(b, torch.Tensor):
        a = torch.as_tensor(np.asarray(a)) if not isinstance(a, torch.Tensor) else a
        if b.is_complex():
            b = torch.view_as_real(b.resolve_conj())  # ifft of a real: a lazy conjugate
            a = torch.view_as_real(a.resolve_conj()) if a.is_complex() else a
        if tuple(a.shape) != tuple(b.shape):
            return f"shape {tuple(a.shape)} != {tuple(b.shape)}"
        if b.dtype.is_floating_point:
            a, b = a.double(), b.double()
            nan = torch.isnan(b)
            if not torch.equal(torch.isnan(a), nan):
                return "NaN positions differ"
            ok = (a - b).abs() <= ATOL + RTOL * b.abs()
            ok |= nan | (a == b)
            if not bool(ok.all()):
                return f"max abs diff {float((a - b)[~ok].abs().max()):.3g}"
            return ""
        return "" if torch.equal(a.to(b.dtype), b) else "values differ"
    if isinstance(b, (int, float, bool)):
        a = a.item() if hasattr(a, "item") else a
        return "" if (a == b or (b != b and a != a)) else f"{a} != {b}"
    return ""


def _compare(ours: list[Any], ref: list[Any]) -> str:
    if len(ours) != len(ref):
        return f"{len(ours)} outputs, eager has {len(ref)}"
    for i, (a, b) in enumerate(zip(ours, ref)):
        why = _close(a, b)
        if why:
            return f"output {i}: {why}"
    return ""


def _run_onnx(g: msc.Graph, tensors: list[torch.Tensor]) -> list[Any]:
    import onnxruntime as ort

    proto = _bf16_outputs_as_f32(codegen.onnx.to_model(g))
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(proto.SerializeToString(), opts, ["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    feeds = {n: t.detach().numpy() for n, t in zip(names, tensors)}
    return [torch.as_tensor(o) for o in sess.run(None, feeds)]


def _bf16_outputs_as_f32(proto: Any) -> Any:
    """The model with each bfloat16 output cast to float32 (exact: every bfloat16 is a
    float32), because onnxruntime cannot hand a bfloat16 tensor to numpy."""
    from onnx import TensorProto, helper

    for out in proto.graph.output:
        t = out.type.tensor_type
        if t.elem_type == TensorProto.BFLOAT16:
            inner = f"{out.name}__bf16"
            for node in proto.graph.node:
                node.output[:] = [inner if o == out.name else o for o in node.output]
            cast = helper.make_node("Cast", [inner], [out.name], to=TensorProto.FLOAT)
            proto.graph.node.append(cast)
            t.elem_type = TensorProto.FLOAT
    return proto


def _sample_program(info: Any) -> tuple[Any, list[torch.Tensor], Any] | str:
    """(module, input tensors, exported program) for the first sample that exports."""
    try:
        samples = list(info.sample_inputs("cpu", torch.float32, requires_grad=False))
    except Exception as e:  # noqa: BLE001 - an OpInfo without float32 samples
        return f"no float32 samples ({type(e).__name__})"
    why = "no samples"
    for s in samples[:4]:
        leaves, spec = pytree.tree_flatten(((s.input, *s.args), dict(s.kwargs)))
        tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
        mod = _Call(info.op, spec, leaves)
        try:
            with torch.no_grad():
                ep = torch.export.export(mod, tuple(tensors), strict=False)
        except Exception as e:  # noqa: BLE001 - not every sample exports
            why = f"does not export ({type(e).__name__})"
            continue
        return mod, tensors, ep
    return why


def _aten_ops(ep: Any) -> set[str]:
    out = set()
    for gm in ep.graph_module.modules():
        if isinstance(gm, torch.fx.GraphModule):
            for n in gm.graph.nodes:
                if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload):
                    out.add(str(n.target))
    return out


def _base_name(op: str) -> str:
    """``aten.randn_like.default`` -> ``randn``: the op's name without the in-place ``_`` and
    the ``_like`` of its shape-taking variant, as RANDOM_OPS lists names."""
    return op.split(".")[1].rstrip("_").removesuffix("_like")


def check(info: Any) -> dict[str, Any]:
    """One OpInfo entry: its status through msc, generated PyTorch and ONNX."""
    got = _sample_program(info)
    if isinstance(got, str):
        return {"status": "skipped", "why": got}
    mod, tensors, ep = got
    rec: dict[str, Any] = {"aten": sorted(_aten_ops(ep))}
    rand = [op for op in rec["aten"] if _base_name(op) in RANDOM_OPS]
    if rand or info.name in RANDOM_OPS:
        return {"status": "skipped", "why": f"random sampling ({', '.join(rand)})", **rec}
    with torch.no_grad():
        try:
            ref = _leaves(mod(*[t.clone() for t in tensors]))
            ref2 = _leaves(mod(*[t.clone() for t in tensors]))
        except Exception as e:  # noqa: BLE001
            return {"status": "skipped", "why": f"eager fails ({type(e).__name__})"}
    if _compare(ref2, ref):
        return {"status": "skipped", "why": "nondeterministic (random) op", **rec}
    if not rec["aten"] and not any(isinstance(x, torch.Tensor) for x in ref):
        return {"status": "skipped", "why": "the sample computes no tensor", **rec}
    try:
        g = msc.from_exported_program(ep)
    except msc.errors.UnsupportedOpsError as e:
        rec["msc"] = "; ".join(sorted({f"{o.op}: {o.reason}" for o in e.ops}))
        rec["status"] = "unsupported"
        return rec
    except Exception as e:  # noqa: BLE001 - any crash is a finding
        rec["msc"] = f"{type(e).__name__}: {e}"
        rec["status"] = "error"
        return rec
    rec["msc"] = "ok"
    with torch.no_grad():
        try:
            m = codegen.torch.to_module(g)
            rec["torch"] = _compare(_leaves(m(*[t.clone() for t in tensors])), ref) or "ok"
        except Exception as e:  # noqa: BLE001
            rec["torch"] = f"{type(e).__name__}: {str(e)[:300]}"
    try:
        rec["onnx"] = _compare(_run_onnx(g, tensors), ref) or "ok"
    except Exception as e:  # noqa: BLE001
        rec["onnx"] = f"{type(e).__name__}: {str(e)[:300]}"
    rec["status"] = "ok" if rec["torch"] == rec["onnx"] == "ok" else "wrong"
    return rec


def summarize(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Counts per OpInfo entry and per ATen op."""
    counted = {k: r for k, r in results.items() if r["status"] != "skipped"}
    torch_ok = [k for k, r in counted.items() if r.get("torch") == "ok"]
    onnx_ok = [k for k, r in counted.items() if r.get("onnx") == "ok"]
    aten: dict[str, dict[str, bool]] = {}
    for r in counted.values():
        for op in r.get("aten", []):
            a = aten.setdefault(op, {"torch": False, "onnx": False})
            a["torch"] |= r.get("torch") == "ok"
            a["onnx"] |= r.get("onnx") == "ok"
    return {
        "entries": len(counted),
        "entries_torch": len(torch_ok),
        "entries_onnx": len(onnx_ok),
        "skipped": len(results) - len(counted),
        "aten_ops": len(aten),
        "aten_torch": sum(a["torch"] for a in aten.values()),
        "aten_onnx": sum(a["onnx"] for a in aten.values()),
        "aten_failing": sorted(k for k, a in aten.items() if not (a["torch"] and a["onnx"])),
    }


def _reason(r: dict[str, Any]) -> str:
    if r.get("msc") not in (None, "ok"):
        return str(r["msc"])
    parts = [f"{k}: {r[k]}" for k in ("torch", "onnx") if r.get(k) not in (None, "ok")]
    return "; ".join(parts)


def markdown(results: dict[str, dict[str, Any]], s: dict[str, Any]) -> str:
    """docs/torch_op_coverage.md: the counts and every entry that does not convert, why."""
    pct = lambda n: f"{100 * n / max(s['entries'], 1):.1f}%"  # noqa: E731
    lines = [
        "# PyTorch operator coverage",
        "",
        "Generated by `python bench/torch_op_coverage.py --markdown docs/torch_op_coverage.md`",
        f"(torch {s['torch_version']}). Each entry of PyTorch's own operator table (OpInfo) is",
        "exported with its first float32 sample, translated, and run through generated PyTorch",
        "and through ONNX in onnxruntime against eager PyTorch.",
        "",
        f"- counted: {s['entries']} entries ({s['skipped']} not counted: the sample does not",
        "  export, or the op draws random numbers)",
        f"- through generated PyTorch: {s['entries_torch']} ({pct(s['entries_torch'])})",
        f"- through ONNX: {s['entries_onnx']} ({pct(s['entries_onnx'])})",
        f"- ATen ops torch.export emitted: {s['aten_ops']}; converted through PyTorch "
        f"{s['aten_torch']}, through ONNX {s['aten_onnx']}",
        "",
        "## Entries that do not convert to both targets, and why",
        "",
        "| entry | PyTorch | ONNX | reason |",
        "| --- | --- | --- | --- |",
    ]
    for k, r in sorted(results.items()):
        if r["status"] in ("ok", "skipped"):
            continue
        why = _reason(r).replace("|", "\\|").replace("\n", " ")[:240]
        t = "yes" if r.get("torch") == "ok" else "no"
        o = "yes" if r.get("onnx") == "ok" else "no"
        lines.append(f"| {k} | {t} | {o} | {why} |")
    lines += ["", "## Not counted", "", "| entry | why |", "| --- | --- |"]
    for k, r in sorted(results.items()):
        if r["status"] == "skipped":
            lines.append(f"| {k} | {r.get('why', '')} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", nargs="*", help="OpInfo names (default: all)")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--out", default=str(HERE / "results" / "op_coverage.json"))
    ap.add_argument("-v", "--verbose", action="store_true", help="print each failure")
    ap.add_argument("--markdown", help="also write the coverage table here (docs/...)")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from torch.testing._internal.common_methods_invocations import op_db

    infos = [i for i in op_db if not args.ops or i.name in args.ops]
    if args.limit:
        infos = infos[: args.limit]
    results: dict[str, dict[str, Any]] = {}
    t0 = time.time()
    for i, info in enumerate(infos):
        key = f"{info.name}.{info.variant_test_name}" if info.variant_test_name else info.name
        with contextlib.redirect_stderr(io.StringIO()):
            try:
                r = check(info)
            except Exception as e:  # noqa: BLE001 - the harness itself must go on
                r = {"status": "error", "msc": f"harness: {type(e).__name__}: {e}"}
        results[key] = r
        if args.verbose and r["status"] not in ("ok", "skipped"):
            why = r.get("msc") if r.get("msc") != "ok" else f"torch {r['torch']}; onnx {r['onnx']}"
            print(f"[{i + 1}/{len(infos)}] {key}: {r['status']}: {str(why)[:300]}", flush=True)
    s = summarize(results)
    s["seconds"] = round(time.time() - t0, 1)
    s["torch_version"] = torch.__version__
    print(
        f"OpInfo entries counted: {s['entries']} ({s['skipped']} not exportable or random)\n"
        f"  through generated PyTorch: {s['entries_torch']}/{s['entries']}"
        f" = {100 * s['entries_torch'] / max(s['entries'], 1):.1f}%\n"
        f"  through ONNX (onnxruntime): {s['entries_onnx']}/{s['entries']}"
        f" = {100 * s['entries_onnx'] / max(s['entries'], 1):.1f}%\n"
        f"ATen ops emitted: {s['aten_ops']}\n"
        f"  converted, generated PyTorch: {s['aten_torch']}/{s['aten_ops']}"
        f" = {100 * s['aten_torch'] / max(s['aten_ops'], 1):.1f}%\n"
        f"  converted, ONNX: {s['aten_onnx']}/{s['aten_ops']}"
        f" = {100 * s['aten_onnx'] / max(s['aten_ops'], 1):.1f}%"
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"summary": s, "results": results}, indent=1) + "\n")
    print(f"wrote {args.out}")
    if args.markdown:
        Path(args.markdown).write_text(markdown(results, s))
        print(f"wrote {args.markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
