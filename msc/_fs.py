"""Temporary files and directories for atomic writes, created with the user's usual modes.

# NOTE: tempfile.mkstemp/mkdtemp create 0600 files and 0700 directories; a model file or
# directory that is renamed into place must get the modes an ordinary ``open``/``mkdir`` would
# give (0666/0777 less the umask), or users find outputs other tools cannot read.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["mkstemp", "mkdtemp", "drop_pages"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def mkstemp(directory: str | os.PathLike, prefix: str, suffix: str = ".tmp") -> tuple[int, str]:
    """``tempfile.mkstemp`` in ``directory``, with mode 0666 less the umask."""
    fd, path = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=directory)
    os.fchmod(fd, 0o666 & ~_umask())
    return fd, path


def mkdtemp(directory: str | os.PathLike, prefix: str) -> Path:
    """``tempfile.mkdtemp`` in ``directory``, with mode 0777 less the umask."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=directory))
    os.chmod(path, 0o777 & ~_umask())
    return path


def drop_pages(chunk) -> None:
    """Release this process's resident pages behind ``chunk`` when it views a read-only file
    mapping (np.memmap of a weight file), so streaming a model larger than RAM through a
    writer does not keep every page it read. The data stays in the page cache and is read
    again on the next access; writable (copy-on-write) mappings are left alone."""
    import mmap

    import numpy as np

    root = chunk
    while isinstance(root.base, np.ndarray):
        root = root.base
    mm = root.base
    if not isinstance(mm, mmap.mmap) or root.flags.writeable or chunk.nbytes == 0:
        return
    if not hasattr(mmap, "MADV_DONTNEED"):
        return
    base = np.frombuffer(mm, np.uint8).__array_interface__["data"][0]
    start = chunk.__array_interface__["data"][0] - base
    end = min(len(mm), start + chunk.nbytes)
    start -= start % mmap.PAGESIZE
    if 0 <= start < end:
        mm.madvise(mmap.MADV_DONTNEED, start, end - start)
