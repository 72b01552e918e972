"""Archive stores: where the originals behind ``<<ccr:KEY>>`` markers are kept.

Every store implements :class:`ArchiveStore`, and every built-in one :class:`Holding` too (it
says when it lost what it held, so that a session archives again what its markers name; a
third-party store without it is checked with ``get``). :func:`open_store` makes one from a URL
(``memory://``, ``file:///dir``, ``sqlite:///file.db``, ``redis://host:port/db``). The SQLite and
Redis stores are imported only when used (Redis needs ``pip install 'toolkeep[redis]'``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._base import ArchiveStore, Clock, GcResult, Holding, Limits, StoreBase, StoreStats, validate_key
from .file import FileStore
from .memory import MemoryStore
from .url import mask_url, open_store, parse_limits, store_for_config

if TYPE_CHECKING:  # pragma: no cover
    from .redis import RedisStore
    from .sqlite import SQLiteStore

__all__ = [
    "ArchiveStore",
    "Clock",
    "FileStore",
    "GcResult",
    "Holding",
    "Limits",
    "MemoryStore",
    "RedisStore",
    "SQLiteStore",
    "StoreBase",
    "StoreStats",
    "mask_url",
    "open_store",
    "parse_limits",
    "store_for_config",
    "validate_key",
]


def __getattr__(name: str) -> Any:
    # lazy: the Redis module imports redis-py on use, and neither is needed for the default store
    if name == "RedisStore":
        from .redis import RedisStore

        return RedisStore
    if name == "SQLiteStore":
        from .sqlite import SQLiteStore

        return SQLiteStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
