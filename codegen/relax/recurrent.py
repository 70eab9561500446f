"""Relax emitters of the recurrent family."""

from __future__ import annotations

from codegen.relax.registry import unsupported

for _op in ("rnn", "gru", "lstm"):
    unsupported(_op, "not written yet")
