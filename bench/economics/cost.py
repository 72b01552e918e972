"""The cache-aware cost model: what a client that caches every request pays, in input tokens.

Definitions (also in README.md):

- A session makes one request before each assistant message ``i``: the messages ``[:i]`` as the
  policy sends them. Its size in tokens is ``chars / 4`` of its serialization (each message as
  ``json.dumps``, compact separators).
- The client caches every request. Request ``k`` reads from the cache the leading messages it
  shares with request ``k-1`` (message by message: one changed message invalidates everything
  after it; a message is cached whole or not at all). Those tokens cost ``cache_read`` (0.1x); the
  rest is written to the cache at ``cache_write`` (1.25x), or, with a price list that has no write
  premium (``--pricing openai``, ``gemini``, ``deepseek``: ``cache_write`` 1.0), sent as uncached
  input at the base price. The prices are a ``toolkeep.pricing`` list (``--pricing``, default
  ``anthropic-5m``); money is tokens times price times its base input price. This is the issue's
  definition (its
  reference figures reproduce to the hundredth) and what a prefix cache with a boundary at every
  message gives (automatic prefix caching, or an Anthropic breakpoint at each message).
- Stricter, also reported (``lookup="prefix"``): only an earlier request that is a *whole prefix*
  of request ``k`` is a hit (one breakpoint per request, at its end). A policy that edits the
  middle of the prompt pays much more under it.
- Unmanaged: the history as recorded; every request extends the one before, so it pays 0.1x on the
  previous request and 1.25x on what is new.
- Cache entries never expire within a session (agents send requests seconds apart, well inside
  the 5-minute TTL); the toolkeep rows prepare every request at one clock reading.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from toolkeep.pricing import DEFAULT_PRICING, PRESETS, Pricing


@dataclass(frozen=True)
class CostModel:
    """Prices in base-input-token units (a price list's), and the chars-per-token estimate."""

    pricing: Pricing = PRESETS[DEFAULT_PRICING]
    chars_per_token: float = 4.0
    lookup: str = "lcp"
    """``"lcp"``: request ``k`` reads the leading messages it shares with request ``k-1`` (the
    issue's definition); ``"prefix"``: only an earlier request that is a whole prefix of it."""

    @property
    def cache_read(self) -> float:
        return self.pricing.cache_read

    @property
    def cache_write(self) -> float:
        return self.pricing.cache_write


@dataclass
class SessionMeter:
    """Prices the requests of one session, in order. Serializations are cached per message object.

    Each request is a list of message dicts; a message object seen before (the same ``id``, kept
    alive here) is not serialized again, which is what keeps a replay of thousands of requests cheap.
    """

    model: CostModel = field(default_factory=CostModel)
    cost: float = 0.0
    other_cost: float = 0.0
    """The same requests priced with the other ``lookup``."""
    tokens: float = 0.0
    read_tokens: float = 0.0
    """Tokens read from the cache, written to it, and sent uncached (a price list with no write
    premium), summed over the requests (with ``lookup``)."""
    write_tokens: float = 0.0
    uncached_tokens: float = 0.0
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
        # both lookups are kept, so one replay prices a policy under either cache model
        lcp_chars = 0
        for (a, chars), (b, _) in zip(hashes, self._previous, strict=False):
            if a != b:
                break
            lcp_chars = chars
        self._previous = hashes
        prefix_chars = 0
        for chain_hash, chars in reversed(hashes):
            if chain_hash in self._entries:
                prefix_chars = chars
                break
        cached_chars = lcp_chars if self.model.lookup == "lcp" else prefix_chars
        other_chars = prefix_chars if self.model.lookup == "lcp" else lcp_chars
        if hashes:
            self._entries.add(hashes[-1][0])
        m = self.model
        cached = cached_chars / m.chars_per_token
        written = (total_chars - cached_chars) / m.chars_per_token
        price = m.cache_read * cached + m.cache_write * written
        self.cost += price
        self.read_tokens += cached
        if m.pricing.write_premium:
            self.write_tokens += written
        else:
            self.uncached_tokens += written
        other = other_chars / m.chars_per_token
        self.other_cost += m.cache_read * other + m.cache_write * (total_chars / m.chars_per_token - other)
        self.tokens += total_chars / m.chars_per_token
        self.requests += 1
        return price

    def breakdown(self) -> dict[str, float]:
        """Tokens read, written and uncached, and what each cost in dollars at the list's base
        input price."""
        p = self.model.pricing
        dollars = (
            p.dollars(self.read_tokens, p.cache_read),
            p.dollars(self.write_tokens, p.cache_write),
            p.dollars(self.uncached_tokens),
        )
        return {
            "read_tokens": self.read_tokens,
            "write_tokens": self.write_tokens,
            "uncached_tokens": self.uncached_tokens,
            "read_dollars": dollars[0],
            "write_dollars": dollars[1],
            "uncached_dollars": dollars[2],
            "dollars": sum(dollars),
        }
