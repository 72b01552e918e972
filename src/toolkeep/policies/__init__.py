"""The named policies: each builds its step list from a :class:`~toolkeep.Config`, here.

- ``economy``, the default: cache-aware (:mod:`.economy`, with :mod:`.cost`, :mod:`.forms`,
  :mod:`.inputs` and :mod:`.accounting`);
- ``spec``: SPEC's pipeline (:mod:`.spec`);
- ``seed``: ChatCLI's exact behaviour (:mod:`.seed`).

``Config(policy=NAME)`` picks one from :data:`POLICIES`; ``Config()`` runs ``economy``, and the
name ``"default"`` stands for it (:data:`~toolkeep.config.DEFAULT_POLICY_ALIAS`).

Every policy fills the same named slots of a :class:`~toolkeep.steps.Pipeline`; what the config
adds to any of them (the request budget's ``bound`` slot, and the call inputs' restore it needs)
is added here, in :func:`prepared_pipeline`, the one function ``run_pipeline``, ``Session`` and
the proxy build their pipeline with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..config import Config, Economy
from ..exceptions import ConfigError
from ..shortforms.inputs import RestoreInputs
from ..steps import Pipeline, Step
from ..window import RequestBudget
from .accounting import Item
from .economy import EconomyCompactor, EconomyPlan, economy_steps
from .seed import SeedMicrocompactor, seed_steps
from .spec import spec_steps

__all__ = [
    "POLICIES",
    "Economy",
    "EconomyCompactor",
    "EconomyPlan",
    "Item",
    "SeedMicrocompactor",
    "build_steps",
    "economy_steps",
    "prepared_pipeline",
    "seed_steps",
    "spec_steps",
]

POLICIES: dict[str, Callable[[Config], Pipeline]] = {
    "economy": economy_steps,
    "spec": spec_steps,
    "seed": seed_steps,
}
"""Named pipelines; ``Config(policy=NAME)`` picks one (``Config()``: ``economy``)."""


def build_steps(config: Config) -> Pipeline:
    """The pipeline of ``config.policy`` (see :data:`POLICIES`), built from ``config``, its
    slots filled for the config (:func:`prepared_pipeline`)."""
    try:
        build = POLICIES[config.policy]
    except KeyError:
        known = ", ".join(sorted(POLICIES))
        raise ConfigError(f"unknown policy {config.policy!r} (known: {known})") from None
    pipeline = build(config)
    if config.max_request_tokens is not None and not any(
        isinstance(s, RestoreInputs) for s in pipeline.restore
    ):
        # the request budget shortens old call inputs too: a prepared history sent back must
        # come in with them whole again, as it does with results
        pipeline = pipeline.with_slot("restore", *pipeline.restore, RestoreInputs())
    return _bounded(pipeline, config)


def prepared_pipeline(config: Config, steps: Pipeline | Iterable[Step] | None = None) -> Pipeline:
    """What a run goes through: ``steps`` (a pipeline, or a list of one's own, run as given)
    or else the configured policy's (:func:`build_steps`); with ``Config.max_request_tokens``,
    the request budget in its ``bound`` slot, unless one is there."""
    if steps is None:
        return build_steps(config)
    return _bounded(Pipeline.of(steps), config)


def _bounded(pipeline: Pipeline, config: Config) -> Pipeline:
    if config.max_request_tokens is None or pipeline.bound is not None:
        return pipeline
    return pipeline.with_slot("bound", RequestBudget())
