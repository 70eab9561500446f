"""PyTorch models with a symbolic batch and sequence -> Keras (issue 32): the hierarchy table's
transformers (tiny configs, random weights) exported by torch.export with ``Dim("batch")`` and
``Dim("seq_len")``, written by codegen.keras, and run with the torch backend at two (batch,
seq) sizes other than the example's against eager PyTorch (atol 1e-4, rtol 1e-4; the largest
difference measured is under 1e-7): the generated model in memory, the same model saved as a
.keras file and loaded back by Keras, and that file read back by msc.from_keras and run as
generated PyTorch, and compared with the graph (equivalent up to msc diff's known rewrites);
then ``msc convert dyn.pt2 -o g.keras``, its check included.

A functional model's tensors have None for such sizes while it is built, so the generated code
reads them when it runs: the ops that need them go through the small ``Sized`` layer the source
defines (``ops.shape`` of the model's inputs inside its call), the rest is library layers and
keras.ops as for static shapes."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
torch = pytest.importorskip("torch")
keras = pytest.importorskip("keras", reason="the keras extra (keras 3) is not installed")
pytest.importorskip("transformers", reason="tiny transformers model configs")

import codegen.keras  # noqa: E402
import msc  # noqa: E402
from tests.codegen.test_codegen_jax_symbolic import EXAMPLE, SIZES, _dynamic, _resized  # noqa: E402
from tests.codegen.test_torch_hierarchy_models import MODELS  # noqa: E402
from tests.tflite_cases import run_torch  # noqa: E402

NAMES = [pytest.param("gpt2", marks=pytest.mark.slow), "bert"]  # gpt2: ~15 s on a loaded machine
# Whisper: encoder-decoder, its attention with layers named apart from Keras' own names;
# Llama: grouped-query attention (its query and key views reshaped to different heads)
NAMES += [pytest.param(n, marks=pytest.mark.slow) for n in ("whisper", "llama")]


def _run(model, arrays):
    if not isinstance(model, keras.Model):
        return model(arrays)
    out = model(arrays if len(arrays) > 1 else arrays[0])
    out = out if isinstance(out, list | tuple) else [out]
    return [np.asarray(keras.ops.convert_to_numpy(o)) for o in out]


def _agrees(keras_model, source, inputs: dict) -> None:
    for batch, seq in SIZES:
        at = _resized(inputs, batch, seq)
        got = _run(keras_model, [v.numpy() for v in at.values()])
        with torch.no_grad():
            ref = source(**at)
        ref = [ref] if torch.is_tensor(ref) else [r for r in ref.values() if torch.is_tensor(r)]
        assert len(got) == len(ref)
        for a, r in zip(got, ref):
            assert a.shape == tuple(r.shape)
            np.testing.assert_allclose(a, r.numpy(), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", NAMES)
def test_symbolic_batch_and_sequence_to_keras(name, tmp_path):
    model, inputs = MODELS[name][0]()
    example = _resized(inputs, *EXAMPLE)
    g = msc.from_torch(model, (), example_kwargs=example, dynamic_shapes=_dynamic(example))
    src = codegen.keras.generate(g)
    assert "class Sized(keras.layers.Layer)" in src
    assert "keras.Input(shape=(None,)" in src  # the batch and the sequence are open
    assert "sym_size" not in src  # the size computations are not written
    assert all(len(line) < 100 for line in src.splitlines()), [
        line for line in src.splitlines() if len(line) >= 100
    ]
    built = codegen.keras.to_model(g)
    _agrees(built, model, inputs)
    # as codegen.keras saves it (the flat model: Keras' safe mode loads no class of the
    # generated source's), and back (Sized registered under msc's name by the generated source)
    path = tmp_path / f"{name}.keras"
    codegen.keras.save(g, path)
    _agrees(keras.saving.load_model(path, compile=False), model, inputs)
    # and read back by msc (Sized built with msc's class), run as generated PyTorch
    back = msc.from_keras(path)
    assert str(back.inputs[0].type.shape[0]) == "batch"  # and the sequence stays open:
    assert any(not isinstance(d, int) for v in back.inputs for d in v.type.shape[1:])
    _agrees(lambda xs: run_torch(back, xs if isinstance(xs, list) else [xs]), model, inputs)
    # what `msc convert --to keras` blocks on: the graph read back is the one written, up to
    # msc diff's known rewrites (the index's flat take, the sizes Sized reads)
    d = msc.diff(g, back)
    assert d.equivalent, d.verdict()


@pytest.mark.slow  # exports, converts and checks in a child process: ~12 s
def test_dynamic_pt2_to_a_keras_file_through_the_cli(tmp_path):
    from tests.security import run_child

    model, inputs = MODELS["gpt2"][0]()
    example = _resized(inputs, *EXAMPLE)
    ep = torch.export.export(model, (), example, dynamic_shapes=_dynamic(example))
    torch.export.save(ep, tmp_path / "dyn.pt2")
    p = run_child("convert", str(tmp_path / "dyn.pt2"), "-o", str(tmp_path / "g.keras"),
                  limit_mb=16384, timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "outputs match" in p.stdout + p.stderr
    assert "re-imported output is equivalent" in p.stdout + p.stderr, p.stdout + p.stderr
    _agrees(lambda xs: run_torch(msc.from_keras(tmp_path / "g.keras"), xs), model, inputs)


def test_static_shapes_write_no_sized_layer():
    model, inputs = MODELS["gpt2"][0]()
    g = msc.from_torch(model, (), example_kwargs=_resized(inputs, 2, 5))
    assert "Sized" not in codegen.keras.generate(g)


def test_a_size_one_cut_of_a_symbolic_dim_is_squeezed_by_indexing():
    """``x[:, :1]`` of a symbolic sequence has a size Keras cannot see while it builds the
    model (None), so ``ops.squeeze`` would refuse it: the squeeze is written ``x[:, 0]``."""
    from msc.ir import DType, Graph, SymDim, TensorType

    g = Graph("first_token")
    x = g.add_input("x", TensorType(DType.FLOAT32, (SymDim("batch"), SymDim("seq"), 4)))
    first = g.op("slice", x, starts=[0], ends=[1], axes=[1], steps=[1])
    g.set_outputs([g.op("squeeze", first, axes=[1])])
    source = codegen.keras.generate(g)
    assert "ops.squeeze" not in source, source
    for batch, seq in ((1, 3), (3, 5)):
        a = np.random.default_rng(seq).standard_normal((batch, seq, 4)).astype(np.float32)
        np.testing.assert_array_equal(_run(codegen.keras.to_model(g), [a])[0], a[:, 0])


class _Arranged(torch.nn.Module):
    """``x[arange(batch)[:, None], arange(seq)]`` (GPT-2's causal mask indexes its cumsum so):
    indices that lie in their dims, a take of the flat index ``j + i * seq`` with no wrap."""

    def forward(self, x):
        b, s = x.shape[0], x.shape[1]
        return x[torch.arange(b)[:, None], torch.arange(s)] * 2.0


class _Indexed(torch.nn.Module):
    """``x[i, j]`` of index inputs: a negative one counts from the end, so each is wrapped
    into its dim (``% size``, the size read when the model runs)."""

    def forward(self, x, i, j):
        return x[i, j] * 2.0


def test_symbolic_advanced_indexing_wraps_only_what_may_be_negative():
    from torch.export import Dim

    batch, seq = Dim("batch", min=1, max=8), Dim("seq_len", min=2, max=16)
    x = torch.randn(3, 5, 4)
    i, j = torch.tensor([0, -1, 2]), torch.tensor([-2, 1, 4])
    cases = {
        "arranged": (_Arranged(), (x,), ({0: batch, 1: seq},)),
        "indexed": (_Indexed(), (x, i, j), ({0: batch, 1: seq}, None, None)),
    }
    for name, (m, args, dyn) in cases.items():
        g = msc.from_torch(m, args, dynamic_shapes=dyn)
        src = codegen.keras.generate(g)
        at = re.findall(r"_at = (.*?)\n    \w+ = ops\.take", src, re.S)  # the flat index
        assert len(at) == 1 and ("%" in at[0]) == (name == "indexed"), src
        built = codegen.keras.to_model(g)
        for b, s in SIZES:
            xs = [torch.randn(b, s, 4), torch.tensor([0, -1, b - 1]), torch.tensor([-s, 1, s - 1])]
            xs = xs[: len(args)]
            with torch.no_grad():
                ref = m(*xs).numpy()
            got = _run(built, [v.numpy() for v in xs])[0]
            np.testing.assert_allclose(got, ref, atol=1e-6, rtol=1e-6)
        # what `msc convert --to keras` blocks on: read back, the graph (up to known rewrites)
        d = msc.diff(g, msc.from_keras(built))
        assert d.equivalent, d.verdict()
