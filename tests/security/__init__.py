"""Hostile input and careless use: shared helpers of the security tests."""

from __future__ import annotations

import contextlib
import io
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


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


def run_child(
    *argv: str, limit_mb: int = 2048, timeout: float = 120, cwd: str | None = None
) -> subprocess.CompletedProcess:
    """``msc ARGV`` in a child process limited in memory and time, as a user would run it
    (subprocess.TimeoutExpired when it outlives ``timeout``)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit_mb << 20, limit_mb << 20))

    return subprocess.run(
        [sys.executable, "-m", "msc", *argv],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        preexec_fn=limit,
        timeout=timeout,
        cwd=cwd,
    )


@contextlib.contextmanager
def hang_guard(what: str, seconds: int = 60):
    """Fail the test if the body is still running after ``seconds``: a guard against a hostile
    input that makes msc hang (a super-linear parse, a bomb), not a speed target, so the bound
    is generous and nothing asserts how long the body took. A child started by
    ``subprocess.run`` inside is killed when the guard fires."""

    def fire(signum, frame):
        pytest.fail(f"{what} was still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
