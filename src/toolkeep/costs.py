"""The prompt-cache-aware cost of a request: what a replay and the proxy price requests with.

Costs are in base-input-token units: one token sent uncached costs 1. The model follows how
provider prompt caches price input, at the prices of a price list (:mod:`toolkeep.pricing`; by
default Anthropic's 5-minute cache: reads at 0.1x, writes at 1.25x of the base input price):

- the client caches each request's full prefix, so request *k* pays the read price for the
  longest common prefix it shares with request *k-1*, measured on the serialized request, and the
  write price for the rest (written to the cache for request *k+1*); where the price list has no
  write premium (``write=1``: OpenAI, Gemini, DeepSeek cache on their own) the rest is uncached
  input at the base price;
- the first request of a session has nothing cached and pays the write price for all of it.

Money is tokens times price times the price list's base input price (``$/MTok``).

A request is serialized as ``{"system": ..., "messages": [...]}`` (compact JSON, UTF-8 text,
``system`` left out when the log has none). It is kept as *segments* (the opening, then one per
message, then the closing) so that the prefix shared with the previous request is found, and its
tokens counted, without re-joining or re-tokenizing what did not change.

Not modelled: minimum cacheable lengths, cache lifetimes (a replay prepares every request at one
clock reading, as if sent back to back), output tokens, and the tool
definitions sent with each request (the logs do not record them; they would add the same
cached prefix to both sides).

>>> from toolkeep.tokens import get_counter
>>> c = get_counter("chars")
>>> first = request_cost(None, ["abcdefgh"], c)     # 2 tokens, nothing cached
>>> first.cost
2.5
>>> request_cost(["abcdefgh"], ["abcdefgh", "ijkl"], c).cost   # 2 cached, 1 written
1.45
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from .pricing import DEFAULT_PRICING, PRESETS, Pricing
from .tokens import TokenCounter, serialize_message

__all__ = [
    "CACHE_READ",
    "CACHE_WRITE",
    "CLOSING",
    "RequestCost",
    "common_prefix_length",
    "opening_segment",
    "request_cost",
    "request_segments",
    "serialize_message",
]

CACHE_READ = PRESETS[DEFAULT_PRICING].cache_read
"""Price of a cached input token, as a fraction of the base input price (the default list's)."""
CACHE_WRITE = PRESETS[DEFAULT_PRICING].cache_write
"""Price of an input token written to the cache, as a multiple of the base input price."""


@dataclass(frozen=True, slots=True)
class RequestCost:
    """Size and cost of one request."""

    chars: int
    tokens: int
    cached_tokens: int
    """Tokens of the prefix shared with the previous request (read from the cache)."""
    cost: float
    """``read * cached_tokens + write * (tokens - cached_tokens)`` at the price list's prices."""
    written_tokens: int = 0
    """Tokens written to the cache (not read from it), where the price list has a write premium."""
    uncached_tokens: int = 0
    """Tokens neither read from nor written to the cache: sent at the base price (a price list
    with no write premium)."""
    dollars: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """What the cache reads, the cache writes and the uncached input cost, in dollars."""


CLOSING = "]}"


def opening_segment(system: str | None) -> str:
    """The start of a serialized request, up to its first message."""
    if system is None:
        return '{"messages":['
    return '{"system":' + json.dumps(system, ensure_ascii=False) + ',"messages":['


def request_segments(system: str | None, message_texts: Sequence[str]) -> list[str]:
    """The serialized request ``{"system":...,"messages":[...]}`` as segments that join to it.

    Every message but the first carries the comma before it.
    """
    segments = [opening_segment(system)]
    segments.extend(t if i == 0 else "," + t for i, t in enumerate(message_texts))
    segments.append(CLOSING)
    return segments


def _common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of two strings."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def common_prefix_length(a: Sequence[str], b: Sequence[str]) -> tuple[int, int, int]:
    """Where the joined segments ``a`` and ``b`` first differ.

    Returns ``(chars, whole, partial)``: the length of the common prefix of ``"".join(a)`` and
    ``"".join(b)``, the number of leading segments of ``b`` that are wholly inside it, and how many
    chars of the next segment of ``b`` are.
    """
    whole = 0
    chars = 0
    while whole < len(a) and whole < len(b) and (a[whole] is b[whole] or a[whole] == b[whole]):
        chars += len(b[whole])
        whole += 1
    if whole == len(a) or whole == len(b):
        return chars, whole, 0
    # The first differing pair; when one is a prefix of the other the match runs on into the
    # following segments, so compare the joined remainders.
    rest_a, rest_b = a[whole], b[whole]
    if rest_a.startswith(rest_b) or rest_b.startswith(rest_a):
        rest_a, rest_b = "".join(a[whole:]), "".join(b[whole:])
    shared = _common_prefix(rest_a, rest_b)
    # Convert the shared chars into whole segments of b plus a partial one.
    for seg in b[whole:]:
        if shared < len(seg):
            break
        shared -= len(seg)
        chars += len(seg)
        whole += 1
    return chars + shared, whole, shared


def request_cost(
    previous: Sequence[str] | None,
    segments: Sequence[str],
    counter: TokenCounter,
    pricing: Pricing | None = None,
) -> RequestCost:
    """Size and cache-aware cost of the request ``segments``, sent after ``previous``, at
    ``pricing``'s prices (default: :data:`~toolkeep.pricing.DEFAULT_PRICING`).

    Tokens are counted per segment and summed (BPE merges across a segment boundary are rare and
    would only move a token or two); the cached part is the tokens of the whole shared segments
    plus those of the shared start of the next one.
    """
    chars = sum(len(s) for s in segments)
    tokens = sum(counter.count(s) for s in segments)
    cached = 0
    if previous is not None:
        _, whole, partial = common_prefix_length(previous, segments)
        cached = sum(counter.count(s) for s in segments[:whole])
        if partial and whole < len(segments):
            cached += counter.count(segments[whole][:partial])
        cached = min(cached, tokens)
    p = pricing if pricing is not None else PRESETS[DEFAULT_PRICING]
    rest = tokens - cached
    cost = p.cache_read * cached + p.cache_write * rest
    written, uncached = (rest, 0) if p.write_premium else (0, rest)
    dollars = (p.dollars(cached, p.cache_read), p.dollars(written, p.cache_write), p.dollars(uncached))
    return RequestCost(chars, tokens, cached, round(cost, 6), written, uncached, dollars)
