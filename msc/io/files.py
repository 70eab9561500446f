"""Writing outputs safely: atomic replacement, staging with unpredictable names, and a check
that an output never destroys what was there.

# NOTE: invariants
# - Every output is staged under a fresh name in the target's own directory (mkstemp/mkdtemp:
#   random, created exclusively, so a symlink planted at a predictable name is never written
#   through) and renamed into place when complete; a failure or a signal removes the staging.
# - A file output replaces the file at its path atomically (a symlink there is replaced, not
#   its target) only when that file is an output of the same kind msc wrote (its signature,
#   msc.io.marker); any other file there is the user's, and a directory there is refused.
# - A directory output is written only where there is nothing, an empty directory, or a
#   directory msc wrote before: recognised by the marker msc writes in it, listing its files
#   and their hashes (msc.io.marker), never by file names. Anything else there, or a file
#   changed since, is the user's: refused, with the names.
# - tempfile.mkstemp/mkdtemp create 0600 files and 0700 directories; what is renamed into
#   place gets the modes an ordinary ``open``/``mkdir`` would give (0666/0777 less the umask),
#   or users find outputs other tools cannot read.
# - Bulk data (weights) goes through ``DataFile``: direct I/O from one reused, page-aligned
#   staging buffer where the file system supports it, so the bytes are not copied into the
#   page cache on the way (that copy, not the disk, was most of the time of saving a model);
#   an ordinary buffered file elsewhere. Either way the file's bytes are exactly those
#   appended, and ``finish()`` makes them durable with one fsync.
# - A staging name is recorded for cleanup, and a sequence of renames that installs an output
#   completes, before a signal can stop the program: both run ``uninterrupted()``, and the
#   CLI's SIGINT / SIGTERM handlers (``deferring``) raise at the end of such a block rather
#   than inside it (a signal landing between creating a staging directory and the ``try``
#   that removes it left it behind; one between two renames could leave an old model file
#   beside a new data file).
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from msc.errors import MscError
from msc.ir.tensor import FileRegion

__all__ = [
    "mkstemp",
    "mkdtemp",
    "drop_pages",
    "check_output",
    "write_text",
    "DataFile",
    "uninterrupted",
    "deferring",
    "log_staging",
]

_critical = 0  # depth of uninterrupted() blocks
_pending: list[BaseException] = []  # what a deferring handler raises when they end


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """A block a ``deferring`` signal handler does not stop in the middle: the exception it
    raises is raised when the outermost such block ends (after the block's own work). Keep
    the block short: creating a staging name and recording it, or renames into place."""
    global _critical
    _critical += 1
    try:
        yield
    finally:
        _critical -= 1
        if not _critical and _pending:
            e = _pending[0]
            _pending.clear()
            raise e


def deferring(make: Callable[[], BaseException]) -> Callable[[int, object], None]:
    """A signal handler raising ``make()`` where the program is, or at the end of the
    ``uninterrupted()`` block it is in."""

    def handler(signum: int, frame: object) -> None:
        e = make()
        if _critical:
            _pending.append(e)
            return
        raise e

    return handler


def check_output(
    path: str | os.PathLike, kind: str, what: str | None = None, force: bool = False
) -> Path:
    """Refuse, with an MscError naming the path and why, an output that cannot be written or
    would destroy something: ``kind`` is "file" or "dir"; a file there is replaced only when
    it is a ``what`` output msc wrote (msc.io.marker.SIGNATURES, or "onnx"), or with
    ``force``. Returns the path."""
    from msc.io import marker

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
    if kind == "file" and p.is_file() and not p.is_symlink() and not force:
        if what is None:
            raise MscError(f"{text}: exists; choose another path or remove it")
        marker.check_file(p, what)
    if kind == "dir" and (p.exists() or p.is_symlink()):
        if p.is_symlink() or not p.is_dir():
            raise MscError(f"{text}: exists and is not a directory")
        marker.check_dir(p)
    return p


def write_text(path: str | os.PathLike, text: str, what: str | None = None) -> Path:
    """Write ``text`` to ``path`` atomically (staged under a fresh name, then renamed); a
    file there is replaced only when it is a ``what`` output msc wrote (``check_output``)."""
    p = check_output(path, "file", what)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = None
    try:
        with uninterrupted():
            fd, tmp = mkstemp(p.parent, prefix=f".{p.name}.")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise
    return p


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_staging_log: int | None = None  # where staging names are recorded (msc.io.supervise)


def log_staging(fd: int | None) -> None:
    """Record every staging name this process creates in the file ``fd`` (NUL-terminated,
    absolute), so a supervising process can remove what a fatal signal left behind."""
    global _staging_log
    _staging_log = fd


def _staged(path: str | os.PathLike) -> None:
    if _staging_log is not None:
        try:
            os.write(_staging_log, os.fsencode(os.path.abspath(path)) + b"\0")
        except OSError:
            pass  # the record is a courtesy for the supervisor; the output does not need it


def mkstemp(directory: str | os.PathLike, prefix: str, suffix: str = ".tmp") -> tuple[int, str]:
    """``tempfile.mkstemp`` in ``directory``, with mode 0666 less the umask."""
    fd, path = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=directory)
    _staged(path)
    os.fchmod(fd, 0o666 & ~_umask())
    return fd, path


def mkdtemp(directory: str | os.PathLike, prefix: str) -> Path:
    """``tempfile.mkdtemp`` in ``directory``, with mode 0777 less the umask."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=directory))
    _staged(path)
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


# Direct I/O needs memory addresses, file offsets and lengths aligned to the device's logical
# block; 4096 is a multiple of every common one (512, 4096).
_BLOCK = 4096
# The staging buffer: big enough that each write is one large I/O, small enough that touching
# it once costs little (64 MiB measured slower than 8 MiB: page faults on first use), and
# that the device starts on the data soon: writing BERT base's 418 MB to a new file took
# 0.18 s with 2 MiB blocks against 0.205 s with 8 MiB (median of 5, this machine's virtio
# disk; `dd oflag=direct conv=fsync` of as much: 0.15-0.18 s).
_STAGE = 2 << 20


def _direct_io(fd: int) -> bool:
    """Switch ``fd`` to direct I/O; False where the platform or file system has none."""
    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return False
    import fcntl

    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | flag)
    except OSError:  # EINVAL: this file system does not do direct I/O (tmpfs before 6.6)
        return False
    return True


class DataFile:
    """An append-only file of bulk binary data, written with direct I/O where possible.

    Bytes appended are copied into a page-aligned staging buffer and written from it in
    2 MiB blocks straight to the device (O_DIRECT): no page-cache copy, so writing costs
    a memcpy of the data rather than page allocation and copying in the kernel. The last
    block is padded to the alignment and the file truncated back to its length. Where
    direct I/O is unavailable (no O_DIRECT, or the file system refuses it, even on a first
    write) the same calls go through an ordinary buffered file.

    Args:
        fd: a file descriptor open for writing at offset 0 of an empty file; the DataFile
            owns it and closes it.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.size = 0  # bytes appended
        self._file = None
        self._stage: mmap.mmap | None = None
        self._written = 0  # bytes on disk (a multiple of _BLOCK while direct)
        self._staged = 0  # bytes in the staging buffer
        if _direct_io(fd):
            self._stage = mmap.mmap(-1, _STAGE)
            self._view = memoryview(self._stage)
        else:
            self._file = os.fdopen(fd, "wb", closefd=False)

    @property
    def direct(self) -> bool:
        """Whether the bytes go to the device by direct I/O."""
        return self._stage is not None

    @property
    def closed(self) -> bool:
        return self.fd < 0

    def write(self, data) -> int:
        """Append a C-contiguous bytes-like object; returns its length in bytes."""
        mv = memoryview(data)
        if mv.ndim != 1 or mv.format != "B":
            mv = mv.cast("B")
        n = len(mv)
        i = 0
        while i < n and self._stage is not None:
            k = min(_STAGE - self._staged, n - i)
            self._view[self._staged : self._staged + k] = mv[i : i + k]
            self._staged += k
            i += k
            if self._staged == _STAGE:
                self._drain()
        if i < n:
            self._file.write(mv[i:])  # type: ignore[union-attr]
        self.size += n
        return n

    def copy_region(self, region: FileRegion) -> int:
        """Append the bytes of a file region without holding more than the staging buffer
        (buffered: copied file to file in the kernel); returns their count."""
        if self._stage is None:
            n = region.copy_to(self._file)  # type: ignore[arg-type]
            self.size += n
            return n
        region.check()
        done = 0
        with open(region.path, "rb") as src:
            while done < region.length and self._stage is not None:
                k = min(_STAGE - self._staged, region.length - done)
                view = self._view[self._staged : self._staged + k]
                n = os.preadv(src.fileno(), [view], region.offset + done)
                if n == 0:
                    raise OSError(f"{region.path}: file ended inside the region at {region.offset}")
                self._staged += n
                done += n
                if self._staged == _STAGE:
                    self._drain()
            while done < region.length:  # fell back to buffered writes part way
                chunk = os.pread(
                    src.fileno(), min(_STAGE, region.length - done), region.offset + done
                )
                if not chunk:
                    raise OSError(f"{region.path}: file ended inside the region at {region.offset}")
                self._file.write(chunk)  # type: ignore[union-attr]
                done += len(chunk)
        self.size += done
        return done

    def _drain(self) -> None:
        """Write the staged bytes at their offset (the last, partial block padded)."""
        n = self._staged
        length = n + (-n % _BLOCK)
        self._view[n:length] = bytes(length - n)
        done = 0
        while done < length:
            try:
                done += os.pwrite(self.fd, self._view[done:length], self._written + done)
            except OSError as e:
                if e.errno != errno.EINVAL or done:
                    raise
                break
        if done < length:
            self._buffered()
            return
        self._written += n
        self._staged = 0

    def _buffered(self) -> None:
        """Continue with buffered writes: the file system took the flag but refuses the I/O."""
        import fcntl

        fcntl.fcntl(self.fd, fcntl.F_SETFL, fcntl.fcntl(self.fd, fcntl.F_GETFL) & ~os.O_DIRECT)
        self._file = os.fdopen(self.fd, "wb", closefd=False)
        self._file.seek(self._written)
        self._file.write(self._view[: self._staged])
        self._written += self._staged
        self._staged = 0
        self._release()

    def _release(self) -> None:
        self._view.release()
        try:
            self._stage.close()  # type: ignore[union-attr]
        except BufferError:  # a slice is still referenced (by a traceback): freed with it
            pass
        self._stage = None

    def finish(self) -> None:
        """Write what is staged and make the file durable (one fsync)."""
        if self._stage is not None and self._staged:
            padded = self._staged % _BLOCK != 0
            self._drain()
            if padded and self._stage is not None:
                os.ftruncate(self.fd, self.size)
        if self._file is not None:
            self._file.flush()
        os.fsync(self.fd)

    def close(self) -> None:
        if self.fd < 0:
            return
        try:
            if self._file is not None:
                self._file.close()
            if self._stage is not None:
                self._release()
        finally:
            os.close(self.fd)
            self.fd = -1
