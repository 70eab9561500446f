"""Self-checks every frontend runs on the graphs it returns when ``MSC_CHECK=1``.

Validation plus a text round trip (print -> parse -> print byte-identical, and the parsed graph
structurally equal with names) catch whole classes of bugs cheaply; the test suite turns this on.
"""

from __future__ import annotations

import os

from msc.ir.graph import Graph

__all__ = ["enabled", "self_check", "checked"]


def enabled() -> bool:
    return os.environ.get("MSC_CHECK", "") not in ("", "0")


def self_check(graph: Graph) -> None:
    """Validate ``graph`` and check that its text form round-trips exactly."""
    from msc.ir.equal import structural_equal
    from msc.text import from_text, to_text

    graph.validate()
    text = to_text(graph)
    again = from_text(text)
    text2 = to_text(again)
    if text2 != text:
        raise AssertionError("MSC_CHECK: print -> parse -> print is not byte-identical")
    r = structural_equal(graph, again, names=True, weights="types")
    if not r:
        raise AssertionError(f"MSC_CHECK: text round trip changed the graph: {r.diff}")


def checked(graph: Graph) -> Graph:
    """``graph``, after ``self_check`` when MSC_CHECK is set."""
    if enabled():
        self_check(graph)
    return graph
