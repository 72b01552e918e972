"""What a step gets besides the history: the format, where to save, where to report."""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, NamedTuple, Protocol, TypeVar

from ..config import Config
from ..exceptions import StoreError
from ..formats import Format
from ..messages import History, Message, ToolResultPart
from ..pricing import CacheExpiry
from ..report import Report
from ..shorten import archive_key
from ..stores import ArchiveStore
from ..workspace import Workspace
from .memo import MISSING, Memo

__all__ = [
    "FunctionStep",
    "Plan",
    "ResultSlot",
    "Step",
    "StepContext",
    "as_step",
    "block_local",
    "iter_results",
    "replace_results",
]

log = logging.getLogger("toolkeep")

T = TypeVar("T")


@dataclass
class StepContext:
    """Shared by the steps of one run. ``workspace`` and ``store`` may be absent (pure mode)."""

    format: Format
    config: Config = field(default_factory=Config)
    workspace: Workspace | None = None
    store: ArchiveStore | None = None
    report: Report = field(default_factory=Report)
    memo: Memo = field(default_factory=Memo)
    """Work earlier runs of the same session did; a fresh one for a one-off run."""
    age_offset: int = 0
    """Assistant messages after the history given to the steps (when it is one block of more)."""
    seen_ids: set[str] = field(default_factory=set)
    """Call ids of the blocks before this history, for formats that want ids unique."""
    index_offset: int = 0
    """Index of this history's first message in the whole request (for report entries)."""
    lookup_failures: int = 0
    """Store reads that failed in this run (a step does not remember work that depended on one)."""
    expiry: CacheExpiry | None = None
    """Which requests of the conversation found the provider's cache expired (a session's
    clock tells); ``None``: none did. The cache-aware policy reads it."""

    def archive(self, original: str) -> str | None:
        """Archive ``original``; its key, or ``None`` when there is no store or it failed."""
        if self.store is None:
            return None
        key = archive_key(original)
        try:
            self.store.put(key, original)
        except (OSError, StoreError) as exc:
            # never log the content itself: it may hold secrets
            log.warning("toolkeep: could not archive %s: %s", key, exc)
            self.report.save_errors.append(f"archive {key}: {type(exc).__name__}")
            return None
        return key

    def remembered(
        self, space: str, obj: Any, work: Callable[..., T], *args: Any, extra: Hashable = None
    ) -> T:
        """``work(*args)`` for ``obj``, done once per session: taken from the memo when it is
        there. Work during which a save failed (archive or persist) is not remembered, so the
        next run retries the save."""
        value = self.memo.get(space, obj, extra)
        if value is MISSING:
            failures = len(self.report.save_errors)
            value = work(*args)
            if len(self.report.save_errors) == failures:
                self.memo.put(space, obj, value, extra)
        return value  # type: ignore[no-any-return]

    def unarchived(self, key: str | None) -> bool:
        """True when an original should have been archived under ``key`` and was not (the
        store refused it): what was to be cut must then stay whole, never cut without a way
        back. A run without a store (pure mode) archives nothing and says so in its forms."""
        return key is None and self.store is not None

    def lookup(self, key: str) -> str | None:
        """The archived original behind ``key``, if the store has it."""
        if self.store is None:
            return None
        try:
            return self.store.get(key)
        except (OSError, StoreError) as exc:
            log.warning("toolkeep: could not look up %s: %s", key, exc)
            self.lookup_failures += 1
            return None

    def persist(self, call_id: str, text: str) -> tuple[str | None, str | None]:
        """Save ``text`` to the workspace: ``(path, None)``, or ``(None, reason)`` on failure."""
        if self.workspace is None:
            return None, "no session workspace"
        try:
            return str(self.workspace.persist(call_id, text)), None
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            log.warning("toolkeep: could not persist result %s: %s", call_id, reason)
            self.report.save_errors.append(f"persist {call_id}: {reason}")
            return None, reason


class Step:
    """A pipeline step: ``step(history, ctx)`` returns a new history and never mutates its input
    (it builds new messages and parts where it changes something).

    What the engine (:mod:`toolkeep.engine`) needs to know of a step is declared here, with the
    defaults of a step that must see the whole history:

    - ``block_local``: the step reads nothing outside the history it is given but
      ``ctx.age_offset``, ``ctx.seen_ids`` and ``ctx.index_offset``, so a session may run it one
      block (an assistant message and the messages up to the next one) at a time;
    - :meth:`age_key`: what of a block's age its output depends on (two ages with the same key
      give the same output), and :meth:`age_horizon`, the age from which the key is constant;
    - :meth:`keeps_turn`: whether an assistant message survives the step (ages count them);
    - :meth:`new_plan`: for a step whose output depends on the whole session so far (the
      cache-aware policy), the object that carries its decisions from one request to the next
      (:class:`Plan`); ``None`` for every other step.

    A plain function ``(history, ctx) -> history`` is a step too: :func:`as_step` wraps it (it
    then runs on whole histories only), and :func:`block_local` wraps one that qualifies.
    """

    block_local: ClassVar[bool] = False

    def __call__(self, history: History, ctx: StepContext) -> History:
        raise NotImplementedError

    def age_key(self, age: int, ctx: StepContext) -> Hashable:
        """What of an age decides this step's output (ages with equal keys give equal output)."""
        return ()

    def age_horizon(self, ctx: StepContext) -> int:
        """The age from which :meth:`age_key` no longer changes."""
        return 0

    def new_plan(self) -> Plan | None:
        """A fresh plan for a session, for steps that decide over the whole session."""
        return None

    def keeps_turn(self, message: Message, followed: bool, ctx: StepContext) -> bool:
        """Whether assistant ``message`` is still there after this step (``followed``: other
        messages of its block come after it). Ages count the assistant messages a run keeps, so
        the engine asks this of every step before it runs a block; a step that drops assistant
        messages (pairing repair) says which."""
        return True


class Plan(Protocol):
    """The decisions a whole-session step carries from one request to the next.

    The engine runs the steps before it block by block, keeps their output as one flat history
    (``flat``), then asks the plan to bring its decisions up to date and renders only the
    blocks whose decisions changed. The output equals the step's own ``__call__`` on the flat
    history of the same request."""

    def update(self, flat: History, changed: int, ctx: StepContext) -> set[int] | None:
        """Decide the request whose messages are ``flat``; ``flat[:changed]`` is what the last
        update saw, unchanged. Returns the indexes of the messages (of ``flat[:changed]``)
        whose rendering may differ from the last update's; ``None`` when any may."""

    def key(self, start: int, end: int) -> Hashable:
        """What the rendering of ``flat[start:end]`` depends on, as decided last."""

    def render(self, flat: History, start: int, end: int, ctx: StepContext) -> History:
        """``flat[start:end]`` as sent, after the last update (counts go to ``ctx.report``)."""


class FunctionStep(Step):
    """A step made of a plain function (see :func:`as_step` and :func:`block_local`)."""

    def __init__(self, function: Callable[[History, StepContext], History], *, local: bool) -> None:
        self.function = function
        self.block_local = local  # type: ignore[misc]
        self.__name__ = getattr(function, "__name__", type(function).__name__)
        self.__doc__ = function.__doc__
        self.__wrapped__ = function

    def __call__(self, history: History, ctx: StepContext) -> History:
        return self.function(history, ctx)

    def __repr__(self) -> str:
        return f"<step {self.__name__}>"


def block_local(function: Callable[[History, StepContext], History]) -> Step:
    """A step of a function that can run one block at a time (see :class:`Step`)."""
    return FunctionStep(function, local=True)


def as_step(step: Step | Callable[[History, StepContext], History]) -> Step:
    """``step`` itself, or a plain function wrapped as a step of whole histories."""
    return step if isinstance(step, Step) else FunctionStep(step, local=False)


class ResultSlot(NamedTuple):
    """Where a result sits: message and part index, its block (turn) and its age.

    A named tuple: one is made per result per step per run, and a tuple is the cheapest
    immutable record to build."""

    message: int
    part: int
    block: int
    age: int
    result: ToolResultPart


def iter_results(history: History, age_offset: int = 0) -> Iterator[ResultSlot]:
    """Every result with its block number and age (assistant messages after its call's).

    ``age_offset`` counts assistant messages that follow ``history`` (when it is a part)."""
    newest = age_offset - 1 + sum([m.role == "assistant" for m in history])
    block = -1
    for i, m in enumerate(history):
        if m.role == "assistant":
            block += 1
            continue
        for j, p in enumerate(m.parts):
            if p.kind == "tool_result":
                yield ResultSlot(i, j, block, newest - block, p)


def replace_results(
    history: History,
    updates: dict[tuple[int, int], ToolResultPart],
    memo: Memo | None = None,
) -> History:
    """A new history with the results at ``(message, part)`` replaced; others shared.

    With a ``memo``, the same message given the same new parts is the same object as last run,
    so that work keyed on it downstream (dumping) is found again.
    """
    if not updates:
        return history
    by_message: dict[int, dict[int, ToolResultPart]] = {}
    for (i, j), part in updates.items():
        by_message.setdefault(i, {})[j] = part
    out: list[Message] = list(history)
    for i, parts in by_message.items():
        m = history[i]
        new_parts = tuple(parts.get(j, p) for j, p in enumerate(m.parts))
        extra = tuple(map(id, new_parts))
        if memo is not None:
            cached = memo.get("rebuild", m, extra)
            if cached is not MISSING and cached.parts == new_parts:
                out[i] = cached
                continue
        rebuilt = replace(m, parts=new_parts, dirty=m.dirty or any(p.modified for p in parts.values()))
        out[i] = memo.put("rebuild", m, rebuilt, extra) if memo is not None else rebuilt
    return out
