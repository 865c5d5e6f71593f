"""Store-internal paths reached without following symbolic links.

Every folder and file below the store root (``_staging``, ``_txn``, table and partition folders,
``.lock``, ``.store-format``, journals, staged and partition files) is created, opened, renamed
and deleted relative to a folder descriptor opened with ``O_NOFOLLOW``, so a link planted where
the store expects a folder or a file is never acted through: it is an integrity error naming it
(exit 3), and nothing is read, written or deleted through it. The root itself may be a link
(``--store`` is the user's choice).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

from pipeline.errors import ExitCode, StoreError

Kind = Literal["folder", "file"]
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO never blocks an open


class StoreLinkError(StoreError):
    """A symbolic link (or another kind of file) where the store expects a folder or a file."""

    exit_code = ExitCode.INTEGRITY

    def __init__(self, path: Path, expected: Kind, found: str) -> None:
        self.path = path
        self.reason = (
            f"the store expects a {expected} here, found {found}; nothing was read, written "
            "or deleted through it. explain-pipeline never makes one: look at it, then move it "
            "out of the store (see docs/store.md#links-in-the-store)"
        )
        super().__init__(f"{path}: {self.reason}")


def _found(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISREG(mode):
        return "a regular file"
    return "a FIFO" if stat.S_ISFIFO(mode) else "a special file (socket or device)"


def expect(path: Path, mode: int, kind: Kind) -> None:
    """Raise StoreLinkError unless ``mode`` (of an lstat) is a ``kind``."""
    if not (stat.S_ISDIR(mode) if kind == "folder" else stat.S_ISREG(mode)):
        raise StoreLinkError(path, kind, _found(mode))


def lstat_in(root: Path, parts: Sequence[str], kind: Kind) -> os.stat_result | None:
    """The lstat of ``root/parts…`` (None: it does not exist), each folder on the way checked
    to be a folder and the last part to be a ``kind``, never following a link."""
    path, result = root, None
    for i, part in enumerate(parts):
        path = path / part
        try:
            result = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        expect(path, result.st_mode, kind if i == len(parts) - 1 else "folder")
    return result


class Folders:
    """Descriptors of store folders, opened one level at a time with O_NOFOLLOW and kept until
    :meth:`close` (a commit renames many files in few folders)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._fds: dict[tuple[str, ...], int] = {}

    def fd(self, parts: Sequence[str], *, create: bool = False) -> int | None:
        """The descriptor of ``root/parts…`` (None: missing and not ``create``)."""
        key = tuple(parts)
        if key in self._fds:
            return self._fds[key]
        if not key:
            if create:
                self.root.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except FileNotFoundError:
                return None
        else:
            parent = self.fd(key[:-1], create=create)
            if parent is None:
                return None
            fd_or_none = _open_folder(parent, self.root.joinpath(*key), key[-1], create=create)
            if fd_or_none is None:
                return None
            fd = fd_or_none
        self._fds[key] = fd
        return fd

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def _open_folder(parent: int, path: Path, name: str, *, create: bool) -> int | None:
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, dir_fd=parent)
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            expect(path, os.lstat(name, dir_fd=parent).st_mode, "folder")
        raise


@contextlib.contextmanager
def folders(root: Path) -> Iterator[Folders]:
    opened = Folders(root)
    try:
        yield opened
    finally:
        opened.close()


def open_file(dirs: Folders, parts: Sequence[str], flags: int, mode: int = 0o644) -> int | None:
    """A descriptor of the regular file ``root/parts…`` opened with ``flags`` (None: it or its
    folder does not exist and ``flags`` has no O_CREAT); a link or a FIFO there is refused."""
    create = bool(flags & os.O_CREAT)
    parent = dirs.fd(parts[:-1], create=create)
    path = dirs.root.joinpath(*parts)
    if parent is None:
        return None
    try:
        fd = os.open(parts[-1], flags | _FILE_FLAGS, mode, dir_fd=parent)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            expect(path, os.lstat(parts[-1], dir_fd=parent).st_mode, "file")
        raise
    try:
        expect(path, os.fstat(fd).st_mode, "file")
    except StoreLinkError:
        os.close(fd)
        raise
    return fd


def remove(dirs: Folders, parts: Sequence[str]) -> None:
    """Remove the file, link or folder tree ``root/parts…`` (missing: nothing to do); links are
    removed themselves, never followed, also inside the tree."""
    parent = dirs.fd(parts[:-1])
    if parent is None:
        return
    try:
        mode = os.lstat(parts[-1], dir_fd=parent).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        shutil.rmtree(parts[-1], dir_fd=parent, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(parts[-1], dir_fd=parent)


def relative_parts(root: Path, path: Path) -> tuple[str, ...]:
    return path.relative_to(root).parts
