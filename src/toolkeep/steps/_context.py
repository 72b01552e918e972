"""What a step gets besides the history: the format, where to save, where to report."""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, TypeAlias, TypeVar

from ..config import Config
from ..exceptions import StoreError
from ..formats import Format
from ..messages import History, Message, ToolResultPart
from ..report import Report
from ..shorten import archive_key
from ..stores import ArchiveStore
from ..workspace import Workspace

__all__ = [
    "FORGETFUL",
    "MISSING",
    "Memo",
    "ResultSlot",
    "Step",
    "StepContext",
    "block_local",
    "iter_results",
    "replace_results",
]

log = logging.getLogger("toolkeep")

T = TypeVar("T")


class Memo:
    """Work a session already did, keyed by the identity of the objects it was done on.

    An agent sends a history that only grows, so almost every message, block and result of a
    request was seen in the previous one. Steps look their work up here instead of redoing it.
    Entries hold the objects they are keyed on, so an ``id`` is never reused while its entry
    lives. Two generations: what a run does not use is dropped at the end of the next run, so
    the memo holds about one history's worth of work.
    """

    __slots__ = ("_current", "_previous")

    def __init__(self) -> None:
        self._current: dict[Any, tuple[Any, Any]] = {}
        self._previous: dict[Any, tuple[Any, Any]] = {}

    def get(self, space: str, obj: Any, extra: Hashable = None) -> Any:
        """The value stored for ``(space, obj, extra)``, or :data:`MISSING`."""
        key = (space, id(obj), extra)
        entry = self._current.get(key)
        if entry is None:
            entry = self._previous.pop(key, None)
            if entry is None:
                return MISSING
            self._current[key] = entry
        return entry[1] if entry[0] is obj else MISSING

    def put(self, space: str, obj: Any, value: T, extra: Hashable = None) -> T:
        self._current[(space, id(obj), extra)] = (obj, value)
        return value

    def end_run(self) -> None:
        """Forget what this run did not use."""
        self._previous = self._current
        self._current = {}


class _Forgetful(Memo):
    """A memo that keeps nothing, for work no later run will look up (settled blocks)."""

    __slots__ = ()

    def get(self, space: str, obj: Any, extra: Hashable = None) -> Any:
        return MISSING

    def put(self, space: str, obj: Any, value: T, extra: Hashable = None) -> T:
        return value


FORGETFUL: Memo = _Forgetful()
"""The memo of a run whose work is not kept (its output is the same as with any memo)."""


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""What :meth:`Memo.get` returns for work not done yet."""


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


Step: TypeAlias = Callable[[History, StepContext], History]
"""A pipeline step: takes a history and the run's context, returns a new history.

A step never mutates its input: it builds new messages and parts where it changes something.
A step with a true ``block_local`` attribute reads nothing outside the history it is given but
``ctx.age_offset``, ``ctx.seen_ids`` and ``ctx.index_offset``, so a session may run it one block
at a time (see :mod:`toolkeep.incremental`); a step whose output depends on ages says how with an
``age_key(age, ctx)`` method.
"""

F = TypeVar("F", bound=Callable[..., Any])


def block_local(step: F) -> F:
    """Mark a step function as able to run one block at a time."""
    step.block_local = True  # type: ignore[attr-defined]
    return step


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
