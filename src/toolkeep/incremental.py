"""Incremental preparation: a session's work on a growing history, done once per block.

An agent calls ``prepare`` before every request on a history that only grows. Done naively, each
call re-walks, re-hashes and re-measures every old result: quadratic bookkeeping over a session.
:class:`BlockEngine` keeps what it did per *block* (an assistant message and the messages up to
the next one) and reuses it while the block is unchanged:

- a message is unchanged when it is the same object with the same :func:`fingerprint`;
- a block's output depends only on its messages, its position, the call ids before it (for
  formats that want ids unique) and what of its age the steps look at (``age_key``), so it is
  looked up by exactly those;
- everything else (new messages, a block that grew, an edited message, a block whose age moved it
  to another tier) runs through the same steps as a one-off run would.

The output is identical to :func:`toolkeep.pipeline.run_pipeline` over the whole history; tests
check this at every turn of real trajectories. Step lists qualify when every step is marked
``block_local`` (it reads nothing outside the history it is given but ``ctx.age_offset`` and
``ctx.seen_ids``); others run whole-history with the per-step memo only.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from .formats import Format
from .messages import History, Message, ToolResultPart
from .report import Report
from .steps import MISSING, Memo, Step, StepContext

__all__ = ["BlockEngine", "fingerprint", "is_block_local"]


def fingerprint(raw: Any) -> Any:
    """What must be unchanged for the neutral form of a message to be reused.

    The message's keys and values, its content list's blocks and their keys and values, each by
    identity (values the pipeline never reads, such as tool inputs, go out as the same objects
    anyway). Far cheaper than serializing: a session checks every message on every request. An
    edit made *inside* a block's nested value in place is not seen; give a changed message as a
    new object (or a new block), as agents do.
    """
    if type(raw) is not dict:
        return raw
    out = []
    for key, value in raw.items():
        if type(value) is list:
            value = tuple([tuple(b.items()) if type(b) is dict else b for b in value])
        out.append((key, value))
    return tuple(out)


def is_block_local(steps: Sequence[Step]) -> bool:
    """True when every step declares that it can run one block at a time."""
    return all(getattr(step, "block_local", False) for step in steps)


@dataclass(frozen=True, slots=True)
class _BlockOutput:
    messages: list[Any]
    """Provider messages of the block, as sent."""
    call_ids_in: tuple[str, ...]
    call_ids_out: tuple[str, ...]
    report: Report


class BlockEngine:
    """Loads and prepares histories block by block, remembering each block's output."""

    def __init__(self) -> None:
        self._loaded: list[tuple[Any, Any, Message]] = []

    def load(self, fmt: Format, messages: Sequence[Any], memo: Memo) -> History:
        """The neutral history, reusing the neutral form of every message seen unchanged."""
        previous = self._loaded
        loaded: list[tuple[Any, Any, Message]] = []
        for i, raw in enumerate(messages):
            fp = fingerprint(raw)
            if i < len(previous):
                old_raw, old_fp, old_message = previous[i]
                if old_raw is raw and old_fp == fp:
                    loaded.append((raw, fp, old_message))
                    continue
            cached = memo.get("load", raw)
            if cached is not MISSING and cached[0] == fp:
                message = cached[1]
            else:
                message = fmt.load_message(i, raw)
                memo.put("load", raw, (fp, message))
            loaded.append((raw, fp, message))
        self._loaded = loaded
        return [entry[2] for entry in loaded]

    def run(self, fmt: Format, messages: Sequence[Any], steps: Sequence[Step], ctx: StepContext) -> list[Any]:
        """Prepare ``messages`` block by block; the provider messages to send."""
        history = self.load(fmt, messages, ctx.memo)
        if not history:
            return []
        starts = [i for i, m in enumerate(history) if m.role == "assistant"]
        prelude = not starts or starts[0] != 0
        bounds = [0, *starts] if prelude else starts
        out: list[Any] = []
        seen = ctx.seen_ids
        age_steps = [s for s in steps if hasattr(s, "age_key")]
        for n, start in enumerate(bounds):
            end = bounds[n + 1] if n + 1 < len(bounds) else len(history)
            block = history[start:end]
            is_call_block = block[0].role == "assistant"
            # the block's age: assistant messages after its own
            age_offset = len(starts) - n - (0 if prelude else 1) if is_call_block else 0
            age_key: Hashable = tuple(s.age_key(age_offset, ctx) for s in age_steps) if is_call_block else ()
            key = (start, tuple(map(id, block)), age_key)
            cached = ctx.memo.get("block", block[0], key)
            if cached is not MISSING and not any(i in seen for i in cached.call_ids_in):
                seen.update(cached.call_ids_out)
                ctx.report.merge(cached.report)
                out.extend(cached.messages)
                continue
            done = self._run_block(fmt, block, start, steps, ctx, age_offset)
            if not done.report.save_errors and not any(i in seen for i in done.call_ids_in):
                ctx.memo.put("block", block[0], done, key)
            seen.update(done.call_ids_out)
            ctx.report.merge(done.report)
            out.extend(done.messages)
        return out

    @staticmethod
    def _run_block(
        fmt: Format,
        block: History,
        start: int,
        steps: Sequence[Step],
        ctx: StepContext,
        age_offset: int,
    ) -> _BlockOutput:
        call_ids_in = tuple(c.id for c in block[0].calls) if block[0].role == "assistant" else ()
        report = Report(format=fmt.name)
        sub = StepContext(
            fmt,
            ctx.config,
            ctx.workspace,
            ctx.store,
            report,
            memo=ctx.memo,
            age_offset=age_offset,
            seen_ids=set(ctx.seen_ids),
            index_offset=start,
        )
        report.chars_before = _result_chars(block)
        history = block
        for step in steps:
            history = step(history, sub)
        report.chars_after = _result_chars(history)
        report.total = sum(1 for m in history for p in m.parts if isinstance(p, ToolResultPart))
        call_ids_out = tuple(c.id for m in history if m.role == "assistant" for c in m.calls)
        dumped = []
        for m in history:
            if not m.dirty:
                dumped.append(m.raw)
                continue
            cached = ctx.memo.get("dump", m)
            if cached is MISSING:
                cached = ctx.memo.put("dump", m, fmt.dump_message(m))
            dumped.append(cached)
        return _BlockOutput(dumped, call_ids_in, call_ids_out, report)


def _result_chars(history: History) -> int:
    return sum(len(p.text) for m in history for p in m.parts if isinstance(p, ToolResultPart))
