"""Hostile TVMScript files and codegen.relax directories: read, never run.

TVM's parser evaluates a TVMScript file's decorators, annotations, body expressions, class
body and shape strings as Python. Each payload below creates a marker file if any of it runs;
msc must refuse it (exit 2, one ``msc: error:`` line naming the file and line, no traceback,
no TVM log lines) on every surface that reads models: inspect, verify, diff, convert, render,
batch and the Model Explorer adapter. Before msc checked the syntax tree, every one of them
created its marker. Relax directories with hostile ``msc.relax.params`` metadata are refused
the same way (they were TypeError tracebacks).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

tvm = pytest.importorskip("tvm", reason="apache-tvm (the tvm extra) reads TVMScript")

import msc  # noqa: E402
from msc.errors import MscError  # noqa: E402
from msc.frontend.relax.script import ScriptRefused, check_script  # noqa: E402
from msc.io import safetensors as st  # noqa: E402
from tests.analysis.test_cli import run  # noqa: E402
from tests.security import hang_guard  # noqa: E402
from tests.security.test_security_inputs import _msc, _one_error  # noqa: E402

HEAD = "# from tvm.script import ir as I\n# from tvm.script import relax as R\n\n"
SIG = 'x: R.Tensor((2, 3), dtype="float32")'
RET = 'R.Tensor((2, 3), dtype="float32")'


def _module(
    *, deco="@R.function", sig=SIG, ret=RET, attr="", body="", cls="", top="", mod="@I.ir_module"
) -> str:
    return (
        HEAD
        + top
        + f"{mod}\nclass Module:\n"
        + (f"    {cls}\n" if cls else "")
        + f"    {deco}\n    def main({sig}) -> {ret}:\n"
        + f"        R.func_attr({{{attr}}})\n"
        + (f"        {body}\n" if body else "")
        + "        with R.dataflow():\n"
        + f"            gv: {RET} = R.nn.relu(x)\n"
        + "            R.output(gv)\n"
        + "        return gv\n"
    )


RUN = "open({m}, 'w').close()"
# name -> a TVMScript module whose payload writes the marker {m} when TVM's parser runs it
# (test_every_payload_runs_when_trusted shows that each one does).
PAYLOADS: dict[str, str] = {
    "type_annotation": _module(sig=f'x: R.Tensor((2, 3), dtype={RUN} or "float32")'),
    "return_annotation": _module(ret=f"({RUN} or {RET})"),
    "body_expression": _module(body=RUN),
    "body_assignment": _module(body=f"y = {RUN}"),
    "class_body": _module(cls=RUN),
    "class_body_assignment": _module(cls=f"f = {RUN}"),
    "lambda_in_func_attr": _module(attr=f'"k": (lambda: {RUN})()'),
    "decorator": _module(deco=f"@({RUN} or R.function)"),
    # The decorator runs before TVM finds that the rest does not parse (R.no_such_op).
    "decorator_then_parse_error": _module(deco=f"@({RUN} or R.function)").replace(
        "R.nn.relu", "R.no_such_op"
    ),
    "shape_string": _module(sig=f'x: R.Tensor(("""{RUN} or 2""", 3), dtype="float32")'),
    "through_a_tvm_module": _module(body="y = R.ir.builtins.open({m}, 'w').close()"),
    "dunder_attribute": _module(
        body="y = R.nn.relu.__globals__['__builtins__']['open']({m}, 'w').close()"
    ),
    "type_var_argument": _module(top=f"n = TypeVar({RUN} or 'n')\n"),
    "with_statement": _module(body=f"with {RUN}:\n            pass"),
    "comprehension": _module(body=f"y = [{RUN} for k in (1,)]"),
    "f_string": _module(body='y = f"{' + RUN + '}"'),
    "float_call": _module(body=f"y = float({RUN} or '1')"),
    "prim_func_body": _module(
        cls=f"@T.prim_func\n    def f(A: T.handle):\n        T.evaluate({RUN})\n"
    ),  # fmt: skip
}
# Constructs TVM's parser happens not to evaluate (or refuses itself), refused all the same:
# the subset is what msc reads, not what this TVM version happens to skip.
REFUSED: dict[str, str] = {
    "builtins_name": _module(body="__builtins__['open']('x', 'w')"),
    "through_tvm_package": _module(body="y = R.ir.tvm.get_global_func('x')"),
    "class_decorator": _module(mod=f"@({RUN} or I.ir_module)"),
    "base_class": _module().replace("class Module:", f"class Module({RUN} or object):"),
    "default_argument": _module(sig=f"{SIG} = {RUN}"),
    "top_level_import": "import os\n" + _module(),
    "top_level_statement": _module(top=f"{RUN}\n"),
    "method_of_a_value": _module(body="y = x.astype('float16')"),
    "assign_to_namespace": _module(body="R = 1"),
    "star_kwargs": _module(body="y = R.nn.relu(**{'data': x})"),
    "parameter_shadows_the_module": _module(sig=f"Module: {RET}, {SIG}", body="Module.show()"),
    "assignment_shadows_the_module": _module(body="Module = x"),
}


@pytest.fixture()
def payload(tmp_path, request):
    name = request.param
    mark = tmp_path / "MARKER"
    f = tmp_path / f"{name}.py"
    f.write_text(PAYLOADS[name].replace("{m}", repr(str(mark))), encoding="utf-8")
    return f, mark


def _refused(p, mark: Path, f: Path) -> None:
    _one_error(p, str(f))
    assert not mark.exists(), "the payload ran"


@pytest.mark.parametrize("payload", sorted(PAYLOADS), indirect=True)
def test_tvmscript_payload_never_runs_on_inspect(payload) -> None:
    f, mark = payload
    with hang_guard("msc inspect"):
        p = run("inspect", f, ok=2)
    _refused(p, mark, f)


def test_the_base_module_is_read(tmp_path) -> None:
    """The payload-free module reads: the refusals above are the payloads', not the frame's."""
    f = tmp_path / "base.py"
    f.write_text(_module(), encoding="utf-8")
    p = run("inspect", f)
    assert "relu x1" in p.stdout


ON_EVERY_SURFACE = ("body_expression", "decorator", "shape_string")


@pytest.mark.parametrize("payload", ON_EVERY_SURFACE, indirect=True)
def test_payload_never_runs_on_verify_diff_convert_render(payload, tmp_path) -> None:
    f, mark = payload
    base = tmp_path / "base.py"
    base.write_text(_module(), encoding="utf-8")
    for argv in (
        ("verify", base, f),
        ("verify", f, base),
        ("diff", base, f),
        ("convert", f, "-o", tmp_path / "out.onnx"),
        ("convert", f, "-o", tmp_path / "out_relax", "--to", "relax"),
        ("render", f, "-o", tmp_path / "g.html"),
    ):
        _refused(run(*argv, ok=2), mark, f)
    assert not (tmp_path / "out.onnx").exists() and not (tmp_path / "out_relax").exists()


@pytest.mark.parametrize("payload", ["body_expression"], indirect=True)
def test_payload_in_a_relax_directory_never_runs(payload, tmp_path) -> None:
    f, mark = payload
    d = _relax_dir(tmp_path / "d")
    (d / "module.py").write_text(f.read_text(), encoding="utf-8")
    p = run("inspect", d, ok=2)
    _one_error(p, "module.py:")
    assert not mark.exists()


@pytest.mark.parametrize("payload", ["decorator"], indirect=True)
def test_payload_never_runs_in_the_explorer_adapter(payload) -> None:
    pytest.importorskip("model_explorer", reason="ai-edge-model-explorer is not installed")
    from msc.explorer.main import MscAdapter

    f, mark = payload
    with pytest.raises(MscError, match=f"{f.name}:"):
        MscAdapter().convert(str(f), {})
    assert not mark.exists()


@pytest.mark.parametrize("payload", ["class_body"], indirect=True)
def test_payload_never_runs_in_a_batch(payload, tmp_path) -> None:
    f, mark = payload
    manifest = tmp_path / "jobs.json"
    manifest.write_text(json.dumps({"models": [{"model": f.name, "task": "inspect"}]}))
    p = run("batch", manifest, "-o", tmp_path / "out", "--json", ok=None)
    report = json.loads(p.stdout)
    entry = report["models"][0]
    assert entry["status"] == "error" and f"{f.name}:" in entry["message"], entry
    assert not mark.exists()


@pytest.mark.parametrize("payload", sorted(PAYLOADS), indirect=True)
def test_every_payload_runs_when_trusted(payload) -> None:
    """--trust-code hands the file to TVM's parser as it is, which runs each payload: what the
    tests above refuse is live code, not a construct TVM would skip anyway."""
    f, mark = payload
    run("inspect", f, "--trust-code", ok=None)
    assert mark.exists()


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_constructs_outside_the_subset_are_refused_with_their_line(name) -> None:
    text = REFUSED[name].replace("{m}", "'x'")
    with pytest.raises(ScriptRefused, match=r"^f\.py:\d+: "):
        check_script(text, "f.py")


def test_subprocess_errors_are_one_line_without_tvm_noise(tmp_path) -> None:
    """A refused payload, and a file inside the subset that TVM's parser then refuses (it
    leaves a half-built function whose BlockBuilder warned on stderr when freed), each give
    one line and nothing from TVM."""
    mark = tmp_path / "MARKER"
    f = tmp_path / "p.py"
    f.write_text(
        PAYLOADS["decorator_then_parse_error"].replace("{m}", repr(str(mark))), encoding="utf-8"
    )
    g = tmp_path / "g.py"
    g.write_text(_module().replace("R.nn.relu(x)", 'R.add(x, R.const("-inf", "float32"))'))
    for path in (f, g):
        p = _msc("inspect", str(path))
        _one_error(p, f"{path}")
        assert len(p.stderr.splitlines()) == 1, p.stderr
    assert not mark.exists()


def test_check_script_accepts_what_codegen_relax_writes() -> None:
    import codegen.relax as cr
    from msc.examples import small_cnn_graph

    text = cr.to_script(small_cnn_graph())
    assert check_script(text, "cnn") == text


# ---------------------------------------------------------------------- relax directories
def _relax_dir(d: Path) -> Path:
    import codegen.relax as cr
    from msc.examples import small_cnn_graph

    cr.save(small_cnn_graph(), d)
    return d


def _with_params(d: Path, meta: dict | None, tensors: dict | None = None) -> None:
    """Rewrite model.safetensors with ``meta`` as its metadata (None: none at all)."""
    f = d / "model.safetensors"
    arrays = tensors if tensors is not None else st.read(f, mmap=False)
    st.write(f, {k: np.array(v) for k, v in arrays.items()}, metadata=meta)


HOSTILE_PARAMS = {
    "null": "null",
    "number": "5",
    "nested_list": '[["conv.weight"]]',
    "object": '{"a": 1}',
    "not_json": "[conv.weight",
    "numbers_in_list": "[1, 2]",
    "too_few": "[]",
    "unknown_name": '["no_such_tensor"]',
}


@pytest.mark.parametrize("case", sorted(HOSTILE_PARAMS) + ["no_metadata", "wrong_shape"])
def test_relax_directory_with_hostile_params_is_one_error(tmp_path, case) -> None:
    d = _relax_dir(tmp_path / "d")
    meta_of = st.read_header(d / "model.safetensors")[0]["__metadata__"]
    if case == "no_metadata":
        _with_params(d, None)
    elif case == "wrong_shape":
        arrays = st.read(d / "model.safetensors", mmap=False)
        first = json.loads(meta_of["msc.relax.params"])[0]
        arrays[first] = np.zeros((7,), np.float32)
        _with_params(d, meta_of, arrays)
    else:
        _with_params(d, dict(meta_of, **{"msc.relax.params": HOSTILE_PARAMS[case]}))
    for argv in (("inspect", d), ("verify", d, d)):
        p = run(*argv, ok=2)
        _one_error(p, "model.safetensors")


def test_relax_directory_reads_back() -> None:
    """The directories above are hostile only by their params: unchanged, they read."""
    import tempfile

    with tempfile.TemporaryDirectory() as t:
        d = _relax_dir(Path(t) / "d")
        g = msc.analysis.model.load_model(d).graph
        assert g.weights


def test_deeply_nested_tvmscript_is_one_error(tmp_path) -> None:
    f = tmp_path / "deep.py"
    f.write_text(_module(body="y = " + "+".join(["1"] * 50000)), encoding="utf-8")
    with hang_guard("msc inspect"):
        p = run("inspect", f, ok=2)
    _one_error(p, str(f))
