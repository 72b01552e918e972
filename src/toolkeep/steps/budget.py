"""Result budget (SPEC 4): per result, then per turn; what is cut is persisted first."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from ..messages import History, ToolResultPart
from ..shorten import carried_keys, preview_form
from ._context import ResultSlot, Reuse, StepContext, iter_results, replace_results

__all__ = ["ResultBudget"]


class ResultBudget:
    """Replace results over ``max_result_chars`` by a head+tail preview naming the saved file,
    then, in any turn whose results still add up to more than ``turn_budget_chars``, do the same
    to the largest results (ties: earliest first) until the turn fits.

    ``limits`` gives some tools a per-result limit of their own, by name (compared
    case-insensitively), as :class:`~toolkeep.ToolCap` ``max_result_chars`` does:

        >>> ResultBudget(limits={"read": 80_000}).limit_for("Read"), ResultBudget().limit_for("grep")
        (80000, 20000)
    """

    reuse = Reuse(block_local=True)

    def __init__(
        self,
        *,
        max_result_chars: int = 20_000,
        turn_budget_chars: int = 200_000,
        head: int = 4_000,
        tail: int = 1_000,
        limits: Mapping[str, int] | None = None,
    ) -> None:
        self.max_result_chars = max_result_chars
        self.limits = {name.lower(): limit for name, limit in (limits or {}).items()}
        self.turn_budget_chars = turn_budget_chars
        self.head = head
        self.tail = tail

    def limit_for(self, tool_name: str | None) -> int:
        """The per-result limit of a tool's results."""
        return self.limits.get((tool_name or "").lower(), self.max_result_chars)

    def preview(self, p: ToolResultPart, ctx: StepContext) -> ToolResultPart | None:
        """The persisted preview of one result, or ``None`` if it would not be shorter."""
        original = p.full_text
        if len(original) <= self.head + self.tail:
            return None
        key = ctx.archive(original)
        path, error = ctx.persist(p.call_id, original)
        keys = ([key] if key else []) + carried_keys(original)
        text = preview_form(original, self.head, self.tail, keys=keys, path=path, save_error=error)
        if text != p.text and len(text) >= len(p.text):
            return None
        return p.with_text(text, key=key or p.key, saved_path=path, save_error=error)

    def __call__(self, history: History, ctx: StepContext) -> History:
        updates: dict[tuple[int, int], ToolResultPart] = {}
        turns: dict[int, list[ResultSlot]] = defaultdict(list)
        totals: dict[int, int] = defaultdict(int)
        for slot in iter_results(history):
            p = slot.result
            turns[slot.block].append(slot)
            if len(p.text) > (self.limit_for(p.name) if self.limits else self.max_result_chars):
                new = self.preview(p, ctx)
                if new is not None:
                    limit = self.limit_for(p.name) if self.limits else self.max_result_chars
                    reason = f"result budget: over {limit:,} chars for one result"
                    ctx.add_cut("persisted", new, slot.message, p.text, reason)
                    updates[(slot.message, slot.part)] = p = new
            totals[slot.block] += len(p.text)
        for block, slots in turns.items():
            if totals[block] > self.turn_budget_chars:  # most turns fit: no sorting for them
                self._fit_turn(slots, totals[block], updates, ctx)
        return replace_results(history, updates)

    def _fit_turn(
        self,
        slots: list[ResultSlot],
        total: int,
        updates: dict[tuple[int, int], ToolResultPart],
        ctx: StepContext,
    ) -> None:
        def current(slot: ResultSlot) -> ToolResultPart:
            return updates.get((slot.message, slot.part), slot.result)

        order = sorted(range(len(slots)), key=lambda n: (-len(current(slots[n]).text), n))
        recall_tools = ctx.config.recall_tools
        for n in order:
            slot = slots[n]
            before = current(slot)
            if (before.name or "").lower() in recall_tools:
                continue  # a recalled page is already sized to fit; cutting it loops recall
            new = self.preview(before, ctx)
            if new is None or new.text == before.text:
                continue
            updates[(slot.message, slot.part)] = new
            reason = f"turn budget: the turn's results held {total:,} chars, over {self.turn_budget_chars:,}"
            ctx.add_cut("persisted", new, slot.message, before.text, reason)
            total -= len(before.text) - len(new.text)
            if total <= self.turn_budget_chars:
                return
