"""Per-tool caps (SPEC 3): a result over its tool's cap keeps a plain head and tail, and never more
chars than the cap, the marker included."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..config import DEFAULT_TOOL_CAPS, MIN_TOOL_CAP, ToolCap
from ..exceptions import ConfigError
from ..messages import History, ToolResultPart
from ..shorten import cap_form, carried_keys
from ._context import Reuse, SaveContext, StepContext, iter_results, replace_results

if TYPE_CHECKING:
    from .budget import ResultBudget

__all__ = ["ToolCaps"]


class ToolCaps:
    """Cut results over their tool's cap to ``head`` + ``[TRUNCATED N chars omitted, M kept]`` + ``tail``,
    at most the cap long in all.

    ``caps`` maps tool names (compared case-insensitively) to a cap or a
    :class:`~toolkeep.ToolCap`; other tools get ``default``. ``head`` and ``tail`` are the most
    of each a cut keeps where the tool's own setting gives none; ``None``: they fill the cap. The
    full output is archived and persisted first, and the marker line names both ways back.

    ``budget`` is the :class:`~toolkeep.ResultBudget` that runs next, if any: a result whose cut
    would fill a cap over the budget's per-result limit is left to it, since its preview (made
    from the original) replaces the cut anyway; the result is then cut and saved once.

        >>> ToolCaps(default=30_000, caps={"read": 80_000}).cap_for("Read")
        80000
    """

    reuse = Reuse(block_local=True)

    def __init__(
        self,
        *,
        default: int = 30_000,
        caps: Mapping[str, int | ToolCap] = DEFAULT_TOOL_CAPS,
        head: int | None = None,
        tail: int | None = None,
        budget: ResultBudget | None = None,
    ) -> None:
        if not isinstance(default, int) or isinstance(default, bool) or default < MIN_TOOL_CAP:
            raise ConfigError(
                f"a default tool cap must be a whole number of at least {MIN_TOOL_CAP}, got {default!r}"
            )
        self.default = ToolCap(default)
        self.caps = {name.lower(): ToolCap.of(cap, f"caps[{name!r}]") for name, cap in caps.items()}
        self.head = head
        self.tail = tail
        self.budget = budget

    def setting_for(self, tool_name: str | None) -> ToolCap:
        """The settings of a tool: its own, else the default."""
        return self.caps.get((tool_name or "").lower(), self.default)

    def cap_for(self, tool_name: str | None) -> int:
        """The cap of a tool (names compare case-insensitively)."""
        return self.setting_for(tool_name).cap

    def cut(
        self, p: ToolResultPart, ctx: SaveContext, setting: ToolCap | None = None
    ) -> ToolResultPart | None:
        """The capped form of one result (under ``setting``, default its tool's), or ``None``
        when it is within the cap or already shorter than the cut would be. It reads no format:
        ``ctx`` needs only to save (a :class:`~toolkeep.steps.SaveContext`; a step's
        :class:`~toolkeep.steps.StepContext` is one)."""
        setting = setting or self.setting_for(p.name)
        original = p.full_text
        if len(original) <= setting.cap:
            return None
        key = ctx.archive(original)
        path, error = ctx.persist(p.call_id, original)
        keys = ([key] if key else []) + carried_keys(original)
        # say why nothing is saved when saving failed (not in a run without a workspace at all)
        failed = error if ctx.workspace is not None else None
        head = setting.head if setting.head is not None else self.head
        tail = setting.tail if setting.tail is not None else self.tail
        try:
            text = cap_form(original, head, tail, keys=keys, path=path, save_error=failed, cap=setting.cap)
        except ValueError:  # no key (the archive refused it) and a path longer than the cap
            return None  # kept whole rather than cut with no way back named
        if text != p.text and len(text) >= len(p.text):
            return None  # already shorter (a cut made where it entered, under a smaller cap)
        return p.with_text(text, key=key or p.key, saved_path=path, save_error=error)

    def left_to_budget(self, p: ToolResultPart) -> bool:
        """True when the budget that follows previews what this step would cut: a cut that fills
        a cap over the tool's per-result limit, of an original the preview shortens."""
        budget = self.budget
        if budget is None:
            return False
        setting = self.setting_for(p.name)
        fills = (setting.head if setting.head is not None else self.head) is None and (
            setting.tail if setting.tail is not None else self.tail
        ) is None
        return (
            fills and setting.cap > budget.limit_for(p.name) and len(p.full_text) > budget.head + budget.tail
        )

    def __call__(self, history: History, ctx: StepContext) -> History:
        updates: dict[tuple[int, int], ToolResultPart] = {}
        for slot in iter_results(history):
            p = slot.result
            if len(p.full_text) <= self.cap_for(p.name) or self.left_to_budget(p):
                continue  # within its cap, or the budget's preview will replace the cut
            new = self.cut(p, ctx)
            if new is not None:
                updates[(slot.message, slot.part)] = new
                reason = (
                    f"over the per-tool cap of {self.cap_for(p.name):,} chars ({p.name or 'unnamed tool'})"
                )
                ctx.add_cut("capped", new, slot.message, p.text, reason)
        return replace_results(history, updates)
