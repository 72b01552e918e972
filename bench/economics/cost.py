"""The cache-aware cost model: what a client that caches every request pays, in input tokens.

Definitions (also in README.md):

- A session makes one request before each assistant message ``i``: the messages ``[:i]`` as the
  policy sends them. Its size in tokens is ``chars / 4`` of its serialization (each message as
  ``json.dumps``, compact separators).
- The client puts a cache breakpoint at the end of every request, so every request it sent is a
  cache entry. Request ``k`` reads from the cache the longest earlier request of the same session
  that is a *whole prefix* of it, message by message (a prefix cache hit needs the earlier request
  to be a prefix: one changed message invalidates everything after it). Those tokens cost
  ``cache_read`` (0.1x); the rest is written to the cache at ``cache_write`` (1.25x).
- Unmanaged: the history as recorded; every request extends the one before, so it pays 0.1x on the
  previous request and 1.25x on what is new.
- Cache entries never expire within a session (agents send requests seconds apart, well inside
  the 5-minute TTL).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class CostModel:
    """Prices in base-input-token units, and the chars-per-token estimate."""

    cache_read: float = 0.1
    cache_write: float = 1.25
    chars_per_token: float = 4.0
    lookup: str = "prefix"
    """``"prefix"``: an earlier request must be a whole prefix (the definition used); ``"lcp"``:
    the common leading messages with the previous request are read (kept for comparison)."""


@dataclass
class SessionMeter:
    """Prices the requests of one session, in order. Serializations are cached per message object.

    Each request is a list of message dicts; a message object seen before (the same ``id``, kept
    alive here) is not serialized again, which is what keeps a replay of thousands of requests cheap.
    """

    model: CostModel = field(default_factory=CostModel)
    cost: float = 0.0
    tokens: float = 0.0
    requests: int = 0
    _sizes: dict[int, tuple[Any, int, int]] = field(default_factory=dict)
    _entries: set[int] = field(default_factory=set)
    _keys: dict[str, int] = field(default_factory=dict)
    _previous: list[tuple[int, int]] = field(default_factory=list)

    def _size_and_key(self, message: Any) -> tuple[int, int]:
        hit = self._sizes.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1], hit[2]
        text = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
        key = self._keys.setdefault(text, len(self._keys))
        self._sizes[id(message)] = (message, len(text), key)
        return len(text), key

    def add(self, request: Sequence[Any]) -> float:
        """Price one request; returns its cost and remembers it as a cache entry."""
        chain = 0
        cached_chars = 0
        total_chars = 0
        hashes = []
        for message in request:
            size, key = self._size_and_key(message)
            chain = hash((chain, key))
            total_chars += size
            hashes.append((chain, total_chars))
        if self.model.lookup == "lcp":
            for (a, chars), (b, _) in zip(hashes, self._previous, strict=False):
                if a != b:
                    break
                cached_chars = chars
            self._previous = hashes
        else:
            for chain_hash, chars in reversed(hashes):
                if chain_hash in self._entries:
                    cached_chars = chars
                    break
        if hashes:
            self._entries.add(hashes[-1][0])
        m = self.model
        cached = cached_chars / m.chars_per_token
        written = (total_chars - cached_chars) / m.chars_per_token
        price = m.cache_read * cached + m.cache_write * written
        self.cost += price
        self.tokens += total_chars / m.chars_per_token
        self.requests += 1
        return price
