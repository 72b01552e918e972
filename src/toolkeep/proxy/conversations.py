"""One toolkeep state per conversation, found without help from the client.

A conversation is told apart by the provider route and the first item of its history (an agent
resends its whole history each turn, so the first message stays while the conversation goes
on). Each holds a :class:`toolkeep.conversation.Conversation` of its own (state, timing) over
the proxy's shared workspace and store, with an :class:`toolkeep.archive.Archive` of its own
(the pins on the originals its markers name), so that conversations are prepared independently
and in parallel. The table is bounded:
the least recently used conversation goes past ``max_conversations``, and one idle for
``idle_seconds`` expires. A history the agent rewrote keeps working: Claude Code's own
compaction changes the first message (a new state), and a rewind shares only a prefix with the
last request, which the conversation's engine notices and does again. For a policy that decides
with time (the cache-aware one), each request's time comes from records in the store that every
replica shares (:mod:`.timeline`), not from the process's own memory of the conversation.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..archive import Archive
from ..config import Config
from ..conversation import Conversation as ConversationState
from ..conversation_key import conversation_key as first_message_key
from ..formats import get_format
from ..policies import build_steps
from ..shorten import archive_key
from ..stores import ArchiveStore
from ..workspace import Workspace
from .files import WaysBack, with_files
from .timeline import Timeline

__all__ = ["Conversation", "Conversations", "conversation_key"]


def conversation_key(route: str, history: Sequence[Any]) -> str:
    """The key of the conversation ``history`` belongs to: its route and its first item (without
    the keys its format's clients move), as a :class:`~toolkeep.Session` tells its conversations
    apart."""
    return _route_key(route, _first_key(route, history))


def _first_key(route: str, history: Sequence[Any]) -> str:
    return first_message_key(history[0] if history else None, get_format(route).moving_keys)


def _route_key(route: str, first: str) -> str:
    return archive_key(f"{route}\0{first}")


@dataclass
class Conversation:
    """A conversation's toolkeep state and what the statistics compare with its last request."""

    key: str
    first: str
    """The key of its first message (:func:`toolkeep.conversation_key.conversation_key`)."""
    state: ConversationState
    """What prepares its requests: its state, timing and steps, over the shared workspace."""
    archive: Archive
    """Its pins on the shared store, released when the table drops it."""
    last_used: float
    ways: WaysBack
    """The way back each of its shortened results names."""
    requests: int = 0
    previous: dict[str, list[str]] = field(default_factory=dict)
    """The serialized segments of the last request, unmanaged and managed (for cache costs)."""
    lock: threading.Lock = field(default_factory=threading.Lock)


class Conversations:
    """The bounded table of conversations (see the module docstring)."""

    def __init__(
        self,
        config: Config,
        workspace: Workspace,
        store: ArchiveStore,
        *,
        max_conversations: int = 256,
        idle_seconds: float = 3_600.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        remote_agents: bool = False,
    ) -> None:
        self.config = config
        self.remote_agents = remote_agents
        """True when the agents cannot read the proxy's files: shortened results name only tools."""
        self.workspace = workspace
        self.store = store
        self.max_conversations = max_conversations
        self.idle_seconds = idle_seconds
        self.clock = clock
        self.started = 0
        """Conversations begun (a conversation that expired and came back counts again)."""
        self._table: OrderedDict[str, Conversation] = OrderedDict()
        self._lock = threading.Lock()
        own = config.economy.min_chars  # None: the config's threshold
        self._min_chars = config.compact_min_chars if own is None else min(config.compact_min_chars, own)
        self.timeline: Timeline | None = Timeline(store, wall_clock) if build_steps(config).plans else None
        """The requests' times, shared by the replicas, for a policy that decides with time."""

    def __len__(self) -> int:
        return len(self._table)

    def get(self, route: str, history: Sequence[Any]) -> Conversation:
        """The conversation ``history`` continues, or a new one (expiring idle ones first)."""
        first = _first_key(route, history)
        key = _route_key(route, first)
        now = self.clock()
        dropped: list[Conversation] = []
        with self._lock:
            self._expire(now, dropped)
            conversation = self._table.pop(key, None)
            if conversation is None:
                state, archive = self._conversation(first)
                conversation = Conversation(key, first, state, archive, now, WaysBack(self.store, key))
                self.started += 1
                while len(self._table) >= self.max_conversations:
                    dropped.append(self._table.popitem(last=False)[1])
            conversation.last_used = now
            self._table[key] = conversation
        for gone in dropped:
            _release(gone)
        return conversation

    def _expire(self, now: float, dropped: list[Conversation]) -> None:
        while self._table:
            oldest = next(iter(self._table.values()))
            if now - oldest.last_used < self.idle_seconds:
                return
            dropped.append(self._table.popitem(last=False)[1])

    def close(self) -> None:
        """Release every conversation (the proxy is stopping)."""
        with self._lock:
            dropped = list(self._table.values())
            self._table.clear()
        for gone in dropped:
            _release(gone)

    def _conversation(self, first: str) -> tuple[ConversationState, Archive]:
        """A new conversation's state over the shared workspace and store, with pins of its own;
        its steps are the policy's with the proxy's file saving in its slot."""
        archive = Archive(self.config, workspace=self.workspace, store=self.store)
        steps = with_files(build_steps(self.config), self._min_chars)
        return ConversationState(self.config, archive, steps, key=first, workspace=self.workspace), archive


def _release(conversation: Conversation) -> None:
    """Close a conversation dropped from the table, once its request in flight (if any) is done:
    its archive releases the store pins on the originals its markers named, which may then be
    evicted under the store's caps again. The proxy's workspace and store are shared and kept
    (the archive does not own them)."""
    with conversation.lock:
        conversation.archive.close()
        conversation.state.close()
