"""What a step is, what it declares to the engine, and what it gets besides the history.

A step is any callable ``step(history, ctx) -> history`` on the neutral model that never mutates
its input. What the engine (:mod:`toolkeep.engine`) may reuse of its work is the step's
:class:`Reuse`, a declaration, not code: whether it can run one block at a time, the ages at
which its output changes, whether it may drop an assistant message, and, for a step that decides
over the whole session, the :class:`Plan` it keeps. The engine alone remembers work (around each
step, per block) and keeps the blocks; :class:`StepContext` carries what a step needs to decide:
the format, the config, where to save and report, and where the history it was given sits in
the request (the age of its results, the index of its messages, the call ids before it). Its
saving part alone is a :class:`SaveContext`: what cutting one result outside a run needs
(:meth:`toolkeep.Session.cap_result`), with no format.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field, replace
from typing import NamedTuple, Protocol

from ..config import Config
from ..exceptions import StoreError
from ..formats import Format
from ..messages import History, Message, ToolResultPart
from ..pricing import CacheExpiry
from ..report import Report
from ..shorten import archive_key
from ..stores import ArchiveStore
from ..workspace import Workspace

__all__ = [
    "WHOLE",
    "FunctionStep",
    "Place",
    "Plan",
    "ResultSlot",
    "Reuse",
    "SaveContext",
    "Step",
    "StepContext",
    "block_local",
    "iter_results",
    "replace_results",
    "reuse_of",
]

log = logging.getLogger("toolkeep")


class Place(NamedTuple):
    """Where the history a step is given sits in the request (the whole of it in a one-off run;
    one block, or a run of blocks, in a session)."""

    start: int
    """Index of its first message in the request (report entries give request indexes)."""
    turns_after: int
    """Assistant messages of the request after it (a result's age counts them)."""
    taken_ids: set[str]
    """Call ids the messages before it hold, for formats that want ids unique; a step that
    keeps calls (pairing repair) adds theirs."""


class SaveContext:
    """Where what is shortened is saved, and the report it is told in: the part of a
    :class:`StepContext` that reads no format. A plain ``SaveContext(workspace, store, report)``
    is enough to cut one result outside a run (:meth:`toolkeep.ToolCaps.cut`); a step gets the
    whole :class:`StepContext`. ``workspace`` and ``store`` may be absent (nothing is then
    persisted, or archived)."""

    workspace: Workspace | None
    store: ArchiveStore | None
    report: Report
    lookups_failed: int
    """Store reads that failed in this run: work that depended on one is not reused (the
    engine reads it; a step has no use for it)."""

    def __init__(
        self,
        workspace: Workspace | None = None,
        store: ArchiveStore | None = None,
        report: Report | None = None,
    ) -> None:
        self.workspace = workspace
        self.store = store
        self.report = Report() if report is None else report
        self.lookups_failed = 0

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
            self.lookups_failed += 1
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


@dataclass
class StepContext(SaveContext):
    """What the steps of one run get besides the history: the saving of a
    :class:`SaveContext`, and the format, the config, the cache's expiry and the place.
    ``workspace`` and ``store`` may be absent (pure mode); ``place`` says where the history sits
    in the request (the engine sets it; a one-off run's is the whole request)."""

    format: Format
    config: Config = field(default_factory=Config)
    workspace: Workspace | None = None
    store: ArchiveStore | None = None
    report: Report = field(default_factory=Report)
    expiry: CacheExpiry | None = None
    """Which requests of the conversation found the provider's cache expired (a session's
    clock tells); ``None``: none did. The cache-aware policy reads it."""
    place: Place = field(default_factory=lambda: Place(0, 0, set()))
    lookups_failed: int = field(default=0, repr=False)

    def results(self, history: History) -> Iterator[ResultSlot]:
        """Every result of ``history`` with its request-wide age (:func:`iter_results`)."""
        return iter_results(history, self.place.turns_after)

    def index(self, message: int) -> int:
        """The request index of ``history[message]`` (for report entries)."""
        return self.place.start + message

    def add_cut(self, kind: str, part: ToolResultPart, message: int, before: str, reason: str = "") -> None:
        """Report ``part`` (at ``history[message]``) shortened from ``before``."""
        self.report.add_cut(kind, part, self.place.start + message, before, reason)


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


@dataclass(frozen=True)
class Reuse:
    """What the engine may reuse of a step's work: the step's declaration (its ``reuse``
    attribute; a step without one is :data:`WHOLE`).

    A session keeps each block's output (an assistant message and the messages up to the next
    one) and the work of each step on it, and runs again only what changed: a block whose
    messages are the same objects, at the same place, whose results have not crossed one of
    the step's ``tiers``, gets the step's output of last time, report entries included."""

    block_local: bool = False
    """The step reads nothing outside the history it is given but ``ctx.place``, so a session
    may run it one block at a time (and reuse its work per block)."""
    tiers: tuple[int | str, ...] = ()
    """The ages at which the step's output for a result changes (a ``str`` names the
    :class:`~toolkeep.Config` field that holds such an age): two ages on the same side of every
    tier give the same output."""
    keeps_turn: Callable[[Message, Format], bool] | None = None
    """For a step that may drop an assistant message (pairing repair): whether one survives.
    Ages count the assistant messages a run keeps, so the engine asks before it runs a block."""
    plan: Callable[[], Plan] | None = None
    """For a step whose output depends on the whole session so far (the cache-aware policy): a
    fresh :class:`Plan` for a session. Only the last step of a pipeline may have one."""

    def ages(self, config: Config) -> tuple[int, ...]:
        """:attr:`tiers`, each a number of assistant messages."""
        return tuple(t if isinstance(t, int) else int(getattr(config, t)) for t in self.tiers)


WHOLE = Reuse()
"""The declaration of a step that must see the whole history (a plain function's)."""


class Step(Protocol):
    """A pipeline step: ``step(history, ctx)`` returns a new history and never mutates its input
    (it builds new messages and parts where it changes something). A step may declare what the
    engine may reuse of its work in a ``reuse`` attribute (:class:`Reuse`); a plain function is
    a step of whole histories, and :func:`block_local` makes one that can run per block."""

    def __call__(self, history: History, ctx: StepContext, /) -> History: ...


def reuse_of(step: Callable[..., object]) -> Reuse:
    """What ``step`` declares (:class:`Reuse`), or :data:`WHOLE`."""
    declared = getattr(step, "reuse", WHOLE)
    return declared if isinstance(declared, Reuse) else WHOLE


class FunctionStep:
    """A step made of a plain function with a declaration (see :func:`block_local`)."""

    def __init__(self, function: Callable[[History, StepContext], History], reuse: Reuse = WHOLE) -> None:
        self.function = function
        self.reuse = reuse
        self.__name__ = getattr(function, "__name__", type(function).__name__)
        self.__doc__ = function.__doc__
        self.__wrapped__ = function

    def __call__(self, history: History, ctx: StepContext) -> History:
        return self.function(history, ctx)

    def __repr__(self) -> str:
        return f"<step {self.__name__}>"


def block_local(function: Callable[[History, StepContext], History]) -> FunctionStep:
    """A step of a function that can run one block at a time (see :class:`Reuse`)."""
    return FunctionStep(function, Reuse(block_local=True))


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


def replace_results(history: History, updates: dict[tuple[int, int], ToolResultPart]) -> History:
    """A new history with the results at ``(message, part)`` replaced; others shared."""
    if not updates:
        return history
    by_message: dict[int, dict[int, ToolResultPart]] = {}
    for (i, j), part in updates.items():
        by_message.setdefault(i, {})[j] = part
    out: list[Message] = list(history)
    for i, parts in by_message.items():
        m = history[i]
        new_parts = tuple(parts.get(j, p) for j, p in enumerate(m.parts))
        out[i] = replace(m, parts=new_parts, dirty=m.dirty or any(p.modified for p in parts.values()))
    return out
