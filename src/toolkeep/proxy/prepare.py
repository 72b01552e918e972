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
import re
import time
from collections import Counter
from collections.abc import Sequence
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

__all__ = ["Figures", "Outcome", "Preparer"]


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
    cache_read: int = 0
    """Tokens of what the proxy sent read from the provider's cache (estimated)."""
    cache_write: int = 0
    """Tokens of what the proxy sent written to the cache, or sent uncached (estimated)."""
    dollars_unmanaged: float = 0.0
    dollars_managed: float = 0.0
    store_errors: int = 0
    """Archive writes and reads that failed while preparing."""

    def add(self, other: Figures) -> None:
        for name, value in vars(other).items():
            setattr(self, name, getattr(self, name) + value)


@dataclass
class Outcome:
    """One request as the proxy handled it."""

    body: bytes
    """What is sent upstream."""
    conversation: str | None = None
    figures: Figures = field(default_factory=Figures)
    error: str | None = None
    """Why the body went out unchanged (fail open), or ``None``."""
    route: str | None = None
    """The history format it was prepared as."""
    tiers: dict[str, int] = field(default_factory=dict)
    """How many results moved to each shorter form (by the report's cut kinds)."""
    repair_kinds: dict[str, int] = field(default_factory=dict)
    """How many repairs of each kind were made."""
    prepare_seconds: float = 0.0
    """How long preparing took (in its worker thread)."""

    @property
    def prepared(self) -> bool:
        return self.conversation is not None and self.error is None


class Preparer:
    """Prepares request bodies for one proxy (thread-safe: one lock per conversation)."""

    def __init__(self, conversations: Conversations) -> None:
        self.conversations = conversations
        self._prices: dict[str, Pricing] = {}
        self.records = LiveRecords(conversations.config.policy, _COUNTER.unit)
        """Each conversation's requests, for the inspector's pages (``GET /toolkeep/``)."""

    def prepare(self, route: str, body: bytes, mcp_url: str | None = None) -> Outcome:
        """The body to send upstream for ``body``, never raising (see the module docstring);
        ``mcp_url`` is the proxy's MCP server as the client reaches it (named by agents that
        cannot read the proxy's files and have no recall tool yet)."""
        started = time.perf_counter()
        try:
            outcome = self._prepare(route, body, mcp_url)
        except Exception as exc:  # fail open, whatever went wrong (RecursionError too): the line says what
            outcome = Outcome(body, error=_reason(exc))
        outcome.route = route
        outcome.prepare_seconds = time.perf_counter() - started
        return outcome

    def _prepare(self, route: str, body: bytes, mcp_url: str | None) -> Outcome:
        past: list[Number] = []

        def number(literal: str) -> float:
            value = parse_float(literal)
            if isinstance(value, Number):
                past.append(value)
            return value

        decoder = json.JSONDecoder(parse_float=number, parse_constant=refuse_constant)
        raw = _RawBody.read(body, decoder)
        try:
            document = raw.document if raw is not None else decoder.decode(body.decode("utf-8-sig"))
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
        if changed:
            # unchanged items and fields go as they came (their bytes, escapes and all); the rest
            # as UTF-8, a lone surrogate escaped (never its invalid bytes)
            wire = raw.items if raw is not None and raw.key == request.key else {}
            items = [
                _item_text(m, n, history, wire) or _wire(text)
                for n, (m, text) in enumerate(zip(out_history, out_texts, strict=True))
            ]
            out = _document(prepared, request.key, items, raw).encode("utf-8")
        else:
            out = body
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
                managed.cached_tokens,
                managed.tokens - managed.cached_tokens,
                sum(unmanaged.dollars),
                sum(managed.dollars),
                len(report.save_errors),
            ),
            tiers=dict(Counter(cut.kind for cut in report.cuts)),
            repair_kinds={kind: n for kind, n in report.repair_counts().items() if n},
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


def _document(document: dict[str, Any], key: str, items: list[str], raw: _RawBody | None) -> str:
    """The JSON text of ``document`` where ``document[key]`` is the list whose items' texts are
    ``items`` (the history, already serialized item by item, is joined, not serialized again);
    a field that is the very value the body held is its text in the body, the others compact
    (as :func:`~toolkeep.tokens.serialize_message` writes a value, lone surrogates escaped)."""
    fields = raw.fields if raw is not None else {}
    parts = []
    for name, value in document.items():
        if name == key:
            text = "[" + ",".join(items) + "]"
            found = fields.get(name)
            parts.append(f"{found[1] if found is not None else _wire(serialize_message(name))}:{text}")
            continue
        found = fields.get(name)
        if found is not None and found[0] is value:
            parts.append(f"{found[1]}:{found[2]}")
        else:
            parts.append(f"{_wire(serialize_message(name))}:{_wire(serialize_message(value))}")
    return "{" + ",".join(parts) + "}"


def _item_text(item: Any, n: int, history: Sequence[Any], wire: dict[int, str]) -> str | None:
    """The text item ``n`` of the history going upstream had in the body: when it is the body's
    own item, or equal to the body's item at its place (the session hands back the copy it sent
    last time for an unchanged prefix); else ``None``."""
    found = wire.get(id(item))
    if found is None and n < len(history) and type(item) is type(history[n]) and item == history[n]:
        found = wire.get(id(history[n]))
    return found


_SURROGATE = re.compile("[\ud800-\udfff]")


def _wire(text: str) -> str:
    """JSON text as UTF-8 can carry it: each lone surrogate (only a string literal holds one, as
    ``json`` read it from an escape) written as its escape again."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if _SURROGATE.search(text) else text


_SPACE = re.compile(r"[ \t\n\r]*")


@dataclass
class _RawBody:
    """A request body read as a JSON object, with the text each field's name and value, and each
    item of a list value, had in it (see :meth:`read`)."""

    document: dict[str, Any]
    fields: dict[str, tuple[Any, str, str]]
    """Each field: its value, its name's text and its value's text."""
    key: str | None
    items: dict[int, str]
    """The text of each item of the list fields, by the item's ``id`` (the one list, if several,
    that :attr:`key` names: the first list field)."""

    @classmethod
    def read(cls, body: bytes, decoder: json.JSONDecoder) -> _RawBody | None:
        """The body read by ``decoder``'s own scanner, value by value, keeping each value's text;
        ``None`` when it is no UTF-8 JSON object (the caller reads it as ``json`` does, for its
        error or for another encoding)."""
        try:
            text = body.decode("utf-8")
            return cls._read(text, decoder.scan_once)  # type: ignore[attr-defined]
        except (ValueError, StopIteration, IndexError, RecursionError):
            return None

    @classmethod
    def _read(cls, text: str, scan: Any) -> _RawBody | None:
        document: dict[str, Any] = {}
        fields: dict[str, tuple[Any, str, str]] = {}
        lists: dict[str, dict[int, str]] = {}
        pos = _SPACE.match(text, 0).end()  # type: ignore[union-attr]
        if text[pos] != "{":
            return None
        pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
        if text[pos] == "}":
            pos += 1
        else:
            while True:
                if text[pos] != '"':
                    return None
                name, end = json.decoder.scanstring(text, pos + 1)  # type: ignore[attr-defined]
                name_text = text[pos:end]
                pos = _SPACE.match(text, end).end()  # type: ignore[union-attr]
                if text[pos] != ":":
                    return None
                pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
                start = pos
                if text[pos] == "[":
                    value, pos, lists[name] = _read_list(text, pos, scan)
                else:
                    value, pos = scan(text, pos)
                document[name] = value
                fields[name] = (value, name_text, text[start:pos])
                pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
                if text[pos] == "}":
                    pos += 1
                    break
                if text[pos] != ",":
                    return None
                pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
        if _SPACE.match(text, pos).end() != len(text):  # type: ignore[union-attr]
            return None
        key = next((k for k in ("messages", "input", "contents") if k in lists), None)
        return cls(document, fields, key, lists[key] if key is not None else {})


def _read_list(text: str, pos: int, scan: Any) -> tuple[list[Any], int, dict[int, str]]:
    """The list at ``text[pos]`` (a ``[``), where it ends, and each item's text by its ``id``."""
    items: list[Any] = []
    texts: dict[int, str] = {}
    pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
    if text[pos] == "]":
        return items, pos + 1, texts
    while True:
        start = pos
        item, pos = scan(text, pos)
        items.append(item)
        texts[id(item)] = text[start:pos]
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        if text[pos] == "]":
            return items, pos + 1, texts
        if text[pos] != ",":
            raise ValueError("no , between items")
        pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]


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
