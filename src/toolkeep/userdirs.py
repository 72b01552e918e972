"""The per-user directory toolkeep keeps things in that must outlive a session.

``$TOOLKEEP_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/toolkeep`` (by default
``~/.cache/toolkeep``), mode 0700: no other user can
read or write it. It holds the per-user archive (:func:`user_store_url`), where originals are
kept whose shortened form the caller's own history carries (``Session.cap_result``,
``ToolLoop``): closing a session never deletes them; the store's size cap and TTL do, and
``toolkeep store gc --store URL`` on demand. Its ``sessions/`` subdirectory holds the session
workspaces, named from their conversation (:meth:`toolkeep.Workspace.for_conversation`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .exceptions import WorkspaceError

__all__ = ["USER_STORE_LIMITS", "user_cache_dir", "user_sessions_dir", "user_store_url"]

USER_STORE_LIMITS = "max_bytes=1G&ttl=30d"
"""The per-user archive's caps: least recently used originals go first past 1 GB, and an
original unused for 30 days expires."""


def user_cache_dir() -> Path:
    """``$TOOLKEEP_CACHE_DIR``, else ``$XDG_CACHE_HOME/toolkeep`` (or ``~/.cache/toolkeep``),
    made 0700 if missing.

    Refused with :class:`WorkspaceError` when it is a symbolic link, is not a directory, or
    belongs to another user; made 0700 again when it is ours but readable by others."""
    own = os.environ.get("TOOLKEEP_CACHE_DIR")
    path = Path(own) if own else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "toolkeep"
    return _private_dir(path)


def user_sessions_dir() -> Path:
    """``sessions/`` in :func:`user_cache_dir`, checked and made 0700 the same way: where the
    session workspaces are (:meth:`toolkeep.Workspace.for_conversation`)."""
    return _private_dir(user_cache_dir() / "sessions")


def _private_dir(path: Path) -> Path:
    """``path``, made 0700 if missing; refused unless it is a real directory of this user."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.lstat(path)
    except OSError as exc:
        raise WorkspaceError(f"cannot use the per-user directory {path}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise WorkspaceError(f"the per-user directory {path} is not a directory (or is a symbolic link)")
    if info.st_uid != os.getuid():
        raise WorkspaceError(f"the per-user directory {path} belongs to another user")
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def user_store_url() -> str:
    """The store URL of the per-user archive (a SQLite file in :func:`user_cache_dir`)."""
    return f"sqlite://{user_cache_dir() / 'archive.db'}?{USER_STORE_LIMITS}"
