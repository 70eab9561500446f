"""The ``msc`` command under a supervisor: the work runs in a forked child; the parent only
waits, so a fatal signal in the child is still one ``msc: error:`` line, exit 2, with the
child's staging removed.

Why: weights are file regions mapped on access (msc.ir.tensor.FileRegion). A file truncated
or replaced by another program while msc reads a mapping of it raises SIGBUS, which Python
cannot catch (the faulting access repeats as soon as a handler returns), so the process died
with no message and left its staging behind. Regions are checked (device, inode, size, times)
before every mapping, which catches a file changed earlier; only a change *during* the read
reaches the signal, and this turns that into an error. A crash in native code (SIGSEGV in a
runtime on a hostile model) is reported the same way.

# NOTE: invariants
# - Only the real command line is supervised (``msc.cli.main()`` with no argv), on POSIX with
#   fork and sigwaitinfo; ``MSC_SUPERVISE=0`` turns it off. The fork happens before any work,
#   while the process is still one thread of Python (numpy's BLAS pool handles fork itself).
# - The parent forwards SIGINT, SIGTERM and SIGHUP sent to it by another process; a terminal's
#   Ctrl-C reaches the whole process group, child included, and is not sent twice. The child
#   dies with the parent (PR_SET_PDEATHSIG, SIGTERM: it cleans up as for a kill).
# - The child records every staging name it creates (msc.io.files.log_staging) in an unlinked
#   file both share; after a fatal signal the parent removes those that still exist: each was
#   created fresh, under a random name, by the child, so nothing else can be there.
# - A child that exits, or is ended by SIGINT / SIGTERM / SIGHUP / SIGKILL, passes its status
#   on unchanged (an interrupted command is not an error message).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile

from msc.io import files

__all__ = ["supervise", "MESSAGES"]

# What a fatal signal in the child means, as the one error line the parent prints.
MESSAGES = {
    signal.SIGBUS: "a file msc was reading (a model's weights) was truncated or rewritten "
    "while msc read it (bus error); nothing was written",
    signal.SIGSEGV: "msc crashed in native code (segmentation fault) while working on the "
    "model; nothing was written",
    signal.SIGFPE: "msc crashed in native code (arithmetic fault); nothing was written",
    signal.SIGILL: "msc crashed in native code (illegal instruction); nothing was written",
    signal.SIGABRT: "msc aborted in native code; nothing was written",
}
_PASS_ON = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_WAIT = {*_PASS_ON, signal.SIGCHLD}


def _enabled() -> bool:
    return (
        hasattr(os, "fork")
        and hasattr(signal, "sigwaitinfo")
        and os.environ.get("MSC_SUPERVISE", "1") != "0"
    )


def supervise() -> int | None:
    """Fork: in the child return None (go on with the command); in the parent wait for the
    child and return the command's exit code (see the module docstring). Returns None too
    when supervision is off."""
    if not _enabled():
        return None
    log = tempfile.TemporaryFile(prefix="msc-staging-")
    sys.stdout.flush()
    sys.stderr.flush()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _WAIT)
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        log.close()
        return None
    if pid == 0:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        _die_with(parent)
        files.log_staging(os.dup(log.fileno()))
        log.close()
        return None
    try:
        status = _wait(pid)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    try:
        return _outcome(status, log)
    finally:
        log.close()


def _wait(pid: int) -> int:
    while True:
        info = signal.sigwaitinfo(_WAIT)
        if info.si_signo == signal.SIGCHLD:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status
        elif info.si_pid not in (0, pid):  # sent by a process (a terminal's has no pid)
            try:
                os.kill(pid, info.si_signo)
            except ProcessLookupError:
                pass


def _outcome(status: int, log) -> int:
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    sig = os.WTERMSIG(status)
    _remove_staging(log)
    if sig in MESSAGES:
        sys.stderr.write(f"msc: error: {MESSAGES[sig]}\n")
        sys.stderr.flush()
        return 2
    return 128 + sig


def _remove_staging(log) -> None:
    log.seek(0)
    for raw in log.read().split(b"\0"):
        if not raw:
            continue
        p = os.fsdecode(raw)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p, ignore_errors=True)
        elif os.path.lexists(p):
            try:
                os.unlink(p)
            except OSError:
                pass


def _die_with(parent: int) -> None:
    """End this child (SIGTERM) when the parent ends, however it ends (Linux)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent ended before the request was in place
        os.kill(os.getpid(), signal.SIGTERM)
