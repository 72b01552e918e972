"""A session's archive: the stores its originals go to, their pins, and the durable fallback.

One :class:`Archive` per :class:`~toolkeep.Session` (and per conversation the proxy holds): the
store the shortened results' markers name (:attr:`Archive.store`), what the model's ``recall``
calls are answered from (:attr:`Archive.recall_store`), and where the originals behind what the
caller's own history carries are kept (:attr:`Archive.holds`): when the store goes with the
session (an archive in a workspace removed on close), those are written to the per-user archive
too, and every lookup falls back to it. Everything written is pinned in the store while the
archive lives, so a capped store never evicts an original a marker it sent names
(:mod:`toolkeep.stores`); :meth:`Archive.close` lets go of the pins.
"""

from __future__ import annotations

import logging
import secrets
import uuid
import weakref
from typing import Any

from .closing import Closing
from .config import Config, ToolCap
from .exceptions import SessionClosedError
from .messages import ToolResultPart
from .report import Report
from .steps import SaveContext, ToolCaps
from .stores import ArchiveStore, open_store, store_for_config
from .stores.layered import LayeredStore
from .stores.pinned import PinnedWrites
from .userdirs import user_store_url
from .workspace import Workspace

__all__ = ["Archive"]

_log = logging.getLogger("toolkeep")


class Archive(Closing):
    """The stores of one session (see the module docstring).

    ``store`` is an :class:`ArchiveStore` (used as it is, left open), a store URL (opened, and
    closed with the archive), or ``None``: the config's ``store_url``, else the ``archive/``
    directory of ``workspace`` (the session's fixed workspace), else a private directory of its
    own, removed on :meth:`close` unless ``config.keep_tmpdir``.
    """

    def __init__(
        self, config: Config, *, workspace: Workspace | None = None, store: ArchiveStore | str | None = None
    ) -> None:
        self.config = config
        self._closed = False
        self._own_dir: Workspace | None = None
        self._owns_store = not (store is not None and not isinstance(store, str))
        if store is None:
            if workspace is None and not config.store_url:
                # the session's own archive, for all its conversations: a directory as private as
                # theirs, never named to the model (only keys are), removed on close as they are
                self._own_dir = Workspace.for_conversation(secrets.token_hex(8), keep=config.keep_tmpdir)
            home = workspace or self._own_dir
            # (with a store URL, the directory is not used)
            self.store: ArchiveStore = store_for_config(config, home.archive_dir if home else "")
        elif isinstance(store, str):
            self.store = open_store(store)
        else:
            self.store = store
        """Where the originals the markers name are archived."""
        # what the caller's own history carries must outlive the session: if the session's store
        # goes with it (an archive in a workspace removed on close), such originals are kept in
        # the per-user archive too, and every lookup falls back to it
        outlives = (
            store is not None
            or bool(config.store_url)
            or (workspace.keep if workspace is not None else config.keep_tmpdir)
        )
        self.outlives = outlives
        """Whether :attr:`store` outlives the session (a store given or configured, or a kept
        workspace's): then each conversation keeps its state there (:mod:`toolkeep.resume`)."""
        self.flushers: weakref.WeakSet[Any] = weakref.WeakSet()
        """What writes to the store before it closes (each conversation's kept state)."""
        self._durable: ArchiveStore | None = None
        self.holds: ArchiveStore = self.store
        """Where originals the caller's history carries are written (and read back)."""
        self.recall_store: ArchiveStore = self.store
        """Where the model's ``recall`` calls are answered from."""
        if not outlives and config.caller_store_url != "":
            self.holds = LayeredStore(self.store, self._durable_store, write_both=True)
            self.recall_store = LayeredStore(self.store, self._durable_store)
        # what this archive writes is pinned in the store while it lives, so that a capped store
        # never evicts an original a marker it sent names (stores/_base.py)
        owner = uuid.uuid4().hex
        self.writes = PinnedWrites(self.store, owner)
        """The store, written with pins: what a session's steps archive to."""
        self.holds_writes = PinnedWrites(self.holds, owner)
        """:attr:`holds`, written with pins: what ``Session.cap_result`` archives to."""
        self._durable_writes: PinnedWrites | None = None

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def check_open(self) -> None:
        """Raise :class:`SessionClosedError` once the archive is closed."""
        if self._closed:
            raise SessionClosedError(
                "this Session is closed (its workspace and store are released); make a new one"
            )

    def _durable_store(self) -> ArchiveStore:
        """The per-user archive (or ``caller_store_url``), opened on first use."""
        if self._durable is None:
            self.check_open()
            self._durable = open_store(self.config.caller_store_url or user_store_url())
            # its pins (in the file, shared) are released when the archive closes, like the rest
            self._durable_writes = PinnedWrites(self._durable, self.writes.owner)
        return self._durable

    def cap_result(
        self,
        call_id: str,
        tool_name: str | None,
        text: str,
        caps: ToolCaps | None,
        cap: int | ToolCap | None,
        workspace: Workspace,
    ) -> str:
        """A tool's output ``text`` cut to its cap (``cap``, else its tool's under ``caps``, else
        under the configured caps), its original archived in :attr:`holds` and saved in
        ``workspace`` first (:meth:`toolkeep.Session.cap_result`); the whole text when it is
        within the cap. The caller's history keeps the cut after the session: when the original
        cannot be archived where it outlives the session (the per-user archive is full or
        refused, and the workspace is removed on close), the text comes back whole (and a WARNING
        on the ``toolkeep`` logger says why), never cut with no way back."""
        c = self.config
        if caps is None:
            caps = ToolCaps(
                default=c.default_tool_cap, caps=c.tool_caps, head=c.cap_head_chars, tail=c.cap_tail_chars
            )
        setting = caps.setting_for(tool_name) if cap is None else ToolCap.of(cap, "cap")
        result = ToolResultPart(call_id, text, name=tool_name)
        report = Report()
        ctx = SaveContext(workspace, self.holds_writes, report)
        capped = caps.cut(result, ctx, setting)
        if capped is None:
            return text
        if capped.key is None and not workspace.keep:
            # the archive refused the original, and the file it was saved to goes when the
            # session closes: the caller's history would keep a cut that no way back outlives
            _log.warning(
                "toolkeep: result %r of %s kept whole (%d chars): its original could not be archived "
                "where it outlives the session (%s)",
                call_id, tool_name, len(text), "; ".join(report.save_errors) or "no store",
                extra={"id": call_id, "chars_before": len(text)},
            )  # fmt: skip
            return text
        return capped.text

    def close(self) -> None:
        """Release every pin, close the stores the archive opened, and remove its own directory
        unless kept. Safe to call more than once."""
        self._closed = True
        for flusher in list(self.flushers):
            flusher.flush()
        for writes in (self.writes, self.holds_writes, self._durable_writes):
            if writes is not None:
                writes.release_all()
        if self._owns_store:
            self.store.close()
        if self._durable is not None:
            self._durable.close()
        if self._own_dir is not None:
            self._own_dir.close()
