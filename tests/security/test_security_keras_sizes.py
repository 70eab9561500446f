"""Hostile sizes in a .keras file: a built-in layer's config asking for huge weights
(``Dense(units=10**12)``, ``Embedding(input_dim=10**12)``, ``Conv2D(filters=10**9)``), a layer
without weights asking for a huge shape (Reshape, RepeatVector, UpSampling, ZeroPadding,
Resizing, an Input), or weights declared in model.weights.h5 without being stored: each is
refused with one error naming the layer and the config key, before Keras builds anything
(msc.frontend.keras.limits), in bounded memory. Every layer of the layer table, saved as
Keras saves it, passes the same check."""

from __future__ import annotations

import io
import json
import os
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
keras = pytest.importorskip("keras", reason="the keras extra (keras 3) is not installed")
h5py = pytest.importorskip("h5py", reason="the keras extra (h5py) is not installed")

import msc  # noqa: E402
from msc.errors import BadModelError  # noqa: E402
from msc.frontend.keras.limits import BUDGET, SIZES, size_problems, stored_weights  # noqa: E402
from tests.security import hang_guard, one_error, run_child  # noqa: E402

L = keras.layers


def _base(path: Path) -> Path:
    """A small model with a layer of each kind the hostile cases edit."""
    x = keras.Input((8,), name="x")
    ids = keras.Input((5,), dtype="int32", name="ids")
    img = keras.Input((6, 6, 2), name="img")
    seq = L.Reshape((4, 2), name="reshape")(x)
    outs = [
        L.Dense(3, name="fc")(x),
        L.Embedding(10, 4, name="emb")(ids),
        L.Conv2D(5, 3, name="conv")(img),
        L.LSTM(3, name="lstm")(seq),
        L.MultiHeadAttention(2, 3, name="mha")(seq, seq),
        L.RepeatVector(3, name="repeat")(x),
        L.UpSampling2D(2, name="up")(img),
        L.ZeroPadding2D(1, name="pad")(img),
        L.Resizing(4, 4, name="resize")(img),
        L.TimeDistributed(L.Dense(2, name="inner"), name="td")(seq),
        L.LayerNormalization(name="ln")(seq),
        L.LayerNormalization(center=False, scale=False, name="ln_bare")(seq),
        L.GroupNormalization(2, name="gn")(img),
        L.PReLU(shared_axes=[1], name="prelu")(seq),
        L.Normalization(name="norm")(x),
        L.Normalization(axis=None, name="norm_scalar")(seq),
        L.Normalization(axis=[1, 2], mean=0.5, variance=2.0, name="norm_given")(seq),
    ]
    keras.Model([x, ids, img], outs).save(path)
    return path


def _layer(config: dict, name: str) -> dict:
    (entry,) = [la for la in config["config"]["layers"] if la["config"].get("name") == name]
    return entry


def _set(name: str, **kw):
    return lambda c: _layer(c, name)["config"].update(kw)


def _build(name: str, key: str, shape, *more: str):
    """Edit layer ``name``'s build_config: its input shape ``key`` (``more``: inside a dict)."""

    def edit(c):
        at = _layer(c, name)["build_config"]
        for k in more:
            at = at[k]
        at[key] = shape

    return edit


def _no_build(c):
    del _layer(c, "fc")["build_config"]


def _inner(c):
    _layer(c, "td")["config"]["layer"]["config"]["units"] = 10**12


BIG = 10**5  # twice: 10**10 elements
# case -> (edit of config.json, the words the error must hold)
HOSTILE = {
    "dense_units": (_set("fc", units=10**12), ["Dense 'fc'", "units=1000000000000"]),
    "dense_units_in_memory": (_set("fc", units=1 << 28), ["Dense 'fc'", "units="]),
    "embedding_input_dim": (_set("emb", input_dim=10**12), ["Embedding 'emb'", "input_dim="]),
    "embedding_output_dim": (_set("emb", output_dim=10**9), ["Embedding 'emb'", "output_dim="]),
    "conv_filters": (_set("conv", filters=10**9), ["Conv2D 'conv'", "filters="]),
    "conv_kernel_size": (_set("conv", kernel_size=[BIG, BIG]), ["Conv2D 'conv'", "kernel_size="]),
    "lstm_units": (_set("lstm", units=10**8), ["LSTM 'lstm'", "units="]),
    "mha_heads": (_set("mha", num_heads=10**9), ["MultiHeadAttention 'mha'", "num_heads="]),
    "mha_key_dim": (_set("mha", key_dim=10**9), ["MultiHeadAttention 'mha'", "key_dim="]),
    "wrapped_dense": (_inner, ["Dense 'inner'", "units="]),
    # Keras builds a layer from its build_config's input shape: the input dims of its weights
    "dense_input": (_build("fc", "input_shape", [None, 1 << 26]), ["Dense 'fc'", "input_shape"]),
    "conv_channels": (_build("conv", "input_shape", [None, 6, 6, BIG]), ["Conv2D", "input_sh"]),
    "lstm_features": (_build("lstm", "input_shape", [None, 4, BIG]), ["LSTM 'lstm'", "input_"]),
    "mha_query": (
        _build("mha", "query_shape", [None, 4, BIG], "shapes_dict"),
        ["MultiHeadAttention 'mha'", "query_shape"],
    ),
    # weights shaped by the input alone (no size key): the shape they would have is stored
    "layer_norm_input": (_build("ln", "input_shape", [None, 4, BIG]), ["LayerNormalization"]),
    "layer_norm_axes": (
        lambda c: (_set("ln", axis=[-2, -1])(c), _build("ln", "input_shape", [None, BIG, 2])(c)),
        ["LayerNormalization 'ln'", "input_shape"],
    ),
    "layer_norm_axis": (_set("ln", axis=[7]), ["LayerNormalization 'ln'", "axis=[7]"]),
    "bare_layer_norm_made_weighted": (
        lambda c: (_set("ln_bare", center=True)(c),
                   _build("ln_bare", "input_shape", [None, 4, BIG])(c)),
        ["LayerNormalization 'ln_bare'", "input_shape"],
    ),
    "group_norm_input": (_build("gn", "input_shape", [None, 6, 6, BIG]), ["GroupNormalization"]),
    "prelu_input": (_build("prelu", "input_shape", [None, BIG, BIG]), ["PReLU 'prelu'", "input"]),
    "prelu_unshared": (_set("prelu", shared_axes=None), ["PReLU 'prelu'", "input_shape"]),
    "normalization_input": (_build("norm", "input_shape", [None, BIG]), ["Normalization 'norm'"]),
    "normalization_axes": (
        lambda c: (_set("norm", axis=[-2, -1])(c),
                   _build("norm", "input_shape", [None, BIG, 8])(c)),
        ["Normalization 'norm'", "input_shape"],
    ),
    "normalization_given_mean": (
        _build("norm_given", "input_shape", [None, BIG, BIG]),
        ["Normalization 'norm_given'", "broadcast to more than"],
    ),
    "no_build_config": (_no_build, ["Dense 'fc'", "no build_config"]),
    "units_as_text": (_set("fc", units="1e12"), ["Dense 'fc'", "not a size"]),
    "units_as_float": (_set("fc", units=1e12), ["Dense 'fc'", "not a size"]),
    "units_negative": (_set("fc", units=-5), ["Dense 'fc'", "not a size"]),
    "units_as_bool": (_set("fc", units=True), ["Dense 'fc'", "not a size"]),
    "reshape_target": (_set("reshape", target_shape=[BIG, BIG]), ["Reshape 'reshape'", "target_"]),
    "repeat_n": (_set("repeat", n=10**12), ["RepeatVector 'repeat'", "n="]),
    "upsampling_size": (_set("up", size=[BIG, BIG]), ["UpSampling2D 'up'", "size="]),
    "zero_padding": (_set("pad", padding=[[BIG, BIG], [BIG, BIG]]), ["ZeroPadding2D", "padding"]),
    "resizing": (_set("resize", height=10**6, width=10**6), ["Resizing 'resize'", "height="]),
    "input_shape": (_set("img", batch_shape=[None, BIG, BIG, 2]), ["InputLayer 'img'", "batch_"]),
    "deep_nesting": (_set("reshape", target_shape=[[[[1]]]]), ["Reshape 'reshape'", "not a size"]),
}  # fmt: skip


def _edited(base: Path, dst: Path, edit=None, weights: bytes | None = None) -> Path:
    with zipfile.ZipFile(base) as z, zipfile.ZipFile(dst, "w") as out:
        for item in z.infolist():
            data = z.read(item)
            if item.filename == "config.json" and edit is not None:
                config = json.loads(data)
                edit(config)
                data = json.dumps(config).encode()
            if item.filename == "model.weights.h5" and weights is not None:
                data = weights
            out.writestr(item, data)
    return dst


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return _base(tmp_path_factory.mktemp("sizes") / "base.keras")


def test_the_base_model_reads(base):
    assert size_problems(json.loads(zipfile.ZipFile(base).read("config.json")),
                         stored_weights(zipfile.ZipFile(base))[0]) == []  # fmt: skip
    msc.from_keras(base)


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_size_is_refused_before_keras_builds(base, tmp_path, case, monkeypatch):
    edit, words = HOSTILE[case]
    f = _edited(base, tmp_path / f"{case}.keras", edit)

    def built(*a, **k):  # nothing of the file is built
        raise AssertionError("Keras was asked to load the file")

    monkeypatch.setattr(keras.saving, "load_model", built)
    tracemalloc.start()
    try:
        with pytest.raises(BadModelError) as e, hang_guard(f"reading {case}"):
            msc.from_keras(f)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, peak  # the check reads metadata: well under the file's 16 MiB slack
    msg = str(e.value)
    assert msg.startswith(f"{f}: refused") and "\n" not in msg, msg
    for w in words:
        assert w in msg, msg


@pytest.mark.parametrize("case", ["dense_units_in_memory", "embedding_input_dim", "repeat_n"])
def test_hostile_size_is_one_error_line_in_bounded_memory(base, tmp_path, case):
    # 2**28 units on 8 inputs would be an 8 GiB kernel: the child may hold 3 GiB in all
    edit, words = HOSTILE[case]
    f = _edited(base, tmp_path / f"{case}.keras", edit)
    p = run_child("inspect", str(f), limit_mb=3072)
    line = one_error(p.returncode, p.stderr, *words)
    assert "refused" in line and f.name in line


def _declared_only(base: Path, units: int) -> bytes:
    """base's weights with fc's kernel declared [8, units] and never written (HDF5 stores
    nothing for it: the file stays small)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(base) as z, h5py.File(io.BytesIO(z.read("model.weights.h5")), "r") as src:
        with h5py.File(buf, "w") as dst:
            for key in src:
                src.copy(src[key], dst, name=key)
            for k, v in src.attrs.items():
                dst.attrs[k] = v
            (path,) = [p for p in ("layers/dense/vars",) if p in dst]
            del dst[f"{path}/0"], dst[f"{path}/1"]
            dst[path].create_dataset("0", shape=(8, units), dtype="f4")
            dst[path].create_dataset("1", shape=(units,), dtype="f4")
    return buf.getvalue()


def test_weights_declared_but_not_stored_are_refused(base, tmp_path, monkeypatch):
    units = 1 << 30
    f = _edited(base, tmp_path / "declared.keras", _set("fc", units=units),
                weights=_declared_only(base, units))  # fmt: skip
    assert f.stat().st_size < 1 << 20
    monkeypatch.setattr(keras.saving, "load_model", lambda *a, **k: pytest.fail("loaded"))
    with pytest.raises(BadModelError, match=r"refused, model.weights.h5 declares \d+ bytes"):
        msc.from_keras(f)


def test_a_size_at_the_budget_passes_and_one_beyond_does_not():
    config = {"class_name": "RepeatVector", "config": {"name": "r", "n": BUDGET}}
    assert size_problems(config, {}) == []
    config["config"]["n"] = BUDGET + 1
    assert size_problems(config, {}) == [
        f"RepeatVector 'r' n={BUDGET + 1} (more than {BUDGET} elements)"
    ]


def test_unknown_layer_classes_are_read_as_before():
    config = {"class_name": "SomeFutureLayer", "config": {"name": "f", "units": 10**12}}
    assert size_problems(config, {}) == []


@pytest.mark.slow  # saves some 200 models: ~30 s
def test_every_layer_in_the_table_passes_the_check(tmp_path):
    """Each row of the Keras layer table, saved as Keras saves it: its sizes match what the
    file stores (the table's places of each weight are Keras' own)."""
    from tests.keras_cases import CASES, build_model, row

    checked = set()
    for c in CASES:
        name, make, shapes = row(c)[:3]
        try:
            model = build_model(make, shapes)
            path = tmp_path / "row.keras"
            model.save(path)
        except Exception:  # noqa: BLE001 - a row Keras cannot save has nothing to check
            continue
        with zipfile.ZipFile(path) as z:
            config = json.loads(z.read("config.json"))
            groups, _ = stored_weights(z)
        assert size_problems(config, groups) == [], name
        checked |= {la["class_name"] for la in _layers(config)} & set(SIZES)
    # the table's weighted classes are all met by some row
    weighted = {k for k, rules in SIZES.items() if not all(hasattr(r, "keys") for r in rules)}
    unmet = {k for k in weighted - checked if not any(SIZES[k] is SIZES[c] for c in checked)}
    assert not unmet, sorted(unmet)  # (a class's other name, sharing its rules, is met by it)


def _layers(obj):
    if isinstance(obj, dict):
        if "class_name" in obj:
            yield obj
        for v in obj.values():
            yield from _layers(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _layers(v)


# codegen.keras' Sized layer (registered as msc>Sized, for sizes read when the model runs):
# read back with msc's class, its config checked as data first.


def _sized_file(path: Path) -> Path:
    """A generated Keras model of ``(x.reshape(b * s, 4) * 2).reshape(b, s, 4)`` at a
    symbolic batch and sequence, saved as .keras: it holds a Sized layer."""
    torch = pytest.importorskip("torch")
    import codegen.keras

    class Twice(torch.nn.Module):
        def forward(self, x):
            b, s, d = x.shape
            return (x.reshape(b * s, d) * 2).reshape(b, s, d)

    dims = {"x": {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq")}}
    g = msc.from_torch(Twice(), (torch.zeros(3, 5, 4),), dynamic_shapes=dims)
    model = codegen.keras.to_model(g)
    assert any(type(la).__name__ == "Sized" for la in model.layers)
    model.save(path)
    return path


def _edit_sized(src: Path, dst: Path, edit) -> Path:
    def each(c):
        (entry,) = [la for la in c["config"]["layers"] if la.get("registered_name") == "msc>Sized"]
        edit(entry)

    return _edited(src, dst, each)


def test_msc_sized_layer_reads_back_with_mscs_class(tmp_path):
    from msc.frontend.keras.importer import msc_layers
    from tests.tflite_cases import run_torch

    f = _sized_file(tmp_path / "sized.keras")
    g = msc.from_keras(f)
    x = np.arange(2 * 7 * 4, dtype=np.float32).reshape(2, 7, 4)
    (got,) = run_torch(g, [x])
    np.testing.assert_array_equal(got, x * 2)  # at a size other than the export's
    model = msc.frontend.keras.load_keras(f)
    (layer,) = [la for la in model.layers if type(la).__name__ == "Sized"]
    assert type(layer) is msc_layers()["msc>Sized"]


HOSTILE_SIZED = {
    "op_not_ours": lambda e: e["config"].update(op="__import__('os').system"),
    "op_not_a_string": lambda e: e["config"].update(op=["reshape"]),
    "shape_as_code": lambda e: e["config"].update(shape="__import__('os')"),
    "huge_size": lambda e: e["config"].update(shape=[10**12, 4]),
    "float_size": lambda e: e["config"].update(shape=[2.5, 4]),
    "too_many_terms": lambda e: e["config"].update(shape=[[[1, [[0, 0]]]] * 9, 4]),
    "term_not_a_pair": lambda e: e["config"].update(shape=[[[1, [[0, 0, 0]]]], 4]),
    "tensor_index_huge": lambda e: e["config"].update(shape=[[[1, [[10**9, 0]]]], 4]),
    "coefficient_huge": lambda e: e["config"].update(shape=[[[10**12, [[0, 0]]]], 4]),
    "dtype_object": lambda e: e["config"].update(value_dtype="object"),
    "extra_key": lambda e: e["config"].update(code="print(1)"),
    "other_class_under_our_name": lambda e: e.update(class_name="Evil"),
}


@pytest.mark.parametrize("how", sorted(HOSTILE_SIZED))
def test_hostile_sized_config_is_refused(tmp_path, how, monkeypatch):
    good = _sized_file(tmp_path / "good.keras")
    f = _edit_sized(good, tmp_path / f"{how}.keras", HOSTILE_SIZED[how])
    monkeypatch.setattr(keras.saving, "load_model", lambda *a, **k: pytest.fail("loaded"))
    with pytest.raises(BadModelError, match="refused.*msc>Sized"):
        msc.from_keras(f)
