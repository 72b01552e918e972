"""The session workspace: a private directory for persisted outputs and the agent's scratch files.

Layout (directories 0700, files 0600; toolkeep writes its files through descriptors of
directories it checked are not symbolic links, and refuses a link planted in their place)::

    <user cache dir>/sessions/<key>/   Workspace.for_conversation(key): a Session's default
        tool-results/   budget_<id>_<hash>.txt, one per persisted output, written once
        archive/        originals behind <<ccr:KEY>> markers (when the session archives here)
        scratch/        free for the agent

A persisted file's name depends only on the call id and the content, and a conversation's
directory only on its first message, so the same history always names the same file, in any
process, and the prompt stays byte-stable. The directory of a conversation is shared by the
sessions that serve it (each holds a shared lock on ``<key>.lock`` beside it) and removed by the
last one to close, unless one of them keeps it (``keep``, ``TOOLKEEP_KEEP_TMPDIR``); one nobody
holds and nobody used for :data:`SESSION_TTL_SECONDS` is swept (a killed process's, a kept one).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import os
import re
import shutil
import stat
import tempfile
import threading
import time
import unicodedata
import weakref
from collections.abc import Iterator
from pathlib import Path

from .closing import Closing
from .exceptions import ReaderError, WorkspaceError
from .shorten import archive_key, utf8_chunks
from .userdirs import user_sessions_dir

__all__ = [
    "MAX_NAME_BYTES",
    "MAX_PATH_CHARS",
    "MAX_READ_BYTES",
    "SESSION_TTL_SECONDS",
    "STALE_WRITE_SECONDS",
    "SUBDIRS",
    "TMP_PREFIX",
    "Workspace",
    "WorkspaceReader",
    "atomic_write",
    "opened_directory",
    "own_file_exists",
    "persisted_name",
    "refused_link",
    "split_lines",
    "workspace_path_refusal",
]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

MAX_PATH_CHARS = 4_096
MAX_NAME_BYTES = 255
TMP_PREFIX = ".tmp-"
"""Names of files :func:`atomic_write` has not finished; the reader never returns them."""
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
SUBDIRS = ("tool-results", "archive", "scratch")
_WRITTEN = ("tool-results", "archive")
"""The subdirectories toolkeep writes in (``scratch/`` is the agent's)."""
MAX_READ_BYTES = 256 << 20
"""The reader refuses files bigger than this (persisted outputs are far smaller)."""

# chars that render like "/", "\\" or "." but are not; NFKC folds most of them, not all
_LOOKALIKES = frozenset(
    "\u2024\u2025\u2026\uff0e\ufe52\uff61\u0701\u0702\ua4f8"  # dot leaders, full stops
    "\uff0f\u2215\u2044\u29f8\u2571\u1735\u2cc6\u3033"  # slashes
    "\uff3c\u2216\u29f5\u29f9\ufe68\u20e5"  # backslashes
)


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


class Workspace(Closing):
    """A session directory; removed on :meth:`close` unless it is kept.

    ``Workspace.for_conversation(key)`` is the directory of one conversation under the user's
    cache dir (what a :class:`~toolkeep.Session` uses by default: its path, and so every preview,
    is the same in every process). ``Workspace()`` makes a new private directory with a random
    name under the system temp dir; ``Workspace(path)`` uses (and creates) ``path`` and keeps it
    afterwards, so that another call with the same path reuses its files. A path that previews
    could not name so that ``read_result`` reads it back (see :func:`workspace_path_refusal`: a
    ``]``, a line break, a backslash, ``…``, ``．``, bytes that are not UTF-8) is refused with
    :class:`WorkspaceError`.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, keep: bool = False) -> None:
        self._open(path, keep, None)

    @classmethod
    def for_conversation(cls, key: str, *, keep: bool = False) -> Workspace:
        """The workspace of the conversation ``key`` (16 hex digits, as
        :func:`~toolkeep.shorten.archive_key` gives): ``<user cache dir>/sessions/<key>/``.

        Every session of that conversation, in any process, gets the same directory and holds it
        (a shared ``flock`` on ``<key>.lock``); :meth:`close` removes it when no other session
        holds it and none asked to ``keep`` it. The first opening in an hour also removes the
        directories nobody holds and nobody opened for :data:`SESSION_TTL_SECONDS`."""
        if not _KEY.fullmatch(key):
            raise WorkspaceError(f"a conversation key is 16 lowercase hex digits, got {key[:40]!r}")
        parent = user_sessions_dir().resolve()
        if (problem := workspace_path_refusal(str(parent / key))) is not None:
            raise WorkspaceError(f"cannot use {_show(str(parent))} for session workspaces: {problem}; "
                                 "set TOOLKEEP_CACHE_DIR")  # fmt: skip
        lock = _hold(parent, key, keep)
        workspace = cls.__new__(cls)
        try:
            workspace._open(parent / key, keep, lock)
        except BaseException:
            os.close(lock)
            raise
        _sweep_sessions(parent)
        return workspace

    def _open(self, path: str | os.PathLike[str] | None, keep: bool, lock: int | None) -> None:
        try:
            if path is None:
                made = tempfile.mkdtemp(prefix="toolkeep-")
                self.path = Path(made).resolve()
                self.keep = keep
                if (problem := workspace_path_refusal(str(self.path))) is not None:
                    shutil.rmtree(made, ignore_errors=True)
                    raise WorkspaceError(
                        f"cannot use the temp directory {_show(made)}: {problem}; set TMPDIR"
                    )
            elif lock is not None:  # a conversation's: its parent is resolved, a link here refused
                self.path = Path(path)
                self.keep = keep
                with contextlib.suppress(FileExistsError):
                    os.mkdir(self.path, 0o700)
            else:
                self.path = Path(path).expanduser()
                if (problem := workspace_path_refusal(str(self.path.resolve()))) is not None:
                    raise WorkspaceError(
                        f"cannot use {_show(os.fspath(path))} as the session workspace: {problem}"
                    )
                self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
                self.path = self.path.resolve()
                self.keep = True
            with opened_directory(self.path) as root:
                os.chmod(root, 0o700)
                for sub in SUBDIRS:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(sub, 0o700, dir_fd=root)
                    if sub in _WRITTEN:  # a link planted there is refused now, and at every write
                        with opened_directory(sub, dir_fd=root):
                            pass
        except WorkspaceError as exc:
            if exc.errno is None:  # a refusal of the path itself, worded already
                raise
            raise WorkspaceError(f"cannot create session workspace at {self.path}: {exc.strerror}") from exc
        except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
            where = getattr(self, "path", path)
            raise WorkspaceError(f"cannot create session workspace at {where}: {exc}") from exc
        if path is not None:
            _sweep_stale_writes(self.path)
        self._finalizer = weakref.finalize(self, _release, self.path, lock, self.keep)
        atexit.register(self._finalizer)

    @property
    def results_dir(self) -> Path:
        return self.path / "tool-results"

    @property
    def archive_dir(self) -> Path:
        return self.path / "archive"

    @property
    def scratch_dir(self) -> Path:
        return self.path / "scratch"

    def persist(self, call_id: str, text: str) -> Path:
        """Save ``text`` as the persisted output of ``call_id``, once; return its path.

        Raises :class:`OSError` when it cannot be written (a symbolic link in place of
        ``tool-results/``, the workspace or the file is refused, with a ``strerror`` saying so);
        the caller decides what to say.
        """
        name = persisted_name(call_id, text)
        target = self.results_dir / name
        with opened_directory(self.path) as root, opened_directory("tool-results", dir_fd=root) as fd:
            if not own_file_exists(name, fd, target):
                atomic_write(name, text, dir_fd=fd)
        return target

    @property
    def reader(self) -> WorkspaceReader:
        """The safe reader over this workspace (what the ``read_result`` tool uses)."""
        return WorkspaceReader(self.path)

    def read(self, path: str | os.PathLike[str], start_line: int = 1, end_line: int | None = None) -> str:
        """Lines ``start_line`` to ``end_line`` (1-based, inclusive) of a file inside the workspace.

        Refuses, with :class:`ReaderError`, anything that is not a regular file inside it.
        """
        return self.reader.read(path, start_line, end_line)

    def resolve_inside(self, path: str | os.PathLike[str]) -> Path:
        """The real path of ``path`` if it is a regular file inside the workspace."""
        return self.reader.resolve_inside(path)

    def close(self) -> None:
        """Remove the directory (unless kept). Safe to call more than once."""
        self._finalizer()

    def __repr__(self) -> str:
        return f"Workspace({str(self.path)!r}, keep={self.keep})"


STALE_WRITE_SECONDS = 3_600
"""A ``.tmp-*`` file untouched this long was left by a killed process, not a write in progress."""


def _sweep_stale_writes(root: Path) -> None:
    """Remove the temp files killed processes left in a reused workspace (see :func:`atomic_write`)."""
    cutoff = time.time() - STALE_WRITE_SECONDS
    for sub in _WRITTEN:
        with contextlib.suppress(OSError), opened_directory(root / sub) as fd:
            for entry in os.scandir(fd):
                if entry.name.startswith(TMP_PREFIX) and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.name, dir_fd=fd)


def _remove(path: Path, keep: bool) -> None:
    if keep:
        return
    shutil.rmtree(path, ignore_errors=True)


SESSION_TTL_SECONDS = 7 * 86_400
"""A conversation's workspace that no session holds and none opened for this long is removed
(by the next :meth:`Workspace.for_conversation` of any conversation, at most once an hour)."""
_SWEEP_EVERY_SECONDS = 3_600
_SWEPT = ".swept"
_KEY = re.compile(r"[0-9a-f]{16}")
_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _hold(parent: Path, key: str, keep: bool) -> int:
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


def _release(path: Path, lock: int | None, keep: bool) -> None:
    """Let go of a workspace: a private one is removed unless kept; of a conversation's, the last
    session to hold it removes it, unless one of them kept it."""
    if lock is None:
        _remove(path, keep)
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


def _sweep_sessions(parent: Path) -> None:
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
                elif entry.name.endswith(".lock") and _KEY.fullmatch(key := entry.name[:-5]):
                    if entry.stat(follow_symlinks=False).st_mtime < now - SESSION_TTL_SECONDS:
                        _sweep_one(key, fd, parent, now)
                elif _KEY.fullmatch(entry.name) and not os.path.lexists(parent / f"{entry.name}.lock"):
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


def split_lines(text: str) -> list[str]:
    """``text`` cut after every ``\\n`` (only that: the count matches the summaries' line count).

    ``"".join(split_lines(t)) == t`` for every ``t``.

        >>> split_lines("a\\nb\\r\\nc")
        ['a\\n', 'b\\r\\n', 'c']
    """
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


class WorkspaceReader:
    """Reads files inside one directory, and nothing else.

    A path is refused (:class:`ReaderError`) when it holds a NUL byte, a lone surrogate, a ``..``
    component, a char that only looks like a slash or a dot, or is too long; when it is absolute and not under the
    root; when, with every symlink resolved, it is not under the root; and when it is not a
    regular file. The file is then opened without following a last-moment symlink and checked
    again through its open descriptor, so a swap between the check and the read gains nothing.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()

    def resolve_inside(self, path: str | os.PathLike[str]) -> Path:
        """The real path of ``path`` if it is a regular file inside the root."""
        text = self._check_text(path)
        candidate = Path(text)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        elif not candidate.is_relative_to(self.root):
            raise ReaderError(f"refused: {_show(text)} is outside the session workspace")
        try:
            real = candidate.resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            raise ReaderError(f"no such file in the session workspace: {_show(text)}") from exc
        if real == self.root or not real.is_relative_to(self.root):
            raise ReaderError(f"refused: {_show(text)} leads outside the session workspace")
        if not real.is_file():
            raise ReaderError(f"refused: {_show(text)} is not a regular file")
        if real.name.startswith(TMP_PREFIX):  # a write in progress, or cut short by a crash
            raise ReaderError(f"refused: {_show(text)} is an unfinished write")
        return real

    def read_text(self, path: str | os.PathLike[str]) -> str:
        """The whole text of a file inside the root (UTF-8; undecodable bytes replaced)."""
        real = self.resolve_inside(path)
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        try:
            fd = os.open(real, flags | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise ReaderError(f"cannot read {_show(os.fspath(path))}: {exc.strerror}") from exc
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise ReaderError(f"refused: {_show(os.fspath(path))} is not a regular file")
            self._check_descriptor(fd, path)
            if info.st_size > MAX_READ_BYTES:
                raise ReaderError(
                    f"refused: {_show(os.fspath(path))} is {info.st_size:,} bytes "
                    f"(the reader stops at {MAX_READ_BYTES:,})"
                )
            data = handle.read(MAX_READ_BYTES + 1)
        try:
            return data.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            return data.decode("utf-8", "replace")

    def read(self, path: str | os.PathLike[str], start_line: int = 1, end_line: int | None = None) -> str:
        """Lines ``start_line`` to ``end_line`` (1-based, inclusive) of a file inside the root."""
        if start_line < 1 or (end_line is not None and end_line < start_line):
            raise ReaderError(f"invalid line range {start_line}-{end_line if end_line is not None else ''}")
        lines = split_lines(self.read_text(path))
        return "".join(lines[start_line - 1 : end_line])

    def _check_text(self, path: str | os.PathLike[str]) -> str:
        """Refusals that need no filesystem access."""
        raw = os.fspath(path)
        if not isinstance(raw, str):
            raise ReaderError("refused: a path must be text, not bytes")
        problem = _text_refusal(raw)
        if problem is not None:
            raise ReaderError(f"refused: {problem}")
        return raw

    def _check_descriptor(self, fd: int, path: str | os.PathLike[str]) -> None:
        """Where Linux tells which file a descriptor holds, it must still be inside the root."""
        try:
            opened = Path(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            return  # no /proc: the O_NOFOLLOW open and the resolve above are what we have
        if not opened.is_relative_to(self.root):
            raise ReaderError(f"refused: {_show(os.fspath(path))} moved outside the session workspace")

    def __repr__(self) -> str:
        return f"WorkspaceReader({str(self.root)!r})"


def _text_refusal(raw: str) -> str | None:
    """Why the reader refuses the path ``raw`` on its text alone; ``None`` if it does not."""
    if not raw:
        return "empty path"
    if "\x00" in raw:
        return "the path contains a NUL byte"
    if len(raw) > MAX_PATH_CHARS:
        return f"the path is {len(raw):,} chars long"
    if not raw.isascii():
        try:
            raw.encode("utf-8")
        except UnicodeEncodeError:
            return "the path holds a lone surrogate (it is not valid text)"
    if any(c in _LOOKALIKES for c in raw) or _folds_to_separator(raw):
        return f"{_show(raw)} has chars that look like a slash or a dot"
    components = raw.split("/")
    if ".." in components:
        return f"{_show(raw)} has a '..' component"
    if "\\" in raw:
        return f"{_show(raw)} has a backslash (not a path separator here)"
    if any(len(c.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES for c in components):
        return f"{_show(raw)} has a name longer than {MAX_NAME_BYTES} bytes"
    return None


_LONGEST_SAVED = len("/tool-results/budget__.txt") + 64 + 16
"""Chars a persisted file's path adds to the workspace's."""


def workspace_path_refusal(root: str) -> str | None:
    """Why ``root`` cannot be a session workspace, or ``None``: a preview names its saved files
    as ``[full output saved to PATH]``, read back to the end of the line or the first ``]``, and
    ``read_result`` must accept the path the model copies from it. So the path holds no ``]``
    and no control char (a line break ends it; the model may not copy the others), and nothing
    the reader refuses (a backslash, a char that looks like a slash or a dot such as ``…`` or
    ``．``, a lone surrogate from bytes that are not UTF-8), and is short enough."""
    if "]" in root:
        return "the path holds a ']', which would end the path a preview names"
    if any(c < " " or c == "\x7f" for c in root):
        return "the path holds a control char (a line break would end the path a preview names)"
    problem = _text_refusal(root)
    if problem is None and len(root) + _LONGEST_SAVED > MAX_PATH_CHARS:
        problem = "the path is too long for the saved files in it to be read back"
    # the caller names the path once; read_result would refuse the files' paths for this reason
    return None if problem is None else problem.replace(_show(root), "the path")


def _folds_to_separator(text: str) -> bool:
    """True when compatibility folding would turn some char into a separator or a dot."""
    folded = unicodedata.normalize("NFKC", text)
    if folded == text:
        return False
    return any(folded.count(c) != text.count(c) for c in "/.\\")


def _show(text: str) -> str:
    """A path for an error message: short and printable."""
    shown = text if len(text) <= 120 else text[:100] + "..." + text[-16:]
    return repr(shown)
