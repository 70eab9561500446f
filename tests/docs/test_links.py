"""README.md is not part of the docs site, so mkdocs does not check its links: every relative
link in it must name a file of the repository (and a heading of it, for a #fragment)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """The ids mkdocs gives a page's headings (lower case, punctuation dropped, - for spaces)."""
    out = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower())
            out.add(re.sub(r"[\s]+", "-", title.strip()))
    return out


def broken_links(page: Path) -> list[str]:
    bad = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in _anchors(dest):
            bad.append(f"{target}: no heading #{fragment}")
    return bad


def test_readme_links_resolve():
    assert broken_links(ROOT / "README.md") == []


def test_a_broken_link_is_caught(tmp_path):
    (tmp_path / "there.md").write_text("# A heading\n")
    page = tmp_path / "p.md"
    page.write_text("[a](there.md#a-heading) [b](missing.md) [c](there.md#nope) [d](https://x.y)")
    assert broken_links(page) == ["missing.md: no such file", "there.md#nope: no heading #nope"]
