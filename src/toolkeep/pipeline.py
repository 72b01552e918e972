"""The pipeline: a list of steps run in order over one neutral history.

The order is the point: pairing repair first, so that every later step sees each result next to
the call that names its tool and its age; originals restored next, so that the cutting steps
always start from the full text; then caps (where results enter), the budget (what one result and
one turn may take) and, last, microcompaction, which only ever makes old results shorter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from .config import Config
from .exceptions import ConfigError
from .formats import Format, resolve_format
from .policies import economy_steps, seed_steps
from .report import Report
from .steps import (
    Memo,
    Microcompactor,
    ResultBudget,
    Step,
    StepContext,
    ToolCaps,
    iter_results,
    repair_pairing,
    restore_originals,
)
from .stores import ArchiveStore
from .workspace import Workspace

__all__ = ["POLICIES", "Prepared", "build_steps", "default_steps", "run_pipeline"]


class Prepared(NamedTuple):
    """What ``prepare`` returns: the messages to send and the report of what was done."""

    messages: list[Any]
    report: Report


def build_steps(config: Config) -> list[Step]:
    """The step list of ``config.policy`` (see :data:`POLICIES`), built from ``config``."""
    try:
        build = POLICIES[config.policy]
    except KeyError:
        known = ", ".join(sorted(POLICIES))
        raise ConfigError(f"unknown policy {config.policy!r} (known: {known})") from None
    return build(config)


def default_steps(config: Config) -> list[Step]:
    """SPEC's pipeline: pairing, originals, per-tool caps, budget, age-tiered microcompaction."""
    return [
        repair_pairing,
        restore_originals,
        ToolCaps(
            default=config.default_tool_cap,
            caps=config.tool_caps,
            head=config.cap_head_chars,
            tail=config.cap_tail_chars,
        ),
        ResultBudget(
            max_result_chars=config.max_result_chars,
            turn_budget_chars=config.turn_budget_chars,
            head=config.preview_head_chars,
            tail=config.preview_tail_chars,
        ),
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


POLICIES: dict[str, Callable[[Config], list[Step]]] = {"default": default_steps}
"""Named step lists; ``Config(policy=NAME)`` picks one."""
POLICIES.update(seed=seed_steps, economy=economy_steps)


def run_pipeline(
    messages: Sequence[Any],
    *,
    format: str | Format = "auto",
    config: Config | None = None,
    workspace: Workspace | None = None,
    store: ArchiveStore | None = None,
    steps: Sequence[Step] | None = None,
    memo: Memo | None = None,
) -> Prepared:
    """Run ``steps`` (default: :func:`build_steps`) over ``messages``; never mutates them.

    Without a workspace nothing is persisted (previews say so); without a store nothing is
    archived. :class:`toolkeep.Session` supplies both, and a ``memo`` that carries the work of
    earlier runs over to the next (the output is the same with or without it).
    """
    fmt = resolve_format(messages, format)
    config = config if config is not None else Config.from_env()
    ctx = StepContext(
        fmt, config, workspace, store, Report(format=fmt.name), memo if memo is not None else Memo()
    )
    history = fmt.load(messages)
    ctx.report.chars_before = sum(len(s.result.text) for s in iter_results(history))
    for step in steps if steps is not None else build_steps(config):
        history = step(history, ctx)
    slots = list(iter_results(history))
    ctx.report.total = len(slots)
    ctx.report.chars_after = sum(len(s.result.text) for s in slots)
    return Prepared(fmt.dump(history), ctx.report)
