"""Progressive microcompaction (SPEC 6): old results shrink with age, from their original."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..config import DEFAULT_PRESERVE_TOOLS
from ..content_type import detect_content_type
from ..messages import History, ToolResultPart
from ..shorten import carried_keys, compact_form, summary_form
from ._context import Reuse, StepContext, replace_results

__all__ = ["Microcompactor"]


class Microcompactor:
    """Cut results at age >= ``truncate_turns`` to head+tail, and at age >= ``summarize_turns``
    to a one-line summary, when their original is over ``min_chars``.

    Results of the tools in ``preserve`` (write and execution tools) and error results are kept.
    The size test and the cut both use the original, so a result cut at one age still reaches
    the summary later; the way back (archive key, saved path) is carried to every level.
    """

    types_kept = 4_096
    """Content types remembered by archive key (a label each; the oldest used go first)."""

    def __init__(
        self,
        *,
        truncate_turns: int = 2,
        summarize_turns: int = 4,
        min_chars: int = 3_000,
        head: int = 2_000,
        tail: int = 500,
        preserve: Iterable[str] = DEFAULT_PRESERVE_TOOLS,
        preserve_errors: bool = True,
        content_type: Callable[[str], str] = detect_content_type,
        recall_protect_turns: int | None = None,
    ) -> None:
        self.truncate_turns = truncate_turns
        self.summarize_turns = summarize_turns
        self.min_chars = min_chars
        self.head = head
        self.tail = tail
        self.preserve = frozenset(name.lower() for name in preserve)
        self.preserve_errors = preserve_errors
        self.content_type = content_type
        # None: take it from the run's config, so a pipeline built without it still protects
        self.recall_protect_turns = recall_protect_turns
        self._types: dict[str, str] = {}
        """Content type by archive key, least recently used first: agents read the same file
        again and again (one summary in five on the largest real session repeats an earlier
        one's original). At most :attr:`types_kept` entries."""

    def preserved(self, p: ToolResultPart) -> bool:
        """True for results this compactor never shortens."""
        return (p.is_error and self.preserve_errors) or (p.name or "").lower() in self.preserve

    def recalled(self, p: ToolResultPart, age: int, ctx: StepContext) -> bool:
        """True for a recall/read_result answer younger than ``recall_protect_turns``: cutting
        what the model just asked for would only make it ask again (recall -> compact -> recall)."""
        return age < self._protect_turns(ctx) and (p.name or "").lower() in ctx.config.recall_tools

    @property
    def reuse(self) -> Reuse:
        """Block by block; a result's form changes at the truncation age, the summary age and
        the age from which recall no longer protects it (the run's config's, unless given)."""
        protect = self.recall_protect_turns
        return Reuse(
            block_local=True,
            tiers=(
                self.truncate_turns,
                self.summarize_turns,
                "recall_protect_turns" if protect is None else protect,
            ),
        )

    def _protect_turns(self, ctx: StepContext) -> int:
        """``recall_protect_turns`` as given, else the run's config's."""
        if self.recall_protect_turns is not None:
            return self.recall_protect_turns
        return ctx.config.recall_protect_turns

    def compact(self, p: ToolResultPart, age: int, ctx: StepContext) -> ToolResultPart | None:
        """The form of ``p`` at ``age``, or ``None`` when it stays as it is."""
        if age < self.truncate_turns:
            return None
        original = p.full_text
        if len(original) <= self.min_chars or self.preserved(p) or self.recalled(p, age, ctx):
            return None
        key = p.key or ctx.archive(original)
        if ctx.unarchived(key):
            return None  # no way back: it stays whole (the report's save_errors say why)
        keys = ([key] if key else []) + carried_keys(original)
        paths = [p.saved_path] if p.saved_path else []
        if age >= self.summarize_turns:
            kind = self._content_type(original, key)
            text = summary_form(original, kind, keys=keys, paths=paths)
        else:
            text = compact_form(original, self.head, self.tail, keys=keys, paths=paths)
        if text != p.text and len(text) >= len(p.text):
            return None
        return p.with_text(text, key=key)

    def _content_type(self, original: str, key: str | None) -> str:
        """The content type of ``original``, named once per archive key while it is kept."""
        if not key:
            return self.content_type(original)
        types = self._types
        kind = types.pop(key, None)
        if kind is None:
            kind = self.content_type(original)
            if len(types) >= self.types_kept:
                del types[next(iter(types))]
        types[key] = kind  # (again) the most recently used
        return kind

    def __call__(self, history: History, ctx: StepContext) -> History:
        updates: dict[tuple[int, int], ToolResultPart] = {}
        for slot in ctx.results(history):
            p = slot.result
            if slot.age < self.truncate_turns or len(p.full_text) <= self.min_chars:
                continue  # young or small: it stays as it is (most results; no lookup needed)
            new = self.compact(p, slot.age, ctx)
            if new is None:
                ctx.report.preserved += self.preserved(p)
                continue
            updates[(slot.message, slot.part)] = new
            kind = "summarized" if slot.age >= self.summarize_turns else "truncated"
            reason = f"age {slot.age}: head+tail from age {self.truncate_turns}, summary from {self.summarize_turns}"
            ctx.add_cut(kind, new, slot.message, p.text, reason)
        return replace_results(history, updates)
