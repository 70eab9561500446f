"""Hostile input and careless use: shared helpers of the security tests."""

from __future__ import annotations

import contextlib
import io


def run_cli(*argv: str) -> tuple[int, str, str]:
    """``msc ARGV`` in this process: (exit code, stdout, stderr)."""
    from msc.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()
