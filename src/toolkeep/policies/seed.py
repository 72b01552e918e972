"""The seed's exact behaviour (ChatCLI as its description and code have it), as ``policy="seed"``.

Kept as a yardstick: the SPEC's default fixes its flaws, and the economics bench reports both.
What differs from the default:

- microcompaction tests the size of the result *as it stands* (ChatCLI edits its history in
  place), so a result truncated at age 2 (about 2,500 chars) is under the 3,000-char threshold
  from then on and never reaches the one-line summary;
- nothing is preserved: write and execution tools and error results are cut like the others;
- the summary names only the seed's content types (JSON, Go, Python, JavaScript, diff, git log,
  text);
- a result over its tool's cap keeps ChatCLI's 5,000 + 1,000 chars around the marker whatever the
  cap (the cap is a threshold, as in ChatCLI), where the default fills the cap.

The in-place editing is reproduced as a pure function of the result's age (the tier rules are
applied once per age, in order), so the output stays a deterministic function of the history.
"""

from __future__ import annotations

from ..config import Config
from ..content_type import detect_content_type_seed
from ..messages import History, ToolResultPart
from ..shorten import carried_keys, compact_form, summary_form
from ..steps import Pipeline, Reuse, StepContext, ToolCaps, replace_results
from .spec import result_budget, spec_steps

__all__ = ["SeedMicrocompactor", "seed_steps"]


class SeedMicrocompactor:
    """ChatCLI's microcompaction: at age >= ``truncate_turns`` a result whose current text is over
    ``min_chars`` becomes head+tail; at age >= ``summarize_turns`` one whose current text is
    still over ``min_chars`` becomes the one-line summary. Nothing is preserved.

    Deliberately not a :class:`~toolkeep.steps.Microcompactor` subclass: the seed's behaviour
    must not follow the SPEC step as it evolves."""

    def __init__(
        self,
        *,
        truncate_turns: int = 2,
        summarize_turns: int = 4,
        min_chars: int = 3_000,
        head: int = 2_000,
        tail: int = 500,
    ) -> None:
        self.truncate_turns = truncate_turns
        self.summarize_turns = summarize_turns
        self.min_chars = min_chars
        self.head = head
        self.tail = tail
        self.reuse = Reuse(block_local=True, tiers=(truncate_turns, summarize_turns))
        """Block by block; a result's form changes at the two ages."""

    def form(self, text: str, age: int, keys: list[str], paths: list[str]) -> str:
        """The text after the in-place edits of every age up to ``age``, starting from ``text``."""
        current = text
        # ChatCLI runs both rules at every request; the result passed the truncation age first
        # unless both ages are equal, in which case the summary rule saw the full text
        if (
            age >= self.truncate_turns
            and self.truncate_turns < self.summarize_turns
            and len(current) > self.min_chars
        ):
            current = compact_form(current, self.head, self.tail, keys=keys, paths=paths)
        if age >= self.summarize_turns and len(current) > self.min_chars:
            current = summary_form(current, detect_content_type_seed(current), keys=keys, paths=paths)
        return current

    def __call__(self, history: History, ctx: StepContext) -> History:
        updates: dict[tuple[int, int], ToolResultPart] = {}
        for slot in ctx.results(history):
            p = slot.result
            if slot.age < self.truncate_turns or len(p.text) <= self.min_chars:
                continue
            new = self._cut(p, slot.age, ctx)
            if new is None:
                continue
            updates[(slot.message, slot.part)] = new
            kind = "summarized" if new.text.startswith("[Old tool result cleared") else "truncated"
            reason = f"age {slot.age}: cut from age {self.truncate_turns}"
            ctx.add_cut(kind, new, slot.message, p.text, reason)
        return replace_results(history, updates)

    def _cut(self, p: ToolResultPart, age: int, ctx: StepContext) -> ToolResultPart | None:
        key = p.key or ctx.archive(p.full_text)
        if ctx.unarchived(key):
            return None  # no way back: it stays whole (the report's save_errors say why)
        keys = ([key] if key else []) + carried_keys(p.text)
        paths = [p.saved_path] if p.saved_path else []
        text = self.form(p.text, age, keys, paths)
        return None if text == p.text else p.with_text(text, key=key)


def seed_steps(config: Config) -> Pipeline:
    """The seed's pipeline: SPEC's, with ChatCLI's caps (head 5,000 and tail 1,000, or the
    config's; every cut its own, none left to the budget) and ChatCLI's microcompaction."""
    head = config.cap_head_chars if config.cap_head_chars is not None else 5_000
    tail = config.cap_tail_chars if config.cap_tail_chars is not None else 1_000
    caps = ToolCaps(default=config.default_tool_cap, caps=config.tool_caps, head=head, tail=tail)
    return (
        spec_steps(config)
        .with_slot("enter", caps, result_budget(config))
        .with_slot(
            "compact",
            SeedMicrocompactor(
                truncate_turns=config.truncate_turns,
                summarize_turns=config.summarize_turns,
                min_chars=config.compact_min_chars,
                head=config.compact_head_chars,
                tail=config.compact_tail_chars,
            ),
        )
    )
