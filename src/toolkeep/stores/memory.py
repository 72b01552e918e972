"""An in-memory archive store, for tests and short-lived processes."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass

from ._base import ArchiveStore, Clock, GcResult, Limits, StoreBase, StoreStats, utf8_size, validate_key

__all__ = ["MemoryStore"]


@dataclass(slots=True)
class _Entry:
    text: str
    size: int
    used: float


class MemoryStore(StoreBase):
    """Keeps originals in an ordered dict (least recently used first); gone when the process ends.

    >>> with MemoryStore(limits=Limits(max_entries=1)) as store:
    ...     store.put("0123456789abcdef", "a")
    ...     store.put("fedcba9876543210", "b")
    ...     store.get("0123456789abcdef") is None
    True
    """

    backend = "memory"

    def __init__(self, *, limits: Limits | None = None, clock: Clock | None = None) -> None:
        super().__init__(limits=limits, clock=clock)
        self._data: OrderedDict[str, _Entry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def _new_state_store(self, limits: Limits) -> ArchiveStore:
        return MemoryStore(limits=limits, clock=self.clock)

    def put(self, key: str, text: str) -> None:
        """Store ``text`` under ``key``; evict the least recently used entries over the caps."""
        validate_key(key)
        size = utf8_size(text)
        with self._lock:
            now = self.clock()
            self._expire(now)
            entry = self._data.get(key)
            if entry is not None:
                entry.used = now
                self._data.move_to_end(key)
                return
            self.limits.check_fits(key, size)
            self._data[key] = _Entry(text, size, now)
            self._bytes += size
            try:
                self._evict(new=key)
            except BaseException:
                self._remove(key)  # refused: no room without evicting what is pinned
                raise

    def get(self, key: str) -> str | None:
        """The original under ``key``, or ``None``; a hit counts as a use."""
        validate_key(key)
        with self._lock:
            now = self.clock()
            entry = self._data.get(key)
            if entry is not None and self.limits.expired(entry.used, now) and not self.is_pinned(key):
                self._remove(key)
                self._expirations += 1
                entry = None
            if entry is None:
                self._misses += 1
                return None
            entry.used = now
            self._data.move_to_end(key)
            self._hits += 1
            return entry.text

    def missing(self, keys: Collection[str]) -> frozenset[str]:
        """Those of ``keys`` not held (or expired); not a use of any."""
        now = self.clock()
        with self._lock:
            return frozenset(
                key
                for key in keys
                if (entry := self._data.get(validate_key(key))) is None
                or (self.limits.expired(entry.used, now) and not self.is_pinned(key))
            )

    def delete(self, key: str) -> bool:
        """Remove ``key``; ``True`` if it was there."""
        validate_key(key)
        with self._lock:
            return self._remove(key)

    def stats(self) -> StoreStats:
        """Entries, bytes and the counts since this store was made."""
        with self._lock:
            return self._stats(len(self._data), self._bytes)

    def gc(self) -> GcResult:
        """Drop expired entries and evict down to the caps."""
        with self._lock:
            expired, evicted = self._expirations, self._evictions
            self._expire(self.clock())
            self._evict()
            return GcResult(self._expirations - expired, self._evictions - evicted)

    def _remove(self, key: str) -> bool:
        entry = self._data.pop(key, None)
        if entry is None:
            return False
        self._bytes -= entry.size
        return True

    def _expire(self, now: float) -> None:
        if self.limits.ttl is None:
            return
        # the dict is in order of use, so the expired entries are a prefix (pinned ones stay);
        # only that prefix is read, and the pins only when it is not empty
        expired = []
        for key, entry in self._data.items():
            if not self.limits.expired(entry.used, now):
                break
            expired.append(key)
        for key in expired:
            if not self.is_pinned(key):
                self._remove(key)
                self._expirations += 1

    def _evict(self, new: str | None = None) -> None:
        if not self.limits.over(self._bytes, len(self._data)):
            return
        by_age = [(key, entry.size) for key, entry in self._data.items()]
        for key in self.limits.victims(by_age, self._bytes, len(self._data), self.pinned(), new):
            self._remove(key)
            self._evictions += 1
