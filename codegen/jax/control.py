"""JAX emitters of control flow: ``if`` as ``lax.cond``, ``loop`` as ``lax.fori_loop`` (a
counted loop) or ``lax.while_loop``.

# NOTE: invariants
# - A branch or body is a local function defined just before the call (``JaxCodegen.pre``);
#   it reads the enclosing values by name, as the subgraph reads them by reference.
# - A loop's carried values keep their shapes and dtypes (lax's loops require it; msc's
#   frontends give such loops). Scan outputs (stacked per iteration) are not written yet.
"""

from __future__ import annotations

from codegen.jax.core import JaxCodegen
from codegen.jax.registry import emitter
from msc.errors import Unsupported


def _def(e: JaxCodegen, name: str, params: list[str], lines: list[str], ret: str) -> None:
    e.pre.append(f"def {name}({', '.join(params)}):")
    e.pre += ["    " + x for x in lines] + [f"    return {ret}"]


def _tuple(xs: list[str]) -> str:
    return f"({xs[0]},)" if len(xs) == 1 else f"({', '.join(xs)})"


def _scalar(e: JaxCodegen, v, x: str) -> str:
    return x if v.type.rank == 0 else f"jnp.reshape({x}, ())"


@emitter("if")
def if_(e: JaxCodegen, node, cond):
    fns = []
    for key in ("then_branch", "else_branch"):
        g = node.attrs[key]
        name = e.fresh(key.split("_")[0] + "_fn")
        lines, outs = e.body(g, [])
        _def(e, name, [], lines, outs[0] if len(outs) == 1 else _tuple(outs))
        fns.append(name)
    return f"lax.cond({_scalar(e, node.inputs[0], cond)}, {fns[0]}, {fns[1]})"


def _counted(node) -> bool:
    """A loop with a trip count whose body always goes on (what lax.fori_loop runs)."""
    body = node.attrs["body"]
    go = body.outputs[0].producer
    return (
        node.inputs[0] is not None
        and node.inputs[1] is None
        and not body.inputs[1].uses
        and go is not None
        and go.op == "constant"
        and bool(go.attrs["value"].all())
    )


@emitter("loop")
def loop(e: JaxCodegen, node, trips, cond, *initial):
    body = node.attrs["body"]
    n = len(initial)
    if len(body.outputs) != n + 1:
        raise Unsupported("a loop with scan outputs (stacked per iteration)")
    carried = [e.fresh(v.name, "carried") for v in body.inputs[2:]]
    i = e.fresh(body.inputs[0].name, "i")
    init = _tuple(list(initial))
    if _counted(node):
        c = e.fresh(body.inputs[1].name, "cond")
        lines, outs = e.body(body, [i, c, *carried])
        state = e.fresh("carry")
        unpack = [f"{', '.join(carried)}, = {state}"]
        fn = e.fresh("body_fn")
        _def(e, fn, [i, state], unpack + lines, _tuple(outs[1:]))
        t = node.inputs[0].producer
        stop = str(int(t.attrs["value"])) if t is not None and t.op == "constant" else trips
        call = f"lax.fori_loop(0, {stop}, {fn}, {init})"
        return f"{call}[0]" if n == 1 else call
    c = e.fresh(body.inputs[1].name, "cond")
    lines, outs = e.body(body, [i, c, *carried])
    state = e.fresh("state")
    head = [f"{i}, {c}, {', '.join(carried)}, = {state}" if carried else f"{i}, {c} = {state}"]
    fn = e.fresh("body_fn")
    go = _scalar(e, body.outputs[0], outs[0])
    _def(e, fn, [state], head + lines, _tuple([f"{i} + 1", go, *outs[1:]]))
    test = e.fresh("cond_fn")
    check = f"{state}[1]" if trips is None else f"{state}[1] & ({state}[0] < {trips})"
    _def(e, test, [state], [], check)
    start = "jnp.asarray(True)" if cond is None else _scalar(e, node.inputs[1], cond)
    call = f"lax.while_loop({test}, {fn}, (0, {start}, *{init}))"
    return f"{call}[2]" if n == 1 else f"{call}[2:]"
