"""The engine's memory of work already done in a session, keyed by object identity.

An agent sends a history that only grows, so almost every message, block and result of a
request was seen in the previous one. The engine (:mod:`toolkeep.engine`) keeps one
:class:`Memo` per conversation and remembers each step's work on a block around the step (steps
never see it); :func:`dumped` is the provider form of a history, each rebuilt message dumped
once.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, TypeVar

from ..formats import Format
from ..messages import History

__all__ = ["FORGETFUL", "MISSING", "Memo", "dumped"]

_T = TypeVar("_T")


class Memo:
    """Work a session already did, keyed by the identity of the objects it was done on.

    An agent sends a history that only grows, so almost every message, block and result of a
    request was seen in the previous one. The engine looks work up here instead of redoing it.
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

    def put(self, space: str, obj: Any, value: _T, extra: Hashable = None) -> _T:
        self._current[(space, id(obj), extra)] = (obj, value)
        return value

    def end_run(self) -> None:
        """Forget what this run did not use."""
        self._previous = self._current
        self._current = {}


def dumped(fmt: Format, history: History, memo: Memo) -> list[Any]:
    """The provider form of ``history``: untouched messages as they came, rebuilt ones dumped
    once per session (kept in ``memo``); a format loaded whole is dumped whole."""
    if not fmt.rules.per_message:
        return fmt.dump(history)
    out = []
    for m in history:
        if not m.dirty:
            out.append(m.raw)
            continue
        cached = memo.get("dump", m)
        out.append(memo.put("dump", m, fmt.dump_message(m)) if cached is MISSING else cached)
    return out


class _Forgetful(Memo):
    """A memo that keeps nothing, for work no later run will look up (settled blocks)."""

    __slots__ = ()

    def get(self, space: str, obj: Any, extra: Hashable = None) -> Any:
        return MISSING

    def put(self, space: str, obj: Any, value: _T, extra: Hashable = None) -> _T:
        return value


FORGETFUL: Memo = _Forgetful()
"""The memo of a run whose work is not kept (its output is the same as with any memo)."""


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""What :meth:`Memo.get` returns for work not done yet."""
