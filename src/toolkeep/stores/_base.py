"""The archive store protocol and what every backend shares: keys, limits, stats, eviction order.

Every backend keeps the same promises (``tests/test_stores.py`` holds them to it):

- ``put`` is idempotent: a key already stored keeps its text and only counts as used.
- ``get`` answers ``None`` for a key that is unknown, evicted or expired; never raises for that.
- Limits (:class:`Limits`): a size cap in UTF-8 bytes, an optional entry cap, and a TTL counted
  from the last use (``put`` or ``get``). Over a cap, the least recently used entries go first.
  An original bigger than the whole size cap is refused with :class:`StoreError`.
- Pins (:meth:`StoreBase.pin`): a key a live history names by its ``<<ccr:KEY>>`` marker is
  pinned by the session that made the marker, and is neither evicted nor expired while pinned. A
  write that could fit only by evicting pinned entries is refused with :class:`StoreError` (the
  session then keeps that result whole, or says it ``could not be saved``): a capped store never
  leaves a marker that no longer recalls. Pins are held by the store object; SQLite and Redis
  also write them to the database or server (for :data:`PIN_LEASE` seconds), so that every
  process sharing the store keeps them.
- Time comes from an injectable ``clock`` (seconds, like :func:`time.time`), so tests move it
  instead of sleeping.
- Backend failures surface as :class:`StoreError`, chained ``from`` the backend's own error.
- Keys are validated (:func:`validate_key`) before they reach a path or a server.
- Losses (:class:`Holding`): :meth:`StoreBase.epoch` names what the store holds; it changes
  whenever the store may have lost entries by other means than its own caps and TTL (a Redis
  ``FLUSHALL`` or restart without persistence, a SQLite file or a directory deleted and made
  again). :meth:`StoreBase.missing` says, in one round trip, which of some keys it does not hold.
  A session reads the epoch once per request and checks only keys it has not seen held under it
  (``Session`` archives again, from the request, any original a marker it sends names and the
  store lost).
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections.abc import Callable, Collection, Container, Iterable
from dataclasses import asdict, dataclass
from types import TracebackType
from typing import Any, Protocol, runtime_checkable

from ..closing import Closing
from ..exceptions import ConfigError, InvalidKeyError, StoreError
from ..shorten import CHUNK_CHARS, utf8_chunks

__all__ = [
    "MAX_LIMIT",
    "PIN_LEASE",
    "STATE_TTL",
    "ArchiveStore",
    "Clock",
    "GcResult",
    "Holding",
    "Limits",
    "Pinning",
    "StoreBase",
    "StoreStats",
    "decode_text",
    "encode_text",
    "epoch_of",
    "missing_of",
    "new_epoch",
    "no_room",
    "utf8_size",
    "validate_key",
]

_KEY = re.compile(r"[0-9a-f]{16}")

PIN_LEASE = 86_400.0
"""Seconds a pin a store shares with other processes (SQLite, Redis) protects its entry there: a
session that ends without closing leaves pins that lapse after this."""

MAX_LIMIT = 2**63 - 1
"""The largest size or entry cap (what SQLite's integers and Redis's numbers hold)."""

STATE_TTL = 30 * 86_400.0
"""Seconds a conversation's kept state (:meth:`StoreBase.state_store`) outlives its last use."""

Clock = Callable[[], float]
"""Seconds since some fixed point; :func:`time.time` unless a test injects its own."""


def validate_key(key: object) -> str:
    """Return ``key`` if it is an archive key (16 lowercase hex digits), else raise.

    Called before a key touches a filesystem path or a server command.

        >>> validate_key("0123456789abcdef")
        '0123456789abcdef'
    """
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        shown = repr(key) if len(repr(key)) <= 40 else repr(key)[:37] + "..."
        raise InvalidKeyError(f"invalid archive key {shown}: expected 16 lowercase hex digits")
    return key


def encode_text(text: str) -> bytes:
    """The stored bytes of an original: UTF-8, lone surrogates kept (a JSON ``str`` may hold them)."""
    return text.encode("utf-8", "surrogatepass")


def utf8_size(text: str) -> int:
    """``len(encode_text(text))``, without holding the encoded copy of a huge text."""
    if len(text) <= CHUNK_CHARS:
        return len(encode_text(text))
    return sum(len(chunk) for chunk in utf8_chunks(text))


def decode_text(data: bytes) -> str:
    """The inverse of :func:`encode_text`."""
    return data.decode("utf-8", "surrogatepass")


@dataclass(frozen=True, slots=True)
class Limits:
    """What a store may hold: ``max_bytes`` (UTF-8 bytes of the originals), ``max_entries``, and
    ``ttl`` (seconds since last use). ``None`` means no limit.

        >>> Limits(max_bytes=1_000, ttl=60).expired(used=0.0, now=60.0)
        True
    """

    max_bytes: int | None = None
    max_entries: int | None = None
    ttl: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_entries"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT
            ):
                shown = value if not isinstance(value, int) or value.bit_length() <= 64 else "a huge number"
                raise ConfigError(f"store {name} must be a whole number from 1 to 2**63-1, got {shown!r}")
        ttl = self.ttl
        if ttl is not None and (
            isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl < float("inf")
        ):
            shown = ttl if not isinstance(ttl, int) or ttl.bit_length() <= 64 else "a huge number"
            raise ConfigError(f"store ttl must be a positive, finite number of seconds, got {shown!r}")

    def expired(self, used: float, now: float) -> bool:
        """True when an entry last used at ``used`` is past its TTL at ``now``."""
        return self.ttl is not None and now - used >= self.ttl

    def check_fits(self, key: str, size: int) -> None:
        """Refuse an original that could never fit, rather than evict everything for nothing."""
        if self.max_bytes is not None and size > self.max_bytes:
            raise StoreError(
                f"original {key} is {size:,} bytes, more than the store's whole cap of {self.max_bytes:,}"
            )

    def over(self, total_bytes: int, entries: int) -> bool:
        """True while a store holding ``entries`` originals of ``total_bytes`` must evict."""
        return (self.max_bytes is not None and total_bytes > self.max_bytes) or (
            self.max_entries is not None and entries > self.max_entries
        )

    def victims(
        self,
        by_age: Iterable[tuple[str, int]],
        total_bytes: int,
        entries: int,
        pinned: Container[str] = (),
        new: str | None = None,
    ) -> list[str]:
        """Keys to evict, oldest first, from ``(key, size)`` pairs in least-recently-used order;
        ``pinned`` keys are never chosen. With ``new`` (the key a write just added), a store that
        would still be over its caps after every choice is :class:`StoreError`, before anything
        is evicted: the write is refused rather than a pinned entry lost."""
        out: list[str] = []
        for key, size in by_age:
            if not self.over(total_bytes, entries):
                break
            if key in pinned or key == new:
                continue
            out.append(key)
            total_bytes -= size
            entries -= 1
        if new is not None and self.over(total_bytes, entries):
            raise no_room(new)
        return out


def no_room(key: str) -> StoreError:
    """The error of a write refused because only pinned entries could have made room for it."""
    return StoreError(
        f"no room for original {key}: the store is at its caps and what it holds is named by "
        "live histories (pinned), so nothing may be evicted for it"
    )


@dataclass(frozen=True, slots=True)
class StoreStats:
    """What a store holds and what it has done.

    ``hits``/``misses``/``evictions``/``expirations`` count since the store was opened, except
    where the backend keeps them itself (SQLite and Redis count across processes).
    """

    backend: str
    entries: int
    bytes: int
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    expirations: int = 0
    max_bytes: int | None = None
    max_entries: int | None = None
    ttl: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """The stats as a plain dict (for JSON)."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class GcResult:
    """What :meth:`ArchiveStore.gc` removed."""

    expired: int
    evicted: int


@runtime_checkable
class ArchiveStore(Protocol):
    """Keeps originals by key. Implementations must be safe to call from several threads."""

    def put(self, key: str, text: str) -> None:
        """Store ``text`` under ``key`` (only a use of the entry if it is already there)."""

    def get(self, key: str) -> str | None:
        """The text stored under ``key``, or ``None`` if unknown, evicted or expired."""

    def delete(self, key: str) -> bool:
        """Remove ``key``; ``True`` if it was there."""

    def stats(self) -> StoreStats:
        """Counts of entries, bytes and cache events."""

    def gc(self) -> GcResult:
        """Remove every expired entry and evict down to the caps."""

    def close(self) -> None:
        """Release connections and handles. Safe to call more than once."""

    def __enter__(self) -> ArchiveStore: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class Pinning(Protocol):
    """A store that keeps what live histories name (every built-in store): see :class:`StoreBase`."""

    def pin(self, owner: str, keys: Iterable[str]) -> None:
        """Keep ``keys`` (from eviction and expiry) until ``owner`` releases them."""

    def release(self, owner: str) -> None:
        """Drop every pin ``owner`` holds."""


@runtime_checkable
class Holding(Protocol):
    """A store that tells when it lost what it held (every built-in store): see :class:`StoreBase`.

    A store without these methods still works: a session then checks, at every request, each
    original its markers name with ``get`` (correct, but a round trip per marker)."""

    def epoch(self) -> str:
        """An id of what the store holds: the same until the store may have lost entries
        other than by its own caps and TTL (emptied, restarted, its file made again)."""

    def missing(self, keys: Collection[str]) -> frozenset[str]:
        """Those of ``keys`` the store does not hold, in one round trip; not a use of any."""


def new_epoch() -> str:
    """A fresh epoch id (random: two stores emptied alike never share one)."""
    return secrets.token_hex(8)


def epoch_of(store: ArchiveStore) -> str | None:
    """``store.epoch()``, or ``None`` for a store that does not tell (:class:`Holding`)."""
    return store.epoch() if isinstance(store, Holding) else None


def missing_of(store: ArchiveStore, keys: Collection[str]) -> frozenset[str]:
    """Those of ``keys`` ``store`` does not hold: one :meth:`Holding.missing` call, or a ``get``
    per key for a store without it."""
    if not keys:
        return frozenset()
    if isinstance(store, Holding):
        return frozenset(store.missing(keys))
    return frozenset(key for key in keys if store.get(key) is None)


class StoreBase(Closing):
    """Limits, clock, counters, pins and context-manager plumbing shared by the built-in stores.

    A pinned key is never evicted nor expired; ``owner`` is whoever made the marker that names
    it (a session). Pins live in this object; the SQLite and Redis stores also share them through
    the file or server with every process that opens it.
    """

    backend = "base"

    def __init__(self, *, limits: Limits | None = None, clock: Clock | None = None) -> None:
        self.limits = limits if limits is not None else Limits()
        self.clock: Clock = clock if clock is not None else time.time
        self._hits = self._misses = self._evictions = self._expirations = 0
        self._pins: dict[str, set[str]] = {}
        self._pinned: dict[str, int] = {}  # key -> how many owners pin it
        self._pin_lock = threading.Lock()
        self._epoch = ""
        self._state: Any = None

    def state_store(self) -> ArchiveStore | None:
        """Where the conversations of a session over this store keep their state (see
        :mod:`toolkeep.resume`): a namespace of its own beside the originals, not counted among
        them nor under their caps, whose entries expire :data:`STATE_TTL` seconds after their last
        use (or after the store's own TTL, if shorter; a directory's go with it); made on first use. ``None``: the store
        keeps no state (a session over it folds each history anew)."""
        with self._pin_lock:
            if self._state is None:
                ttl = self.limits.ttl
                self._state = self._new_state_store(
                    Limits(ttl=STATE_TTL if ttl is None else min(ttl, STATE_TTL))
                )
            state: ArchiveStore | None = self._state
            return state

    def _new_state_store(self, limits: Limits) -> ArchiveStore | None:
        return None

    def pin(self, owner: str, keys: Iterable[str]) -> None:
        """Keep ``keys`` from eviction and expiry until ``owner`` releases them."""
        with self._pin_lock:
            held = self._pins.setdefault(owner, set())
            for key in keys:
                if validate_key(key) not in held:
                    held.add(key)
                    self._pinned[key] = self._pinned.get(key, 0) + 1

    def release(self, owner: str) -> None:
        """Drop every pin ``owner`` holds (its entries may go again under the caps and TTL)."""
        with self._pin_lock:
            for key in self._pins.pop(owner, ()):
                left = self._pinned[key] - 1
                if left:
                    self._pinned[key] = left
                else:
                    del self._pinned[key]

    def pinned(self) -> frozenset[str]:
        """The keys some owner pins now (a snapshot)."""
        with self._pin_lock:
            return frozenset(self._pinned)

    def is_pinned(self, key: str) -> bool:
        return key in self._pinned

    def epoch(self) -> str:
        """An id of what the store holds (:class:`Holding`). By default one per store object:
        right for a store that loses entries only by its own caps and TTL (pins keep what
        markers name). A store that can be emptied behind its back overrides it."""
        return self._epoch

    def missing(self, keys: Collection[str]) -> frozenset[str]:
        """Those of ``keys`` this store does not hold. By default a ``get`` each (a use, and
        counted); the built-in stores look without using, in one round trip."""
        store: Any = self  # every subclass is an ArchiveStore
        return frozenset(key for key in keys if store.get(validate_key(key)) is None)

    def _stats(self, entries: int, size: int) -> StoreStats:
        return StoreStats(
            self.backend,
            entries,
            size,
            self._hits,
            self._misses,
            self._evictions,
            self._expirations,
            self.limits.max_bytes,
            self.limits.max_entries,
            self.limits.ttl,
        )

    def close(self) -> None:
        """Release what the store holds (nothing, by default)."""
        return None
