"""Make a store from a URL (``memory://``, ``file:///dir``)."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from ..exceptions import ConfigError
from ._base import ArchiveStore
from .file import FileStore
from .memory import MemoryStore

__all__ = ["open_store"]


def open_store(url: str) -> ArchiveStore:
    """Open the store a URL names.

    ``memory://`` is a fresh in-memory store; ``file:///path/dir`` (or a bare path) a directory
    of one file per original.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "memory":
        return MemoryStore()
    if scheme == "file" or scheme == "":
        path = unquote(parts.path if scheme else url)
        if not path:
            raise ConfigError(f"store URL {url!r} names no directory")
        return FileStore(path)
    raise ConfigError(f"unsupported store URL scheme {scheme!r} in {url!r} (use memory:// or file://)")
