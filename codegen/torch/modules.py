"""Rebuild the module hierarchy from dotted weight names.

# NOTE: invariants
# - A weight ``a.b.weight`` lives at that path in the generated module, so ``state_dict()`` keys
#   equal the graph's weight names (and so a source PyTorch model's keys).
# - A node whose weights are exactly a torch module's parameters (``P.weight``/``P.bias`` used
#   by nothing else, nothing else under ``P.``) becomes that module (``nn.Conv2d`` ...) at ``P``;
#   every other weight is a registered parameter (float) or buffer at its path, inside plain
#   ``nn.Module``/``nn.ModuleList`` holders.
# - A name that cannot be a module path (an empty component, a component that is an
#   ``nn.Module`` attribute like ``training``, a path that is both a tensor and a holder) is
#   kept at the root under a sanitized name; ``keys`` maps it back to the source name.
# - A tied name (a weight's ``aliases``: alias -> weight) is the same tensor registered again
#   at its own path, at the end of ``__init__``, so ``state_dict()`` has both keys as the
#   source module had. A node the source ran in the module at an alias's path (its provenance
#   module: GPT-2's lm_head reading transformer.wte.weight) becomes that module there when
#   the rule fits, owning no weight: ``__init__`` ties its parameter
#   (``self.lm_head.weight = self.transformer.wte.weight``), and the weight's own module
#   (``nn.Embedding``) may be a library module although the head reads its weight too.
# - A list of instances of generated classes is written as what it repeats: ``[C(...) for _
#   in range(n)]`` when all are alike, ``[A(...), *[C(...) for _ in range(1, n)]]`` when
#   all but a first one of three or more are (a ResNet stage), so lists of several lengths
#   read alike and their holders can share a class taking the length.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from codegen.torch import code
from codegen.torch.names import sanitize
from codegen.torch.registry import ModuleRule
from msc.ir.graph import Graph, Node, Weight
from msc.ir.types import TensorType

__all__ = [
    "Leaf",
    "Param",
    "Alias",
    "Holder",
    "ModulePlan",
    "plan_modules",
    "constant_ctor",
    "block_init",
]


@dataclass
class Leaf:
    """A torch module standing for the nodes that use its weights."""

    prefix: str
    ctor: ast.expr
    roles: dict[str, Weight]
    calls: dict[Node, list[Any]] = field(default_factory=dict)


@dataclass
class Param:
    weight: Weight
    buffer: bool
    persistent: bool = True  # False: a constant, not part of state_dict()


@dataclass
class Alias:
    """A second name of a weight (tied parameters): the same tensor at another path."""

    weight: Weight


@dataclass
class Holder:
    children: dict[str, Holder | Leaf | Param | Alias] = field(default_factory=dict)
    # A list the source made an nn.Sequential (its module stack says so): rendered as one, so
    # the parent's forward can call it whole.
    sequential: bool = field(default=False, compare=False)
    # The arguments of its generated class's constructor (sizes that differ between the
    # instances of one class, e.g. a ResNet stage's channels).
    ctor_args: list[ast.expr] = field(default_factory=list, compare=False)

    @property
    def is_list(self) -> bool:
        """Render as nn.ModuleList: children "0".."n-1", all modules."""
        keys = list(self.children)
        return (
            bool(keys)
            and keys == [str(i) for i in range(len(keys))]
            and all(not isinstance(c, Param | Alias) for c in self.children.values())
        )


@dataclass
class ModulePlan:
    root: Holder
    leaves: dict[str, Leaf]  # prefix -> leaf
    node_leaf: dict[Node, Leaf]
    keys: dict[str, str]  # state_dict key -> source weight name (only where they differ)
    paths: dict[str, list[str]]  # source weight name -> components of its state_dict key
    aliases: list[tuple[list[str], Weight]] = field(default_factory=list)  # tied names
    # Keys of non-persistent buffers too large to write as code: __init__ reads them from the
    # weights file beside model.py (filled by init_statements).
    stored: list[str] = field(default_factory=list)
    # The module path of the class being emitted (its ``self``); empty: the root class.
    base: list[str] = field(default_factory=list)
    # id(Holder) -> the name of the generated class that holder is an instance of.
    classes: dict[int, str] = field(default_factory=dict)

    def access(self, parts: list[str]) -> ast.expr:
        """``self.a[0].b`` for the module path ``parts``, from the class of the block at
        ``base`` (the root class when empty), which must contain it."""
        base = self.base
        if parts[: len(base)] != base:
            raise ValueError(f"{'.'.join(parts)!r} is outside block {'.'.join(base)!r}")
        e: ast.expr = code.name("self")
        h: Holder | Leaf | Param | Alias = self.root
        for p in base:
            h = h.children[p]  # type: ignore[union-attr]
        start = h
        for p in parts[len(base) :]:
            if isinstance(h, Leaf):  # a parameter of a torch module
                e = code.attr_path(e, [p])
                continue
            assert isinstance(h, Holder)
            # The class itself is a plain nn.Module even when its children are named 0..n-1
            # (an nn.Sequential subclass): they are attributes, not items.
            e = code.attr_path(e, [int(p) if h.is_list and h is not start else p])
            h = h.children[p]
        return e

    def weight_expr(self, w: Weight) -> ast.expr:
        return self.access(self.paths[w.name])

    def add_constant(
        self, name: str, type: TensorType, value: Any = None, at: list[str] | None = None
    ) -> list[str]:
        """Register a tensor constant of the forward pass (``value``) as a non-persistent
        buffer of the holder at path ``at`` (the root by default), under ``name`` or a free
        variant of it; returns its path."""
        h = self.root
        for p in at or []:
            h = h.children[p]  # type: ignore[assignment]
        key, n = name, 0
        while key in h.children or key in _module_attrs() or not code.is_plain_attr(key):
            n += 1
            key = f"{name}_{n}"
        full = ".".join([*(at or []), key])
        h.children[key] = Param(Weight(full, type, value, role="constant"), True, False)
        return [*(at or []), key]


@lru_cache(maxsize=1)
def _module_attrs() -> frozenset[str]:
    import torch

    return frozenset(dir(torch.nn.Module()))


def _parts(name: str) -> list[str] | None:
    parts = name.split(".")
    if any(not p or p in _module_attrs() for p in parts):
        return None
    return parts


def _insert(root: Holder, parts: list[str], item: Leaf | Param | Alias) -> bool:
    h = root
    for p in parts[:-1]:
        c = h.children.get(p)
        if c is None:
            c = h.children[p] = Holder()
        if not isinstance(c, Holder):
            return False
        h = c
    if parts[-1] in h.children:
        return False
    h.children[parts[-1]] = item
    return True


def plan_modules(
    graph: Graph,
    rules: Callable[[str], ModuleRule | None],
    call_rule: Callable[[ModuleRule, Node], tuple[ast.expr, list[Any]] | None],
    is_buffer: Callable[[Weight], bool],
    is_constant: Callable[[Weight], bool] = lambda w: False,
    aliases: dict[str, str] | None = None,
    weights: dict[str, Weight] | None = None,
    fixed: Sequence[Leaf] = (),
) -> ModulePlan:
    """Decide which nodes become torch modules and where every weight lives (and every
    tied name in ``aliases``: alias -> weight name, where its path fits). ``weights``: the
    weights the module holds, by name (default: all of the graph's). ``fixed``: modules found
    otherwise (a group of nodes that is one nn.LSTM), whose weights are theirs alone, placed
    where no rule's module is and nothing else lives under their path."""
    weights = graph.weights if weights is None else weights
    aliases = aliases or {}
    # The tied names of each weight (alias -> weight): a node the source ran in the module at
    # an alias's path (GPT-2's lm_head reading transformer.wte.weight) is that module.
    tied_names: dict[str, set[str]] = {}
    for alias, name in aliases.items():
        tied_names.setdefault(name, set()).add(alias)
    groups: dict[str, list[tuple[Node, dict[str, Weight]]]] = {}
    tied_prefixes: set[str] = set()  # leaves at an alias's path: they own no weight
    for node in _all_nodes(graph):
        rule = rules(node.op)
        if rule is None:
            continue
        found = _role_weights(node, rule)
        if found is None:
            continue
        prefix, roles = found
        at = node.provenance.module
        names = [f"{at}.{r}" in tied_names.get(w.name, ()) for r, w in roles.items()]
        if at and at != prefix and all(names):
            prefix = at
            tied_prefixes.add(at)
        groups.setdefault(prefix, []).append((node, roles))
    # Nodes that read a tied weight as a module's parameter, wherever their module is: a
    # leaf's weight may be read by the leaves at its other names too.
    sharing: dict[str, set[int]] = {}
    for members in groups.values():
        for node, roles in members:
            for w in roles.values():
                if w.name in tied_names:
                    sharing.setdefault(w.name, set()).add(id(node))

    leaves: dict[str, Leaf] = {}
    owner: dict[str, str] = {}  # weight name -> leaf prefix
    for prefix, members in groups.items():
        leaf = _make_leaf(graph, weights, prefix, members, rules, call_rule, sharing)
        if leaf is None:
            continue
        leaves[prefix] = leaf
        if prefix in tied_prefixes:
            continue  # its parameters are tied in at the end of __init__
        for w in leaf.roles.values():
            owner[w.name] = prefix
        for extra in rules(members[0][0].op).extras:  # type: ignore[union-attr]
            if f"{prefix}.{extra}" in weights:
                owner[f"{prefix}.{extra}"] = prefix

    for leaf in fixed:
        mine = {w.name for w in leaf.roles.values()}
        if leaf.prefix in leaves or any(
            name == leaf.prefix or (name.startswith(leaf.prefix + ".") and name not in mine)
            for name in weights
        ) or not all(w.name in weights for w in leaf.roles.values()):  # fmt: skip
            continue
        leaves[leaf.prefix] = leaf
        owner.update((name, leaf.prefix) for name in mine)

    root = Holder()
    paths: dict[str, list[str]] = {}
    keys: dict[str, str] = {}
    placed: set[str] = set()
    homeless: list[Weight] = []
    for w in weights.values():
        prefix = owner.get(w.name)
        if prefix is not None:
            leaf = leaves[prefix]
            if prefix not in placed:
                parts = _parts(prefix)
                if parts is not None and _insert(root, parts, leaf):
                    placed.add(prefix)
                else:  # the module path does not fit: its weights become plain tensors
                    del leaves[prefix]
                    for ww in weights.values():
                        if owner.get(ww.name) == prefix:
                            del owner[ww.name]
                    prefix = None
            if prefix is not None:
                paths[w.name] = [*_parts(prefix), w.name[len(prefix) + 1 :]]  # type: ignore[misc]
                continue
        parts = _parts(w.name)
        const = is_constant(w)
        param = Param(w, const or is_buffer(w), not const)
        if parts is not None and _insert(root, parts, param):
            paths[w.name] = parts
        else:
            homeless.append(w)
    for w in homeless:
        base = "renamed_" + sanitize(w.name, "w")
        key, n = base, 0
        while key in root.children or key in _module_attrs():
            n += 1
            key = f"{base}_{n}"
        const = is_constant(w)
        root.children[key] = Param(w, const or is_buffer(w), not const)
        paths[w.name] = [key]
        keys[key] = w.name
    for prefix, leaf in list(leaves.items()):  # modules without parameters (nn.GELU)
        if leaf.roles or prefix in tied_prefixes:
            continue
        parts = _parts(prefix)
        if parts is None or not _insert(root, parts, leaf):
            del leaves[prefix]
    _items_in_order(root)
    for prefix in tied_prefixes:  # after the weights' own places: nn.Linear(bias=False)
        leaf = leaves.get(prefix)
        parts = _parts(prefix)
        if leaf is not None and (parts is None or not _insert(root, parts, leaf)):
            del leaves[prefix]  # the path does not fit: the nodes read the weight itself
    tied: list[tuple[list[str], Weight]] = []
    for alias, name in aliases.items():
        w = weights.get(name)
        parts = _parts(alias)
        if w is None or alias in graph.weights or parts is None:
            continue
        leaf = leaves.get(".".join(parts[:-1]))
        if leaf is not None and leaf.roles.get(parts[-1]) is w:
            tied.append((parts, w))  # the leaf's parameter, tied: ``lm_head.weight = ...``
        elif _insert(root, parts, Alias(w)):
            tied.append((parts, w))
    node_leaf = {n: leaf for leaf in leaves.values() for n in leaf.calls}
    return ModulePlan(root, leaves, node_leaf, keys, paths, tied)


def _items_in_order(h: Holder) -> None:
    """Children named 0..n-1 (a list's items) in their index order, whatever order they were
    placed in (a parameterless item is placed after the weights' modules)."""
    if h.children and all(k.isdigit() for k in h.children):
        h.children = dict(sorted(h.children.items(), key=lambda kv: int(kv[0])))
    for c in h.children.values():
        if isinstance(c, Holder):
            _items_in_order(c)


def _all_nodes(graph: Graph):
    for n in graph.nodes:
        yield n
        for sub in n.subgraphs():
            yield from _all_nodes(sub)


def _role_weights(node: Node, rule: ModuleRule) -> tuple[str, dict[str, Weight]] | None:
    from msc.ops import registry

    if not rule.roles:  # a module without parameters: where the source ran one
        return (source_module(node, rule.types), {}) if source_module(node, rule.types) else None

    schema = registry.get(node.op)
    specs = [s for s in schema.inputs if not s.variadic]
    if len(specs) != len(schema.inputs):
        return None
    found: dict[str, Weight] = {}
    prefix = None
    for spec, v in zip(specs, node.inputs):
        if spec.name not in rule.roles or v is None:
            continue
        if not isinstance(v, Weight):
            return None
        p, dot, leaf = v.name.rpartition(".")
        if not dot or leaf != spec.name or (prefix is not None and p != prefix):
            return None
        prefix = p
        found[spec.name] = v
    if prefix is None:
        return None
    return prefix, found


def source_module(node: Node, types: tuple[str, ...]) -> str:
    """The path of the module the source ran ``node`` in when that module's type is one of
    ``types`` (its innermost module, from the provenance stack), else ""."""
    stack = node.provenance.stack
    if not stack or not types:
        return ""
    path, t = stack[-1]
    return path if path and path == node.provenance.module and t in types else ""


def _make_leaf(graph, weights, prefix, members, rules, call_rule, sharing) -> Leaf | None:
    first_node, roles = members[0]
    rule = rules(first_node.op)
    for node, r in members:
        if node.op != first_node.op or r != roles or not _same_attrs(node, first_node):
            return None
    users = {id(n) for n, _ in members}
    for w in roles.values():
        ok = users | sharing.get(w.name, set())
        if any(id(n) not in ok for n, _ in w.uses) or w in graph.outputs:
            return None
    allowed = {f"{prefix}.{r}" for r in roles} | {f"{prefix}.{e}" for e in rule.extras}
    for name, w in weights.items():
        if name == prefix or (name.startswith(prefix + ".") and name not in allowed):
            return None
        if name in allowed and name not in {x.name for x in roles.values()} and w.uses:
            return None
    leaf = None
    for node, _ in members:
        got = call_rule(rule, node)
        if got is None:
            return None
        ctor, args = got
        if leaf is None:
            leaf = Leaf(prefix, ctor, roles)
        elif ast.dump(ctor) != ast.dump(leaf.ctor):
            return None
        leaf.calls[node] = args
    return leaf


def _same_attrs(a: Node, b: Node) -> bool:
    from msc.ir.attrs import attr_equal

    return a.attrs.keys() == b.attrs.keys() and all(
        attr_equal(a.attrs[k], b.attrs[k]) for k in a.attrs
    )


# ---------------------------------------------------------------- __init__ statements
def init_statements(plan: ModulePlan) -> list[ast.stmt]:
    """``super().__init__()`` then one statement per module, holder and tensor, then the
    tied names."""
    out: list[ast.stmt] = [ast.Expr(code.expr("super().__init__()"))]
    _emit_children(plan.root, code.name("self"), out, "", plan.stored, plan.classes)
    for parts, w in plan.aliases:
        owner = plan.access(parts[:-1])
        kept = _find(plan, plan.paths[w.name])
        key, value = parts[-1], plan.weight_expr(w)
        if isinstance(kept, Param) and kept.buffer:
            kw = [] if kept.persistent else [ast.keyword("persistent", ast.Constant(False))]
            out.append(_method(owner, "register_buffer", key, value, kw))
        elif code.is_plain_attr(key):
            out.append(ast.Assign([ast.Attribute(owner, key, ast.Store())], value))
        else:
            out.append(_method(owner, "register_parameter", key, value, []))
    return out


def _find(plan: ModulePlan, parts: list[str]) -> Holder | Leaf | Param | Alias:
    h: Holder | Leaf | Param | Alias = plan.root
    for p in parts:
        if not isinstance(h, Holder):
            return h  # a parameter of a torch module
        h = h.children[p]
    return h


def _method(owner: ast.expr, method: str, key: str, value: ast.expr, kw: list) -> ast.stmt:
    call = ast.Call(ast.Attribute(owner, method, ast.Load()), [ast.Constant(key), value], kw)
    return ast.Expr(call)


# A constant with at most this many elements is written as a literal in __init__.
LITERAL_ELEMENTS = 64
_LITERAL_DTYPES = frozenset("bool int8 int16 int32 int64 uint8 float16 float32 float64".split())


def constant_ctor(w: Weight) -> ast.expr | None:
    """Code that makes ``w``'s value (a non-persistent buffer, which no state_dict carries):
    ``torch.zeros`` / ``torch.full`` for one repeated value, ``torch.arange`` for an integer
    range (BERT's position_ids), a literal for a small tensor (rotary inv_freq); None when
    the value is none of these (it is then stored, and read from the weights file)."""
    if not w.has_data or w.type.dtype.name.lower() not in _LITERAL_DTYPES:
        return None
    import numpy as np

    arr = np.asarray(w.numpy())
    if arr.dtype.name not in _LITERAL_DTYPES:
        return None
    dt = w.type.dtype
    shape = tuple(int(d) for d in arr.shape)
    flat = arr.reshape(-1)
    if flat.size == 0:
        return code.call("torch.empty", shape, dtype=dt)
    first = flat[0].item()
    if bool(np.all(flat == flat[0])) and not (dt.is_floating and np.isnan(flat).any()):
        if first == 0 and not (dt.is_floating and np.signbit(flat[0])):
            return code.call("torch.zeros", shape, dtype=dt)
        return code.call("torch.full", shape, first, dtype=dt)
    if dt.is_integer and flat.size > 1:
        step = int(flat[1]) - int(first)
        ramp = np.arange(flat.size, dtype=np.int64) * step + int(first)
        if step and np.array_equal(flat.astype(np.int64), ramp):
            stop = int(first) + step * flat.size
            args = [stop] if first == 0 and step == 1 else [int(first), stop]
            e = code.call("torch.arange", *args, *([step] if step != 1 else []), dtype=dt)
            return e if len(shape) == 1 else code.expr("e.reshape(s)", e=e, s=shape)
    if flat.size <= LITERAL_ELEMENTS:
        values = (
            [code.shortest(x, arr.dtype) for x in arr.astype(np.float64).reshape(-1).tolist()]
            if dt.is_floating
            else arr.tolist()
        )
        if dt.is_floating and arr.ndim != 1:
            values = np.asarray(values, dtype=np.float64).reshape(arr.shape).tolist()
        return code.call("torch.tensor", values, dtype=dt)
    return None


def _tensor_ctor(w: Weight) -> ast.expr:
    shape = tuple(d if isinstance(d, int) else 0 for d in (w.type.shape or ()))
    return code.call("torch.empty", *(shape or [()]), dtype=w.type.dtype)


def block_init(plan: ModulePlan, holder: Holder, prefix: str) -> list[ast.stmt]:
    """``__init__`` statements of the class of a block whose state is ``holder`` at module
    path ``prefix`` (ending in a dot)."""
    out: list[ast.stmt] = [ast.Expr(code.expr("super().__init__()"))]
    _emit_children(holder, code.name("self"), out, prefix, plan.stored, plan.classes)
    return out


def _value_expr(child: Holder | Leaf | Param | Alias, classes: dict[int, str]) -> ast.expr:
    if isinstance(child, Leaf):
        return child.ctor
    if isinstance(child, Param):
        return code.call("nn.Parameter", _tensor_ctor(child.weight))
    if id(child) in classes:
        return code.call(classes[id(child)], *child.ctor_args)
    if child.is_list:
        kids = list(child.children.values())
        names = {classes.get(id(c)) for c in kids}
        args = {ast.dump(ast.List(c.ctor_args)) for c in kids if isinstance(c, Holder)}
        if len(kids) > 1 and len(names) == 1 and None not in names and len(args) == 1:
            cls = code.call(next(iter(names)), *kids[0].ctor_args)  # type: ignore[union-attr]
            if child.sequential:
                return code.expr("nn.Sequential(*[C for _ in range(n)])", C=cls, n=len(kids))
            return code.expr("nn.ModuleList([C for _ in range(n)])", C=cls, n=len(kids))
        if len(kids) > 2 and _repeated(kids[1:], classes):
            # A first layer of its own and the rest alike (a ResNet stage: the first block
            # changes the width): stages of several lengths are one class taking the length.
            first = _value_expr(kids[0], classes)
            cls = code.call(classes[id(kids[1])], *kids[1].ctor_args)  # type: ignore[union-attr]
            n = len(kids)
            if child.sequential:
                return code.expr("nn.Sequential(A, *[C for _ in range(1, n)])", A=first, C=cls, n=n)
            return code.expr("nn.ModuleList([A, *[C for _ in range(1, n)]])", A=first, C=cls, n=n)
        items = [_value_expr(c, classes) for c in kids]
        if child.sequential:
            return code.call("nn.Sequential", *items)
        return code.call("nn.ModuleList", items)
    return code.call("nn.Module")


def _repeated(kids: list, classes: dict[int, str]) -> bool:
    """Whether ``kids`` are instances of one generated class, constructed alike."""
    names = {classes.get(id(c)) for c in kids}
    args = {ast.dump(ast.List(c.ctor_args)) for c in kids if isinstance(c, Holder)}
    return (
        len(names) == 1
        and None not in names
        and len(args) == 1
        and len(kids) == len([c for c in kids if isinstance(c, Holder)])
    )


def _fill(
    h: Holder,
    here: ast.expr,
    out: list[ast.stmt],
    prefix: str,
    stored: list[str],
    classes: dict[int, str],
) -> None:
    """Statements for the contents of holder ``h``, which already exists at ``here``."""
    if id(h) in classes:  # an instance of a generated class: its own __init__ fills it
        return
    if h.is_list:  # leaves were built inline in the nn.ModuleList([...]) call
        for i, (k, c) in enumerate(h.children.items()):
            if isinstance(c, Holder):
                sub = ast.Subscript(here, ast.Constant(i), ast.Load())
                _fill(c, sub, out, f"{prefix}{k}.", stored, classes)
    else:
        _emit_children(h, here, out, prefix, stored, classes)


def _emit_children(
    h: Holder,
    parent: ast.expr,
    out: list[ast.stmt],
    prefix: str,
    stored: list[str],
    classes: dict[int, str],
) -> None:
    for key, child in h.children.items():
        if isinstance(child, Alias):
            continue  # registered at the end of __init__ (init_statements)
        kw: list[ast.keyword] = []
        if isinstance(child, Param) and child.buffer:
            method, value = "register_buffer", _tensor_ctor(child.weight)
            if not child.persistent:
                kw = [ast.keyword("persistent", ast.Constant(False))]
                # Not in state_dict: the module makes its value (load_state_dict of the
                # source's state_dict cannot give it), or reads it from the weights file.
                made = constant_ctor(child.weight)
                if made is None:
                    stored.append(prefix + key)
                else:
                    value = made
        else:
            value = _value_expr(child, classes)
            method = "register_parameter" if isinstance(child, Param) else "add_module"
            if code.is_plain_attr(key):
                method = ""
        if method:
            call = ast.Call(
                ast.Attribute(parent, method, ast.Load()), [ast.Constant(key), value], kw
            )
            out.append(ast.Expr(call))
        else:
            out.append(ast.Assign([ast.Attribute(parent, key, ast.Store())], value))
        if isinstance(child, Holder):
            here = code.attr_path(parent, [key])
            _fill(child, here, out, f"{prefix}{key}.", stored, classes)
