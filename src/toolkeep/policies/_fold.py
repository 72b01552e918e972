"""The economy fold's state and the cheap measures it keeps: sizes and per-message fingerprints."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..messages import History, Message, TextPart, ToolCallPart, ToolResultPart
from .commands import Kind

__all__ = [
    "MESSAGE_OVERHEAD",
    "RESULT_OVERHEAD",
    "SLACK",
    "FoldState",
    "Item",
    "fingerprints",
    "grow_chars",
    "input_chars",
    "message_chars",
    "text_chars",
]


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


def text_chars(text: str) -> int:
    """Chars of ``text`` as a JSON string's contents (escapes counted, quotes not)."""
    return len(json.dumps(text, ensure_ascii=False)) - 2


def input_chars(value: Any) -> int:
    """Chars of a tool call's input as compact JSON."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str))


MESSAGE_OVERHEAD = 30
"""Chars of a message besides its parts (``{"role":"user","content":[...]}``)."""
PART_OVERHEAD = 26
"""Chars of a part besides its contents and ids (``{"type":"text","text":"..."}``)."""
RESULT_OVERHEAD = 54
"""Chars of a tool result part besides its text and call id."""
CALL_OVERHEAD = 46
"""Chars of a tool call part besides its id, name and input."""
SLACK = 50
"""Chars by which ``message_chars`` may miss a message as serialized (a result given as a list
of text blocks, an error flag): what a rewrite that must cost nothing keeps in reserve per
message it rewrites."""


def message_chars(m: Message) -> int:
    """Chars of ``m`` as sent, estimated as Anthropic's compact JSON, the shape the costs are
    paid in: every message and part carries keys and ids besides its text, which on the small
    messages of a typical turn are most of the size."""
    size = MESSAGE_OVERHEAD
    for p in m.parts:
        if isinstance(p, ToolResultPart):
            size += RESULT_OVERHEAD + len(p.call_id) + text_chars(p.text)
        elif isinstance(p, TextPart):
            size += PART_OVERHEAD + text_chars(p.text)
        elif isinstance(p, ToolCallPart):
            size += CALL_OVERHEAD + len(p.id) + len(p.name) + input_chars(p.arguments)
        else:
            size += input_chars(p.raw)
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
