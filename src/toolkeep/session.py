"""A session: configuration, workspace and archive store, and ``prepare`` over them."""

from __future__ import annotations

import os
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from .config import Config
from .formats import Format
from .pipeline import Prepared, build_steps, run_pipeline
from .stores import ArchiveStore, FileStore, open_store
from .workspace import Workspace

__all__ = ["Session"]


class Session:
    """One agent session's toolkeep state. Use it as a context manager::

        with toolkeep.Session() as session:
            messages, report = session.prepare(history)

    ``workspace`` is a :class:`Workspace`, a directory to use (kept afterwards), or ``None`` for
    a new private directory removed on :meth:`close` (unless ``keep_tmpdir`` is set).
    ``store`` is an :class:`ArchiveStore` or a store URL; by default originals are archived in
    the workspace.
    """

    def __init__(
        self,
        config: Config | None = None,
        *,
        workspace: Workspace | str | os.PathLike[str] | None = None,
        store: ArchiveStore | str | None = None,
    ) -> None:
        self.config = config if config is not None else Config.from_env()
        if isinstance(workspace, Workspace):
            self.workspace = workspace
        else:
            self.workspace = Workspace(workspace, keep=self.config.keep_tmpdir)
        self._owns_store = not (store is not None and not isinstance(store, str))
        if store is None:
            self.store: ArchiveStore = FileStore(self.workspace.archive_dir)
        elif isinstance(store, str):
            self.store = open_store(store)
        else:
            self.store = store
        self.steps = build_steps(self.config)

    def prepare(self, messages: Sequence[Any], format: str | Format = "auto") -> Prepared:
        """The history to send and a report; ``messages`` is never mutated.

        Unchanged messages are shared with the input (treat the output as read-only); changed
        ones are new objects.
        """
        return run_pipeline(
            messages,
            format=format,
            config=self.config,
            workspace=self.workspace,
            store=self.store,
            steps=self.steps,
        )

    def recall(self, key: str) -> str | None:
        """The original archived under ``key``, or ``None`` if the store does not have it."""
        return self.store.get(key)

    def close(self) -> None:
        """Close the store (if the session opened it) and remove the workspace unless kept."""
        if self._owns_store:
            self.store.close()
        self.workspace.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
