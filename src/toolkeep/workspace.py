"""The session workspace: a private directory for persisted outputs and the agent's scratch files.

Layout (directories 0700, files 0600)::

    toolkeep-<random>/
        tool-results/   budget_<id>_<hash>.txt, one per persisted output, written once
        archive/        originals behind <<ccr:KEY>> markers (the default archive store)
        scratch/        free for the agent

A persisted file's name depends only on the call id and the content, so the same history always
names the same file and the prompt stays byte-stable.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import tempfile
import weakref
from pathlib import Path
from types import TracebackType

from .exceptions import ReaderError, WorkspaceError
from .shorten import archive_key

__all__ = ["Workspace", "atomic_write", "persisted_name"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def persisted_name(call_id: str, text: str) -> str:
    """File name of a persisted output: ``budget_<id>_<hash>.txt``."""
    safe_id = _UNSAFE.sub("_", call_id) or "result"
    return f"budget_{safe_id[:64]}_{archive_key(text)}.txt"


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` (mode 0600) so that readers see all of it or nothing."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class Workspace:
    """A session directory; removed on :meth:`close` unless it is kept.

    ``Workspace()`` makes a new private directory under the system temp dir;
    ``Workspace(path)`` uses (and creates) ``path`` and keeps it afterwards, so that another call
    with the same path reuses its files.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, keep: bool = False) -> None:
        try:
            if path is None:
                self.path = Path(tempfile.mkdtemp(prefix="toolkeep-")).resolve()
                self.keep = keep
            else:
                self.path = Path(path).expanduser()
                self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
                self.path = self.path.resolve()
                self.keep = True
            os.chmod(self.path, 0o700)
            for sub in ("tool-results", "archive", "scratch"):
                (self.path / sub).mkdir(mode=0o700, exist_ok=True)
        except OSError as exc:
            raise WorkspaceError(f"cannot create session workspace at {path}: {exc}") from exc
        self._closed = False
        self._finalizer = weakref.finalize(self, _remove, self.path, self.keep)
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

        Raises :class:`OSError` when it cannot be written; the caller decides what to say.
        """
        target = self.results_dir / persisted_name(call_id, text)
        if not target.exists():
            atomic_write(target, text.encode("utf-8", "surrogatepass"))
        return target

    def read(self, path: str | os.PathLike[str], start_line: int = 1, end_line: int | None = None) -> str:
        """Lines ``start_line`` to ``end_line`` (1-based, inclusive) of a file inside the workspace.

        Refuses, with :class:`ReaderError`, anything that resolves outside the workspace.
        """
        target = self.resolve_inside(path)
        try:
            data = target.read_bytes()
        except OSError as exc:
            raise ReaderError(f"cannot read {path}: {exc.strerror or exc}") from exc
        lines = data.decode("utf-8", "replace").splitlines(keepends=True)
        if start_line < 1 or (end_line is not None and end_line < start_line):
            raise ReaderError(f"invalid line range {start_line}-{end_line}")
        return "".join(lines[start_line - 1 : end_line])

    def resolve_inside(self, path: str | os.PathLike[str]) -> Path:
        """The real path of ``path`` if it is a regular file inside the workspace."""
        text = os.fspath(path)
        if "\x00" in text:
            raise ReaderError("path contains a NUL byte")
        candidate = Path(text)
        if not candidate.is_absolute():
            candidate = self.path / candidate
        try:
            real = candidate.resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            raise ReaderError(f"no such file in the workspace: {text}") from exc
        if not real.is_relative_to(self.path):
            raise ReaderError(f"refused: {text} is outside the session workspace")
        if not real.is_file():
            raise ReaderError(f"refused: {text} is not a regular file")
        return real

    def close(self) -> None:
        """Remove the directory (unless kept). Safe to call more than once."""
        self._closed = True
        self._finalizer()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Workspace({str(self.path)!r}, keep={self.keep})"


def _remove(path: Path, keep: bool) -> None:
    if keep:
        return
    shutil.rmtree(path, ignore_errors=True)
