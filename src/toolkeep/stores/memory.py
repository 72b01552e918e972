"""An in-memory archive store, for tests and short-lived processes."""

from __future__ import annotations

import threading

from ._base import StoreBase, StoreStats, validate_key

__all__ = ["MemoryStore"]


class MemoryStore(StoreBase):
    """Keeps originals in a dict; gone when the process ends."""

    def __init__(self) -> None:
        self._data: dict[str, str] = {}
        self._lock = threading.Lock()
        self._hits = self._misses = 0

    def put(self, key: str, text: str) -> None:
        validate_key(key)
        with self._lock:
            self._data.setdefault(key, text)

    def get(self, key: str) -> str | None:
        validate_key(key)
        with self._lock:
            text = self._data.get(key)
            if text is None:
                self._misses += 1
            else:
                self._hits += 1
            return text

    def delete(self, key: str) -> bool:
        validate_key(key)
        with self._lock:
            return self._data.pop(key, None) is not None

    def stats(self) -> StoreStats:
        with self._lock:
            size = sum(len(t.encode("utf-8", "surrogatepass")) for t in self._data.values())
            return StoreStats("memory", len(self._data), size, self._hits, self._misses)
