"""Test-wide settings: every graph a frontend returns is self-checked (MSC_CHECK=1)."""

from __future__ import annotations

import os

os.environ.setdefault("MSC_CHECK", "1")


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden", action="store_true", help="rewrite tests/golden/*.msc from the code"
    )
