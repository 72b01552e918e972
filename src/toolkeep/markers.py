"""Markers that always recall: what a session checks before a request goes out.

Every ``<<ccr:KEY>>`` marker a session sends names an original the session archived (or read
back) while preparing that conversation's requests. A store can lose originals behind the
session's back: a Redis ``FLUSHALL``, a Redis restarted without persistence, a SQLite file or an
archive directory deleted. So before a request goes out, the session makes sure the store holds
every original a marker in it names, and archives again, from its own memory of the original
(the request carries it), any the store lost: the bytes sent are those a session that lost
nothing would send.

It does so without a round trip per marker per request. The store tells when it may have lost
what it held by its *epoch* (:meth:`toolkeep.stores.StoreBase.epoch`: Redis keeps it in the hash
that holds the originals, SQLite in the file, the file store in the directory); a key seen held
under the current epoch (written or read back by this session, or checked) is not checked again.
So a request costs one epoch read when its markers are all known, and one batched
:meth:`~toolkeep.stores.StoreBase.missing` for the keys not yet seen under that epoch (after a
loss: all of them, once). Every ``Session.marker_recheck_every`` requests the keys are checked
anyway, for losses an epoch cannot see (one entry deleted by hand, another process's ``gc`` of a
file store, whose pins are per process).

A store without ``epoch``/``missing`` (a third-party store) is checked with ``get``, every key at
every request: correct, at a round trip per marker.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from .engine import common_prefix
from .exceptions import StoreError
from .shorten import CCR_MARKER_RE
from .stores import ArchiveStore
from .stores._base import GcResult, StoreBase, StoreStats, epoch_of, missing_of

__all__ = ["Recording", "Tracker", "marker_keys"]

_log = logging.getLogger("toolkeep")

_DEPTH = 64
"""How deep in a message markers are looked for (a model's arguments may nest without end)."""


def marker_keys(value: Any, depth: int = 0) -> set[str]:
    """The keys of every ``<<ccr:KEY>>`` marker in ``value`` (a provider message: its strings,
    in dicts, lists and SDK objects' fields)."""
    found: set[str] = set()
    _collect(value, found, depth)
    return found


def _collect(value: Any, found: set[str], depth: int) -> None:
    if isinstance(value, str):
        if "<<ccr:" in value:
            found.update(CCR_MARKER_RE.findall(value))
        return
    if depth > _DEPTH:
        return
    if isinstance(value, Mapping):
        for item in value.values():
            _collect(item, found, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _collect(item, found, depth + 1)
    elif not isinstance(value, (int, float, bytes, type(None))):
        fields = getattr(value, "__dict__", None)
        if isinstance(fields, dict):
            _collect(fields, found, depth + 1)


class Recording(StoreBase):
    """``store`` as one run writes and reads it: each original written, or read back, is
    remembered in ``seen`` (key -> text)."""

    backend = "recording"

    def __init__(self, store: ArchiveStore, seen: dict[str, str]) -> None:
        super().__init__()
        self.store = store
        self.seen = seen

    def put(self, key: str, text: str) -> None:
        self.store.put(key, text)
        self.seen[key] = text

    def get(self, key: str) -> str | None:
        text = self.store.get(key)
        if text is not None:
            self.seen[key] = text
        return text

    def delete(self, key: str) -> bool:
        return self.store.delete(key)

    def stats(self) -> StoreStats:
        return self.store.stats()

    def gc(self) -> GcResult:
        return self.store.gc()


class Tracker:
    """One conversation's markers: which keys its last output names (scanned once per message
    object), the original of each (the session's memory of it), and which are known to be held
    under the store's epoch."""

    memory_chars = 64_000_000
    """The most chars of originals kept in memory (mostly the very strings the requests carry):
    past it, those no output names now are forgotten first (a loss of one of them later costs a
    request prepared afresh, from the request)."""

    def __init__(self) -> None:
        self.out: list[Any] = []
        """The last output, compared by identity with the next."""
        self.per_message: list[tuple[str, ...]] = []
        self.named: dict[str, int] = {}
        """Key -> how many messages of the last output carry its marker."""
        self.originals: dict[str, str] = {}
        """Key -> original, of what this conversation's runs wrote or read (a form may name a
        key long after its original was written: the cache-aware policy archives what it
        prices forms for, and shortens it later), up to :attr:`memory_chars`."""
        self.chars = 0
        self.ours: set[str] = set()
        """Every key this conversation's runs wrote or read (a marker quoted in a tool's output
        names none of them: the session cannot answer for those)."""
        self.epoch: str | None = None
        self.held: set[str] = set()
        """Keys known to be held under :attr:`epoch`."""
        self._ours: list[str] = []
        """The keys of :attr:`named` that are :attr:`ours`."""
        self.requests = 0
        self.round_trips = 0
        """Calls made to the store to check (epoch reads and batched checks), for tests."""
        self.archived_again = 0
        """Originals archived again because the store had lost them."""

    def _scan(self, out: list[Any]) -> bool:
        """Bring :attr:`named` up to ``out``; ``True`` if it changed."""
        same = common_prefix(self.out, out)
        if same == len(out) == len(self.out):
            return False
        for keys in self.per_message[same:]:
            for key in keys:
                left = self.named[key] - 1
                if left:
                    self.named[key] = left
                else:
                    del self.named[key]
        del self.per_message[same:]
        for message in out[same:]:
            keys = tuple(marker_keys(message))
            self.per_message.append(keys)
            for key in keys:
                self.named[key] = self.named.get(key, 0) + 1
        self.out = list(out)
        return True

    def _forget_some(self) -> None:
        for key in list(self.originals):
            if self.chars <= self.memory_chars // 2:
                break
            if key not in self.named:
                self.chars -= len(self.originals.pop(key))

    def check(
        self, out: list[Any], recorded: Mapping[str, str], writes: ArchiveStore, recheck_every: int = 32
    ) -> bool:
        """Make sure the store ``writes`` writes to holds every original a marker in ``out``
        names that this conversation archived or read (``recorded``: this run's), archiving
        again what it lost. ``False`` when the output must be made again, from scratch: the
        store refused that write, or an original lost is no longer in memory (the request
        carries it). A store that cannot be reached is left for the next request (it answers
        no recall either). Every ``recheck_every`` requests (``0``: never) every key named is
        checked, the epoch unchanged or not."""
        self.requests += 1
        changed = self._scan(out)
        if recorded or changed:
            for key, text in recorded.items():
                if key not in self.originals:
                    self.originals[key] = text
                    self.chars += len(text)
            self.ours.update(recorded)
            if self.chars > self.memory_chars:
                self._forget_some()
            self._ours = [key for key in self.named if key in self.ours]
        ours = self._ours
        if not ours:
            return True
        try:
            self.round_trips += 1
            epoch = epoch_of(writes)
        except (OSError, StoreError) as exc:
            # a store that cannot write its epoch (full, read-only) may still say what it holds
            _log.debug("toolkeep: could not read the archive's epoch: %s", exc)
            epoch = None
        periodic = recheck_every > 0 and self.requests % recheck_every == 0
        if epoch is None or epoch != self.epoch or periodic:
            self.held.clear()  # what was written this run may be lost as well
        else:
            self.held.update(recorded)  # written or read back under this very epoch
        self.epoch = epoch
        todo = [key for key in ours if key not in self.held]
        try:
            self.round_trips += bool(todo)
            gone = missing_of(writes, todo)
        except (OSError, StoreError) as exc:
            _log.warning("toolkeep: could not check the archive for the markers sent: %s", exc)
            return True  # unreachable: it answers no recall either; the next request checks again
        if any(key not in self.originals for key in gone):
            # named through earlier work (a form made from a result's key) whose original is
            # no longer in memory: the request, prepared afresh, archives it again
            self.held.clear()
            return False
        try:
            for key in sorted(gone):
                writes.put(key, self.originals[key])
        except (OSError, StoreError) as exc:
            _log.warning(
                "toolkeep: the archive lost originals a marker names and refused them again: %s", exc
            )
            self.held.clear()
            return False
        if gone:
            self.archived_again += len(gone)
            _log.info(
                "toolkeep: the archive had lost %d originals that markers name; archived again", len(gone),
                extra={"archived_again": len(gone)},
            )  # fmt: skip
        self.held.update(todo)
        return True
