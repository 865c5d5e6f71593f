"""The one atomic file writer: a reader (or a kill) sees the old file or the new one, never a
part. Used for what the recorder writes (campaign.json, attempt.json), the
report's pages and the command line's output files; the store's partitions and journals go
through its transactions (pipeline.store.tables), which sync folders with :func:`sync_dir`.

Measurement lines are appended instead, one ``write`` call per line (``LineAppender``):
rewriting and syncing the whole file after every run cost about 11 ms per run, more than the
runs of a short command."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


def dump_json(document: Mapping[str, Any]) -> bytes:
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def dump_line(line: Mapping[str, Any]) -> bytes:
    return (json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")


def dump_lines(lines: Iterable[Mapping[str, Any]]) -> bytes:
    return b"".join(dump_line(line) for line in lines)


def _temporary(path: Path, body: bytes) -> Path:
    """``body`` in a hidden file beside ``path``, flushed to disk. The file is created with a
    random name and O_EXCL (never a name someone could have put a symbolic link at), with the
    permissions of an ordinary new file (not mkstemp's 0600)."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o666 & ~_umask())
            handle.write(body)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise
    return Path(name)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def fsync_path(path: Path) -> None:
    """Flush a file (or a folder's entries) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_dir(folder: Path) -> None:
    """Flush a folder's entries (a rename or a new file in it) to disk, where the file system
    can."""
    with contextlib.suppress(OSError):  # not every file system can sync a directory
        fsync_path(folder)


def write_atomic(path: Path, body: bytes) -> None:
    """Replace ``path`` by ``body`` in one rename."""
    temporary = _temporary(path, body)
    try:
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    sync_dir(path.parent)


def create_atomic(path: Path, body: bytes) -> bool:
    """Create ``path`` with ``body`` unless it exists (then False, nothing written). The link is
    atomic and fails on an existing target, so two recorders cannot both create it."""
    temporary = _temporary(path, body)
    try:
        os.link(temporary, path)
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
    sync_dir(path.parent)
    return True


class LineAppender:
    """Appends whole lines to a file: each line is one ``os.write`` on a descriptor opened with
    ``O_APPEND``, so a kill between or during runs (a signal cannot split a write of a few
    kilobytes to a local file) leaves only whole lines. The file is synced once, at ``close``:
    a power failure may lose the lines of the runs since the round started, never the files
    written before it."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND)

    def append(self, line: Mapping[str, Any]) -> None:
        body = memoryview(dump_line(line))
        while body:  # a regular file takes it whole; the loop only guards a short write
            body = body[os.write(self.fd, body) :]

    def close(self) -> None:
        try:
            os.fsync(self.fd)
        finally:
            os.close(self.fd)

    def __enter__(self) -> LineAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
