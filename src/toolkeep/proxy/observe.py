"""What the proxy tells about each request: metrics, the JSON request log, the statistics.

:class:`Observer` hears of every request once its answer is done (:meth:`Observer.done`): it
counts it in the process's metrics (:mod:`.metrics`, ``GET /metrics``), adds its figures to the
statistics kept in the store (:mod:`.stats`, ``GET /toolkeep/stats``, per conversation with
``?conversation=KEY``, and ``GET /toolkeep/stats/conversations``), and with ``--log-json FILE``
writes one JSON line about it:

``time`` (UTC, ISO 8601), ``method``, ``path`` (never the query string, which may hold a key),
``route``, ``policy``, ``outcome`` (``prepared``, ``failed_open``, ``forwarded``), ``error`` (why
it failed open), ``conversation`` (its full key), ``tokens`` (``before`` and ``after``, with the
``unit`` and how they were ``counted``: as ``toolkeep replay --tokens chars`` counts a request),
``cost`` (cache-aware, in base input tokens: ``unmanaged``, ``managed``, ``cache_read_tokens``,
``cache_write_tokens``), ``repairs`` (by kind), ``tiers_moved`` (results moved to each shorter
form), ``store_errors``, ``prepare_ms``, ``status`` (the upstream's, or 502), ``end`` (``ok``,
``client disconnected``, ...), ``bytes`` (of the answer) and ``ms`` (the whole request).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import threading
import weakref
from pathlib import Path
from typing import IO, Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from ..exceptions import StoreError
from .conversations import Conversations
from .metrics import REGISTRY, Registry, fail_open, store_error
from .prepare import Outcome, Preparer
from .stats import TOKENS_COUNTED, TOKENS_UNIT, Recorder, StatsBackend, figures_document, stats_backend

__all__ = ["Observer", "observer_for", "open_log"]

MAX_LISTED = 1_000
"""Most conversations ``GET /toolkeep/stats/conversations`` lists."""


def open_log(path: str | Path) -> IO[str]:
    """``path`` opened to append JSON lines (line-buffered); :class:`OSError` when it cannot be."""
    return open(path, "a", encoding="utf-8", buffering=1)


class Observer:
    """The metrics, statistics and JSON log of one proxy (see the module docstring)."""

    def __init__(
        self,
        conversations: Conversations,
        stats: StatsBackend,
        *,
        log_json: IO[str] | None = None,
        registry: Registry = REGISTRY,
    ) -> None:
        self.conversations = conversations
        self.policy = conversations.config.policy
        self.registry = registry
        registry.policy = self.policy
        registry.gauge("toolkeep_proxy_conversations_live", lambda: float(len(conversations)))
        self.recorder = Recorder(stats)
        self.log_json = log_json
        self._log_lock = threading.Lock()

    def done(
        self, method: str, path: str, outcome: Outcome | None, status: int, end: str, sent: int, ms: float
    ) -> None:
        """Count a request whose answer is done (``status`` the upstream's, ``end`` how the
        answer ended, ``sent`` its bytes, ``ms`` the whole request's time)."""
        route = (outcome.route if outcome is not None else None) or "forwarded"
        labels = {"route": route, "policy": self.policy}
        r = self.registry
        kind = _kind(outcome)
        r.inc("toolkeep_proxy_requests_total", 1.0, outcome=kind, **labels)
        r.inc("toolkeep_proxy_upstream_responses_total", 1.0, status=str(status), **labels)
        totals: dict[str, float] = {"requests": 1, kind: 1, f"status_{status}": 1}
        if outcome is not None and outcome.route is not None:
            r.observe("toolkeep_proxy_prepare_seconds", outcome.prepare_seconds, **labels)
        if kind == "failed_open":
            fail_open(route, self.policy)
        figures: dict[str, float] = {}
        if outcome is not None and outcome.prepared:
            f = outcome.figures
            figures = {name: float(value) for name, value in vars(f).items()}
            r.inc("toolkeep_proxy_tokens_total", f.tokens_before, side="before", **labels)
            r.inc("toolkeep_proxy_tokens_total", f.tokens_after, side="after", **labels)
            r.inc("toolkeep_proxy_cache_tokens_total", f.cache_read, kind="read", **labels)
            r.inc("toolkeep_proxy_cache_tokens_total", f.cache_write, kind="written", **labels)
            r.inc("toolkeep_proxy_cost_total", f.cost_unmanaged, side="unmanaged", **labels)
            r.inc("toolkeep_proxy_cost_total", f.cost_managed, side="managed", **labels)
            r.inc("toolkeep_proxy_cost_dollars_total", f.dollars_unmanaged, side="unmanaged", **labels)
            r.inc("toolkeep_proxy_cost_dollars_total", f.dollars_managed, side="managed", **labels)
            r.inc("toolkeep_proxy_repairs_total", f.repairs, **labels)
            r.inc("toolkeep_proxy_cuts_total", f.cuts, **labels)
            if f.store_errors:
                store_error(route, f.store_errors, self.policy)
            totals.update(figures)
            totals["changed"] = float(f.tokens_after != f.tokens_before)
        if outcome is not None and outcome.conversation is not None:
            own = {"requests": 1.0, kind: 1.0, **figures}
            self.recorder.add(totals, outcome.conversation, route, own)
        else:
            self.recorder.add(totals)
        if self.log_json is not None:
            self._write(method, path, route, kind, outcome, status, end, sent, ms)

    def _write(self, method: str, path: str, route: str, kind: str, outcome: Outcome | None,
               status: int, end: str, sent: int, ms: float) -> None:  # fmt: skip
        line: dict[str, Any] = {
            "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds"),
            "method": method,
            "path": path,
            "route": route,
            "policy": self.policy,
            "outcome": kind,
        }
        if outcome is not None:
            if outcome.error is not None:
                line["error"] = outcome.error
            line["conversation"] = outcome.conversation
            if outcome.prepared:
                f = outcome.figures
                line["tokens"] = {
                    "unit": TOKENS_UNIT,
                    "counted": TOKENS_COUNTED,
                    "before": f.tokens_before,
                    "after": f.tokens_after,
                }
                line["cost"] = {
                    "unmanaged": round(f.cost_unmanaged, 1),
                    "managed": round(f.cost_managed, 1),
                    "cache_read_tokens": f.cache_read,
                    "cache_write_tokens": f.cache_write,
                }
                line["repairs"] = outcome.repair_kinds
                line["tiers_moved"] = outcome.tiers
                line["store_errors"] = f.store_errors
            if outcome.route is not None:
                line["prepare_ms"] = round(outcome.prepare_seconds * 1_000, 2)
        line.update(status=status, end=end, bytes=sent, ms=round(ms, 2))
        text = json.dumps(line, separators=(",", ":")) + "\n"
        with self._log_lock, contextlib.suppress(OSError, ValueError):  # a full disk never fails a request
            self.log_json.write(text)  # type: ignore[union-attr]

    def flush(self) -> None:
        """Write the statistics counted so far (raises :class:`StoreError`)."""
        self.recorder.flush()

    def totals(self) -> dict[str, Any]:
        """``GET /toolkeep/stats``: the totals every replica added up, since the store was new."""
        self.flush()
        t = self.recorder.backend.totals()
        statuses = {
            name.removeprefix("status_"): int(value)
            for name, value in sorted(t.items())
            if name.startswith("status_")
        }
        document = figures_document(t)
        return {
            **document,
            "changed": int(t.get("changed", 0)),
            "forwarded": int(t.get("forwarded", 0)),
            "statuses": statuses,
            "conversations": {
                "active": len(self.conversations),
                "started": int(t.get("conversations_started", 0)),
            },
            "kept_in": self.recorder.backend.where,
        }

    def routes(self) -> list[Route]:
        """``/metrics``, ``/toolkeep/stats`` and ``/toolkeep/stats/conversations``."""

        async def metrics_page(request: Request) -> Response:
            return PlainTextResponse(self.registry.render(), media_type="text/plain; version=0.0.4")

        async def stats(request: Request) -> Response:
            key = request.query_params.get("conversation")
            try:
                if key is None:
                    return JSONResponse(await anyio.to_thread.run_sync(self.totals))
                found = await anyio.to_thread.run_sync(self._conversation, key)
            except StoreError as exc:
                return _unavailable(exc)
            if found is None:
                return JSONResponse({"error": f"no statistics of conversation {key[:64]!r}"}, status_code=404)
            return JSONResponse(found)

        async def listing(request: Request) -> Response:
            raw = request.query_params.get("limit", "100")
            limit = int(raw) if raw.isdigit() else 100
            try:
                found = await anyio.to_thread.run_sync(self._listing, min(max(limit, 1), MAX_LISTED))
            except StoreError as exc:
                return _unavailable(exc)
            return JSONResponse({"conversations": found})

        return [
            Route("/metrics", metrics_page, methods=["GET"]),
            Route("/toolkeep/stats", stats, methods=["GET"]),
            Route("/toolkeep/stats/conversations", listing, methods=["GET"]),
        ]

    def _conversation(self, key: str) -> dict[str, Any] | None:
        self.flush()
        return self.recorder.backend.conversation(key)

    def _listing(self, limit: int) -> list[dict[str, Any]]:
        self.flush()
        return self.recorder.backend.conversations(limit)

    def close(self) -> None:
        """Write the statistics left, and close the JSON log."""
        self.recorder.close()
        if self.log_json is not None:
            with self._log_lock, contextlib.suppress(OSError):
                self.log_json.close()


_OBSERVERS: weakref.WeakKeyDictionary[Preparer, Observer] = weakref.WeakKeyDictionary()
"""Each preparer's observer (kept here, so that the preparer knows nothing of its observer)."""


def observe(preparer: Preparer, observer: Observer) -> None:
    """Make ``observer`` the one of ``preparer``'s proxy."""
    _OBSERVERS[preparer] = observer


def observer_for(preparer: Preparer) -> Observer:
    """The observer of ``preparer``'s proxy: the one it was given (:func:`observe`), else one
    without a JSON log, keeping its statistics beside its store (:func:`.stats.stats_backend`)."""
    observer = _OBSERVERS.get(preparer)
    if observer is None:
        table = preparer.conversations
        observer = _OBSERVERS[preparer] = Observer(table, stats_backend(table.store, table.workspace.path))
    return observer


def _kind(outcome: Outcome | None) -> str:
    if outcome is None or (outcome.error is None and outcome.conversation is None):
        return "forwarded"
    return "failed_open" if outcome.error is not None else "prepared"


def _unavailable(exc: StoreError) -> Response:
    return JSONResponse({"error": f"the statistics cannot be read: {exc}"}, status_code=503)
