"""Where the ``msc`` command's own output goes, and the silence around it.

# NOTE: while a command runs, msc's messages go to the process's stdout and stderr as they were
# when it started; everything else written to them (torch's graph dumps and logs, onnxruntime's
# and TVM's C++ loggers, Python warnings) goes nowhere, down to the file descriptors, unless
# --verbose. Progress displays are drawn on msc's stderr only.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TextIO

__all__ = ["Progress", "BatchBar", "own_output", "quiet_exit", "isatty"]


class Progress:
    """Step-by-step progress on ``err`` (msc's stderr) with rich, or nothing."""

    def __init__(self, enabled: bool, err: TextIO | None = None) -> None:
        self._p: Any = None
        self._task: Any = None
        if not enabled:
            return
        try:
            from rich.console import Console
            from rich.progress import Progress as Bar
            from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn
        except ImportError:
            return
        self._p = Bar(
            SpinnerColumn(finished_text="[green]✓[/green]"),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=Console(file=err or sys.stderr),
            transient=True,
        )

    def __enter__(self) -> Callable[[str], None]:
        if self._p is not None:
            self._p.start()
        return self.step

    def step(self, text: str) -> None:
        if self._p is None:
            return
        if self._task is not None:
            self._p.update(self._task, completed=1, total=1)
        self._task = self._p.add_task(text, total=None)

    def __exit__(self, *exc: Any) -> None:
        if self._p is not None:
            self._p.stop()


def isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class BatchBar:
    """A progress bar with the count of each status, on stderr with rich, or nothing."""

    def __init__(self, enabled: bool, err: TextIO | None = None) -> None:
        self._p: Any = None
        self._task: Any = None
        if not enabled:
            return
        try:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )
        except ImportError:
            return
        self._p = Progress(
            TextColumn("batch"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=Console(file=err or sys.stderr),
            transient=True,
        )

    def __enter__(self) -> BatchBar:
        if self._p is not None:
            self._p.start()
        return self

    def __call__(self, entry: dict[str, Any] | None, report: Any) -> None:
        if self._p is None:
            return
        total = len(report.models)
        done = sum(m["status"] != "pending" for m in report.models)
        counts = "  ".join(f"{s} {n}" for s, n in report.counts.items() if s != "pending")
        if self._task is None:
            self._task = self._p.add_task(counts, total=total)
        self._p.update(self._task, completed=done, total=total, description=counts)

    def __exit__(self, *exc: Any) -> None:
        if self._p is not None:
            self._p.stop()


@contextlib.contextmanager
def own_output(verbose: bool) -> Iterator[tuple[TextIO, TextIO]]:
    """(stdout, stderr) for msc's own messages; while inside, everything else written to the
    process's stdout and stderr goes nowhere: Python-level writes (torch prints the graph of a
    failed export to sys.stderr), log records and warnings, and, at the file-descriptor
    level, the C++ loggers of onnxruntime and TVM. ``verbose``: let it all through."""
    out, err = sys.stdout, sys.stderr
    if verbose:
        yield out, err
        return
    for s in (out, err):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            s.flush()
    saved: list[tuple[int, int]] = []
    mine: list[TextIO] = []
    sink = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - closed below
    try:
        for fd, stream in ((1, out), (2, err)):
            try:
                keep = os.dup(fd)
            except OSError:  # no such descriptor (a closed stdout): nothing to silence
                continue
            saved.append((fd, keep))
            os.dup2(sink.fileno(), fd)
            if _fileno(stream) == fd:  # the real stream: msc's messages go where fd went
                mine.append(_reopen(keep, stream))
                stream = mine[-1]
            if fd == 1:
                out = stream
            else:
                err = stream
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                yield out, err
    finally:
        for s in mine:
            with contextlib.suppress(OSError, ValueError):
                s.flush()
        for fd, keep in saved:
            os.dup2(keep, fd)
            os.close(keep)
        sink.close()


def _fileno(stream: Any) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, ValueError, OSError):  # io.UnsupportedOperation is both
        return None


def _reopen(fd: int, like: Any) -> TextIO:
    """A text stream on ``fd`` (not closing it) that writes as ``like`` did."""
    return open(  # noqa: SIM115 - flushed by own_output; the descriptor is closed there
        fd,
        "w",
        encoding=getattr(like, "encoding", None) or "utf-8",
        errors=getattr(like, "errors", None) or "strict",
        closefd=False,
        buffering=1 if getattr(like, "line_buffering", False) else -1,
    )


def quiet_exit() -> None:
    """At the exit of the msc process: what libraries print while the interpreter shuts down
    (TVM's destructors warn about objects an error left behind) goes nowhere too. Runs after
    Python has printed any traceback, before modules are torn down."""
    for s in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            s.flush()
    with open(os.devnull, "w") as sink:
        for fd in (1, 2):
            with contextlib.suppress(OSError):
                os.dup2(sink.fileno(), fd)
