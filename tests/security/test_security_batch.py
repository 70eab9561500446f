"""``msc batch`` on a hostile manifest: outputs stay inside the batch's output directory and
never replace what msc did not write; the manifest is read in bounded time and memory; every
problem is one error (exit 2) before any work.

Before: an entry's ``output`` with ``..``, an absolute path or a symbolic link wrote outside
the output directory (and replaced a user's file there); a YAML alias bomb took ~2.9 GB and
ended in a MemoryError traceback after 37 s; a deeply nested or non-UTF-8 JSON manifest was a
traceback.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from tests.security import one_error, run_child


def _relu(path: Path) -> Path:
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("x", "y")]
    m = helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", vi[:1], vi[1:]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    m.ir_version = 8
    onnx.save(m, path)
    return path


def _tree(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    ("output", "why"),
    [
        ("../outside/x.onnx", "leaves the batch's output directory"),
        ("sub/../../outside/x.onnx", "leaves the batch's output directory"),
        ("{outside}/x.onnx", "is absolute"),
        ("link/x.onnx", "symbolic link"),
        ("link", "symbolic link"),
        (".", "output directory itself"),
        ("", "not a relative path"),
        (7, "not a relative path"),
        ("batch-report.json", "the batch's report"),
        ("exists.onnx", "not a file msc wrote"),
        ("userdir", "msc did not write"),
        ("../a.onnx", "leaves the batch's output directory"),
    ],
)
def test_entry_outputs_stay_inside_and_replace_nothing(tmp_path, output, why):
    work, outside = tmp_path / "work", tmp_path / "outside"
    (work / "out" / "userdir").mkdir(parents=True)
    outside.mkdir()
    _relu(work / "a.onnx")
    (outside / "x.onnx").write_text("precious")
    (work / "out" / "exists.onnx").write_text("mine")
    (work / "out" / "userdir" / "model.py").write_text("mine")
    (work / "out" / "link").symlink_to(outside)
    if isinstance(output, str):
        output = output.replace("{outside}", str(outside))
    entry = {"model": "a.onnx", "to": "onnx" if str(output).endswith(".onnx") else "torch"}
    manifest = work / "m.json"
    manifest.write_text(json.dumps({"output": "out", "models": [{**entry, "output": output}]}))
    before, before_out = _tree(tmp_path), _tree(outside)
    p = run_child("batch", str(manifest))
    one_error(p.returncode, p.stderr, why)
    assert _tree(tmp_path) == before and _tree(outside) == before_out


def test_an_output_over_another_entrys_model_is_refused(tmp_path):
    _relu(tmp_path / "a.onnx")
    _relu(tmp_path / "b.onnx")
    # b's output is a, which another entry reads (and msc did not write)
    manifest = tmp_path / "m.json"
    models = [{"model": "b.onnx", "to": "onnx", "output": "a.onnx"}, "a.onnx"]
    manifest.write_text(json.dumps({"output": ".", "models": models}))
    before = (tmp_path / "a.onnx").read_bytes()
    p = run_child("batch", str(manifest))
    one_error(p.returncode, p.stderr, "would replace what")
    assert (tmp_path / "a.onnx").read_bytes() == before


BILLION_LAUGHS = "\n".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(f"{c}: &{c} [" + ",".join([f"*{p}"] * 9) + "]" for p, c in zip("abcdefgh", "bcdefghi")),
        "models: [*i]",
    ]
)


@pytest.mark.parametrize(
    ("name", "text", "why"),
    [
        ("bomb.yaml", BILLION_LAUGHS, "aliases expand"),
        ("merge_bomb.yaml", "", "aliases expand"),
        ("cycle.yaml", "models: &x [a.onnx, *x]\n", "aliases expand"),
        ("deep.yaml", "models:" + " [" * 50_000 + "]" * 50_000, "nested too deeply"),
        ("deep.json", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ("bad.json", b'{"models": ["\xff\xfe.onnx"]}', "not UTF-8"),
        ("bad.yaml", b"models: [\xff.onnx]\n", "not UTF-8"),
        ("huge.json", " " * (17 << 20) + "{}", "larger than"),
    ],
)
def test_hostile_manifests_are_one_error_in_bounded_time_and_memory(tmp_path, name, text, why):
    if name == "merge_bomb.yaml":  # the same through YAML merge keys
        lines = ["a0: &a0 {k: " + "x" * 100 + "}"]
        lines += [
            f"a{i}: &a{i} {{" + ", ".join(f"k{j}: *a{i - 1}" for j in range(10)) + "}"
            for i in range(1, 9)
        ]
        text = "\n".join(lines) + "\nmodels: [{model: a.onnx, <<: *a8}]\n"
    f = tmp_path / name
    f.write_bytes(text if isinstance(text, bytes) else text.encode())
    try:  # a hang guard, not a speed target
        p = run_child("batch", str(f), "-o", str(tmp_path / "out"), limit_mb=1024, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("msc batch ran for more than 60 s")
    one_error(p.returncode, p.stderr, why)
    assert not (tmp_path / "out").exists()


def test_yaml_aliases_within_the_bound_still_work(tmp_path):
    _relu(tmp_path / "a.onnx")
    f = tmp_path / "m.yaml"
    f.write_text(
        "defaults: &d {task: inspect}\n"
        "models:\n  - {model: a.onnx, name: one, <<: *d}\n  - {model: a.onnx, name: two, <<: *d}\n"
    )
    p = run_child("batch", str(f), "-o", str(tmp_path / "out"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "2 models: 2 ok" in p.stdout
