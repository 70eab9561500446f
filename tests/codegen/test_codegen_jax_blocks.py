"""codegen.jax writes the source's module hierarchy (issues 30, 33): one pure function per block
type, named after the source type, called once per instance with its module's params subtree;
a run of same-type layers a Python ``for`` loop over the params list; ``flat=True`` (and the
CLI's ``--flat``) the one flat ``forward``. A tiny BERT and the ResNet-style CNN of the
hierarchy tests, exported by torch.export, run under jax.jit against eager PyTorch (atol and
rtol 1e-4, as the other JAX model tests)."""

from __future__ import annotations

import ast
import importlib.util

import numpy as np
import pytest

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax", reason="the jax extra (jax, jaxlib) is not installed")
pytest.importorskip("transformers", reason="tiny transformers model configs")

import codegen.jax  # noqa: E402
import msc  # noqa: E402
from codegen.jax.blocks import snake, tree_of  # noqa: E402
from tests.codegen.test_torch_hierarchy_models import MODELS  # noqa: E402

# model: (function -> instances it is called for, (function, params list, slice) of its loop)
EXPECTED = {
    "bert": (
        {"bert_layer": 2, "bert_self_attention": 2, "bert_embeddings": 1, "bert_pooler": 1},
        ("bert_layer", "params['layer']", ""),
    ),
    # layer1: a first Bottleneck with a downsample, then two alike (the loop); layer2's two
    # are other shapes (stride 2, wider): each its own function
    "resnet": (
        {"bottleneck": 1, "bottleneck_1": 2, "bottleneck_2": 1},
        ("bottleneck_1", "params['layer1']", "[1:]"),
    ),
}  # fmt: skip


@pytest.fixture(scope="module", params=list(EXPECTED))
def case(request):
    name = request.param
    model, inputs = MODELS[name][0]()
    g = msc.from_torch(model, (), example_kwargs=inputs)
    return name, model, inputs, g


def _defs(src: str) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef)}


def _eager(model, inputs) -> list[np.ndarray]:
    with torch.no_grad():
        ref = model(**inputs)
    ref = [ref] if torch.is_tensor(ref) else [r for r in ref.values() if torch.is_tensor(r)]
    return [r.numpy() for r in ref]


def test_one_function_per_block_type_called_per_instance(case):
    name, model, inputs, g = case
    counts, _ = EXPECTED[name]
    fn, params = codegen.jax.to_function(g)
    defs = _defs(fn.msc_source)
    assert set(counts) <= set(defs)
    for f in defs.values():  # one definition each; none longer than a screen
        assert f.end_lineno - f.lineno < 60, f.name  # type: ignore[operator]
    # each function runs once per instance of its block type: count the calls on a run
    called: dict[str, int] = {}

    def counting(f, key):
        def wrapped(*a):
            called[key] = called.get(key, 0) + 1
            return f(*a)

        return wrapped

    for f in counts:
        fn.__globals__[f] = counting(fn.__globals__[f], f)
    fn(params, *[np.asarray(v) for v in inputs.values()])
    assert {f: called.get(f, 0) for f in counts} == counts


def test_a_run_of_layers_is_a_for_loop_over_the_params_list(case):
    name, _, _, g = case
    f, params_list, slice_ = EXPECTED[name][1]
    src = codegen.jax.generate(g)
    model_defs = [d for n, d in _defs(src).items() if n not in ("nest", "_lists")]
    loops = [n for d in model_defs for n in ast.walk(d) if isinstance(n, ast.For)]
    assert len(loops) == 1
    loop = loops[0]
    assert ast.unparse(loop.iter).replace('"', "'") == params_list + slice_
    (st,) = loop.body
    assert isinstance(st, ast.Assign) and isinstance(st.value, ast.Call)
    assert ast.unparse(st.value.func) == f
    # the loop carries the call's output into its next call, the layer's params its own
    assert ast.unparse(st.value.args[0]) == ast.unparse(loop.target)
    assert ast.unparse(st.targets[0]) in [ast.unparse(a) for a in st.value.args[1:]]
    # and the function names the parameter it carries as the source's layers do
    carried = [ast.unparse(a) for a in st.value.args].index(ast.unparse(st.targets[0]))
    want = "hidden_states" if name == "bert" else "x"
    assert _defs(src)[f].args.args[carried].arg == want


def test_values_are_named_by_role(case):
    """A call's result is named after its module, a one-argument function's argument is
    ``x``, a model output keeps its name; no value is named after an op counter where the
    module says what it is (issue 30: names from the source)."""
    name, _, _, g = case
    defs = _defs(codegen.jax.generate(g))
    if name == "bert":
        calls = {
            ast.unparse(st.value.func): ast.unparse(st.targets[0])
            for st in defs["bert_layer"].body
            if isinstance(st, ast.Assign) and isinstance(st.value, ast.Call)
        }
        assert calls == {
            "bert_attention": "attention_output",
            "bert_intermediate": "intermediate",
            "bert_output": "output",
        }
        assert [a.arg for a in defs["bert_intermediate"].args.args] == ["params", "x"]
        ret = defs["forward"].body[-1].value
        assert ast.unparse(ret) == "(last_hidden_state, pooler_output)"
    else:
        assert [a.arg for a in defs["bottleneck"].args.args] == ["params", "x"]


def test_float32_literals_print_as_the_shortest_decimal():
    """A float32 constant prints as the shortest decimal that rounds back to it (``1e-06``,
    not ``9.999999974752427e-07``) and the code computes the same float32."""
    from codegen.jax.core import literal

    eps = np.float32(1e-6)
    src = literal(np.asarray(eps))
    assert src == "jnp.asarray(1e-06, dtype=jnp.float32)"
    assert np.float32(float(src.split("(")[1].split(",")[0])) == eps
    third = np.asarray([1 / 3, 0.1], dtype=np.float32)
    assert literal(third) == "jnp.asarray([0.33333334, 0.1], dtype=jnp.float32)"
    # float64 keeps every digit it needs
    assert literal(np.asarray(1 / 3)) == "jnp.asarray(0.3333333333333333, dtype=jnp.float64)"


def test_outputs_agree_with_eager_and_params_nest_by_module_path(case):
    name, model, inputs, g = case
    fn, params = codegen.jax.to_function(g)
    got = jax.tree_util.tree_leaves(jax.jit(fn)(params, *[np.asarray(v) for v in inputs.values()]))
    ref = _eager(model, inputs)
    assert len(got) == len(ref)
    for a, r in zip(got, ref):
        np.testing.assert_allclose(np.asarray(a), r, atol=1e-4, rtol=1e-4)
    # the tree by module path, numbered children a list; its leaves the graph's weights
    names = set(codegen.jax.flat_params(params))
    assert names == set(g.weights) >= {k for k, _ in model.named_parameters()}
    layers = params["encoder"]["layer"] if name == "bert" else params["layer1"]
    assert isinstance(layers, list) and len(layers) == (2 if name == "bert" else 3)


def test_flat_gives_one_forward_over_a_flat_params_dict(case):
    name, model, inputs, g = case
    fn, params = codegen.jax.to_function(g, flat=True)
    assert set(_defs(fn.msc_source)) == {"load_params", "forward"}
    assert not any(isinstance(n, ast.For) for n in ast.walk(ast.parse(fn.msc_source)))
    assert set(params) == set(g.weights)
    got = jax.tree_util.tree_leaves(jax.jit(fn)(params, *[np.asarray(v) for v in inputs.values()]))
    for a, r in zip(got, _eager(model, inputs)):
        np.testing.assert_allclose(np.asarray(a), r, atol=1e-4, rtol=1e-4)


def test_saved_weights_keep_their_names_and_load_as_the_tree(case, tmp_path):
    from safetensors.numpy import load_file

    name, model, inputs, g = case
    out = codegen.jax.save(g, tmp_path / "m")
    assert set(load_file(str(out / codegen.jax.WEIGHTS_FILE))) == set(g.weights)
    spec = importlib.util.spec_from_file_location(f"jaxblocks_{name}", out / codegen.jax.MODEL_FILE)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    params = mod.load_params()
    got = jax.tree_util.tree_leaves(mod.forward(params, *[np.asarray(v) for v in inputs.values()]))
    for a, r in zip(got, _eager(model, inputs)):
        np.testing.assert_allclose(np.asarray(a), r, atol=1e-4, rtol=1e-4)


def test_cli_writes_blocks_and_flat_with_the_check_passing(tmp_path):
    import contextlib
    import io

    from msc.cli import main

    model, inputs = MODELS["resnet"][0]()
    ep = torch.export.export(model, (), inputs)
    torch.export.save(ep, tmp_path / "m.pt2")
    srcs = {}
    for extra in ([], ["--flat"]):
        out = tmp_path / ("flat" if extra else "blocks")
        said = io.StringIO()
        with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
            try:
                rc = main(
                    ["convert", str(tmp_path / "m.pt2"), "--to", "jax", "-o", str(out), *extra]
                )
            except SystemExit as e:
                rc = int(e.code or 0)
        assert rc == 0 and "check: outputs match" in said.getvalue(), said.getvalue()
        srcs[bool(extra)] = (out / codegen.jax.MODEL_FILE).read_text()
    assert "def bottleneck(params, " in srcs[False] and "for layer in " in srcs[False]
    assert set(_defs(srcs[True])) == {"load_params", "forward"}
    assert not any(isinstance(n, ast.For) for n in ast.walk(_defs(srcs[True])["forward"]))


def test_names_and_trees():
    assert snake("BertLayer") == "bert_layer" and snake("GPT2Block") == "gpt2_block"
    assert snake("LlamaRMSNorm") == "llama_rms_norm"
    assert tree_of(["h.0.w", "h.1.w", "b"]) == {"h": [{"w": "h.0.w"}, {"w": "h.1.w"}], "b": "b"}
    assert tree_of(["a.0.w", "a.2.w"]) == {"a": {"0": {"w": "a.0.w"}, "2": {"w": "a.2.w"}}}
    # names nest cannot give back: the flat form
    assert tree_of(["a", "a.b"]) is None
    assert tree_of(["a.b", "a"]) is None and tree_of(["x.01", "x.1"]) is not None
