"""Time: a session knows when the conversation's last request was prepared (an injected clock),
and once the cache has expired every tier move that is due is made in that request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolkeep
from toolkeep import Config, Economy, engine
from toolkeep.exceptions import ConfigError
from toolkeep.formats import get_format
from toolkeep.policies import build_steps
from toolkeep.pricing import CacheExpiry, CacheTimes
from toolkeep.report import Report
from toolkeep.steps import StepContext
from toolkeep.stores import MemoryStore

from .strategies import long_sessions, property_settings
from .test_policies import requests, session_of, texts

# no batch ever pays: only an expired cache makes a move
NEVER_PAYS = Economy(clear_at_least=10**9)
BIG = "PASSED line\n" * 666


def history() -> list[Any]:
    turns = [("bash", {"command": f"pytest -k t{n}"}, BIG) for n in range(4)]
    turns += [("bash", {"command": "ls"}, "ok") for _ in range(4)]
    return session_of(turns)


class Clock:
    """A clock that reads the times it is set to."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run_at(times: list[float], config: Config, tmp_path: Path) -> Iterator[tuple[list[Any], Report]]:
    """Each request of :func:`history` prepared by one session at the given clock readings."""
    clock = Clock()
    with toolkeep.Session(config, workspace=tmp_path, store=MemoryStore(), clock=clock) as session:
        for t, request in zip(times, requests(history()), strict=False):
            clock.now = t
            yield session.prepare(request, format="anthropic")


def shortened(out: list[Any]) -> int:
    return sum(t != BIG for k, t in texts(out).items() if int(k[-3:]) < 4)


class TestExpiry:
    def test_a_gap_longer_than_the_ttl_makes_every_due_move(self, tmp_path: Path) -> None:
        config = Config(policy="economy", economy=NEVER_PAYS)
        steady = [float(n) for n in range(9)]
        outs = [out for out, _ in run_at(steady, config, tmp_path / "a")]
        assert all(shortened(out) == 0 for out in outs)  # the batch never pays
        gap = [0.0, 1, 2, 3, 4, 305, 306, 307, 308]  # 301 s before the sixth request
        outs = [out for out, _ in run_at(gap, config, tmp_path / "b")]
        assert [shortened(out) for out in outs[:5]] == [0] * 5
        assert shortened(outs[5]) == 4  # every result due was moved at once
        assert all(shortened(out) == 4 for out in outs[6:])  # and stays moved
        assert outs[6][: len(outs[5])] == outs[5]  # the cached prefix is kept from then on

    def test_a_gap_of_exactly_the_ttl_is_not_an_expiry(self, tmp_path: Path) -> None:
        config = Config(policy="economy", economy=NEVER_PAYS)
        outs = [out for out, _ in run_at([0.0, 1, 2, 3, 4, 304, 305], config, tmp_path)]
        assert all(shortened(out) == 0 for out in outs)

    def test_the_ttl_is_the_price_list_s(self, tmp_path: Path) -> None:
        """The one-hour cache has not expired after 400 s; it has after 3601."""
        config = Config(policy="economy", economy=NEVER_PAYS, pricing="anthropic-1h")
        outs = [out for out, _ in run_at([0.0, 1, 2, 3, 4, 404, 405], config, tmp_path / "a")]
        assert all(shortened(out) == 0 for out in outs)
        outs = [out for out, _ in run_at([0.0, 1, 2, 3, 4, 3605, 3606], config, tmp_path / "b")]
        assert shortened(outs[5]) == 4
        custom = Config(policy="economy", economy=NEVER_PAYS, pricing="read=0.1,write=1.25,ttl=10")
        outs = [out for out, _ in run_at([0.0, 1, 2, 3, 4, 15, 16], custom, tmp_path / "c")]
        assert shortened(outs[5]) == 4

    def test_same_inputs_at_the_same_times_give_the_same_bytes(self, tmp_path: Path) -> None:
        config = Config(policy="economy")
        times = [0.0, 10, 400, 401, 2000, 2001, 2002, 5000, 5001]
        first = [json.dumps(out) for out, _ in run_at(times, config, tmp_path)]
        again = [json.dumps(out) for out, _ in run_at(times, config, tmp_path)]
        assert first == again

    def test_the_gap_is_the_conversation_s(self, tmp_path: Path) -> None:
        """Another conversation's requests do not keep this one's cache alive."""
        config = Config(policy="economy", economy=NEVER_PAYS)
        clock = Clock()
        ours = requests(history())
        other = [{"role": "user", "content": "another task"}]
        with toolkeep.Session(config, workspace=tmp_path, clock=clock) as session:
            for n, request in enumerate(ours[:5]):
                clock.now = float(n)
                session.prepare(request, format="anthropic")
            for t in (100.0, 200.0, 300.0):
                clock.now = t
                session.prepare(other, format="anthropic")
            clock.now = 310.0
            out, _ = session.prepare(ours[5], format="anthropic")
        assert shortened(out) == 4

    def test_other_policies_do_not_change_with_time(self, tmp_path: Path) -> None:
        for policy in ("spec", "seed"):
            config = Config(policy=policy)
            steady = [json.dumps(o) for o, _ in run_at([float(n) for n in range(9)], config, tmp_path)]
            late = [json.dumps(o) for o, _ in run_at([n * 1000.0 for n in range(9)], config, tmp_path)]
            assert steady == late


class TestClockInput:
    def test_a_clock_must_be_callable(self) -> None:
        with pytest.raises(ConfigError, match="callable"):
            toolkeep.Session(clock=5)  # type: ignore[arg-type]

    @pytest.mark.parametrize("reading", ["now", None, float("nan"), True])
    def test_a_clock_must_give_seconds(self, reading: Any, tmp_path: Path) -> None:
        session = toolkeep.Session(workspace=tmp_path, clock=lambda: reading)
        with session, pytest.raises(ConfigError, match="finite number"):
            session.prepare([{"role": "user", "content": "hi"}])

    @pytest.mark.parametrize("reading", ["now", float("inf"), True])
    def test_now_must_be_seconds(self, reading: Any, tmp_path: Path) -> None:
        with (
            toolkeep.Session(workspace=tmp_path) as session,
            pytest.raises(ConfigError, match="finite number"),
        ):
            session.prepare([{"role": "user", "content": "hi"}], now=reading)

    @pytest.mark.parametrize(
        "cache",
        [
            {"last": 1.0},
            CacheTimes(last=float("nan")),
            CacheTimes(expired=frozenset({-1})),
            CacheTimes(expired=frozenset({True})),
        ],
    )
    def test_cache_must_be_cache_times(self, cache: Any, tmp_path: Path) -> None:
        with toolkeep.Session(workspace=tmp_path) as session, pytest.raises(ConfigError, match="cache"):
            session.prepare({"messages": [{"role": "user", "content": "hi"}]}, cache=cache)

    @pytest.mark.parametrize(
        "name", ["anthropic", "request", "openai-chat", "openai-responses", "gemini", "bedrock", "langchain"]
    )
    def test_a_session_handed_the_timing_decides_as_the_one_that_saw_it(
        self, name: str, tmp_path: Path
    ) -> None:
        """The request after the gap, sent to a second session, moves as it would in the first
        when that session is handed the first's :meth:`cache_times`; alone it cannot know. In
        every format, and for a request object."""
        if name == "langchain":
            pytest.importorskip("langchain_core")
        from .convert_formats import to_format

        config = Config(policy="economy", economy=NEVER_PAYS)
        fmt = "anthropic" if name == "request" else name
        history_ = [to_format(r, fmt) for r in requests(history())]

        def send(session: toolkeep.Session, request: Any, **kw: Any) -> Any:
            if name == "request":
                return session.prepare({"model": "m", "messages": request}, **kw).request["messages"]
            return session.prepare(request, format=fmt, **kw).messages

        with toolkeep.Session(config, workspace=tmp_path / "a") as first:
            for t, request in enumerate(history_[:5]):
                send(first, request, now=float(t))
            timing = first.cache_times(history_[4])
        assert timing == CacheTimes(4.0, frozenset())
        sizes = {}
        for handed in (timing, None):
            with toolkeep.Session(config, workspace=tmp_path / f"b{handed is None}") as second:
                out = send(second, history_[5], now=305.0, cache=handed)
                sizes[handed is None] = len(json.dumps(out, default=repr))
        assert sizes[False] < sizes[True] - 4 * 5_000  # handed the timing: every due move made

    def test_cache_times_of_a_closed_session(self, tmp_path: Path) -> None:
        session = toolkeep.Session(workspace=tmp_path)
        session.close()
        with pytest.raises(toolkeep.exceptions.SessionClosedError):
            session.cache_times([{"role": "user", "content": "hi"}])

    def test_now_stands_for_the_clock(self, tmp_path: Path) -> None:
        """``prepare(..., now=t)`` is the request a session whose clock reads ``t`` prepares,
        and :meth:`cache_times` says what the session then knows."""
        config = Config(policy="economy", economy=NEVER_PAYS)
        gap = [0.0, 1, 2, 3, 4, 305, 306]
        by_clock = [json.dumps(out) for out, _ in run_at(gap, config, tmp_path / "a")]
        with toolkeep.Session(config, workspace=tmp_path / "b", clock=lambda: 1e9) as session:
            given = []
            for t, request in zip(gap, requests(history()), strict=False):
                given.append(json.dumps(session.prepare(request, format="anthropic", now=t).messages))
            assert session.cache_times(request) == CacheTimes(306.0, frozenset({5}))
        assert given == by_clock

    def test_the_default_clock_is_monotonic(self) -> None:
        import time

        with toolkeep.Session() as session:
            assert session.clock is time.monotonic


@st.composite
def sessions_in_time(draw: st.DrawFn) -> tuple[list[Any], list[float], int]:
    """A long session, a clock reading for each of its requests (gaps drawn short or long), and
    the TTL of a custom price list."""
    _, messages = draw(long_sessions(max_blocks=8))
    n = len(requests([*messages, {"role": "assistant", "content": "done"}]))
    gaps = draw(st.lists(st.sampled_from([0.0, 1.0, 30.0, 299.0, 301.0, 4000.0]), min_size=n, max_size=n))
    times = [sum(gaps[: k + 1]) for k in range(n)]
    return messages, times, draw(st.sampled_from([60, 300, 3600]))


@given(sessions_in_time(), st.sampled_from([0.0, 0.3]))
@property_settings(40)
def test_incremental_is_fresh_given_the_same_clock_readings(
    case: tuple[list[Any], list[float], int], risk: float
) -> None:
    """At every request, a session that saw the ones before it at their clock readings sends
    what a one-off run sends given the record of which requests found the cache expired."""
    messages, times, ttl = case
    config = Config(policy="economy", economy=Economy(risk=risk), pricing=f"read=0.1,write=1.25,ttl={ttl}")
    fmt = get_format("anthropic")
    clock = Clock()
    store = MemoryStore()
    with toolkeep.Session(config, store=store, clock=clock) as session:
        for t, request in zip(
            times, requests([*messages, {"role": "assistant", "content": "done"}]), strict=True
        ):
            clock.now = t
            out, report = session.prepare(request, format="anthropic")
            record: CacheExpiry = session.state.expiry.copy()
            fresh_report = Report(format=fmt.name, policy=report.policy, pricing=report.pricing)
            ctx = StepContext(fmt, config, session.workspace, store, fresh_report, expiry=record)
            fresh = engine.run(fmt, request, build_steps(config), ctx)
            assert json.dumps(out) == json.dumps(fresh)
            assert report.to_dict() == fresh_report.to_dict()


@given(sessions_in_time(), st.integers(1, 3), st.sampled_from([Economy(), NEVER_PAYS]))
@property_settings(30)
def test_sessions_handed_the_timing_send_what_one_session_sends(
    case: tuple[list[Any], list[float], int], replicas: int, economy: Economy
) -> None:
    """Requests dealt in turn to several sessions (as to replicas of the proxy), each given the
    time and the timing the one before it reported, send what one session that saw them all
    sends: what the cache-aware policy knows of time is only ``now`` and ``cache``."""
    messages, times, ttl = case
    config = Config(policy="economy", economy=economy, pricing=f"read=0.1,write=1.25,ttl={ttl}")
    store = MemoryStore()
    clock = Clock()
    history = requests([*messages, {"role": "assistant", "content": "done"}])
    with toolkeep.Session(config, store=store, clock=clock) as one:
        alone = []
        for t, request in zip(times, history, strict=True):
            clock.now = t
            alone.append(json.dumps(one.prepare(request, format="anthropic").messages))
    sessions = [toolkeep.Session(config, store=store, clock=lambda: -1.0) for _ in range(replicas)]
    try:
        timing = CacheTimes()
        dealt = []
        for n, (t, request) in enumerate(zip(times, history, strict=True)):
            session = sessions[n % replicas]
            out = session.prepare(request, format="anthropic", now=t, cache=timing)
            dealt.append(json.dumps(out.messages))
            timing = session.cache_times(request)
    finally:
        for session in sessions:
            session.close()
    assert dealt == alone


@pytest.mark.parametrize("name", ["openai-chat", "openai-responses", "gemini", "bedrock", "langchain"])
def test_every_format_moves_when_the_cache_expired(name: str, tmp_path: Path) -> None:
    """In each format (those loaded whole included), the gap makes every due move, at the TTL of
    the list the format suggests."""
    if name == "langchain":
        pytest.importorskip("langchain_core")
    from .convert_formats import to_format

    config = Config(policy="economy", economy=NEVER_PAYS)
    sizes = {}
    for label, times in (("steady", [0.0, 1, 2, 3, 4, 5]), ("gap", [0.0, 1, 2, 3, 4, 305])):
        clock = Clock()
        with toolkeep.Session(config, workspace=tmp_path / label, clock=clock) as session:
            for t, request in zip(times, requests(history()), strict=False):
                clock.now = t
                out, report = session.prepare(to_format(request, name), format=name)
        sizes[label] = len(json.dumps(out, default=repr))
        assert report.pricing == (get_format(name).rules.pricing or "anthropic-5m")
    assert sizes["gap"] < sizes["steady"] - 4 * 5_000
