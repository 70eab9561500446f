"""Reading a .pt2 file (``torch.export.save``) without running anything it contains.

``torch.export.load`` unpickles: sample inputs (with a fallback to ``weights_only=False``), any
weight or constant marked ``use_pickle``, custom and opaque objects, and it hands symbolic
shape expressions from the file to ``sympy.sympify``, which evaluates Python. A model file is
untrusted input (../shared/DESIGN.md, "Security model"), so msc reads the archive itself:

- the program is torch's JSON schema, parsed into torch's own dataclasses (data only);
- every symbolic expression in it is parsed by msc (msc.frontend.torch.pt2_expr), bounded in
  size, and built into sympy from a fixed table of constructors; torch gets the built object,
  never the string (its deserializer would ``sympify`` it, which evaluates Python);
- the input / output structures are rewritten to builtin containers (pt2_tree): an output
  class nobody registered (a transformers ``ModelOutput``) reads as its named fields, and no
  module the file names is imported;
- ``guards_code`` (Python source ``ep.module()`` compiles when sample inputs are present) is
  dropped;
- weights and constants are raw tensor bytes, viewed with the dtype, sizes and strides the
  archive's config gives; legacy weight files are read with ``torch.load(weights_only=True)``;
- sample inputs are not read at all (msc does not need them);
- after deserialization, every call in the graph must be an ATen/higher-order operator or a
  function of ``operator``/``math``, so running the program later cannot call anything else.

Anything that would need unpickling is refused with an MscError naming the archive member,
unless the caller passes ``trust_pickle=True`` (``--trust-pickle``), which uses
``torch.export.load`` as it is: only for files from a trusted source.

# NOTE: member sizes come from the zip directory and are checked before anything is read, so a
# compressed "zip bomb" or a member larger than the file is refused without allocating it; the
# members read together may expand to at most _RATIO_LIMIT times the archive (+ _SLACK), so
# many deflated members cannot add up to what one may not.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import operator
import os
import re
import zipfile
from pathlib import Path
from typing import Any

from msc.errors import MscError

__all__ = ["load_pt2"]

# What torch's serializer writes as a call target: registered operators, operator/math
# functions on sizes, and torch.sym_* helpers.
# (``torch.ops.aten.__and__.Tensor`` is an operator; anything reached by name is checked again
# after deserialization: it must be an operator or one of these functions.)
_TARGET = re.compile(r"torch\.ops\.|_operator\.[a-z_]+\Z|math\.[a-z_0-9]+\Z|torch\._?sym_[a-z_]+\Z")
_JSON_LIMIT = 1 << 30  # bytes of JSON a program may have (the largest real ones are ~100 MB)
# torch writes members stored (ratio 1); deflated JSON reaches ~10x. Together the members read
# may expand to this many times the archive's size, plus _SLACK for small archives.
_RATIO_LIMIT = 50
_SLACK = 16 << 20
_INT64 = 1 << 63


def load_pt2(path: str | os.PathLike, *, trust_pickle: bool = False) -> Any:
    """The ExportedProgram saved in ``path``; see the module docstring.

    Raises:
        MscError: the file is not a .pt2 archive msc can read safely (naming the member and
            why), or cannot be deserialized.
    """
    if trust_pickle:
        import torch

        return torch.export.load(os.fspath(path))
    try:
        z = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise MscError(f"{path}: not a .pt2 archive ({e})") from None
    with z:
        return _Reader(Path(path), z).program()


class _Reader:
    def __init__(self, path: Path, z: zipfile.ZipFile) -> None:
        self.path, self.z = path, z
        self.size = path.stat().st_size
        infos = z.infolist()
        if not infos:
            raise MscError(f"{path}: empty archive, not a .pt2 file")
        roots = {i.filename.split("/", 1)[0] for i in infos}
        if len(roots) != 1:
            raise MscError(f"{path}: members under several top folders, not a .pt2 archive")
        self.root = roots.pop() + "/"
        self.infos = {i.filename: i for i in infos}
        self.budget = self.size * _RATIO_LIMIT + _SLACK  # bytes left to expand into
        for name in self.infos:
            parts = name.split("/")
            if name.startswith("/") or "\\" in name or ".." in parts:
                raise MscError(f"{path}: member {name!r} has an unsafe path")

    # ------------------------------------------------------------------ members
    def has(self, name: str) -> bool:
        return self.root + name in self.infos

    def read(self, name: str, limit: int | None = None) -> bytes:
        info = self.infos.get(self.root + name)
        if info is None:
            raise MscError(f"{self.path}: member {self.root + name} is missing")
        if (limit is not None and info.file_size > limit) or (
            info.compress_type == zipfile.ZIP_STORED and info.file_size > self.size
        ):
            raise MscError(
                f"{self.path}: member {info.filename} claims {info.file_size} bytes, "
                "more than the archive can hold"
            )
        if info.file_size > self.budget:
            raise MscError(
                f"{self.path}: member {info.filename} claims {info.file_size} bytes; with the "
                f"members before it, the archive would expand to more than {_RATIO_LIMIT} "
                "times its size (a compressed archive bomb?)"
            )
        self.budget -= info.file_size
        try:
            data = self.z.read(info)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError) as e:
            raise MscError(f"{self.path}: member {info.filename}: {e}") from None
        if len(data) != info.file_size:
            raise MscError(f"{self.path}: member {info.filename} is truncated")
        return data

    def json(self, name: str, cls: Any) -> Any:
        from torch._export.serde.serialize import _dict_to_dataclass

        try:
            raw = json.loads(self.read(name, _JSON_LIMIT).decode("utf-8"))
            return _dict_to_dataclass(cls, raw)
        except MscError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError, AssertionError) as e:
            raise MscError(f"{self.path}: member {self.root + name} is not valid: {e}") from None
        except RecursionError:
            raise MscError(f"{self.path}: member {self.root + name} nests too deeply") from None

    def refuse(self, name: str, what: str) -> MscError:
        return MscError(
            f"{self.path}: member {self.root + name} holds {what}, which only unpickling can "
            "read, and unpickling runs code the file contains; pass --trust-pickle "
            "(trust_pickle=True) only if you trust the file"
        )

    # ------------------------------------------------------------------ the program
    def program(self) -> Any:
        from torch._export.serde import schema
        from torch._export.serde.serialize import ExportedProgramDeserializer
        from torch.export.pt2_archive import constants as c

        model = c.MODELS_FILENAME_FORMAT.format("model")
        if not self.has(model):
            raise MscError(f"{self.path}: no {self.root + model}: not a torch.export .pt2 file")
        serialized = self.json(model, schema.ExportedProgram)
        _check_program(self.path, serialized)
        state = self.payloads("model", c.WEIGHTS_DIR, c.WEIGHTS_CONFIG_FILENAME_FORMAT)
        consts = self.payloads("model", c.CONSTANTS_DIR, c.CONSTANTS_CONFIG_FILENAME_FORMAT)
        try:
            ep = ExportedProgramDeserializer(None).deserialize(serialized, state, consts, None)
        except MscError:
            raise
        except Exception as e:  # noqa: BLE001 - torch's own errors for a bad program
            first = (str(e).strip().splitlines() or [""])[0]
            raise MscError(
                f"{self.path}: cannot load the ExportedProgram: {type(e).__name__}: {first}"
            ) from None
        _check_calls(self.path, ep.graph_module)
        return ep

    def payloads(self, model: str, folder: str, config_format: str) -> dict[str, Any]:
        """Weights or constants by name, from raw bytes; pickled ones are refused."""
        import torch
        from torch._export.serde import schema
        from torch.export.pt2_archive import constants as c

        legacy = f"{folder}{model}.pt"
        if self.has(legacy):  # torch 2.7's format: a torch.save'd dict
            try:
                out = torch.load(io.BytesIO(self.read(legacy)), weights_only=True)
            except Exception as e:  # noqa: BLE001 - weights_only refuses anything but tensors
                raise self.refuse(legacy, f"data that weights-only loading rejects ({e})") from None
            if not isinstance(out, dict):
                raise MscError(f"{self.path}: member {self.root + legacy} is not a dict")
            return out
        config_name = config_format.format(model)
        if not self.has(config_name):
            raise MscError(f"{self.path}: member {self.root + config_name} is missing")
        config = self.json(config_name, schema.PayloadConfig)
        flat: dict[str, torch.Tensor] = {}
        out: dict[str, Any] = {}
        for fqn, meta in config.config.items():
            member = folder + meta.path_name
            if meta.use_pickle or not meta.path_name.startswith(
                (c.WEIGHT_FILENAME_PREFIX, c.TENSOR_CONSTANT_FILENAME_PREFIX)
            ):
                kind = "a custom or opaque object" if not meta.use_pickle else "a pickled tensor"
                raise self.refuse(member, f"{kind} ({fqn!r})")
            if meta.tensor_meta is None:
                raise MscError(f"{self.path}: member {self.root + member}: no tensor metadata")
            try:
                if meta.path_name not in flat:
                    flat[meta.path_name] = self.tensor(member, meta.tensor_meta)
                out[fqn] = _view(flat[meta.path_name], meta.tensor_meta, meta.is_param)
            except MscError:
                raise
            except (RuntimeError, ValueError, TypeError, KeyError, OverflowError) as e:
                raise MscError(f"{self.path}: member {self.root + member}: {e}") from None
        return out

    def tensor(self, member: str, meta: Any) -> Any:
        """The flat storage of one payload file, in the dtype its metadata names."""
        import torch
        from torch._export.serde.serialize import deserialize_scalar_type, deserialize_size

        dtype = deserialize_scalar_type(meta.dtype)
        data = self.read(member)
        if not data:
            if math.prod(deserialize_size(meta.sizes)) != 0:
                raise MscError(f"{self.path}: member {self.root + member} is empty")
            return torch.zeros(0, dtype=dtype)
        size = torch.empty((), dtype=dtype).element_size()
        if len(data) % size:
            raise MscError(
                f"{self.path}: member {self.root + member}: {len(data)} bytes is not a whole "
                f"number of {dtype} elements"
            )
        return torch.frombuffer(bytearray(data), dtype=dtype)


def _view(flat: Any, meta: Any, is_param: bool) -> Any:
    import torch
    from torch._export.serde.serialize import (
        deserialize_size,
        deserialize_storage_offset,
        deserialize_stride,
    )

    t = torch.as_strided(
        flat,
        deserialize_size(meta.sizes),
        deserialize_stride(meta.strides),
        deserialize_storage_offset(meta.storage_offset),
    )
    if is_param:
        return torch.nn.Parameter(
            t, requires_grad=bool(meta.requires_grad) and t.is_floating_point()
        )
    return t


# ---------------------------------------------------------------------- checks before torch
def _check_program(path: Path, serialized: Any) -> None:
    """Walk the deserialized schema: read every symbolic expression into sympy (torch gets the
    object, not the string), bound every size hint and range, rewrite every input / output
    structure to builtin containers, check every call target, and drop ``guards_code``."""
    from torch._export.serde import schema
    from torch._export.serde.union import _Union

    from msc.frontend.torch.pt2_expr import ExprReader, refuse
    from msc.frontend.torch.pt2_tree import rewrite_spec

    reader = ExprReader()
    serialized.guards_code = []
    for name, r in serialized.range_constraints.items():
        for v in (r.min_val, r.max_val):
            if v is not None and not (isinstance(v, int) and -_INT64 <= v <= _INT64):
                raise MscError(f"{path}: the range of symbol {name[:40]!r} has a bound {v!r}")
    stack = [serialized]
    while stack:
        x = stack.pop()
        if isinstance(x, schema.SymExpr):
            text = x.expr_str
            if not isinstance(text, str):
                raise MscError(f"{path}: a symbolic expression that is not a string")
            try:
                x.expr_str = reader.read(text)
            except (ValueError, RecursionError) as e:
                raise refuse(path, text, str(e)) from None
        elif isinstance(x, schema.SymExprHint):
            v = x.value
            if x.type == "as_int" and not (isinstance(v, int) and -_INT64 <= v < _INT64):
                raise MscError(f"{path}: a symbolic size's hint {v!r} is not an int64")
            if x.type == "as_float" and not (isinstance(v, float) and math.isfinite(v)):
                raise MscError(f"{path}: a symbolic float's hint {v!r} is not a finite float")
        elif isinstance(x, schema.ModuleCallSignature):
            for field in ("in_spec", "out_spec"):
                try:
                    setattr(x, field, rewrite_spec(getattr(x, field)))
                except ValueError as e:
                    raise MscError(f"{path}: the program's {field}: {e}") from None
        if isinstance(x, schema.Node) and not _TARGET.match(x.target):
            raise MscError(f"{path}: a node calls {x.target[:80]!r}: refused")
        if isinstance(x, _Union):  # one field set: reading another raises
            stack.append(x.value)
        elif dataclasses.is_dataclass(x):
            stack.extend(getattr(x, f.name) for f in dataclasses.fields(x))
        elif isinstance(x, list | tuple):
            stack.extend(x)
        elif isinstance(x, dict):
            stack.extend(x.values())


def _check_calls(path: Path, gm: Any) -> None:
    """After deserialization: every call is an operator torch registered, or a function of
    ``operator`` / ``math`` (what torch.export emits for symbolic sizes)."""
    import torch

    ok_types = (torch._ops.OpOverload, torch._ops.HigherOrderOperator)
    ok_functions = {
        f
        for mod in (operator, math)
        for name in dir(mod)
        if not name.startswith("__") and callable(f := getattr(mod, name))
    } | {getattr(torch, n) for n in dir(torch) if re.fullmatch(r"_?sym_[a-z_]+", n)}
    for mod in gm.modules():
        graph = getattr(mod, "graph", None)
        for node in graph.nodes if graph is not None else ():
            t = node.target
            if node.op == "call_function" and not isinstance(t, ok_types) and t not in ok_functions:
                raise MscError(f"{path}: node {node.name!r} calls {t!r}: refused")
