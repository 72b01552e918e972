"""What a step gets besides the history: the format, where to save, where to report."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TypeAlias

from ..config import Config
from ..exceptions import StoreError
from ..formats import Format
from ..messages import History, Message, ToolResultPart
from ..report import Report
from ..shorten import archive_key
from ..stores import ArchiveStore
from ..workspace import Workspace

__all__ = ["ResultSlot", "Step", "StepContext", "iter_results", "replace_results"]

log = logging.getLogger("toolkeep")


@dataclass
class StepContext:
    """Shared by the steps of one run. ``workspace`` and ``store`` may be absent (pure mode)."""

    format: Format
    config: Config = field(default_factory=Config)
    workspace: Workspace | None = None
    store: ArchiveStore | None = None
    report: Report = field(default_factory=Report)

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

    def lookup(self, key: str) -> str | None:
        """The archived original behind ``key``, if the store has it."""
        if self.store is None:
            return None
        try:
            return self.store.get(key)
        except (OSError, StoreError) as exc:
            log.warning("toolkeep: could not look up %s: %s", key, exc)
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
"""


@dataclass(frozen=True, slots=True)
class ResultSlot:
    """Where a result sits: message and part index, its block (turn) and its age."""

    message: int
    part: int
    block: int
    age: int
    result: ToolResultPart


def iter_results(history: History) -> Iterator[ResultSlot]:
    """Every result with its block number and age (assistant messages after its call's)."""
    assistants = sum(1 for m in history if m.role == "assistant")
    block = -1
    for i, m in enumerate(history):
        if m.role == "assistant":
            block += 1
        for j, p in enumerate(m.parts):
            if isinstance(p, ToolResultPart):
                yield ResultSlot(i, j, block, assistants - 1 - block, p)


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
