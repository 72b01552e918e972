"""Incremental preparation: a session's work on a growing history, in time proportional to what
is new.

An agent calls ``prepare`` before every request on a history that only grows. Done naively, each
call re-walks, re-hashes and re-measures every old result: quadratic bookkeeping over a session.
:class:`BlockEngine` keeps the last request's *blocks* (an assistant message and the messages up
to the next one) with their output and report, and on the next request:

- finds how much of the history is the same list of message objects as last time (a C-speed
  comparison; unchanged earlier messages are recognised by identity, so an edit must replace
  the message object, as agents do: an in-place edit of an already-sent message is not seen);
- keeps every block inside that prefix except the last (which may have grown), without touching
  it, unless the block's age moved it into another tier (only the newest few blocks can: steps
  say from which age on their output no longer changes, ``age_horizon``);
- runs the rest (new messages, the grown block, edited ones) through the same steps a one-off
  run would, reusing the neutral form of any message whose fingerprint is unchanged. Where the
  rest holds blocks already past the horizon (a session's first request on a long history, or
  one after an edit far back), those run as one and are kept as one: their output can no longer
  change, so neither per-block records nor memoized work are worth their cost.

The output and report are identical to :func:`toolkeep.pipeline.run_pipeline` over the whole
history; tests check this at every turn of real trajectories. Step lists qualify when every step
is ``block_local`` (see :data:`toolkeep.steps.Step`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from .formats import Format
from .messages import History, Message, ToolResultPart
from .report import Report
from .steps import MISSING, Memo, Step, StepContext
from .steps._context import FORGETFUL
from .steps.pairing import first_choice_id, survives_pruning

__all__ = ["BlockEngine", "common_prefix", "fingerprint", "is_block_local"]


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


def is_block_local(steps: Sequence[Step]) -> bool:
    """True when every step declares that it can run one block at a time."""
    return all(getattr(step, "block_local", False) for step in steps)


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


@dataclass(frozen=True, slots=True)
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


class BlockEngine:
    """Prepares a session's successive requests, redoing only what changed since the last one."""

    def __init__(self) -> None:
        self._format: Format | None = None
        self._fingerprints: list[tuple[Any, Any, Message]] = []
        self._blocks: list[_Block] = []
        self._out: list[Any] = []
        self._out_starts: list[int] = []
        self._cum: list[tuple[int, ...]] = []
        self._cum_repairs: list[int] = []
        self._repairs: list[Any] = []
        self._seen: set[str] = set()
        self._first_failed = 0
        self._ends: list[int] = []
        self._cum_calls: list[int] = []

    def run(
        self, fmt: Format, messages: Sequence[Any], steps: Sequence[Step], ctx: StepContext, same: int
    ) -> list[Any]:
        """The provider messages to send for ``messages``; fills ``ctx.report``.

        ``same``: how many leading messages are the very objects of the last request
        (:func:`common_prefix`). State is updated in place; a failure resets it.
        """
        if fmt is not self._format:
            self.__init__()  # type: ignore[misc]
            self._format = fmt
        try:
            return self._run(fmt, messages, steps, ctx, same)
        except BaseException:
            self.__init__()  # type: ignore[misc]
            raise

    def _run(
        self, fmt: Format, messages: Sequence[Any], steps: Sequence[Step], ctx: StepContext, same: int
    ) -> list[Any]:
        keep = self._reusable_blocks(same)
        horizon = max((s.age_horizon(ctx) for s in steps if hasattr(s, "age_horizon")), default=0)
        age_steps = [s for s in steps if hasattr(s, "age_key")]

        def key_for(age: int) -> Hashable:
            return tuple(s.age_key(age, ctx) for s in age_steps)

        tail_start = self._blocks[keep].start if keep < len(self._blocks) else 0
        history = self._load(fmt, messages, tail_start)
        seen = self._seen
        for dropped in self._blocks[keep:]:
            seen.difference_update(dropped.call_ids_out)
        blocks = self._blocks
        del blocks[keep:]
        # ages count the assistant messages pairing keeps, as a whole-history run sees them
        kept_calls = self._cum_calls[keep - 1] if keep else 0
        bounds = [i for i, m in enumerate(history) if m.role == "assistant" and i > 0]
        bounds = [0, *bounds] if history else []
        ends = [*bounds[1:], len(history)] if bounds else []  # an empty request has no blocks
        counted = [
            history[lo].role == "assistant" and survives_pruning(history[lo], hi - lo > 1, fmt)
            for lo, hi in zip(bounds, ends, strict=True)
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
                ctx.memo,
            )
            first_changed = j

        # the new and changed tail; its blocks already past the horizon (all but the newest few,
        # on a session's first request or after an edit) run as one: their output will never
        # change again, and one run costs less than a run per block
        call_index = kept_calls
        settled = 0
        for n, is_call in enumerate(counted):
            if is_call and assistants - 1 - call_index <= horizon:
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
                    FORGETFUL if z - a > 1 else ctx.memo,
                )
            )
            call_index += calls
        self._commit(blocks, first_changed, ctx.report)
        return list(self._out)

    def _reusable_blocks(self, same: int) -> int:
        """How many of the last request's blocks lie within its first ``same`` messages and are
        still followed by the assistant message that ended them."""
        # a block that ends where the unchanged prefix ends reruns: what follows it now may not
        # be an assistant message, and then belongs to it (a removed or replaced assistant
        # message); the last block always does, as new messages may belong to it; so does every
        # block from the first one whose output could not be saved, to retry the save
        limit = min(len(self._blocks) - 1, self._first_failed)
        return min(bisect_left(self._ends, same), max(limit, 0))

    def _load(self, fmt: Format, messages: Sequence[Any], start: int) -> History:
        """Neutral form of ``messages[start:]``, reusing that of messages with the same fingerprint.

        A newly loaded message's fingerprint is taken later, by :meth:`_fingerprint_from`, and
        only where a block may run again (nothing changes the message in between: steps never
        mutate their input)."""
        old = {id(raw): (raw, fp, m) for raw, fp, m in self._fingerprints[start:]}
        loaded: list[tuple[Any, Any, Message]] = []
        for i in range(start, len(messages)):
            raw = messages[i]
            entry = old.get(id(raw))
            if entry is not None and entry[0] is raw and entry[1] == fingerprint(raw):
                loaded.append(entry)
            else:
                loaded.append((raw, _UNKNOWN, fmt.load_message(i, raw)))
        del self._fingerprints[start:]
        self._fingerprints.extend(loaded)
        return [m for _, _, m in loaded]

    def _fingerprint_from(self, start: int) -> None:
        """Fingerprint the newly loaded messages from ``start`` on. Those before it, in settled
        blocks, keep none: they are loaded anew if an edit ever makes their block run again."""
        entries = self._fingerprints
        for i in range(start, len(entries)):
            raw, fp, m = entries[i]
            if fp is _UNKNOWN:
                entries[i] = (raw, fingerprint(raw), m)

    def _neutral(self, start: int, end: int) -> History:
        return [m for _, _, m in self._fingerprints[start:end]]

    @staticmethod
    def _run_block(
        fmt: Format,
        block: History,
        start: int,
        steps: Sequence[Step],
        ctx: StepContext,
        age: tuple[int, int, Hashable],
        seen: set[str],
        memo: Memo,
    ) -> _Block:
        """Run the steps over one block, or a run of blocks; ``age``: how many assistant messages
        pairing keeps in it, the age of the newest and its key. ``seen`` (call ids before the
        block) gains the block's ids."""
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
        sub = StepContext(
            fmt,
            ctx.config,
            ctx.workspace,
            ctx.store,
            report,
            memo=memo,
            age_offset=age_offset,
            seen_ids=seen if fmt.rules.unique_call_ids else set(),
            index_offset=start,
        )
        report.chars_before = _result_chars(block)
        history = block
        for step in steps:
            history = step(history, sub)
        report.chars_after = _result_chars(history)
        report.total = sum(1 for m in history for p in m.parts if isinstance(p, ToolResultPart))
        dumped = []
        for m in history:
            if not m.dirty:
                dumped.append(m.raw)
                continue
            cached = memo.get("dump", m)
            if cached is MISSING:
                cached = memo.put("dump", m, fmt.dump_message(m))
            dumped.append(cached)
        call_ids = tuple(c.id for m in history if m.role == "assistant" for c in m.calls)
        return _Block(
            start,
            start + len(block),
            calls,
            age_key,
            dumped,
            call_ids,
            seen_before,
            report,
        )

    def _commit(self, blocks: list[_Block], first_changed: int, report: Report) -> None:
        """Remember this request and fill ``report``, touching only blocks from ``first_changed``.

        Everything is truncated and extended in place: a request costs what changed, not a copy
        of the whole history's bookkeeping."""
        changed = blocks[first_changed:]
        out_end = self._out_starts[first_changed] if first_changed < len(self._out_starts) else len(self._out)
        for kept in (self._out_starts, self._cum, self._cum_repairs, self._ends, self._cum_calls):
            del kept[first_changed:]
        del self._out[out_end:]
        del self._repairs[self._cum_repairs[-1] if self._cum_repairs else 0 :]
        totals = list(self._cum[-1]) if self._cum else [0] * len(_COUNTERS)
        calls = self._cum_calls[-1] if self._cum_calls else 0
        for b in changed:
            self._out_starts.append(len(self._out))
            self._out.extend(b.messages)
            self._repairs.extend(b.report.repairs)
            for n, name in enumerate(_COUNTERS):
                totals[n] += getattr(b.report, name)
            self._cum.append(tuple(totals))
            self._cum_repairs.append(len(self._repairs))
            self._ends.append(b.end)
            calls += b.calls
            self._cum_calls.append(calls)
        report.repairs = list(self._repairs)
        for n, name in enumerate(_COUNTERS):
            setattr(report, name, totals[n])
        report.save_errors = [e for b in changed for e in b.report.save_errors]
        failed = [first_changed + n for n, b in enumerate(changed) if b.report.save_errors]
        self._first_failed = failed[0] if failed else len(blocks)


def _result_chars(history: History) -> int:
    return sum(len(p.text) for m in history for p in m.parts if isinstance(p, ToolResultPart))
