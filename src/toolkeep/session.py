"""A session: configuration, workspace and archive store, and ``prepare`` over them."""

from __future__ import annotations

import logging
import math
import os
import secrets
import threading
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, overload

from . import engine
from .closing import Closing
from .config import Config, ToolCap
from .conversation_key import conversation_key
from .engine import Resolved, SessionState, common_prefix
from .exceptions import ConfigError, FormatError, RequestTooLargeError, SessionClosedError
from .formats import Format, detect_format, get_format, has_objects, plain_view, resolve_format
from .markers import Recording, Tracker
from .messages import ToolResultPart
from .pipeline import Prepared
from .policies import build_steps
from .pricing import CacheTimes, resolve_pricing
from .recall import handle_tool_call, tool_definitions
from .report import Report
from .requests import PreparedRequest, Request, read_request
from .steps import Memo, Step, StepContext, ToolCaps
from .stores import ArchiveStore, open_store, store_for_config
from .stores.layered import LayeredStore
from .stores.pinned import PinnedWrites
from .userdirs import user_store_url
from .workspace import Workspace, WorkspaceReader

__all__ = ["Session"]


_log = logging.getLogger("toolkeep")


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


def _seconds(reading: Any, what: str) -> float:
    """``reading`` checked as a number of seconds."""
    if not isinstance(reading, (int, float)) or isinstance(reading, bool) or not math.isfinite(reading):
        raise ConfigError(f"{what} gave {reading!r}, not seconds as a finite number")
    return float(reading)


_EMPTY_KEY = conversation_key(None)
"""The key of an empty conversation (the state and workspace before any request)."""


class _Readers(WorkspaceReader):
    """``read_result`` over every conversation workspace a session holds: an absolute path is read
    in the one it lies in, a relative one in the current conversation's."""

    def __init__(self, current: Workspace, others: Sequence[Workspace]) -> None:
        super().__init__(current.path)
        self._roots = [w.path for w in others]

    def read_text(self, path: str | os.PathLike[str]) -> str:
        text = os.fspath(path)
        for root in self._roots:
            if isinstance(text, str) and text.startswith(f"{root}{os.sep}"):
                return WorkspaceReader(root).read_text(path)
        return super().read_text(path)


class Session(Closing):
    """One agent session's toolkeep state. Use it as a context manager::

        with toolkeep.Session() as session:
            messages, report = session.prepare(history)

    ``workspace`` is a :class:`Workspace`, a directory to use (kept afterwards), or ``None`` for
    a new private directory removed on :meth:`close` (unless ``keep_tmpdir`` is set).
    ``store`` is an :class:`ArchiveStore` or a store URL; by default originals are archived in
    the workspace.

    ``clock`` (a callable returning seconds, default :func:`time.monotonic`) is read once per
    ``prepare``: when more time than the price list's TTL (:mod:`toolkeep.pricing`) has passed
    since the conversation's last request, the provider's cache has expired, rewriting the
    history costs nothing extra, and the cache-aware policy makes every tier move that is due in
    that request. Only differences between readings matter; the same histories prepared at the
    same readings give the same bytes (inject a clock to make that so in tests and replays).

    ``steps`` are the steps :meth:`prepare` runs instead of the configured policy's
    (:func:`toolkeep.policies.build_steps`): that list with a step of the caller's inserted,
    say (the proxy's file saving, :mod:`toolkeep.proxy.files`).

    Without ``config``, the settings come from the environment (:meth:`Config.from_env`), unless
    ``trust_env=False``: then from the defaults alone (as httpx's ``trust_env``).
    """

    conversations_kept = 16
    """How many conversations' state a session keeps (see :meth:`prepare`)."""

    marker_recheck_every = 32
    """Before each request goes out, the session makes sure the store holds every original a
    marker in it names (:mod:`toolkeep.markers`): one epoch read per request, and a batched
    check of the keys not yet seen under it. Every this many requests of a conversation, every
    key is checked anyway (for a single entry lost with no change of epoch); ``0``: never."""

    def __init__(
        self,
        config: Config | None = None,
        *,
        workspace: Workspace | str | os.PathLike[str] | None = None,
        store: ArchiveStore | str | None = None,
        clock: Callable[[], float] | None = None,
        steps: Sequence[Step] | None = None,
        trust_env: bool = True,
    ) -> None:
        if clock is not None and not callable(clock):
            raise ConfigError(f"clock must be a callable returning seconds, got {type(clock).__name__}")
        self.clock: Callable[[], float] = clock if clock is not None else time.monotonic
        """What :meth:`prepare` reads the time from (seconds)."""
        self.config = Config.resolve(config, trust_env=trust_env)
        self._fixed: Workspace | None = None
        """The workspace given (or made from the path given), for every conversation."""
        if isinstance(workspace, Workspace):
            self._fixed = workspace
        elif workspace is not None:
            self._fixed = Workspace(workspace, keep=self.config.keep_tmpdir)
        self._workspaces: OrderedDict[str, Workspace] = OrderedDict()
        """Without one given, each conversation's own (:meth:`Workspace.for_conversation`)."""
        self._key = _EMPTY_KEY
        self._workspace_lock = threading.Lock()
        self._archive: Workspace | None = None
        self._owns_store = not (store is not None and not isinstance(store, str))
        if store is None:
            if self._fixed is None and not self.config.store_url:
                # the session's own archive, for all its conversations: a directory as private as
                # theirs, never named to the model (only keys are), removed on close as they are
                self._archive = Workspace.for_conversation(secrets.token_hex(8), keep=self.config.keep_tmpdir)
            home = self._fixed or self._archive
            # (with a store URL, the directory is not used)
            self.store: ArchiveStore = store_for_config(self.config, home.archive_dir if home else "")
        elif isinstance(store, str):
            self.store = open_store(store)
        else:
            self.store = store
        # what the caller's own history carries must outlive the session: if the session's store
        # goes with it (an archive in a workspace removed on close), such originals are kept in
        # the per-user archive too, and every lookup falls back to it
        outlives = (
            store is not None
            or bool(self.config.store_url)
            or (self._fixed.keep if self._fixed is not None else self.config.keep_tmpdir)
        )
        self._durable: ArchiveStore | None = None
        self._holds = self.store
        """Where originals the caller's history carries are written (and read back)."""
        self.recall_store: ArchiveStore = self.store
        """Where the model's ``recall`` calls are answered from."""
        if not outlives and self.config.caller_store_url != "":
            self._holds = LayeredStore(self.store, self._durable_store, write_both=True)
            self.recall_store = LayeredStore(self.store, self._durable_store)
        # what this session archives is pinned in the store while the session lives, so that a
        # capped store never evicts an original a marker it sent names (stores/_base.py)
        owner = uuid.uuid4().hex
        self._writes = PinnedWrites(self.store, owner)
        self._holds_writes = PinnedWrites(self._holds, owner)
        self._durable_writes: PinnedWrites | None = None
        self.steps: list[Step] = list(steps) if steps is not None else build_steps(self.config)
        """What :meth:`prepare` runs: ``steps`` given, else the configured policy's."""
        self.state = SessionState()
        """What the session carries from one request to the next (:mod:`toolkeep.engine`), for
        the conversation of the last request."""
        self._states: OrderedDict[str, SessionState] = OrderedDict()
        self._trackers: weakref.WeakKeyDictionary[SessionState, Tracker] = weakref.WeakKeyDictionary()
        """Per conversation: its markers, and whether the store holds their originals
        (:mod:`toolkeep.markers`)."""
        self._lock = threading.Lock()
        self._closed = False

    @property
    def workspace(self) -> Workspace:
        """The workspace of the conversation of the last request: the one given, else that
        conversation's own under the user's cache dir (:meth:`Workspace.for_conversation`, named
        from its first message, so that its previews are the same in every process); made on
        first use. Before any request, the workspace of an empty conversation."""
        if self._fixed is not None:
            return self._fixed
        return self._workspace_for(self._key)

    def _workspace_for(self, key: str) -> Workspace:
        with self._workspace_lock:
            found = self._workspaces.get(key)
            if found is None:
                self._check_open()
                found = Workspace.for_conversation(key, keep=self.config.keep_tmpdir)
                self._workspaces[key] = found
            return found

    @overload
    def prepare(
        self,
        messages: Sequence[Any],
        format: str | Format = "auto",
        *,
        tools: Any = None,
        system: Any = None,
        now: float | None = None,
        cache: CacheTimes | None = None,
        conversation: str | None = None,
    ) -> Prepared: ...

    @overload
    def prepare(
        self,
        messages: Mapping[str, Any],
        format: str | Format = "auto",
        *,
        now: float | None = None,
        cache: CacheTimes | None = None,
        conversation: str | None = None,
        request: Request | None = None,
    ) -> PreparedRequest: ...

    def prepare(
        self,
        messages: Sequence[Any] | Mapping[str, Any],
        format: str | Format = "auto",
        *,
        tools: Any = None,
        system: Any = None,
        now: float | None = None,
        cache: CacheTimes | None = None,
        conversation: str | None = None,
        request: Request | None = None,
    ) -> Prepared | PreparedRequest:
        """The history to send and a report; ``messages`` is never mutated.

        Unchanged messages are shared with the input (treat the output as read-only); changed
        ones are new objects.

        A mapping is a request object (:mod:`toolkeep.requests`): ``{"messages": [...], ...}``,
        ``{"input": [...], ...}`` or ``{"contents": [...], ...}``. Its history is prepared as
        above, read in the format its key implies (``format="auto"``), and it comes back as a new
        request object of the same shape, every other field the very value it was.

        Safe to call from several threads: calls are taken one at a time, and each gets the
        output a session of its own would give. A session keeps the state of up to
        :attr:`conversations_kept` conversations, told apart by their first message, so an
        integration object that serves several conversations at once prepares each
        incrementally (conversations that begin with the same message share one state, which
        stays correct but redoes more work).

        With ``Config.max_request_tokens`` the request comes back within that many tokens
        (:mod:`toolkeep.window`), or :class:`~toolkeep.exceptions.RequestTooLargeError` is raised.
        ``tools`` and ``system`` are the tool definitions and system prompt sent beside a list of
        messages, counted towards it (as they are sent: any JSON value); a request object
        carries its own (``tools``, ``system``, ``instructions``, ``systemInstruction``, ...).

        ``now`` is the time of this request, in the clock's seconds, instead of a reading of
        :attr:`clock`; ``cache`` is what to know of the conversation's earlier requests instead
        of what this session remembers (:meth:`cache_times`): together they let a caller that
        keeps a conversation's timing elsewhere, as the proxy's replicas do, get the bytes a
        session that had seen every request would give.

        ``conversation`` is the key of the conversation (:func:`toolkeep.conversation_key.conversation_key`
        of the first message) and ``request`` the request object ``messages`` read
        (:func:`toolkeep.requests.read_request`), for a caller that has them already: they are
        not computed again.
        """
        timing = self._timing(now, cache)
        if isinstance(messages, Mapping):
            if tools is not None or system is not None:
                raise FormatError(
                    "a request object carries its own tools and system prompt: pass them in it",
                    field="tools" if tools is not None else "system",
                )
            return self._prepare_request(messages, format, timing, conversation, request)
        extras = tuple(x for x in (tools, system) if x is not None)
        with self._lock:
            self._check_open()
            return self._prepare(messages, format, extras, timing, conversation)

    def cache_times(self, messages: Sequence[Any], *, conversation: str | None = None) -> CacheTimes:
        """What this session knows of the timing of the requests of the conversation
        ``messages`` continues (after :meth:`prepare` of ``messages``: including it);
        ``conversation`` as for :meth:`prepare`."""
        if not isinstance(messages, (list, tuple)):
            raise FormatError(f"a history is a list of messages, got {type(messages).__name__}")
        with self._lock:
            self._check_open()
            state = self._state_for(messages, conversation)
            return CacheTimes(state.last_time, frozenset(state.expiry.requests))

    @staticmethod
    def _timing(now: float | None, cache: CacheTimes | None) -> tuple[float | None, CacheTimes | None]:
        if now is not None:
            now = _seconds(now, "now")
        if cache is not None:
            if not isinstance(cache, CacheTimes):
                raise ConfigError(f"cache must be a toolkeep.pricing.CacheTimes, got {type(cache).__name__}")
            if cache.last is not None:
                _seconds(cache.last, "cache.last")
            expired = cache.expired
            if not isinstance(expired, (frozenset, set, list, tuple)) or not all(
                isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in expired
            ):
                raise ConfigError("cache.expired must hold request numbers (ints >= 0)")
        return now, cache

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError(
                "this Session is closed (its workspace and store are released); make a new one"
            )

    def _prepare(
        self,
        messages: Sequence[Any],
        format: str | Format,
        extras: tuple[Any, ...] = (),
        timing: tuple[float | None, CacheTimes | None] = (None, None),
        conversation: str | None = None,
    ) -> Prepared:
        if not isinstance(messages, (list, tuple)):
            raise FormatError(f"a history is a list of messages, got {type(messages).__name__}")
        given, cache = timing
        now = self._now() if given is None else given
        state = self._state_for(messages, conversation)
        if cache is not None:
            state.last_time, state.expiry.requests = cache.last, set(cache.expired)
        same = common_prefix(state.last, messages)
        # what a failed request read is forgotten: the next one is compared with nothing
        state.last = []
        tracker = self._trackers.get(state)
        if tracker is None:
            tracker = self._trackers[state] = Tracker()
        try:
            fmt = self._format(messages, format, same)
            prepared = self._run(fmt, messages, extras, state, same, now, tracker)
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
        for attempt in (0, 1):
            pricing = resolve_pricing(self.config.pricing, fmt)
            state.expiry.now = state.last_time is not None and now - state.last_time > pricing.ttl_seconds
            report = Report(format=fmt.name, policy=self.config.policy, pricing=pricing.name)
            recorded: dict[str, str] = {}
            ctx = StepContext(
                fmt, self.config, self.workspace, Recording(self._writes, recorded), report,
                expiry=state.expiry,
            )  # fmt: skip
            try:
                prepared = Prepared(
                    engine.run(fmt, messages, self.steps, ctx, state, same, extras=extras), report
                )
            finally:
                state.memo.end_run()
            if tracker.check(prepared.messages, recorded, self._writes, self.marker_recheck_every) or attempt:
                return prepared
            # from scratch: every cut archives its original again, or says it could not
            state.forget()
            state.memo = Memo()
            same = 0
        raise AssertionError("unreachable")  # pragma: no cover

    def _now(self) -> float:
        """The clock's reading, checked: a number of seconds."""
        return _seconds(self.clock(), "the session's clock")

    def _state_for(self, messages: Sequence[Any], key: str | None = None) -> SessionState:
        """The state of the conversation ``messages`` continues (found by its first message),
        made :attr:`state`; a new one when none is kept (the least recently used goes)."""
        current = self.state
        if not messages or (current.last and current.last[0] is messages[0]):
            return current
        if key is None:
            key = conversation_key(messages[0])
        state = self._states.pop(key, None)
        if state is None:
            state = SessionState()
            while len(self._states) >= self.conversations_kept:
                gone, _ = self._states.popitem(last=False)
                # its files can be made again: a later request of it starts afresh and does
                with self._workspace_lock:
                    evicted = self._workspaces.pop(gone, None)
                if evicted is not None:
                    evicted.close()
        self._states[key] = state
        self.state = state
        self._key = key
        return state

    def _prepare_request(
        self,
        body: Mapping[str, Any],
        format: str | Format,
        timing: tuple[float | None, CacheTimes | None] = (None, None),
        conversation: str | None = None,
        request: Request | None = None,
    ) -> PreparedRequest:
        """:meth:`prepare` of a request object: its history unwrapped, prepared, put back."""
        if request is None:
            request = read_request(body)
        if request.history is None:  # a plain string: nothing to pair, no policy ran (an empty report)
            self._check_open()
            return PreparedRequest(
                request.with_history(body[request.key]), Report(format=request.format_name(format))
            )
        with self._lock:
            self._check_open()
            messages, report = self._prepare(
                request.history, request.format(format), request.extras(), timing, conversation
            )
        return PreparedRequest(request.with_history(messages), report)

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

    def _durable_store(self) -> ArchiveStore:
        """The per-user archive (or ``caller_store_url``), opened on first use."""
        if self._durable is None:
            self._check_open()
            self._durable = open_store(self.config.caller_store_url or user_store_url())
            # its pins (in the file, shared) are released when the session closes, like the rest
            self._durable_writes = PinnedWrites(self._durable, self._writes.owner)
        return self._durable

    def cap_result(
        self, call_id: str, tool_name: str | None, text: str, *, cap: int | ToolCap | None = None
    ) -> str:
        """A tool's output as it should enter the history: at most its tool's cap long.

        Call it where a result is produced (a tool dispatcher). Over the cap, the output keeps
        its head and tail around ``[TRUNCATED N chars omitted, M kept]``, the whole of it never
        longer than the cap, and the full text is archived and persisted first, so the marker
        leads back to it. The caller's history keeps the cut after the session: when the
        original cannot be archived where it outlives the session (the per-user archive is full
        or refused, and the workspace is removed on close), the output comes back whole (and a
        WARNING on the ``toolkeep`` logger says why), never cut with no way back. ``cap``
        (chars, or a :class:`~toolkeep.ToolCap`) overrides the configured setting (e.g. one the
        tool declares with :func:`toolkeep.result_cap`)::

            text = session.cap_result(call["id"], call["name"], run_tool(call))
        """
        self._check_open()
        steps = [s for s in self.steps if isinstance(s, ToolCaps)]
        c = self.config
        caps = (
            steps[0]
            if steps
            else ToolCaps(
                default=c.default_tool_cap, caps=c.tool_caps, head=c.cap_head_chars, tail=c.cap_tail_chars
            )
        )
        setting = caps.setting_for(tool_name) if cap is None else ToolCap.of(cap, "cap")
        # a cut reads no format: any one will do
        report = Report()
        ctx = StepContext(get_format("anthropic"), self.config, self.workspace, self._holds_writes, report)
        capped = caps.cut(ToolResultPart(call_id, text, name=tool_name), ctx, setting)
        if capped is None:
            return text
        if capped.key is None and not self.workspace.keep:
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

    def handle_tool_call(self, name: str, arguments: Any) -> str | None:
        """The answer to a ``recall`` or ``read_result`` call the model made; ``None`` for any
        other tool. Never raises for the model's mistakes: an unknown key or a refused path gets
        a sentence the model can act on."""
        current = self.workspace
        workspace: Workspace | WorkspaceReader = current
        if self._fixed is None and len(self._workspaces) > 1:
            workspace = _Readers(current, list(self._workspaces.values()))
        return handle_tool_call(
            name, arguments, store=self.recall_store, workspace=workspace, config=self.config
        )

    def tool_definitions(self, format: str) -> list[Any]:
        """The ``recall`` and ``read_result`` tool definitions in ``format``'s tool schema."""
        return tool_definitions(format)

    def recall(self, key: str) -> str | None:
        """The original archived under ``key``, or ``None`` if the store does not have it."""
        return self.recall_store.get(key)

    def close(self) -> None:
        """Close the store (if the session opened it) and remove the workspace unless kept.
        A closed session refuses work with :class:`SessionClosedError`."""
        self._closed = True
        for writes in (self._writes, self._holds_writes, self._durable_writes):
            if writes is not None:
                writes.release_all()
        if self._owns_store:
            self.store.close()
        if self._durable is not None:
            self._durable.close()
        with self._workspace_lock:  # (kept: ``workspace.path`` still says where it was)
            held = [*self._workspaces.values(), *(w for w in (self._fixed, self._archive) if w is not None)]
        for workspace in held:
            workspace.close()
