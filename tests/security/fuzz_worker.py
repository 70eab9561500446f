"""Runs msc's readers on hostile files in a child process with a time and memory limit.

Used by tests/security/test_security_fuzz.py:
``python tests/security/fuzz_worker.py LIMIT_MB SECONDS FILE...``
prints one JSON line per file and way of reading it (``msc.inspect`` through the API, then
``msc inspect`` through the command's own ``main``): ``{"file", "via", "outcome", "detail"}``
where outcome is ``ok`` (read and inspected), ``error`` (an MscError from the API; exit 2 with
one ``msc: error:`` line, indented detail lines allowed, from the command: the promised way to
refuse bad input),
``crash`` (anything else: a bug; detail holds the traceback or what the command printed),
``timeout`` or ``memory``.

# NOTE: the limits are set on this process before msc is imported, so a file that makes msc
# allocate without bound ends in MemoryError here, not in the test runner.
"""

from __future__ import annotations

import contextlib
import io
import json
import resource
import signal
import sys
import traceback


class _Timeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _Timeout


def main(argv: list[str]) -> int:
    limit_mb, seconds, files = int(argv[0]), int(argv[1]), argv[2:]
    resource.setrlimit(resource.RLIMIT_AS, (limit_mb << 20, limit_mb << 20))
    import msc
    from msc.cli import main as cli
    from msc.errors import MscError

    def api(f: str) -> tuple[str, str]:
        try:
            msc.inspect(f)
        except MscError as e:
            return "error", (str(e).splitlines() or [type(e).__name__])[0]
        return "ok", ""

    def command(f: str) -> tuple[str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli(["inspect", f])
        lines = err.getvalue().splitlines()
        if rc == 0 and "Traceback" not in err.getvalue():
            return "ok", ""
        # One error line; an unsupported-op report lists the ops on indented lines below it.
        rest_indented = all(line.startswith("  ") for line in lines[1:])
        if rc == 2 and lines and lines[0].startswith("msc: error: ") and rest_indented:
            return "error", lines[0]
        return "crash", f"exit {rc}; stderr: {err.getvalue()[-2000:]}"

    signal.signal(signal.SIGALRM, _alarm)
    for f in files:
        for via, run in (("api", api), ("cli", command)):
            signal.alarm(seconds)
            try:
                outcome, detail = run(f)
            except _Timeout:
                outcome, detail = "timeout", f"more than {seconds} s"
            except MemoryError:
                outcome, detail = "memory", f"more than {limit_mb} MB"
            except SystemExit as e:  # noqa: B036 - a reader must never end the process
                outcome, detail = "crash", f"SystemExit({e.code})"
            except BaseException:  # noqa: BLE001 - everything else is a bug to report
                outcome, detail = "crash", traceback.format_exc()[-3000:]
            finally:
                signal.alarm(0)
            rec = {"file": f, "via": via, "outcome": outcome, "detail": detail}
            print(json.dumps(rec), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
