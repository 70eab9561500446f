"""The ``msc`` command end to end, through subprocesses (``python -m msc ...``), on models in
every format: a saved ExportedProgram (.pt2), ONNX files (written by msc and a foreign-style
one), saved msc graphs, PyTorch source directories, and ``module.py:Class``.

Exit codes: 0 ok, 1 a check/verify/diff found a difference, 2 user error without traceback.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import msc
from msc.cli import main
from msc.examples import onnx_example, small_cnn_graph

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES_PY = ROOT / "msc" / "examples.py"


def run(*args: str, ok: int | None = 0, sub: bool = False) -> subprocess.CompletedProcess:
    """Run ``msc ARGS``: in a subprocess (``sub=True``), else through ``msc.cli.main`` in this
    process (same parser, same exit codes; it saves a torch import per call). Checks the exit
    code and that no traceback was printed."""
    argv = [str(a) for a in args]
    if sub:
        env = dict(os.environ, PYTHONPATH=str(ROOT), MSC_CHECK="1")
        p = subprocess.run(
            [sys.executable, "-m", "msc", *argv],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=300,
        )
    else:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as e:  # argparse errors
                code = e.code if isinstance(e.code, int) else 2
        p = subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())
    if ok is not None:
        assert p.returncode == ok, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    assert "Traceback" not in p.stderr, p.stderr
    return p


def _have(mod: str, attr: str) -> bool:
    try:
        return hasattr(__import__(mod, fromlist=[attr]), attr)
    except ImportError:
        return False


needs_torch_frontend = pytest.mark.skipif(
    not _have("msc.frontend.torch", "from_exported_program"),
    reason="msc.frontend.torch is not available yet",
)
needs_torch_codegen = pytest.mark.skipif(
    not _have("codegen.torch", "save"), reason="codegen.torch is not available yet"
)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """The models the tests share: foreign.onnx, a saved msc graph, and (when the torch
    frontend exists) cnn.pt2 from msc.examples.TinyCNN."""
    import onnx

    d = tmp_path_factory.mktemp("models")
    out = {"dir": d}
    onnx.save(onnx_example(), d / "foreign.onnx")
    out["foreign.onnx"] = d / "foreign.onnx"
    msc.save(small_cnn_graph(), d / "small_cnn")
    out["small_cnn"] = d / "small_cnn"
    if _have("msc.frontend.torch", "from_exported_program"):
        import torch

        from msc.examples import example_module

        m, args, dyn = example_module("cnn")
        torch.export.save(torch.export.export(m, args, dynamic_shapes=dyn), d / "cnn.pt2")
        out["cnn.pt2"] = d / "cnn.pt2"
    return out


# ------------------------------------------------------------------------------ help
def test_help_lists_every_command():
    p = run("--help", sub=True)
    for cmd in ("convert", "inspect", "diff", "verify", "render", "batch", "demo"):
        assert cmd in p.stdout
    assert "exit codes" in p.stdout
    p = run("convert", "--help")
    assert "--input-shape" in p.stdout and "--no-check" in p.stdout and "--opset" in p.stdout
    assert run("--version").stdout.startswith("msc ")


# ------------------------------------------------------------------------------ inspect
def test_inspect_onnx_json_and_text(models):
    p = run("inspect", models["foreign.onnx"], "--json", sub=True)
    j = json.loads(p.stdout)
    assert [i["name"] for i in j["inputs"]] == ["image"]
    assert j["inputs"][0]["shape"] == ["N", 3, 16, 16]
    assert j["params"] == 8 * 27 + 8 + 16 * 72 + 16 + 80 + 5
    # conv1 N*8*16*16*27 + conv2 N*16*8*8*72 + fc N*16*5, as a formula in N.
    assert j["macs"] == f"{8 * 256 * 27 + 16 * 64 * 72 + 80}*N"
    assert p.stderr == ""  # no progress output when stderr is not a terminal
    p = run("inspect", models["foreign.onnx"], "--input-shape", "image=4,3,16,16")
    assert "bound: N=4" in p.stdout
    assert f"{4 * (8 * 256 * 27 + 16 * 64 * 72 + 80):,}" in p.stdout
    assert "peak activation memory" in p.stdout


@needs_torch_frontend
def test_inspect_pt2_matches_hand_count(models):
    j = json.loads(run("inspect", models["cnn.pt2"], "--json").stdout)
    macs = 16 * 32 * 32 * 27 + 32 * 16 * 16 * 144 + 32 * 10
    # torch.export.save does not keep Dim names: the symbol may come back as s0, s77...
    (sym,) = j["symbols"]
    assert j["macs"] == f"{macs}*{sym}"
    assert j["symbols"][sym] == {"min": 1, "max": 64}
    assert any(n["module"] == "features.4" for n in j["nodes"])


# ------------------------------------------------------------------------------ convert
def test_convert_onnx_to_msc_and_back(models, tmp_path):
    p = run("convert", models["foreign.onnx"], "-o", tmp_path / "g", "--to", "msc")
    assert "check: outputs match" in p.stdout
    assert (tmp_path / "g" / "graph.msc").is_file()
    p = run("convert", tmp_path / "g", "-o", tmp_path / "again.onnx", "--opset", "17", "--json")
    j = json.loads(p.stdout)
    assert j["ok"] and j["checked"] and j["target"] == "onnx" and j["numeric"]["ok"]
    import onnx

    assert onnx.load(tmp_path / "again.onnx").opset_import[0].version == 17


def test_convert_fixes_and_frees_dims(models, tmp_path):
    run(
        "convert",
        models["foreign.onnx"],
        "-o",
        tmp_path / "b1",
        "--to",
        "msc",
        "--input-shape",
        "image=1,3,16,16",
    )
    g = msc.load(tmp_path / "b1")
    assert g.inputs[0].type.shape == (1, 3, 16, 16)
    assert g.outputs[0].type.shape == (1, 5)
    run(
        "convert",
        tmp_path / "b1",
        "-o",
        tmp_path / "dyn",
        "--to",
        "msc",
        "--dynamic",
        "image:0=batch{1..8}",
    )
    g = msc.load(tmp_path / "dyn")
    assert str(g.inputs[0].type) == "f32[batch{1..8}, 3, 16, 16]"


@needs_torch_frontend
def test_convert_pt2_to_onnx_checks_and_writes(models, tmp_path):
    out = tmp_path / "cnn.onnx"
    p = run("convert", models["cnn.pt2"], "-o", out, sub=True)
    assert out.is_file()
    assert "check: outputs match" in p.stdout and "wrote" in p.stdout


def test_convert_says_what_the_onnx_optimization_did_and_nothing_when_it_did_nothing(
    models, tmp_path
):
    folded = run("convert", models["foreign.onnx"], "-o", tmp_path / "a.onnx").stdout
    assert "onnx optimized: constants as initializers x1" in folded, folded
    g = msc.Graph("plain")
    x = g.add_input("x", msc.TensorType(msc.DType.FLOAT32, [2, 3]))
    g.set_outputs([g.op("relu", x)])
    msc.save(g, tmp_path / "plain")
    plain = run("convert", tmp_path / "plain", "-o", tmp_path / "plain.onnx").stdout
    assert "wrote" in plain and "onnx optimized" not in plain, plain


@needs_torch_frontend
@needs_torch_codegen
def test_convert_to_torch_source_and_module_source(models, tmp_path):
    out = tmp_path / "src"
    p = run("convert", models["foreign.onnx"], "-o", out, "--to", "torch")
    assert (out / "model.py").is_file() and (out / "model.safetensors").is_file()
    assert "check: outputs match" in p.stdout
    # The generated source is itself a model msc reads (given its input shapes).
    p = run("inspect", out, "--input-shape", "image=2,3,16,16", "--json")
    assert json.loads(p.stdout)["params"] == 1477
    p = run(
        "convert",
        f"{EXAMPLES_PY}:TinyCNN",
        "-o",
        tmp_path / "tiny.onnx",
        "--input-shape",
        "x=2,3,32,32",
        "--dynamic",
        "x:0=batch",
    )
    assert "check: outputs match" in p.stdout


def test_convert_to_torch_compares_with_what_the_code_computes(tmp_path):
    # The generated module folds x + 0, leaves unused weights out and holds tensor constants
    # as buffers; the structural check compares with that, not with the graph before it.
    from msc.analysis.convert import convert

    g = msc.from_text(
        "msc format 1, ops 1\ngraph g {\n  input %x: i64[2, 3]\n"
        '  weight @"p.w": f32[3] {role = "parameter"}\n'
        '  weight @"unused.w": f32[3] {role = "parameter"}\n'
        "  %c: i64[3] = constant() {value = tensor(i64[3], [5, 1, 2])}\n"
        "  %k: i64[] = constant() {value = tensor(i64[], [0])}\n"
        "  %y: i64[2, 3] = mul(%x, %c)\n  %z: i64[2, 3] = add(%y, %k)\n"
        "  %f: f32[2, 3] = cast(%z) {to = f32}\n"
        '  %o: f32[2, 3] = add(%f, @"p.w")\n  output %o\n}\n'
    )
    for w in g.weights.values():
        w.set_data(np.ones(3, np.float32))
    msc.save(g, tmp_path / "src")
    r = convert(tmp_path / "src", tmp_path / "out", to="torch")
    assert r.ok and r.verdict == "equal" and r.equivalent, (r.verdict, r.structural)


def _onnx_file(path: Path, nodes, inputs, outputs, inits=()) -> Path:
    import onnx
    from onnx import helper

    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    onnx.save(m, path)
    return path


def test_convert_to_torch_runs_code_torch_export_cannot_capture(tmp_path):
    """Pads read from tensor values at run time are data-dependent sizes the generated
    helper branches on, which torch.export cannot guard on: the check runs the generated
    module as it is and says so, rather than refusing to write it (speech front ends and
    file-type detectors do this). Slice bounds read so are captured (torch's subscript
    takes data-dependent sizes)."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    src = _onnx_file(
        tmp_path / "dd.onnx",
        [helper.make_node("Pad", ["x", "p"], ["y"], mode="edge")],
        [x, helper.make_tensor_value_info("p", TensorProto.INT64, [4])],
        [y],
    )
    out = tmp_path / "out"
    p = run("convert", src, "-o", out, "--to", "torch", "--json")
    r = json.loads(p.stdout)
    assert r["ok"] and r["not_reimported"] and r["structurally_equal"] is None, r
    assert "data-dependent" in r["not_reimported"], r["not_reimported"]
    assert (out / "model.py").is_file()
    p = run("convert", src, "-o", tmp_path / "out2", "--to", "torch")
    assert "check: not re-imported (torch.export cannot capture" in p.stdout
    assert "check: outputs match" in p.stdout
    sliced = _onnx_file(
        tmp_path / "slice.onnx",
        [helper.make_node("Slice", ["x", "s", "e"], ["y"])],
        [x, *(helper.make_tensor_value_info(n, TensorProto.INT64, [1]) for n in "se")],
        [y],
    )
    p = run("convert", sliced, "-o", tmp_path / "out3", "--to", "torch", "--json")
    r = json.loads(p.stdout)
    assert r["ok"] and not r["not_reimported"], r


def test_a_source_that_fails_on_tiny_random_inputs_says_which_dims_to_give(tmp_path):
    """Random inputs size free dims 2; a model that needs more (reflect padding of 3, as
    speech front ends pad by half a window) fails in onnxruntime, and the error names the
    free dims and --input-shape, which then makes it run."""
    from onnx import TensorProto, helper, numpy_helper

    src = _onnx_file(
        tmp_path / "pad.onnx",
        [helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([0, 3, 0, 3], np.int64), "p")],
    )
    p = run("convert", src, "-o", tmp_path / "out", "--to", "torch", ok=2)
    assert "free dims (b, n) are 2" in p.stderr and "--input-shape" in p.stderr, p.stderr
    p = run("convert", src, "-o", tmp_path / "out", "--to", "torch", "--input-shape", "x=1,8")
    assert "check: outputs match" in p.stdout


def test_convert_to_torch_with_dim_names_that_are_not_identifiers(tmp_path):
    """ONNX dim_params such as paddle2onnx's ``p2o.DynamicDimension.0``: the re-import
    exports the generated module with those dims dynamic (torch.export wants identifiers)."""
    from onnx import TensorProto, helper

    src = _onnx_file(
        tmp_path / "p2o.onnx",
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["p2o.Dim.0", 3, "width-1"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["p2o.Dim.0", 3, "width-1"])],
    )
    p = run("convert", src, "-o", tmp_path / "out", "--to", "torch", "--json")
    r = json.loads(p.stdout)
    assert r["ok"] and r["structurally_equal"] and not r["not_reimported"], r


def test_convert_failure_writes_nothing_and_keeps_old_output(models, tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage that is not a protobuf" * 10)
    out = tmp_path / "out.onnx"
    out.write_text("previous contents")
    p = run("convert", bad, "-o", out, ok=2, sub=True)
    assert p.stderr.startswith("msc: error: ")
    assert out.read_text() == "previous contents"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["bad.onnx", "out.onnx"]


def test_convert_check_mismatch_exits_1_and_writes_nothing(models, tmp_path):
    # A zero tolerance cannot be met by two different runtimes' float sums: a mismatch.
    out = tmp_path / "strict.onnx"
    p = run("convert", models["small_cnn"], "-o", out, "--rtol", "0", "--atol", "0", ok=None)
    if p.returncode == 0:
        pytest.skip("the two runtimes agree bit for bit here; no mismatch to test")
    assert p.returncode == 1
    assert "DO NOT match" in p.stdout and "nothing written" in p.stdout
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------ diff
def _variant(src: Path, dst: Path, edit) -> Path:
    g = msc.load(src)
    edit(g)
    msc.save(g, dst)
    return dst


def test_diff_equal_and_changed(models, tmp_path):
    p = run("diff", models["small_cnn"], models["small_cnn"])
    assert "structurally equal: yes" in p.stdout

    def edit(g):
        w = g.weights["classifier.weight"]
        w.set_data(np.asarray(w.numpy()) * 2)

    v2 = _variant(models["small_cnn"], tmp_path / "v2", edit)
    p = run("diff", models["small_cnn"], v2, ok=1)
    assert "@classifier.weight: values differ" in p.stdout
    j = json.loads(run("diff", models["small_cnn"], v2, "--json", ok=1).stdout)
    assert not j["equal"] and len(j["changed"]) == 1 and j["changed"][0]["op"] == "linear"


def test_diff_across_formats(models, tmp_path):
    run("convert", models["foreign.onnx"], "-o", tmp_path / "g", "--to", "msc", "-q")
    p = run("diff", models["foreign.onnx"], tmp_path / "g", ok=None)
    assert p.returncode in (0, 1)
    j = json.loads(run("diff", models["foreign.onnx"], tmp_path / "g", "--json", ok=None).stdout)
    assert len(j["matched"]) == 9 and not j["removed"]


# ------------------------------------------------------------------------------ verify
def test_verify_match_and_npz_inputs(models, tmp_path):
    run("convert", models["foreign.onnx"], "-o", tmp_path / "g", "--to", "msc", "-q")
    p = run("verify", models["foreign.onnx"], tmp_path / "g")
    assert "result: match" in p.stdout and "seed 0" in p.stdout
    np.savez(tmp_path / "in.npz", image=np.ones((3, 3, 16, 16), np.float32))
    p = run("verify", models["foreign.onnx"], tmp_path / "g", "--inputs", tmp_path / "in.npz")
    assert "image float32[3, 3, 16, 16]" in p.stdout
    np.savez(tmp_path / "wrong.npz", other=np.ones((1,), np.float32))
    p = run(
        "verify", models["foreign.onnx"], tmp_path / "g", "--inputs", tmp_path / "wrong.npz", ok=2
    )
    assert "no array for input 'image'" in p.stderr


def test_verify_names_the_first_divergent_node(models, tmp_path):
    def edit(g):
        # Perturb the batch norm's running mean: everything after features.1 diverges.
        w = g.weights["features.1.running_mean"]
        w.set_data(np.asarray(w.numpy()) + 1.0)

    bad = _variant(models["small_cnn"], tmp_path / "bad", edit)
    p = run("verify", models["small_cnn"], bad, ok=1, sub=True)
    assert "first divergence: node 'features.1' (batch_norm)" in p.stdout
    assert "result: MISMATCH" in p.stdout
    j = json.loads(run("verify", models["small_cnn"], bad, "--json", ok=1).stdout)
    assert j["divergence"]["node"] == "features.1" and j["divergence"]["agreeing_before"] == 1


@needs_torch_frontend
def test_verify_pt2_against_broken_onnx_names_module(models, tmp_path):
    import codegen.onnx
    from msc.analysis.model import load_model

    src = load_model(models["cnn.pt2"]).graph
    w = src.weights["features.4.weight"]
    w.set_data(np.asarray(w.numpy()) * 1.5)
    codegen.onnx.save(src, tmp_path / "broken.onnx")
    p = run("verify", models["cnn.pt2"], tmp_path / "broken.onnx", ok=1)
    assert "first divergence" in p.stdout and "module 'features.4'" in p.stdout


# ------------------------------------------------------------------------------ render
@pytest.mark.parametrize("suffix", [".dot", ".html", ".svg"])
def test_render(models, tmp_path, suffix):
    if suffix == ".svg" and not __import__("shutil").which("dot"):
        pytest.skip("graphviz `dot` is not installed (apt-get install graphviz)")
    out = tmp_path / f"g{suffix}"
    p = run("render", models["foreign.onnx"], "-o", out)
    assert out.is_file() and "wrote" in p.stdout
    text = out.read_text()
    assert "/body/conv/Conv" in text and "f32[N, 16, 8, 8]" in text


# ------------------------------------------------------------------------------ errors
def _unsupported_onnx(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="ok"),
        helper.make_node("FancyOp", ["a"], ["b"], name="first", domain="com.example"),
        helper.make_node("FancyOp", ["b"], ["y"], name="second", domain="com.example"),
    ]
    g = helper.make_graph(
        nodes,
        "u",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    m = helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
    )
    onnx.save(m, path)
    return path


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["inspect", "{d}/missing.onnx"], "no such file or directory"),
        (["inspect", "{d}/corrupt.onnx"], "corrupt.onnx"),
        (["inspect", "{d}/corrupt.pt2"], "corrupt.pt2"),
        (["inspect", "{d}/plain.txt"], "unknown model format"),
        (["inspect", "{d}/emptydir"], "neither graph.msc"),
        (["inspect", "{d}/unsupported.onnx"], "FancyOp"),
        (["inspect", "{foreign}", "--input-shape", "image=a,b"], "dims must be integers"),
        (["inspect", "{foreign}", "--input-shape", "image=1,4,16,16"], "fixed at 3"),
        (["render", "{foreign}", "-o", "{d}/g.png"], ".svg, .dot or .html"),
        (["convert", "{foreign}", "-o", "{d}/x.msc", "--opset", "13"], "--opset applies"),
        (["convert", "{d}/nomod.py:Net", "-o", "{d}/x.onnx"], "no such file"),
        (["verify", "{foreign}", "{d}/missing"], "no such file"),
    ],
)
def test_user_errors_exit_2_with_one_clear_line(models, tmp_path, argv, needle):
    (tmp_path / "corrupt.onnx").write_bytes(b"\x12\x34 not onnx at all \xff" * 5)
    (tmp_path / "corrupt.pt2").write_bytes(b"PK\x03\x04 truncated zip")
    (tmp_path / "plain.txt").write_text("hello")
    (tmp_path / "emptydir").mkdir()
    _unsupported_onnx(tmp_path / "unsupported.onnx")
    args = [a.format(d=tmp_path, foreign=models["foreign.onnx"]) for a in argv]
    p = run(*args, ok=2)
    first = p.stderr.splitlines()[0]
    assert first.startswith("msc: error: ") and needle in p.stderr, p.stderr
    if "unsupported" in argv[1]:
        # Every unsupported node is listed, not just the first.
        assert "'first'" in p.stderr and "'second'" in p.stderr


def test_bad_arguments_exit_2():
    p = run("convert", "x.onnx", ok=2)  # -o is required
    assert "required" in p.stderr
    p = run("frobnicate", ok=2)
    assert "invalid choice" in p.stderr


# ------------------------------------------------------------------------------ demo
def test_demo_runs():
    p = run("demo", sub=True)
    assert p.stdout.strip()
    if _have("codegen.torch", "save") and _have("msc.frontend.torch", "from_torch"):
        assert "result: every conversion verified" in p.stdout


# ------------------------------------------------------------------------------ frontend models
@needs_torch_frontend
@pytest.mark.parametrize("name", ["small_cnn", "transformer", "gpt2"])
def test_every_command_on_frontend_test_models(name, tmp_path):
    """Models from the frontend tests (tests/torch_cases.py), as .pt2 and as .onnx. (In
    process: a Hugging Face .pt2 loads only where transformers registered its output classes.)"""
    import torch

    from tests.torch_cases import build_model

    module, args, dyn = build_model(name)
    pt2, onnx_path = tmp_path / f"{name}.pt2", tmp_path / f"{name}.onnx"
    torch.export.save(torch.export.export(module, args, dynamic_shapes=dyn), pt2)
    p = run("convert", pt2, "-o", onnx_path)
    assert "check: outputs match" in p.stdout
    assert "result: match" in run("verify", pt2, onnx_path).stdout
    d = json.loads(run("diff", pt2, onnx_path, "--json", ok=None).stdout)
    if name != "gpt2":  # gpt2's attention and indexing are decomposed for ONNX
        assert not d["removed"], d["removed"]  # every source node has a counterpart
    ja = json.loads(run("inspect", pt2, "--json").stdout)
    jb = json.loads(run("inspect", onnx_path, "--json").stdout)
    # Float parameters agree with the file written node for node (BatchNorm's int64
    # num_batches_tracked buffers do not reach ONNX; for gpt2 the ONNX codegen folds the
    # position embedding and a tied weight's transpose). The optimized file's differ by design:
    # its float constants are initializers, BatchNorm's are folded into the conv.
    plain = tmp_path / f"{name}.plain.onnx"
    run("convert", pt2, "-o", plain, "--no-optimize", "--no-check")
    jp = json.loads(run("inspect", plain, "--json").stdout)
    if name != "gpt2":
        assert ja["params_by_dtype"]["f32"] == jp["params_by_dtype"]["f32"]
    assert ja["macs"] == jb["macs"]  # a decomposition must not change the arithmetic
    assert [i["dtype"] for i in ja["inputs"]] == [i["dtype"] for i in jb["inputs"]]
    for src in (pt2, onnx_path):
        run("render", src, "-o", tmp_path / "g.html")
        assert "<svg" in (tmp_path / "g.html").read_text()
