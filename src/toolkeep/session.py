"""The front door: :class:`Session` reads the configuration, makes its archive and its table of
conversations, and hands each request to them."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, overload

from .archive import Archive
from .closing import Closing
from .config import Config, ToolCap
from .conversation import Conversations
from .engine import SessionState
from .exceptions import ConfigError
from .formats import Format
from .policies import prepared_pipeline
from .pricing import CacheTimes
from .recall import handle_tool_call, tool_definitions
from .report import Prepared
from .requests import PreparedRequest, Request
from .steps import Pipeline, Step
from .stores import ArchiveStore
from .workspace import Workspace

__all__ = ["Session"]


class Session(Closing):
    """One agent session's toolkeep state. Use it as a context manager::

        with toolkeep.Session() as session:
            messages, report = session.prepare(history)

    ``workspace`` is a :class:`Workspace`, a directory to use (kept afterwards), or ``None`` for
    a new private directory removed on :meth:`close` (unless ``keep_tmpdir`` is set).
    ``store`` is an :class:`ArchiveStore` or a store URL; by default originals are archived in
    the workspace.

    ``clock`` (a callable returning seconds, default :func:`time.monotonic`) is read once per
    ``prepare``, to tell when the provider's cache has expired (see
    :class:`~toolkeep.conversation.Conversations`; inject one for the same bytes in replays).

    The session is a front over two named parts: its :attr:`archive`
    (:class:`~toolkeep.archive.Archive`: the stores, their pins, the durable fallback) and its
    :attr:`conversations` (:class:`~toolkeep.conversation.Conversations`: each conversation's
    state, workspace and timing).

    ``steps`` are the steps :meth:`prepare` runs instead of the configured policy's
    (:func:`toolkeep.policies.build_steps`): a :class:`~toolkeep.steps.Pipeline` with a slot
    filled by name, say (as :mod:`toolkeep.proxy.files` does), or a list of one's own.

    Without ``config``, the settings come from the environment (:meth:`Config.from_env`), unless
    ``trust_env=False``: then from the defaults alone (as httpx's ``trust_env``).
    """

    def __init__(
        self,
        config: Config | None = None,
        *,
        workspace: Workspace | str | os.PathLike[str] | None = None,
        store: ArchiveStore | str | None = None,
        clock: Callable[[], float] | None = None,
        steps: Pipeline | Sequence[Step] | None = None,
        trust_env: bool = True,
    ) -> None:
        if clock is not None and not callable(clock):
            raise ConfigError(f"clock must be a callable returning seconds, got {type(clock).__name__}")
        self.config = Config.resolve(config, trust_env=trust_env)
        if workspace is not None and not isinstance(workspace, Workspace):
            workspace = Workspace(workspace, keep=self.config.keep_tmpdir)
        self.archive = Archive(self.config, workspace=workspace, store=store)
        """The stores, their pins and the durable fallback."""
        pipeline = prepared_pipeline(self.config, steps)
        self.conversations = Conversations(
            self.config, self.archive, pipeline, workspace=workspace, clock=clock
        )
        """Each conversation's state, workspace and timing (:meth:`prepare` tells them apart)."""
        self.store: ArchiveStore = self.archive.store
        """Where originals are archived."""
        self.recall_store: ArchiveStore = self.archive.recall_store
        """Where the model's ``recall`` calls are answered from."""
        self._lock = threading.Lock()

    @property
    def marker_recheck_every(self) -> int:
        """Every this many requests of a conversation (32), the store is checked for every original
        the markers in it name, not only for those not yet seen (:mod:`toolkeep.markers`);
        ``0``: never."""
        return self.conversations.marker_recheck_every

    @marker_recheck_every.setter
    def marker_recheck_every(self, every: int) -> None:
        self.conversations.marker_recheck_every = every

    @property
    def clock(self) -> Callable[[], float]:
        """What :meth:`prepare` reads the time from (seconds)."""
        return self.conversations.clock

    @property
    def steps(self) -> Pipeline:
        """What :meth:`prepare` runs (a :class:`~toolkeep.steps.Pipeline`): ``steps`` given,
        else the configured policy's."""
        return self.conversations.steps

    @steps.setter
    def steps(self, steps: Pipeline | Sequence[Step]) -> None:
        self.conversations.steps = prepared_pipeline(self.config, steps)

    @property
    def conversations_kept(self) -> int:
        """How many conversations' state a session keeps (see :meth:`prepare`; 16)."""
        return self.conversations.kept

    @conversations_kept.setter
    def conversations_kept(self, kept: int) -> None:
        self.conversations.kept = kept

    @property
    def state(self) -> SessionState:
        """What the conversation of the last request carries to the next (:mod:`toolkeep.engine`)."""
        return self.conversations.current.state

    @property
    def workspace(self) -> Workspace:
        """The workspace of the conversation of the last request (before any, of an empty one):
        the one given, else that conversation's own (:attr:`Conversation.workspace
        <toolkeep.conversation.Conversation.workspace>`)."""
        return self.conversations.current.workspace

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
        """The history to send and a report; ``messages`` is never mutated. Unchanged messages
        are shared with the input (treat the output as read-only); changed ones are new objects.

        A mapping is a request object (:mod:`toolkeep.requests`): ``{"messages": [...], ...}``,
        ``{"input": [...], ...}`` or ``{"contents": [...], ...}``: its history is prepared, read
        in the format its key implies (``format="auto"``), and it comes back as a new request
        object of the same shape, every other field the very value it was.

        Safe to call from several threads: calls are taken one at a time, and each gets the
        output a session of its own would give. The state of up to :attr:`conversations_kept`
        conversations is kept, told apart by their first message
        (:class:`~toolkeep.conversation.Conversations`).

        With ``Config.max_request_tokens`` the request comes back within that many tokens
        (:mod:`toolkeep.window`), or :class:`~toolkeep.exceptions.RequestTooLargeError` is raised.
        ``tools`` and ``system`` (any JSON value, as sent beside a list of messages) count towards
        it; a request object carries its own (``tools``, ``system``, ``instructions``, ...).

        ``now`` is the time of this request in the clock's seconds (instead of a reading of
        :attr:`clock`) and ``cache`` what to know of the conversation's earlier requests (instead
        of what the session remembers, :meth:`cache_times`): a caller that keeps a conversation's
        timing elsewhere, as the proxy's replicas do, gets the bytes a session that had seen every
        request would give. ``conversation`` (the conversation's key,
        :func:`toolkeep.conversation_key.history_key`) and ``request`` (what
        :func:`toolkeep.requests.read_request` read of ``messages``) are for a caller that has
        them already: they are not computed again.
        """
        with self._lock:
            self.archive.check_open()
            return self.conversations.prepare_input(
                messages, format, tools=tools, system=system, now=now, cache=cache, key=conversation,
                request=request,
            )  # fmt: skip

    def cache_times(self, messages: Sequence[Any], *, conversation: str | None = None) -> CacheTimes:
        """What this session knows of the timing of the conversation ``messages`` continues (after
        :meth:`prepare` of them: including it); ``conversation`` as for :meth:`prepare`."""
        with self._lock:
            self.archive.check_open()
            return self.conversations.find(messages, conversation).cache_times()

    def cap_result(
        self, call_id: str, tool_name: str | None, text: str, *, cap: int | ToolCap | None = None
    ) -> str:
        """A tool's output as it should enter the history: at most its tool's cap long.

        Call it where a result is produced (a tool dispatcher). Over the cap, the output keeps
        its head and tail around ``[TRUNCATED N chars omitted, M kept]``, never longer than the
        cap, and the full text is archived and persisted first, so the marker leads back to it;
        when it cannot be archived where it outlives the session, the output comes back whole
        (:meth:`toolkeep.archive.Archive.cap_result`). ``cap`` (chars, or a
        :class:`~toolkeep.ToolCap`) overrides the configured setting (e.g. one the tool declares
        with :func:`toolkeep.result_cap`)::

            text = session.cap_result(call["id"], call["name"], run_tool(call))
        """
        self.archive.check_open()
        return self.archive.cap_result(call_id, tool_name, text, self.steps.caps, cap, self.workspace)

    def handle_tool_call(self, name: str, arguments: Any) -> str | None:
        """The answer to a ``recall`` or ``read_result`` call the model made; ``None`` for any
        other tool. Never raises for the model's mistakes: an unknown key or a refused path gets
        a sentence the model can act on."""
        reader = self.conversations.reader()
        return handle_tool_call(
            name, arguments, store=self.recall_store, workspace=reader, config=self.config
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
        self.archive.close()
        self.conversations.close()
