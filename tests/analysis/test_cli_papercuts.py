"""Plain, early errors for options and outputs that do not make sense (issue: paper cuts).

Before: ``-o out.mlmodel`` (a suffix no target writes) wrote a PyTorch folder by that name,
``-o`` equal to the source overwrote it without a word, and ``inspect --dynamic`` on an ONNX
file was ignored silently.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from msc.errors import MscError
from tests.security import run_cli


@pytest.fixture
def model(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    m = helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    m.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    return path


def _error(code: int, err: str, *words: str) -> None:
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("msc: error: "), err
    for w in words:
        assert w in lines[0], err


def test_unknown_output_suffix_is_refused(model, tmp_path):
    code, _, err = run_cli("convert", str(model), "-o", str(tmp_path / "out.mlmodel"))
    _error(code, err, ".mlmodel", "--to")
    assert not (tmp_path / "out.mlmodel").exists()
    code, out, err = run_cli(
        "convert", str(model), "-o", str(tmp_path / "out.mlmodel"), "--to", "torch"
    )
    assert code == 0, out + err  # said explicitly: a PyTorch directory by that name


def test_output_equal_to_the_source_needs_force(model):
    before = model.read_bytes()
    code, _, err = run_cli("convert", str(model), "-o", str(model))
    _error(code, err, "--force")
    assert model.read_bytes() == before
    code, out, err = run_cli("convert", str(model), "-o", str(model), "--force")
    assert code == 0, out + err


def test_dynamic_that_does_not_apply_is_an_error(model):
    code, _, err = run_cli("inspect", str(model), "--dynamic", "x:0=batch")
    _error(code, err, "--dynamic")


@pytest.mark.parametrize("item", ["x:0=batch{1..64", "x=batch", "x:a=batch", "x:0=1batch"])
def test_malformed_dynamic_is_an_error(model, item):
    code, _, err = run_cli("inspect", str(model), "--dynamic", item)
    _error(code, err, "--dynamic")


# ---------------------------------------------------------------- opset, --dynamic, logs, verify
STATIC = """\
import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(7, 3)

    def forward(self, x):
        return self.fc(x.reshape(1, -1))
"""


@pytest.fixture
def static_pt2(tmp_path):
    torch = pytest.importorskip("torch")
    src = tmp_path / "static.py"
    src.write_text(STATIC)
    ns: dict = {}
    exec(compile(STATIC, str(src), "exec"), ns)
    path = tmp_path / "static.pt2"
    torch.export.save(torch.export.export(ns["M"]().eval(), (torch.randn(1, 7),)), path)
    return path


def test_opset_is_printed_with_why(model, tmp_path):
    # The opset was chosen silently; then the CLI wrote 20 where the API wrote 28. Now both
    # take codegen.onnx.choose_opset's, and say why.
    import json

    import msc
    from codegen.onnx import choose_opset

    want, why = choose_opset(msc.from_onnx(str(model)))
    code, out, err = run_cli("convert", str(model), "-o", str(tmp_path / "a.onnx"))
    assert code == 0, out + err
    assert f"onnx opset {want} ({why})" in out, out
    assert onnx.load(tmp_path / "a.onnx").opset_import[0].version == want
    code, out, err = run_cli("convert", str(model), "-o", str(tmp_path / "j.onnx"), "--json")
    assert code == 0, out + err
    report = json.loads(out)
    assert (report["opset"], report["opset_reason"]) == (want, why)
    code, out, err = run_cli("convert", str(model), "-o", str(tmp_path / "b.onnx"), "--opset", "18")
    assert code == 0 and "onnx opset 18 (--opset)" in out, out + err


def test_dynamic_on_a_static_program_is_a_plain_early_error(static_pt2, tmp_path):
    # It failed late, in torch.export of the written module, with a temporary path in it.
    out_dir = tmp_path / "out"
    code, _, err = run_cli("convert", str(static_pt2), "-o", str(out_dir), "--dynamic", "x:0=b")
    _error(code, err, "--dynamic", "fixed in the program", "dynamic_shapes")
    assert ".out." not in err and not out_dir.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_torch_logging_is_muted_on_an_expected_failure(static_pt2, tmp_path):
    # torch logged ~20 lines of a fake-tensor traceback before msc's one-line error. Here: a
    # generated module whose batch dim was made symbolic although its reshape fixes it (what
    # --no-check wrote before --dynamic was checked). torch's log handler writes to the
    # process's stderr, so this runs the command as a user does.
    import codegen.torch
    from msc.analysis.convert import _adjust
    from msc.analysis.model import load_model

    out = tmp_path / "gen"
    codegen.torch.save(_adjust(load_model(static_pt2).graph, (), ["x:0=b"]), out)
    root = Path(__file__).resolve().parents[2]
    p = subprocess.run(
        [sys.executable, "-m", "msc", "inspect", str(out)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [ln for ln in p.stderr.splitlines() if "fake_tensor" in ln or "Traceback" in ln]
    assert p.returncode == 2 and not lines, p.stderr
    assert "torch.export failed" in p.stderr, p.stderr


def test_verify_names_different_input_signatures(model, static_pt2):
    # It ended in torch's or onnxruntime's error about the other model's input (AssertionError).
    code, _, err = run_cli("verify", str(static_pt2), str(model))
    assert code == 2
    assert err.startswith("msc: error: A and B have different input signatures"), err
    assert "A takes x f32[1, 7]" in err and "B takes x f32[2, 3]" in err


# ---------------------------------------------------------------- issue #29, item 13
def test_inspect_lists_every_installed_codegen(model):
    # A registry lookup skipped onnx (a module, not its registry) and never tried relax.
    import msc
    from msc.analysis.inspect import target_support

    want = ["torch", "onnx"] + (["relax"] if _imports("codegen.relax") else [])
    g = msc.analysis.load_model(model).graph
    assert list(target_support(g)) == want and not any(target_support(g).values())
    code, out, _ = run_cli("inspect", str(model))
    assert code == 0 and all(f"  {t}: every op" in out for t in want), out
    # A custom node: ONNX writes it back in its domain; the others cannot say they can.
    g = msc.from_text(
        "msc format 1, ops 1\ngraph g {\n  input %x: f32[2]\n"
        '  %y: f32[2] = "com.example::Fancy@1"(%x)\n  output %y\n}\n'
    )
    support = target_support(g)
    assert support["onnx"] == [] and support["torch"] == ["com.example::Fancy@1"], support


def _imports(name: str) -> bool:
    import importlib

    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def test_help_and_batch_know_relax(tmp_path, model):
    from msc.analysis.batch import _plan
    from msc.analysis.convert import TARGETS
    from msc.cli import TARGETS as CLI_TARGETS
    from msc.cli import build_parser

    assert CLI_TARGETS == TARGETS
    assert "Relax" in build_parser().format_help()
    args = build_parser().parse_args(["batch", str(model.parent), "--to", "relax"])
    assert args.to == "relax"
    entries = [
        {"model": "m.onnx", "to": "relax"},
        {"model": "m.onnx", "name": "b", "task": "inspect", "trust_pickle": True},
    ]
    _, _, jobs, _ = _plan({"models": entries}, tmp_path / "out", {})
    assert jobs[0]["output"].endswith("m_relax") and jobs[0]["trust_pickle"] is False
    assert jobs[1]["trust_pickle"] is True
    with pytest.raises(MscError, match="trust_pickle is true or false"):
        _plan({"models": [{"model": "m.onnx", "trust_pickle": "yes"}]}, tmp_path / "o", {})


def test_the_unsupported_op_hint_is_spelled_for_the_command_line(tmp_path):
    path = tmp_path / "fancy.onnx"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    nodes = [helper.make_node("FancyOp", ["x"], ["y"], name="fancy", domain="com.example")]
    g = helper.make_graph(
        nodes, "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("com.example", 1)])  # fmt: skip
    m.ir_version = 8
    onnx.save(m, path)
    code, _, err = run_cli("inspect", str(path))
    assert code == 2 and "--custom-ops keep" in err and "custom_ops" not in err, err
    with pytest.raises(MscError, match="custom_ops='keep'"):  # the Python API's spelling
        import msc

        msc.from_onnx(path)


@pytest.mark.parametrize(
    "argv,message",
    [
        (["conver", "m.onnx"], "msc: error: argument COMMAND: invalid choice: 'conver' "),
        (["convert", "m.onnx", "-o", "x", "--to", "tor"], "msc: error: convert: argument --to"),
        (["convert", "m.onnx", "-o", "x", "--opst", "18"], "msc: error: convert: unrecognized"),
        (["--bogus"], "msc: error: unrecognized arguments: --bogus (see msc --help)"),
    ],
)
def test_a_mistyped_command_line_is_one_line_with_a_guess(argv, message):
    guess = {"conver": "convert", "tor": "torch", "--opst": "--opset", "--bogus": None}
    code, _, err = run_cli(*argv)
    _error(code, err)
    assert err.startswith(message) and "msc: error: msc" not in err, err
    word = next(guess[a] for a in argv if a in guess)
    assert (f"did you mean {word}?" in err) if word else "did you mean" not in err, err
