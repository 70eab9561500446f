"""PyTorch dtypes <-> msc DType, and tensors -> numpy without copying.

# NOTE: torch dtype objects never enter the graph: they are mapped here, at the boundary.
# bf16 has no numpy dtype of its own; its bits are viewed as ``ml_dtypes.bfloat16`` (no copy).
"""

from __future__ import annotations

import numpy as np
import torch

from msc.errors import ConversionError
from msc.ir import DType

__all__ = ["to_msc", "to_torch", "tensor_to_numpy"]

_TO_MSC: dict[torch.dtype, DType] = {
    torch.bool: DType.BOOL,
    torch.int8: DType.INT8,
    torch.int16: DType.INT16,
    torch.int32: DType.INT32,
    torch.int64: DType.INT64,
    torch.uint8: DType.UINT8,
    torch.uint16: DType.UINT16,
    torch.uint32: DType.UINT32,
    torch.uint64: DType.UINT64,
    torch.float16: DType.FLOAT16,
    torch.bfloat16: DType.BFLOAT16,
    torch.float32: DType.FLOAT32,
    torch.float64: DType.FLOAT64,
    torch.complex64: DType.COMPLEX64,
    torch.complex128: DType.COMPLEX128,
    torch.float8_e4m3fn: DType.FLOAT8_E4M3FN,
    torch.float8_e4m3fnuz: DType.FLOAT8_E4M3FNUZ,
    torch.float8_e5m2: DType.FLOAT8_E5M2,
    torch.float8_e5m2fnuz: DType.FLOAT8_E5M2FNUZ,
}
_TO_TORCH = {v: k for k, v in _TO_MSC.items()}

# Same-width integer dtypes used to reinterpret the bits of dtypes numpy lacks.
_BITS_AS = {
    torch.bfloat16: torch.int16,
    torch.float8_e4m3fn: torch.int8,
    torch.float8_e4m3fnuz: torch.int8,
    torch.float8_e5m2: torch.int8,
    torch.float8_e5m2fnuz: torch.int8,
}


def to_msc(dtype: torch.dtype) -> DType:
    """The msc dtype of a torch dtype; ConversionError for one msc has no name for."""
    try:
        return _TO_MSC[dtype]
    except KeyError:
        raise ConversionError(f"torch dtype {dtype} has no msc DType") from None


def to_torch(dtype: DType) -> torch.dtype:
    return _TO_TORCH[dtype]


def tensor_to_numpy(t: torch.Tensor) -> np.ndarray:
    """A numpy view of a CPU tensor's data (copied only when it is not on the CPU). A complex
    tensor is viewed in the real layout [..., 2] (real, imaginary) the graph carries it in."""
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t.resolve_conj().resolve_neg())
    if t.device.type != "cpu":
        t = t.cpu()
    bits = _BITS_AS.get(t.dtype)
    if bits is not None:
        return t.view(bits).numpy().view(to_msc(t.dtype).to_numpy())
    to_msc(t.dtype)
    return t.numpy()
