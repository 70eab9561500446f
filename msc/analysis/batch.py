"""``batch``: convert, verify or inspect a whole collection of models, each in its own worker
process with a time and memory limit, on this machine or on a Ray cluster; reruns resume.

A manifest (JSON; YAML too when PyYAML is installed) lists the models; paths are relative to
the manifest's directory, and every key but ``model`` is optional::

    output: converted          # where outputs and batch-report.json go (default: MANIFEST.out)
    timeout: 600               # seconds per model, its worker's start included (default 600)
    memory: 8GiB               # address-space limit per worker (default: this machine's RAM)
    defaults: {task: convert, to: torch}
    models:
      - resnet.onnx                                  # a bare path takes the defaults
      - {model: bert.pt2, to: onnx, opset: 18}
      - {model: net.py:Net, input_shape: [x=1,3,224,224], to: onnx}
      - {model: old.onnx, task: verify, against: old_torch}
      - {model: big.onnx, task: inspect, input_shape: [batch=8]}
      - {model: cnn.onnx, to: relax}                 # needs apache-tvm
      - {model: old.pt2, trust_pickle: true}         # unpickles: runs code the file holds

A directory instead of a manifest: every model directly in it (.onnx, .pt2, .msc, saved msc
graphs, codegen.torch directories), with the task and target ``batch`` is given.

Tasks: ``convert`` (``msc.convert`` with its check; the output goes under ``output``, mirroring
the model's path: ``nets/a.onnx`` -> ``nets/a_torch``, ``nets/a.onnx``, ``nets/a.msc``,
``nets/a_relax``), ``verify`` (``model`` against ``against``) and ``inspect``. ``trust_pickle``
(an entry's, or ``--trust-pickle`` for all) lets that model's .pt2 members be unpickled.
Statuses: ok, skipped (done by an earlier run), mismatch (a check or verify found a
difference), error (msc refused the model: unsupported ops, a corrupt file, ...), crashed (the
worker died), timeout.

# NOTE: invariants
# - Each model runs in a fresh Python process: RLIMIT_AS is set in it before anything is
#   imported; at the time limit its whole process group is killed. Whatever happens to it, its
#   entry gets a status and the batch goes on. A Ray task runs the same worker process.
# - The report is rewritten atomically after every model, so an interrupted batch resumes; it
#   replaces only a batch report (``"msc_batch"`` key), never another file.
# - A rerun skips a model whose entry in the report is ok for the same task and options, whose
#   input files still hash to the recorded sha256, and (convert) whose output files do too.
# - Outputs are written by ``msc.convert``: staged, checked, moved into place, never over a
#   user's files. Model files that are Python code (module.py:Class, a generated model.py
#   directory) run in the worker, as everywhere in msc.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from msc.analysis.manifest import check_outputs, output_problem, read_manifest
from msc.errors import MscError
from msc.io import files
from msc.version import __version__

__all__ = ["batch", "BatchReport", "TASKS", "STATUSES", "parse_size", "format_batch"]

TASKS = ("convert", "verify", "inspect")
STATUSES = ("ok", "skipped", "mismatch", "error", "crashed", "timeout")
REPORT_NAME = "batch-report.json"
DEFAULT_TIMEOUT = 600.0
_KEYS = {
    "model", "name", "task", "to", "output", "against", "opset", "input_shape", "dynamic",
    "rtol", "atol", "seed", "custom_ops", "timeout", "memory", "trust_pickle",
}  # fmt: skip
_TOP_KEYS = {"models", "output", "timeout", "memory", "defaults"}
_SUFFIX = {
    "torch": "_torch",
    "onnx": ".onnx",
    "msc": ".msc",
    "relax": "_relax",
    "tflite": ".tflite",
    "keras": "_keras",
}
_MODEL_SUFFIXES = (".onnx", ".pt2", ".ep", ".tflite", ".keras", ".h5", ".hdf5", ".msc")
# Keras' save_weights file: weights without the model's config, nothing msc can read alone.
_WEIGHTS_ONLY = ".weights.h5"


@dataclass
class BatchReport:
    """The outcome of a batch: one entry per model (the JSON report's ``models``)."""

    source: str
    output: str
    report_path: str
    runner: str
    models: list[dict[str, Any]] = field(default_factory=list)
    started: str = ""
    finished: str = ""

    @property
    def counts(self) -> dict[str, int]:
        c = Counter(m["status"] for m in self.models)
        return {s: c[s] for s in STATUSES if c[s]}

    @property
    def ok(self) -> bool:
        return all(m["status"] in ("ok", "skipped") for m in self.models)

    def to_json(self) -> dict[str, Any]:
        return {
            "msc_batch": 1,
            "msc_version": __version__,
            "source": self.source,
            "output": self.output,
            "runner": self.runner,
            "started": self.started,
            "finished": self.finished,
            "counts": self.counts,
            "models": self.models,
        }


# ------------------------------------------------------------------------------ manifest
def parse_size(value: Any) -> int | None:
    """A memory size: bytes as an int, or ``"512MiB"`` / ``"8G"`` / ``"none"`` (no limit)."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("none", "0", "")):
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value) if value > 0 else None
    text = str(value).strip().lower().replace(" ", "")
    units = {"k": 1, "m": 2, "g": 3, "t": 4}
    num = text.rstrip("ib")
    power = 0
    if num and num[-1] in units:
        power = units[num[-1]]
        num = num[:-1]
    try:
        n = float(num)
    except ValueError:
        raise MscError(f"bad memory size {value!r}: expected bytes or e.g. 512MiB, 8GiB") from None
    if n <= 0:
        return None
    return int(n * 1024**power)


def _machine_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _models_in(directory: Path) -> list[str]:
    found = []
    for p in sorted(directory.iterdir()):
        if p.name.startswith("."):
            continue
        if p.is_dir():
            if (p / "graph.msc").is_file() or (p / "model.py").is_file():
                found.append(p.name)
        elif p.suffix.lower() in _MODEL_SUFFIXES and not p.name.lower().endswith(_WEIGHTS_ONLY):
            found.append(p.name)
    if not found:
        raise MscError(
            f"{directory}: no models in it (.onnx, .pt2, .tflite, .keras, .h5, .msc, model "
            "directories)"
        )
    return found


def _is_module(src: str) -> bool:
    from msc.analysis.pysource import exports_module

    return exports_module(src)


def _path_of(model: str) -> str:
    """The file part of a model reference (``net.py:Net`` -> ``net.py``)."""
    if ":" in model and not Path(model).exists():
        return model.rpartition(":")[0]
    return model


def _output_name(name: str, target: str) -> str:
    """Where a converted model goes under the output directory, mirroring its path."""
    p = Path(_path_of(name))
    cls = name.rpartition(":")[2] if _path_of(name) != name else ""
    if p.is_absolute() or ".." in p.parts:
        p = Path(p.name)
    stem = p.name
    for s in (*_MODEL_SUFFIXES, ".py"):
        if stem.lower().endswith(s):
            stem = stem[: -len(s)]
            break
    stem += f"_{cls}" if cls else ""
    return str(p.parent / (stem + _SUFFIX[target]))


def _plan(
    source: str | os.PathLike | Mapping[str, Any] | Sequence[Any],
    output: str | os.PathLike | None,
    defaults: Mapping[str, Any],
) -> tuple[str, Path, list[dict[str, Any]], dict[str, Any]]:
    """Resolve a manifest into (source label, output dir, jobs, batch-wide settings); every
    problem in it is reported at once."""
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        if not path.exists():
            raise MscError(f"{path}: no such file or directory")
        base = path.resolve().parent if path.is_file() else path.resolve()
        data: Any = read_manifest(path) if path.is_file() else {"models": _models_in(path)}
        label = str(path)
        default_out = (
            path.parent / f"{path.stem}.out"
            if path.is_file()
            else path.parent / f"{path.name}.batch"
        )
    else:
        base, label, default_out = Path.cwd(), "<manifest>", None
        data = {"models": list(source)} if not isinstance(source, Mapping) else dict(source)
    if isinstance(data, list):
        data = {"models": data}
    if not isinstance(data, dict) or not isinstance(data.get("models"), list):
        raise MscError(f"{label}: a manifest is a mapping with a 'models' list (or a list)")
    problems = [
        f"unknown key {k!r} (keys: {', '.join(sorted(_TOP_KEYS))})"
        for k in data
        if k not in _TOP_KEYS
    ]
    top_defaults = data.get("defaults") or {}
    if not isinstance(top_defaults, dict):
        problems.append("'defaults' must be a mapping")
        top_defaults = {}
    out_text = output if output is not None else data.get("output")
    if out_text is None and default_out is None:
        raise MscError("name an output directory for the batch")
    out = Path(out_text) if out_text is not None else Path(default_out)  # type: ignore[arg-type]
    if not out.is_absolute():
        out = (base / out) if output is None and data.get("output") else out.resolve()
    settings = {
        "timeout": data.get("timeout", DEFAULT_TIMEOUT),
        "memory": data.get("memory", "machine"),
    }
    jobs: list[dict[str, Any]] = []
    seen_names: dict[str, int] = {}
    seen_outputs: dict[str, int] = {}
    for i, item in enumerate(data["models"]):
        where = f"models[{i}]"
        entry = {"model": item} if isinstance(item, str) else item
        if not isinstance(entry, dict) or not isinstance(entry.get("model"), str):
            problems.append(f"{where}: expected a path or a mapping with 'model'")
            continue
        spec = {**{k: v for k, v in defaults.items() if v is not None}, **top_defaults, **entry}
        bad = sorted(set(spec) - _KEYS)
        if bad:
            problems.append(f"{where}: unknown key(s) {', '.join(map(repr, bad))}")
            continue
        name = str(spec.get("name") or entry["model"])
        if name in seen_names:
            problems.append(f"{where}: {name!r} is listed twice (models[{seen_names[name]}])")
            continue
        seen_names[name] = i
        task = spec.get("task") or ("convert" if spec.get("to") else "inspect")
        if task not in TASKS:
            problems.append(f"{where}: unknown task {task!r} ({', '.join(TASKS)})")
            continue
        model = _resolve(base, entry["model"])
        try:
            job = _job(name, model, task, spec, settings)
        except (TypeError, ValueError) as e:
            problems.append(f"{where}: a bad value ({e})")
            continue
        if not job["timeout"] > 0:
            problems.append(f"{where}: timeout must be a number of seconds > 0")
            continue
        if task == "convert":
            to = spec.get("to") or "torch"
            if to not in _SUFFIX:
                problems.append(f"{where}: unknown target {to!r} ({', '.join(_SUFFIX)})")
                continue
            rel = spec.get("output")
            rel = _output_name(name, to) if rel is None else rel
            if why := output_problem(out, rel, REPORT_NAME):
                problems.append(f"{where}: {why}")
                continue
            job.update(to=to, opset=spec.get("opset"), output=str(out / rel))
            if job["output"] in seen_outputs:
                problems.append(
                    f"{where}: writes {rel}, as models[{seen_outputs[job['output']]}] does; "
                    "give one an 'output'"
                )
            seen_outputs[job["output"]] = i
        elif task == "verify":
            if not spec.get("against"):
                problems.append(f"{where}: task verify needs 'against' (the model to compare)")
                continue
            job["against"] = _resolve(base, str(spec["against"]))
        jobs.append(job)
    if problems:
        raise MscError(f"{label}: bad manifest\n" + "\n".join(problems))
    reads = [(j["name"], _path_of(j[k])) for j in jobs for k in ("model", "against") if j.get(k)]
    if problems := check_outputs(
        [(j["name"], j["output"], j["to"]) for j in jobs if "output" in j], reads
    ):
        raise MscError(f"{label}: nothing run; outputs in the way\n" + "\n".join(problems))
    return label, out, jobs, settings


def _job(
    name: str, model: str, task: str, spec: Mapping[str, Any], settings: Mapping[str, Any]
) -> dict[str, Any]:
    """One entry's options, typed (a bad value raises ValueError or TypeError)."""
    return {
        "name": name,
        "model": model,
        "task": task,
        "input_shape": [str(s) for s in spec.get("input_shape") or ()],
        "dynamic": [str(s) for s in spec.get("dynamic") or ()],
        "rtol": float(spec.get("rtol", 1e-4)),
        "atol": float(spec.get("atol", 1e-5)),
        "seed": int(spec.get("seed", 0)),
        "custom_ops": spec.get("custom_ops", "error"),
        "trust_pickle": _flag(spec.get("trust_pickle", False), "trust_pickle"),
        "timeout": float(spec.get("timeout") or settings["timeout"]),
        "memory": spec.get("memory", settings["memory"]),
    }


def _flag(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{key} is true or false, not {value!r}")
    return value


def _resolve(base: Path, model: str) -> str:
    file, sep, cls = model.rpartition(":") if _path_of(model) != model else (model, "", "")
    p = Path(file)
    p = p if p.is_absolute() else base / p
    return str(p) + (sep + cls if sep else "")


def _spec_hash(job: Mapping[str, Any]) -> str:
    """What a job does (task, paths, options), so a rerun with other options is not skipped."""
    keep = {k: v for k, v in job.items() if k not in ("timeout", "memory", "name", "threads")}
    return hashlib.sha256(json.dumps(keep, sort_keys=True).encode()).hexdigest()


# ------------------------------------------------------------------------------ hashing
def _input_files(model: str) -> list[Path]:
    """The files a model reference reads: a directory's files, a .py file (with the weights
    beside a generated model.py), an .onnx file and its external data, else the file."""
    from msc.analysis.pysource import generated_weights

    p = Path(_path_of(model))
    if p.is_dir():
        return sorted(f for f in p.rglob("*") if f.is_file() and "__pycache__" not in f.parts)
    weights = generated_weights(p) if p.suffix.lower() == ".py" else None
    if weights is not None and weights.is_file():
        return [p, weights]
    if p.suffix.lower() == ".onnx" and p.is_file():
        import onnx

        try:
            proto = onnx.load(str(p), load_external_data=False)
        except Exception:  # not readable as ONNX: the task itself reports that, with msc's words
            return [p]
        extra = {p.parent / loc for loc in _external_locations(proto.graph)}
        return [p, *sorted(f for f in extra if f.is_file() and f != p)]
    return [p] if p.is_file() else []


def _external_locations(graph: Any) -> set[str]:
    """The external-data files an ONNX graph's tensors (subgraphs included) name."""
    tensors = list(graph.initializer)
    found: set[str] = set()
    for node in graph.node:
        for a in node.attribute:
            tensors += ([a.t] if a.HasField("t") else []) + list(a.tensors)
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                found |= _external_locations(sub)
    for t in tensors:
        for e in t.external_data:
            if e.key == "location" and e.value:
                found.add(e.value)
    return found


def digest(paths: Sequence[Path], base: Path | None = None) -> str:
    """sha256 over the files' names (relative to ``base``) and contents."""
    h = hashlib.sha256()
    for f in paths:
        name = os.path.relpath(f, base) if base is not None else f.name
        h.update(name.encode() + b"\0" + str(f.stat().st_size).encode() + b"\0")
        with open(f, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
    return h.hexdigest()


def _input_digest(job: Mapping[str, Any]) -> str:
    paths = _input_files(job["model"])
    if not paths:
        return ""
    parts = [digest(paths, Path(_path_of(job["model"])).parent)]
    if job.get("against"):
        others = _input_files(job["against"])
        parts.append(digest(others, Path(_path_of(job["against"])).parent) if others else "")
    return ":".join(parts)


# ------------------------------------------------------------------------------ worker
def _limit_memory(limit: int | None) -> None:
    if limit is None:
        return
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _child() -> None:
    """The worker process: ``python -c 'from msc.analysis.batch import _child; _child()' JOB
    RESULT``. Runs one job and writes its result; a crash leaves no result."""
    job = json.loads(Path(sys.argv[1]).read_text())
    _limit_memory(job.get("memory_bytes"))
    result: dict[str, Any]
    try:
        result = {"input_sha256": _input_digest(job)}
        result.update(_perform(job))
    except MscError as e:
        result = {"status": "error", "message": str(e).strip()}
    except MemoryError:
        limit = job.get("memory_bytes")
        result = {"status": "error", "message": f"out of memory (limit {limit} bytes)"}
    except Exception as e:  # a bug in msc or in the model's own code: the batch goes on
        import traceback

        tail = traceback.format_exc().strip().splitlines()[-6:]
        result = {"status": "error", "message": f"{type(e).__name__}: {e}", "traceback": tail}
    out = Path(sys.argv[2])
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, default=str))
    os.replace(tmp, out)


def _load(src: str, job: Mapping[str, Any], specs, trust: bool):
    from msc.analysis.model import load_model

    module = _is_module(src)
    return load_model(
        src,
        specs if module else (),
        job["dynamic"] if module else (),
        trust_pickle=trust,
        custom_ops=job["custom_ops"],
    ), module


def _perform(job: Mapping[str, Any]) -> dict[str, Any]:
    from msc.analysis.shapes import bind, parse_input_shape

    specs = [parse_input_shape(s) for s in job["input_shape"]]
    trust = bool(job.get("trust_pickle"))
    task = job["task"]
    if task == "convert":
        from msc.analysis.convert import convert

        r = convert(
            job["model"],
            job["output"],
            to=job["to"],
            opset=job.get("opset"),
            input_specs=specs,
            dynamic=job["dynamic"],
            rtol=job["rtol"],
            atol=job["atol"],
            seed=job["seed"],
            trust_pickle=trust,
            custom_ops=job["custom_ops"],
        )
        data = r.to_json()
        errs = ", ".join(f"max abs {o.max_abs:.3g}" for o in r.numeric.outputs) if r.numeric else ""
        out = Path(job["output"])
        result = {"status": "ok" if r.ok else "mismatch", "result": data}
        if r.ok:
            written = [Path(f) for f in r.files]
            base = out.parent
            result["output_files"] = [os.path.relpath(f, base) for f in written]
            result["output_sha256"] = digest(written, base)
            result["message"] = f"{out.name} ({r.target}): outputs match ({errs})"
        elif r.numeric is not None and r.numeric.ok:
            result["message"] = f"output read back: {r.verdict}; nothing written"
        else:
            result["message"] = f"outputs DO NOT match ({errs}); nothing written"
        return result
    m, module = _load(job["model"], job, specs, trust)
    binding = {} if module else bind(m.graph, specs)
    if task == "verify":
        from msc.analysis.verify import verify_models

        other, _ = _load(job["against"], job, specs, trust)
        r = verify_models(
            m, other, rtol=job["rtol"], atol=job["atol"], seed=job["seed"], binding=binding
        )
        errs = ", ".join(f"{o.name} max abs {o.max_abs:.3g}" for o in r.outputs)
        verdict = "outputs match" if r.ok else "outputs DO NOT match"
        where = f"; first divergence at {r.divergence.node}" if r.divergence else ""
        return {
            "status": "ok" if r.ok else "mismatch",
            "message": f"{verdict} ({errs}){where}",
            "result": r.to_json(),
        }
    from msc.analysis.inspect import inspect_graph

    r = inspect_graph(m.graph, binding, source=m.label)
    data = r.to_json()
    data.pop("nodes")  # per-node rows stay with `msc inspect`; the report keeps the totals
    flops = data["flops"]
    flops = f", {flops:,} FLOPs" if isinstance(flops, int) else f", {flops} FLOPs" if flops else ""
    return {
        "status": "ok",
        "message": f"{r.num_nodes} nodes, {r.params:,} parameters{flops}",
        "result": data,
    }


class _Workers:
    """The worker processes this process started, to kill them all on an interrupt."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.live: set[subprocess.Popen] = set()
        self.stopped = False

    def kill_all(self) -> None:
        with self.lock:
            self.stopped = True
            for p in self.live:
                _kill(p)


_workers = _Workers()


def _kill(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _checkout_root() -> str | None:
    """The directory msc is imported from when it is a checkout (not an installed package), so
    workers import the same code."""
    root = Path(__file__).resolve().parents[2]
    if root.name in ("site-packages", "dist-packages"):
        return None
    return str(root)


def run_job(job: Mapping[str, Any]) -> dict[str, Any]:
    """Run one job in a fresh worker process under its time and memory limits; returns its
    result (status, message, ...). Also the body of a Ray task."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="msc-batch-") as d:
        jp, rp, log = Path(d, "job.json"), Path(d, "result.json"), Path(d, "log.txt")
        jp.write_text(json.dumps(job))
        env = dict(os.environ)
        root = job.get("pythonpath")
        if root and Path(root, "msc").is_dir():
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        env.setdefault("OMP_NUM_THREADS", str(job.get("threads", 1)))
        argv = [sys.executable, "-c", "from msc.analysis.batch import _child; _child()", jp, rp]
        with open(log, "wb") as lf:
            with _workers.lock:
                if _workers.stopped:
                    return {"status": "error", "message": "interrupted before it started"}
                p = subprocess.Popen(
                    [str(a) for a in argv],
                    stdin=subprocess.DEVNULL,
                    stdout=lf,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=d,
                    start_new_session=True,
                )
                _workers.live.add(p)
            try:
                p.wait(timeout=job["timeout"])
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill(p)
                p.wait()
            finally:
                _kill(p)  # anything the model's code left running in its group
                with _workers.lock:
                    _workers.live.discard(p)
        seconds = round(time.monotonic() - start, 2)
        if timed_out:
            msg = f"no result within {job['timeout']:g} s; the worker was killed"
            return {"status": "timeout", "message": msg, "seconds": seconds}
        if rp.is_file():
            result = json.loads(rp.read_text())
            result["seconds"] = seconds
            return result
        rc = p.returncode
        if rc < 0:
            try:
                how = f"killed by {signal.Signals(-rc).name}"
            except ValueError:
                how = f"killed by signal {-rc}"
            if -rc == signal.SIGKILL:
                how += " (out of memory?)"
        else:
            how = f"exited with code {rc} before writing a result"
        tail = log.read_bytes()[-2000:].decode("utf-8", "replace").strip().splitlines()[-5:]
        return {
            "status": "crashed",
            "message": f"the worker {how}",
            "log": tail,
            "seconds": seconds,
        }


# ------------------------------------------------------------------------------ runners
def _run_local(jobs: list[dict], workers: int, done: Callable[[dict, dict], None]) -> None:
    _workers.stopped = False
    with ThreadPoolExecutor(max_workers=max(1, workers)) as ex:
        futures = {ex.submit(run_job, j): j for j in jobs}
        try:
            for f in as_completed(futures):
                done(futures[f], f.result())
        except BaseException:
            for f in futures:
                f.cancel()
            _workers.kill_all()
            raise


def _run_ray(jobs: list[dict], address: str | None, done: Callable[[dict, dict], None]) -> None:
    try:
        import ray
    except ImportError:
        raise MscError("--ray needs Ray: pip install 'msc-graph-hub[ray]'") from None
    started = False
    if not ray.is_initialized():
        root = _checkout_root()
        env = {"env_vars": {"PYTHONPATH": root}} if root else None
        ray.init(address=address or None, runtime_env=env, log_to_driver=False)
        started = True
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(run_job)
        pending = {task.remote(j): j for j in jobs}
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    job = pending.pop(ref)
                    try:
                        result = ray.get(ref)
                    except Exception as e:  # the Ray worker itself died or the node went away
                        result = {"status": "crashed", "message": f"Ray task failed: {e}"}
                    done(job, result)
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
    finally:
        if started:
            ray.shutdown()


# ------------------------------------------------------------------------------ driver
def _load_previous(path: Path) -> dict[str, dict[str, Any]]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict) or "msc_batch" not in data:
        raise MscError(f"{path}: exists and is not an msc batch report; choose another output")
    return {m["name"]: m for m in data.get("models", []) if isinstance(m, dict) and "name" in m}


def _still_done(job: Mapping[str, Any], prev: Mapping[str, Any] | None) -> bool:
    """The previous run did this job and nothing it read or wrote has changed since."""
    if not prev or prev.get("status") not in ("ok", "skipped"):
        return False
    if prev.get("spec_sha256") != _spec_hash(job):
        return False
    try:
        if prev.get("input_sha256") != _input_digest(job):
            return False
        if job["task"] == "convert":
            base = Path(job["output"]).parent
            written = [base / f for f in prev.get("output_files") or ()]
            if not written or not all(f.is_file() for f in written):
                return False
            return prev.get("output_sha256") == digest(written, base)
    except (OSError, ValueError, MscError):
        return False
    return True


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def batch(
    manifest: str | os.PathLike | Mapping[str, Any] | Sequence[Any],
    output: str | os.PathLike | None = None,
    *,
    task: str | None = None,
    to: str | None = None,
    jobs: int | None = None,
    timeout: float | None = None,
    memory: int | str | None = None,
    ray: bool | str = False,
    resume: bool = True,
    trust_pickle: bool = False,
    custom_ops: str | None = None,
    progress: Callable[[dict[str, Any] | None, BatchReport], None] | None = None,
) -> BatchReport:
    """Run a batch (see the module docstring) and write its JSON report.

    Args:
        manifest: a manifest file (.json, .yaml), a directory of models, a manifest mapping,
            or a list of entries (paths or mappings).
        output: the output directory (default: the manifest's ``output``, else beside it).
        task: the task of entries that name none (convert, verify or inspect).
        to: the target of convert entries that name none.
        jobs: worker processes at once on this machine (default: CPU count).
        timeout: per-worker time limit in seconds, overriding the manifest's.
        memory: per-worker address-space limit overriding the manifest's (bytes or "8GiB";
            "none" for no memory limit).
        ray: run on Ray: True (``ray.init()``'s default cluster, or the one already
            initialised) or a cluster address. Paths must be ones the cluster shares.
        resume: skip models done by an earlier run (see the module docstring).
        trust_pickle: allow unpickling .pt2 members (runs code the file contains).
        custom_ops: "keep" keeps ops msc cannot translate as custom nodes, for entries that
            do not say; "error" (the default) reports them.
        progress: called with None and the report once the models are planned, then after
            each model with its entry and the report so far.

    Returns the BatchReport (also written to ``OUTPUT/batch-report.json``).
    """
    defaults = {"task": task, "to": to, "custom_ops": custom_ops}
    label, out, plan, settings = _plan(manifest, output, defaults)
    mem_setting = memory if memory is not None else settings["memory"]
    mem = _machine_memory() if mem_setting == "machine" else parse_size(mem_setting)
    report_path = out / REPORT_NAME
    previous = _load_previous(report_path) if report_path.exists() else {}
    files.check_output(report_path, "file", "batch-report")
    n_workers = jobs or os.cpu_count() or 1
    runner = "local" if not ray else f"ray ({ray})" if isinstance(ray, str) else "ray"
    report = BatchReport(label, str(out), str(report_path), runner, started=_now())
    entries: dict[str, dict[str, Any]] = {}
    root = _checkout_root()
    for job in plan:
        if timeout is not None:
            job["timeout"] = float(timeout)
        per = job.pop("memory")
        job["memory_bytes"] = mem if memory is not None or per == "machine" else parse_size(per)
        job["trust_pickle"] = trust_pickle or job["trust_pickle"]  # the option, or the entry
        job["threads"] = max(1, (os.cpu_count() or 1) // n_workers)
        job["pythonpath"] = root
        entry = {
            "name": job["name"],
            "model": job["model"],
            "task": job["task"],
            "target": job.get("to"),
            "output": job.get("output"),
            "against": job.get("against"),
            "status": "pending",
            "message": "",
            "spec_sha256": _spec_hash(job),
        }
        entries[job["name"]] = entry
        report.models.append(entry)
    todo = []
    for job in plan:
        prev = previous.get(job["name"])
        if resume and _still_done(job, prev):
            assert prev is not None
            entries[job["name"]].update(
                {k: v for k, v in prev.items() if k not in ("status", "message", "seconds")},
                status="skipped",
                message="done by an earlier run; input and output unchanged",
                seconds=0.0,
            )
        else:
            todo.append(job)
    out.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()

    def finished(job: dict[str, Any], result: dict[str, Any]) -> None:
        with lock:
            entry = entries[job["name"]]
            entry.update(result)
            entry.setdefault("message", "")
            report.finished = _now()
            files.write_text(
                report_path, json.dumps(report.to_json(), indent=2, default=str), "batch-report"
            )
            if progress is not None:
                progress(entry, report)

    if progress is not None:
        progress(None, report)  # the plan: every model, those skipped already counted
    if ray:
        _run_ray(todo, ray if isinstance(ray, str) else None, finished)
    else:
        _run_local(todo, n_workers, finished)
    report.finished = _now()
    files.write_text(
        report_path, json.dumps(report.to_json(), indent=2, default=str), "batch-report"
    )
    return report


# ------------------------------------------------------------------------------ text
def format_batch(r: BatchReport, width: int = 60) -> str:
    """The batch as a table: model, task, status, seconds, what happened."""
    rows = [["model", "task", "status", "time", "detail"]]
    for m in r.models:
        task = m["task"] + (f" -> {m['target']}" if m.get("target") else "")
        detail = (m.get("message") or "").splitlines()[0] if m.get("message") else ""
        if len(detail) > width:
            detail = detail[: width - 3] + "..."
        secs = m.get("seconds")
        rows.append([m["name"], task, m["status"], f"{secs:.1f}s" if secs else "-", detail])
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row[:4], widths)) + "  " + row[4] for row in rows]
    counts = ", ".join(f"{n} {s}" for s, n in r.counts.items())
    lines.append("")
    n = len(r.models)
    lines.append(f"{n} model{'s' if n != 1 else ''}: {counts or 'none run'}")
    lines.append(f"report: {r.report_path}")
    return "\n".join(line.rstrip() for line in lines) + "\n"
