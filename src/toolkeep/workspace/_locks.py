"""Conversations' workspaces shared between sessions: a shared ``flock`` on ``<key>.lock`` per
holder, removal by the last one to close (unless one kept it), and the sweep of those nobody holds
and nobody used for :data:`SESSION_TTL_SECONDS` (a killed process's, a kept one)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import threading
import time
from pathlib import Path

from ..exceptions import WorkspaceError
from ._files import NOFOLLOW, opened_directory, refused_link, remove_tree

__all__ = ["CONVERSATION_KEY", "SESSION_TTL_SECONDS", "hold", "release", "sweep_sessions"]

SESSION_TTL_SECONDS = 7 * 86_400
"""A conversation's workspace that no session holds and none opened for this long is removed
(by the next :meth:`Workspace.for_conversation` of any conversation, at most once an hour)."""
_SWEEP_EVERY_SECONDS = 3_600
_SWEPT = ".swept"
CONVERSATION_KEY = re.compile(r"[0-9a-f]{16}")
_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def hold(parent: Path, key: str, keep: bool) -> int:
    """A descriptor of ``<parent>/<key>.lock`` holding a shared lock: while it is open, no other
    session removes ``<parent>/<key>``. ``keep`` leaves ``<key>.keep`` beside it, which tells
    every other session not to remove the directory either."""
    with opened_directory(parent) as fd:
        for _ in range(100):  # another session may remove the directory (and its lock) meanwhile
            lock = _open_lock(f"{key}.lock", fd, parent)
            try:
                fcntl.flock(lock, fcntl.LOCK_SH)
                if _still_linked(f"{key}.lock", lock, fd):
                    os.utime(lock)  # the last use, which the sweep goes by
                    if keep:
                        os.close(_open_lock(f"{key}.keep", fd, parent))
                    return lock
            except BaseException:
                os.close(lock)
                raise
            os.close(lock)  # it was removed with its directory after we opened it: again
    raise WorkspaceError(f"cannot hold the session workspace {parent / key}: it keeps being removed")


def _open_lock(name: str, dir_fd: int, parent: Path) -> int:
    try:
        return os.open(name, _LOCK_FLAGS, 0o600, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise refused_link(parent / name) from None
        raise WorkspaceError(f"cannot open {parent / name}: {exc.strerror}") from None


def _still_linked(name: str, lock: int, dir_fd: int) -> bool:
    """Whether the file ``lock`` holds is still ``name`` in ``dir_fd`` (not removed meanwhile)."""
    held = os.fstat(lock)
    try:
        named = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return held.st_nlink > 0 and (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def release(path: Path, lock: int | None, keep: bool) -> None:
    """Let go of a workspace: a private one is removed unless kept; of a conversation's, the last
    session to hold it removes it, unless one of them kept it."""
    if lock is None:
        remove_tree(path, keep)
        return
    try:
        if not keep and _exclusive(lock):
            with opened_directory(path.parent) as fd:
                if not os.path.lexists(path.parent / f"{path.name}.keep"):
                    _remove_held(path.name, fd, path.parent)
    except OSError:
        pass  # the directory is the sweep's, then
    finally:
        os.close(lock)


def _exclusive(lock: int) -> bool:
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _remove_held(key: str, dir_fd: int, parent: Path) -> None:
    """Remove ``<key>/``, ``<key>.keep`` and ``<key>.lock`` (whose exclusive lock the caller
    holds): the directory is renamed first, so no session ever opens a half-removed one."""
    trash = f".trash-{key}-{os.getpid()}-{threading.get_ident()}"
    with contextlib.suppress(FileNotFoundError):
        os.rename(key, trash, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    shutil.rmtree(parent / trash, ignore_errors=True)
    for name in (f"{key}.keep", f"{key}.lock"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dir_fd)


def sweep_sessions(parent: Path) -> None:
    """Remove the conversations' workspaces nobody holds and nobody opened for
    :data:`SESSION_TTL_SECONDS`, and what a removal cut short left; at most once an hour."""
    now = time.time()
    try:
        with opened_directory(parent) as fd:
            stamp = _open_lock(_SWEPT, fd, parent)
            try:
                info = os.fstat(stamp)
                if info.st_size and info.st_mtime > now - _SWEEP_EVERY_SECONDS:
                    return  # swept within the hour (an empty stamp was made just now: sweep)
                os.pwrite(stamp, b"1", 0)
                os.utime(stamp)
            finally:
                os.close(stamp)
            for entry in os.scandir(fd):
                if entry.name.startswith(".trash-"):
                    shutil.rmtree(parent / entry.name, ignore_errors=True)
                elif entry.name.endswith(".lock") and CONVERSATION_KEY.fullmatch(key := entry.name[:-5]):
                    if entry.stat(follow_symlinks=False).st_mtime < now - SESSION_TTL_SECONDS:
                        _sweep_one(key, fd, parent, now)
                elif CONVERSATION_KEY.fullmatch(entry.name) and not os.path.lexists(
                    parent / f"{entry.name}.lock"
                ):
                    _sweep_one(entry.name, fd, parent, now)  # its lock was lost: by its age
    except OSError:
        return  # a sweep is housekeeping: it never fails a session


def _sweep_one(key: str, dir_fd: int, parent: Path, now: float) -> None:
    had_lock = os.path.lexists(parent / f"{key}.lock")
    lock = _open_lock(f"{key}.lock", dir_fd, parent)
    try:
        if not _exclusive(lock) or not _still_linked(f"{key}.lock", lock, dir_fd):
            return  # held by a live session, or removed meanwhile
        # the last opening touched the lock (looked at again now that nobody can open it)
        used = os.fstat(lock).st_mtime if had_lock else _mtime(parent / key)
        if used < now - SESSION_TTL_SECONDS:
            _remove_held(key, dir_fd, parent)
    finally:
        os.close(lock)


def _mtime(path: Path) -> float:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return 0.0
