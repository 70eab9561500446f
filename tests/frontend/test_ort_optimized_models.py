"""Models written by onnxruntime's transformer optimizer, through msc.

A small BERT, GPT-2 and Llama (transformers configs, random weights) are exported with
torch.onnx, optimized with ``onnxruntime.transformers.optimizer.optimize_model`` at opt_level 1
and 2, and read by msc: the com.microsoft ops the optimizer wrote become canonical ops, the
generated PyTorch agrees with onnxruntime running the optimized file, and ONNX -> msc -> ONNX
runs in onnxruntime to the same outputs.

# NOTE: the exports are torch.onnx's dynamo exporter (the TorchScript exporter cannot export
# these transformers versions: aten::diff in the mask code). On those files the optimizer's
# gpt2 model type fails inside onnxruntime (its Gemm post-processing assumes a bias), so GPT-2
# is optimized with the bert model type; Llama with gpt_neox. The optimizer does not fuse the
# dynamo exports' attention, so Attention / MultiHeadAttention are covered by the one-node
# models of test_ort_contrib_ops.py.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest

import msc
from tests.torch_cases import MODEL_CASES, MissingDependency

ort = pytest.importorskip("onnxruntime", reason="onnxruntime optimizes and runs the models")
optimizer = pytest.importorskip(
    "onnxruntime.transformers.optimizer", reason="onnxruntime's transformer optimizer"
)
torch = pytest.importorskip("torch", reason="the models are exported from PyTorch")
import codegen.onnx  # noqa: E402
import codegen.torch  # noqa: E402

# model -> (optimizer model_type, com.microsoft / contrib ops the optimizer must have written
# at opt_level 1 and 2)
SKIP_LN = "SkipLayerNormalization"
MODELS = {
    "bert": ("bert", {1: {SKIP_LN, "Gelu"}, 2: {SKIP_LN, "BiasGelu"}}),
    "gpt2": ("bert", {1: {SKIP_LN, "FastGelu"}, 2: {SKIP_LN, "FastGelu"}}),
    "llama": (
        "gpt_neox",
        {
            1: {"SkipSimplifiedLayerNormalization", "SimplifiedLayerNormalization"},
            2: {"SkipSimplifiedLayerNormalization", "QuickGelu"},
        },
    ),
}


def _gpt2_base():
    """GPT-2 without its LM head (the head's bias-free Gemm is what trips the optimizer)."""
    import transformers as tf

    torch.manual_seed(0)
    cfg = tf.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                        use_cache=False)  # fmt: skip
    return tf.GPT2Model(cfg).eval(), (torch.randint(0, 100, (2, 8)),)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    cache: dict[str, tuple[str, tuple]] = {}

    def get(name: str) -> tuple[str, tuple]:
        if name not in cache:
            try:
                module, args = _gpt2_base() if name == "gpt2" else MODEL_CASES[name]()[:2]
            except (MissingDependency, ImportError) as e:
                pytest.skip(str(e))
            path = str(tmp_path_factory.mktemp(name) / f"{name}.onnx")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(module, args, path, dynamo=True, opset_version=18)
            cache[name] = (path, args)
        return cache[name]

    return get


def _feeds(path: str, args: tuple) -> dict[str, np.ndarray]:
    names = [i.name for i in ort.InferenceSession(path).get_inputs()]
    feeds = {n: a.numpy() for n, a in zip(names, args)}
    for n, a in feeds.items():
        if "mask" in n:  # pad the end of the second row
            a = a.copy()
            a[1, -3:] = 0
            feeds[n] = a
    return feeds


def _ort(model, feeds) -> list[np.ndarray]:
    data = model if isinstance(model, str) else model.SerializeToString()
    return ort.InferenceSession(data).run(None, feeds)


@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_optimized_model_through_both_codegens(name, level, exported, tmp_path) -> None:
    src, args = exported(name)
    model_type, expected = MODELS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = optimizer.optimize_model(
            src, model_type=model_type, num_heads=4, hidden_size=32, opt_level=level
        )
    path = str(tmp_path / "optimized.onnx")
    opt.save_model_to_file(path)
    written = {n.op_type for n in onnx.load(path).graph.node}
    assert expected[level] <= written, written

    feeds = _feeds(path, args)
    want = _ort(path, feeds)
    g = msc.from_onnx(path)
    ops = {n.op for n in g.nodes}
    assert not any("::" in op for op in ops), ops
    assert ops & {"layer_norm", "rms_norm"}, ops

    module = codegen.torch.to_module(g)
    with torch.no_grad():
        got = module(*[torch.from_numpy(feeds[v.name]) for v in g.inputs])
    got = got if isinstance(got, tuple | list) else (got,)
    for a, w in zip(got, want):
        np.testing.assert_allclose(a.numpy(), w, rtol=1e-4, atol=1e-5)

    back = codegen.onnx.to_model(g)
    assert all(n.domain in ("", "ai.onnx") for n in back.graph.node)
    for a, w in zip(_ort(back, feeds), want):
        np.testing.assert_allclose(a, w, rtol=1e-4, atol=1e-5)
