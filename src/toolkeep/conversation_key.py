"""What tells a conversation apart, in every process: the archive key of its first message.

A :class:`~toolkeep.Session` finds a conversation's state and names its workspace by it, and the
proxy keys its table of conversations by it (with the route): a caller that has computed it once
hands it on (``Session.prepare(..., conversation=KEY)``) instead of having it computed again.
"""

from __future__ import annotations

import json
from typing import Any

from .formats import plain_view
from .shorten import archive_key

__all__ = ["conversation_key"]


def conversation_key(first: Any) -> str:
    """The key of the conversation whose first message is ``first`` (``None``: an empty one): the
    archive key of that message as JSON (SDK objects as the plain dicts they stand for; what JSON
    cannot write, by its fields or its type, never its address)."""
    try:
        plain = plain_view([first])[0] if first is not None else None
        text = json.dumps(plain, sort_keys=True, default=_stable, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):  # keys that do not sort, nesting too deep
        # its type, then: conversations found by it share a state and a workspace, which stays
        # correct, only less often found
        text = type(first).__qualname__
    return archive_key(text)


def _stable(value: Any) -> Any:
    """A JSON stand-in for ``value`` that is the same in every process (``repr`` may hold an
    address)."""
    fields = getattr(value, "__dict__", None)
    return fields if isinstance(fields, dict) and fields else type(value).__qualname__
