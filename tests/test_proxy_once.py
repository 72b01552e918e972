"""The proxy reads each request once, keys it once and asks its conversation's cache times once,
and what it sends is the bytes it sent when a session read and keyed each request again itself.

The counts wrap the real functions (every toolkeep module holding one gets a wrapper that counts
its calls and calls it): nothing they do is replaced.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import toolkeep.conversation_key
import toolkeep.requests
from tests.convert_formats import to_format
from tests.upstream_proxy import read_history
from toolkeep import Config, Session
from toolkeep.archive import Archive
from toolkeep.conversation import Conversation
from toolkeep.policies import build_steps
from toolkeep.proxy import Preparer
from toolkeep.proxy.conversations import Conversations
from toolkeep.proxy.files import with_files
from toolkeep.proxy.observe import observer_for
from toolkeep.stores import MemoryStore
from toolkeep.workspace import Workspace

FORMATS = ["anthropic", "openai-chat", "openai-responses", "gemini"]
KEYS = {"anthropic": "messages", "openai-chat": "messages", "openai-responses": "input", "gemini": "contents"}
POLICIES = ["economy", "spec"]
"""The first decides with time (the proxy keeps a timeline), the second does not."""
REQUESTS = 10
GAP = {4: 900.0}
"""Request 4 comes past the 5-minute cache's TTL: the timeline's expiry path runs too."""


def requests(route: str) -> list[bytes]:
    """The bodies of a conversation of ``REQUESTS`` growing requests in ``route``'s format: the
    user's first message alone, then each ending with a read's result (big enough to be
    shortened in later requests)."""
    whole = read_history(REQUESTS, 3_000)
    return [
        json.dumps(
            {"model": "m", "max_tokens": 5, KEYS[route]: to_format(whole[: 1 + 2 * n], route)}
        ).encode()
        for n in range(REQUESTS)
    ]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def proxy(
    root: Path, policy: str, clock: Clock, conversations: type[Conversations] = Conversations
) -> Preparer:
    config = Config(policy=policy)
    return Preparer(conversations(config, Workspace(root, keep=True), MemoryStore(), wall_clock=clock))


def counted(monkeypatch: pytest.MonkeyPatch, real: Callable[..., Any]) -> list[int]:
    """Calls of ``real`` from here on, through whichever toolkeep module's name they go."""
    calls: list[int] = []

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    held = 0
    for name, module in list(sys.modules.items()):
        if name == "toolkeep" or name.startswith("toolkeep."):
            for attribute, value in list(vars(module).items()):
                if value is real:
                    monkeypatch.setattr(module, attribute, counting)
                    held += 1
    assert held, f"no toolkeep module holds {real.__name__}"
    return calls


class Counts:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.key = counted(monkeypatch, toolkeep.conversation_key.conversation_key)
        self.read = counted(monkeypatch, toolkeep.requests.read_request)
        self.cache_times: list[int] = []
        real = Conversation.cache_times

        def cache_times(conversation: Conversation) -> Any:
            self.cache_times.append(1)
            return real(conversation)

        monkeypatch.setattr(Conversation, "cache_times", cache_times)

    def now(self) -> tuple[int, int, int]:
        return len(self.key), len(self.read), len(self.cache_times)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("route", FORMATS)
def test_each_request_is_read_keyed_and_timed_once(
    route: str, policy: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    preparer = proxy(tmp_path / "ws", policy, clock)
    timed = preparer.conversations.timeline is not None
    assert timed == (policy == "economy")
    counts = Counts(monkeypatch)
    changed = 0
    for n, body in enumerate(requests(route)):
        clock.now += GAP.get(n, 1.0)
        before = counts.now()
        outcome = preparer.prepare(route, body)
        assert outcome.prepared, outcome.error
        changed += outcome.body != body
        after = counts.now()
        assert [a - b for a, b in zip(after, before, strict=True)] == [1, 1, 1 if timed else 0], n
    assert changed  # the session did cut: the counts are of requests it really prepared


def test_a_replica_joining_mid_conversation_asks_its_session_what_it_knows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the record of the request before (another replica's, in a store this one does
    not share, or evicted), the timeline asks the session what it knows before preparing: then,
    and only then, its cache times are asked twice; the request is still read and keyed once."""
    clock = Clock()
    preparer = proxy(tmp_path / "ws", "economy", clock)
    counts = Counts(monkeypatch)
    assert preparer.prepare("anthropic", requests("anthropic")[5]).prepared
    assert counts.now() == (1, 1, 2)


class OldSession(Conversation):
    """A conversation as the proxy had it: a whole session per conversation, its steps spliced
    after it was made, and each request read and keyed again by the session itself."""

    def __init__(self, session: Session) -> None:
        super().__init__(session.config, session.archive, session.steps)
        self.session = session
        self.history: list[Any] = []

    def prepare_request(self, messages: Any, format: Any = "auto", **kwargs: Any) -> Any:
        kwargs.pop("request", None)
        self.history = list(messages[next(k for k in KEYS.values() if k in messages)])
        return self.session.prepare(messages, format, **kwargs)

    def cache_times(self) -> Any:
        return self.session.cache_times(self.history)

    @property
    def steps(self) -> Any:
        return self.session.steps if hasattr(self, "session") else []

    @steps.setter
    def steps(self, value: Any) -> None:
        pass


class OldConversations(Conversations):
    def _conversation(self, first: str) -> tuple[Conversation, Archive]:
        session = Session(self.config, workspace=self.workspace, store=self.store, steps=[])
        own = self.config.economy.min_chars
        least = self.config.compact_min_chars if own is None else min(self.config.compact_min_chars, own)
        session.steps = with_files(build_steps(self.config), least)
        return OldSession(session), session.archive


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("route", FORMATS)
def test_the_bytes_sent_are_those_the_session_gave_keying_each_request_itself(
    route: str, policy: str, tmp_path: Path
) -> None:
    clocks = Clock(), Clock()
    now, old = (
        proxy(tmp_path / "ws", policy, clocks[0]),
        proxy(tmp_path / "ws", policy, clocks[1], OldConversations),
    )
    changed = 0
    for n, body in enumerate(requests(route)):
        for clock in clocks:
            clock.now += GAP.get(n, 1.0)
        sent, expected = now.prepare(route, body), old.prepare(route, body)
        assert sent.error is None and expected.error is None
        assert sent.body == expected.body, n
        changed += sent.body != body
    assert changed
    history = json.loads(body)[KEYS[route]]
    steps = [
        now.conversations.get(route, history).state.steps,
        old.conversations.get(route, history).state.steps,
    ]
    assert [[type(s) for s in each] for each in steps] == [
        [type(s) for s in each] for each in reversed(steps)
    ]
    assert type(steps[0].enter[0]).__name__ == "PersistOnEntry"  # where results enter, first


def test_a_request_through_the_proxy_app_is_read_keyed_and_timed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proxy's ASGI application in this process, sending to the scripted model server: each
    request of a conversation, handled end to end, reads, keys and times it once."""
    import asyncio

    import httpx

    from tests.upstream_server import ScriptedUpstream
    from toolkeep.proxy.app import Upstreams, create_app

    upstream = ScriptedUpstream()
    try:
        preparer = proxy(tmp_path / "ws", "economy", Clock())
        counts = Counts(monkeypatch)

        async def send() -> list[tuple[int, tuple[int, int, int]]]:
            out = []
            async with httpx.AsyncClient() as http:
                app = create_app(preparer, Upstreams(upstream.url, upstream.url), client=http)
                client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy")
                async with client:
                    for body in requests("anthropic")[:4]:
                        before = counts.now()
                        answer = await client.post("/v1/messages", content=body)
                        after = counts.now()
                        out.append(
                            (answer.status_code, tuple(a - b for a, b in zip(after, before, strict=True)))
                        )
            return out

        assert asyncio.run(send()) == [(200, (1, 1, 1))] * 4
        assert len(upstream.requests()) == 4 and observer_for(preparer).totals()["prepared"] == 4
    finally:
        upstream.close()
