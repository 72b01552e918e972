"""Per-tool caps (SPEC 3): a result over its tool's cap keeps a plain head and tail."""

from __future__ import annotations

from collections.abc import Mapping

from ..config import DEFAULT_TOOL_CAPS
from ..messages import History, ToolResultPart
from ..shorten import cap_form, carried_keys
from ._context import Step, StepContext, iter_results, replace_results

__all__ = ["ToolCaps"]


class ToolCaps(Step):
    """Cut results over their tool's cap to ``head`` + ``[TRUNCATED N chars omitted, M kept]`` + ``tail``.

    The full output is archived and persisted first, and the marker line names both ways back.

        >>> ToolCaps(default=30_000, caps={"read": 80_000}).cap_for("Read")
        80000
    """

    block_local = True

    def __init__(
        self,
        *,
        default: int = 30_000,
        caps: Mapping[str, int] = DEFAULT_TOOL_CAPS,
        head: int = 5_000,
        tail: int = 1_000,
    ) -> None:
        self.default = default
        self.caps = {name.lower(): cap for name, cap in caps.items()}
        self.head = head
        self.tail = tail

    def cap_for(self, tool_name: str | None) -> int:
        """The cap of a tool (names compare case-insensitively)."""
        return self.caps.get((tool_name or "").lower(), self.default)

    def cut(self, p: ToolResultPart, ctx: StepContext) -> ToolResultPart | None:
        """The capped form of one result, or ``None`` when it is within its cap."""
        original = p.full_text
        if len(original) <= self.cap_for(p.name):
            return None
        key = ctx.archive(original)
        path, error = ctx.persist(p.call_id, original)
        keys = ([key] if key else []) + carried_keys(original)
        # say why nothing is saved when saving failed (not in a run without a workspace at all)
        failed = error if ctx.workspace is not None else None
        text = cap_form(original, self.head, self.tail, keys=keys, path=path, save_error=failed)
        if text != p.text and len(text) >= len(p.text):
            return None
        return p.with_text(text, key=key or p.key, saved_path=path, save_error=error)

    def __call__(self, history: History, ctx: StepContext) -> History:
        updates: dict[tuple[int, int], ToolResultPart] = {}
        for slot in iter_results(history):
            p = slot.result
            if len(p.full_text) <= self.cap_for(p.name):
                continue  # within its cap: nothing to look up
            new = ctx.remembered("caps", p, self.cut, p, ctx)
            if new is not None:
                updates[(slot.message, slot.part)] = new
                ctx.report.add_cut("capped", new, ctx.index_offset + slot.message, p.text)
        return replace_results(history, updates, ctx.memo)
