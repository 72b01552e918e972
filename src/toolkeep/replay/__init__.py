"""Replay recorded agent sessions through toolkeep and measure what it saves.

>>> from toolkeep.replay import load_sessions, replay_session, get_counter   # doctest: +SKIP
>>> for recorded in load_sessions("~/.claude/projects/app/1234.jsonl"):      # doctest: +SKIP
...     result = replay_session(recorded, get_counter())
...     print(result.to_dict()["ratios"])

Pieces: :mod:`.importers` (agent logs to histories), :mod:`.tokens` (offline token counts),
:mod:`toolkeep.costs` (the prompt-cache-aware cost model, shared with the proxy; also as
:mod:`.cost`), :mod:`.replay` (the turn-by-turn replay) and :mod:`.plot` (context size per turn;
needs matplotlib).
"""

from __future__ import annotations

from ..costs import CACHE_READ, CACHE_WRITE, RequestCost, request_cost
from .importers import LOG_IMPORTERS, RecordedSession, format_names, iter_log_files, load_sessions
from .replay import ReplayResult, RequestTrace, Side, combine, replay_session, request_ends, session_pricing
from .tokens import TokenCounter, get_counter

__all__ = [
    "CACHE_READ",
    "CACHE_WRITE",
    "LOG_IMPORTERS",
    "RecordedSession",
    "ReplayResult",
    "RequestCost",
    "RequestTrace",
    "Side",
    "TokenCounter",
    "combine",
    "format_names",
    "get_counter",
    "iter_log_files",
    "load_sessions",
    "replay_session",
    "request_cost",
    "request_ends",
    "session_pricing",
]
