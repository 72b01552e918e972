"""Replay a recorded session turn by turn, with and without toolkeep, and measure both.

For each assistant message at index *i* of a recorded history, the request the agent sent before
it is ``history[:i]``. The replay sends every such request twice, on paper: as recorded
("without") and through ``Session.prepare`` ("with"; one Session per recorded session, as an
agent would use it), and measures each request's size and cache-aware cost
(:mod:`toolkeep.costs`). The model's replies stay as recorded: a replay shows what toolkeep
would have sent for the same conversation, not how the model would have answered it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..config import Config
from ..costs import CLOSING, RequestCost, opening_segment, request_cost, serialize_message
from ..formats import get_format
from ..pricing import Pricing, resolve_pricing
from ..report import REPAIR_KINDS, Report
from ..session import Session
from ..shorten import CCR_MARKER_RE
from .importers import RecordedSession
from .tokens import TokenCounter

__all__ = [
    "RESULT_COUNTS",
    "ReplayResult",
    "RequestTrace",
    "Side",
    "combine",
    "ratios",
    "replay_session",
    "request_ends",
    "session_pricing",
]

RESULT_COUNTS = ("total", "capped", "persisted", "truncated", "summarized", "preserved")
"""The report counts a replay gives for the tool results of its last request."""


@dataclass
class Side:
    """Totals of one side (with or without toolkeep) over the requests of a replay."""

    tokens: int = 0
    """Input tokens sent, summed over every request."""
    chars: int = 0
    peak_tokens: int = 0
    """The largest single request: the peak context."""
    cached_tokens: int = 0
    """Tokens read from the cache."""
    cache_write_tokens: int = 0
    """Tokens written to the cache (price lists with a write premium)."""
    uncached_tokens: int = 0
    """Tokens sent at the base price, neither read nor written (lists with no write premium)."""
    cost: float = 0.0
    """Cache-aware cost in base-input-token units (see :mod:`toolkeep.costs`)."""
    dollars: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    """What the cache reads, the cache writes and the uncached input cost, in dollars."""
    per_turn: list[int] = field(default_factory=list, repr=False)
    """Tokens of each request, in order (the context size per turn)."""

    def add(self, rc: RequestCost) -> None:
        self.tokens += rc.tokens
        self.chars += rc.chars
        self.cached_tokens += rc.cached_tokens
        self.cache_write_tokens += rc.written_tokens
        self.uncached_tokens += rc.uncached_tokens
        self.dollars = [a + b for a, b in zip(self.dollars, rc.dollars, strict=True)]
        self.cost += rc.cost
        self.peak_tokens = max(self.peak_tokens, rc.tokens)
        self.per_turn.append(rc.tokens)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "chars": self.chars,
            "peak_tokens": self.peak_tokens,
            "cached_tokens": self.cached_tokens,
            "cache_read_tokens": self.cached_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "uncached_tokens": self.uncached_tokens,
            "cost": round(self.cost, 2),
            "dollars": {
                "cache_reads": round(self.dollars[0], 4),
                "cache_writes": round(self.dollars[1], 4),
                "uncached": round(self.dollars[2], 4),
                "total": round(sum(self.dollars), 4),
            },
        }

    def merge(self, other: Side) -> None:
        """Add ``other``'s totals (peaks summed) to this side's."""
        self.tokens += other.tokens
        self.chars += other.chars
        self.cached_tokens += other.cached_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.uncached_tokens += other.uncached_tokens
        self.dollars = [a + b for a, b in zip(self.dollars, other.dollars, strict=True)]
        self.cost += round(other.cost, 2)
        self.peak_tokens += other.peak_tokens


@dataclass
class ReplayResult:
    """What one recorded session's replay measured."""

    source: str
    format: str
    api_format: str
    turns: int
    messages: int
    without: Side
    with_: Side
    repairs: dict[str, int] = field(default_factory=dict)
    """Distinct repairs (kind and call id) made over all requests, by kind."""
    results: dict[str, int] = field(default_factory=dict)
    """What the last request's tool results went through (counts from toolkeep's report)."""
    recoverable: dict[str, int] = field(default_factory=dict)
    prepare_seconds: float = 0.0
    dumps_seconds: float = 0.0
    """Time ``json.dumps`` took on each recorded request (only measured with ``timing=True``)."""
    notes: dict[str, int] = field(default_factory=dict)
    policy: str = ""
    """The policy the session ran."""
    pricing: Pricing | None = None
    """The price list both sides were priced with (and the policy decided with)."""
    pricing_source: str = ""
    """Where that list came from: ``given`` (the config's), ``log format`` (the agent's provider,
    :attr:`RecordedSession.pricing`) or ``history format`` (what the history's format suggests)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``toolkeep replay --json`` prints for a session."""
        out: dict[str, Any] = {
            "source": self.source,
            "format": self.format,
            "api_format": self.api_format,
            "turns": self.turns,
            "messages": self.messages,
            "policy": self.policy,
            "pricing": self.pricing.to_dict() if self.pricing is not None else None,
            "pricing_source": self.pricing_source,
            "without": self.without.to_dict(),
            "with": self.with_.to_dict(),
            "ratios": ratios(self.without, self.with_),
            "repairs": dict(self.repairs),
            "results": dict(self.results),
            "recoverable": dict(self.recoverable),
            "prepare_seconds": round(self.prepare_seconds, 4),
        }
        if self.dumps_seconds:
            out["dumps_seconds"] = round(self.dumps_seconds, 4)
        if self.notes:
            out["import_notes"] = dict(self.notes)
        return out


def ratios(without: Side, with_: Side) -> dict[str, float | None]:
    """With over without, for tokens sent, peak context and cost (None when without is 0)."""

    def ratio(a: float, b: float) -> float | None:
        return round(a / b, 4) if b else None

    return {
        "tokens": ratio(with_.tokens, without.tokens),
        "peak_tokens": ratio(with_.peak_tokens, without.peak_tokens),
        "cost": ratio(with_.cost, without.cost),
    }


@dataclass(frozen=True, slots=True)
class RequestTrace:
    """One request of a replay, as ``replay_session``'s ``on_request`` is given it."""

    number: int
    """1 for the first request."""
    end: int
    """The request is ``recorded.messages[:end]``."""
    without: RequestCost
    with_: RequestCost
    report: Report
    """toolkeep's report on the request: its repairs and cuts are the whole request's."""
    prepared: list[Any]
    """The messages toolkeep sends (provider format; read-only)."""


def session_pricing(recorded: RecordedSession, config: Config) -> tuple[Config, Pricing, str]:
    """The config a replay of ``recorded`` runs with, its price list and where that came from:
    the config's when it names one, else the agent's provider's (the log format's), else what the
    history's format suggests."""
    fmt = get_format(recorded.api_format)
    if config.pricing is not None:
        return config, resolve_pricing(config.pricing, fmt), "given"
    if recorded.pricing is not None:
        config = config.replace(pricing=recorded.pricing)
        return config, resolve_pricing(config.pricing, fmt), "log format"
    return config, resolve_pricing(None, fmt), "history format"


def request_ends(recorded: RecordedSession) -> list[int]:
    """The end (exclusive) of each request: the index of each assistant message but a first one."""
    history = get_format(recorded.api_format).load(recorded.messages)
    return [i for i, m in enumerate(history) if m.role == "assistant" and i > 0]


class _Serializer:
    """Request segments, serializing each message object once while it stays in the requests."""

    def __init__(self, system: str | None) -> None:
        self.opening = opening_segment(system)
        self._cache: dict[int, tuple[Any, str, str]] = {}

    def segments(self, messages: list[Any]) -> list[str]:
        cache: dict[int, tuple[Any, str, str]] = {}
        segments = [self.opening]
        for i, m in enumerate(messages):
            entry = self._cache.get(id(m))
            if entry is None or entry[0] is not m:
                text = serialize_message(m)
                entry = (m, text, "," + text)
            cache[id(m)] = entry
            segments.append(entry[2] if i else entry[1])
        # Keep only what this request holds: ids of dropped objects may be reused.
        self._cache = cache
        segments.append(CLOSING)
        return segments


def replay_session(
    recorded: RecordedSession,
    counter: TokenCounter,
    *,
    config: Config | None = None,
    timing: bool = False,
    on_turn: Callable[[int, int], None] | None = None,
    on_request: Callable[[RequestTrace], None] | None = None,
) -> ReplayResult:
    """Replay ``recorded`` through one :class:`~toolkeep.Session` and measure both sides.

    ``on_turn(done, total)`` is called after each request (for a progress bar), and
    ``on_request`` with the request's :class:`RequestTrace` (for the inspector). With ``timing``
    the time of ``json.dumps`` on each recorded request is measured too, as a yardstick. Both
    sides are priced, and the policy decides, with the config's price list, else the agent's
    provider's (:func:`session_pricing`). Every request is prepared at the same clock
    reading (cache lifetimes are not modelled), so a replay gives the same figures every time.
    """
    config, pricing, pricing_source = session_pricing(recorded, config if config is not None else Config())
    ends = request_ends(recorded)
    messages = recorded.messages
    without, with_ = Side(), Side()
    raw_ser, kept_ser = _Serializer(recorded.system), _Serializer(recorded.system)
    prev_raw: list[str] | None = None
    prev_kept: list[str] | None = None
    repairs: set[tuple[str, str]] = set()
    report = Report()
    prepared: list[Any] = []
    prepare_seconds = dumps_seconds = 0.0
    recoverable: dict[str, int] = {}
    with Session(config, clock=lambda: 0.0) as session:
        for done, end in enumerate(ends, 1):
            request = messages[:end]
            t0 = time.perf_counter()
            prepared, report = session.prepare(request, format=recorded.api_format)
            prepare_seconds += time.perf_counter() - t0
            if timing:
                t0 = time.perf_counter()
                json.dumps(request, ensure_ascii=False)
                dumps_seconds += time.perf_counter() - t0
            repairs.update((r.kind, r.id) for r in report.repairs)
            raw = raw_ser.segments(request)
            kept = kept_ser.segments(prepared)
            cost_without = request_cost(prev_raw, raw, counter, pricing)
            cost_with = request_cost(prev_kept, kept, counter, pricing)
            without.add(cost_without)
            with_.add(cost_with)
            prev_raw, prev_kept = raw, kept
            if on_request is not None:
                on_request(RequestTrace(done, end, cost_without, cost_with, report, prepared))
            if on_turn is not None:
                on_turn(done, len(ends))
        if ends:
            recoverable = _recoverable(session, prev_kept or [], report)
    by_kind = {kind: sum(1 for k, _ in repairs if k == kind) for kind in REPAIR_KINDS}
    return ReplayResult(
        source=recorded.source,
        format=recorded.format,
        api_format=recorded.api_format,
        turns=len(ends),
        messages=len(messages),
        without=without,
        with_=with_,
        repairs={k: v for k, v in by_kind.items() if v},
        results={name: getattr(report, name) for name in RESULT_COUNTS},
        recoverable=recoverable,
        prepare_seconds=prepare_seconds,
        dumps_seconds=dumps_seconds,
        notes=dict(recorded.notes),
        policy=config.policy,
        pricing=pricing,
        pricing_source=pricing_source,
    )


def _recoverable(session: Session, segments: list[str], report: Report) -> dict[str, int]:
    """How much of what the last request left out can be recalled, checked against the store."""
    keys = set(CCR_MARKER_RE.findall("".join(segments)))
    recalled = 0
    recalled_chars = 0
    for key in keys:
        original = session.recall(key)
        if original is not None:
            recalled += 1
            recalled_chars += len(original)
    return {
        "markers": len(keys),
        "recallable": recalled,
        "original_chars": recalled_chars,
        "omitted_chars": max(report.chars_before - report.chars_after, 0),
    }


def combine(results: Iterable[ReplayResult]) -> dict[str, Any]:
    """The ``total`` of a replay: every count summed over the sessions."""
    results = list(results)
    without, with_ = Side(), Side()
    for r in results:
        without.merge(r.without)
        with_.merge(r.with_)

    def summed(attr: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in results:
            for k, v in getattr(r, attr).items():
                out[k] = out.get(k, 0) + v
        return out

    return {
        "sessions": len(results),
        "turns": sum(r.turns for r in results),
        "without": without.to_dict(),
        "with": with_.to_dict(),
        "max_peak_tokens": {
            "without": max((r.without.peak_tokens for r in results), default=0),
            "with": max((r.with_.peak_tokens for r in results), default=0),
        },
        "ratios": ratios(without, with_),
        "repairs": summed("repairs"),
        "results": summed("results"),
        "recoverable": summed("recoverable"),
        "prepare_seconds": round(sum(r.prepare_seconds for r in results), 4),
    }
