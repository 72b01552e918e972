"""The engine: every policy's steps over a history, and a session's work on a growing history in
time proportional to what is new.

An agent calls ``prepare`` before every request on a history that only grows. Done naively, each
call re-walks, re-hashes and re-measures every old result: quadratic bookkeeping over a session.
:class:`BlockEngine` keeps the last request's *blocks* (an assistant message and the messages up
to the next one) with their output and report, and on the next request:

- finds how much of the history is the same list of message objects as last time (a C-speed
  comparison; unchanged earlier messages are recognised by identity, so an edit must replace
  the message object, as agents do: an in-place edit of an already-sent message is not seen);
- keeps every block inside that prefix except the last (which may have grown), without touching
  it, unless the block's age moved it into another tier (only the newest few blocks can: steps
  declare the ages at which their output changes, ``Reuse.tiers``);
- runs the rest (new messages, the grown block, edited ones) through the same steps a one-off
  run would, reusing the neutral form of any message whose fingerprint is unchanged. Where the
  rest holds blocks already past the horizon (a session's first request on a long history, or
  one after an edit far back), those run as one and are kept as one: their output can no longer
  change, so neither per-block records nor memoized work are worth their cost.

The engine alone remembers work: around each step of a block (:func:`_apply`, the one loop
over the steps), keyed by the step, the very message objects it is given, their place and the
tiers their age is past (the step's :class:`~toolkeep.steps.Reuse`); steps never see the memo.

A policy whose last step decides over the whole session (the cache-aware one: its step's
``Reuse`` has a :class:`~toolkeep.steps.Plan`) runs the same way: the steps before it run block
by block, their output is kept as one flat history, the plan brings its decisions up to date
with what is new, and only the blocks whose decisions changed are rendered again. Last, the
pipeline's ``bound`` slot, when filled, brings the request within its budget
(:mod:`toolkeep.window`; the engine does not know it otherwise).

Formats that read a message in the light of the others (their rules do not say
``per_message``) are loaded whole and run as one block, on a state of their own.

The output and report are identical whether a request is prepared by a session that saw the
requests before it or by a fresh one (:func:`run`); tests check this at every turn of real
trajectories, for every policy. Everything a session carries from one request to the next is one
:class:`SessionState`, one record per block (:class:`_Block`).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from operator import is_
from typing import Any, NamedTuple

from .exceptions import ConfigError, RequestTooLargeError
from .formats import Format, detect_format, get_format, has_objects, plain_view, resolve_format
from .messages import History, Message, ToolResultPart
from .pricing import CacheExpiry
from .report import Report
from .steps import Bound, Memo, Pipeline, Place, Plan, Step, StepContext, reuse_of
from .steps.memo import FORGETFUL, MISSING, dumped
from .steps.pairing import first_choice_id
from .turns import unfolded

__all__ = [
    "Resolved",
    "Restage",
    "SessionState",
    "StaleState",
    "common_prefix",
    "fingerprint",
    "restored_part",
    "run",
    "settle_format",
]


def fingerprint(raw: Any) -> Any:
    """What must be unchanged for the neutral form of a message to be reused.

    The message's keys and values, its content list's blocks and their keys and values, each by
    identity (values the pipeline never reads, such as tool inputs, go out as the same objects
    anyway). Far cheaper than serializing.
    """
    if type(raw) is not dict:
        return raw
    out = []
    for key, value in raw.items():
        if type(value) is list:
            value = tuple([tuple(b.items()) if type(b) is dict else b for b in value])
        out.append((key, value))
    return tuple(out)


def common_prefix(previous: list[Any], messages: Sequence[Any]) -> int:
    """How many leading messages of ``messages`` are the very objects of ``previous``.

    The usual case (the same list, grown) is one C-speed comparison: identical objects compare
    equal without being looked into."""
    n = min(len(previous), len(messages))
    head = messages[:n] if isinstance(messages, list) else list(messages[:n])
    if (previous if n == len(previous) else previous[:n]) == head:
        return n
    return next((i for i, (a, b) in enumerate(zip(previous, messages, strict=False)) if a is not b), n)


_UNKNOWN: Any = object()
"""The fingerprint of a message not taken: equal to no fingerprint."""

_COUNTERS = (
    "total",
    "capped",
    "persisted",
    "truncated",
    "summarized",
    "preserved",
    "chars_before",
    "chars_after",
)


@dataclass(slots=True)
class _Block:
    start: int
    """Input index of the block's first message."""
    end: int
    calls: int
    """How many assistant messages of the block pairing keeps: 1 for a block, 0 for the messages
    before the first assistant message and for an assistant message left empty by pruning, more
    for a run of settled blocks kept as one."""
    age_key: Hashable
    """Key of the age of its newest assistant message."""
    messages: list[Any]
    """Provider messages of the block, as sent."""
    call_ids_out: tuple[str, ...]
    seen_before: frozenset[str]
    """Call ids before the block, kept only when one of its own clashed with them (rare)."""
    report: Report
    staged: History | None = None
    """With a plan: the neutral output of the steps before it (rendered into ``messages``)."""
    staged_report: Report | None = None
    render_key: Hashable = None
    """With a plan: what the rendering depended on (:meth:`Plan.key`)."""
    neutral: History = field(default_factory=list)
    """The neutral form of ``messages`` (for the request budget, :mod:`toolkeep.window`)."""
    stage: History = field(default_factory=list)
    """The block before the policy's last step (the budget's measure)..."""
    stage_out: list[Any] = field(default_factory=list)
    """...and its provider form (made only with a budget)."""
    out_start: int = 0
    """Where its messages start in the session's output (:attr:`SessionState.out`)..."""
    flat_start: int = 0
    """...and, with a plan, its staged output in :attr:`SessionState.flat`."""
    totals: tuple[int, ...] = ()
    """The report's counters summed over the blocks up to it, itself included..."""
    repairs_end: int = 0
    cuts_end: int = 0
    """...and where its repairs and cuts end in the session's lists of them..."""
    calls_end: int = 0
    """...and the assistant messages pairing keeps, up to it."""
    age: int = 0
    """The age its steps ran at (restaged at it: :func:`restored_part`)."""
    lazy: bool = False
    """Adopted from a stored state (:mod:`toolkeep.resume`) and not staged in this process yet:
    ``staged`` holds placeholders, as do its messages in :attr:`SessionState.flat`."""


class Resolved(NamedTuple):
    """The format a session settled on for its requests."""

    request: str | Format
    """The format asked for (a name, ``"auto"`` or a format)."""
    base: Format
    """The registered format it came to."""
    format: Format
    """``base``, wrapped when the history holds SDK objects."""
    scanned: int
    """How many leading messages were checked against it."""
    objects: bool
    """True when the history holds SDK objects."""


@dataclass(eq=False)
class SessionState:
    """Everything a session carries from one request to the next: the work done on messages it
    has seen (``memo``), the last request, the format settled on, and the engine's blocks with
    their output and report. A failed request leaves it as if the session were new, but for
    the memo, whose entries are keyed by the objects they were made from."""

    memo: Memo = field(default_factory=Memo)
    last: list[Any] = field(default_factory=list)
    """The messages of the last request, compared by identity with the next one's."""
    resolved: Resolved | None = None
    format: Format | None = None
    """The format the blocks below were made in."""
    fingerprints: list[tuple[Any, Any, Message]] = field(default_factory=list)
    """Per input message: the message, its fingerprint (or :data:`_UNKNOWN`), its neutral form."""
    blocks: list[_Block] = field(default_factory=list)
    """One record per block of the last request, in order."""
    out: list[Any] = field(default_factory=list)
    """The provider messages of the last request, as sent."""
    repairs: list[Any] = field(default_factory=list)
    cuts: list[Any] = field(default_factory=list)
    """The blocks' repairs and cuts, one after the other."""
    seen: set[str] = field(default_factory=set)
    first_failed: int = 0
    """The first block whose output could not be saved (it runs again)."""
    plan: Plan | None = None
    """The decisions of the policy's whole-session step, if it has one."""
    flat: History = field(default_factory=list)
    """With a plan: the blocks' staged output, one after the other."""
    last_time: float | None = None
    """The session clock's reading when the conversation's last request was prepared."""
    expiry: CacheExpiry = field(default_factory=CacheExpiry)
    """Which of the conversation's requests found the provider's cache expired."""
    window: Any = None
    """The request budget's state (the pipeline's ``bound`` slot makes it, :mod:`toolkeep.window`)."""
    resume: Any = None
    """Where the conversation's state is kept for a new process (a :class:`toolkeep.resume.Resume`;
    ``None``: nowhere)."""
    restage: Restage | None = None
    """With blocks adopted from a stored state: what stages them again when they are needed."""

    def forget(self) -> None:
        """Drop the blocks and the plan (the next request is prepared from scratch); what the
        conversation's requests were and when is kept, and where the state is kept."""
        memo, last, resolved, last_time, expiry, resume = (
            self.memo,
            self.last,
            self.resolved,
            self.last_time,
            self.expiry,
            self.resume,
        )
        self.__init__(memo, last, resolved)  # type: ignore[misc]
        self.last_time, self.expiry, self.resume = last_time, expiry, resume


@dataclass(eq=False)
class Restage:
    """What a request staged its blocks with, for the blocks adopted from a stored state that a
    later step needs (:func:`restored_part`); set by each request."""

    fmt: Format
    steps: Sequence[_Declared]
    ctx: StepContext


class StaleState(Exception):
    """A state adopted from a store does not fit the history after all: the request is
    prepared again from scratch."""


def restored_part(state: SessionState, message: int, part: int) -> Any:
    """Part ``part`` of message ``message`` of the staged history (:attr:`SessionState.flat`),
    staging its block first if it was adopted from a stored state."""
    flat = state.flat
    try:
        if flat[message] is None:
            _materialize(state, bisect_right(state.blocks, message, key=_flat_start) - 1)
        return flat[message].parts[part]
    except (IndexError, AttributeError) as exc:
        raise StaleState("an adopted item names no part of the history") from exc


def _materialize(state: SessionState, j: int) -> None:
    """Stage adopted block ``j`` again (its steps are a function of its messages, place and the
    age it ran at) and put its staged messages in :attr:`SessionState.flat`."""
    b = state.blocks[j]
    restage = state.restage
    if not b.lazy:
        return
    if restage is None:
        raise StaleState("an adopted block is needed outside a request")
    fmt = restage.fmt
    block = _neutral_of(state, fmt, b.start, b.end)
    made = _Engine(state)._run_block(
        fmt, block, b.start, restage.steps, restage.ctx, (b.calls, b.age, b.age_key), set(b.seen_before),
        state.memo, staged=True,
    )  # fmt: skip
    staged = made.staged or []
    if len(staged) != len(b.staged or ()) or made.call_ids_out != b.call_ids_out:
        raise StaleState("an adopted block staged differently")
    b.staged, b.staged_report, b.lazy = staged, made.staged_report, False
    state.flat[b.flat_start : b.flat_start + len(staged)] = staged


def _neutral_of(state: SessionState, fmt: Format, start: int, end: int) -> History:
    """The neutral form of input messages ``start`` to ``end``, loading those adopted without."""
    entries = state.fingerprints
    out = []
    for i in range(start, end):
        raw, fp, m = entries[i]
        if m is None:
            m = fmt.load_message(i, raw)
            entries[i] = (raw, fp, m)
        out.append(m)
    return out


def settle_format(state: SessionState, messages: Sequence[Any], format: str | Format, same: int) -> Format:
    """The format to read ``messages`` in (``format`` asked for), looking only at what is new
    since the last request (``same``: how many leading messages are its very objects).

    Detection (``auto``) and the check for SDK objects read every message; a session reads
    each message once: while the first ``same`` messages are those it already read, only the
    new ones are checked against the format already chosen (:attr:`SessionState.resolved`).
    """
    cached = state.resolved
    if cached is not None and messages and same >= cached.scanned:
        new = messages[cached.scanned :]
        if (
            cached.request == format
            and (cached.objects or not has_objects(new))
            and (format != "auto" or not new or cached.base.detect(plain_view(new)) > 0)
        ):
            state.resolved = cached._replace(scanned=len(messages))
            return cached.format
    base = (
        resolve_format(messages, format)
        if isinstance(format, Format)
        else (detect_format(messages) if format == "auto" else get_format(format))
    )
    fmt = resolve_format(messages, base)
    state.resolved = Resolved(format, base, fmt, len(messages), fmt is not base) if messages else None
    return fmt


class _Declared(NamedTuple):
    """A step and what it declares (its :class:`~toolkeep.steps.Reuse`), resolved for one run."""

    step: Step
    block_local: bool
    ages: tuple[int, ...]
    keeps_turn: Callable[[Message, Format], bool] | None


def _declared(steps: Sequence[Step], ctx: StepContext) -> list[_Declared]:
    out = []
    for step in steps:
        reuse = reuse_of(step)
        out.append(_Declared(step, reuse.block_local, reuse.ages(ctx.config), reuse.keeps_turn))
    return out


def run(
    fmt: Format,
    messages: Sequence[Any],
    pipeline: Pipeline | Sequence[Step],
    ctx: StepContext,
    state: SessionState | None = None,
    same: int = 0,
    *,
    extras: Sequence[Any] = (),
    memo: Memo | None = None,
) -> list[Any]:
    """The provider messages to send for ``messages``; fills ``ctx.report``.

    With a ``state`` (a session's), ``same`` says how many leading messages are the very objects
    of its last request (:func:`common_prefix`), and only what changed is done again; the state
    is updated in place, and a failure resets it. Without one, the whole history is run at once
    (``memo``: the dumps an earlier run made of the same objects).
    The pipeline's ``bound`` slot, when filled (``Config.max_request_tokens``), brings the
    output within the request budget (:mod:`toolkeep.window`); ``extras`` (the request's tool
    definitions and system prompt) count towards it.
    """
    pipeline = Pipeline.of(pipeline)
    steps, budget = pipeline.steps, pipeline.bound
    if state is not None and budget is not None and state.window is None:
        state.window = budget.new_state()
    if budget is not None and ctx.store is not None:
        restored = unfolded(fmt, messages, ctx.lookup)  # archived turns sent back come back whole
        if restored is not messages:
            messages, same = restored, 0
    plans = [reuse_of(step).plan for step in steps]
    planned = plans[-1]() if plans and plans[-1] is not None else None
    stage = steps[:-1] if planned is not None else steps
    if any(plan is not None for plan in plans[: len(stage)]):
        raise ConfigError("only the last step of a pipeline may decide over the whole session")
    declared = _declared(stage, ctx)
    if state is None or not fmt.rules.per_message or not all(d.block_local for d in declared):
        try:
            return _run_whole(
                fmt,
                messages,
                steps,
                ctx,
                budget,
                state.window if state else None,
                extras,
                memo if memo is not None else state.memo if state else Memo(),
            )
        except RequestTooLargeError:
            raise  # prepared whole, then refused: the state stands for the next request
        except BaseException:
            if state is not None:
                state.window = None
            raise
    if fmt is not state.format:
        state.forget()
        state.format = fmt
    resume = state.resume if budget is None else None
    if resume is not None and not state.blocks:
        same = resume.load(
            state, fmt, messages, pipeline, ctx, same, plans[-1] if planned is not None else None
        )
    if state.plan is None and planned is not None:
        state.plan = planned
    state.restage = Restage(fmt, declared, ctx) if state.restage is not None else None
    try:
        try:
            out = _Engine(state, budget).run(fmt, messages, declared, ctx, same, extras)
        except StaleState:
            state.forget()
            if state.plan is None and planned is not None:
                state.plan = plans[-1]()  # type: ignore[misc]
            out = _Engine(state, budget).run(fmt, messages, declared, ctx, 0, extras)
    except RequestTooLargeError:
        raise  # prepared whole, then refused: the state stands for the next request
    except BaseException:
        state.forget()
        raise
    if resume is not None:
        resume.save(state, fmt, messages, pipeline, same)
    return out


def _apply(
    steps: Sequence[_Declared], history: History, ctx: StepContext, memo: Memo | None = None, age: int = 0
) -> tuple[History, History]:
    """The one loop over the steps: ``history`` through each in turn; returns the output and
    the input of the last step (the request budget measures it).

    With a ``memo`` (a session's block, not a one-off run), the steps' work on the block is
    remembered around them: given the very same messages at the same place, their age on the
    same side of every step's tiers, the output of last time is taken, with the report entries
    the steps added and the call ids they took. Work during which a save or a lookup failed is
    not remembered, so the next run tries again. (One entry a block, not one a step: a block
    whose work could be reused in part was, in practice, one the memo had already forgotten.)"""
    if memo is None:
        return _loop(steps, history, ctx, None)
    tiers = tuple([age >= t for declared in steps for t in declared.ages])
    key = (ctx.place.start, tiers, tuple(map(id, history)))
    report = ctx.report
    first = steps[0].step if steps else None
    done = memo.get("steps", first, key)
    if done is not MISSING and len(done.given) == len(history) and all(map(is_, done.given, history)):
        if done.counts is not None:
            _add_counts(report, done.counts)
        report.repairs.extend(done.repairs)
        report.cuts.extend(done.cuts)
        for taken in done.taken:
            ctx.place.taken_ids.update(taken)
        return done.out, done.stage
    counts = _counts(report)
    repairs, cuts, errors = len(report.repairs), len(report.cuts), len(report.save_errors)
    lookups = ctx.lookups_failed
    took: list[tuple[str, ...]] = []
    out, stage = _loop(steps, history, ctx, took)
    if len(report.save_errors) == errors and ctx.lookups_failed == lookups:
        after = _counts(report)
        work = _Work(
            history,
            out,
            stage,
            tuple([a - b for a, b in zip(after, counts, strict=True)]) if after != counts else None,
            report.repairs[repairs:],
            report.cuts[cuts:],
            tuple(took),
        )
        memo.put("steps", first, work, key)
    return out, stage


def _loop(
    steps: Sequence[_Declared], history: History, ctx: StepContext, took: list[tuple[str, ...]] | None
) -> tuple[History, History]:
    """``history`` through each step; ``took`` gains, for each step that took call ids, those
    of its output."""
    stage = history
    last = len(steps) - 1
    taken_ids = ctx.place.taken_ids
    for n, declared in enumerate(steps):
        if n == last:
            stage = history
        taken = len(taken_ids)
        history = declared.step(history, ctx)
        if took is not None and len(taken_ids) != taken:
            took.append(tuple([c.id for m in history if m.role == "assistant" for c in m.calls]))
    return history, stage


class _Work(NamedTuple):
    """What the steps did to one block: what they were given (to check it is the same), their
    output and the last step's input, what they added to the report and the call ids they took."""

    given: History
    out: History
    stage: History
    counts: tuple[int, ...] | None
    repairs: list[Any]
    cuts: list[Any]
    taken: tuple[tuple[str, ...], ...]


def _counts(report: Report) -> tuple[int, int, int, int, int]:
    """The report's counters a step adds to (the engine sets the others)."""
    return report.capped, report.persisted, report.truncated, report.summarized, report.preserved


def _add_counts(report: Report, counts: tuple[int, ...]) -> None:
    report.capped += counts[0]
    report.persisted += counts[1]
    report.truncated += counts[2]
    report.summarized += counts[3]
    report.preserved += counts[4]


def _run_whole(
    fmt: Format,
    messages: Sequence[Any],
    steps: Sequence[Step],
    ctx: StepContext,
    budget: Bound | None,
    window: Any,
    extras: Sequence[Any],
    memo: Memo,
) -> list[Any]:
    history = fmt.load(messages)
    ctx.report.chars_before = _result_chars(history)
    history, stage = _apply(_declared(steps, ctx), history, ctx)
    ctx.report.total = sum(1 for m in history for p in m.parts if isinstance(p, ToolResultPart))
    ctx.report.chars_after = _result_chars(history)
    out = fmt.dump(history)
    if budget is None:
        return out
    return budget(fmt, out, history, stage, ctx, window, extras, messages, memo=memo)


class _Engine:
    """One request's work on a session's state (see the module docstring)."""

    def __init__(self, state: SessionState, budget: Bound | None = None) -> None:
        self.state = state
        self.budget = budget
        self.fmt: Format | None = None
        """The pipeline's ``bound`` slot: with one, blocks keep what it measures."""

    def run(
        self,
        fmt: Format,
        messages: Sequence[Any],
        steps: Sequence[_Declared],
        ctx: StepContext,
        same: int,
        extras: Sequence[Any] = (),
    ) -> list[Any]:
        state = self.state
        plan = state.plan
        self.fmt = fmt
        keep = self._reusable_blocks(same)
        tiers = sorted({t for d in steps for t in d.ages})
        horizon = tiers[-1] if tiers else 0

        def key_for(age: int) -> Hashable:
            return bisect_right(tiers, age)

        tail_start = state.blocks[keep].start if keep < len(state.blocks) else 0
        old_last = len(state.blocks) - 1
        history = self._load(fmt, messages, tail_start)
        seen = state.seen
        for dropped in state.blocks[keep:]:
            seen.difference_update(dropped.call_ids_out)
        blocks = state.blocks
        del blocks[keep:]
        # ages count the assistant messages pairing keeps, as a whole-history run sees them
        kept_calls = blocks[keep - 1].calls_end if keep else 0
        bounds = [i for i, m in enumerate(history) if m.role == "assistant" and i > 0]
        bounds = [0, *bounds] if history else []
        ends = [*bounds[1:], len(history)] if bounds else []  # an empty request has no blocks
        counted = [
            history[lo].role == "assistant"
            and all(d.keeps_turn is None or d.keeps_turn(history[lo], fmt) for d in steps)
            for lo in bounds
        ]
        assistants = kept_calls + sum(counted)

        # kept blocks whose age moved them to another tier: keys are monotone in age, so walking
        # back from the newest, the first block settled past the horizon ends the walk
        first_changed = keep
        j, call_index = keep, kept_calls
        while j > 0:
            j -= 1
            b = blocks[j]
            if not b.calls:
                continue
            call_index -= b.calls
            age = assistants - call_index - b.calls  # of its newest assistant message
            key = key_for(age)
            if key == b.age_key:
                if age > horizon:
                    break
                continue
            blocks[j] = self._run_block(
                fmt,
                self._neutral(b.start, b.end),
                b.start,
                steps,
                ctx,
                (b.calls, age, key),
                set(b.seen_before),
                state.memo,
                staged=plan is not None,
            )
            first_changed = j

        # the new and changed tail; its blocks already past the horizon (all but the newest few,
        # on a session's first request or after an edit) run as one: their output will never
        # change again, and one run costs less than a run per block. Not with a plan: it may
        # still change the rendering of any block
        call_index = kept_calls
        settled = 0
        for n, is_call in enumerate(counted):
            if plan is not None or (is_call and assistants - 1 - call_index <= horizon):
                break
            call_index += is_call
            settled = n + 1
        runs = [(0, settled)] if settled > 1 else []
        runs += [(n, n + 1) for n in range(settled if settled > 1 else 0, len(bounds))]
        self._fingerprint_from(tail_start + (bounds[settled] if 1 < settled < len(bounds) else 0))
        call_index = kept_calls
        for a, z in runs:
            lo, hi = bounds[a], ends[z - 1]
            calls = sum(counted[a:z])
            age = assistants - call_index - calls if calls else 0
            blocks.append(
                self._run_block(
                    fmt,
                    history[lo:hi],
                    tail_start + lo,
                    steps,
                    ctx,
                    (calls, age, key_for(age) if calls else ()),
                    seen,
                    # settled blocks are never run again unless edited: their work is not kept
                    None if z - a > 1 else state.memo,
                    staged=plan is not None,
                )
            )
            call_index += calls
        unsaved: list[str] = []
        if plan is not None:
            if min(first_changed, keep) < old_last and state.restage is not None:
                raise StaleState("a block before the last, adopted from a stored state, runs again")
            first_changed = self._render(fmt, plan, min(first_changed, keep), ctx, unsaved)
        self._commit(blocks, first_changed, ctx.report)
        ctx.report.save_errors += unsaved
        if self.budget is None:
            return list(state.out)
        final: History = []
        stage: History = []
        stage_out: list[Any] = []
        for b in blocks:
            final += b.neutral
            stage += b.stage
            stage_out += b.stage_out
        return self.budget(
            fmt,
            list(state.out),
            final,
            stage,
            ctx,
            state.window,
            extras,
            messages,
            stage_out,
            memo=state.memo,
        )

    def _render(
        self, fmt: Format, plan: Plan, first_staged: int, ctx: StepContext, unsaved: list[str]
    ) -> int:
        """Bring the plan up to date with the blocks staged from ``first_staged`` on, and render
        every block whose rendering changed; the first block rendered again. What the plan could
        not save while deciding goes to ``unsaved``."""
        state = self.state
        blocks, flat, memo = state.blocks, state.flat, state.memo
        # where the first block staged again starts: the end of the block kept before it
        before = blocks[first_staged - 1] if first_staged else None
        start = before.flat_start + len(before.staged or ()) if before else 0
        del flat[start:]
        for b in blocks[first_staged:]:
            b.flat_start = len(flat)
            flat.extend(b.staged or ())
        deciding = replace(ctx, report=Report(format=fmt.name), place=Place(0, 0, set()))
        if state.restage is not None and state.resume is not None:
            state.resume.ready(state, start)  # adopted blocks the plan is about to read: staged
        touched = plan.update(flat, start, deciding)
        unsaved += deciding.report.save_errors
        if touched is None:
            candidates = set(range(len(blocks)))
        else:
            candidates = {bisect_right(blocks, t, key=_flat_start) - 1 for t in touched if t < start}
            candidates.update(range(first_staged, len(blocks)))
        first = len(blocks)
        for j in sorted(candidates):
            b = blocks[j]
            lo, hi = b.flat_start, blocks[j + 1].flat_start if j + 1 < len(blocks) else len(flat)
            key = plan.key(lo, hi)
            if j < first_staged and key == b.render_key:
                continue
            if b.lazy:
                _materialize(state, j)
            report = Report(format=fmt.name)
            sub = replace(ctx, report=report, place=Place(b.start, 0, set()))
            rendered = plan.render(flat, lo, hi, sub)
            staged = b.staged_report or Report(format=fmt.name)
            blocks[j] = replace(
                b,
                messages=dumped(fmt, rendered, memo),
                neutral=rendered,
                render_key=key,
                report=Report(
                    format=fmt.name,
                    repairs=staged.repairs,
                    total=staged.total,
                    capped=staged.capped,
                    persisted=staged.persisted,
                    truncated=staged.truncated + report.truncated,
                    summarized=staged.summarized + report.summarized,
                    preserved=staged.preserved + report.preserved,
                    chars_before=staged.chars_before,
                    chars_after=_result_chars(rendered),
                    save_errors=[*staged.save_errors, *report.save_errors],
                    cuts=[*staged.cuts, *report.cuts],
                ),
            )
            first = min(first, j)
        return first

    def _reusable_blocks(self, same: int) -> int:
        """How many of the last request's blocks lie within its first ``same`` messages and are
        still followed by the assistant message that ended them."""
        # a block that ends where the unchanged prefix ends reruns: what follows it now may not
        # be an assistant message, and then belongs to it (a removed or replaced assistant
        # message); the last block always does, as new messages may belong to it; so does every
        # block from the first one whose output could not be saved, to retry the save
        blocks = self.state.blocks
        limit = min(len(blocks) - 1, self.state.first_failed)
        return min(bisect_left(blocks, same, key=_end), max(limit, 0))

    def _load(self, fmt: Format, messages: Sequence[Any], start: int) -> History:
        """Neutral form of ``messages[start:]``, reusing that of messages with the same fingerprint.

        A newly loaded message's fingerprint is taken later, by :meth:`_fingerprint_from`, and
        only where a block may run again (nothing changes the message in between: steps never
        mutate their input)."""
        old = {id(raw): (raw, fp, m) for raw, fp, m in self.state.fingerprints[start:]}
        loaded: list[tuple[Any, Any, Message]] = []
        for i in range(start, len(messages)):
            raw = messages[i]
            entry = old.get(id(raw))
            if entry is not None and entry[0] is raw and entry[1] == fingerprint(raw):
                loaded.append(entry)
            else:
                loaded.append((raw, _UNKNOWN, fmt.load_message(i, raw)))
        del self.state.fingerprints[start:]
        self.state.fingerprints.extend(loaded)
        return [m for _, _, m in loaded]

    def _fingerprint_from(self, start: int) -> None:
        """Fingerprint the newly loaded messages from ``start`` on. Those before it, in settled
        blocks, keep none: they are loaded anew if an edit ever makes their block run again."""
        entries = self.state.fingerprints
        for i in range(start, len(entries)):
            raw, fp, m = entries[i]
            if fp is _UNKNOWN:
                entries[i] = (raw, fingerprint(raw), m)

    def _neutral(self, start: int, end: int) -> History:
        if self.state.restage is not None and self.fmt is not None:
            return _neutral_of(self.state, self.fmt, start, end)
        return [m for _, _, m in self.state.fingerprints[start:end]]

    def _run_block(
        self,
        fmt: Format,
        block: History,
        start: int,
        steps: Sequence[_Declared],
        ctx: StepContext,
        age: tuple[int, int, Hashable],
        seen: set[str],
        memo: Memo | None,
        *,
        staged: bool = False,
    ) -> _Block:
        """Run the steps over one block, or a run of blocks (``memo`` ``None``: its work is not
        kept); ``age``: how many assistant messages pairing keeps in it, the age of the newest
        and its key. ``seen`` (call ids before the block) gains the block's ids."""
        calls, age_offset, age_key = age
        # pairing renames a call whose id (or the one the provider's id rule has it stand for)
        # an earlier block took: then the output depends on those blocks' ids
        clash = (
            fmt.rules.unique_call_ids
            and bool(seen)  # none before it: a session's first request, whose settled run is long
            and any(
                first_choice_id(c.id, fmt) in seen for m in block if m.role == "assistant" for c in m.calls
            )
        )
        seen_before = frozenset(seen) if clash else frozenset()
        report = Report(format=fmt.name)
        place = Place(start, age_offset, seen if fmt.rules.unique_call_ids else set())
        sub = replace(ctx, report=report, place=place, lookups_failed=0)
        report.chars_before = _result_chars(block)
        # the work of a block whose ids clash depends on all the ids before it: not kept
        history, stage = _apply(steps, block, sub, None if clash else memo, age_offset)
        report.chars_after = _result_chars(history)
        report.total = sum(1 for m in history for p in m.parts if isinstance(p, ToolResultPart))
        call_ids = tuple(c.id for m in history if m.role == "assistant" for c in m.calls)
        bounded = self.budget is not None
        dumps = memo if memo is not None else FORGETFUL
        if staged:  # the policy's last step is the plan: the whole stage is the measure
            return _Block(
                start, start + len(block), calls, age_key, [], call_ids, seen_before, report, history, report,
                stage=history, stage_out=dumped(fmt, history, dumps) if bounded else [], age=age_offset,
            )  # fmt: skip
        out = dumped(fmt, history, dumps)
        stage_out = (out if stage is history else dumped(fmt, stage, dumps)) if bounded else []
        return _Block(
            start, start + len(block), calls, age_key, out, call_ids, seen_before, report,
            neutral=history, stage=stage, stage_out=stage_out, age=age_offset,
        )  # fmt: skip

    def _commit(self, blocks: list[_Block], first_changed: int, report: Report) -> None:
        """Remember this request and fill ``report``, touching only blocks from ``first_changed``.

        Everything is truncated and extended in place: a request costs what changed, not a copy
        of the whole history's bookkeeping."""
        state = self.state
        changed = blocks[first_changed:]
        before = blocks[first_changed - 1] if first_changed else None
        del state.out[before.out_start + len(before.messages) if before else 0 :]
        del state.repairs[before.repairs_end if before else 0 :]
        del state.cuts[before.cuts_end if before else 0 :]
        totals = list(before.totals) if before else [0] * len(_COUNTERS)
        calls = before.calls_end if before else 0
        for b in changed:
            b.out_start = len(state.out)
            state.out.extend(b.messages)
            state.repairs.extend(b.report.repairs)
            state.cuts.extend(b.report.cuts)
            for n, name in enumerate(_COUNTERS):
                totals[n] += getattr(b.report, name)
            b.totals = tuple(totals)
            b.repairs_end = len(state.repairs)
            b.cuts_end = len(state.cuts)
            calls += b.calls
            b.calls_end = calls
        report.repairs = list(state.repairs)
        report.cuts = list(state.cuts)
        for n, name in enumerate(_COUNTERS):
            setattr(report, name, totals[n])
        report.save_errors = [e for b in changed for e in b.report.save_errors]
        failed = [first_changed + n for n, b in enumerate(changed) if b.report.save_errors]
        state.first_failed = failed[0] if failed else len(blocks)


def _end(b: _Block) -> int:
    return b.end


def _flat_start(b: _Block) -> int:
    return b.flat_start


def _result_chars(history: History) -> int:
    return sum(len(p.text) for m in history for p in m.parts if isinstance(p, ToolResultPart))
