"""One conversation's toolkeep state, and the table of them a session keeps.

A :class:`Conversation` is what goes on from one request of a conversation to the next: the
engine's state (:class:`~toolkeep.engine.SessionState`), the markers its requests carried
(:mod:`toolkeep.markers`), its workspace and the timing of its requests. It prepares each
request over an :class:`~toolkeep.archive.Archive` with the steps it is given. It is not
thread-safe: its caller takes its requests one at a time (a :class:`~toolkeep.Session` under
its lock, the proxy under the conversation's).

:class:`Conversations` is a session's table of them, told apart by their first message
(:func:`toolkeep.conversation_key.conversation_key`), the least recently used going past
``kept``: an integration object that serves several conversations at once prepares each
incrementally (conversations that begin with the same message share one state: still correct,
but more work redone). The proxy holds its conversations itself, one :class:`Conversation` each.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

from . import engine
from .archive import Archive
from .config import Config
from .conversation_key import conversation_key
from .engine import SessionState, common_prefix, settle_format
from .exceptions import ConfigError, RequestTooLargeError
from .formats import Format
from .markers import Recording, Tracker
from .pricing import CacheTimes, resolve_pricing
from .report import Prepared, Report
from .requests import Incoming, PreparedRequest, Request, read_input
from .resume import Resume
from .steps import Memo, Pipeline, Step, StepContext
from .workspace import Workspace, WorkspaceReader

__all__ = ["EMPTY_KEY", "MARKER_RECHECK_EVERY", "Conversation", "Conversations", "Readers", "check_timing"]

EMPTY_KEY = conversation_key(None)
"""The key of an empty conversation (the state and workspace before any request)."""

MARKER_RECHECK_EVERY = 32
"""How often a conversation checks every key its markers name anyway (see
:attr:`toolkeep.Session.marker_recheck_every`)."""


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
        """The workspace given, else the conversation's own under the user's cache dir
        (:meth:`Workspace.for_conversation`, named from its first message, so that its previews
        are the same in every process), made on first use."""
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
        (``extras``: the tool definitions and system prompt sent beside it)."""
        now, cache = check_timing(now, cache)
        incoming = replace(read_input(messages, format, key=self.key), extras=tuple(extras))
        # (what a list of messages is answered with)
        return cast(Prepared, self.prepare_incoming(incoming, now, cache))

    def prepare_request(
        self,
        body: Mapping[str, Any],
        format: str | Format = "auto",
        *,
        now: float | None = None,
        cache: CacheTimes | None = None,
        request: Request | None = None,
    ) -> PreparedRequest:
        """:meth:`toolkeep.Session.prepare` of a request object of this conversation (the proxy's
        way in): its history unwrapped, prepared, put back; ``request`` is what
        :func:`toolkeep.requests.read_request` read of ``body``, for a caller that has it."""
        now, cache = check_timing(now, cache)
        incoming = read_input(body, format, request=request, key=self.key)
        # (what a request object is answered with)
        return cast(PreparedRequest, self.prepare_incoming(incoming, now, cache))

    def prepare_incoming(
        self, incoming: Incoming, given: float | None = None, cache: CacheTimes | None = None
    ) -> Prepared | PreparedRequest:
        """:meth:`toolkeep.Session.prepare` of what ``incoming`` holds
        (:func:`~toolkeep.requests.read_input`), in this conversation, at time ``given``
        (``None``: a reading of :attr:`clock`), ``cache`` as there; both as :func:`check_timing`
        gives them back (the callers check them first)."""
        self.archive.check_open()
        if incoming.history is not None:
            now = seconds(self.clock(), "the session's clock") if given is None else given
            if cache is not None:
                self.state.last_time, self.state.expiry.requests = cache.last, set(cache.expired)
            return self._run(incoming, incoming.history, now)
        return incoming.unchanged()  # a plain string: nothing to pair, no policy ran (an empty report)

    def cache_times(self) -> CacheTimes:
        """What this conversation knows of the timing of its requests."""
        self.archive.check_open()
        return CacheTimes(self.state.last_time, frozenset(self.state.expiry.requests))

    def _run(self, incoming: Incoming, messages: Sequence[Any], now: float) -> Prepared | PreparedRequest:
        """Prepare ``incoming``'s history, ``messages``, on the conversation's state; then make
        sure every marker the output names recalls (:mod:`toolkeep.markers`). When the store lost
        originals that the session no longer holds in memory, or refuses them again, the request
        is prepared afresh: every cut archives its original again from the request, or says it
        could not be saved.

        Everything here goes down, once each: the engine settles the format and runs the steps,
        the answer takes the shape of what came in, and the report is logged."""
        state, writes = self.state, self.archive.writes
        same = common_prefix(state.last, messages)
        # what a failed request read is forgotten: the next one is compared with nothing
        state.last = []
        try:
            fmt = settle_format(state, messages, incoming.format, same)
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
                    out = engine.run(fmt, messages, self.steps, ctx, state, same, extras=incoming.extras)
                finally:
                    state.memo.end_run()
                if self.tracker.check(out, recorded, writes, self.marker_recheck_every) or attempt:
                    break
                # from scratch: every cut archives its original again, or says it could not
                state.forget()
                state.memo = Memo()
                same = 0
        except RequestTooLargeError:
            state.last = list(messages)  # prepared, then refused whole: the next request goes on from it
            raise
        except BaseException:
            state.resolved = None
            raise
        state.last = list(messages)
        state.last_time = now
        answer = incoming.answer(out, report)
        report.log(len(messages))
        return answer

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
    its own).

    ``clock`` (a callable returning seconds, default :func:`time.monotonic`) is read once per
    request: when more time than the price list's TTL (:mod:`toolkeep.pricing`) has passed since
    the conversation's last request, the provider's cache has expired, rewriting the history
    costs nothing extra, and the cache-aware policy makes every tier move that is due in that
    request. Only differences between readings matter; the same histories prepared at the same
    readings give the same bytes (inject a clock to make that so in tests and replays)."""

    def __init__(
        self,
        config: Config,
        archive: Archive,
        steps: Pipeline | Sequence[Step],
        *,
        workspace: Workspace | None = None,
        kept: int = 16,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.config = config
        self.archive = archive
        self.steps: Pipeline = Pipeline.of(steps)
        """What each conversation runs (given to it whenever it is looked up)."""
        self.kept = kept
        self.workspace = workspace
        self.clock: Callable[[], float] = clock if clock is not None else time.monotonic
        """What each conversation reads the time from (given to it whenever it is looked up)."""
        self.marker_recheck_every = MARKER_RECHECK_EVERY
        """Before each request goes out, its conversation makes sure the store holds every
        original a marker in it names (:mod:`toolkeep.markers`): one epoch read per request, and
        a batched check of the keys not yet seen under it. Every this many requests of a
        conversation, every key is checked anyway (for a single entry lost with no change of
        epoch); ``0``: never. Given to each conversation whenever it is looked up."""
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

    def prepare_input(
        self,
        given: Sequence[Any] | Mapping[str, Any],
        format: str | Format = "auto",
        *,
        tools: Any = None,
        system: Any = None,
        now: float | None = None,
        cache: CacheTimes | None = None,
        key: str | None = None,
        request: Request | None = None,
    ) -> Prepared | PreparedRequest:
        """:meth:`toolkeep.Session.prepare` (its arguments, ``key`` its ``conversation``): what
        it is given read once, and prepared in the conversation it continues."""
        now, cache = check_timing(now, cache)
        incoming = read_input(
            given, format, tools=tools, system=system, request=request, key=key,
            continuing=self.current.state.last,
        )  # fmt: skip
        return self._at(incoming.key).prepare_incoming(incoming, now, cache)

    def find(self, messages: Sequence[Any], key: str | None = None) -> Conversation:
        """The conversation ``messages`` continues (found by its first message, whose key
        ``key`` is when the caller has it), made :attr:`current`; a new one when none is kept."""
        return self._at(read_input(messages, key=key, continuing=self.current.state.last).key)

    def _at(self, key: str | None) -> Conversation:
        """The conversation keyed ``key`` (``None``: the current one), made :attr:`current`; a
        new one when none is kept."""
        current = self.current
        if key is not None:
            found = self._table.pop(key, None)
            if found is None:
                found = self._new(key)
                while len(self._table) >= self.kept:
                    _, gone = self._table.popitem(last=False)
                    gone.close()
            self._table[key] = found
            current = self.current = found
        current.steps, current.clock = self.steps, self.clock
        current.marker_recheck_every = self.marker_recheck_every
        return current

    def workspaces(self) -> list[Workspace]:
        """Every workspace the conversations made (the current one's first)."""
        held = [self.current, self._first, *self._table.values()]
        made = (c.own_workspace for c in dict.fromkeys(held))
        return [w for w in made if w is not None]

    def reader(self) -> Workspace | WorkspaceReader:
        """What the model's ``read_result`` calls read: the current conversation's workspace, and
        when the conversations have workspaces of their own, every one they made."""
        current = self.current.workspace
        made = self.workspaces()
        return Readers(current, made) if self.workspace is None and len(made) > 1 else current

    def close(self) -> None:
        """Remove every conversation's own workspace, and the one given (unless kept: its
        ``path`` still says where it was)."""
        for conversation in dict.fromkeys([self._first, *self._table.values()]):
            conversation.close()
        if self.workspace is not None:
            self.workspace.close()


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
