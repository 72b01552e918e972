"""Filesystem primitives of the workspace: writes that readers see whole or not at all, through
descriptors of directories checked not to be symbolic links, and the names of persisted outputs.

A persisted file's name depends only on the call id and the content, so the same history always
names the same file, in any process, and the prompt stays byte-stable.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ..exceptions import WorkspaceError
from ..shorten import archive_key, utf8_chunks

__all__ = [
    "NOFOLLOW",
    "STALE_WRITE_SECONDS",
    "SUBDIRS",
    "TMP_PREFIX",
    "WRITTEN",
    "atomic_write",
    "opened_directory",
    "own_file_exists",
    "persisted_name",
    "refused_link",
    "remove_tree",
    "sweep_stale_writes",
]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

TMP_PREFIX = ".tmp-"
"""Names of files :func:`atomic_write` has not finished; the reader never returns them."""
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
SUBDIRS = ("tool-results", "archive", "scratch")
WRITTEN = ("tool-results", "archive")
"""The subdirectories toolkeep writes in (``scratch/`` is the agent's)."""


def persisted_name(call_id: str, text: str) -> str:
    """File name of a persisted output: ``budget_<id>_<hash>.txt``."""
    safe_id = _UNSAFE.sub("_", call_id) or "result"
    return f"budget_{safe_id[:64]}_{archive_key(text)}.txt"


def refused_link(shown: str | os.PathLike[str], what: str = "a symbolic link") -> WorkspaceError:
    """The error for a link (or other non-file) planted where toolkeep writes or reads its own
    files: an :class:`OSError` whose ``strerror`` says what was refused."""
    return WorkspaceError(
        errno.ELOOP, f"refused: {os.fspath(shown)} is {what} that toolkeep did not make; remove it"
    )


@contextlib.contextmanager
def opened_directory(path: str | os.PathLike[str], *, dir_fd: int | None = None) -> Iterator[int]:
    """A descriptor of the directory ``path`` (relative to ``dir_fd`` if given), for the
    ``dir_fd`` calls that write and read inside it. Its last component must be a real directory:
    a symbolic link there is refused (:func:`refused_link`), so whatever is done through the
    descriptor stays in the directory meant, even if a link is planted later."""
    try:
        fd = os.open(path, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and stat.S_ISLNK(_lstat_mode(path, dir_fd)):
            raise refused_link(path) from None
        raise
    try:
        yield fd
    finally:
        os.close(fd)


def _lstat_mode(path: str | os.PathLike[str], dir_fd: int | None) -> int:
    try:
        return os.stat(path, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return 0


def own_file_exists(name: str, dir_fd: int, shown: str | os.PathLike[str]) -> bool:
    """Whether ``name`` in the directory ``dir_fd`` is there (a regular file, which toolkeep
    wrote); ``False`` if it is missing. Anything else in its place (a link planted to make a
    write land elsewhere or count as done) is refused with :func:`refused_link`."""
    mode = _lstat_mode(name, dir_fd)
    if mode == 0:
        return False
    if stat.S_ISREG(mode):
        return True
    raise refused_link(shown, "a symbolic link" if stat.S_ISLNK(mode) else "something other than a file")


def atomic_write(path: str | os.PathLike[str], data: bytes | str, *, dir_fd: int | None = None) -> None:
    """Write ``data`` to ``path`` (mode 0600) so that readers see all of it or nothing.

    With ``dir_fd`` (see :func:`opened_directory`), ``path`` is a name in that directory. A
    ``str`` is written as UTF-8 (lone surrogates kept) a chunk at a time, never encoded whole.

    A process killed mid-write leaves at most a ``.tmp-*`` file, never a partial ``path``. No
    fsync: the rename is atomic for readers, and a session workspace does not outlive a power
    loss (the cost was a disk flush per persisted result on the agent's hot path). Plain ``os``
    calls on a file descriptor: an archive write is on that path too."""
    path = os.fspath(path)
    head, name = os.path.split(path)
    # a name of our own (pid, thread, target) is enough to be unique; O_EXCL makes sure
    tmp = os.path.join(head, f"{TMP_PREFIX}{os.getpid()}-{threading.get_ident()}-{name}")
    try:
        fd = os.open(tmp, _WRITE_FLAGS, 0o600, dir_fd=dir_fd)
    except FileExistsError:  # left by a killed process whose pid was reused (or a planted link)
        os.unlink(tmp, dir_fd=dir_fd)
        fd = os.open(tmp, _WRITE_FLAGS, 0o600, dir_fd=dir_fd)
    try:
        try:
            for chunk in utf8_chunks(data) if isinstance(data, str) else (data,):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


STALE_WRITE_SECONDS = 3_600
"""A ``.tmp-*`` file untouched this long was left by a killed process, not a write in progress."""


def sweep_stale_writes(root: Path) -> None:
    """Remove the temp files killed processes left in a reused workspace (see :func:`atomic_write`)."""
    cutoff = time.time() - STALE_WRITE_SECONDS
    for sub in WRITTEN:
        with contextlib.suppress(OSError), opened_directory(root / sub) as fd:
            for entry in os.scandir(fd):
                if entry.name.startswith(TMP_PREFIX) and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.name, dir_fd=fd)


def remove_tree(path: Path, keep: bool) -> None:
    if keep:
        return
    shutil.rmtree(path, ignore_errors=True)
