"""One conversation's toolkeep state, and the table of them a session keeps.

A :class:`Conversation` is what goes on from one request of a conversation to the next: the
engine's state (:class:`~toolkeep.engine.SessionState`), the markers its requests carried
(:mod:`toolkeep.markers`), its workspace and the timing of its requests. It prepares each
request over an :class:`~toolkeep.archive.Archive` with the steps it is given. It is not
thread-safe: its caller takes its requests one at a time (a :class:`~toolkeep.Session` under
its lock, the proxy under the conversation's).

:class:`Conversations` is a session's table of them, told apart by their first message
(:func:`toolkeep.conversation_key.conversation_key`), the least recently used going past
``kept``. The proxy holds its conversations itself, one :class:`Conversation` each.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import engine
from .archive import Archive
from .config import Config
from .conversation_key import conversation_key
from .engine import Resolved, SessionState, common_prefix
from .exceptions import ConfigError, FormatError, RequestTooLargeError
from .formats import Format, detect_format, get_format, has_objects, plain_view, resolve_format
from .markers import Recording, Tracker
from .pipeline import Prepared
from .pricing import CacheTimes, resolve_pricing
from .report import Report
from .requests import PreparedRequest, Request, read_request
from .resume import Resume
from .steps import Memo, Pipeline, Step, StepContext
from .workspace import Workspace, WorkspaceReader

__all__ = ["EMPTY_KEY", "MARKER_RECHECK_EVERY", "Conversation", "Conversations", "Readers", "check_timing"]

_log = logging.getLogger("toolkeep")

EMPTY_KEY = conversation_key(None)
"""The key of an empty conversation (the state and workspace before any request)."""

MARKER_RECHECK_EVERY = 32
"""How often a conversation checks every key its markers name anyway (see
:attr:`toolkeep.Session.marker_recheck_every`)."""


def _log_report(report: Report, messages: int) -> None:
    """What one ``prepare`` did, on the ``toolkeep`` logger: a DEBUG record per repair and per
    cut (``extra``: ``kind``, ``id``, ``index``, and for a cut ``chars_before``,
    ``chars_after``, ``key``), and an INFO summary when anything changed. A save that failed
    was logged as a WARNING where it failed."""
    if _log.isEnabledFor(logging.DEBUG):
        for r in report.repairs:
            _log.debug(
                "toolkeep: repair %s of %r at message %d",
                r.kind, r.id, r.index,
                extra={"kind": r.kind, "id": r.id, "index": r.index},
            )  # fmt: skip
        for c in report.cuts:
            _log.debug(
                "toolkeep: %s %r at message %d: %d -> %d chars",
                c.kind, c.id, c.index, c.chars_before, c.chars_after,
                extra={"kind": c.kind, "id": c.id, "index": c.index, "chars_before": c.chars_before,
                       "chars_after": c.chars_after, "key": c.key},
            )  # fmt: skip
    if report.changed and _log.isEnabledFor(logging.INFO):
        _log.info(
            "toolkeep: prepared %d %s messages: %d repairs; %d capped, %d persisted, %d truncated, "
            "%d summarized; tool results %d -> %d chars",
            messages, report.format, len(report.repairs), report.capped, report.persisted,
            report.truncated, report.summarized, report.chars_before, report.chars_after,
            extra={"repairs": len(report.repairs), "chars_before": report.chars_before,
                   "chars_after": report.chars_after},
        )  # fmt: skip


def seconds(reading: Any, what: str) -> float:
    """``reading`` checked as a number of seconds."""
    if not isinstance(reading, (int, float)) or isinstance(reading, bool) or not math.isfinite(reading):
        raise ConfigError(f"{what} gave {reading!r}, not seconds as a finite number")
    return float(reading)


def check_timing(now: float | None, cache: CacheTimes | None) -> tuple[float | None, CacheTimes | None]:
    """``now`` and ``cache`` as ``prepare`` takes them, checked (a :class:`ConfigError` says
    what is wrong)."""
    if now is not None:
        now = seconds(now, "now")
    if cache is not None:
        if not isinstance(cache, CacheTimes):
            raise ConfigError(f"cache must be a toolkeep.pricing.CacheTimes, got {type(cache).__name__}")
        if cache.last is not None:
            seconds(cache.last, "cache.last")
        expired = cache.expired
        if not isinstance(expired, (frozenset, set, list, tuple)) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in expired
        ):
            raise ConfigError("cache.expired must hold request numbers (ints >= 0)")
    return now, cache


class Conversation:
    """One conversation's state, workspace and timing (see the module docstring).

    ``workspace`` is the one to use; ``None``: the conversation's own under the user's cache dir
    (:meth:`Workspace.for_conversation` of ``key``), made on first use and removed by
    :meth:`close` unless ``config.keep_tmpdir``. ``steps`` is what :meth:`prepare` runs.
    ``clock`` is read for a request given no time of its own (default :func:`time.monotonic`).
    """

    def __init__(
        self,
        config: Config,
        archive: Archive,
        steps: Pipeline | Sequence[Step],
        *,
        key: str = EMPTY_KEY,
        workspace: Workspace | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.archive = archive
        self.clock = clock
        self.steps: Pipeline = Pipeline.of(steps)
        """What :meth:`prepare` runs."""
        self.key = key
        """The key of the conversation's first message."""
        self.state = SessionState()
        """What the conversation carries from one request to the next (:mod:`toolkeep.engine`)."""
        self.tracker = Tracker()
        """Its markers, and whether the store holds their originals (:mod:`toolkeep.markers`)."""
        # resume hook: kept beside a store that outlives the session, the state is read back by
        # a new process's first request of the conversation (toolkeep.resume)
        self.state.resume = Resume.of(archive, key, self.tracker)
        self.marker_recheck_every = MARKER_RECHECK_EVERY
        """See :attr:`toolkeep.Session.marker_recheck_every`."""
        self._fixed = workspace
        self._own: Workspace | None = None
        self._lock = threading.Lock()

    @property
    def workspace(self) -> Workspace:
        """The workspace given, else the conversation's own (made on first use)."""
        if self._fixed is not None:
            return self._fixed
        with self._lock:
            if self._own is None:
                self.archive.check_open()
                self._own = Workspace.for_conversation(self.key, keep=self.config.keep_tmpdir)
            return self._own

    @property
    def own_workspace(self) -> Workspace | None:
        """The conversation's own workspace if it made one (``None`` with one given)."""
        return self._own

    def prepare(
        self,
        messages: Sequence[Any],
        format: str | Format = "auto",
        *,
        extras: tuple[Any, ...] = (),
        now: float | None = None,
        cache: CacheTimes | None = None,
    ) -> Prepared:
        """:meth:`toolkeep.Session.prepare` of a list of messages of this conversation
        (``extras``: the tool definitions and system prompt sent beside it) at time ``now``
        (``None``: a reading of :attr:`clock`), ``cache`` as there."""
        now, cache = check_timing(now, cache)
        self.archive.check_open()
        return self._prepare(messages, format, extras, now, cache)

    def prepare_request(
        self,
        body: Mapping[str, Any],
        format: str | Format = "auto",
        *,
        now: float | None = None,
        cache: CacheTimes | None = None,
        request: Request | None = None,
    ) -> PreparedRequest:
        """:meth:`toolkeep.Session.prepare` of a request object of this conversation: its
        history unwrapped, prepared, put back; ``request`` is what
        :func:`toolkeep.requests.read_request` read of ``body``, for a caller that has it."""
        now, cache = check_timing(now, cache)
        if request is None:
            request = read_request(body)
        self.archive.check_open()
        if request.history is None:  # a plain string: nothing to pair, no policy ran (an empty report)
            return PreparedRequest(
                request.with_history(body[request.key]), Report(format=request.format_name(format))
            )
        messages, report = self._prepare(
            request.history, request.format(format), request.extras(), now, cache
        )
        return PreparedRequest(request.with_history(messages), report)

    def cache_times(self) -> CacheTimes:
        """What this conversation knows of the timing of its requests."""
        self.archive.check_open()
        return CacheTimes(self.state.last_time, frozenset(self.state.expiry.requests))

    def _prepare(
        self,
        messages: Sequence[Any],
        format: str | Format,
        extras: tuple[Any, ...],
        given: float | None,
        cache: CacheTimes | None,
    ) -> Prepared:
        if not isinstance(messages, (list, tuple)):
            raise FormatError(f"a history is a list of messages, got {type(messages).__name__}")
        now = seconds(self.clock(), "the session's clock") if given is None else given
        state = self.state
        if cache is not None:
            state.last_time, state.expiry.requests = cache.last, set(cache.expired)
        same = common_prefix(state.last, messages)
        # what a failed request read is forgotten: the next one is compared with nothing
        state.last = []
        try:
            fmt = self._format(messages, format, same)
            prepared = self._run(fmt, messages, extras, state, same, now, self.tracker)
        except RequestTooLargeError:
            state.last = list(messages)  # prepared, then refused whole: the next request goes on from it
            raise
        except BaseException:
            state.resolved = None
            raise
        state.last = list(messages)
        state.last_time = now
        _log_report(prepared.report, len(messages))
        return prepared

    def _run(
        self,
        fmt: Format,
        messages: Sequence[Any],
        extras: tuple[Any, ...],
        state: SessionState,
        same: int,
        now: float,
        tracker: Tracker,
    ) -> Prepared:
        """Prepare ``messages`` on ``state``; then make sure every marker the output names
        recalls (:mod:`toolkeep.markers`). When the store lost originals that the session no
        longer holds in memory, or refuses them again, the request is prepared afresh: every
        cut archives its original again from the request, or says it could not be saved."""
        writes = self.archive.writes
        for attempt in (0, 1):
            pricing = resolve_pricing(self.config.pricing, fmt)
            state.expiry.now = state.last_time is not None and now - state.last_time > pricing.ttl_seconds
            report = Report(format=fmt.name, policy=self.config.policy, pricing=pricing.name)
            recorded: dict[str, str] = {}
            ctx = StepContext(
                fmt, self.config, self.workspace, Recording(writes, recorded), report,
                expiry=state.expiry,
            )  # fmt: skip
            try:
                prepared = Prepared(
                    engine.run(fmt, messages, self.steps, ctx, state, same, extras=extras), report
                )
            finally:
                state.memo.end_run()
            if tracker.check(prepared.messages, recorded, writes, self.marker_recheck_every) or attempt:
                return prepared
            # from scratch: every cut archives its original again, or says it could not
            state.forget()
            state.memo = Memo()
            same = 0
        raise AssertionError("unreachable")  # pragma: no cover

    def _format(self, messages: Sequence[Any], format: str | Format, same: int) -> Format:
        """The format to use, looking only at what is new since the last request.

        Detection (``auto``) and the check for SDK objects read every message; a session reads
        each message once: while the first ``same`` messages are those it already read (the same
        objects), only the new ones are checked against the format already chosen.
        """
        cached = self.state.resolved
        if cached is not None and messages and same >= cached.scanned:
            new = messages[cached.scanned :]
            if (
                cached.request == format
                and (cached.objects or not has_objects(new))
                and (format != "auto" or not new or cached.base.detect(plain_view(new)) > 0)
            ):
                self.state.resolved = cached._replace(scanned=len(messages))
                return cached.format
        base = (
            resolve_format(messages, format)
            if isinstance(format, Format)
            else (detect_format(messages) if format == "auto" else get_format(format))
        )
        fmt = resolve_format(messages, base)
        objects = fmt is not base
        self.state.resolved = Resolved(format, base, fmt, len(messages), objects) if messages else None
        return fmt

    def close(self) -> None:
        """Remove the conversation's own workspace (unless kept; its ``path`` still says where it
        was); one given is left alone."""
        with self._lock:
            own = self._own
        if own is not None:
            own.close()


class Conversations:
    """A session's conversations, by the key of their first message: at most :attr:`kept`, the
    least recently used going first (its workspace with it: a later request of it starts afresh
    and makes its files again). ``workspace``: the one every conversation uses (else each has
    its own)."""

    def __init__(
        self,
        config: Config,
        archive: Archive,
        steps: Pipeline | Sequence[Step],
        *,
        workspace: Workspace | None = None,
        kept: int = 16,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.archive = archive
        self.steps: Pipeline = Pipeline.of(steps)
        """What each conversation runs (given to it whenever it is looked up)."""
        self.kept = kept
        self.workspace = workspace
        self.clock = clock
        """What each conversation reads the time from (given to it whenever it is looked up)."""
        self._table: OrderedDict[str, Conversation] = OrderedDict()
        self._lock = threading.Lock()
        self._first = self._new(EMPTY_KEY)
        """The conversation before any request (its workspace is the session's until then)."""
        self.current = self._first
        """The conversation of the last request."""

    def __len__(self) -> int:
        return len(self._table)

    def _new(self, key: str) -> Conversation:
        return Conversation(
            self.config, self.archive, self.steps, key=key, workspace=self.workspace, clock=self.clock
        )

    def find(self, messages: Sequence[Any], key: str | None = None) -> Conversation:
        """The conversation ``messages`` continues (found by its first message, whose key
        ``key`` is when the caller has it), made :attr:`current`; a new one when none is kept."""
        current = self.current
        if not (not messages or (current.state.last and current.state.last[0] is messages[0])):
            if key is None:
                key = conversation_key(messages[0])
            found = self._table.pop(key, None)
            if found is None:
                found = self._new(key)
                while len(self._table) >= self.kept:
                    _, gone = self._table.popitem(last=False)
                    gone.close()
            self._table[key] = found
            current = self.current = found
        current.steps, current.clock = self.steps, self.clock
        return current

    def workspaces(self) -> list[Workspace]:
        """Every workspace the conversations made (the current one's first)."""
        held = [self.current, self._first, *self._table.values()]
        made = (c.own_workspace for c in dict.fromkeys(held))
        return [w for w in made if w is not None]

    def close(self) -> None:
        """Remove every conversation's own workspace (unless kept)."""
        for conversation in dict.fromkeys([self._first, *self._table.values()]):
            conversation.close()


class Readers(WorkspaceReader):
    """``read_result`` over several conversations' workspaces: an absolute path is read in the
    one it lies in, a relative one in ``current``."""

    def __init__(self, current: Workspace, others: Sequence[Workspace]) -> None:
        super().__init__(current.path)
        self._roots = [w.path for w in others]

    def read_text(self, path: str | os.PathLike[str]) -> str:
        text = os.fspath(path)
        for root in self._roots:
            if isinstance(text, str) and text.startswith(f"{root}{os.sep}"):
                return WorkspaceReader(root).read_text(path)
        return super().read_text(path)
