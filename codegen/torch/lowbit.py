"""Sub-byte dtypes in generated PyTorch code: carriers, casts, and tensor conversion.

torch has no kernels for 4-bit and 2-bit integers or float4_e2m1, so generated code holds them
in a *carrier* dtype that represents every value exactly:

    i4, i2 -> torch.int8     u4, u2 -> torch.uint8     f4e2m1 -> torch.float32

A generated module takes and returns such tensors as their carrier (``to_torch`` and
``from_torch`` convert from and to numpy's ml_dtypes arrays). float8_e8m0 is torch's own
``float8_e8m0fnu``.

# NOTE: invariants
# - A carrier tensor only ever holds values of its sub-byte type: every cast into one wraps
#   (integers, two's complement, as numpy/ml_dtypes and ONNX Cast do) or rounds to nearest
#   even and saturates at +-6 (float4_e2m1; NaN becomes -0 as in ml_dtypes). Casts out of a
#   carrier are plain ``.to()``: exact.
# - The run-time helpers use only torch; they join ``helpers.HELPERS`` on import.
"""

from __future__ import annotations

import ast
from typing import Any

import ml_dtypes
import numpy as np
import torch

from codegen.torch.code import call
from codegen.torch.helpers import runtime_helpers
from msc.ir.dtype import DType

__all__ = ["CARRIERS", "TORCH_NAMES", "cast", "to_torch", "from_torch"]

CARRIERS: dict[DType, DType] = {
    DType.INT4: DType.INT8,
    DType.INT2: DType.INT8,
    DType.UINT4: DType.UINT8,
    DType.UINT2: DType.UINT8,
    DType.FLOAT4_E2M1: DType.FLOAT32,
}
# torch dtype names for the types above (the carrier's) and float8_e8m0.
TORCH_NAMES: dict[DType, str] = {
    DType.INT4: "int8",
    DType.INT2: "int8",
    DType.UINT4: "uint8",
    DType.UINT2: "uint8",
    DType.FLOAT4_E2M1: "float32",
    DType.FLOAT8_E8M0: "float8_e8m0fnu",
}
_BITS = {DType.INT4: 4, DType.INT2: 2, DType.UINT4: 4, DType.UINT2: 2}


def _msc_wrap_int(x, bits, signed, carrier):
    """``x`` as a ``bits``-bit integer (truncating floats, wrapping like two's complement)."""
    v = x.to(torch.int64)
    mask = (1 << bits) - 1
    if signed:
        half = 1 << (bits - 1)
        return (((v + half) & mask) - half).to(carrier)
    return (v & mask).to(carrier)


def _msc_round_f4e2m1(x):
    """``x`` rounded to float4_e2m1 (nearest even, saturating at 6), held in float32."""
    x = x.to(torch.float32)
    a = x.abs()
    q = torch.where(
        a < 2, torch.round(a * 2) / 2, torch.where(a < 4, torch.round(a), torch.round(a / 2) * 2)
    )
    q = torch.copysign(q.clamp(max=6.0), x)
    return torch.where(torch.isnan(x), torch.full_like(x, -0.0), q)


runtime_helpers(_msc_wrap_int, _msc_round_f4e2m1)


def cast(e: Any, x: Any, to: DType) -> ast.expr:
    """Code for ``cast(x, to)`` where ``to`` has a carrier (see the module docstring)."""
    if to is DType.FLOAT4_E2M1:
        return call(e.helper("_msc_round_f4e2m1").id, x)
    carrier = CARRIERS[to]
    return call(e.helper("_msc_wrap_int").id, x, _BITS[to], to.is_signed, carrier)


def to_torch(arr: np.ndarray) -> torch.Tensor:
    """A numpy array (ml_dtypes' sub-byte types included) as the tensor a generated module
    takes: sub-byte types as their carrier, float8_e8m0 as torch.float8_e8m0fnu."""
    arr = np.asarray(arr)
    dt = DType.from_numpy(arr.dtype)
    if dt in CARRIERS:
        return torch.from_numpy(arr.astype(CARRIERS[dt].to_numpy()))
    if dt is DType.FLOAT8_E8M0:
        return torch.from_numpy(np.array(arr).view(np.uint8)).view(torch.float8_e8m0fnu)
    raise ValueError(f"{dt.short} needs no carrier; use torch.from_numpy")


def from_torch(t: torch.Tensor, dtype: DType) -> np.ndarray:
    """A generated module's output tensor of graph dtype ``dtype`` as a numpy array of that
    dtype. Raises ValueError when a carrier holds a value its sub-byte type cannot."""
    t = t.detach().cpu()
    if dtype is DType.FLOAT8_E8M0:
        return t.view(torch.uint8).numpy().view(ml_dtypes.float8_e8m0fnu)
    arr = t.numpy()
    if dtype not in CARRIERS:
        raise ValueError(f"{dtype.short} needs no carrier; use Tensor.numpy()")
    out = arr.astype(dtype.to_numpy())
    back = out.astype(arr.dtype)
    same = (
        (back == arr) | (np.isnan(back) & np.isnan(arr)) if arr.dtype.kind == "f" else back == arr
    )
    if not np.all(same):
        raise ValueError(f"a {dtype.short} carrier holds values outside the type")
    return out
