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
from collections.abc import Callable
from typing import Any

from ..config import Config
from ..costs import CLOSING, opening_segment, request_cost, serialize_message
from ..figures import RESULT_COUNTS, RecordedSession, ReplayResult, RequestTrace, Side, combine, ratios
from ..formats import get_format
from ..pricing import Pricing, resolve_pricing
from ..report import REPAIR_KINDS, Report
from ..session import Session
from ..shorten import CCR_MARKER_RE
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
