"""Named policies beyond the SPEC's default: the seed's exact behaviour and the cache-aware economy.

Each builder takes a :class:`~toolkeep.Config` and returns a step list; ``toolkeep.pipeline``
registers them in ``POLICIES`` so ``Config(policy="seed")`` or ``Config(policy="economy")`` picks one.
"""

from __future__ import annotations

from .economy import Economy, EconomyCompactor, economy_steps
from .seed import SeedMicrocompactor, seed_steps

__all__ = ["Economy", "EconomyCompactor", "SeedMicrocompactor", "economy_steps", "seed_steps"]
