"""Put back the original of results that an earlier run already shortened.

This is what makes ``prepare`` idempotent when an agent stores the prepared history and sends it
back: a result carrying ``<<ccr:KEY>>`` whose archived original it was cut from becomes that
original again, so every later step does exactly what it did in the first run.
"""

from __future__ import annotations

from dataclasses import replace

from ..messages import History, ToolResultPart
from ..shorten import CCR_MARKER_RE, carried_keys
from ._context import MISSING, StepContext, block_local, iter_results, replace_results

__all__ = ["restore_originals"]

_SUMMARY_PREFIX = "[Old tool result cleared -- "
_HEAD_MATCH = 32


@block_local
def restore_originals(history: History, ctx: StepContext) -> History:
    """Replace every result that is a shortened form of an archived original by the original."""
    if ctx.store is None:
        return history
    updates: dict[tuple[int, int], ToolResultPart] = {}
    for slot in iter_results(history):
        p = slot.result
        if p.original is not None or "<<ccr:" not in p.text:
            continue  # no marker: nothing to look up (most results)
        new = ctx.memo.get("restore", p)
        if new is MISSING:
            failures = ctx.lookup_failures
            new = _restored(p, ctx)
            if ctx.lookup_failures == failures:  # the store was unreachable: ask again next run
                ctx.memo.put("restore", p, new)
        if new is not None:
            updates[(slot.message, slot.part)] = new
    return replace_results(history, updates, ctx.memo)


def _restored(p: ToolResultPart, ctx: StepContext) -> ToolResultPart | None:
    if not CCR_MARKER_RE.search(p.text):
        return None
    for key in carried_keys(p.text):
        original = ctx.lookup(key)
        if original is not None and _derived_from(p.text, original):
            return replace(p, text=original, modified=True)
    return None


def _derived_from(text: str, original: str) -> bool:
    """True when ``text`` has the shape of a shortened form of ``original``."""
    if len(text) >= len(original) and not text.startswith(_SUMMARY_PREFIX):
        return False
    return text.startswith(_SUMMARY_PREFIX) or text.startswith(original[:_HEAD_MATCH])
