"""The economy fold's state and the cheap measures it keeps: sizes and per-message fingerprints."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..messages import History, Message, TextPart, ToolCallPart, ToolResultPart
from .commands import Kind

__all__ = ["FoldState", "Item", "fingerprints", "grow_chars", "input_chars", "message_chars"]


@dataclass(slots=True)
class Item:
    """One thing the fold may shorten: a result, or the input of a call. Forms are computed once."""

    message: int
    part: int
    block: int
    obj: ToolResultPart | ToolCallPart
    kind: Kind | None = None
    """``None`` for a call's input."""
    failure: bool = False
    tier: int = 0
    superseded: bool = False
    forms: dict[int, Any] = field(default_factory=dict)
    sizes: dict[int, int] = field(default_factory=dict)


@dataclass(slots=True)
class FoldState:
    """The fold's state after the last assistant message it has decided."""

    prints: list[Any] = field(default_factory=list)
    boundaries: int = 0
    """Assistant messages folded (the request before each has been decided)."""
    registered: int = 0
    """Messages whose items are in ``items``."""
    items: list[Item] = field(default_factory=list)
    active: list[Item] = field(default_factory=list)
    reads: dict[str, Item] = field(default_factory=dict)
    message_chars: list[int] = field(default_factory=list)
    """Chars of each message as sent now (after the tier moves made so far)."""
    sent_total: int = 0
    """Chars of the last folded request as sent, and as recorded (unmanaged)."""
    recorded_total: int = 0
    spent: float = 0.0
    """Estimated cost of the requests folded so far as sent, and unmanaged (chars x price)."""
    unmanaged: float = 0.0


def input_chars(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, Mapping):
        return sum(len(str(k)) + input_chars(v) for k, v in value.items())
    if isinstance(value, list):
        return sum(input_chars(v) for v in value)
    return len(str(value))


def message_chars(m: Message) -> int:
    size = 20
    for p in m.parts:
        if isinstance(p, TextPart | ToolResultPart):
            size += len(p.text)
        elif isinstance(p, ToolCallPart):
            size += len(p.name) + input_chars(p.arguments)
    return size


def grow_chars(chars: list[int], history: History, boundary: int) -> None:
    while len(chars) < boundary:
        chars.append(message_chars(history[len(chars)]))


def fingerprints(history: History) -> list[Any]:
    """A cheap identity per message: role and, per part, its text's hash (cached on ``str``)."""
    out: list[Any] = []
    for m in history:
        parts: list[Any] = [m.role]
        for p in m.parts:
            if isinstance(p, ToolResultPart):
                parts.append((p.call_id, p.name, p.is_error, hash(p.full_text), len(p.text)))
            elif isinstance(p, TextPart):
                parts.append(hash(p.text))
            elif isinstance(p, ToolCallPart):
                parts.append((p.id, p.name, arguments_print(p.arguments)))
        out.append(tuple(parts))
    return out


def arguments_print(arguments: Any) -> Any:
    if isinstance(arguments, Mapping):
        return tuple((k, arguments_print(v)) for k, v in arguments.items())
    if isinstance(arguments, list):
        return tuple(arguments_print(v) for v in arguments)
    if isinstance(arguments, str):
        return hash(arguments)
    return repr(arguments)
