"""docs/ops.md is generated from the registries and must match them."""

from __future__ import annotations

from pathlib import Path

from msc.ops import doc, registry

DOC = Path(__file__).resolve().parents[2] / "docs" / "ops.md"


def test_ops_doc_matches_registries():
    assert DOC.read_text(encoding="utf-8") == doc.markdown(), (
        "docs/ops.md is stale: run `make docs` (python -m msc.ops.doc > docs/ops.md)"
    )


def test_every_canonical_op_is_documented():
    text = DOC.read_text(encoding="utf-8")
    for schema in registry:
        assert f"| `{schema.name}` |" in text, schema.name
