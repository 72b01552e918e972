"""Errors raised by toolkeep.

Every error toolkeep raises on purpose derives from :class:`ToolkeepError`::

    ToolkeepError
    ├── ConfigError          a setting or environment variable has an invalid value
    ├── FormatError          a history cannot be read in the requested or detected format
    │   └── DetectionError   ``format="auto"`` could not tell which format a history is in
    ├── WorkspaceError       the session directory cannot be made or used
    ├── StoreError           an archive store failed (backend errors chained with ``from``)
    │   ├── InvalidKeyError  an archive key is not 16 lowercase hex digits
    │   └── StoreNotFoundError  a store opened only to read is not there (nothing archived)
    ├── ReaderError          the workspace reader refused a path
    └── RequestTooLargeError  a request cannot be brought within ``max_request_tokens``

Where an error is about one place in a history it says which: ``index`` is the message index and
``field`` the key or path inside it.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "DetectionError",
    "FormatError",
    "InvalidKeyError",
    "ReaderError",
    "RequestTooLargeError",
    "SessionClosedError",
    "StoreError",
    "StoreNotFoundError",
    "ToolkeepError",
    "WorkspaceError",
]


class ToolkeepError(Exception):
    """Base class of every error toolkeep raises on purpose."""


class ConfigError(ToolkeepError, ValueError):
    """A configuration value (argument or environment variable) is invalid."""

    def __init__(self, message: str, *, variable: str | None = None) -> None:
        super().__init__(message)
        self.variable = variable


class FormatError(ToolkeepError, ValueError):
    """A history does not have the shape of its format."""

    MAX_CHARS = 1_000
    """A message quoting a huge bad value (a 1 MB role) keeps its head and tail only."""

    def __init__(self, message: str, *, index: int | None = None, field: str | None = None) -> None:
        if len(message) > self.MAX_CHARS:
            cut = len(message) - 800
            message = f"{message[:600]} [... {cut:,} chars ...] {message[-200:]}"
        where = ""
        if index is not None:
            where = f"message {index}"
            if field:
                where += f", field {field!r}"
            where += ": "
        super().__init__(where + message)
        self.index = index
        self.field = field


class DetectionError(FormatError):
    """The format of a history could not be detected."""


class WorkspaceError(ToolkeepError, OSError):
    """The session workspace could not be created or used."""


class StoreError(ToolkeepError):
    """An archive store operation failed."""


class InvalidKeyError(StoreError, ValueError):
    """An archive key is malformed (keys are 16 lowercase hexadecimal digits)."""


class StoreNotFoundError(StoreError):
    """A store opened with ``create=False`` (to read it) does not exist: its directory or
    database file is missing, so nothing was archived there."""


class SessionClosedError(ToolkeepError, RuntimeError):
    """Work was asked of a :class:`~toolkeep.Session` after :meth:`~toolkeep.Session.close`."""


class ReaderError(ToolkeepError):
    """The workspace reader refused a request (outside the workspace, not a file, ...)."""


class RequestTooLargeError(ToolkeepError, ValueError):
    """A prepared request cannot fit ``Config.max_request_tokens``, even with every old result
    and call input cut down to its marker and every old turn archived (:mod:`toolkeep.turns`):
    the parts never archived (the messages before the first assistant message, the last turn,
    the tool definitions and the system prompt, with the note of the archived turns) are larger
    on their own. Raised before anything is sent; nothing of the caller's is changed.

    ``tokens``: the request's tokens as the policy prepared it; ``floor``: the fewest it could be
    brought to; ``limit``: the budget."""

    def __init__(self, *, tokens: int, floor: int, limit: int, unit: str = "tokens") -> None:
        super().__init__(
            f"the request takes {tokens:,} {unit}; with every old turn archived, {floor:,}: over "
            f"max_request_tokens={limit:,}: the parts never archived (the first message, the last "
            "turn, the tool definitions and the system prompt, with the note of the archived "
            "turns) are over the budget on their own; raise the budget or start a new conversation"
        )
        self.tokens = tokens
        self.floor = floor
        self.limit = limit
