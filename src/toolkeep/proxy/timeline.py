"""When each request of a conversation was prepared, kept where every replica of the proxy reads it.

The cache-aware policy decides a request sent after the provider's cache expired (longer after the
request before it than the price list's TTL) differently: every move that is due is made there,
and the requests after it are decided knowing that it was. A :class:`~toolkeep.Session` learns
this from its own clock and its own memory of the conversation's requests, which are one
process's: two replicas behind a load balancer each see part of a conversation, so each would
measure its own gaps (the first request a replica sees would never count as expired, and one
after a request that went elsewhere would be measured from the one before that) and each would
know of only its own expired requests.

So the proxy keeps, in its archive store (the one the replicas share), one small record per
request (a JSON object under an archive key, written once, as every entry is): when the request
was first prepared (wall-clock seconds), when the request before it was, and the numbers of
the conversation's requests that had found the cache expired, before it and after it. A
request is found by a digest of its whole history; the request before it by that of the
history up to the model's last answer, which is what that request sent. Each replica
prepares from these records, so the same conversation gives the same bytes whichever replica
gets each request, and a retry of a request, on any replica and however much later, is decided
as it was the first time. Where a record is missing (evicted under the store's caps, or the
store failed) the replica goes on with what it knows itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..exceptions import StoreError
from ..pricing import CacheTimes
from ..stores import ArchiveStore
from .files import previous_end

__all__ = ["Moment", "Timeline"]


@dataclass(frozen=True)
class Moment:
    """One request's time and what the cache-aware policy must know of the requests before it."""

    key: str
    """The archive key of its record."""
    time: float
    cache: CacheTimes
    """When the request before it was prepared (``None``: there was none, or it is unknown) and
    the numbers of the conversation's requests before it that found the cache expired."""
    recorded: bool
    """True when its record was already in the store (a retry: decided as the first time)."""


class Timeline:
    """The per-request records of every conversation, in ``store``; ``clock`` gives seconds of
    wall-clock time (every replica's clock must agree with the others' to well within the TTL)."""

    def __init__(self, store: ArchiveStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock

    def moment(
        self,
        conversation: str,
        history: Sequence[Any],
        texts: Sequence[str],
        known: CacheTimes | Callable[[], CacheTimes],
    ) -> Moment:
        """The moment of request ``history`` of ``conversation``, whose items serialize as
        ``texts``: its own record if it has one, else now, after the request before it as its
        record says; without that record, after what this process ``known`` (its conversation's
        :meth:`~toolkeep.conversation.Conversation.cache_times`, or a callable giving it: then
        asked only in that case). Prepare the request with ``conversation.prepare(...,
        now=moment.time, cache=moment.cache)``."""
        end = previous_end(history)
        key, previous_key = _keys(conversation, texts, end)
        own = self._read(key)
        if own is not None:
            return Moment(key, own[0], CacheTimes(own[1], own[2]), True)
        now = self.clock()
        if not end:  # the conversation's first request
            return Moment(key, now, CacheTimes(), False)
        previous = self._read(previous_key)
        if previous is None:
            return Moment(key, now, known() if callable(known) else known, False)
        return Moment(key, now, CacheTimes(previous[0], previous[3]), False)

    def record(self, moment: Moment, after: CacheTimes) -> None:
        """Write the record of the request just prepared at ``moment``, ``after`` being its
        conversation's :meth:`~toolkeep.conversation.Conversation.cache_times` then (once: a record the store has
        already stays as it is)."""
        if moment.recorded:
            return
        value = {
            "time": moment.time,
            "last": moment.cache.last,
            "before": sorted(moment.cache.expired),
            "after": sorted(after.expired),
        }
        with contextlib.suppress(StoreError):  # (then the next request goes on with what it knows)
            self.store.put(moment.key, json.dumps(value, separators=(",", ":")))

    def _read(self, key: str) -> tuple[float, float | None, frozenset[int], frozenset[int]] | None:
        try:
            text = self.store.get(key)
        except StoreError:
            return None
        if text is None:
            return None
        try:
            value = json.loads(text)
            last = value["last"]
            return (
                float(value["time"]),
                None if last is None else float(last),
                frozenset(int(n) for n in value["before"]),
                frozenset(int(n) for n in value["after"]),
            )
        except (ValueError, TypeError, KeyError):
            return None  # not one of ours: as if missing


def _keys(conversation: str, texts: Sequence[str], end: int) -> tuple[str, str]:
    """The record keys of the request whose items serialize as ``texts`` and of the request before
    it (its first ``end`` items): digests of the conversation and every item (its length, then
    its UTF-8), in one pass. The items go to the hash in two updates, not two per item: the
    digest is the same, and the thread gives up the GIL (which the hash drops for a large
    update) twice a request, not once per item, so it waits less for the event loop."""
    digest = hashlib.sha256(f"toolkeep-proxy-request\0{conversation}".encode())
    parts: list[bytes] = []
    for text in texts:
        parts += (b"\0%d\0" % len(text), text.encode("utf-8", "surrogatepass"))
    digest.update(b"".join(parts[: 2 * end]))
    previous = digest.copy()
    digest.update(b"".join(parts[2 * end :]))
    return digest.hexdigest()[:16], previous.hexdigest()[:16]
