"""The ONNX backend node test cases, as plain data for the conformance suites.

``onnx.backend.test.case.node.collect_testcases`` builds every case in memory (no files, no
downloads). ``backend_cases()`` yields them as ``BackendCase`` rows; both the ONNX -> msc ->
PyTorch suite (tests/test_onnx_conformance.py) and the ONNX-codegen suite can iterate them.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

__all__ = ["BackendCase", "backend_cases", "case_names"]


@dataclass(frozen=True)
class BackendCase:
    """One backend node case: the model, one data set, and the case's tolerances."""

    name: str
    model: onnx.ModelProto
    inputs: list[Any]  # numpy arrays in graph-input order (lists/None for sequences/optionals)
    expected: list[Any]  # expected outputs in graph-output order
    rtol: float
    atol: float

    @property
    def op_types(self) -> list[str]:
        return sorted({n.op_type for n in self.model.graph.node})

    @property
    def input_names(self) -> list[str]:
        init = {t.name for t in self.model.graph.initializer}
        return [v.name for v in self.model.graph.input if v.name not in init]

    def feeds(self) -> dict[str, Any]:
        return dict(zip(self.input_names, self.inputs))


@functools.lru_cache(maxsize=1)
def _collect() -> tuple[BackendCase, ...]:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        raw = collect_testcases(None)
    out = []
    for t in raw:
        if t.model is None or not t.data_sets:
            continue
        inputs, expected = t.data_sets[0]
        out.append(
            BackendCase(
                name=t.name,
                model=t.model,
                inputs=[_array(x) for x in inputs],
                expected=[_array(x) for x in expected],
                rtol=float(t.rtol),
                atol=float(t.atol),
            )
        )
    return tuple(out)


def _array(x: Any) -> Any:
    """Some cases give exact values as TensorProtos: as numpy arrays where numpy can hold them."""
    if isinstance(x, onnx.TensorProto):
        try:
            return onnx.numpy_helper.to_array(x)
        except Exception:  # noqa: BLE001 - e.g. 4-bit types: left as the proto
            return x
    return x


def backend_cases() -> Iterator[BackendCase]:
    """Every backend node case the installed onnx generates (about 1900 in onnx 1.23)."""
    yield from _collect()


def case_names() -> list[str]:
    return [c.name for c in _collect()]
