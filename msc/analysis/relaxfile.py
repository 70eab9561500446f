"""Reading a codegen.relax directory or a TVMScript file into a Relax IRModule.

The TVMScript is read, not run (msc.frontend.relax.script), unless the caller trusts it; the
directory's ``model.safetensors`` is data, its ``msc.relax.params`` metadata a JSON list of
tensor names checked before use, and each tensor must fit the parameter it binds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from msc.errors import MscError
from msc.io import safetensors

__all__ = ["read_relax"]


def read_relax(
    script: Path,
    weights: Path | None,
    say: Callable[[str], None] = lambda s: None,
    trusted: bool = False,
) -> Any:
    """The IRModule of a TVMScript file (read, not run, unless ``trusted``) with the data of a
    codegen.relax directory's ``model.safetensors`` as ``main``'s ``params`` attribute."""
    try:
        import tvm

        from msc.frontend.relax.script import parse_script
    except ImportError as e:
        raise MscError(
            f"{script}: reading TVMScript needs apache-tvm (the tvm extra): {e}"
        ) from None
    from msc.io.native import native_stderr_captured

    try:
        text = script.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise MscError(f"{script}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    say("parsing the TVMScript module")
    with native_stderr_captured():
        mod = parse_script(text, str(script), trusted=trusted)
    if isinstance(mod, tvm.relax.Function):
        mod = tvm.IRModule({"main": mod})
    if not isinstance(mod, tvm.IRModule):
        raise MscError(f"{script}: not a TVMScript module (it holds a {type(mod).__name__})")
    names = [gv.name_hint for gv in mod.functions]
    main = mod["main"] if "main" in names else None
    if not isinstance(main, tvm.relax.Function):
        raise MscError(f"{script}: the module has no Relax function 'main' (has {names})")
    num_input = _num_input(main, script)
    if weights is None:
        return mod
    params = main.params[num_input:]
    names = _relax_param_names(weights)
    arrays = safetensors.read(weights, mmap=False)
    if len(names) != len(params):
        raise MscError(
            f"{weights}: {len(names)} tensors for the {len(params)} parameters module.py's "
            "main takes after its inputs"
        )
    data = []
    for p, n in zip(params, names):
        if n not in arrays:
            raise MscError(f"{weights}: no tensor {n!r} (msc.relax.params names it)")
        arr = arrays[n]
        ty = p.ty
        dtype = str(getattr(ty, "dtype", ""))
        shape = getattr(ty, "shape", None)
        dims = list(shape.values) if isinstance(shape, tvm.relax.ShapeExpr) else None
        fits = dims is not None and len(dims) == arr.ndim and str(arr.dtype) == dtype
        if fits:
            fits = all(
                not hasattr(d, "value") or int(d.value) == s for d, s in zip(dims, arr.shape)
            )
        if not fits:
            raise MscError(
                f"{weights}: tensor {n!r} ({arr.dtype}{list(arr.shape)}) does not fit "
                f"module.py's parameter {p.name}: {ty}"
            )
        data.append(tvm.runtime.tensor(np.array(arr, order="C")))
    mod["main"] = main.with_attr("params", data)
    return mod


def _num_input(main: Any, script: Path) -> int:
    attrs = main.attrs or {}
    if "num_input" not in attrs:
        return 0
    n = attrs["num_input"]
    n = getattr(n, "value", n)
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= len(main.params):
        raise MscError(f"{script}: main's num_input {n} is not a count of its parameters")
    return n


def _relax_param_names(weights: Path) -> list[str]:
    """The tensor names ``msc.relax.params`` (safetensors metadata) lists, checked."""
    import json

    header, _ = safetensors.read_header(weights)
    meta = header.get("__metadata__")
    raw = meta.get("msc.relax.params") if isinstance(meta, dict) else None
    if not isinstance(raw, str):
        raise MscError(
            f"{weights}: its metadata has no msc.relax.params (the parameter names "
            "codegen.relax.save writes)"
        )
    try:
        names = json.loads(raw)
    except ValueError:
        names = None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise MscError(f"{weights}: msc.relax.params is not a JSON list of tensor names")
    return names
