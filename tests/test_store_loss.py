"""Markers always recall, even when the store loses what it held behind the session's back.

A live session sends, in every request, markers of originals it archived earlier. A Redis
``FLUSHALL``, a Redis restarted without persistence, a ``maxmemory`` policy evicting the
archive, a SQLite file or a file store's directory deleted: before the next request goes out,
the session archives again every original a marker in it names, from the request or its own
memory, and the bytes it sends are those it would have sent without the loss. The check costs
one epoch read per request and a batched check of keys not yet seen under that epoch, never a
round trip per marker per request (counted here through a store that counts its calls).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolkeep
from toolkeep.shorten import CCR_MARKER_RE, archive_key
from toolkeep.stores import ArchiveStore, GcResult, Holding, MemoryStore, StoreBase, StoreStats, open_store
from toolkeep.stores.file import FileStore
from toolkeep.stores.redis import RedisStore
from toolkeep.stores.sqlite import SQLiteStore

from . import redis_server
from .strategies import anthropic_turns, long_sessions, property_settings

redis_url = redis_server.redis_url  # the session-wide Redis fixture

redis = pytest.importorskip("redis")


def big(n: int, size: int = 45_000) -> str:
    return "".join(f"line {n}.{k}: {'abcdefgh' * 6}\n" for k in range(size // 60))


def history(turns: int = 8) -> list[Any]:
    """Turns of big results: every one is cut, and each cut names a marker."""
    names = ("grep", "bash", "read", "ls")
    return anthropic_turns(*[(f"toolu_{n:02d}", names[n % 4], big(n)) for n in range(turns)])


def markers(out: Any) -> set[str]:
    return set(CCR_MARKER_RE.findall(json.dumps(out, ensure_ascii=False)))


def recalled(url_or_store: str | ArchiveStore, keys: Collection[str]) -> set[str]:
    """The keys whose original a fresh opening of the store gives back, byte-exact."""
    store = open_store(url_or_store) if isinstance(url_or_store, str) else url_or_store
    try:
        return {k for k in keys if (text := store.get(k)) is not None and archive_key(text) == k}
    finally:
        if isinstance(url_or_store, str):
            store.close()


def replay(
    url: str, workspace: Path, messages: list[Any], lose_at: int | None, lose: Callable[[], None]
) -> tuple[list[list[Any]], set[str]]:
    """Every prefix of ``messages`` through one session on ``url``; the store is lost before
    request ``lose_at``. The outputs, and the markers after the loss that recall nothing."""
    outs: list[list[Any]] = []
    dead: set[str] = set()
    with toolkeep.Session(workspace=workspace, store=url) as session:
        for n in range(1, len(messages) + 1):
            if n == lose_at:
                lose()
            out, _ = session.prepare(messages[:n], "anthropic")
            outs.append(out)
            if lose_at is not None and n >= lose_at:
                keys = markers(out)
                dead |= keys - recalled(url, keys)
    return outs, dead


# ------------------------------------------------------------------------------ real servers


class Server:
    """A ``redis-server`` of this test's own, started and restarted on one port, with no
    persistence: a restart loses everything."""

    def __init__(self, directory: Path, *options: str) -> None:
        self.directory, self.options = directory, options
        self.proc, self.url = redis_server.start_redis_server(directory, *options)
        self.port = int(self.url.rsplit(":", 1)[1].split("/")[0])

    def restart(self) -> None:
        self.stop()
        binary = shutil.which("redis-server") or redis_server.FALLBACK_BINARY
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.directory), *self.options],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis(port=self.port, socket_timeout=1)
        for _ in range(200):
            try:
                if client.ping():
                    break
            except redis.RedisError:
                pass
            subprocess.run(["sleep", "0.05"], check=True)
        client.close()

    def client(self) -> Any:
        return redis.Redis.from_url(self.url)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    if shutil.which("redis-server") is None and not Path(redis_server.FALLBACK_BINARY).exists():
        pytest.skip("no redis-server binary")
    s = Server(tmp_path)
    try:
        yield s
    finally:
        s.stop()


# ------------------------------------------------------------------------------------- losses


def test_redis_flushall_mid_session(server: Server, tmp_path: Path) -> None:
    messages = history()
    reference, _ = replay(f"{server.url}?prefix=ref", tmp_path / "ws", messages, None, lambda: None)
    outs, dead = replay(server.url, tmp_path / "ws", messages, 9, server.client().flushall)
    assert markers(outs[-1]) and not dead
    assert outs == reference  # the same bytes as without the loss


def test_redis_restarted_without_persistence(server: Server, tmp_path: Path) -> None:
    messages = history()
    reference, _ = replay(f"{server.url}?prefix=ref", tmp_path / "ws", messages, None, lambda: None)
    server.client().flushall()
    outs, dead = replay(server.url, tmp_path / "ws", messages, 9, server.restart)
    assert markers(outs[-1]) and not dead
    assert outs == reference


def test_redis_maxmemory_evicting_the_archive(tmp_path: Path) -> None:
    """Under ``allkeys-lru`` Redis evicts whole keys: the hash of originals goes with its
    epoch, so the next request sees the loss (no check of every key needed)."""
    if shutil.which("redis-server") is None and not Path(redis_server.FALLBACK_BINARY).exists():
        pytest.skip("no redis-server binary")
    server = Server(tmp_path, "--maxmemory", "8mb", "--maxmemory-policy", "allkeys-lru")
    try:
        client = server.client()
        messages = history(6)
        with toolkeep.Session(workspace=tmp_path / "ws", store=server.url) as session:
            for n in range(1, 9):
                session.prepare(messages[:n], "anthropic")
            filler = "f" * 100_000
            for n in range(400):  # newer keys: the archive, least recently used, goes first
                client.set(f"other:{n}", filler)
                if not client.exists("{toolkeep}:data"):
                    break
            assert not client.exists("{toolkeep}:data"), "the archive was not evicted"
            out, _ = session.prepare(messages[:9], "anthropic")
            keys = markers(out)
            assert keys and recalled(session.store, keys) == keys
    finally:
        server.stop()


def test_redis_order_lost_keeps_originals_readable(redis_url: str) -> None:
    """``maxmemory`` may evict the LRU order alone: the originals stay readable."""
    prefix = redis_server.fresh_prefix()
    with RedisStore(redis_url, prefix=prefix) as store:
        store.put("0123456789abcdef", "kept")
        redis.Redis.from_url(redis_url).delete("{" + prefix + "}:lru")
        assert store.missing(["0123456789abcdef"]) == frozenset()
        assert store.get("0123456789abcdef") == "kept"
        assert store.stats().entries == 1  # back in the order
        store.clear()


@pytest.mark.parametrize("recreate", [True, False], ids=["recreated", "deleted"])
def test_sqlite_file_deleted(tmp_path: Path, recreate: bool) -> None:
    db = tmp_path / "archive.db"
    url = f"sqlite://{db}"
    messages = history()
    reference, _ = replay(f"sqlite://{tmp_path / 'ref.db'}", tmp_path / "ws", messages, None, lambda: None)

    def lose() -> None:
        for name in ("archive.db", "archive.db-wal", "archive.db-shm"):
            (tmp_path / name).unlink(missing_ok=True)
        if recreate:  # another process opens the path meanwhile, and archives something
            with SQLiteStore(db) as other:
                other.put("fedcba9876543210", "another process's")

    outs, dead = replay(url, tmp_path / "ws", messages, 9, lose)
    assert markers(outs[-1]) and not dead
    assert outs == reference
    with SQLiteStore(db) as store:
        assert (store.get("fedcba9876543210") is not None) == recreate


def test_file_store_directory_deleted(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    messages = history()
    reference, _ = replay(f"file://{tmp_path / 'ref'}", tmp_path / "ws", messages, None, lambda: None)
    outs, dead = replay(f"file://{archive}", tmp_path / "ws", messages, 9, lambda: shutil.rmtree(archive))
    assert markers(outs[-1]) and not dead
    assert outs == reference


def test_the_default_archive_in_the_workspace(tmp_path: Path) -> None:
    """A session's own archive (in its workspace) emptied: the markers recall again."""
    messages = history()
    with toolkeep.Session(workspace=tmp_path / "ws") as session:
        for n in range(1, 9):
            session.prepare(messages[:n], "anthropic")
        archive = Path(session.store.directory)  # type: ignore[attr-defined]
        shutil.rmtree(archive)
        out, _ = session.prepare(messages, "anthropic")
        keys = markers(out)
        assert keys and recalled(session.recall_store, keys) == keys


def test_originals_only_in_memory(server: Server, tmp_path: Path) -> None:
    """An agent that sends the prepared history back carries markers, not originals: the
    session's own memory of them is what archives them again."""
    messages = history(4)
    with toolkeep.Session(workspace=tmp_path / "ws", store=server.url) as session:
        sent, _ = session.prepare(messages, "anthropic")
        assert session.prepare(sent, "anthropic")[0] == sent  # sent back: the same bytes
        server.client().flushall()
        again, _ = session.prepare(sent, "anthropic")
        keys = markers(again)
        assert keys and recalled(server.url, keys) == keys
        assert again == sent


def test_a_store_that_refuses_after_the_loss_sends_no_dead_marker(server: Server, tmp_path: Path) -> None:
    """Emptied, then full (``maxmemory`` with ``noeviction``: every write refused): the request
    is prepared afresh, and each cut says its original could not be saved, or stays whole."""
    messages = history()
    with toolkeep.Session(workspace=tmp_path / "ws", store=server.url) as session:
        for n in range(1, 9):
            session.prepare(messages[:n], "anthropic")
        client = server.client()
        client.flushall()
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", "1")
        try:
            out, report = session.prepare(messages, "anthropic")
        finally:
            client.config_set("maxmemory", "0")
        assert report.save_errors
        for m in out:
            for block in m["content"] if isinstance(m["content"], list) else []:
                text = block.get("content")
                if block.get("type") != "tool_result" or not isinstance(text, str) or len(text) > 40_000:
                    continue  # whole
                assert not CCR_MARKER_RE.search(text) or recalled(server.url, markers(text))
                assert "could not be saved" in text or "saved to" in text


# ------------------------------------------------------------------------------ round trips


class Counting(StoreBase):
    """A real store, with every call counted."""

    backend = "counting"

    def __init__(self, store: StoreBase) -> None:
        super().__init__()
        self.store = store
        self.calls: dict[str, int] = {}
        self.checked = 0
        """Keys passed to ``missing``."""

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def put(self, key: str, text: str) -> None:
        self._count("put")
        self.store.put(key, text)

    def get(self, key: str) -> str | None:
        self._count("get")
        return self.store.get(key)

    def delete(self, key: str) -> bool:
        return self.store.delete(key)

    def stats(self) -> StoreStats:
        return self.store.stats()

    def gc(self) -> GcResult:
        return self.store.gc()

    def epoch(self) -> str:
        self._count("epoch")
        return self.store.epoch()

    def missing(self, keys: Collection[str]) -> frozenset[str]:
        self._count("missing")
        self.checked += len(keys)
        return self.store.missing(keys)


def test_the_check_is_not_per_marker_per_request(redis_url: str, tmp_path: Path) -> None:
    messages = history(12)
    with RedisStore(redis_url, prefix=redis_server.fresh_prefix()) as real:
        store = Counting(real)
        with toolkeep.Session(workspace=tmp_path / "ws", store=store) as session:
            session.marker_recheck_every = 0
            sent = 0
            for n in range(1, len(messages) + 1):
                out, _ = session.prepare(messages[:n], "anthropic")
                sent += len(markers(out))
            requests = len(messages)
            assert sent > 3 * requests  # many markers per request...
            assert store.calls.get("epoch", 0) <= requests  # ...one epoch read per request
            assert store.calls.get("missing", 0) == 1  # and one batched check: the first request's
            assert store.calls.get("get", 0) == 0
            real.clear()  # lost: one batched check of every key, then the puts
            before = dict(store.calls)
            out, _ = session.prepare(messages, "anthropic")
            assert store.calls["missing"] - before["missing"] == 1
            assert store.calls["epoch"] - before["epoch"] == 1
            assert store.calls["put"] - before["put"] == len(markers(out))
            assert recalled(real, markers(out)) == markers(out)


def test_periodic_check_finds_a_single_lost_entry(tmp_path: Path) -> None:
    """One entry deleted, the epoch unchanged: found within ``marker_recheck_every`` requests."""
    messages = history(6)
    real = MemoryStore()
    store = Counting(real)
    with toolkeep.Session(workspace=tmp_path / "ws", store=store) as session:
        session.marker_recheck_every = 4
        for n in range(1, 8):
            out, _ = session.prepare(messages[:n], "anthropic")
        key = sorted(markers(out))[0]
        real.delete(key)
        found = None
        for n in range(8, 8 + 4):
            out, _ = session.prepare(messages, "anthropic")
            if real.get(key) is not None:
                found = n
                break
        assert found is not None
        assert recalled(real, markers(out)) == markers(out)


class ThirdParty:
    """A store with only the protocol's five methods (no epoch, no missing, no StoreBase)."""

    def __init__(self) -> None:
        self.data: dict[str, str] = {}
        self.gets = 0

    def put(self, key: str, text: str) -> None:
        self.data.setdefault(key, text)

    def get(self, key: str) -> str | None:
        self.gets += 1
        return self.data.get(key)

    def delete(self, key: str) -> bool:
        return self.data.pop(key, None) is not None

    def stats(self) -> StoreStats:
        return StoreStats("third-party", len(self.data), sum(map(len, self.data.values())))

    def gc(self) -> GcResult:
        return GcResult(0, 0)

    def close(self) -> None:
        pass

    def __enter__(self) -> ThirdParty:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def test_a_third_party_store_is_checked_with_get(tmp_path: Path) -> None:
    """Without ``epoch``/``missing`` every key is checked at every request: correct, costly."""
    store = ThirdParty()
    assert isinstance(store, ArchiveStore) and not isinstance(store, Holding)
    messages = history(5)
    with toolkeep.Session(workspace=tmp_path / "ws", store=store) as session:
        for n in range(1, 7):
            session.prepare(messages[:n], "anthropic")
        store.data.clear()
        out, _ = session.prepare(messages, "anthropic")
        keys = markers(out)
        assert keys and all(k in store.data for k in keys)


# ------------------------------------------------------------------------------- properties

_lose = st.sampled_from(["clear", "delete-one", "none"])


@given(case=long_sessions(max_blocks=6), at=st.integers(1, 14), how=_lose)
@property_settings(25)
def test_after_any_loss_the_next_request_recalls_and_is_unchanged(
    case: tuple[str, list[Any]], at: int, how: str
) -> None:
    """After a loss at any request: every marker of the next prepared request recalls
    byte-exact, the bytes are those sent without the loss, and a fresh session on the same
    request (incremental or not) gives the same bytes."""
    _, messages = case
    base = Path(tempfile.mkdtemp(prefix="toolkeep-loss-"))
    try:
        lost_dir = base / "lost"
        stores = {"lost": FileStore(lost_dir), "kept": FileStore(base / "kept")}
        sessions = {
            name: toolkeep.Session(toolkeep.Config(), workspace=base / "ws", store=store)
            for name, store in stores.items()
        }
        sessions["lost"].marker_recheck_every = 1  # a single entry lost is found at once
        at = min(at, len(messages))
        try:
            for n in range(1, len(messages) + 1):
                if n == at and how == "clear":
                    shutil.rmtree(lost_dir)
                if n == at and how == "delete-one":
                    for name in sorted(p.name for p in lost_dir.glob("*.txt"))[:1]:
                        (lost_dir / name).unlink()
                lost, _ = sessions["lost"].prepare(messages[:n], "anthropic")
                kept, _ = sessions["kept"].prepare(messages[:n], "anthropic")
                assert lost == kept
                if n >= at:  # a marker quoted in a tool's output names nothing in either store
                    keys = recalled(stores["kept"], markers(lost))
                    assert recalled(stores["lost"], keys) == keys
            with toolkeep.Session(toolkeep.Config(), workspace=base / "ws", store=stores["lost"]) as fresh:
                assert fresh.prepare(messages, "anthropic")[0] == lost
        finally:
            for session in sessions.values():
                session.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ------------------------------------------------------------------------------- the stores


def test_epochs_change_with_a_loss(tmp_path: Path, redis_url: str) -> None:
    prefix = redis_server.fresh_prefix()
    with (
        RedisStore(redis_url, prefix=prefix) as r,
        SQLiteStore(tmp_path / "a.db") as s,
        FileStore(tmp_path / "dir") as f,
        MemoryStore() as m,
    ):
        stores: list[StoreBase] = [r, s, f, m]
        for store in stores:
            store.put("0123456789abcdef", "x")
        before = [store.epoch() for store in stores]
        assert before == [store.epoch() for store in stores]  # stable while nothing is lost
        for store in stores:
            assert store.missing(["0123456789abcdef", "fedcba9876543210"]) == {"fedcba9876543210"}
        r.clear()
        for name in ("a.db", "a.db-wal", "a.db-shm"):
            (tmp_path / name).unlink(missing_ok=True)
        shutil.rmtree(tmp_path / "dir")
        after = [store.epoch() for store in stores[:3]]
        assert all(a != b for a, b in zip(before, after, strict=False))
        for store in stores[:3]:
            assert store.missing(["0123456789abcdef"]) == {"0123456789abcdef"}
            store.put("0123456789abcdef", "x")
            assert store.get("0123456789abcdef") == "x"
        r.clear()


def test_sqlite_follows_a_file_made_again_by_another_process(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    with SQLiteStore(db) as mine:
        mine.put("0123456789abcdef", "old")
        for name in ("a.db", "a.db-wal", "a.db-shm"):  # rm a.db*
            (tmp_path / name).unlink(missing_ok=True)
        code = (
            "import sys; from toolkeep.stores.sqlite import SQLiteStore\n"
            "with SQLiteStore(sys.argv[1]) as s: s.put('fedcba9876543210', 'theirs')\n"
        )
        subprocess.run([sys.executable, "-c", code, str(db)], check=True)
        assert mine.get("fedcba9876543210") == "theirs"  # the file at the path, not the deleted one
        assert mine.get("0123456789abcdef") is None
        mine.put("0123456789abcdef", "again")
    with SQLiteStore(db) as later:
        assert later.get("0123456789abcdef") == "again"
        assert later.get("fedcba9876543210") == "theirs"


# ------------------------------------------------------------------- the bench, at test size


@pytest.mark.parametrize(
    "loss", ["redis FLUSHALL", "redis restarted, no persistence", "sqlite deleted, made again"]
)
def test_the_bench_losses_on_a_real_trajectory(loss: str, tmp_path: Path) -> None:
    """bench/faults.py's losses on a short real trajectory: every marker of every request
    after the loss recalls, through a new opening of the store."""
    from bench.faults import LOSSES, replay

    from .conftest import BENCH_DATA, load_trajectory, shared_or_skip

    shared_or_skip()
    no_binary = shutil.which("redis-server") is None and not Path(redis_server.FALLBACK_BINARY).exists()
    if loss.startswith("redis") and no_binary:
        pytest.skip("no redis-server binary")
    history = load_trajectory(
        BENCH_DATA / "anthropic" / "mini-swe-agent__live-swe-agent__gpt-5-mini__django__django-13590.json"
    )
    outcome = replay(loss, history, tmp_path, start=0.4, faults=LOSSES)
    after = outcome.after
    assert after is not None and after.requests > 0 and after.markers > 0
    assert after.recalled == after.markers, after.dead
    assert outcome.prepared == outcome.requests and outcome.check.dangling == 0
