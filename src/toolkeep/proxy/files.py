"""Recall that never dangles: every result that may be shortened names a file the agent can open.

An agent behind the proxy has no ``recall`` tool, so a ``<<ccr:KEY>>`` marker would name
something it cannot redeem. :class:`PersistOnEntry` saves every result long enough to be
shortened into the workspace's ``tool-results/`` when it enters the history (the file's name
depends only on the call id and the text, as the budget's does), and records the path on the
part without changing its text; every later form (cap, preview, truncation, summary) then
carries ``[full output saved to PATH]``, which the agent opens with its own read tool.
:func:`drop_markers` takes the markers out of what the proxy sends where a path stands beside
them.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..formats import Format, validate
from ..messages import History, Message, Part
from ..steps import Step, StepContext

__all__ = [
    "PersistOnEntry",
    "drop_markers",
    "keep_last_turn",
    "last_turn_start",
    "previous_end",
    "with_files",
]

_WAY_BACK = re.compile(r"(full output saved to [^\]\n]+\])(?: <<ccr:[0-9a-f]{16}>>)+")
"""A saved-file reference and the markers toolkeep's forms put right after it."""


class PersistOnEntry(Step):
    """Save each result over ``min_chars`` to the workspace and set its ``saved_path``.

    The message is not marked dirty: its text is what it was, so it goes out as it came."""

    block_local = True

    def __init__(self, min_chars: int) -> None:
        self.min_chars = min_chars

    def age_key(self, age: int, ctx: StepContext) -> Hashable:
        return ()

    def __call__(self, history: History, ctx: StepContext) -> History:
        out: History | None = None
        for i, m in enumerate(history):
            if m.role == "assistant":
                continue
            parts: list[Part] | None = None
            for j, p in enumerate(m.parts):
                if p.kind != "tool_result" or p.saved_path or len(p.full_text) <= self.min_chars:
                    continue
                path, _ = ctx.remembered("persist-on-entry", p, ctx.persist, p.call_id, p.full_text)
                if path is None:
                    continue  # the save error is in the report; the forms say so
                if parts is None:
                    parts = list(m.parts)
                parts[j] = replace(p, saved_path=path)
            if parts is not None:
                if out is None:
                    out = list(history)
                out[i] = Message(m.role, tuple(parts), m.raw, m.dirty, m.meta)
        return history if out is None else out


def with_files(steps: Sequence[Step], min_chars: int) -> list[Step]:
    """``steps`` with :class:`PersistOnEntry` after pairing repair and the originals' restore
    (the first two steps of every named policy)."""
    return [*steps[:2], PersistOnEntry(min_chars), *steps[2:]]


def drop_markers(prepared: Sequence[Any], original: Sequence[Any]) -> list[Any]:
    """``prepared`` with the ``<<ccr:KEY>>`` markers that follow a saved file's reference taken
    out (the file is the way back), in the messages toolkeep changed (those that are not the
    input's own objects); markers in the text the client sent stay. Pure: the same input gives
    the same output, so the prompt cache keeps hitting."""
    kept = {id(m) for m in original}
    return [m if id(m) in kept else _clean(m) for m in prepared]


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return _WAY_BACK.sub(r"\1", value) if "<<ccr:" in value else value
    if isinstance(value, Mapping):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


_CLIENT_ROLES = frozenset({"user", "system", "developer", "tool", "function"})


def _from_client(item: Any) -> bool:
    """True for a history item the client wrote (a user, system or tool message, a Responses
    ``*_output`` item), False for one the model wrote (an assistant message, a call, reasoning)."""
    if not isinstance(item, Mapping):
        return True
    role = item.get("role")
    if role is not None:
        return role in _CLIENT_ROLES
    kind = item.get("type")
    return isinstance(kind, str) and kind.endswith("_output")


def last_turn_start(history: Sequence[Any]) -> int:
    """Where the last turn of ``history`` (what the client sent after the model's last output)
    begins: ``len(history)`` when it ends in the model's output."""
    start = len(history)
    while start > 0 and _from_client(history[start - 1]):
        start -= 1
    return start


def previous_end(history: Sequence[Any]) -> int:
    """How many items of ``history`` the request before it sent: all but the last turn and the
    model's output before it (``0``: the model has not answered yet)."""
    end = last_turn_start(history)
    while end > 0 and not _from_client(history[end - 1]):
        end -= 1
    return end


def keep_last_turn(prepared: list[Any], original: Sequence[Any], format: str | Format) -> list[Any]:
    """``prepared`` with the last turn (what the client sent after the model's last output) as the
    client sent it, unless that breaks a pairing rule of ``format`` that ``prepared`` keeps; the
    model reads the newest results whole once, later requests carry their shortened forms."""
    start, tail = last_turn_start(original), last_turn_start(prepared)
    if start == len(original) or len(prepared) - tail != len(original) - start:
        return prepared  # nothing sent after the model, or pairing changed the turn: keep the repair
    if all(a is b for a, b in zip(prepared[tail:], original[start:], strict=True)):
        return prepared
    candidate = [*prepared[:tail], *original[start:]]
    return candidate if len(validate(candidate, format)) <= len(validate(prepared, format)) else prepared
