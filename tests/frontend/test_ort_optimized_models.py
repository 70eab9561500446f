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
from msc.errors import UnsupportedOpsError
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


# ------------------------------------------------ com.microsoft ops kept, typed by onnxruntime
def _bert_fused(tmp_path) -> tuple[str, dict[str, np.ndarray]]:
    """A small BERT (eager attention) through the TorchScript exporter and the optimizer at
    opt_level 1, which fuses Attention and EmbedLayerNormalization on that export, with every
    value_info removed (as many optimizers write their files)."""
    import transformers as tf

    torch.manual_seed(0)
    cfg = tf.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64,
                        attn_implementation="eager")  # fmt: skip
    bert = tf.BertModel(cfg, add_pooling_layer=False).eval()

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    names = ["input_ids", "attention_mask", "token_type_ids"]
    ids = torch.randint(0, 64, (2, 8))
    args = (ids, torch.ones_like(ids), torch.zeros_like(ids))
    src = str(tmp_path / "bert.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Encoder().eval(), args, src, dynamo=False, input_names=names,
                          output_names=["hidden"],
                          dynamic_axes={n: {0: "batch", 1: "seq"} for n in names})  # fmt: skip
        opt = optimizer.optimize_model(
            src, model_type="bert", num_heads=2, hidden_size=32, opt_level=1
        ).model
    assert {"Attention", "EmbedLayerNormalization"} <= {n.op_type for n in opt.graph.node}
    del opt.graph.value_info[:]
    path = str(tmp_path / "bert_fused.onnx")
    onnx.save(opt, path)
    gen = np.random.default_rng(0)
    feeds = {  # another batch and length than exported, every id in its table
        "input_ids": gen.integers(0, 64, (3, 11)),
        "attention_mask": np.ones((3, 11), np.int64),
        "token_type_ids": gen.integers(0, 2, (3, 11)),
    }
    feeds["attention_mask"][1, -4:] = 0
    return path, feeds


def _without_domain(domain: str):
    from msc.frontend.onnx.registry import CONVERTERS, ConverterRegistry

    reg = ConverterRegistry()
    for dom, op, versions in CONVERTERS.ops():
        if dom != domain:
            for v in versions:
                reg.register(CONVERTERS.lookup(op, v, dom))
    return reg


def test_untyped_contrib_ops_are_kept_with_onnxruntimes_types(tmp_path) -> None:
    # Before: "output 0 ('EmbedLayerNormalization_0_output') has no type in the model", and
    # the file, which onnxruntime runs, could not be kept. msc's EmbedLayerNormalization
    # converter refuses this use (no position_ids over a run-time length); with no
    # com.microsoft converters at all, every contrib op of the file is kept.
    path, feeds = _bert_fused(tmp_path)
    want = _ort(path, feeds)
    for registry in (None, _without_domain("com.microsoft")):
        kw = {} if registry is None else {"registry": registry}
        g = msc.from_onnx(path, custom_ops="keep", **kw)
        kept = {n.op.split("@")[0]: n for n in g.nodes if n.op.startswith("com.microsoft::")}
        embed = kept["com.microsoft::EmbedLayerNormalization"]
        assert [str(o.type) for o in embed.outputs] == ["f32[batch, seq, 32]", "i32[batch]"]
        if registry is not None:
            assert {"Attention", "SkipLayerNormalization"} <= {k.split("::")[1] for k in kept}
        back = codegen.onnx.to_model(g)
        # The same function by other kernels (attention and norms recomputed): float32
        # rounding only.
        for a, w in zip(_ort(back, feeds), want):
            np.testing.assert_allclose(a, w, rtol=1e-4, atol=1e-5)


def test_an_op_no_runtime_types_is_still_reported_by_name() -> None:
    f32 = onnx.TensorProto.FLOAT
    m = onnx.helper.make_model(
        onnx.helper.make_graph(
            [
                onnx.helper.make_node("Mystery", ["x"], ["t"], domain="acme", name="m"),
                onnx.helper.make_node("Relu", ["t"], ["y"]),
            ],
            "g",
            [onnx.helper.make_tensor_value_info("x", f32, [2])],
            [onnx.helper.make_tensor_value_info("y", f32, [2])],
        ),
        opset_imports=[onnx.helper.make_opsetid("", 18), onnx.helper.make_opsetid("acme", 1)],
    )
    with pytest.raises(UnsupportedOpsError, match="'t'.*no type in the model"):
        msc.from_onnx(m, custom_ops="keep")
