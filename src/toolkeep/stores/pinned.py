"""A store as one owner (a session) writes to it: every original it archives is pinned first."""

from __future__ import annotations

import logging
from collections.abc import Collection

from ..exceptions import StoreError
from ._base import ArchiveStore, GcResult, Holding, Pinning, StoreBase, StoreStats, missing_of, new_epoch

log = logging.getLogger("toolkeep")

__all__ = ["PinnedWrites"]


class PinnedWrites(StoreBase):
    """Writes to ``store`` on behalf of ``owner``: each key is pinned before it is written, so no
    later write (of this owner or another in the process) evicts what a marker already names.
    :meth:`release_all` drops the owner's pins. A store without pins is written as it is."""

    backend = "pinned"

    def __init__(self, store: ArchiveStore, owner: str) -> None:
        super().__init__()
        self.store = store
        self.owner = owner

    def put(self, key: str, text: str) -> None:
        if isinstance(self.store, Pinning):
            self.store.pin(self.owner, (key,))
        self.store.put(key, text)

    def get(self, key: str) -> str | None:
        return self.store.get(key)

    def delete(self, key: str) -> bool:
        return self.store.delete(key)

    def epoch(self) -> str:
        """The store's epoch (a store that does not tell has a new one at every call: nothing
        it holds counts as held for longer than one check)."""
        return self.store.epoch() if isinstance(self.store, Holding) else new_epoch()

    def missing(self, keys: Collection[str]) -> frozenset[str]:
        return missing_of(self.store, keys)

    def stats(self) -> StoreStats:
        return self.store.stats()

    def gc(self) -> GcResult:
        return self.store.gc()

    def release_all(self) -> None:
        """Drop the owner's pins (closing the session: its entries may go again under the caps).
        A store that cannot be reached keeps them until they lapse (:data:`PIN_LEASE`)."""
        if isinstance(self.store, Pinning):
            try:
                self.store.release(self.owner)
            except StoreError as exc:
                log.warning("toolkeep: could not release this session's pins: %s", exc)
