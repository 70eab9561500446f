"""What native libraries print, kept off the user's terminal.

TVM's C++ side logs straight to file descriptor 2 (``Warning: BlockBuilder destroyed with
remaining blocks!``, type-inference notes such as ``IndexPut: index tensor 0 has ndim=3``), so
Python's logging cannot mute it. msc reports what went wrong itself, in one line.

# NOTE: the capture swaps file descriptor 2 for a temporary file and puts it back on exit; what
# was captured is dropped, unless an exception that is not an MscError (a bug, not a user
# error) leaves the block: then it is written back to stderr after it, so nothing that helps
# debug msc is lost. Captures nest.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator

from msc.errors import MscError

__all__ = ["native_stderr_captured", "let_through"]

_through = False


def let_through(on: bool = True) -> None:
    """Let native output through the captures (``msc --verbose``)."""
    global _through
    _through = on


def _flush() -> None:
    with contextlib.suppress(Exception):
        sys.stderr.flush()


@contextlib.contextmanager
def native_stderr_captured() -> Iterator[None]:
    """Capture what is written to file descriptor 2 inside the block (see the module NOTE)."""
    if _through:
        yield
        return
    _flush()
    try:
        saved = os.dup(2)
    except OSError:  # no descriptor 2 to swap (a daemon): nothing reaches a terminal anyway
        yield
        return
    replay = False
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        except MscError:
            raise
        except BaseException:
            replay = True
            raise
        finally:
            _flush()
            os.dup2(saved, 2)
            os.close(saved)
            if replay:
                tmp.seek(0)
                with contextlib.suppress(OSError):
                    os.write(2, tmp.read())
