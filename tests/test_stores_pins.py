"""A capped store never leaves a marker that no longer recalls (issue 17: "LRU eviction in a
capped store leaves dangling markers").

What a session archived is pinned in the store while the session lives: later writes evict only
unpinned entries, a write that could fit only by evicting pinned ones is refused (the session then
keeps that result whole or says ``could not be saved``), and TTL expiry spares pinned entries.
Every backend (memory, file, SQLite, a real Redis server), then whole sessions replaying a real
trajectory, then a hypothesis property over any sequence of prepares.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolkeep
from toolkeep.exceptions import StoreError
from toolkeep.shorten import CCR_MARKER_RE, archive_key
from toolkeep.stores import ArchiveStore, Limits, MemoryStore, open_store
from toolkeep.stores._base import PIN_LEASE, Pinning

from .conftest import TRAJECTORIES, load_trajectory, shared_or_skip
from .strategies import property_settings
from .test_stores import BACKENDS, Factory, FakeClock, backend, clock, k, make_store, redis_url

__all__ = ["backend", "clock", "make_store", "redis_url"]  # fixtures used here

TEXT = "x" * 100


def pinning(store: ArchiveStore) -> Pinning:
    assert isinstance(store, Pinning)
    return store


class TestPins:
    def test_pinned_entries_are_never_evicted(self, make_store: Factory) -> None:
        """Over the cap, only unpinned entries go (oldest first); the pinned ones all stay."""
        with make_store(limits=Limits(max_bytes=350)) as store:
            pinning(store).pin("s1", [k(1), k(2)])
            for n in (1, 2, 3):
                store.put(k(n), TEXT)
            store.put(k(4), TEXT)  # over: k(3), the only unpinned one, goes
            assert [store.get(k(n)) is not None for n in (1, 2, 3, 4)] == [True, True, False, True]

    def test_a_write_that_needs_a_pinned_entry_is_refused(self, make_store: Factory) -> None:
        """No room but what pinned entries hold: the write fails with StoreError, the store is as
        it was (the refused original is not there, nothing was evicted for it)."""
        with make_store(limits=Limits(max_bytes=250, max_entries=5)) as store:
            pinning(store).pin("s1", [k(1), k(2)])
            store.put(k(1), TEXT)
            store.put(k(2), TEXT)
            before = store.stats()
            with pytest.raises(StoreError, match=r"no room for original 0000000000000003.*pinned"):
                store.put(k(3), TEXT)
            after = store.stats()
            assert (after.entries, after.bytes, after.evictions) == (2, 200, before.evictions)
            assert store.get(k(3)) is None and store.get(k(1)) == TEXT == store.get(k(2))

    def test_the_entry_cap_respects_pins_too(self, make_store: Factory) -> None:
        with make_store(limits=Limits(max_entries=2)) as store:
            pinning(store).pin("s1", [k(1)])
            for n in (1, 2, 3):
                store.put(k(n), TEXT)
            assert [store.get(k(n)) is not None for n in (1, 2, 3)] == [True, False, True]
            pinning(store).pin("s1", [k(3)])
            with pytest.raises(StoreError, match="no room"):
                store.put(k(4), TEXT)

    def test_release_lets_them_go_again(self, make_store: Factory) -> None:
        """Pins are per owner: one owner's release leaves another's pins; with none left, LRU."""
        with make_store(limits=Limits(max_bytes=250)) as store:
            pins = pinning(store)
            pins.pin("s1", [k(1), k(2)])
            pins.pin("s2", [k(2)])
            store.put(k(1), TEXT)
            store.put(k(2), TEXT)
            pins.release("s1")
            store.put(k(3), TEXT)  # k(1) is free again and the oldest
            assert store.get(k(1)) is None and store.get(k(2)) == TEXT
            pins.release("s2")
            pins.release("s2")  # twice: harmless
            store.get(k(3))  # k(2) is now the oldest
            store.put(k(4), TEXT)
            assert store.get(k(2)) is None

    def test_pinned_entries_do_not_expire(self, make_store: Factory, clock: FakeClock) -> None:
        """Past the TTL, an unpinned entry is gone and a pinned one is still there, on get as on gc."""
        with make_store(limits=Limits(ttl=10), clock=clock) as store:
            pinning(store).pin("s1", [k(1), k(3)])
            for n in (1, 2, 3):
                store.put(k(n), TEXT)
            clock.tick(11)
            assert store.get(k(1)) == TEXT and store.get(k(2)) is None
            store.gc()
            assert store.stats().entries == 2
            pinning(store).release("s1")
            clock.tick(11)
            store.gc()
            assert store.stats().entries == 0


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_pins_are_shared_by_every_opening(make_store: Factory, clock: FakeClock) -> None:
    """SQLite and Redis keep pins in the file or on the server: a second opening (another
    process's store) neither evicts nor expires what the first pins, until it releases them or
    the pin lapses (PIN_LEASE)."""
    limits = Limits(max_bytes=250, ttl=PIN_LEASE * 3)
    with make_store(limits=limits, clock=clock) as first, make_store(limits=limits, clock=clock) as other:
        pinning(first).pin("s1", [k(1), k(2)])
        first.put(k(1), TEXT)
        first.put(k(2), TEXT)
        with pytest.raises(StoreError, match="no room"):
            other.put(k(3), TEXT)
        assert other.get(k(1)) == TEXT == other.get(k(2))
        pinning(first).release("s1")
        other.put(k(3), TEXT)  # k(1), the oldest, is free to go now
        assert other.get(k(1)) is None and other.get(k(2)) == TEXT
        pinning(first).pin("s1", [k(2), k(3)])
        clock.tick(PIN_LEASE + 1)  # a session that never closed: its pins lapse
        other.put(k(4), TEXT)
        assert other.get(k(2)) is None


def test_closing_a_session_whose_store_is_gone_does_not_raise(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A Redis server killed before the session closes: releasing the session's pins fails, is
    logged, and close() still succeeds (the pins lapse on the server by themselves)."""
    from .redis_server import start_redis_server

    try:
        proc, url = start_redis_server(tmp_path)
    except FileNotFoundError:
        pytest.skip("no redis-server binary")
    try:
        session = toolkeep.Session(toolkeep.Config(), workspace=tmp_path / "ws", store=f"{url}?max_bytes=1M")
        history: list[Any] = [{"role": "user", "content": "go"}]
        for n in range(3):
            history += [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": f"t{n}", "name": "grep", "input": {}}],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": f"t{n}", "content": f"{n}\n" * 20_000}
                    ],
                },
            ]
        out, report = session.prepare(history)
        assert report.save_errors == [] and CCR_MARKER_RE.search(json.dumps(out))
    finally:
        proc.kill()
        proc.wait()
    with caplog.at_level("WARNING", logger="toolkeep"):
        session.close()
    assert any("could not release this session's pins" in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------------------------- whole sessions


def check_markers(store: ArchiveStore, history: list[Any], out: list[Any]) -> tuple[int, int]:
    """``(markers, recalled)`` over the output: a marker recalls when the store gives back a text
    whose key it is, and for a shortened result, that text is the result's original."""
    originals = {
        b["tool_use_id"]: b["content"]
        for m in history
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == "tool_result" and isinstance(b.get("content"), str)
    }
    markers = recalled = 0
    for m in out:
        for b in m["content"] if isinstance(m.get("content"), list) else []:
            text = json.dumps(b, ensure_ascii=False)
            for key in CCR_MARKER_RE.findall(text):
                markers += 1
                got = store.get(key)
                whole = originals.get(b.get("tool_use_id", ""))
                if b.get("type") == "tool_result" and b.get("content") != whole:
                    recalled += got == whole
                else:
                    recalled += got is not None and archive_key(got) == key
    return markers, recalled


def capped(backend: str, tmp_path: Path, url: str, query: str) -> ArchiveStore:
    if backend == "memory":
        return open_store(f"memory://?{query}")
    if backend == "file":
        return open_store(f"file://{tmp_path}/archive?{query}")
    if backend == "sqlite":
        return open_store(f"sqlite:///{tmp_path}/archive.db?{query}")
    from .redis_server import fresh_prefix

    return open_store(f"{url}?prefix={fresh_prefix()}&{query}")


@pytest.mark.slow  # a real trajectory through each backend: 1.5-2 min each
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_real_trajectory_through_a_capped_store(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The issue's case: a real trajectory replayed request by request through a session on a
    store capped far below what it archives (without pins, markers of the final output named
    evicted originals: 3 of 37 on SQLite). Every marker of every 100th output, and of the last, recalls its original."""
    shared_or_skip()
    path = next(p for p in TRAJECTORIES if p.name == "claude-code__engram__diffusion__3f0a6f23.json")
    history = load_trajectory(path)
    url = request.getfixturevalue("redis_url") if backend == "redis" else ""
    store = capped(backend, tmp_path, url, "max_bytes=300K")
    markers = recalled = 0
    with store, toolkeep.Session(toolkeep.Config(), workspace=tmp_path / "ws", store=store) as session:
        for end in range(1, len(history) + 1):
            out, _ = session.prepare(history[:end], "anthropic")
            if end % 100 == 0 or end == len(history):
                n, ok = check_markers(store, history[:end], out)
                markers, recalled = markers + n, recalled + ok
        assert store.stats().bytes <= 300 * 1024
    assert markers > 20  # the store really held markers' originals
    assert recalled == markers


@given(
    sizes=st.lists(st.integers(0, 9_000), min_size=1, max_size=14),
    max_bytes=st.integers(1_000, 30_000),
    max_entries=st.one_of(st.none(), st.integers(1, 6)),
    steps=st.lists(st.integers(1, 4), min_size=1, max_size=6),
)
@property_settings(40)
def test_any_prepares_on_a_capped_store_leave_only_live_markers(
    sizes: list[int], max_bytes: int, max_entries: int | None, steps: list[int]
) -> None:
    """Property: whatever the results, the caps and how the history grows between requests, every
    marker in the latest output recalls its original, and the caps hold."""
    history: list[Any] = [{"role": "user", "content": "go"}]
    for n, size in enumerate(sizes):
        line = f"result {n} line\n"
        text = (line * (size // len(line) + 1))[:size]
        history += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{n}", "name": "grep", "input": {}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": text}]},
        ]
    history.append({"role": "assistant", "content": "done"})
    store = MemoryStore(limits=Limits(max_bytes=max_bytes, max_entries=max_entries))
    config = toolkeep.Config(max_result_chars=2_000, turn_budget_chars=8_000, compact_min_chars=500)
    with toolkeep.Session(config, store=store) as session:
        end = 1
        for step in [*steps, len(history)]:
            end = min(len(history), end + step)
            out, _ = session.prepare(history[:end], "anthropic")
            markers, recalled = check_markers(store, history[:end], out)
            assert recalled == markers
            stats = store.stats()
            assert stats.bytes <= max_bytes and (max_entries is None or stats.entries <= max_entries)


def test_a_closed_session_leaves_no_pins_in_the_per_user_archive(tmp_path: Path) -> None:
    """What ``cap_result`` writes into the caller's history is archived in the per-user store
    too, pinned there while the session lives; closing the session releases those pins in the
    file (the originals stay, under the caps and TTL like any other)."""
    import sqlite3

    db = tmp_path / "user.db"
    config = toolkeep.Config(caller_store_url=f"sqlite:///{db}?max_bytes=10M")
    with toolkeep.Session(config) as session:
        capped_text = session.cap_result("t1", "bash", "z\n" * 40_000, cap=1_000)
        (key,) = CCR_MARKER_RE.findall(capped_text)
        with sqlite3.connect(db) as con:
            assert con.execute("SELECT key FROM pins").fetchall() == [(key,)]
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*) FROM pins").fetchone() == (0,)
        assert con.execute("SELECT COUNT(*) FROM entries WHERE key = ?", (key,)).fetchone() == (1,)
