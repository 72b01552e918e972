"""SPEC's pipeline, the ``spec`` policy; the other policies build on its slots."""

from __future__ import annotations

from ..config import Config, ToolCap
from ..steps import Microcompactor, Pipeline, ResultBudget, ToolCaps, repair_pairing, restore_originals

__all__ = ["result_budget", "spec_steps"]


def result_budget(config: Config) -> ResultBudget:
    """SPEC's budget of one result and one turn, from ``config``."""
    return ResultBudget(
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


def spec_steps(config: Config) -> Pipeline:
    """SPEC's pipeline: pairing, originals, per-tool caps, budget, age-tiered microcompaction."""
    budget = result_budget(config)
    return Pipeline(
        repair=(repair_pairing,),
        restore=(restore_originals,),
        enter=(
            ToolCaps(
                default=config.default_tool_cap,
                caps=config.tool_caps,
                head=config.cap_head_chars,
                tail=config.cap_tail_chars,
                budget=budget,
            ),
            budget,
        ),
        compact=(
            Microcompactor(
                truncate_turns=config.truncate_turns,
                summarize_turns=config.summarize_turns,
                min_chars=config.compact_min_chars,
                head=config.compact_head_chars,
                tail=config.compact_tail_chars,
                preserve=config.preserve_tools,
                preserve_errors=config.preserve_errors,
            ),
        ),
    )
