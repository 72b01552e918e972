"""Archive stores: where the originals behind ``<<ccr:KEY>>`` markers are kept.

Every store implements :class:`ArchiveStore`; :func:`open_store` makes one from a URL.
"""

from __future__ import annotations

from ._base import ArchiveStore, StoreStats, validate_key
from .file import FileStore
from .memory import MemoryStore
from .url import open_store

__all__ = ["ArchiveStore", "FileStore", "MemoryStore", "StoreStats", "open_store", "validate_key"]
