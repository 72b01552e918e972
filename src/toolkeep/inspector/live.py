"""The inspector for a running proxy: ``GET /toolkeep/`` lists its conversations, each with its page.

The proxy hands :meth:`LiveRecords.record` each request it prepared (its cost without and with
toolkeep, toolkeep's report, the messages as they came and as they went); a conversation's
page is the inspector's page (:func:`toolkeep.inspector.render`) of those records: the same
timeline, results and repairs as ``toolkeep inspect`` shows for a log. The records are bounded:
the last :data:`MAX_CONVERSATIONS` conversations, the last :data:`MAX_ROWS` requests of each.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from html import escape
from typing import Any

from ..costs import RequestCost
from ..figures import RESULT_COUNTS, RecordedSession, ReplayResult, RequestTrace, Side, combine
from ..pricing import Pricing
from ..report import REPAIR_KINDS, Report
from .collect import SessionTrace
from .page import render

__all__ = ["MAX_CONVERSATIONS", "MAX_ROWS", "LiveRecords"]

log = logging.getLogger("toolkeep.proxy")

MAX_CONVERSATIONS = 64
"""Conversations whose records are kept (the least recently used go first)."""
MAX_ROWS = 20_000
"""Requests kept per conversation (the oldest rows go first; totals keep counting)."""


class _Conversation:
    def __init__(self, key: str, route: str, pricing: Pricing) -> None:
        self.key, self.route, self.pricing = key, route, pricing
        self.trace = SessionTrace(RecordedSession(key, route, [], api_format=route))
        self.without, self.with_ = Side(), Side()
        self.requests = 0
        self.messages = 0
        self.results: dict[str, int] = {}
        self.last = time.time()
        self.lock = threading.Lock()
        """Held while the conversation is recorded or its page rendered."""


class LiveRecords:
    """What a proxy keeps of each conversation it prepared, for its inspector pages (thread-safe)."""

    def __init__(self, policy: str, unit: str) -> None:
        self.policy, self.unit = policy, unit
        self._table: OrderedDict[str, _Conversation] = OrderedDict()
        self._lock = threading.Lock()

    def record(
        self,
        key: str,
        route: str,
        pricing: Pricing,
        without: RequestCost,
        with_: RequestCost,
        report: Report,
        received: Sequence[Any],
        sent: list[Any],
    ) -> None:
        """One prepared request of conversation ``key``: ``received`` the messages as they came,
        ``sent`` as they went upstream. Never raises: what cannot be recorded is logged and left
        out, the request goes on."""
        try:
            with self._lock:
                c = self._table.pop(key, None)
                if c is None:
                    c = _Conversation(key, route, pricing)
                    while len(self._table) >= MAX_CONVERSATIONS:
                        self._table.popitem(last=False)
                self._table[key] = c
            with c.lock:
                trace = c.trace
                c.requests += 1
                c.messages = len(received)
                c.last = time.time()
                c.without.add(without)
                c.with_.add(with_)
                del c.without.per_turn[:-1], c.with_.per_turn[:-1]  # the rows hold them
                c.results = {name: getattr(report, name) for name in RESULT_COUNTS}
                trace.recorded = RecordedSession(key, route, list(received), api_format=route)
                trace.forget_history()
                trace(RequestTrace(c.requests, len(received), without, with_, report, sent))
                if len(trace.rows) > MAX_ROWS:
                    del trace.rows[: len(trace.rows) - MAX_ROWS]
        except Exception as exc:  # the inspector must never stop a request
            log.warning("toolkeep proxy: the inspector could not record a request of %s: %r", key, exc)

    def keys(self) -> list[str]:
        with self._lock:
            return list(reversed(self._table))

    def _result(self, c: _Conversation) -> ReplayResult:
        repairs = {kind: sum(1 for r in c.trace.repairs if r["kind"] == kind) for kind in REPAIR_KINDS}
        return ReplayResult(
            source=f"{c.route} conversation {c.key}",
            format=c.route,
            api_format=c.route,
            turns=c.requests,
            messages=c.messages,
            without=c.without,
            with_=c.with_,
            repairs={k: v for k, v in repairs.items() if v},
            results=dict(c.results),
            policy=self.policy,
            pricing=c.pricing,
            pricing_source="proxy",
        )

    def document(self, key: str) -> dict[str, Any] | None:
        """The ``replay --json``-shaped document of conversation ``key`` (``None``: not kept)."""
        with self._lock:
            c = self._table.get(key)
        if c is None:
            return None
        result = self._result(c)
        assert c.pricing is not None
        return {
            "unit": self.unit,
            "exact_tokens": False,
            "policy": self.policy,
            "cost_model": {
                "unit": "base input tokens",
                "pricing": c.pricing.name,
                "cache_read": c.pricing.cache_read,
                "cache_write": c.pricing.cache_write,
                "input_price_per_mtok": c.pricing.input_price,
                "pricing_lists": {c.pricing.name: c.pricing.to_dict()},
            },
            "sessions": [result.to_dict()],
            "total": combine([result]),
            "skipped": [],
        }

    def page(self, key: str) -> str | None:
        """The inspector's page of conversation ``key`` (``None``: not kept)."""
        with self._lock:
            c = self._table.get(key)
        if c is None:
            return None
        with c.lock:
            document = self.document(key)
            return None if document is None else render(document, [c.trace])

    def index(self) -> str:
        """The list of the conversations kept, newest first, each linking to its page."""
        rows = []
        with self._lock:
            conversations = list(reversed(self._table.values()))
        for c in conversations:
            ratio = c.with_.cost / c.without.cost if c.without.cost else None
            rows.append(
                f"<tr><td><a href='/toolkeep/c/{escape(c.key)}'>{escape(c.key)}</a></td><td>{escape(c.route)}</td>"
                f"<td class=n>{c.requests:,}</td><td class=n>{c.messages:,}</td>"
                f"<td class=n>{c.without.tokens:,}</td><td class=n>{c.with_.tokens:,}</td>"
                f"<td class=n>{'-' if ratio is None else f'{ratio:.2f}x'}</td>"
                f"<td class=n>{len(c.trace.results):,}</td><td class=n>{len(c.trace.repairs):,}</td>"
                f"<td>{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(c.last))}</td></tr>"
            )
        body = "".join(rows) or "<tr><td colspan=10>No conversation prepared yet.</td></tr>"
        return (
            "<!doctype html><html lang=en><head><meta charset=utf-8>"
            "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'\">"
            "<title>toolkeep proxy: conversations</title><style>body{font:14px/1.45 system-ui,sans-serif;"
            "margin:18px 22px;color:#1d2330}table{border-collapse:collapse;width:100%}th,td{padding:3px 8px;"
            "border-bottom:1px solid #d9dde5;text-align:left}th{background:#f5f7fa}.n{text-align:right;"
            "font-variant-numeric:tabular-nums}</style></head><body><h1>toolkeep proxy: conversations</h1>"
            f"<p>The last {MAX_CONVERSATIONS} conversations this proxy prepared, newest first; policy "
            f"{escape(self.policy)}, tokens in {escape(self.unit)}, cost with the prompt cache over without. "
            "<a href='/toolkeep/stats'>statistics</a></p><table><thead><tr><th>conversation</th><th>route</th>"
            "<th class=n>requests</th><th class=n>messages</th><th class=n>tokens without</th>"
            "<th class=n>tokens with</th><th class=n>cost \u00d7</th><th class=n>results shortened</th>"
            f"<th class=n>repairs</th><th>last request</th></tr></thead><tbody>{body}</tbody></table></body></html>"
        )
