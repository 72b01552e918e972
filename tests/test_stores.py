"""One contract, every archive store: memory, file, SQLite and a real Redis server (SPEC 7)."""

from __future__ import annotations

import logging
import os
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import toolkeep
from toolkeep.exceptions import ConfigError, InvalidKeyError, StoreError
from toolkeep.shorten import archive_key
from toolkeep.stores import ArchiveStore, FileStore, Limits, MemoryStore, open_store, store_for_config
from toolkeep.stores.redis import RedisStore
from toolkeep.stores.sqlite import SQLiteStore

from . import redis_server
from .redis_server import fresh_prefix

redis_url = redis_server.redis_url  # the session-wide Redis fixture

BACKENDS = ["memory", "file", "sqlite", "redis"]
PERSISTENT = ["file", "sqlite", "redis"]

BAD_KEYS: list[Any] = [
    "",
    "0123456789abcde",
    "0123456789abcdef0",
    "0123456789ABCDEF",
    "../../etc/passwd",
    "0123456789abcde/",
    "0123456789abcdef\n",
    "0123456789abcdef\x00",
    "*",
    "{toolkeep}:data",
    "０１２３４５６７８９ａｂｃｄｅｆ",
    None,
    16,
    b"0123456789abcdef",
]


class FakeClock:
    """A clock the test moves by hand, so TTLs are tested without sleeping."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def tick(self, seconds: float = 1.0) -> float:
        self.now += seconds
        return self.now


Factory = Callable[..., ArchiveStore]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def make_store(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Factory]:
    """Opens stores of one backend; each call with ``same=True`` opens the same location again."""
    opened: list[ArchiveStore] = []
    prefix = fresh_prefix()
    url = request.getfixturevalue("redis_url") if backend == "redis" else ""

    def make(*, limits: Limits | None = None, clock: FakeClock | None = None) -> ArchiveStore:
        store: ArchiveStore
        if backend == "memory":
            store = MemoryStore(limits=limits, clock=clock)
        elif backend == "file":
            store = FileStore(tmp_path / "archive", limits=limits, clock=clock)
        elif backend == "sqlite":
            store = SQLiteStore(tmp_path / "db" / "archive.db", limits=limits, clock=clock)
        else:
            store = RedisStore(url, prefix=prefix, limits=limits, clock=clock)
        opened.append(store)
        return store

    yield make
    for store in opened:
        if isinstance(store, RedisStore) and store._client is not None:
            store.clear()
        store.close()


def k(n: int) -> str:
    """The n-th test key."""
    return f"{n:016x}"


class TestContract:
    def test_round_trip_is_exact(self, make_store: Factory) -> None:
        """Every text comes back exactly as it went in: empty, non-ASCII, astral, lone surrogates, big."""
        texts = ["", "plain", "é中🙂𝄞\r\n\t\x00", "lone \ud800 surrogate", "x" * 1_000_003]
        with make_store() as store:
            for text in texts:
                store.put(archive_key(text), text)
            for text in texts:
                assert store.get(archive_key(text)) == text

    def test_unknown_key_is_none_and_a_miss(self, make_store: Factory) -> None:
        """An unknown key answers None, counted as a miss, never an exception."""
        with make_store() as store:
            assert store.get(k(1)) is None
            stats = store.stats()
        assert (stats.entries, stats.hits, stats.misses) == (0, 0, 1)

    def test_put_is_idempotent(self, make_store: Factory) -> None:
        """Putting a key again keeps one entry and the first text."""
        with make_store() as store:
            store.put(k(1), "first")
            store.put(k(1), "first")
            store.put(k(1), "other")
            assert store.get(k(1)) == "first"
            assert store.stats().entries == 1

    def test_delete(self, make_store: Factory) -> None:
        """delete removes a key and says whether it was there."""
        with make_store() as store:
            store.put(k(1), "a")
            assert store.delete(k(1)) is True
            assert store.delete(k(1)) is False
            assert store.get(k(1)) is None

    @pytest.mark.parametrize("key", BAD_KEYS, ids=repr)
    def test_bad_keys_are_refused_before_use(self, make_store: Factory, key: Any, tmp_path: Path) -> None:
        """A malformed key raises InvalidKeyError from put, get and delete, and stores nothing."""
        with make_store() as store:
            for call in (lambda: store.put(key, "x"), lambda: store.get(key), lambda: store.delete(key)):
                with pytest.raises(InvalidKeyError):
                    call()
            stats = store.stats()
        assert (stats.entries, stats.hits, stats.misses) == (0, 0, 0)
        assert not (tmp_path.parent / "etc").exists()

    def test_stats_count_entries_and_utf8_bytes(self, make_store: Factory) -> None:
        """stats gives entries, UTF-8 bytes, hits and misses."""
        with make_store() as store:
            store.put(k(1), "abc")
            store.put(k(2), "é🙂")  # 2 + 4 bytes
            store.get(k(1))
            store.get(k(3))
            stats = store.stats()
        assert (stats.entries, stats.bytes, stats.hits, stats.misses) == (2, 9, 1, 1)
        assert stats.as_dict()["backend"] == stats.backend

    def test_size_cap_evicts_least_recently_used(self, make_store: Factory, clock: FakeClock) -> None:
        """Over max_bytes, the least recently used entries go first and the cap holds."""
        with make_store(limits=Limits(max_bytes=100), clock=clock) as store:
            for n in range(1, 4):
                store.put(k(n), "x" * 30)
                clock.tick()
            store.get(k(1))  # k(2) is now the least recently used
            clock.tick()
            store.put(k(4), "y" * 30)
            clock.tick()
            assert store.get(k(2)) is None
            assert [store.get(k(n)) is not None for n in (1, 3, 4)] == [True, True, True]
            stats = store.stats()
        assert stats.bytes <= 100
        assert (stats.entries, stats.evictions) == (3, 1)

    def test_entry_cap_lru_order(self, make_store: Factory, clock: FakeClock) -> None:
        """With max_entries, eviction follows the order of last use (get or put), not of insertion."""
        with make_store(limits=Limits(max_entries=3), clock=clock) as store:
            for n in (1, 2, 3):
                store.put(k(n), str(n))
                clock.tick()
            assert store.get(k(1)) == "1"
            clock.tick()
            store.put(k(4), "4")  # 2 is the least recently used
            clock.tick()
            assert store.get(k(2)) is None  # a miss is no use: the order stays 3, 1, 4
            store.put(k(3), "3")  # a put of a known key is a use: 1, 4, 3
            clock.tick()
            store.put(k(5), "5")
            clock.tick()
            assert [store.get(k(n)) for n in (1, 3, 4, 5)] == [None, "3", "4", "5"]
            assert store.stats().evictions == 2

    def test_original_larger_than_the_cap_is_refused(self, make_store: Factory) -> None:
        """An original bigger than the whole cap raises StoreError and evicts nothing."""
        with make_store(limits=Limits(max_bytes=10)) as store:
            store.put(k(1), "small")
            with pytest.raises(StoreError, match="cap"):
                store.put(k(2), "x" * 11)
            assert store.get(k(1)) == "small"
            assert store.get(k(2)) is None

    def test_ttl_counts_from_last_use(self, make_store: Factory, clock: FakeClock) -> None:
        """An entry expires ttl seconds after its last put or get, and is then a miss."""
        with make_store(limits=Limits(ttl=10), clock=clock) as store:
            store.put(k(1), "kept alive")
            store.put(k(2), "left alone")
            clock.tick(9)
            assert store.get(k(1)) == "kept alive"
            clock.tick(9)  # 18 s after the put, 9 s after the get
            assert store.get(k(1)) == "kept alive"
            assert store.get(k(2)) is None
            clock.tick(10)
            assert store.get(k(1)) is None
            stats = store.stats()
        assert (stats.entries, stats.expirations, stats.hits, stats.misses) == (0, 2, 2, 2)

    def test_gc_removes_expired_and_evicts(self, make_store: Factory, clock: FakeClock) -> None:
        """gc drops every expired entry at once and reports how many."""
        with make_store(limits=Limits(ttl=5), clock=clock) as store:
            for n in range(1, 4):
                store.put(k(n), "x")
            clock.tick(3)
            store.put(k(4), "fresh")
            clock.tick(3)
            result = store.gc()
            assert (result.expired, result.evicted) == (3, 0)
            assert store.stats().entries == 1
            assert store.get(k(4)) == "fresh"

    def test_threads_share_a_store(self, make_store: Factory) -> None:
        """Eight threads putting and getting at once lose nothing."""
        texts = [f"text {n} " * n for n in range(64)]
        errors: list[BaseException] = []
        with make_store() as store:

            def work(part: list[str]) -> None:
                try:
                    for text in part:
                        store.put(archive_key(text), text)
                        assert store.get(archive_key(text)) == text
                except BaseException as exc:  # pragma: no cover - reported below
                    errors.append(exc)

            threads = [threading.Thread(target=work, args=(texts[n::8],)) for n in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert errors == []
            assert store.stats().entries == len(set(texts))

    def test_close_is_idempotent(self, make_store: Factory) -> None:
        """close can be called twice."""
        store = make_store()
        store.close()
        store.close()

    def test_is_an_archive_store(self, make_store: Factory) -> None:
        """Every backend satisfies the runtime-checkable protocol."""
        assert isinstance(make_store(), ArchiveStore)


@pytest.mark.parametrize("backend", PERSISTENT)
def test_a_second_opening_sees_the_originals(make_store: Factory, backend: str) -> None:
    """A store opened again at the same place (a resumed session) recalls what the first stored."""
    with make_store() as first:
        first.put(k(7), "survives")
    with make_store() as second:
        assert second.get(k(7)) == "survives"


class TestSecurity:
    def test_file_store_modes(self, tmp_path: Path) -> None:
        """The archive directory is 0700 and each original 0600."""
        with FileStore(tmp_path / "a") as store:
            store.put(k(1), "secret")
        assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o700
        assert stat.S_IMODE((tmp_path / "a" / f"{k(1)}.txt").stat().st_mode) == 0o600

    def test_sqlite_store_modes(self, tmp_path: Path) -> None:
        """The SQLite file is 0600 and a directory made for it 0700."""
        with SQLiteStore(tmp_path / "new" / "a.db") as store:
            store.put(k(1), "secret")
            assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700
            for name in ("a.db", "a.db-wal", "a.db-shm"):  # WAL files exist while it is open
                assert stat.S_IMODE((tmp_path / "new" / name).stat().st_mode) == 0o600, name

    def test_archive_failure_logs_no_content(self, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
        """When archiving fails the log names the key and the error, never the original's text."""
        secret = "API_KEY=sk-very-secret\n" * 2_000
        history = [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "cat", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": secret}]},
        ]
        store = MemoryStore(limits=Limits(max_bytes=100))
        caplog.set_level(logging.DEBUG, logger="toolkeep")
        with toolkeep.Session(workspace=tmp_path / "ws", store=store) as session:
            session.prepare(history)
        assert "archive" in caplog.text
        assert "sk-very-secret" not in caplog.text


class TestBackendErrors:
    def test_sqlite_error_is_chained(self, tmp_path: Path) -> None:
        """A database path that is a directory gives StoreError chained from sqlite3's error."""
        (tmp_path / "dir.db").mkdir()
        with pytest.raises(StoreError) as info:
            SQLiteStore(tmp_path / "dir.db")
        assert info.value.__cause__ is not None

    def test_file_store_on_a_file_is_a_store_error(self, tmp_path: Path) -> None:
        """A FileStore directory that is a regular file gives StoreError chained from OSError."""
        (tmp_path / "f").write_text("x")
        with pytest.raises(StoreError) as info:
            FileStore(tmp_path / "f")
        assert isinstance(info.value.__cause__, OSError)

    def test_unreachable_redis_is_a_store_error(self) -> None:
        """A Redis URL nobody listens on fails at once with StoreError chained from redis-py."""
        import redis

        with pytest.raises(StoreError, match="cannot reach") as info:
            RedisStore("redis://127.0.0.1:1/0")
        assert isinstance(info.value.__cause__, redis.RedisError)

    def test_redis_missing_gives_the_install_hint(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without redis-py the Redis store says how to install it."""
        monkeypatch.setitem(sys.modules, "redis", None)
        with pytest.raises(StoreError, match=r"pip install 'toolkeep\[redis\]'"):
            open_store("redis://127.0.0.1:1/0")

    def test_redis_password_not_in_messages(self) -> None:
        """The password of a Redis URL never appears in an error message."""
        with pytest.raises(StoreError) as info:
            RedisStore("redis://user:hunter2@127.0.0.1:1/0")
        assert "hunter2" not in str(info.value)

    def test_closed_sqlite_store(self, tmp_path: Path) -> None:
        """Using a closed SQLite store is a StoreError, not a crash."""
        store = SQLiteStore(tmp_path / "a.db")
        store.close()
        with pytest.raises(StoreError, match="closed"):
            store.get(k(1))


class TestOpenStore:
    def test_schemes(self, tmp_path: Path, redis_url: str) -> None:
        """Each scheme opens its backend, with limits from the query string."""
        prefix = fresh_prefix()
        cases = {
            "memory://?max_entries=5": MemoryStore,
            f"file://{tmp_path}/files?ttl=30m": FileStore,
            str(tmp_path / "bare"): FileStore,
            f"sqlite://{tmp_path}/s.db?max_bytes=64M": SQLiteStore,
            f"{redis_url}?prefix={prefix}&max_bytes=1G&ttl=7d": RedisStore,
        }
        for url, kind in cases.items():
            with open_store(url) as store:
                assert isinstance(store, kind), url
        assert open_store("memory://?max_entries=5").stats().max_entries == 5
        assert open_store(f"file://{tmp_path}/files?ttl=30m").stats().ttl == 1800
        assert open_store(f"sqlite://{tmp_path}/s.db?max_bytes=64M").stats().max_bytes == 64 << 20
        with open_store(f"{redis_url}?prefix={prefix}&ttl=7d") as store:
            assert isinstance(store, RedisStore) and store.prefix == prefix
            assert store.stats().ttl == 7 * 86400

    def test_redis_timeouts_from_the_url(self, redis_url: str) -> None:
        """socket_timeout, connect_timeout (or redis-py's socket_connect_timeout) and retry_after
        in the URL reach the connection and the breaker; redis-py never retries on its own."""
        base = f"{redis_url}?prefix={fresh_prefix()}"
        for extra, timeouts in [
            ("", (10.0, 5.0, 5.0)),
            ("&socket_timeout=0.5&connect_timeout=0.25&retry_after=1m", (0.5, 0.25, 60.0)),
            ("&socket_connect_timeout=2", (10.0, 2.0, 5.0)),
        ]:
            with open_store(base + extra) as store:
                assert isinstance(store, RedisStore) and store._client is not None
                kwargs = store._client.connection_pool.connection_kwargs
                assert (
                    kwargs["socket_timeout"],
                    kwargs["socket_connect_timeout"],
                    store.retry_after,
                ) == timeouts
                assert kwargs["retry"].get_retries() == 0
                store.put(k(1), "x")
                assert store.get(k(1)) == "x"

    def test_explicit_limits_win(self) -> None:
        """Limits passed to open_store override the query string."""
        store = open_store("memory://?max_entries=5&ttl=60", limits=Limits(max_entries=2))
        assert (store.stats().max_entries, store.stats().ttl) == (2, 60)

    @pytest.mark.parametrize(
        "url",
        ["ftp://x", "memory://?max_bytes=lots", "memory://?ttl=soon", "memory://?colour=red",
         "memory://?max_entries=0", "sqlite://", "redis://127.0.0.1:1/0?prefix=bad prefix",
         "redis://127.0.0.1:1/0?colour=red", "redis://127.0.0.1:1/0?ssl_certfile=c.pem",
         "redis://127.0.0.1:1/0?retry_on_timeout=true", "redis://127.0.0.1:1/0?socket_timeout=soon",
         "redis://127.0.0.1:1/0?socket_timeout=0", "redis://127.0.0.1:1/0?connect_timeout=100000",
         "redis://127.0.0.1:1/0?retry_after=-1", "memory://?socket_timeout=1"],
    )  # fmt: skip
    def test_bad_urls(self, url: str) -> None:
        """An unknown scheme or parameter, or a bad limit, is a ConfigError naming the problem."""
        with pytest.raises(ConfigError):
            open_store(url)

    def test_sqlite_relative_path(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """sqlite://name.db is relative to the working directory; sqlite:///abs is absolute."""
        monkeypatch.chdir(tmp_path)
        with open_store("sqlite://rel.db") as store:
            store.put(k(1), "x")
        assert (tmp_path / "rel.db").is_file()
        assert os.path.isabs(f"{tmp_path}/abs.db")
        with open_store(f"sqlite://{tmp_path}/abs.db") as store:
            store.put(k(1), "x")
        assert (tmp_path / "abs.db").is_file()

    def test_store_for_config(self, tmp_path: Path) -> None:
        """A config without a store URL archives in the given directory; with one, there; the
        config's cap and TTL apply either way."""
        config = toolkeep.Config(store_max_bytes=1_000, store_ttl_seconds=60)
        with store_for_config(config, tmp_path / "archive") as store:
            assert isinstance(store, FileStore) and store.directory == tmp_path / "archive"
            assert (store.stats().max_bytes, store.stats().ttl) == (1_000, 60)
        url_config = config.replace(store_url=f"sqlite://{tmp_path}/s.db?max_entries=3")
        with store_for_config(url_config, tmp_path / "unused") as store:
            assert isinstance(store, SQLiteStore)
            assert (store.stats().max_bytes, store.stats().max_entries) == (1_000, 3)
        assert not (tmp_path / "unused").exists()
