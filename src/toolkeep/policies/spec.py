"""SPEC's pipeline, the ``spec`` policy; the other policies build on its steps."""

from __future__ import annotations

from ..config import Config, ToolCap
from ..steps import Microcompactor, ResultBudget, Step, ToolCaps, repair_pairing, restore_originals

__all__ = ["spec_steps"]


def spec_steps(config: Config) -> list[Step]:
    """SPEC's pipeline: pairing, originals, per-tool caps, budget, age-tiered microcompaction."""
    budget = ResultBudget(
        max_result_chars=config.max_result_chars,
        turn_budget_chars=config.turn_budget_chars,
        head=config.preview_head_chars,
        tail=config.preview_tail_chars,
        limits={
            name: cap.max_result_chars
            for name, cap in config.tool_caps.items()
            if isinstance(cap, ToolCap) and cap.max_result_chars is not None
        },
    )
    return [
        repair_pairing,
        restore_originals,
        ToolCaps(
            default=config.default_tool_cap,
            caps=config.tool_caps,
            head=config.cap_head_chars,
            tail=config.cap_tail_chars,
            budget=budget,
        ),
        budget,
        Microcompactor(
            truncate_turns=config.truncate_turns,
            summarize_turns=config.summarize_turns,
            min_chars=config.compact_min_chars,
            head=config.compact_head_chars,
            tail=config.compact_tail_chars,
            preserve=config.preserve_tools,
            preserve_errors=config.preserve_errors,
        ),
    ]
