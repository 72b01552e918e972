"""What tells a conversation apart, in every process: the archive key of its first message,
without the keys its format's clients move from request to request.

A :class:`~toolkeep.Session` finds a conversation's state and names its workspace by it
(:func:`history_key`), and the proxy keys its table of conversations by it (with the route): a
caller that has computed it once hands it on (``Session.prepare(..., conversation=KEY)``)
instead of having it computed again.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .formats import FORMATS, Format, plain_view
from .shorten import archive_key

__all__ = ["conversation_key", "history_key"]

_MOVING_IN_ANY: frozenset[str] = frozenset().union(*(f.moving_keys for f in FORMATS.values()))
"""The keys some format's clients move: what a history in a format not yet known may hold."""


def conversation_key(first: Any, moving: frozenset[str] = frozenset()) -> str:
    """The key of the conversation whose first message is ``first`` (``None``: an empty one): the
    archive key of that message as JSON (SDK objects as the plain dicts they stand for; what JSON
    cannot write, by its fields or its type, never its address), without the keys in ``moving``
    (a format's :attr:`~toolkeep.formats.Format.moving_keys`: markers a client moves)."""
    try:
        plain = plain_view([first])[0] if first is not None else None
        if moving:
            plain = _without(plain, moving)
        text = json.dumps(plain, sort_keys=True, default=_stable, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):  # keys that do not sort, nesting too deep
        # its type, then: conversations found by it share a state and a workspace, which stays
        # correct, only less often found
        text = type(first).__qualname__
    return archive_key(text)


def history_key(history: Sequence[Any], format: str | Format = "auto") -> str:
    """The key of the conversation ``history`` begins, read in ``format`` (a format, its name, or
    ``"auto"``): :func:`conversation_key` of its first message without the keys that format's
    clients move (with ``"auto"``, or a name no format has, those of every format), as the proxy
    keys a conversation by its route's format."""
    if isinstance(format, Format):
        moving = format.moving_keys
    else:
        moving = FORMATS[format].moving_keys if format in FORMATS else _MOVING_IN_ANY
    return conversation_key(history[0] if history else None, moving)


def _stable(value: Any) -> Any:
    """A JSON stand-in for ``value`` that is the same in every process (``repr`` may hold an
    address)."""
    fields = getattr(value, "__dict__", None)
    return fields if isinstance(fields, dict) and fields else type(value).__qualname__


def _without(value: Any, moving: frozenset[str]) -> Any:
    """``value`` without the keys in ``moving``, at any depth; a list item left empty by that (a
    ``{"cachePoint": ...}`` block) goes too. A copy where anything changes: ``value`` is the
    caller's."""
    if isinstance(value, dict):
        return {k: _without(v, moving) for k, v in value.items() if k not in moving}
    if isinstance(value, list):
        kept = (_without(v, moving) for v in value if not (isinstance(v, dict) and v and v.keys() <= moving))
        return list(kept)
    return value
