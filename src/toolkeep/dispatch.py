"""Tools that declare their own result cap.

    >>> @result_cap(80_000)
    ... def read_file(path: str) -> str: ...
    >>> declared_cap(read_file)
    80000

A dispatcher passes ``declared_cap(tool)`` as ``cap=`` to :meth:`toolkeep.Session.cap_result`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from .config import MIN_TOOL_CAP
from .exceptions import ConfigError

__all__ = ["declared_cap", "result_cap"]

F = TypeVar("F", bound=Callable[..., Any])

_ATTRIBUTE = "toolkeep_result_cap"


def result_cap(chars: int) -> Callable[[F], F]:
    """Declare the most chars a tool's result may keep when it enters the history, its marker
    included (at least :data:`~toolkeep.config.MIN_TOOL_CAP`, which the marker needs)."""
    if not isinstance(chars, int) or isinstance(chars, bool) or chars < MIN_TOOL_CAP:
        raise ConfigError(
            f"result_cap takes a whole number of chars of at least {MIN_TOOL_CAP}, got {chars!r}"
        )

    def mark(tool: F) -> F:
        setattr(tool, _ATTRIBUTE, chars)
        return tool

    return mark


def declared_cap(tool: object) -> int | None:
    """The cap a tool declared with :func:`result_cap`, if any."""
    cap = getattr(tool, _ATTRIBUTE, None)
    return cap if isinstance(cap, int) else None
