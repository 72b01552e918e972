"""A pipeline: a policy's steps in named slots, the request budget last.

Every policy fills the same slots, in this order (:mod:`toolkeep.policies` builds them, in one
place):

- ``repair``: the history made valid (pairing repair), so that every later step sees each
  result next to the call that names its tool and its age;
- ``restore``: what an earlier run shortened put back whole (results, call inputs), so that the
  cutting steps always start from the full text;
- ``enter``: where results enter the history (per-tool caps, the proxy's file saving) and what
  one result and one turn may take (the budget);
- ``compact``: old results shortened (the policy's own step; the last step may decide over the
  whole session);
- ``bound``: the request budget (``Config.max_request_tokens``, :mod:`toolkeep.window`), which
  brings the whole request within it.

A pipeline is a value: :meth:`Pipeline.with_slot` gives a new one with a slot filled or replaced
by name (the proxy's file saving, the seed policy's own caps), and a list of steps of one's own
runs as given (:meth:`Pipeline.of`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

from ..formats import Format
from ..messages import History
from ._context import Step, StepContext, reuse_of
from .caps import ToolCaps
from .memo import Memo

__all__ = ["SLOTS", "Bound", "Pipeline", "Slot"]

Slot = Literal["repair", "restore", "enter", "compact", "bound"]
SLOTS: tuple[Slot, ...] = ("repair", "restore", "enter", "compact", "bound")
"""The slots of a pipeline, in the order they run."""


class Bound(Protocol):
    """What fills the ``bound`` slot: the request's provider messages brought within a budget
    (:class:`toolkeep.window.RequestBudget`). ``state`` is what it carries from one request of
    a conversation to the next (``None``: a one-off run)."""

    def new_state(self) -> Any:
        """A fresh state for a conversation."""

    def __call__(
        self,
        fmt: Format,
        out: list[Any],
        final: History,
        stage: History,
        ctx: StepContext,
        state: Any,
        extras: Sequence[Any],
        inputs: Sequence[Any],
        stage_out: list[Any] | None = None,
        *,
        memo: Memo | None = None,
    ) -> list[Any]:
        """``out`` (the provider form of ``final``; ``stage``: the input of the last step)
        within the budget."""


@dataclass(frozen=True)
class Pipeline:
    """The steps a run goes through, in named slots (see the module docstring). Iterating it
    gives the steps of every slot but ``bound``, in order."""

    repair: tuple[Step, ...] = ()
    restore: tuple[Step, ...] = ()
    enter: tuple[Step, ...] = ()
    compact: tuple[Step, ...] = ()
    bound: Bound | None = None

    @classmethod
    def of(cls, steps: Pipeline | Iterable[Step]) -> Pipeline:
        """``steps`` as a pipeline: a pipeline as it is, a list of one's own run as given (as
        one slot, ``compact``)."""
        return steps if isinstance(steps, Pipeline) else cls(compact=tuple(steps))

    def with_slot(self, slot: Slot, *steps: Any) -> Pipeline:
        """A new pipeline with ``slot`` holding ``steps`` (``bound``: one, or none to empty it)."""
        if slot == "bound":
            if len(steps) > 1:
                raise ValueError("the bound slot holds one request budget")
            return replace(self, bound=steps[0] if steps else None)
        if slot == "repair":
            return replace(self, repair=steps)
        if slot == "restore":
            return replace(self, restore=steps)
        if slot == "enter":
            return replace(self, enter=steps)
        if slot == "compact":
            return replace(self, compact=steps)
        raise ValueError(f"unknown slot {slot!r} (slots: {', '.join(SLOTS)})")

    @property
    def steps(self) -> tuple[Step, ...]:
        """The steps of every slot but ``bound``, in the order they run."""
        return (*self.repair, *self.restore, *self.enter, *self.compact)

    @property
    def caps(self) -> ToolCaps | None:
        """The per-tool caps where results enter (the ``enter`` slot's), if the pipeline has them."""
        return next((s for s in self.enter if isinstance(s, ToolCaps)), None)

    @property
    def plans(self) -> bool:
        """True when its last step decides over the whole session (keeps a plan, which may
        decide with time: the cache-aware policy)."""
        steps = self.steps
        return bool(steps) and reuse_of(steps[-1]).plan is not None

    def __iter__(self) -> Iterator[Step]:
        return iter(self.steps)

    def __len__(self) -> int:
        return len(self.steps)
