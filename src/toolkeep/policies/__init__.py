"""The named policies: each builds its step list from a :class:`~toolkeep.Config`, here.

- ``economy``, the default: cache-aware (:mod:`.economy`, with :mod:`.cost`, :mod:`.forms`,
  :mod:`.inputs` and :mod:`.accounting`);
- ``spec``: SPEC's pipeline (:mod:`.spec`);
- ``seed``: ChatCLI's exact behaviour (:mod:`.seed`).

``Config(policy=NAME)`` picks one from :data:`POLICIES`; ``Config()`` runs ``economy``, and the
name ``"default"`` stands for it (:data:`~toolkeep.config.DEFAULT_POLICY_ALIAS`).
"""

from __future__ import annotations

from collections.abc import Callable

from ..config import Config, Economy
from ..exceptions import ConfigError
from ..steps import Step

__all__ = [
    "POLICIES",
    "Economy",
    "EconomyCompactor",
    "SeedMicrocompactor",
    "build_steps",
    "economy_steps",
    "seed_steps",
    "spec_steps",
]


from ..shortforms.inputs import RestoreInputs
from ..steps import restore_originals
from .economy import EconomyCompactor, economy_steps
from .seed import SeedMicrocompactor, seed_steps
from .spec import spec_steps

POLICIES: dict[str, Callable[[Config], list[Step]]] = {
    "economy": economy_steps,
    "spec": spec_steps,
    "seed": seed_steps,
}
"""Named step lists; ``Config(policy=NAME)`` picks one (``Config()``: ``economy``)."""


def build_steps(config: Config) -> list[Step]:
    """The step list of ``config.policy`` (see :data:`POLICIES`), built from ``config``."""
    try:
        build = POLICIES[config.policy]
    except KeyError:
        known = ", ".join(sorted(POLICIES))
        raise ConfigError(f"unknown policy {config.policy!r} (known: {known})") from None
    steps = build(config)
    if config.max_request_tokens is not None and not any(isinstance(s, RestoreInputs) for s in steps):
        # the request budget shortens old call inputs too: a prepared history sent back must
        # come in with them whole again, as it does with results (after restore_originals)
        at = next((n + 1 for n, s in enumerate(steps) if s is restore_originals), 0)
        steps.insert(at, RestoreInputs())
    return steps
