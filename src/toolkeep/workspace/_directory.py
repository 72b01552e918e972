"""The :class:`Workspace` directory itself: made private, its subdirectories checked, persisted
outputs written into it, and let go of when it closes."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import weakref
from pathlib import Path

from ..closing import Closing
from ..exceptions import WorkspaceError
from ..userdirs import user_sessions_dir
from ._files import (
    SUBDIRS,
    WRITTEN,
    atomic_write,
    opened_directory,
    own_file_exists,
    persisted_name,
    sweep_stale_writes,
)
from ._locks import CONVERSATION_KEY, hold, release, sweep_sessions
from ._reader import WorkspaceReader, show, workspace_path_refusal

__all__ = ["Workspace"]


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
        if not CONVERSATION_KEY.fullmatch(key):
            raise WorkspaceError(f"a conversation key is 16 lowercase hex digits, got {key[:40]!r}")
        parent = user_sessions_dir().resolve()
        if (problem := workspace_path_refusal(str(parent / key))) is not None:
            raise WorkspaceError(f"cannot use {show(str(parent))} for session workspaces: {problem}; "
                                 "set TOOLKEEP_CACHE_DIR")  # fmt: skip
        lock = hold(parent, key, keep)
        workspace = cls.__new__(cls)
        try:
            workspace._open(parent / key, keep, lock)
        except BaseException:
            os.close(lock)
            raise
        sweep_sessions(parent)
        return workspace

    def _open(self, path: str | os.PathLike[str] | None, keep: bool, lock: int | None) -> None:
        try:
            if path is None:
                made = tempfile.mkdtemp(prefix="toolkeep-")
                self.path = Path(made).resolve()
                self.keep = keep
                if (problem := workspace_path_refusal(str(self.path))) is not None:
                    shutil.rmtree(made, ignore_errors=True)
                    raise WorkspaceError(f"cannot use the temp directory {show(made)}: {problem}; set TMPDIR")
            elif lock is not None:  # a conversation's: its parent is resolved, a link here refused
                self.path = Path(path)
                self.keep = keep
                with contextlib.suppress(FileExistsError):
                    os.mkdir(self.path, 0o700)
            else:
                self.path = Path(path).expanduser()
                if (problem := workspace_path_refusal(str(self.path.resolve()))) is not None:
                    raise WorkspaceError(
                        f"cannot use {show(os.fspath(path))} as the session workspace: {problem}"
                    )
                self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
                self.path = self.path.resolve()
                self.keep = True
            with opened_directory(self.path) as root:
                os.chmod(root, 0o700)
                for sub in SUBDIRS:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(sub, 0o700, dir_fd=root)
                    if sub in WRITTEN:  # a link planted there is refused now, and at every write
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
            sweep_stale_writes(self.path)
        self._finalizer = weakref.finalize(self, release, self.path, lock, self.keep)
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
