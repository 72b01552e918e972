"""The economy policy's shortened forms: each result's and each call input's tiers, decided once.

A result has four tiers, each never longer than the one before: as it entered (0; a preview cut
by a cap or the budget gets the ``names:`` index of what it left out), trimmed (1), the summary
(2) and the lean summary (:data:`LEAN`), as long as lets its move cost nothing. A call's input
has two: as sent (0) and shortened (2, see :mod:`toolkeep.shortforms.inputs`). Every form is
computed from the original the first time it is asked for and kept on the item.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Container
from dataclasses import replace
from typing import Any

from ..config import Economy
from ..content_type import detect_content_type
from ..formats import input_chars, text_chars
from ..messages import Message, ToolCallPart, ToolResultPart
from ..pricing import resolve_pricing
from ..shorten import CAP_LINE_RE, carried_keys, compact_form, summary_form
from ..shortforms.inputs import input_form, parsed_object
from ..shortforms.previews import lines_summary, trimmed_form, with_names
from ..steps import StepContext
from .accounting import SLACK, Item

__all__ = ["LEAN", "STUB", "Forms"]

LEAN = 3
"""The tier of a result's lean summary (see ``Economy.lean``)."""
STUB = 4
"""The tier of a result's one-line summary alone (see ``Economy.lean_tail``)."""
_SOURCE_TYPES = ("source", "JSON", "YAML", "XML", "HTML", "Markdown")


class _Unarchived(Exception):
    """The original could not be archived: no shorter form without a way back."""


class Forms:
    """The forms of the items of one policy's settings."""

    def __init__(self, economy: Economy, prior: Callable[[Item], Container[str]] | None = None) -> None:
        self.economy = economy
        self.prior = prior
        """The names the conversation showed before an item (its names index leaves them out)."""

    def _known(self, item: Item) -> Container[str]:
        return () if self.prior is None else self.prior(item)

    def size(self, item: Item, tier: int, ctx: StepContext) -> int:
        """Chars of ``item`` sent at ``tier``."""
        if tier not in item.sizes:
            form = self.form(item, tier, ctx)
            item.sizes[tier] = text_chars(form) if isinstance(form, str) else input_chars(form)
        return item.sizes[tier]

    def form(self, item: Item, tier: int, ctx: StepContext) -> Any:
        """``item`` at ``tier`` (0 as sent, 1 trimmed, 2 summary, :data:`LEAN`), never longer than
        the tier before it: a text for a result, the arguments for a call."""
        if tier in item.forms:
            return item.forms[tier]
        if isinstance(item.obj, ToolCallPart):
            e = self.economy
            arguments = item.obj.arguments
            if tier == 0:
                form: Any = arguments
            elif isinstance(arguments, str):  # a JSON string (OpenAI): shortened as the object
                form = json.dumps(input_form(parsed_object(arguments), ctx, e.input_min_chars, e.input_head))
            else:
                form = input_form(arguments, ctx, e.input_min_chars, e.input_head)
        elif tier == 0:
            form = self._entry_form(item, ctx)
        else:
            previous = self.form(item, tier - 1, ctx)
            try:
                form = self._result_form(item, tier, ctx)
            except _Unarchived:
                return previous  # stays as it is, not remembered: the next request tries again
            if len(form) >= len(previous):
                form = previous
        item.forms[tier] = form
        return form

    def _entry_form(self, item: Item, ctx: StepContext) -> str:
        """The result as it entered: cut by the budget, that preview gets the names index of
        what it left out (decided once, at entry, so the cache never pays for it), as long as
        the result stays within the per-result limit that cut it (and the tool's cap). A cap
        form is sent as it is: it may be the cut of a tool's own, smaller cap
        (``@result_cap``), and a cap is the most a result keeps."""
        e = self.economy
        p = item.obj
        assert isinstance(p, ToolResultPart)
        if p.original is None or not e.previews or CAP_LINE_RE.search(p.text):
            return p.text
        tool = ctx.config.tool_cap(p.name)
        limit = min(tool.cap, tool.max_result_chars or tool.cap, e.entry_chars or tool.cap)
        room = limit - len(p.text) - len("\nnames: ")
        index = min(e.index_max, int(len(p.original) * e.index_share), room)
        return with_names(p.text, p.original, index, self._known(item))

    def _result_form(self, item: Item, tier: int, ctx: StepContext) -> str:
        e = self.economy
        p = item.obj
        assert isinstance(p, ToolResultPart)
        original = p.full_text
        key = p.key or ctx.archive(original)
        if ctx.unarchived(key):
            raise _Unarchived
        if key and p.key is None:
            item.obj = p = replace(p, key=key)
        keys = ([key] if key else []) + carried_keys(original)
        paths = [p.saved_path] if p.saved_path else []
        content_type = detect_content_type(original)
        if not e.previews:
            if tier == 1:
                return compact_form(original, e.head_chars, e.tail_chars, keys=keys, paths=paths)
            return summary_form(original, content_type, keys=keys, paths=paths)
        source = item.kind == "read" or any(t in content_type for t in _SOURCE_TYPES)
        kind = (
            "exec"
            if item.kind == "exec" or item.failure
            else "search"
            if item.kind in ("search", "list")
            else ""
        )
        kind = kind or ("source" if source else "text")
        index = min(e.index_max, int(len(original) * e.index_share))
        if tier == STUB:
            return summary_form(original, content_type, keys=keys, paths=paths)
        if tier == 1:
            text = trimmed_form(original, kind, e.trim_chars, keys=keys, paths=paths)
        elif tier == 2:
            text = lines_summary(original, content_type, kind, e.summary_chars, keys=keys, paths=paths)
        else:
            # the lean summary: as long as it can be for a move of this result alone in its
            # message to cost nothing (the message written, 1.25x, where it was read, 0.1x,
            # with the slack of the size estimate); lines and names index share that length
            # the format's own size of a message holding this result alone, but for its text
            # (its own item, with the fields it came with: a Responses output's ``id``, ...)
            wrapper = ctx.format.message_chars(Message(item.role, (p.with_text(""),)))
            pricing = resolve_pricing(ctx.config.pricing, ctx.format)
            read = pricing.cache_read * (self.size(item, 0, ctx) + wrapper)
            free = max(0, int((read - pricing.cache_write * (wrapper + SLACK)) / pricing.cache_write))
            text = lines_summary(
                original, content_type, kind, min(e.summary_chars, free // 2), keys=keys, paths=paths
            )
            if text_chars(text) > free:  # the lines chosen overran their share
                text = summary_form(original, content_type, keys=keys, paths=paths)
            index = min(index, free - text_chars(text) - text_chars("\nnames: "))
        return with_names(text, original, index, self._known(item))
