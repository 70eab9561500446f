"""Writing outputs safely: atomic replacement, staging with unpredictable names, and a check
that an output never destroys what was there.

# NOTE: invariants
# - Every output is staged under a fresh name in the target's own directory (mkstemp/mkdtemp:
#   random, created exclusively, so a symlink planted at a predictable name is never written
#   through) and renamed into place when complete; a failure or a signal removes the staging.
# - A file output replaces the file at its path atomically (a symlink there is replaced, not
#   its target); a directory there is refused.
# - A directory output is written only where there is nothing, an empty directory, or a
#   directory msc wrote before: one holding nothing but the files msc's writers produce
#   (``MSC_FILES``). Anything else there is the user's: refused, with the names.
# - tempfile.mkstemp/mkdtemp create 0600 files and 0700 directories; what is renamed into
#   place gets the modes an ordinary ``open``/``mkdir`` would give (0666/0777 less the umask),
#   or users find outputs other tools cannot read.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from msc.errors import MscError

__all__ = ["mkstemp", "mkdtemp", "drop_pages", "check_output", "write_text", "MSC_FILES"]

# What msc's directory writers put in a directory: msc.save, codegen.torch.save,
# codegen.relax.save (module.py, load.py), and the bytecode cache Python leaves when a
# generated .py is imported.
MSC_FILES = frozenset(
    {
        "graph.msc",
        "weights.safetensors",
        "model.py",
        "model.safetensors",
        "module.py",
        "load.py",
        "__pycache__",
    }
)


def check_output(path: str | os.PathLike, kind: str) -> Path:
    """Refuse, with an MscError naming the path and why, an output that cannot be written or
    would destroy something: ``kind`` is "file" or "dir". Returns the path."""
    text = os.fspath(path)
    p = Path(text)
    if not text.strip() or p.name in ("", ".", "..") or p.resolve() == Path(p.anchor or "/"):
        raise MscError(f"{text!r} is not a usable output path: name a file or directory")
    ancestor = p.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        if ancestor.is_symlink():
            raise MscError(f"{text}: {ancestor} is a broken symbolic link")
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise MscError(f"{text}: {ancestor} is a file, not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise MscError(f"{text}: cannot write in {ancestor} (permission denied)")
    if kind == "file" and p.is_dir() and not p.is_symlink():
        raise MscError(f"{text}: is a directory; name the file to write")
    if kind == "dir" and (p.exists() or p.is_symlink()):
        if p.is_symlink() or not p.is_dir():
            raise MscError(f"{text}: exists and is not a directory")
        foreign = sorted(e for e in os.listdir(p) if e not in MSC_FILES)
        if foreign:
            shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
            raise MscError(
                f"{text}: exists and holds files msc did not write ({shown}); "
                "choose another path or empty it"
            )
    return p


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (staged under a fresh name, then renamed)."""
    p = check_output(path, "file")
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = mkstemp(p.parent, prefix=f".{p.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p


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
