"""Whole old turns archived, when shortening results and inputs cannot meet the request budget.

The request budget (:mod:`toolkeep.window`) shortens old results and call inputs, oldest first,
down to their markers. What is left past that (the conversation's text, the messages' own JSON, a
marker per old result and call) still grows with every turn, so a long session outgrows any
budget. When the fold has cut everything it can and a request is still over, the oldest whole
turns go, together: every message from the first assistant message up to (not including) a later
one (an assistant message with its calls, the results that answer them and the user's words
between). They are replaced by one user message, :func:`note_text`, that says what they did (the
tools called on what, the files touched, the errors met, the user's words, verbatim up to
:data:`USER_CHARS` each) and carries one ``<<ccr:KEY>>`` marker: ``recall(KEY)`` gives back the
caller's own messages of those turns, byte for byte, as the compact JSON list of the request's
format (:func:`payload`).

Rules, all kept by the fold (:func:`extend` is its hook):

- the messages before the first assistant message (the first user message) and the last turn
  (the newest assistant message and the messages after it) are never archived, so pairing stays
  valid in every format: a span starts at an assistant message and ends before one, so every call
  in it has its results in it, and every result after it answers a call after it;
- the span starts where it starts and only grows: each request of the history that the cuts
  alone cannot fit extends it once, in a batch that frees :data:`BATCH` of the budget, so the
  prompt cache (broken from the note on whenever the span changes) is broken once per batch of
  turns, not at every turn;
- it is a function of the history alone: a fresh run folds the same requests and archives the
  same span, so it sends the same bytes as a session that saw every request.

When even the widest span (everything between the first message and the last turn) leaves the
request over the budget, :class:`~toolkeep.exceptions.RequestTooLargeError` says that the parts
never archived are over it.

Pure functions on the neutral model (:mod:`toolkeep.messages`); the format adapter dumps the note.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .formats import Format
from .messages import History, Message, TextPart, ToolCallPart, ToolResultPart
from .shorten import archive_key
from .steps import StepContext
from .steps.pairing import MISSING_RESULT_TEXT
from .tokens import serialize_message

__all__ = [
    "BATCH",
    "HEADER",
    "USER_CHARS",
    "Archived",
    "archive",
    "caller_span",
    "current",
    "extend",
    "first_start",
    "note_text",
    "payload",
    "spliced",
    "unfolded",
    "widest",
]

BATCH = 0.25
"""Share of the budget a fold frees when it archives: a request that needs turns archived gets
enough of them archived to fit within ``(1 - BATCH)`` of what the budget leaves for messages, so
the following requests grow into that room before the span (and the cache) changes again."""
HEADER = "[Earlier turns archived --"
"""How the note of archived turns begins."""
USER_CHARS = 300
"""The user's words in the note: each message's text verbatim up to this many chars."""
_USER_ENTRIES = 12
_TOOLS = 12
_TARGETS = 4
_FILES = 30
_ERRORS = 8
_TARGET_CHARS = 80
_ERROR_CHARS = 160
_PATH_KEYS = ("file_path", "path", "filePath", "notebook_path", "file", "filename", "target_file")
_TARGET_KEYS = (*_PATH_KEYS, "command", "cmd", "pattern", "query", "url", "prompt", "description")
_EDITS = ("write", "edit", "create", "patch", "apply", "replace", "insert", "delete", "move", "rename")


@dataclass(frozen=True, slots=True)
class Archived:
    """A span of archived turns: messages ``start`` to ``end`` (exclusive) of the history, as
    the budget measures it, replaced by ``message`` (its provider form ``dumped``, ``exact``
    tokens with its comma; ``tokens``: as the budget decides on it, its key counted at its most,
    see :func:`archive`)."""

    start: int
    end: int
    message: Message
    dumped: tuple[Any, ...]
    tokens: int
    key: str | None
    turns: int
    exact: int
    sources: tuple[Any, ...] | None = None
    """The caller's messages archived under ``key`` (``None``: the span itself, :func:`payload`)."""


def first_start(stage: History) -> int | None:
    """Where archiving may start: the first assistant message after the first message (those
    before it, the first user message, stay); ``None`` when there is none."""
    for i in range(1, len(stage)):
        if stage[i].role == "assistant":
            return _run_start(stage, i)
    return None


def _run_start(stage: History, i: int) -> int:
    """``i`` moved back over the part-less holders of its own model turn (OpenAI Responses loads
    a run of model items as holders followed by the assistant message)."""
    while i > 1 and stage[i - 1].role == "tool" and not stage[i - 1].parts:
        i -= 1
    return i


def payload(span: Sequence[Message]) -> str:
    """The caller's own messages of ``span``, as the compact JSON list of the request's format:
    what ``recall`` gives back for the note's key, where the caller's list is not at hand
    (:func:`caller_span` is the slice of it). A message pairing made (no ``raw``) is none
    of the caller's and is left out; a model turn held as a tuple of items (OpenAI Responses)
    gives its items, each once."""
    raws: list[Any] = []
    seen: set[int] = set()
    for m in span:
        for raw in m.raw if type(m.raw) is tuple else (m.raw,):
            if raw is not None and id(raw) not in seen:
                seen.add(id(raw))
                raws.append(raw)
    return serialize_message(raws)


def _arguments(call: ToolCallPart) -> Mapping[str, Any]:
    args = call.arguments
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except (ValueError, RecursionError):
            return {}
    return args if isinstance(args, Mapping) else {}


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _target(args: Mapping[str, Any]) -> str | None:
    for key in _TARGET_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return _short(value, _TARGET_CHARS)
    for value in args.values():
        if isinstance(value, str) and value.strip() and len(value) <= _TARGET_CHARS:
            return _short(value, _TARGET_CHARS)
    return None


def _listed(items: Sequence[str], most: int) -> str:
    shown = ", ".join(items[:most])
    return shown + (f", +{len(items) - most} more" if len(items) > most else "")


def note_text(span: Sequence[Message], key: str | None) -> str:
    """The note that stands for the archived ``span``: what its turns did, and the way back."""
    tools: dict[str, list[str]] = {}
    counts: dict[str, int] = {}
    files: dict[str, set[str]] = {}
    calls: dict[str, tuple[str, str | None]] = {}
    errors: list[str] = []
    words: list[str] = []
    turns = ncalls = nerrors = 0
    for m in span:
        if m.role == "assistant":
            turns += 1
        for p in m.parts:
            if isinstance(p, ToolCallPart):
                ncalls += 1
                args = _arguments(p)
                target = _target(args)
                calls[p.id] = (p.name, target)
                counts[p.name] = counts.get(p.name, 0) + 1
                targets = tools.setdefault(p.name, [])
                if target is not None and target not in targets:
                    targets.append(target)
                for k in _PATH_KEYS:
                    path = args.get(k)
                    if isinstance(path, str) and path.strip() and len(path) <= 300:
                        how = "edited" if any(w in p.name.lower() for w in _EDITS) else "read"
                        files.setdefault(path, set()).add(how)
                        break
            elif isinstance(p, ToolResultPart) and (p.is_error or p.full_text == MISSING_RESULT_TEXT):
                # (pairing's stand-in counts whether or not the format carried its error flag back)
                nerrors += 1
                name, target = calls.get(p.call_id, (p.name or "a tool", None))
                first = next((line for line in p.full_text.splitlines() if line.strip()), "")
                where = f" {json.dumps(target, ensure_ascii=False)}" if target else ""
                errors.append(f"{name}{where}: {_short(first, _ERROR_CHARS)}")
            elif isinstance(p, TextPart) and m.role == "user" and p.text.strip():
                text = p.text.strip()
                if len(text) > USER_CHARS:
                    text = f"{text[:USER_CHARS]}... ({len(p.text):,} chars, whole in the archive)"
                words.append(json.dumps(text, ensure_ascii=False))
    marker = f" <<ccr:{key}>>" if key else " (not recallable: no archive store)"
    lines = [
        f"{HEADER} {turns} turn{'s' * (turns != 1)}, {len(span)} messages: {ncalls} tool "
        f"call{'s' * (ncalls != 1)}, {nerrors} error{'s' * (nerrors != 1)}]{marker}",
    ]
    if key:
        lines.append(
            f"The request budget archived these turns; recall {key} returns their messages whole, "
            "as the JSON list they were sent in."
        )
    if tools:
        ranked = sorted(tools, key=lambda name: -counts[name])
        entries = [
            f"{name} x{counts[name]}" + (f" ({_listed(tools[name], _TARGETS)})" if tools[name] else "")
            for name in ranked
        ]
        lines.append("Tools called: " + _listed(entries, _TOOLS))
    if files:
        entries = [f"{path} ({', '.join(sorted(how))})" for path, how in files.items()]
        lines.append("Files touched: " + _listed(entries, _FILES))
    if errors:
        lines.append(
            "Errors: "
            + "; ".join(errors[:_ERRORS])
            + (f"; +{len(errors) - _ERRORS} more" if len(errors) > _ERRORS else "")
        )
    if words:
        more = len(words) - _USER_ENTRIES
        lines.append(
            "The user said: "
            + "; ".join(words[:_USER_ENTRIES])
            + (f"; +{more} more in the archive" if more > 0 else "")
        )
    return "\n".join(lines)


def current(
    fmt: Format,
    stage: History,
    archived: Archived,
    ctx: StepContext,
    count: Callable[[Any], int],
    caller: Callable[[int, int], Sequence[Any] | None] | None,
) -> Archived | None:
    """``archived`` as this request's caller messages archive it: the same span, archived anew
    when the messages it came from differ (a message in it edited or removed that pairing's
    output does not show, as a duplicate result), so that its key is a fresh run's; ``None``
    when the store refused it."""
    if caller is None or archived.sources is None:
        return archived
    now = caller(archived.start, archived.end)
    if (
        now is not None
        and len(now) == len(archived.sources)
        and all(a is b or a == b for a, b in zip(now, archived.sources, strict=True))
    ):
        return archived
    return archive(fmt, stage, archived.start, archived.end, ctx, count, caller)


def archive(
    fmt: Format,
    stage: History,
    start: int,
    end: int,
    ctx: StepContext,
    count: Callable[[Any], int],
    caller: Callable[[int, int], Sequence[Any] | None] | None = None,
) -> Archived | None:
    """The span ``start``-``end`` of ``stage`` archived under one key, with its note; ``None``
    when the store refused it (nothing is archived without a way back). ``count``: tokens of a
    provider message as JSON."""
    span = stage[start:end]
    messages = caller(start, end) if caller is not None else None
    key = ctx.archive(payload(span) if messages is None else serialize_message(list(messages)))
    if ctx.unarchived(key):
        return None
    text = note_text(span, key)
    # the note itself is archived too: a history sent back is unfolded only where its note is
    # one this store made (:func:`unfolded`)
    if key and ctx.unarchived(ctx.archive(text)):
        return None
    message = Message("user", (TextPart(text),), dirty=True)
    dumped = _dumped(fmt, message)
    exact = sum(count(x) + 1 for x in dumped)
    tokens = exact
    if key:
        # the key is a digest of the messages as they came: a span sent back prepared gets
        # another key than the raw span, which must not change what the budget decides (a
        # session sends what a fresh run sends). So the note is counted with a stand-in of the
        # key that no key of its length outgrows: a digit, then letters and digits by turns,
        # each char a piece of its own for the tokenizer's split (so one token), the ``:`` or
        # space before it one more; every key's chars fall in at most as many pieces
        stand_in = ("0a" * len(key))[: len(key)]
        most = _dumped(fmt, Message("user", (TextPart(note_text(span, stand_in)),), dirty=True))
        tokens = max(exact, sum(count(x) + 1 for x in most))
    turns = sum(1 for m in span if m.role == "assistant")
    sources = tuple(messages) if messages is not None else None
    return Archived(start, end, message, dumped, tokens, key, turns, exact, sources)


def _dumped(fmt: Format, message: Message) -> tuple[Any, ...]:
    return (fmt.dump_message(message),) if fmt.rules.per_message else tuple(fmt.dump([message]))


def extend(
    fmt: Format,
    stage: History,
    prefix: Sequence[int],
    kept: Archived | None,
    newest: int,
    over: int,
    target: int,
    saved_in: Callable[[int, int], int],
    ctx: StepContext,
    count: Callable[[Any], int],
    caller: Callable[[int, int], Sequence[Any] | None] | None = None,
) -> tuple[Archived | None, int]:
    """The fold's hook: a request whose measure is ``over`` tokens after every cut, more than
    ``target``, gets its oldest turns archived, the span ``kept`` (if any) extended once: up to
    the first assistant message that brings it within ``(1 - BATCH)`` of ``target``, else the
    first that fits ``target``, else up to ``newest`` (its last turn). ``prefix``: prefix sums
    of the measure of ``stage``; ``saved_in(a, b)``: what the cuts saved in messages ``a`` to
    ``b``. Gives the span and the tokens it saves over ``kept``; ``(kept, 0)`` when nothing more
    can go (or the store refused it)."""
    start = kept.start if kept else first_start(stage)
    if start is None:
        return kept, 0
    lo = kept.end if kept else start
    ends = [_run_start(stage, i) for i in range(lo + 1, newest + 1) if stage[i].role == "assistant"]
    ends = [e for e in ends if e > lo]
    if not ends:
        return kept, 0
    # what each end saves before the note's own tokens: the span's measure after its cuts, and
    # the note it replaces
    gains, gain, last = [], (kept.tokens if kept else 0), lo
    for e in ends:
        gain += prefix[e] - prefix[last] - saved_in(last, e)
        gains.append(gain)
        last = e
    goal = int(target * (1 - BATCH))
    # the note costs tokens too: try ends from the first that would fit without it, on
    n = next((k for k, g in enumerate(gains) if over - g <= goal), None)
    if n is None:
        n = next((k for k, g in enumerate(gains) if over - g <= target), len(ends) - 1)
        goal = target
    while True:
        made = archive(fmt, stage, start, ends[n], ctx, count, caller)
        if made is None:
            return kept, 0
        if n == len(ends) - 1 or over - gains[n] + made.tokens <= goal:
            return made, gains[n] - made.tokens
        n += 1


def widest(
    fmt: Format,
    stage: History,
    kept: Archived | None,
    ctx: StepContext,
    count: Callable[[Any], int],
    caller: Callable[[int, int], Sequence[Any] | None] | None = None,
) -> Archived | None:
    """Every turn between the first message and the last turn archived (``kept`` when it already
    is, or when there is nothing more to archive or the store refused it)."""
    start = kept.start if kept else first_start(stage)
    newest = next((i for i in range(len(stage) - 1, 0, -1) if stage[i].role == "assistant"), None)
    if start is None or newest is None:
        return kept
    end = _run_start(stage, newest)
    if end <= (kept.end if kept else start):
        return kept
    return archive(fmt, stage, start, end, ctx, count, caller) or kept


def caller_span(
    stage: History, inputs: Sequence[Any], where: Mapping[int, int]
) -> Callable[[int, int], Sequence[Any] | None]:
    """What archives a span of ``stage``: the caller's messages ``inputs`` from the first of the
    span to the first after it (``where``: each one's index by ``id``), so that messages the
    pairing emptied and left out (their results moved into a message it made) are archived
    too; ``None`` where the span's messages are not found among them (then :func:`payload`)."""

    def found(m: Message) -> list[int]:
        out = []
        for raw in m.raw if type(m.raw) is tuple else (m.raw,):
            n = where.get(id(raw), -1) if raw is not None else -1
            if 0 <= n < len(inputs) and inputs[n] is raw:
                out.append(n)
        return out

    def span(start: int, end: int) -> Sequence[Any] | None:
        inside = [n for m in stage[start:end] for n in found(m)]
        if not inside:
            return None
        after = next((ns for m in stage[end:] if (ns := found(m))), None)
        hi = min(after) if after else len(inputs)
        return inputs[min(inside) : hi] if hi > max(inside) else None

    return span


def spliced(fmt: Format, result: list[Any], history: History, archived: Archived) -> list[Any]:
    """The request ``result`` (provider form of ``history``, message for message where the
    format dumps per message) with the archived span replaced by its note."""
    s, e = archived.start, archived.end
    if fmt.rules.per_message:
        return [*result[:s], *archived.dumped, *result[e:]]
    return fmt.dump([*history[:s], archived.message, *history[e:]])


_NOTE_KEY = re.compile(re.escape(HEADER) + r" [^\]\n]*\] <<ccr:([0-9a-f]{16})>>")
_LOOK = 6
"""How many leading messages of a history are looked at for a note (it follows the first ones)."""
_ENVELOPE = 400
"""Chars a provider message may hold besides a note and still be that note alone."""


def unfolded(fmt: Format, messages: Sequence[Any], lookup: Callable[[str], str | None]) -> Sequence[Any]:
    """``messages`` with a note of archived turns (a prepared history sent back) replaced by the
    messages it stands for, recalled through ``lookup``; ``messages`` itself when it holds none.
    A note is taken for one only when it is a message of its own near the start, the store holds
    its very text (:func:`archive` puts it there) and its key recalls a list of messages.

    The note is checked against the store, not made again from the messages its key recalls:
    it was made from the history as the pipeline staged it (the pairing repaired, results sent
    back cut restored), which the caller's messages are not."""
    for i, raw in enumerate(messages[:_LOOK]):
        text = serialize_message(raw)
        found = _NOTE_KEY.search(text) if HEADER in text else None
        if found is None:
            continue
        try:
            held = fmt.load([raw])
        except (ValueError, TypeError, KeyError, AttributeError):
            continue
        note = next(
            (p.text for m in held for p in m.parts if isinstance(p, TextPart) and HEADER in p.text), None
        )
        if note is None or lookup(archive_key(note)) != note:
            continue
        if len(text) - len(serialize_message(note)) > _ENVELOPE:
            continue
        original = lookup(found[1])
        try:
            span = json.loads(original) if original is not None else None
        except ValueError:
            span = None
        if not isinstance(span, list) or not span:
            continue
        return [*messages[:i], *span, *messages[i + 1 :]]
    return messages
