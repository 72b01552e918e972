"""The archive store protocol and what every backend shares."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from types import TracebackType
from typing import Any, Protocol, runtime_checkable

from ..exceptions import InvalidKeyError

__all__ = ["ArchiveStore", "StoreStats", "validate_key"]

_KEY = re.compile(r"[0-9a-f]{16}")


def validate_key(key: object) -> str:
    """Return ``key`` if it is an archive key (16 lowercase hex digits), else raise.

    Called before a key touches a filesystem path or a server command.
    """
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        shown = repr(key) if len(repr(key)) <= 40 else repr(key)[:37] + "..."
        raise InvalidKeyError(f"invalid archive key {shown}: expected 16 lowercase hex digits")
    return key


@dataclass(frozen=True, slots=True)
class StoreStats:
    """What a store holds and what it has done."""

    backend: str
    entries: int
    bytes: int
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    expirations: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class ArchiveStore(Protocol):
    """Keeps originals by key. Implementations must be safe to call from several threads."""

    def put(self, key: str, text: str) -> None:
        """Store ``text`` under ``key`` (a no-op if it is already there)."""

    def get(self, key: str) -> str | None:
        """The text stored under ``key``, or ``None`` if unknown or expired."""

    def delete(self, key: str) -> bool:
        """Remove ``key``; ``True`` if it was there."""

    def stats(self) -> StoreStats:
        """Counts of entries, bytes and cache events."""

    def close(self) -> None:
        """Release connections and handles. Safe to call more than once."""

    def __enter__(self) -> ArchiveStore: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class StoreBase:
    """Context-manager plumbing shared by the built-in stores."""

    def close(self) -> None:
        return None

    def __enter__(self) -> Any:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
