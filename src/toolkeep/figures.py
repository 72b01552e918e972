"""The figures of a conversation's requests, with and without toolkeep: what ``toolkeep replay``
prints and the proxy's live pages show (:mod:`toolkeep.inspector.live`).

Both measure each request with the cache-aware cost model of :mod:`toolkeep.costs` and sum the
costs here: :class:`Side` per side, :class:`ReplayResult` per conversation, :func:`combine` over
conversations. The proxy never imports :mod:`toolkeep.replay` for them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .costs import RequestCost
from .pricing import Pricing
from .report import Report

__all__ = [
    "RESULT_COUNTS",
    "RecordedSession",
    "ReplayResult",
    "RequestTrace",
    "Side",
    "combine",
    "ratios",
]


@dataclass(frozen=True)
class RecordedSession:
    """One recorded agent session, as the history a toolkeep format reads."""

    source: str
    """Where it came from: the file path, plus ``#NAME`` when one file holds several sessions."""
    format: str
    """The log format it was read from (an importer name such as ``claude-code``)."""
    messages: list[Any]
    """The history, in ``api_format``."""
    api_format: str = "anthropic"
    """The toolkeep format of ``messages`` (a name in ``toolkeep.formats.FORMATS``)."""
    system: str | None = None
    """The system prompt when the log records it; it is part of every request of the session."""
    notes: dict[str, int] = field(default_factory=dict)
    """Import counts worth a mention (e.g. ``orphan_results`` kept as user text)."""
    pricing: str | None = None
    """The price list of the agent that wrote the log (a preset name), when its log format says
    which provider it ran on; ``None``: the one ``api_format`` suggests."""


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
