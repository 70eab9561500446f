"""Custom nodes in generated PyTorch: a call of the torch.library op they stand for.

A custom node ``ns::name@version`` (``name`` may end in ``.overload``) becomes
``torch.ops.ns.name.overload(arg=..., ...)`` when that op is registered in this process when
the code is generated; tensor inputs fill the op schema's tensor arguments in order, attributes
its other arguments by name. Anything else (an ONNX com.microsoft op, an op whose library is not
loaded) is refused with its name and domain.

# NOTE: invariants
# - Nothing from the model becomes code except as a checked identifier: namespace, op and
#   overload must be Python identifiers (not keywords) and resolve to a registered op;
#   attribute values are literals (msc.codegen.torch.code.const).
"""

from __future__ import annotations

import ast
import keyword
from typing import Any

import torch

from codegen.torch import code
from msc.ir.graph import Node
from msc.ops.custom import CustomOp, parse_custom

__all__ = ["resolve", "check", "call"]


def _ident(s: str) -> bool:
    return s.isidentifier() and not keyword.iskeyword(s)


def resolve(op: str) -> tuple[Any, str]:
    """(the OpOverload, its dotted call path) for custom op ``op``; ValueError with the reason
    when it is not a registered torch.library op."""
    c: CustomOp = parse_custom(op)  # type: ignore[assignment]
    opname, _, overload = c.name.partition(".")
    overload = overload or "default"
    where = f"custom op {op} (domain {c.domain!r})"
    if not all(_ident(p) for p in (c.domain, opname, overload)):
        raise ValueError(f"{where}: not a torch.library op name (ns::name[.overload])")
    try:
        packet = getattr(getattr(torch.ops, c.domain), opname)
        overload_fn = getattr(packet, overload)
    except (AttributeError, RuntimeError):
        raise ValueError(
            f"{where} is not a registered torch.library op; load the library that defines "
            "it before generating PyTorch code"
        ) from None
    return overload_fn, f"torch.ops.{c.domain}.{opname}.{overload}"


def check(node: Node) -> None:
    """ValueError with the reason when ``node`` cannot become a call: its op is not a
    registered torch.library op, or an attribute holds binary data (bytes: no torch schema
    argument takes it, and it never becomes code)."""
    resolve(node.op)
    binary = sorted(k for k, v in node.attrs.items() if isinstance(v, bytes))
    if binary:
        raise ValueError(
            f"custom op {node.op}: attribute(s) {binary} hold binary data (bytes), which no "
            "torch.library argument takes"
        )


def call(node: Node, args: list[Any]) -> ast.expr:
    """The call of ``node``'s op: ``args`` are its inputs as code (None for absent ones)."""
    check(node)
    fn, path = resolve(node.op)
    schema = fn._schema
    ins = iter(args)
    kwargs: dict[str, Any] = {}
    for a in schema.arguments:
        kind = str(a.type)
        if kind in ("Tensor", "Optional[Tensor]"):
            v = next(ins, None)
            if v is not None:
                kwargs[a.name] = v
        elif a.name in node.attrs:
            kwargs[a.name] = node.attrs[a.name]
    extra = set(node.attrs) - {a.name for a in schema.arguments}
    if extra or next(ins, None) is not None:
        raise ValueError(
            f"custom op {node.op}: its inputs or attributes {sorted(extra)} do not fit the "
            f"registered schema {schema}"
        )
    if not all(_ident(k) for k in kwargs):
        raise ValueError(f"custom op {node.op}: argument names are not identifiers")
    return code.call(path, **kwargs)
