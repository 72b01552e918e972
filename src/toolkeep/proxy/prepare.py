"""What the proxy does to one request body: prepare its history, or forward it untouched.

Only the history (``messages`` / ``input`` / ``contents``) is prepared, through the request-object
path of :meth:`toolkeep.Session.prepare`, and each shortened result in it names the way back the
request's tools give (:mod:`.files`); every other field is the very value it was. Fail open: when
the body is no JSON request object, or preparing it fails for any reason, the original bytes are
forwarded and :attr:`Outcome.error` says why (the caller logs it in one line). A body that
holds a number past a float's range (``1e400``, valid JSON) or a name JSON does not have
(``NaN``, ``Infinity``) goes out as it came too, before any conversation's state is touched.
When toolkeep changes nothing the original bytes go out as they came.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from ..costs import request_cost, request_segments, serialize_message
from ..formats import get_format
from ..inspector.live import LiveRecords
from ..jsonnumbers import Number, parse_float, refuse_constant
from ..pricing import Pricing, resolve_pricing
from ..requests import read_request, system_text
from ..tokens import TokenCounter, get_counter
from .conversations import Conversations
from .files import keep_last_turn, name_ways_back, request_way

__all__ = ["Figures", "Outcome", "Preparer", "Totals"]


class _Chars(TokenCounter):
    """chars/4, without the replay counter's memory of every string it counted (a proxy runs
    for days)."""

    def count(self, text: str) -> int:
        return self.count_once(text)


_CHARS = get_counter("chars")
_COUNTER: TokenCounter = _Chars(_CHARS.unit, _CHARS.exact, _CHARS.count_once)


@dataclass
class Figures:
    """Sizes (in :data:`_COUNTER`'s unit), repairs, cuts and cache-aware costs (in base input
    tokens), without toolkeep and with it: of one request, or summed over many."""

    tokens_before: int = 0
    tokens_after: int = 0
    repairs: int = 0
    cuts: int = 0
    cost_unmanaged: float = 0.0
    cost_managed: float = 0.0

    def add(self, other: Figures) -> None:
        self.tokens_before += other.tokens_before
        self.tokens_after += other.tokens_after
        self.repairs += other.repairs
        self.cuts += other.cuts
        self.cost_unmanaged += other.cost_unmanaged
        self.cost_managed += other.cost_managed


@dataclass
class Outcome:
    """One request as the proxy handled it."""

    body: bytes
    """What is sent upstream."""
    conversation: str | None = None
    figures: Figures = field(default_factory=Figures)
    error: str | None = None
    """Why the body went out unchanged (fail open), or ``None``."""

    @property
    def prepared(self) -> bool:
        return self.conversation is not None and self.error is None


@dataclass
class Totals:
    """Running totals over every request (``GET /toolkeep/stats``)."""

    requests: int = 0
    prepared: int = 0
    failed_open: int = 0
    forwarded: int = 0
    """Requests forwarded as they are by design (other endpoints, ``count_tokens``, ...)."""
    changed: int = 0
    figures: Figures = field(default_factory=Figures)
    statuses: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, outcome: Outcome | None) -> None:
        with self.lock:
            self.requests += 1
            if outcome is None or (outcome.error is None and outcome.conversation is None):
                self.forwarded += 1
                return
            if outcome.error is not None:
                self.failed_open += 1
                return
            self.prepared += 1
            self.changed += outcome.figures.tokens_after != outcome.figures.tokens_before
            self.figures.add(outcome.figures)

    def status(self, code: int) -> None:
        with self.lock:
            self.statuses[str(code)] = self.statuses.get(str(code), 0) + 1

    def to_dict(self, conversations: Conversations) -> dict[str, Any]:
        with self.lock:
            f = self.figures
            saved = f.tokens_before - f.tokens_after
            unmanaged, managed = round(f.cost_unmanaged, 1), round(f.cost_managed, 1)
            return {
                "requests": self.requests,
                "prepared": self.prepared,
                "changed": self.changed,
                "failed_open": self.failed_open,
                "forwarded": self.forwarded,
                "statuses": dict(self.statuses),
                "conversations": {"active": len(conversations), "started": conversations.started},
                "tokens": {
                    "unit": _COUNTER.unit,
                    "before": f.tokens_before,
                    "after": f.tokens_after,
                    "saved": saved,
                    "saved_share": round(saved / f.tokens_before, 4) if f.tokens_before else 0.0,
                },
                "repairs": f.repairs,
                "cuts": f.cuts,
                "cost": {
                    "unit": "input tokens at the base price; a prefix shared with the "
                    "conversation's last request is read from the cache, the rest written to it, "
                    "at the prices of the configured (or the format's) price list",
                    "unmanaged": unmanaged,
                    "managed": managed,
                    "saved": round(unmanaged - managed, 1),
                    "ratio": round(managed / unmanaged, 4) if unmanaged else None,
                },
            }


class Preparer:
    """Prepares request bodies for one proxy (thread-safe: one lock per conversation)."""

    def __init__(self, conversations: Conversations) -> None:
        self.conversations = conversations
        self.totals = Totals()
        self._prices: dict[str, Pricing] = {}
        self.records = LiveRecords(conversations.config.policy, _COUNTER.unit)
        """Each conversation's requests, for the inspector's pages (``GET /toolkeep/``)."""

    def prepare(self, route: str, body: bytes, mcp_url: str | None = None) -> Outcome:
        """The body to send upstream for ``body``, never raising (see the module docstring);
        ``mcp_url`` is the proxy's MCP server as the client reaches it (named by agents that
        cannot read the proxy's files and have no recall tool yet)."""
        try:
            return self._prepare(route, body, mcp_url)
        except Exception as exc:  # fail open, whatever went wrong (RecursionError too): the line says what
            return Outcome(body, error=_reason(exc))

    def _prepare(self, route: str, body: bytes, mcp_url: str | None) -> Outcome:
        past: list[Number] = []

        def number(literal: str) -> float:
            value = parse_float(literal)
            if isinstance(value, Number):
                past.append(value)
            return value

        try:
            document = json.loads(body, parse_float=number, parse_constant=refuse_constant)
        except (ValueError, RecursionError) as exc:
            return Outcome(body, error=f"the body is not JSON ({type(exc).__name__}: {_short(exc)})")
        if past:  # it could not be written back as it came: nothing is prepared, nothing recorded
            return Outcome(body, error=f"the body holds {len(past)} number(s) past a float's range, as 1e400")
        if not isinstance(document, dict):
            return Outcome(body, error=f"the body is a JSON {type(document).__name__}, not a request object")
        request = read_request(document)
        history = request.history
        if history is None:  # a plain string: nothing to prepare, forwarded as it is
            return Outcome(body)
        conversation = self.conversations.get(route, history)
        fmt = request.format(route)
        with conversation.lock:
            texts = [serialize_message(m) for m in history]
            state = conversation.state
            timeline = self.conversations.timeline
            # the request as read goes to the conversation, which the table found by its key:
            # neither is computed twice for one request
            if timeline is None:
                prepared, report = state.prepare_request(document, route, request=request)
            else:  # the policy decides with time: from the shared records
                moment = timeline.moment(conversation.key, history, texts, state.cache_times)
                prepared, report = state.prepare_request(
                    document, route, now=moment.time, cache=moment.cache, request=request
                )
                timeline.record(moment, state.cache_times())
            current = request_way(
                get_format(request.format_name(route)).request_tools(document),
                self.conversations.remote_agents,
                mcp_url,
            )
            # (the last turn the client's own first: a way back is chosen when a text is sent)
            kept = keep_last_turn(prepared[request.key], history, fmt)
            out_history = name_ways_back(kept, history, conversation.ways.chooser(current))
            # the session hands back the very objects it left alone: one serialization each
            by_id = {id(m): text for m, text in zip(history, texts, strict=True)}
            changed = (
                len(out_history) != len(history)
                or any(a is not b for a, b in zip(out_history, history, strict=True))
            ) and out_history != list(history)  # (equal copies: the body goes as it came)
            system = system_text(document)
            before = request_segments(system, texts)
            out_texts = [by_id.get(id(m)) or serialize_message(m) for m in out_history] if changed else texts
            after = request_segments(system, out_texts) if changed else before
            pricing = self._pricing(route)
            unmanaged = request_cost(conversation.previous.get("unmanaged"), before, _COUNTER, pricing)
            managed = request_cost(conversation.previous.get("managed"), after, _COUNTER, pricing)
            conversation.previous = {"unmanaged": before, "managed": after}
            conversation.requests += 1
            self.records.record(
                conversation.key, route, pricing, unmanaged, managed, report, history, out_history
            )
        out = (
            _document(prepared, request.key, out_texts).encode("utf-8", "surrogatepass") if changed else body
        )
        return Outcome(
            out,
            conversation=conversation.key,
            figures=Figures(
                unmanaged.tokens,
                managed.tokens,
                len(report.repairs),
                len(report.cuts),
                unmanaged.cost,
                managed.cost,
            ),
        )

    def _pricing(self, route: str) -> Pricing:
        """The price list the route's requests are decided and priced with: the configured one,
        else the one the route's format suggests (as the session's policy resolves it)."""
        found = self._prices.get(route)
        if found is None:
            found = self._prices[route] = resolve_pricing(
                self.conversations.config.pricing, get_format(route)
            )
        return found


def _document(document: dict[str, Any], key: str, items: list[str]) -> str:
    """The compact JSON text of ``document`` (as :func:`~toolkeep.tokens.serialize_message` writes
    a value) where ``document[key]`` is the list whose items' texts are ``items``: the history,
    already serialized item by item, is joined, not serialized again."""
    return (
        "{"
        + ",".join(
            f"{serialize_message(name)}:{'[' + ','.join(items) + ']' if name == key else serialize_message(value)}"
            for name, value in document.items()
        )
        + "}"
    )


def _short(exc: BaseException) -> str:
    """What a parser's error says, on one line and short (it names positions, not contents)."""
    return " ".join(str(exc).split())[:120]


def _reason(exc: BaseException) -> str:
    """One line naming what failed, without the data: the type and, for toolkeep's own errors
    (which name fields, never contents), the message."""
    from ..exceptions import ToolkeepError

    if isinstance(exc, ToolkeepError):
        return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f" at {tb.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}" if tb else ""
    return f"{type(exc).__name__}{where}"
