"""Reading input files safely: only regular files, never more than a size limit.

A FIFO, a socket or a device given as an input would block the reader forever or feed it without
end (``/dev/zero``); a file larger than any real input would exhaust memory. Both are refused
before a byte is read: the file is opened without blocking, checked with ``fstat`` on the open
descriptor (so a path swapped after the check cannot slip through), and read up to its limit.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Literal

ReadMode = Literal["fast", "precise"]
"""How a format's reader reads: ``fast`` (the default) tries its fast engine first and leaves
to the precise one only what it cannot vouch for; ``precise`` reads everything with the precise
engine (the reference the fast one is tested against: same results, slower)."""
MiB = 2**20
GiB = 2**30

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)


class InputFileError(Exception):
    """An input file that cannot be read: ``code`` is the reason code, ``reason`` one phrase."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def size_text(size: int) -> str:
    """``3221225472`` -> ``3.0 GiB``; ``268435456`` -> ``256 MiB``."""
    if size >= GiB:
        return f"{size / GiB:.1f} GiB"
    if size >= MiB:
        value = size / MiB
        return f"{value:.0f} MiB" if value == int(value) else f"{value:.1f} MiB"
    return f"{size} bytes"


def file_kind(mode: int) -> str | None:
    """``None`` for a regular file, else what it is (``a FIFO``, ``a character device`` …)."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def open_regular(path: Path | str, *, follow: bool = True) -> tuple[int, int]:
    """A read-only descriptor of ``path`` and its size; it must be a regular file (symlinks
    followed unless ``follow`` is false: then a link is refused too).

    Raises FileNotFoundError when absent, :class:`InputFileError` (``not_a_file``) when it is
    anything but a regular file, OSError for the rest."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise InputFileError("not_a_file", "is not a regular file (a symbolic link)") from None
        raise
    try:
        info = os.fstat(fd)
        kind = file_kind(info.st_mode)
        if kind is not None:
            raise InputFileError("not_a_file", f"is not a regular file ({kind})")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, info.st_size


def read_regular(
    path: Path | str, limit: int, what: str | None = None, *, follow: bool = True
) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (``follow``: as open_regular).

    Raises FileNotFoundError, :class:`InputFileError` (``not_a_file``, ``too_large``) or
    OSError."""
    what = what or os.path.basename(path)
    fd, size = open_regular(path, follow=follow)
    try:
        if size > limit:
            raise InputFileError("too_large", _too_large(size, limit, what))
        body = os.read(fd, size + 1)
        while len(body) != size and len(body) <= limit:  # a file that grew, or a short read
            more = os.read(fd, limit + 1 - len(body))
            if not more:
                break
            body += more
    finally:
        os.close(fd)
    if len(body) > limit:  # grew while being read
        raise InputFileError("too_large", _too_large(len(body), limit, what))
    return body


def measured_file_problem(path: Path, limit: int, what: str) -> str | None:
    """Why a file a measured command wrote cannot be read (None: it can): a regular file, not a
    link (the command could point it anywhere), opened without blocking, at most ``limit``
    bytes. The reason is written to follow the file's name: `` is a symbolic link``, ``: cannot
    read (...)``, `` is 70 MiB, more than the limit of 64 MiB for WHAT``."""
    try:
        fd, size = open_regular(path, follow=False)
    except InputFileError as exc:
        return f" {exc.reason}"
    except OSError as exc:
        return f": cannot read ({exc.strerror or exc})"
    os.close(fd)
    return f" {_too_large(size, limit, what)}" if size > limit else None


def _too_large(size: int, limit: int, what: str) -> str:
    return f"is {size_text(size)}, more than the limit of {size_text(limit)} for {what}"
