"""The pipeline: named slots of steps run in order over one neutral history, the request
budget last (:class:`~toolkeep.steps.Pipeline`).

The order is the point: pairing repair first (``repair``), so that every later step sees each
result next to the call that names its tool and its age; originals restored next (``restore``),
so that the cutting steps always start from the full text; then caps, where results enter, and
the budget of one result and one turn (``enter``); then compaction, which only ever makes old
results shorter (``compact``); last the request budget (``bound``). Each policy fills the slots
in :mod:`toolkeep.policies` (:func:`~toolkeep.policies.prepared_pipeline`); :mod:`toolkeep.engine`
runs them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from . import engine
from .config import Config
from .formats import Format, resolve_format
from .policies import POLICIES, build_steps, economy_steps, prepared_pipeline
from .pricing import resolve_pricing
from .report import Prepared, Report
from .steps import Memo, Pipeline, Step, StepContext
from .stores import ArchiveStore
from .workspace import Workspace

__all__ = ["POLICIES", "Prepared", "build_steps", "default_steps", "run_pipeline"]

default_steps: Callable[[Config], Pipeline] = economy_steps
"""The default policy's steps (``economy``'s: ``Config()`` runs them); SPEC's are
``toolkeep.policies.spec_steps``."""


def run_pipeline(
    messages: Sequence[Any],
    *,
    format: str | Format = "auto",
    config: Config | None = None,
    workspace: Workspace | None = None,
    store: ArchiveStore | None = None,
    steps: Pipeline | Sequence[Step] | None = None,
    memo: Memo | None = None,
    tools: Any = None,
    system: Any = None,
    trust_env: bool = True,
) -> Prepared:
    """Run ``steps`` (a pipeline or a list of steps; default: the configured policy's,
    :func:`build_steps`) over ``messages`` once; never mutates them.

    Without a workspace nothing is persisted (previews say so); without a store nothing is
    archived. :class:`toolkeep.Session` supplies both, and keeps the work of earlier requests
    for the next (the output is the same with it or without). ``memo`` lends a one-off run
    the work an earlier run did on the same objects. ``tools`` and ``system`` count towards
    ``config.max_request_tokens`` as in :meth:`toolkeep.Session.prepare`. Without ``config``, the
    settings come from the environment unless ``trust_env=False`` (:meth:`Config.resolve`).
    """
    fmt = resolve_format(messages, format)
    config = Config.resolve(config, trust_env=trust_env)
    report = Report(format=fmt.name, policy=config.policy, pricing=resolve_pricing(config.pricing, fmt).name)
    ctx = StepContext(fmt, config, workspace, store, report)
    chosen = prepared_pipeline(config, steps)
    extras = tuple(x for x in (tools, system) if x is not None)
    return Prepared(engine.run(fmt, messages, chosen, ctx, extras=extras, memo=memo), ctx.report)
