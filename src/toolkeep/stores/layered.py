"""Two stores read as one: a session's own, and one that outlives it."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable

from ._base import ArchiveStore, GcResult, Holding, Pinning, StoreBase, StoreStats, missing_of, new_epoch

__all__ = ["LayeredStore"]


class LayeredStore(StoreBase):
    """Reads ``primary``, then the store ``durable()`` opens (asked only on a miss, or on a
    write when ``write_both``); writes ``primary``, and with ``write_both`` the durable store
    first (its failure is the write's). Stats and gc are ``primary``'s; closing closes
    neither: their owner does."""

    backend = "layered"

    def __init__(
        self, primary: ArchiveStore, durable: Callable[[], ArchiveStore], *, write_both: bool = False
    ) -> None:
        super().__init__()
        self.primary = primary
        self._durable = durable
        self.write_both = write_both

    def put(self, key: str, text: str) -> None:
        if self.write_both:
            self._durable().put(key, text)
        self.primary.put(key, text)

    def get(self, key: str) -> str | None:
        text = self.primary.get(key)
        return text if text is not None else self._durable().get(key)

    def pin(self, owner: str, keys: Iterable[str]) -> None:
        """Pin ``keys`` where they are written: ``primary``, and the durable store with ``write_both``."""
        keys = tuple(keys)
        for store in (self.primary, self._durable()) if self.write_both else (self.primary,):
            if isinstance(store, Pinning):
                store.pin(owner, keys)

    def release(self, owner: str) -> None:
        """Release ``owner``'s pins in ``primary`` (the durable store's go when its owner closes it)."""
        if isinstance(self.primary, Pinning):
            self.primary.release(owner)

    def delete(self, key: str) -> bool:
        return self.primary.delete(key)

    def epoch(self) -> str:
        """``primary``'s epoch (a new one at every call when it does not tell)."""
        return self.primary.epoch() if isinstance(self.primary, Holding) else new_epoch()

    def missing(self, keys: Collection[str]) -> frozenset[str]:
        """Those of ``keys`` neither store holds (the durable store is asked about the rest)."""
        gone = missing_of(self.primary, keys)
        return missing_of(self._durable(), gone) if gone else gone

    def stats(self) -> StoreStats:
        return self.primary.stats()

    def gc(self) -> GcResult:
        return self.primary.gc()
