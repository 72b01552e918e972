"""One piece of context-manager plumbing for everything toolkeep hands out that must be closed."""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["Closing"]


class Closing:
    """``with obj:`` calls ``obj.close()`` at the end; subclasses define :meth:`close`."""

    def close(self) -> None:
        """Release what the object holds. Safe to call more than once."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
