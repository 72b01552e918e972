"""Put back the original of results that an earlier run already shortened.

This is what makes ``prepare`` idempotent when an agent stores the prepared history and sends it
back: a result carrying ``<<ccr:KEY>>`` whose archived original it was cut from becomes that
original again, so every later step does exactly what it did in the first run.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..messages import History, ToolResultPart
from ..shorten import (
    CAP_LINE_RE,
    CCR_MARKER_RE,
    CLEARED,
    SAVED_PATH_RE,
    archive_key,
    carried_keys,
    format_size,
    line_count,
)
from ._context import StepContext, block_local, iter_results, replace_results

__all__ = ["restore_originals"]

_SUMMARY = re.compile(r"\[Old tool result cleared -- (\d+) lines, ([0-9.]+[KM]?) chars, [^\]\n]*\]")
_CAP = CAP_LINE_RE
_PREVIEW = re.compile(r"\n\n\.\.\. \[([\d,]+) chars omitted -- [^\n]*\n\n")
_CLEARED = re.compile(re.escape(CLEARED) + r" <<ccr:([0-9a-f]{16})>>(?: <<ccr:[0-9a-f]{16}>>)*")
_COMPACT = re.compile(r"\n\[\.\.\. (\d+) chars omitted from old tool result \.\.\.\][^\n]*(?:\n|\Z)")


@block_local
def restore_originals(history: History, ctx: StepContext) -> History:
    """Replace every result that is a shortened form of an archived original by the original
    (the very shape toolkeep makes of it, not a text that merely names its key)."""
    if ctx.store is None:
        return history
    updates: dict[tuple[int, int], ToolResultPart] = {}
    for slot in iter_results(history):
        p = slot.result
        if p.original is not None or "<<ccr:" not in p.text:
            continue  # no marker: nothing to look up (most results)
        new = _restored(p, ctx)
        if new is not None:
            updates[(slot.message, slot.part)] = new
    return replace_results(history, updates)


def _restored(p: ToolResultPart, ctx: StepContext) -> ToolResultPart | None:
    if not CCR_MARKER_RE.search(p.text):
        return None
    for key in carried_keys(p.text):
        original = ctx.lookup(key)
        if original is not None and _derived_from(p.text, original):
            cap = _CAP.search(p.text)
            if cap is not None and _is_form(p.text, original) and len(p.text) < len(original):
                # a cap form stays as it is, its original known: it may have been cut where it
                # entered the history under a smaller cap than this pipeline's (a tool's own)
                saved = SAVED_PATH_RE.search(cap[0])
                return replace(p, original=original, key=key, saved_path=saved[1] if saved else None)
            return replace(p, text=original, modified=True)
    return None


def _derived_from(text: str, original: str) -> bool:
    """True when ``text`` is a shortened form toolkeep makes of ``original``, recognized by its
    exact shape: a summary whose line and char counts are the original's, or a cut whose head
    and tail are the original's and whose omission line counts what lies between them. A text
    that merely carries the original's marker (a quoted one) is not."""
    if _is_form(text, original):
        return True
    # the economy policy follows a form with a names index of what it left out
    cut = text.rfind("\nnames: ")
    return cut >= 0 and "\n" not in text[cut + 1 :] and _is_form(text[:cut], original)


def _is_form(text: str, original: str) -> bool:
    cleared = _CLEARED.fullmatch(text)
    if cleared is not None:  # nothing of the original in it: its first marker must be the original's
        return cleared[1] == archive_key(original)
    summary = _SUMMARY.match(text)
    if summary is not None:  # the summary, alone or followed by lines of the original
        return int(summary[1]) == line_count(original) and summary[2] == format_size(len(original))
    if len(text) >= len(original):
        return False
    for pattern in (_CAP, _PREVIEW, _COMPACT):
        found = pattern.search(text)
        if found is None:
            continue
        head, tail = text[: found.start()], text[found.end() :]
        omitted = int(found[1].replace(",", ""))
        if pattern is _CAP and omitted + int(found[2]) != len(original):
            return False
        if (
            original.startswith(head)
            and original.endswith(tail)
            and omitted == len(original) - len(head) - len(tail)
        ):
            return True
        # the economy's excerpt: lines of the original with gaps marked, the count at the end
        return pattern is _COMPACT and not tail and omitted <= len(original) and _excerpt_of(head, original)
    return False


def _excerpt_of(excerpt: str, original: str) -> bool:
    """True when every line of ``excerpt`` but the gap marks is a line of ``original``, in order,
    starting with its first line."""
    lines = original.split("\n")
    kept = [line for line in excerpt.split("\n") if not _GAP.fullmatch(line)]
    if not kept or kept[0] != lines[0]:
        return False
    position = 0
    for line in kept:
        try:
            position = lines.index(line, position) + 1
        except ValueError:
            return False
    return True


_GAP = re.compile(r"\[\.\.\. \d+ lines omitted \.\.\.\]")
