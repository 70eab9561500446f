"""A fresh namespace of Python identifiers per emission (after torch.fx's ``_Namespace``).

# NOTE: invariants
# - Every identifier handed out is ASCII ``[A-Za-z_][A-Za-z0-9_]*``, not a keyword, soft keyword,
#   builtin, dunder, or a name the generated code itself uses (torch, F, nn, self, helpers...).
#   ASCII only: Python NFKC-normalizes non-ASCII identifiers, so two distinct unicode names could
#   silently become one variable.
# - Uniqueness is checked *after* sanitizing: ``a.b`` and ``a_b`` get different identifiers.
# - ``source`` maps every identifier back to the source name it was made from.
"""

from __future__ import annotations

import builtins
import keyword
import re

__all__ = ["Namespace", "sanitize", "RESERVED", "TAKEN"]

# Names the generated module binds or relies on; never handed out for model values.
RESERVED = frozenset(
    {
        "torch",
        "nn",
        "F",
        "self",
        "math",
        "NAMES",
        "WEIGHT_KEYS",
        "load",
        "super",
        "os",
    }
)

_INVALID = re.compile(r"[^0-9A-Za-z_]+")
_TAKEN_ALWAYS = (
    frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) | frozenset(dir(builtins)) | RESERVED
)
# What no model value may be named, in any scope of the generated code.
TAKEN = _TAKEN_ALWAYS


def sanitize(name: str, fallback: str = "v") -> str:
    """A readable identifier for ``name`` (not yet unique): invalid runs become ``_``."""
    s = _INVALID.sub("_", name).strip("_")
    if not s:
        return fallback
    if s[0].isdigit():
        s = fallback + s
    return s


class Namespace:
    """Hands out unique identifiers and remembers the source name of each."""

    def __init__(self, reserved: frozenset[str] | set[str] = frozenset()) -> None:
        self._taken: set[str] = set(_TAKEN_ALWAYS) | set(reserved)
        self._count: dict[str, int] = {}
        self.source: dict[str, str] = {}

    def reserve(self, name: str) -> None:
        """Mark ``name`` as used by the generated code itself."""
        self._taken.add(name)

    def is_free(self, name: str) -> bool:
        return name not in self._taken

    def create(self, source: str, fallback: str = "v", base: str | None = None) -> str:
        """A fresh identifier for ``source`` (any string, even empty or hostile); ``base``, when
        given, is the readable name to start from instead of ``source`` itself."""
        base = sanitize(source if base is None else base, fallback)
        if base.startswith("_"):  # never private/dunder (name mangling, module globals)
            base = fallback + base
        name = base
        if name in self._taken or _is_dunder(name):
            n = self._count.get(base, 0)
            while True:
                n += 1
                name = f"{base}_{n}"
                if name not in self._taken:
                    break
            self._count[base] = n
        self._taken.add(name)
        self.source[name] = source
        return name


# Value names an exporter made up: torch.onnx's scope style (/layer1/layer1.0/conv1/Conv_output_0)
# and FX's tuple picks (getitem_3, a BatchNorm's output).
_SCOPED = re.compile(r"^/(?:.*/)?([A-Za-z]+)(?:_\d+)?_output_\d+$")
_GETITEM = re.compile(r"^getitem(?:_\d+)?$")


def readable(value_name: str, module: str, op: str, module_call: bool) -> str | None:
    """A name a person would write for a node's output, when its source name is one an
    exporter made up and the node knows its module: ``layer1_0_conv1`` for the conv of module
    ``layer1.0.conv1``, ``layer1_0_add`` for an add in ``layer1.0``; else None."""
    if not (_SCOPED.match(value_name) or _GETITEM.match(value_name)):
        return None
    if not module:  # the root module's own op (/Flatten_output_0)
        return op if _SCOPED.match(value_name) else None
    base = module.replace(".", "_")
    leaf = re.sub(r"_\d+$", "", module.rpartition(".")[2])
    return base if module_call or leaf == op else f"{base}_{op}"


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")
