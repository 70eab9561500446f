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


def one_error(code: int, err: str, *words: str) -> str:
    """Assert a refusal as the CLI promises it: exit 2, one ``msc: error:`` line (indented
    detail lines allowed), no traceback, naming ``words``; returns the error line."""
    lines = err.splitlines()
    assert code == 2, err
    assert lines and lines[0].startswith("msc: error: "), err
    assert all(line.startswith("  ") for line in lines[1:]), err
    assert "Traceback" not in err, err
    for w in words:
        assert w in err, err
    return lines[0]
