"""``verify``: run two models on the same inputs, compare their outputs, and on a mismatch name
the first node where they diverge.

Inputs are random (seeded) of each input's dtype, or come from an .npz file keyed by input name.
Integer inputs that index something (embedding rows, gather; through casts and reshapes) are
drawn inside that range. Integer inputs named like masks (``attention_mask``) are 0/1 padding
masks: each row (the last axis) is 1s then 0s, with at least one 1, since a fully masked
attention row is where exporters legitimately differ (softmax over nothing). The report states
each integer input's range. A and B's inputs pair by name when every name of A is an input of
B, else by position. Models whose inputs differ (one takes an input the other does not: an
exporter dropped an unused ``token_type_ids``, or a mask one side computes) run only on given
inputs (an .npz or a mapping) that name every input of both; random ones would feed one side
something the other never sees.

Inputs that are not tensors (ONNX sequences and optionals) are fed as onnxruntime takes them: a
sequence is a list of arrays, an optional is None when empty, else its element. Random ones
follow fixed rules, so a seed always gives the same feeds: a sequence holds
``SEQUENCE_LENGTH`` elements of one shape (the element type's shape, its unknown dims 2); the
i-th optional input (in input order) is empty when bit i of the seed is set (seed 0: every
optional holds a value; seed 1: the first is empty; ...), and with k optional inputs the j-th
sequence input has no elements when bit k + j is set. In an .npz file a sequence input
``xs`` is the arrays ``xs[0]``, ``xs[1]``, ... (``xs[]`` alone: no elements), and an optional
input with no array is empty.

Per output: ``max_abs = max|a - b|`` and ``max_rel = max(|a - b| / |b|)`` over elements with
``|b| > atol``; an output passes when ``|a - b| <= atol + rtol * |b|`` everywhere (numpy's
``allclose``), and integer or bool outputs must be equal. NaN and infinities compare by
position and sign: NaN against NaN and +inf against +inf match, anything else against them is
a mismatch (``compare``). Tolerances must be finite and >= 0. A sequence compares element by
element with the same tolerances (a length difference is a mismatch), and an empty optional
matches only an empty one.

Per-layer localisation: nodes of A and B are paired as in ``msc.analysis.diff.match``; both
models are run again with the outputs of every paired node exposed, and the paired values are
compared in A's topological order with the same tolerance. The first one that fails is where
the models diverge; its node, source op and module path are reported. Shape arithmetic (values
computed from the inputs' shapes alone, not their data) is not compared: exporters compute
shapes their own ways, so a pairing of such values says nothing about where data diverges.

# NOTE: verification never modifies either model: exposing intermediates works on copies
# (an msc graph copy with extra outputs, an ONNX model copy with extra graph outputs).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from msc.analysis.canonical import canonicalize
from msc.analysis.diff import _positions, match
from msc.analysis.model import Model, random_array
from msc.analysis.shapes import concrete_shape
from msc.errors import MscError
from msc.ir import symexpr
from msc.ir.attrs import attr_equal
from msc.ir.graph import Graph, Value, Weight
from msc.ir.types import OptionalType, SequenceType, TensorType, ValueType, tensor_of
from msc.text.printer import format_type

__all__ = [
    "verify_models",
    "VerifyReport",
    "compare",
    "make_inputs",
    "input_ranges",
    "load_inputs",
    "shape_arithmetic",
    "format_verify",
    "SEQUENCE_LENGTH",
]

# How many elements a random sequence input holds: more than one, so an op that reads one
# element, or concatenates them, is seen doing it on several.
SEQUENCE_LENGTH = 3

# An integer input with such a name is a mask (attention_mask, key_padding_mask, ...).
MASK_NAME = re.compile(r"mask", re.IGNORECASE)

# Ops that pass an integer value's elements on unchanged (or only re-laid): an index input
# read through them still indexes the table at their end.
_PASSES_VALUES = frozenset(
    {"cast", "reshape", "flatten", "squeeze", "unsqueeze", "expand", "transpose", "slice",
     "concat", "tile", "identity"}
)  # fmt: skip

# Random integers that index nothing: [0, DEFAULT_HIGH).
DEFAULT_HIGH = 10


@dataclass
class Compared:
    """How two arrays compare."""

    name: str
    shape: str
    ok: bool
    max_abs: float
    max_rel: float
    mismatched: int = 0
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "shape": self.shape,
            "ok": self.ok,
            "max_abs": self.max_abs,
            "max_rel": self.max_rel,
            "mismatched": self.mismatched,
            "note": self.note,
        }


@dataclass
class Divergence:
    """The first paired node whose output differs."""

    node: str
    op: str
    source_op: str
    module: str
    b_node: str
    b_op: str
    value: Compared
    agreeing_before: int
    paired_by: str = ""  # how the pairing found B's node: name, module, structure, dataflow
    certain: bool = True  # paired by name or structure with the same op: it is this node

    def to_json(self) -> dict[str, Any]:
        return {
            "paired_by": self.paired_by,
            "certain": self.certain,
            "node": self.node,
            "op": self.op,
            "source_op": self.source_op,
            "module": self.module,
            "b_node": self.b_node,
            "b_op": self.b_op,
            "value": self.value.to_json(),
            "agreeing_before": self.agreeing_before,
        }


@dataclass
class NodeError:
    """One compared pair of intermediate values: A's and B's node positions and the error."""

    a_index: int
    b_index: int
    name: str
    ok: bool
    max_abs: float
    max_rel: float


@dataclass
class VerifyReport:
    ok: bool
    rtol: float
    atol: float
    inputs: list[str]
    input_source: str
    outputs: list[Compared]
    divergence: Divergence | None = None
    compared_values: int = 0
    notes: list[str] = field(default_factory=list)
    a_label: str = "A"
    b_label: str = "B"
    node_errors: list[NodeError] = field(default_factory=list)  # every compared pair, in order

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "rtol": self.rtol,
            "atol": self.atol,
            "inputs": self.inputs,
            "input_source": self.input_source,
            "outputs": [o.to_json() for o in self.outputs],
            "divergence": None if self.divergence is None else self.divergence.to_json(),
            "compared_values": self.compared_values,
            "notes": self.notes,
        }


def check_tolerances(rtol: float, atol: float) -> None:
    """Tolerances must be finite and non-negative: a NaN tolerance makes every comparison
    false, which would read as "no mismatch", and an infinite one accepts anything."""
    for name, tol in (("rtol", rtol), ("atol", atol)):
        if not isinstance(tol, int | float) or not math.isfinite(tol) or tol < 0:
            raise MscError(f"{name} must be a finite number >= 0, got {tol!r}")


def describe(x: Any) -> str:
    """A value as a report shows it: ``float32[2, 3]``, ``str[2]``, ``seq[3] of float32[2]``
    (a sequence), ``none`` (an empty optional)."""
    if x is None:
        return "none"
    if isinstance(x, list | tuple):
        kinds = list(dict.fromkeys(describe(e) for e in x))
        more = ", ..." if len(kinds) > 3 else ""
        return f"seq[{len(x)}]" + (f" of {', '.join(kinds[:3])}{more}" if kinds else "")
    a = np.asarray(x)
    return f"{'str' if a.dtype == object else a.dtype}{list(a.shape)}"


def _compare_nested(name: str, a: Any, b: Any, rtol: float, atol: float) -> Compared:
    """Sequences element by element, optionals by presence then value."""
    inf = float("inf")
    shape = describe(a)
    if a is None or b is None:
        if a is None and b is None:
            return Compared(name, shape, True, 0.0, 0.0)
        side, other = ("A", b) if a is None else ("B", a)
        why = f"{side}'s optional is empty, the other's holds {describe(other)}"
        return Compared(name, shape, False, inf, inf, note=why)
    if not isinstance(a, list | tuple) or not isinstance(b, list | tuple):
        return Compared(name, shape, False, inf, inf, note=f"{shape} vs {describe(b)}")
    parts = [compare(f"{name}[{i}]", x, y, rtol, atol) for i, (x, y) in enumerate(zip(a, b))]
    bad = [i for i, p in enumerate(parts) if not p.ok]
    notes = [f"sequence lengths differ: {len(a)} vs {len(b)}"] if len(a) != len(b) else []
    if bad:
        first = parts[bad[0]].note
        notes.append(
            f"element(s) {', '.join(map(str, bad))} differ"
            + (f" (element {bad[0]}: {first})" if first else "")
        )
    return Compared(
        name,
        shape,
        not notes,
        inf if len(a) != len(b) else max((p.max_abs for p in parts), default=0.0),
        inf if len(a) != len(b) else max((p.max_rel for p in parts), default=0.0),
        sum(p.mismatched for p in parts),
        "; ".join(notes),
    )


def compare(name: str, a: Any, b: Any, rtol: float, atol: float) -> Compared:
    """Compare ``a`` (from A) with ``b`` (from B, the reference for relative error).

    Finite values agree when ``|a - b| <= atol + rtol * |b|`` (exactly, for integer and bool
    outputs). Non-finite values compare by position and sign: NaN matches NaN and +inf matches
    +inf at the same position; a NaN or an infinity facing anything else is a mismatch, on
    either side. ``max_abs``/``max_rel`` are over the finite pairs; the note counts the
    non-finite mismatches. Sequences (lists of arrays) compare element by element with the
    same tolerances; an empty optional (None) matches only another.
    """
    check_tolerances(rtol, atol)
    if a is None or b is None or isinstance(a, list | tuple) or isinstance(b, list | tuple):
        return _compare_nested(name, a, b, rtol, atol)
    a, b = np.asarray(a), np.asarray(b)
    shape = f"{a.dtype}{list(a.shape)}"
    if a.shape != b.shape:
        return Compared(
            name,
            shape,
            False,
            float("inf"),
            float("inf"),
            note=f"shapes differ: {list(a.shape)} vs {list(b.shape)}",
        )
    if a.size == 0:
        return Compared(name, shape, True, 0.0, 0.0)
    if a.dtype == object or b.dtype == object:  # str tensors: the text, element by element
        n_bad = int(np.count_nonzero(a.astype(object) != b.astype(object)))
        return Compared(name, f"str{list(a.shape)}", n_bad == 0, 0.0, 0.0, n_bad)
    exact = a.dtype.kind in "biu" or b.dtype.kind in "biu"
    x = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    y = b.astype(np.complex128 if b.dtype.kind == "c" else np.float64)
    finite = np.isfinite(x) & np.isfinite(y)
    with np.errstate(invalid="ignore", over="ignore"):
        same = (np.isnan(x) & np.isnan(y)) | (np.isinf(x) & np.isinf(y) & (x == y))
        bad_special = ~finite & ~same
        err = np.where(finite, np.abs(x - y), 0.0)
        limit = np.where(finite, atol + rtol * np.abs(np.where(finite, y, 0.0)), 0.0)
        bad = (err > 0 if exact else err > limit) & finite
        ref = np.abs(np.where(finite, y, 0.0))
        big = finite & (ref > atol)
        rel = float(np.max(err[big] / ref[big])) if big.any() else 0.0
    n_special = int(np.count_nonzero(bad_special))
    n_bad = int(np.count_nonzero(bad)) + n_special
    note = f"{n_special} NaN/inf value(s) where the other side differs" if n_special else ""
    return Compared(name, shape, n_bad == 0, float(np.max(err)), rel, n_bad, note)


def _index_uses(v: Value, seen: set[int] | None = None) -> Iterator[tuple[Any, int]]:
    """(node, input position) of every use of ``v``, looking through ops that pass its
    values on unchanged."""
    seen = set() if seen is None else seen
    for node, i in v.uses:
        if node.op in _PASSES_VALUES and not (node.op == "slice" and i != 0):
            for out in node.outputs:
                if id(out) not in seen and out.type is not None:
                    seen.add(id(out))
                    yield from _index_uses(out, seen)
        else:
            yield node, i


def _index_bound(v: Value) -> int | None:
    """An exclusive upper bound for an integer input used as an index, when its uses say
    (the smallest table it indexes, through casts and reshapes)."""
    bound: int | None = None
    for node, i in _index_uses(v):
        hi: Any = None
        if node.op == "embedding" and i == 1:
            w = node.inputs[0]
            hi = w.type.shape[0] if w is not None and w.type.shape else None
        elif node.op in ("gather", "gather_elements") and i == 1:
            x = node.inputs[0]
            if x is not None and x.type.shape is not None:
                hi = x.type.shape[node.attrs["axis"] % len(x.type.shape)]
        elif node.op == "one_hot":
            hi = node.attrs["depth"]
        if isinstance(hi, int):
            bound = hi if bound is None else min(bound, hi)
    return bound


def _is_mask(v: Value, t: TensorType) -> bool:
    return t.dtype.is_integer and bool(MASK_NAME.search(v.name))


def _padding_mask(shape: tuple[int, ...], dtype: Any, rng: np.random.Generator) -> np.ndarray:
    """A 0/1 mask: along the last axis, a random number (at least one) of 1s, then 0s."""
    if not shape:
        return np.ones((), dtype)
    n = shape[-1]
    ones = rng.integers(1, n + 1, size=shape[:-1]) if n else np.zeros(shape[:-1], np.int64)
    return (np.arange(n) < np.asarray(ones)[..., None]).astype(dtype)


def input_ranges(g: Graph) -> dict[str, str]:
    """How ``make_inputs`` draws each integer tensor input, by name: ``in [0, 64)`` (the
    table it indexes, else ``DEFAULT_HIGH``) or ``0/1 mask (1s then 0s per row)``."""
    out: dict[str, str] = {}
    for v in g.inputs:
        t = v.type
        if not isinstance(t, TensorType) or not t.dtype.is_integer:
            continue
        if _is_mask(v, t):
            out[v.name] = "0/1 mask (1s then 0s per row)"
        else:
            out[v.name] = f"in [0, {_index_bound(v) or DEFAULT_HIGH})"
    return out


def make_inputs(
    g: Graph, seed: int = 0, binding: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """Random inputs for ``g``: seeded, of each input's dtype; symbols take their binding or 2
    (clipped to their range). Integer inputs are drawn as ``input_ranges`` says. A sequence
    input is a list of ``SEQUENCE_LENGTH`` arrays of one shape (unknown dims 2); the i-th
    optional input is None (empty) when bit i of ``seed`` is set, else a value of its element
    type; with k optional inputs, the j-th sequence input has no elements when bit k + j is
    set."""
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {}
    optionals = 0
    seq_bit = sum(isinstance(v.type, OptionalType) for v in g.inputs)  # after the optionals'
    for v in g.inputs:
        t = v.type
        if isinstance(t, OptionalType):
            optionals += 1
            if (seed >> (optionals - 1)) & 1:
                out[v.name] = None
                continue
            t = t.element
        if isinstance(t, SequenceType):
            e = t.element
            if e.shape is None:
                raise MscError(
                    f"cannot make input {v.name!r} ({v.type}): its elements' rank is unknown; "
                    f"give it with --inputs (an .npz with {v.name}[0], {v.name}[1], ...)"
                )
            shape = concrete_shape(
                e.with_shape([2 if d is None else d for d in e.shape]), binding or {}
            )
            n = 0 if (seed >> seq_bit) & 1 else SEQUENCE_LENGTH
            seq_bit += 1
            out[v.name] = [random_array(e.dtype, shape, rng) for _ in range(n)]
            continue
        shape = concrete_shape(t, binding or {})
        if t is v.type and _is_mask(v, t):
            out[v.name] = _padding_mask(tuple(shape), t.dtype.to_numpy(), rng)
            continue
        hi = _index_bound(v) if t.dtype.is_integer and t is v.type else None
        out[v.name] = random_array(t.dtype, shape, rng, high=hi or DEFAULT_HIGH)
    return out


def load_inputs(path: str | Path, g: Graph, *, by_name: bool = False) -> dict[str, Any]:
    """Inputs from an .npz file keyed by input name (or ``arr_0``, ``arr_1``... by position,
    unless ``by_name``). A sequence input ``xs`` is the arrays ``xs[0]``, ``xs[1]``, ...
    (``xs[]`` alone: an empty one); an optional input with no array is empty (None)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise MscError(f"{path}: no such file") from None
    except (OSError, ValueError) as e:
        raise MscError(f"{path}: not a readable .npz file: {e}") from None
    out: dict[str, Any] = {}
    for i, v in enumerate(g.inputs):
        t = v.type
        keys = (v.name,) if by_name else (v.name, f"arr_{i}")
        items = [k for k in keys if f"{k}[0]" in data or f"{k}[]" in data]
        if isinstance(t, OptionalType):
            if not items and not any(k in data for k in keys):
                out[v.name] = None
                continue
            t = t.element
        if isinstance(t, SequenceType):
            if not items:
                raise MscError(
                    f"{path}: no arrays for sequence input {v.name!r}: give its elements as "
                    f"{v.name}[0], {v.name}[1], ... ({v.name}[] for none); has {sorted(data)}"
                )
            k, seq = items[0], []
            while f"{k}[{len(seq)}]" in data:
                where = f"element {len(seq)} of input {v.name!r}"
                seq.append(_checked(path, data[f"{k}[{len(seq)}]"], t.element, where))
            out[v.name] = seq
            continue
        arr = data.get(v.name, None if by_name else data.get(f"arr_{i}"))
        if arr is None:
            raise MscError(f"{path}: no array for input {v.name!r} (has {sorted(data)})")
        out[v.name] = _checked(path, arr, t, f"input {v.name!r}")
    return out


def _checked(path: str | Path, arr: np.ndarray, t: TensorType, where: str) -> np.ndarray:
    want = t.dtype.to_numpy()
    if t.dtype.is_string and arr.dtype.kind == "U":  # .npz holds text as unicode
        arr = arr.astype(object)
    if arr.dtype != want:
        raise MscError(f"{path}: {where} is {arr.dtype}, the model takes {want}")
    return arr


def _signature(g: Graph) -> str:
    return ", ".join(f"{v.name} {format_type(v.type)}" for v in g.inputs) or "nothing"


def _fits(x: ValueType, y: ValueType) -> bool:
    """One value can feed both inputs: the same kind of value (tensor, sequence, optional)
    around tensors of the same kind of dtype, rank, and no two different sizes."""
    if type(x) is not type(y):
        return False
    if not isinstance(x, TensorType):
        return _fits(x.element, y.element)  # type: ignore[union-attr]
    assert isinstance(y, TensorType)
    if x.dtype.to_numpy().kind != y.dtype.to_numpy().kind:
        return False
    if x.shape is None or y.shape is None:
        return True
    if len(x.shape) != len(y.shape):
        return False
    return all(
        not (isinstance(p, int) and isinstance(q, int) and p != q) for p, q in zip(x.shape, y.shape)
    )


def same_signature(a: Graph, b: Graph) -> bool:
    """A and B take the same inputs (by name, else by position)."""
    names_b = {v.name: v for v in b.inputs}
    by_name = all(v.name in names_b for v in a.inputs)
    return len(a.inputs) == len(b.inputs) and all(
        _fits(x.type, (names_b[x.name] if by_name else y).type) for x, y in zip(a.inputs, b.inputs)
    )


def check_signatures(a: Graph, b: Graph) -> None:
    """A and B must take the same inputs (by name, else by position), or verify has nothing
    to compare unless told every input of both: say so, with both signatures."""
    if not same_signature(a, b):
        raise MscError(
            "A and B have different input signatures, so they cannot run on the same random "
            "inputs (give --inputs an .npz with every input of both by name):\n"
            f"A takes {_signature(a)}\nB takes {_signature(b)}"
        )


def _cast(x: Any, t: ValueType) -> Any:
    """``x`` (an array, a list of arrays, or None) in the dtype of ``t``'s tensors."""
    if x is None:
        return None
    if isinstance(x, list | tuple):
        return [_cast(e, t) for e in x]
    want = tensor_of(t).dtype.to_numpy()
    return x if x.dtype == want else x.astype(want)


def _named_inputs(g: Graph, given: Mapping[str, Any], side: str) -> dict[str, Any]:
    """``g``'s inputs by name from the inputs the user gave (A and B take different ones)."""
    missing = [v.name for v in g.inputs if v.name not in given]
    if missing:
        raise MscError(
            f"the given inputs have no value for {side}'s input(s) {', '.join(missing)}: A and "
            f"B take different inputs, so the inputs must name every input of both\n"
            f"{side} takes {_signature(g)}"
        )
    return {v.name: _cast(given[v.name], v.type) for v in g.inputs}


def _inputs_for(b: Graph, a: Graph, inputs: Mapping[str, Any]) -> dict[str, Any]:
    names_b = {v.name for v in b.inputs}
    check_signatures(a, b)
    by_name = all(v.name in names_b for v in a.inputs)
    out = {}
    for i, v in enumerate(b.inputs):
        src = inputs[v.name] if by_name else inputs[a.inputs[i].name]
        out[v.name] = _cast(src, v.type)
    return out


def verify_models(
    a: str | Path | Model,
    b: str | Path | Model,
    inputs: str | Path | Mapping[str, Any] | None = None,
    *,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    seed: int = 0,
    binding: Mapping[str, int] | None = None,
    localize: bool = True,
    progress: Callable[[str], None] | None = None,
    per_node: bool = False,
) -> VerifyReport:
    """Run A and B on the same inputs and compare; see the module docstring. ``per_node``
    compares every corresponding intermediate value even when the outputs match (for the
    overlays of ``msc verify --html`` / ``--node-data``)."""
    check_tolerances(rtol, atol)
    say = progress or (lambda s: None)
    ma, mb = Model.of(a), Model.of(b)
    ga, gb = ma.graph, mb.graph
    ranges: dict[str, str] = {}
    if inputs is None:
        feeds = make_inputs(ga, seed, binding)
        source = f"random, seed {seed}"
        ranges = input_ranges(ga)
    elif isinstance(inputs, str | Path):
        feeds = load_inputs(inputs, ga)
        source = str(inputs)
    else:
        feeds = dict(inputs)
        source = "given"
    for k, v in {**mb.fixed, **ma.fixed}.items():  # what a runtime keeps (LiteRT's state)
        if k in feeds:
            feeds[k] = v
            ranges[k] = "(the model's initial state: its runtime keeps it)"
    same = same_signature(ga, gb)
    if inputs is None or same:
        feeds_b = _inputs_for(gb, ga, feeds)
    elif isinstance(inputs, str | Path):  # B's own inputs, by name, from the same file
        feeds = load_inputs(inputs, ga, by_name=True)
        feeds_b = load_inputs(inputs, gb, by_name=True)
    else:
        feeds = _named_inputs(ga, inputs, "A")
        feeds_b = _named_inputs(gb, inputs, "B")
    say("running A")
    free = _free_dims(ga, binding) if inputs is None else []
    hint = (
        f" (on random inputs whose free dims ({', '.join(free)}) are 2 within their ranges: "
        "if the model needs other sizes, give them with --input-shape)"
        if free
        else ""
    )
    outs_a, _ = _guard(ma, lambda: ma.run(feeds), hint)
    say("running B")
    outs_b, _ = _guard(mb, lambda: mb.run(feeds_b))
    report = VerifyReport(
        ok=True,
        rtol=rtol,
        atol=atol,
        inputs=[
            f"{k} {describe(v)}" + (f" {ranges[k]}" if k in ranges else "")
            for k, v in {**feeds_b, **feeds}.items()
            if k in feeds or not same
        ],
        input_source=source,
        outputs=[],
        a_label=ma.label,
        b_label=mb.label,
    )
    if len(outs_a) != len(outs_b):
        report.ok = False
        report.notes.append(f"A gives {len(outs_a)} outputs, B gives {len(outs_b)}")
    names = [v.name for v in ga.outputs] + [f"output{i}" for i in range(len(ga.outputs), 999)]
    for i, (x, y) in enumerate(zip(outs_a, outs_b)):
        c = compare(names[i], x, y, rtol, atol)
        report.outputs.append(c)
        report.ok &= c.ok
    if (not report.ok and localize) or per_node:
        say("localising the first divergence")
        _localize(report, ma, mb, feeds, feeds_b, rtol, atol)
        _output_errors(report, ga, gb)
    return report


def _output_errors(report: VerifyReport, ga: Graph, gb: Graph) -> None:
    """The nodes producing the graph outputs get the outputs' comparisons (the intermediate
    comparisons cover only values that are not outputs)."""
    done = {e.a_index for e in report.node_errors}
    pos_a = {id(n): i for i, n in enumerate(ga.nodes)}
    pos_b = {id(n): i for i, n in enumerate(gb.nodes)}
    for c, x, y in zip(report.outputs, ga.outputs, gb.outputs):
        if x.producer is None or y.producer is None or pos_a[id(x.producer)] in done:
            continue
        i, j = pos_a[id(x.producer)], pos_b[id(y.producer)]
        report.node_errors.append(NodeError(i, j, c.name, c.ok, c.max_abs, c.max_rel))
        done.add(i)


def _free_dims(g: Graph, binding: Mapping[str, int] | None) -> list[str]:
    """The symbols (and ``?`` for unnamed dims) of ``g``'s input shapes ``binding`` leaves
    free: ``make_inputs`` sizes them 2."""
    out: set[str] = set()
    for v in g.inputs:
        for d in tensor_of(v.type).shape or ():
            if d is None:
                out.add("?")
            elif not isinstance(d, int):
                out.update(x.name for x in symexpr.symbols(d) if x.name not in (binding or {}))
    return sorted(out)


def _guard(m: Model, fn: Callable[[], Any], hint: str = "") -> Any:
    try:
        return fn()
    except MscError:
        raise
    except Exception as e:
        msg = str(e).strip().splitlines()
        raise MscError(
            f"{m.label}: running it failed: {type(e).__name__}: {msg[0] if msg else ''}{hint}"
        ) from None


def _localize(
    report: VerifyReport,
    ma: Model,
    mb: Model,
    feeds: dict[str, Any],
    feeds_b: dict[str, Any],
    rtol: float,
    atol: float,
) -> None:
    # When the graphs do not pair node for node (one exporter folded BatchNorm, wrote linear
    # as gemm, ...), pair their canonical forms: a canonical value keeps the name of a value of
    # the model itself, so it can be read from the model as it runs.
    ga, gb = ma.graph, mb.graph
    m = match(ga, gb)
    whole = len(m.nodes) == len(ga.nodes) == len(gb.nodes) and all(
        m.nodes[id(n)].op == n.op for n in ga.nodes
    )
    orig_a, orig_b = ga, gb
    if not whole:
        ga, gb = canonicalize(ga).graph, canonicalize(gb).graph
        m = match(ga, gb)
    pairs: list[tuple[Any, Value, Value]] = []
    shapes = shape_arithmetic(ga) | shape_arithmetic(gb)
    for n in ga.nodes:
        c = m.nodes.get(id(n))
        if c is None or len(c.outputs) != len(n.outputs):
            continue
        if c.op == n.op and not _attrs_equal(n, c):
            continue  # the same op told to do something else: not the same value
        for x, y in zip(n.outputs, c.outputs):
            # Values of different shapes are not the same value whatever paired their nodes.
            if _same_type(x.type, y.type) and not isinstance(x, Weight):
                if id(x) not in shapes and id(y) not in shapes:
                    pairs.append((n, x, y))
    if not pairs:
        report.notes.append("no nodes correspond between A and B; cannot localise")
        return
    try:
        _, va = ma.run(feeds, [x.name for _, x, _ in pairs])
        _, vb = mb.run(feeds_b, [y.name for _, _, y in pairs])
    except MscError as e:
        report.notes.append(f"cannot run with intermediate values exposed: {e}")
        return
    agreeing = 0
    # Per-node results are positions in the models' own graphs (for overlays).
    pos_a = {id(n): i for i, n in enumerate(ga.nodes)}
    pos_b = {id(n): i for i, n in enumerate(gb.nodes)}
    if not whole:
        pa, pb = _positions(ga, orig_a), _positions(gb, orig_b)
        pos_a = {k: pa.get(i, -1) for k, i in pos_a.items()}
        pos_b = {k: pb.get(i, -1) for k, i in pos_b.items()}
    for n, x, y in pairs:
        if x.name not in va or y.name not in vb:
            continue
        c = compare(f"%{x.name} ~ %{y.name}", va[x.name], vb[y.name], rtol, atol)
        b = m.nodes[id(n)]
        # Every pair is kept for per-node overlays; the first failing one is the divergence.
        report.node_errors.append(
            NodeError(pos_a[id(n)], pos_b[id(b)], c.name, c.ok, c.max_abs, c.max_rel)
        )
        if report.divergence is not None:
            continue
        report.compared_values += 1
        if c.ok:
            agreeing += 1
            continue
        how = m.how[id(n)]
        report.divergence = Divergence(
            node=n.name or f"#{ga.nodes.index(n)}",
            op=n.op,
            source_op=n.provenance.op,
            module=n.provenance.module,
            b_node=b.name or f"#{gb.nodes.index(b)}",
            b_op=b.op,
            value=c,
            agreeing_before=agreeing,
            paired_by=how,
            certain=how in ("name", "module", "structure") and n.op == b.op,
        )
    if report.divergence is not None or report.ok:
        return
    report.notes.append(
        f"all {report.compared_values} corresponding intermediate values agree; the outputs "
        "differ after the last corresponding node"
    )


def shape_arithmetic(g: Graph) -> set[int]:
    """ids of the values of ``g`` computed from its inputs' shapes (``shape`` ops) and
    constants, but from no input's data. A node with subgraphs may read anything: data."""
    data = {id(v) for v in g.inputs}
    shaped: set[int] = set()
    for n in g.nodes:
        ins = [id(v) for v in n.inputs if v is not None]
        if n.op == "shape":
            kind = shaped
        elif any(i in data for i in ins) or next(n.subgraphs(), None) is not None:
            kind = data
        elif any(i in shaped for i in ins):
            kind = shaped
        else:
            continue  # constants and weights alone
        kind.update(id(v) for v in n.outputs)
    return shaped


def _attrs_equal(n: Any, c: Any) -> bool:
    return set(n.attrs) == set(c.attrs) and all(attr_equal(n.attrs[k], c.attrs[k]) for k in n.attrs)


def _same_type(tx: ValueType, ty: ValueType) -> bool:
    if type(tx) is not type(ty):
        return False
    if not isinstance(tx, TensorType):
        return _same_type(tx.element, ty.element)  # type: ignore[union-attr]
    assert isinstance(ty, TensorType)
    if tx.dtype is not ty.dtype or tx.shape is None or ty.shape is None:
        return tx.dtype is ty.dtype and tx.shape is None and ty.shape is None
    return len(tx.shape) == len(ty.shape) and all(
        p == q or not (isinstance(p, int) and isinstance(q, int))
        for p, q in zip(tx.shape, ty.shape)
    )


def _e(x: float) -> str:
    return f"{x:.3g}" if np.isfinite(x) else str(x)


def format_verify(r: VerifyReport) -> str:
    """The text ``msc verify`` prints."""
    lines = [f"A: {r.a_label}", f"B: {r.b_label}"]
    lines.append(f"inputs ({r.input_source}): " + ", ".join(r.inputs))
    lines.append(f"outputs (rtol {r.rtol:g}, atol {r.atol:g})")
    rows = [["output", "value", "max abs", "max rel", ""]]
    for o in r.outputs:
        why = [f"{o.mismatched} elements"] if o.mismatched else []
        why += [o.note] if o.note else []
        verdict = "ok" if o.ok else f"MISMATCH ({'; '.join(why)})"
        rows.append([o.name, o.shape, _e(o.max_abs), _e(o.max_rel), verdict])
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    d = r.divergence
    if d is not None:
        where = f"node {d.node!r} ({d.op}"
        if d.source_op:
            where += f", from {d.source_op}"
        where += ")"
        if d.module:
            where += f" in module {d.module!r}"
        if d.certain:
            lines.append(f"first divergence: {where}")
        else:
            lines.append(
                f"diverges at or upstream of {where} (paired by {d.paired_by}, which does not "
                "pin the node down)"
            )
        if (d.b_node, d.b_op) != (d.node, d.op):
            lines.append(f"  corresponds to B's node {d.b_node!r} ({d.b_op})")
        lines.append(
            f"  {d.value.name}: max abs {_e(d.value.max_abs)}, max rel {_e(d.value.max_rel)}"
            + (f" ({d.value.note})" if d.value.note else "")
        )
        lines.append(
            f"  supported by {d.agreeing_before} corresponding value(s) before it that agree "
            f"({r.compared_values} compared)"
        )
    lines += [f"note: {n}" for n in r.notes]
    lines.append("result: " + ("match" if r.ok else "MISMATCH"))
    return "\n".join(lines) + "\n"
