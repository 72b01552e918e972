"""The request budget: every prepared request within ``Config.max_request_tokens`` tokens.

A policy shortens results by age or by cost; nothing in it bounds the request as a whole, and a
long session outgrows any model's window. With ``max_request_tokens=N`` the engine ends every
run with one more pass, :func:`bound`, over the policy's output. It counts the request as sent
(each message's compact JSON, one token for the comma between two, the tool definitions and the
system prompt when they are passed; :mod:`toolkeep.tokens`), and while that is over ``N`` it
shortens, oldest first:

1. results, to a summary: SPEC's one-line summary followed by the lines an agent is likely to
   use again (:func:`toolkeep.shortforms.previews.lines_summary`, about :data:`SUMMARY_CHARS`);
2. then results, to a one-line stub: SPEC's summary line alone, ``[Old tool result cleared --
   L lines, S chars, TYPE] <<ccr:KEY>> [full output saved to PATH]``;
3. then the long strings of old tool-call inputs (:mod:`toolkeep.shortforms.inputs`);
4. then, the last resorts, results cleared to ``[result cleared] <<ccr:KEY>>``
   (:func:`toolkeep.shorten.cleared_form`: 19 o200k tokens where the stub takes about 30 and
   more with a path), and call inputs cleared to their short entries and ``"_cleared":
   "<<ccr:KEY>>"``, the input whole in the archive
   (:func:`toolkeep.shortforms.inputs.cleared_input`).

Every original is archived before its result or input is cut (a store that refuses it leaves it
whole), the forms carry every way back the policy's form carried, and ``restore_originals``
recognizes them, so a prepared history sent back comes out the same. Only result texts and call
inputs change, and messages are neither added nor removed but where whole turns are archived
(below), so pairing stays as the policy left it.
The last user turn (the messages after the last assistant message) and the calls of the last
assistant message are never touched. When even everything shortened does not fit, the oldest
whole turns are archived under one key and replaced by one note (:mod:`toolkeep.turns`: the fold
takes that step where it runs out of cuts); only when the parts never archived are over the budget
on their own is :class:`~toolkeep.exceptions.RequestTooLargeError` raised: nothing is returned to
send.

Where it lives, and why so
--------------------------
A request-wide bound is not block-local: whether an old result must go depends on everything
after it. So it is not a step, and not the policy's plan (one policy's, when every policy needs
the bound): it is the pipeline's last slot, ``bound`` (:class:`RequestBudget`, which every policy
gets from :mod:`toolkeep.policies` when ``Config.max_request_tokens`` is set), a last pass over
the rendered output, with a small state of its own in the session (:class:`WindowState`). Its
shortened forms are the policies' own (:mod:`toolkeep.shortforms`).

Its decisions must be a function of the history alone (a fresh run sends the same bytes as a
session that saw every request) and must never be taken back (a result cut for the budget stays
cut, so the cached prefix is not rewritten back and forth). Decisions made on the request as
sent could not be both: the policy's own forms shrink with age, a request can be smaller than
the one before it, and a greedy pass would then give back what it took. So the pass decides on
a measure that never shrinks, and folds over the history's requests:

- *the measure* of a message is its size before the policy's last step (its compaction step,
  the cache-aware plan for ``economy``): the message as it entered, capped and budgeted per
  result, which no later request changes. It bounds what the policy sends (compaction only
  shortens), so a request that fits in it fits as sent;
- *the fold*: at each assistant message of the history (each earlier request) and at the end
  (this request), the cuts above are taken, oldest first, until that request's measure fits
  ``N`` less :data:`MARGIN`; a cut once taken stays. A watermark per cut over the results or
  inputs in order says which are cut: a session keeps them with a checkpoint per request, so a growing
  history folds only its new requests, and an edit folds again from the request it changed.

A history sent back as it was prepared is restored whole first (results by
``restore_originals``, call inputs by ``RestoreInputs``, which every policy runs with a budget),
so it is measured as the raw history is; under ``seed``, which cuts a result's text as it stands
(ChatCLI's way) so that what it cut comes back cut, it is measured as it comes back.

What the measure costs: it counts the newest results at their size before compaction, so where
the policy compacts much (``economy``) the budget cuts somewhat more than the request as sent
would need. A request that the measure says fits but that does not as sent (token counts of
parts do not add up exactly) is cut further for that request only, on exact counts.

Tokens: ``o200k_base`` through tiktoken where the ``tokens`` extra is installed, else chars/4
(:func:`toolkeep.tokens.default_counter`). Counts are kept per message object, so a session
counts each message once.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .content_type import detect_content_type
from .exceptions import RequestTooLargeError
from .formats import Format
from .messages import History, Message, Part, ToolCallPart, ToolResultPart
from .report import Cut
from .shorten import carried_keys, cleared_form, summary_form
from .shortforms.commands import call_kind
from .shortforms.inputs import cleared_input, input_form, parsed_object
from .shortforms.previews import lines_summary
from .steps import StepContext
from .steps.memo import FORGETFUL, Memo, dumped
from .tokens import TokenCounter, default_counter, serialize_message
from .turns import Archived, caller_span, current, extend, spliced, widest

__all__ = [
    "DEEP_INPUTS",
    "MARGIN",
    "SUMMARY_CHARS",
    "RequestBudget",
    "WindowState",
    "bound",
    "extras_tokens",
    "request_tokens",
]

SUMMARY_CHARS = 600
"""About how many chars of lines the summary keeps after its first line."""
DEEP_INPUTS = (120, 40)
"""The deeper cut of call inputs: strings over 120 chars keep their first 40 (the first cut is
the economy policy's, ``Economy.input_min_chars`` and ``input_head``)."""
MARGIN = 0.01
"""Share of the budget the fold leaves free for the error of adding up counts of parts."""

_SUMMARY, _STUB, _CLEARED = 1, 2, 3
_CLEARED_KEEP = 40
"""A cleared call input keeps its strings of at most this many chars (a path, a flag)."""
_SOURCE = ("source", "JSON", "YAML", "XML", "HTML", "Markdown")


def request_tokens(
    messages: Sequence[Any], extras: Sequence[Any] = (), counter: TokenCounter | None = None
) -> int:
    """Tokens of a request as the budget counts them: each message's compact JSON, one per
    message for the comma, and ``extras`` (tool definitions, system prompt), each as JSON."""
    counter = counter or default_counter()
    return sum(counter.count_once(serialize_message(m)) + 1 for m in messages) + extras_tokens(
        extras, counter
    )


def extras_tokens(extras: Sequence[Any], counter: TokenCounter | None = None) -> int:
    """Tokens of the tool definitions and system prompt sent beside the messages."""
    counter = counter or default_counter()
    return sum(counter.count_once(serialize_message(x)) for x in extras if x is not None)


@dataclass(slots=True, eq=False)
class _Item:
    """A result or a call input the budget may cut, with its forms as they are made."""

    message: int
    part: int
    obj: ToolResultPart | ToolCallPart
    tokens: list[int]
    """Tokens of its text (input) at each level reached: ``[as it entered, ...]``."""
    forms: list[Any]
    """Its form at each level reached (``forms[0]``: as it entered)."""
    kind: str = "text"
    key: str | None = None
    """The archive key of its original, once archived."""


@dataclass(slots=True)
class _Checkpoint:
    boundary: int
    """Where the request ends (an assistant message's index, or the end of the history)."""
    marks: tuple[int, ...]
    """How many items of each cut of :func:`_cuts` are taken, in its order."""
    results: int
    inputs: int
    saved: int
    eligible: int
    archived: Archived | None = None
    """The old turns archived for this request and the ones after it (:mod:`toolkeep.turns`)."""


@dataclass(eq=False)
class WindowState:
    """What the budget keeps from one request to the next: the fold's items and a checkpoint
    per request, the stage messages they were made from, and token counts by message object."""

    key: Hashable = None
    """What the fold depends on besides the messages (budget, format, extras' tokens)."""
    stage: list[Message] = field(default_factory=list)
    results: list[_Item] = field(default_factory=list)
    inputs: list[_Item] = field(default_factory=list)
    checkpoints: list[_Checkpoint] = field(default_factory=list)
    decided: dict[int, dict[int, tuple[_Item, Any]]] = field(default_factory=dict)
    """The cuts of the last request, by message and part: each item with its form."""
    counts: dict[int, tuple[Any, int, float]] = field(default_factory=dict)
    """Tokens of each message object of the last request (kept for the next)."""
    texts: dict[str, int] = field(default_factory=dict)
    """Tokens of the messages the last request cut, by their JSON text (see :meth:`_Counts.cut`)."""
    rebuilt: dict[int, tuple[Message, Hashable, Message, Any, list[tuple[ToolResultPart, str]]]] = field(
        default_factory=dict
    )
    """The messages the last request cut: by the policy's message, with the cuts, the message
    rebuilt, its provider form and the results cut in it (each with its text before)."""
    series: dict[str, tuple[list[Any], list[int]]] = field(default_factory=dict)
    """Per list of messages counted (the stage, the output): the list, and its prefix sums."""
    assistants: list[int] = field(default_factory=list)
    """Indexes of the stage's assistant messages."""
    where: tuple[list[Any], dict[int, int]] = field(default_factory=lambda: ([], {}))
    """The caller's last messages, and the index of each by ``id``."""

    def reset(self) -> None:
        """Forget the fold (counts stay: they are of the objects and texts counted)."""
        counts, series, texts = self.counts, self.series, self.texts
        self.__init__()  # type: ignore[misc]
        self.counts, self.series, self.texts = counts, series, texts

    def sums(self, name: str, objs: list[Any], counts: _Counts) -> list[int]:
        """Prefix sums of the counts of ``objs``: those of the last list of that name where
        the two lists hold the same objects, counted anew from the first that differs."""
        old, prefix = self.series.get(name, ([], [0]))
        same = _identical(old, objs)
        prefix = prefix[: same + 1]
        total = prefix[-1]
        for obj in objs[same:]:
            total += counts(obj)
            prefix.append(total)
        self.series[name] = (objs, prefix)
        return prefix

    def locate(self, inputs: Sequence[Any]) -> dict[int, int]:
        """The index of each of the caller's messages ``inputs`` by ``id``, updated from the
        first that is not the last request's (check ``inputs[n] is raw`` on a hit: an entry of a
        message since dropped may name another object's id)."""
        old, where = self.where
        new = list(inputs)
        for i in range(_identical(old, new), len(new)):
            where[id(new[i])] = i
        self.where = (new, where)
        return where


def _identical(old: list[Any], new: list[Any]) -> int:
    """How many leading items of ``new`` are the very objects of ``old`` (compared by ``id``
    at C speed: both lists hold their objects, so no id is reused between them)."""
    n = min(len(old), len(new))
    a, b = list(map(id, old[:n])), list(map(id, new[:n]))
    if a == b:
        return n
    return next(i for i in range(n) if a[i] != b[i])


class RequestBudget:
    """The pipeline's ``bound`` slot (:class:`~toolkeep.steps.Pipeline`): the request within
    ``Config.max_request_tokens`` (:func:`bound`, with a :class:`WindowState` per conversation)."""

    def new_state(self) -> WindowState:
        return WindowState()

    def __call__(
        self,
        fmt: Format,
        out: list[Any],
        final: History,
        stage: History,
        ctx: StepContext,
        state: WindowState | None,
        extras: Sequence[Any],
        inputs: Sequence[Any],
        stage_out: list[Any] | None = None,
        *,
        memo: Memo | None = None,
    ) -> list[Any]:
        return bound(fmt, out, final, stage, ctx, state, extras, inputs, stage_out, memo=memo)

    def __repr__(self) -> str:
        return "<bound RequestBudget>"


class _Counts:
    """Token counts of message objects, taken from the last request's where it had them."""

    def __init__(self, state: WindowState, counter: TokenCounter) -> None:
        self.old = state.counts
        self.new: dict[int, tuple[Any, int, float]] = {}
        self.old_texts = state.texts
        self.texts: dict[str, int] = {}
        self.counter = counter

    def _entry(self, obj: Any) -> tuple[Any, int, float]:
        key = id(obj)
        entry = self.new.get(key) or self.old.get(key)
        if entry is None or entry[0] is not obj:
            text = serialize_message(obj)
            tokens = self.counter.count_once(text)
            entry = (obj, tokens + 1, tokens / max(len(text), 1))
        self.new[key] = entry
        return entry

    def __call__(self, obj: Any) -> int:
        """Tokens of a message object as sent (with its comma)."""
        return self._entry(obj)[1]

    def cut(self, obj: Any) -> int:
        """Tokens of a message object the budget cut (with its comma). A format that dumps whole
        histories gives every message a fresh object at each request: an object not counted
        before is looked up by its text, among the messages the last request cut."""
        key = id(obj)
        entry = self.new.get(key) or self.old.get(key)
        if entry is None or entry[0] is not obj:
            text = serialize_message(obj)
            tokens = self.texts.get(text) or self.old_texts.get(text)
            if tokens is None:
                tokens = self.counter.count_once(text)
            self.texts[text] = tokens
            entry = (obj, tokens + 1, tokens / max(len(text), 1))
        self.new[key] = entry
        return entry[1]

    def text(self, value: Any) -> int:
        """Tokens of a value (a form) as JSON, counted."""
        return self.counter.count_once(serialize_message(value))

    def share(self, value: Any, message: Any) -> int:
        """Tokens of ``value``, a part of ``message`` (an object counted whole), estimated at the
        message's tokens per char: a message is counted once, not again part by part."""
        return max(1, round(len(serialize_message(value)) * self._entry(message)[2]))


def bound(
    fmt: Format,
    out: list[Any],
    final: History,
    stage: History,
    ctx: StepContext,
    state: WindowState | None = None,
    extras: Sequence[Any] = (),
    inputs: Sequence[Any] = (),
    stage_out: list[Any] | None = None,
    *,
    memo: Memo | None = None,
) -> list[Any]:
    """``out`` (the policy's output, provider form of ``final``) within the budget; ``stage``
    is the output before the policy's last step, message for message (``stage_out``, its
    provider form, when the caller has it). Fills the report's
    ``tokens_before`` and ``tokens_after``; raises :class:`RequestTooLargeError` when it cannot
    fit. ``inputs`` (the caller's messages) give the input index of each cut in the report;
    ``memo`` (a session's) holds the dumps of earlier requests."""
    limit = ctx.config.max_request_tokens
    assert limit is not None
    state = state if state is not None else WindowState()
    counter = default_counter()
    counts = _Counts(state, counter)
    extra = extras_tokens(extras, counter)
    if len(stage) != len(final):
        stage = stage_out = final  # a last step that adds or drops messages: measured as sent
    if stage is final:
        stage_out = out
    elif stage_out is None or len(stage_out) != len(stage):
        stage_out = dumped(fmt, stage, memo if memo is not None else FORGETFUL)
    measure = state.sums("stage", stage_out, counts)
    sent = state.sums("out", out, counts)
    before = sent[-1] + extra
    ctx.report.tokens_before = before
    fold = _Fold(state, counts, ctx, fmt)
    fold.caller = caller_span(stage, inputs, state.locate(inputs)) if inputs else None
    target = int(limit * (1 - MARGIN)) - extra
    fold.run((limit, fmt.name, extra, ctx.store is None), stage, stage_out, measure, target)
    cuts = state.decided
    archived = state.checkpoints[-1].archived if state.checkpoints else None
    if archived is not None:
        # the span as this request's own messages archive it (the fold compares what pairing
        # made of them, which an edit inside the span need not change)
        kept = archived
        archived = current(fmt, stage, archived, ctx, counts.text, fold.caller)
        if archived is not kept:
            state.checkpoints[-1] = replace(state.checkpoints[-1], archived=archived)

    def fitted() -> tuple[list[Any], int, int]:
        # the request, its tokens, and its tokens as the budget decides on them: the note of
        # archived turns with its key at its most (turns.archive), so that a span sent back
        # prepared, archived under another key, is kept or refused as a fresh run's is
        result, changed = _apply(fmt, out, final, cuts, state)
        total = before + sum([counts.cut(result[i]) - counts(out[i]) for i in changed])
        result, total = _archived(fmt, result, final, archived, state, counts, total, extra)
        return result, total, total + (archived.tokens - archived.exact if archived else 0)

    def keep() -> None:
        # the counts are kept for the next request, refused or not: else a session whose
        # requests are refused one after another counts every message cut anew at each
        state.counts, state.texts = counts.new, counts.texts
        if fold.failed:  # a save failed: the next request folds again, and so retries it
            state.reset()

    result, total, counted = fitted()
    if counted > limit:
        # the fold's sum of parts fell short of the exact count: cut on, for this request only
        cuts = {i: dict(parts) for i, parts in cuts.items()}
        for more in _further(state, ctx):
            for i, parts in more.items():
                cuts.setdefault(i, {}).update(parts)
            result, total, counted = fitted()
            if counted <= limit:
                break
        else:
            # the widest span of old turns, for this request only; else what is left is what
            # is never archived
            archived = widest(fmt, stage, archived, ctx, counts.text, fold.caller)
            result, total, counted = fitted()
            if counted > limit:
                keep()
                raise RequestTooLargeError(tokens=before, floor=counted, limit=limit, unit=_unit(counter))
    where = state.locate(inputs) if cuts else {}
    report, rebuilt = ctx.report, state.rebuilt
    reason = f"request budget: {before:,} {_unit(counter)} over max_request_tokens {limit:,}"
    for i in sorted(cuts):
        m = final[i]
        entry = rebuilt.get(id(m))
        if entry is None or not entry[4]:
            continue
        n = where.get(id(m.raw), -1)
        index = n if 0 <= n < len(inputs) and inputs[n] is m.raw else i
        for cut, before_text in entry[4]:
            report.cuts.append(
                Cut("summarized", cut.call_id, index, len(before_text), len(cut.text), cut.key, reason)
            )
            report.chars_after -= len(before_text) - len(cut.text)
            report.summarized += 1
    ctx.report.tokens_after = total
    keep()
    return result


def _archived(
    fmt: Format,
    result: list[Any],
    final: History,
    archived: Archived | None,
    state: WindowState,
    counts: _Counts,
    total: int,
    extra: int,
) -> tuple[list[Any], int]:
    """``result`` (with its ``total`` tokens) with the archived turns replaced by their note."""
    if archived is None:
        return result, total
    s, e = archived.start, archived.end
    if fmt.rules.per_message:
        gone = sum([counts.cut(result[i]) for i in range(s, e)])
        return spliced(fmt, result, final, archived), total - gone + archived.exact
    history = [
        entry[2] if (entry := state.rebuilt.get(id(m))) is not None and entry[0] is m else m for m in final
    ]
    new = spliced(fmt, result, history, archived)
    return new, extra + sum([counts.cut(m) for m in new])


def _unit(counter: TokenCounter) -> str:
    return "tokens" if counter.exact else "tokens (chars/4)"


class _Fold:
    """The fold over the history's requests (see the module docstring)."""

    def __init__(self, state: WindowState, counts: _Counts, ctx: StepContext, fmt: Format) -> None:
        self.state = state
        self.counts = counts
        self.ctx = ctx
        self.fmt = fmt
        self.failed = False
        self.caller: Callable[[int, int], Sequence[Any] | None] | None = None

    def run(self, key: Hashable, stage: History, sent: list[Any], prefix: list[int], target: int) -> None:
        """Fold the requests of ``stage`` (``sent``: its provider form; ``prefix``: the prefix
        sums of its measure), from the last checkpoint that the history still holds unchanged."""
        state = self.state
        if state.key != key:
            state.reset()
            state.key = key
        same = _same_prefix(state.stage, stage)
        checkpoints = state.checkpoints
        # a request ending at the very end of the last history is redone if the history grew:
        # its last user turn may have grown
        undone = checkpoints[-1].marks if checkpoints else None
        while checkpoints and (
            checkpoints[-1].boundary > same or (checkpoints[-1].boundary == len(state.stage) != len(stage))
        ):
            checkpoints.pop()
        last = checkpoints[-1] if checkpoints else _Checkpoint(-1, (0,) * len(_cuts(state)), 0, 0, 0, 0)
        archived = last.archived
        if undone is not None and undone != last.marks:
            _undo(state, last.marks, undone)
        del state.results[last.results :], state.inputs[last.inputs :]
        marks = list(last.marks)
        saved, eligible = last.saved, last.eligible
        assistants = state.assistants[: bisect_left(state.assistants, same)]
        assistants += [i for i in range(same, len(stage)) if stage[i].role == "assistant"]
        state.assistants = assistants
        later = assistants[bisect_left(assistants, max(last.boundary + 1, 1)) :]
        for b in [*later, len(stage)] if len(stage) > last.boundary else later:
            k = bisect_left(assistants, b)
            newest = assistants[k - 1] if k else 0
            if newest > eligible:
                self._collect(stage, sent, eligible, newest)
                eligible = newest
            total = prefix[b] - saved
            while total > target:
                step = self._advance(marks)
                if step is None:  # every cut taken: the oldest whole turns go (toolkeep.turns)
                    archived, step = extend(
                        self.fmt, stage, prefix, archived, newest, total, target, self._saved_in, self.ctx,
                        self.counts.text, self.caller,
                    )  # fmt: skip
                    saved += step
                    break
                total -= step
                saved += step
            checkpoints.append(
                _Checkpoint(b, tuple(marks), len(state.results), len(state.inputs), saved, eligible, archived)
            )
        state.stage = list(stage)

    def _saved_in(self, start: int, stop: int) -> int:
        """Tokens the cuts saved in messages ``start`` to ``stop`` (items are in message order)."""
        saved = 0
        for items in (self.state.results, self.state.inputs):
            for n in range(bisect_left(items, start, key=lambda item: item.message), len(items)):
                item = items[n]
                if item.message >= stop:
                    break
                saved += item.tokens[0] - item.tokens[-1]
        return saved

    def _collect(self, stage: History, sent: list[Any], start: int, stop: int) -> None:
        """The items of messages ``start`` to ``stop`` (now old enough to be cut), in order."""
        inputs = self.fmt.rules.editable_arguments
        calls: dict[str, ToolCallPart] = {}
        lo = start
        while lo > 0 and stage[lo].role != "assistant":
            lo -= 1
        for m in stage[lo:start]:
            calls.update((c.id, c) for c in m.calls)
        for i in range(start, stop):
            m = stage[i]
            for j, p in enumerate(m.parts):
                if isinstance(p, ToolResultPart):
                    call = calls.get(p.call_id)
                    name = p.name or (call.name if call else None)
                    kind = call_kind(name, call.arguments if call else None)
                    tokens = self.counts.share(p.text, sent[i])
                    self.state.results.append(_Item(i, j, p, [tokens], [p.text], kind))
                elif isinstance(p, ToolCallPart):
                    calls[p.id] = p
                    if inputs and parsed_object(p.arguments) is not None:
                        self.state.inputs.append(
                            _Item(i, j, p, [self.counts.share(p.arguments, sent[i])], [p.arguments])
                        )

    def _advance(self, marks: list[int]) -> int | None:
        """Take the next cut: the tokens it saves; ``None`` when nothing is left to cut."""
        for n, (items, level) in enumerate(_cuts(self.state)):
            if marks[n] < len(items):
                item = items[marks[n]]
                marks[n] += 1
                return self._cut(item, level)
        return None

    def _cut(self, item: _Item, level: int) -> int:
        form = _form(item, level, self.ctx)
        if form is None:  # the original could not be archived: it stays as it was
            self.failed = True
            form = item.forms[-1]
        tokens = self.counts.text(form)
        if tokens >= item.tokens[-1]:
            form, tokens = item.forms[-1], item.tokens[-1]
        item.forms.append(form)
        item.tokens.append(tokens)
        _decide(self.state, item)
        return item.tokens[-2] - tokens


def _cuts(state: WindowState) -> tuple[tuple[list[_Item], int], ...]:
    """The cuts in the order they are taken, each over its items oldest first: results to
    their summary, results to their stub, call inputs shortened, call inputs shortened deep;
    then the last resorts: results cleared, call inputs cleared. Each takes an item to its next
    level (an item is cut by one only once every item is past the cut before it)."""
    results, inputs = state.results, state.inputs
    return (
        (results, _SUMMARY),
        (results, _STUB),
        (inputs, 1),
        (inputs, 2),
        (results, _CLEARED),
        (inputs, _CLEARED),
    )


def _undo(state: WindowState, marks: tuple[int, ...], undone: tuple[int, ...]) -> None:
    """Forget the levels items reached between ``marks`` and ``undone`` (the marks of requests
    now undone): each cut takes its items' next level, so those are the items it took."""
    for (items, level), mark, later in zip(_cuts(state), marks, undone, strict=True):
        for item in items[mark:later]:
            del item.tokens[level:], item.forms[level:]
            _decide(state, item)


def _decide(state: WindowState, item: _Item) -> None:
    """Record ``item``'s form as it now stands among the cuts (or take it out of them)."""
    parts = state.decided.setdefault(item.message, {})
    if item.forms[-1] is not item.forms[0]:
        parts[item.part] = (item, item.forms[-1])
    else:
        parts.pop(item.part, None)
        if not parts:
            del state.decided[item.message]


def _same_prefix(old: list[Message], new: History) -> int:
    """How many leading messages of ``new`` equal those of ``old``."""
    n = min(len(old), len(new))
    if old[:n] == new[:n]:
        return n
    return next(i for i in range(n) if old[i] != new[i])


def _form(item: _Item, level: int, ctx: StepContext) -> Any:
    """The item's form at ``level``; ``None`` when its original could not be archived."""
    p = item.obj
    if isinstance(p, ToolCallPart):
        if level == _CLEARED:
            return cleared_input(p.arguments, ctx, _CLEARED_KEEP)
        e = ctx.config.economy
        min_chars, head = (e.input_min_chars, e.input_head) if level == 1 else DEEP_INPUTS
        if isinstance(p.arguments, str):  # a JSON string (OpenAI): shortened as the object
            parsed = parsed_object(p.arguments)
            shortened = input_form(parsed, ctx, min_chars, head)
            return p.arguments if shortened == parsed else json.dumps(shortened, ensure_ascii=False)
        return input_form(p.arguments, ctx, min_chars, head)
    original = p.full_text
    if item.key is None:
        item.key = p.key or ctx.archive(original)
        if ctx.unarchived(item.key):
            return None
    keys = ([item.key] if item.key else []) + carried_keys(original)
    paths = [p.saved_path] if p.saved_path else []
    if level == _CLEARED:
        return cleared_form(keys=keys, paths=paths)
    content_type = detect_content_type(original)
    if level == _STUB:
        return summary_form(original, content_type, keys=keys, paths=paths)
    kind = item.kind
    shape = (
        "exec"
        if kind == "exec" or p.is_error
        else "search"
        if kind in ("search", "list")
        else "source"
        if kind == "read" or any(t in content_type for t in _SOURCE)
        else "text"
    )
    return lines_summary(original, content_type, shape, SUMMARY_CHARS, keys=keys, paths=paths)


def _further(state: WindowState, ctx: StepContext) -> list[dict[int, dict[int, tuple[_Item, Any]]]]:
    """Cuts past the fold's, in its order, in batches of growing size (for this request only)."""
    last = state.checkpoints[-1]
    order = [
        (level, item)
        for (items, level), mark in zip(_cuts(state), last.marks, strict=True)
        for item in items[mark : last.results if items is state.results else last.inputs]
    ]
    batches: list[dict[int, dict[int, tuple[_Item, Any]]]] = []
    size, n = 1, 0
    while n < len(order):
        batch: dict[int, dict[int, tuple[_Item, Any]]] = {}
        for level, item in order[n : n + size]:
            form = _form(item, level, ctx)
            if form is not None:
                batch.setdefault(item.message, {})[item.part] = (item, form)
        batches.append(batch)
        n += size
        size *= 2
    return batches


def _apply(
    fmt: Format,
    out: list[Any],
    final: History,
    cuts: dict[int, dict[int, tuple[_Item, Any]]],
    state: WindowState,
) -> tuple[list[Any], list[int]]:
    """``out`` with every cut that makes its part shorter applied, and the indexes of the
    messages that changed. A message given the same cuts as last request is the very object it
    was, dumped once; its results cut are kept with it, for the report."""
    old, kept = state.rebuilt, {}
    history = list(final) if cuts else final
    changed = []
    for i, parts in cuts.items():
        m = final[i]
        forms = tuple([(j, id(form)) for j, (_, form) in parts.items()])
        entry = old.get(id(m))
        if entry is None or entry[0] is not m or entry[1] != forms:
            new: list[Part] = list(m.parts)
            cut: list[tuple[ToolResultPart, str]] = []
            for j, (item, form) in parts.items():
                p = new[j] if j < len(new) else None
                if isinstance(p, ToolResultPart) and isinstance(item.obj, ToolResultPart):
                    if p.call_id == item.obj.call_id and isinstance(form, str) and len(form) < len(p.text):
                        new[j] = q = p.with_text(form, key=p.key or item.key)
                        cut.append((q, p.text))
                elif (
                    isinstance(p, ToolCallPart) and isinstance(item.obj, ToolCallPart) and p.id == item.obj.id
                ) and len(serialize_message(form)) < len(serialize_message(p.arguments)):
                    new[j] = p.with_arguments(form)
            rebuilt = replace(m, parts=tuple(new), dirty=True) if new != list(m.parts) else m
            dumped = fmt.dump_message(rebuilt) if rebuilt is not m and fmt.rules.per_message else None
            entry = (m, forms, rebuilt, dumped, cut)
        kept[id(m)] = entry
        if entry[2] is not m:
            history[i] = entry[2]
            changed.append(i)
    state.rebuilt = kept
    if not changed:
        return out, []
    if not fmt.rules.per_message:
        return fmt.dump(history), changed
    result = list(out)
    for i in changed:
        result[i] = kept[id(final[i])][3]
    return result, changed
