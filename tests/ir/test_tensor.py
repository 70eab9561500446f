"""Weight data that is not an array in memory: file regions and packed sub-byte values."""

from __future__ import annotations

import gc

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msc.ir import DType, Graph, TensorType
from msc.ir.graph import GraphError
from msc.ir.tensor import FileRegion, Packed, pack, packed_size, unpack

SUB = [DType.INT4, DType.UINT4, DType.INT2, DType.UINT2, DType.FLOAT4_E2M1]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(SUB), st.lists(st.integers(0, 255), min_size=0, max_size=37))
def test_pack_unpack_round_trip(dtype, raw):
    bits = {4: 4, 2: 2}[dtype.bits]
    codes = np.array(raw, np.uint8) & np.uint8((1 << bits) - 1)
    arr = codes.view(dtype.to_numpy())
    packed = pack(arr)
    assert packed.size == packed_size(dtype, arr.shape) == -(-arr.size * bits // 8)
    back = unpack(packed, dtype, arr.shape)
    assert back.dtype == arr.dtype
    np.testing.assert_array_equal(back.view(np.uint8), codes)


def test_pack_is_low_bits_first_as_onnx_packs():
    arr = np.array([1, 2, 3], ml_dtypes.uint4)
    assert pack(arr).tolist() == [0x21, 0x03]
    assert pack(np.array([-1, 1], ml_dtypes.int4)).tolist() == [0x1F]


def test_packed_weight_counts_packed_bytes_and_unpacks_on_use():
    arr = np.arange(-8, 8, dtype=np.int8).astype(ml_dtypes.int4).reshape(4, 4)
    g = Graph()
    w = g.add_weight("w", Packed.of(arr))
    assert w.type == TensorType(DType.INT4, (4, 4))
    assert w.nbytes == 8 and isinstance(w.storage, Packed)
    np.testing.assert_array_equal(w.numpy(), arr)
    assert w.numpy() is not w.numpy()  # a fresh array per use, none kept
    with pytest.raises(ValueError, match="needs 8 bytes"):
        Packed(np.zeros(7, np.uint8), DType.INT4, (4, 4))


def test_file_region_maps_on_use_and_keeps_nothing(tmp_path):
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    f = tmp_path / "w.bin"
    f.write_bytes(b"head" + data.tobytes())
    region = FileRegion(str(f), 4, 48, DType.FLOAT32, (3, 4))
    w = Graph().add_weight("w", region)
    assert w.region == region and w.nbytes == 48
    a = w.numpy()
    assert isinstance(a, np.memmap) and not a.flags.writeable
    np.testing.assert_array_equal(a, data)
    del a
    gc.collect()
    assert w.storage is region  # the weight holds the region, not a mapping
    with pytest.raises(ValueError, match="needs 48"):
        FileRegion(str(f), 4, 40, DType.FLOAT32, (3, 4))
    with pytest.raises(GraphError, match="type says"):
        Graph().add_weight("v", region, type=TensorType(DType.FLOAT32, (12,)))


def test_file_region_copies_file_to_file(tmp_path):
    data = np.random.default_rng(0).standard_normal(5000).astype(np.float32)
    src = tmp_path / "src.bin"
    src.write_bytes(b"x" * 100 + data.tobytes() + b"tail")
    region = FileRegion(str(src), 100, data.nbytes, DType.FLOAT32, (5000,))
    out = tmp_path / "out.bin"
    with open(out, "wb") as f:
        f.write(b"ab")
        assert region.copy_to(f) == data.nbytes
        f.write(b"cd")  # the buffered writer continues after the copied bytes
    raw = out.read_bytes()
    assert raw[:2] == b"ab" and raw[-2:] == b"cd"
    np.testing.assert_array_equal(np.frombuffer(raw[2:-2], np.float32), data)


def test_packed_file_region(tmp_path):
    arr = np.array([1, -2, 3, -4, 5], ml_dtypes.int4)
    f = tmp_path / "w.bin"
    f.write_bytes(pack(arr).tobytes())
    region = FileRegion(str(f), 0, 3, DType.INT4, (5,), packed=True)
    np.testing.assert_array_equal(region.array(), arr)
    assert region.packed_bytes().tolist() == pack(arr).tolist()
    with pytest.raises(ValueError, match="cannot be packed"):
        FileRegion(str(f), 0, 3, DType.UINT8, (3,), packed=True)
