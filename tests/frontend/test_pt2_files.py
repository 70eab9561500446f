""".pt2 files as users save them (issue #29): ``torch.export.save`` of programs exported with
dynamic ``Dim``s, keyword arguments and transformers ``ModelOutput`` returns.

Each case is exported and saved here, read back without ``trust_pickle``, and run three ways
on inputs of another size than the export's: the original module (eager PyTorch, the
reference), the loaded program (torch's own run of what msc read) and msc's graph (through
codegen.torch); all agree within rtol 1e-4 / atol 1e-5. Before: every dynamic transformer was
refused (``a symbolic expression names 'Mul'``), a program with keyword arguments could not
run, and an unregistered output class could not be loaded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sympy
import torch
from torch import nn
from torch.export import Dim

from msc.analysis.model import flatten, from_torch_value, load_model, run_graph
from tests.torch_cases import MissingDependency, _transformers

RTOL, ATOL = 1e-4, 1e-5


@dataclasses.dataclass(frozen=True)
class Case:
    module: nn.Module
    args: tuple
    kwargs: dict
    dynamic: Any
    run_args: tuple  # inputs at another size, for the numeric check
    run_kwargs: dict
    inputs: list[str]  # the graph's input names
    outputs: list[str] | None = None  # the graph's output names, where the source names them


def _ids(b: int, s: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 64, (b, s), generator=torch.Generator().manual_seed(seed))


def _hf(model: Callable[[Any], nn.Module]) -> Case:
    """A tiny transformers model exported the usual way: ``(ids,)`` with ``attention_mask`` as
    a keyword, dynamic batch and sequence, returning its ModelOutput."""
    tf = _transformers()
    torch.manual_seed(0)
    m = model(tf).eval()
    batch, seq = Dim("batch", min=1, max=32), Dim("seq", min=2, max=60)
    mask = torch.ones(2, 8, dtype=torch.int64)
    run_mask = torch.ones(3, 5, dtype=torch.int64)
    run_mask[0, 3:] = 0
    return Case(
        m, (_ids(2, 8),), {"attention_mask": mask},
        {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}},
        (_ids(3, 5, 1),), {"attention_mask": run_mask},
        ["input_ids", "attention_mask"], ["logits"],
    )  # fmt: skip


def bert_mlm() -> Case:
    return _hf(lambda tf: tf.BertForMaskedLM(tf.BertConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64)))  # fmt: skip


def llama_clm() -> Case:
    return _hf(lambda tf: tf.LlamaForCausalLM(tf.LlamaConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=64, max_position_embeddings=64,
        use_cache=False)))  # fmt: skip


def gpt2_lm() -> Case:
    return _hf(lambda tf: tf.GPT2LMHeadModel(tf.GPT2Config(
        vocab_size=64, n_embd=32, n_layer=2, n_head=2, n_positions=64,
        use_cache=False)))  # fmt: skip


class _Cnn(nn.Module):
    """Strided convs, ceil-mode pools and a scale-factor resize on a dynamic H/W: FloorDiv,
    Max, TruncToInt and ToFloat in the sizes."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, stride=2)
        self.pool = nn.MaxPool2d(3, 2, ceil_mode=True)

    def forward(self, x: torch.Tensor):
        y = self.pool(self.c2(self.c1(x)))
        return y.flatten(1), nn.functional.interpolate(x, scale_factor=0.5, mode="bilinear")


def cnn_hw() -> Case:
    torch.manual_seed(0)
    auto = {0: Dim.AUTO, 2: Dim.AUTO, 3: Dim.AUTO}
    return Case(_Cnn().eval(), (torch.randn(2, 3, 32, 48),), {}, (auto,),
                (torch.randn(1, 3, 40, 24),), {}, ["x"])  # fmt: skip


class _SizeArith(nn.Module):
    """Python arithmetic on sizes: Mod, FloorDiv of a negation, Min, Max, ``**``."""

    def forward(self, x: torch.Tensor):
        n = x.shape[1]
        return (
            x[:, : n % 3 + 1],
            x.new_ones(-(-n // 4)),
            x.new_ones(max(n - 3, 1)) * min(n, 5),
            x.new_ones(n**2),
            x * (n**0.5),
            torch.full((2,), n / 3),
        )


def size_arith() -> Case:
    auto = {0: Dim.AUTO, 1: Dim.AUTO}
    return Case(_SizeArith(), (torch.randn(2, 9),), {}, (auto,), (torch.randn(3, 14),), {},
                ["x"])  # fmt: skip


class _Unbacked(nn.Module):
    """Sizes known only at run time: ``.item()`` and ``nonzero``."""

    def forward(self, x: torch.Tensor, n: torch.Tensor):
        k = n.item()
        torch._check(k >= 1)
        torch._check(k <= x.shape[0])
        return x[:k] * 2, torch.nonzero(x > 0), x.new_ones(k * 2 + 1)


def unbacked() -> Case:
    return Case(_Unbacked(), (torch.randn(6, 4), torch.tensor(3)), {},
                ({0: Dim("n", min=2, max=64)}, None),
                (torch.randn(9, 4), torch.tensor(5)), {}, ["x", "n"])  # fmt: skip


class _DictOut(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None):
        return {"sum": x + y, "diff": x - y}


def dict_kwargs() -> Case:
    b = Dim("b", min=1, max=32)
    return Case(_DictOut(), (torch.randn(2, 3),), {"y": torch.randn(2, 3)},
                {"x": {0: b}, "y": {0: b}}, (torch.randn(5, 3),), {"y": torch.randn(5, 3)},
                ["x", "y"], ["sum", "diff"])  # fmt: skip


@dataclasses.dataclass
class _Fields:
    a: torch.Tensor
    b: torch.Tensor


class _DataclassOut(nn.Module):
    def forward(self, x: torch.Tensor) -> _Fields:
        return _Fields(x + 1, x * 2)


def dataclass_out() -> Case:
    if _Fields not in torch.utils._pytree.SUPPORTED_NODES:
        torch.export.register_dataclass(_Fields, serialized_type_name="tests.pt2_files.Fields")
    return Case(_DataclassOut(), (torch.randn(2, 3),), {}, ({0: Dim("b", max=32)},),
                (torch.randn(4, 3),), {}, ["x"], ["a", "b"])  # fmt: skip


CASES: dict[str, Callable[[], Case]] = {
    f.__name__: f
    for f in (bert_mlm, llama_clm, gpt2_lm, cnn_hw, size_arith, unbacked, dict_kwargs,
              dataclass_out)
}  # fmt: skip


def _saved(name: str, directory: Path) -> tuple[Case, Path]:
    try:
        case = CASES[name]()
    except MissingDependency as e:
        pytest.skip(str(e))
    with torch.no_grad():
        ep = torch.export.export(case.module, case.args, case.kwargs, dynamic_shapes=case.dynamic)
    path = directory / f"{name}.pt2"
    torch.export.save(ep, path)
    return case, path


def _flat(out: Any) -> list[np.ndarray]:
    if hasattr(out, "to_tuple"):  # a ModelOutput: its set fields in order
        out = out.to_tuple()
    if dataclasses.is_dataclass(out):
        out = [getattr(out, f.name) for f in dataclasses.fields(out)]
    return [from_torch_value(t) for t in flatten(out)]


@pytest.mark.parametrize("name", list(CASES))
def test_saved_program_reads_and_runs_like_its_module(name, tmp_path):
    case, path = _saved(name, tmp_path)
    m = load_model(path)  # no trust_pickle
    assert [v.name for v in m.graph.inputs] == case.inputs
    if case.outputs is not None:
        assert [v.name for v in m.graph.outputs] == case.outputs
    with torch.no_grad():
        want = _flat(case.module(*case.run_args, **case.run_kwargs))
    by_name = dict(zip(case.inputs, [*case.run_args, *case.run_kwargs.values()]))
    feeds = {v: by_name[v].numpy() for v in case.inputs}
    native, _ = m.run(feeds)  # torch runs the program msc read, keyword arguments by name
    graph, _ = run_graph(m.graph, [feeds[v] for v in case.inputs])
    assert len(native) == len(graph) == len(want)
    for w, a, b in zip(want, native, graph):
        np.testing.assert_allclose(a, w, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(b, w, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", ["cnn_hw", "size_arith", "unbacked", "llama_clm"])
def test_every_expression_reads_as_torch_would(name, tmp_path):
    """msc's reading of each size expression in the file is the sympy object torch's
    ``sympify`` makes of it (with torch's own function table)."""
    import json
    import zipfile

    from msc.frontend.torch.pt2_expr import ExprReader

    _, path = _saved(name, tmp_path)
    with zipfile.ZipFile(path) as z:
        doc = json.loads(z.read(next(n for n in z.namelist() if n.endswith("models/model.json"))))
    texts: set[str] = set()

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            if isinstance(x.get("expr_str"), str):
                texts.add(x["expr_str"])
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(doc)
    reader = ExprReader()
    assert len(texts) > 2
    for text in texts:
        ref = sympy.sympify(text, locals=dict(reader.functions) | reader.constants)
        assert reader.read(text) == ref, text


STR_FORMS = [  # the ``str`` form older files wrote, and what it means
    ("2*s0 + 1", "Add(Mul(Integer(2), Symbol('s0', integer=True)), Integer(1))"),
    ("s0//2", "FloorDiv(Symbol('s0', integer=True), Integer(2))"),
    ("-s0 + 3", "Add(Mul(Integer(-1), Symbol('s0', integer=True)), Integer(3))"),
    ("s0**2 - 1", "Add(Pow(Symbol('s0', integer=True), Integer(2)), Integer(-1))"),
    ("s0/4", "Mul(Rational(1, 4), Symbol('s0', integer=True))"),
    ("-2**2", "Integer(-4)"),
    ("2**-1", "Rational(1, 2)"),
    ("Max(1, s0 % 3)", "Max(Integer(1), Mod(Symbol('s0', integer=True), Integer(3)))"),
    ("(s0 >= 3) & (s0 < 9)", "And(GreaterThan(Symbol('s0', integer=True), Integer(3)), "
     "StrictLessThan(Symbol('s0', integer=True), Integer(9)))"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "srepr"), STR_FORMS)
def test_str_form_reads_as_its_srepr(text, srepr):
    from msc.frontend.torch.pt2_expr import ExprReader

    r = ExprReader()
    assert r.read(text) == r.read(srepr)


REFUSED = [  # (expression, words of the reason)
    ("__import__('os').system('true')", "unexpected"),
    ("__import__('os')", "__import__"),
    ("Symbol('s0').__class__", "unexpected"),
    ("open('f')", "function 'open'"),
    ("x[0]", "unexpected"),
    ("lambda: 1", "unexpected"),
    ("9**9**9", "bits"),
    ("Pow(Integer(10), Pow(Integer(10), Integer(10)))", "bits"),
    ("2**10**10", "bits"),
    ("Float('1e999999999', precision=53)", "not finite"),
    ("Pow(Symbol('s0', integer=True), Symbol('s1', integer=True))", "bits"),
    ("LShift(Integer(1), Integer(100000))", "bits"),
    ("OpaqueUnaryFn_exp(Integer(100000))", "bits"),
    ("Mul(" + ", ".join(["Integer(1000)"] * 500) + ")", "bits"),
    ("(" * 100 + "1" + ")" * 100, "nested"),
    ("2**" * 3000 + "2", "nested"),
    ("Integer(" + "9" * 100 + ")", "a number of 100"),
    ("Symbol('s0', evil=True)", "assumption"),
    ("Integer(Symbol('s0'))", "Integer()"),
]


@pytest.mark.parametrize(("text", "why"), REFUSED, ids=[t[:30] for t, _ in REFUSED])
def test_hostile_expression_is_refused_before_sympy(text, why):
    from msc.frontend.torch.pt2_expr import ExprReader

    with pytest.raises(ValueError, match=None) as e:
        ExprReader().read(text)
    assert why in str(e.value), str(e.value)


def test_bits_bound_counts_symbols_as_int64():
    from msc.frontend.torch.pt2_expr import MAX_BITS, bits, parse

    assert bits(parse("Mul(Integer(64), Symbol('s53', positive=True, integer=True))")) <= 71
    assert bits(parse("s0**64")) == 64 * 64 <= MAX_BITS
    assert bits(parse("s0**65")) > MAX_BITS
    assert bits(parse("Float('0.5', precision=53)")) == 1


def test_keyword_inputs_by_name_through_the_command(tmp_path):
    """convert's check, verify and inspect of a program called with ``attention_mask=``: the
    graph's inputs are the argument names, and ``--input-shape`` takes them."""
    from tests.analysis.test_cli import run

    _, path = _saved("bert_mlm", tmp_path)
    out = tmp_path / "bert.onnx"
    p = run("convert", path, "-o", out)
    assert "check: outputs match" in p.stdout, p.stdout
    p = run("verify", path, out, "--input-shape", "input_ids=3,5",
            "--input-shape", "attention_mask=3,5")  # fmt: skip
    assert "attention_mask int64[3, 5]" in p.stdout and "result: match" in p.stdout, p.stdout
    assert "logits" in p.stdout
    p = run("inspect", path, "--input-shape", "attention_mask=4,6", "--json")
    j = __import__("json").loads(p.stdout)
    assert [i["name"] for i in j["inputs"]] == ["input_ids", "attention_mask"]
    assert sorted(j["binding"].values()) == [4, 6], j["binding"]
    p = run("inspect", path, "--input-shape", "mask=4,6", ok=2)
    assert "no such input (inputs: attention_mask, input_ids" in p.stderr, p.stderr


def _spec(kind: Any, context: Any, children: list) -> dict:
    return {"type": kind, "context": context, "children_spec": children}


_LEAF = _spec(None, None, [])
SPECS = [  # (a spec node as torch writes it, the node msc hands torch, or the error's words)
    (_spec("transformers.modeling_outputs.MaskedLMOutput", '["logits", "hidden"]', [_LEAF] * 2),
     _spec("collections.OrderedDict", '["logits", "hidden"]', [_LEAF] * 2)),
    (_spec("mymod.Out", '[["a", "b"], []]', [_LEAF] * 2),  # a registered dataclass
     _spec("collections.OrderedDict", '["a", "b"]', [_LEAF] * 2)),
    (_spec("mymod.Opaque", '{"anything": 1}', [_LEAF]), _spec("builtins.tuple", "null", [_LEAF])),
    (_spec("collections.namedtuple", "mymod.NT", [_LEAF]),
     _spec("builtins.tuple", "null", [_LEAF])),
    (_spec("collections.deque", "null", [_LEAF]), _spec("builtins.list", "null", [_LEAF])),
    (_spec("collections.defaultdict",
           {"default_factory_module": "os", "default_factory_name": "system",
            "dict_context": ["k"]}, [_LEAF]),
     _spec("builtins.dict", '["k"]', [_LEAF])),
    (_spec("builtins.dict", '[{"__enum__": true, "fqn": "os:X", "name": "A"}]', [_LEAF]),
     "dict key"),
    (_spec("builtins.dict", '[1.5]', [_LEAF]), "dict key"),
    (_spec("builtins.dict", '["a", "b"]', [_LEAF]), "not a list of 1"),
    (_spec(None, "x", []), "leaf with a context"),
    (_spec("builtins.tuple", "null", [_spec("builtins.tuple", "null", [])] * 1), None),
]  # fmt: skip


@pytest.mark.parametrize(("node", "want"), SPECS)
def test_structure_specs_read_as_builtin_containers(node, want):
    import json

    from msc.frontend.torch.pt2_tree import rewrite_spec

    text = json.dumps([1, node])
    if isinstance(want, str):
        with pytest.raises(ValueError, match=want):
            rewrite_spec(text)
        return
    assert json.loads(rewrite_spec(text)) == [1, node if want is None else want]


def test_structure_nested_past_the_limit_is_refused():
    import json

    from msc.frontend.torch.pt2_tree import rewrite_spec

    node = _LEAF
    for _ in range(100):
        node = _spec("builtins.tuple", "null", [node])
    with pytest.raises(ValueError, match="nested"):
        rewrite_spec(json.dumps([1, node]))


def test_only_string_keys_name_outputs(tmp_path):
    class M(nn.Module):
        def forward(self, x: torch.Tensor):
            return [x + 1], {3: x - 1}, {"scores": (x * 2, x * 3)}

    ep = torch.export.export(M(), (torch.randn(2, 3),))
    torch.export.save(ep, tmp_path / "m.pt2")
    names = [v.name for v in load_model(tmp_path / "m.pt2").graph.outputs]
    assert names == ["add", "sub", "scores.0", "scores.1"]
