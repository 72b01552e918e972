"""The proxy's statistics, kept where every replica reads them and a restart finds them.

Totals (requests, what was done with them, sizes, cache-aware costs, upstream statuses) and one
record per conversation (its route, when it was first and last seen, and the same figures) are
added up in the proxy's store: in Redis when the proxy's store is a Redis server (hashes under
the store's prefix, incremented atomically, so replicas add to the same figures), else in
``stats.db``, a SQLite file in the proxy's workspace (which replicas share when they share the
workspace). A request's figures go to a :class:`Recorder`, which adds them up in memory and
writes them in one batch a second (and before every read), off the request's path; a write that
fails is counted as a store error and retried with the next batch.

A conversation's record is kept for :data:`KEEP_SECONDS` after it was last seen.
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from ..exceptions import StoreError
from ..stores import ArchiveStore
from . import metrics

__all__ = ["KEEP_SECONDS", "Recorder", "RedisStats", "SQLiteStats", "StatsBackend", "stats_backend"]

KEEP_SECONDS = 30 * 86_400.0
"""How long a conversation's record outlives its last request."""

Deltas = dict[str, float]


class StatsBackend(Protocol):
    """Where the figures are added up (thread-safe)."""

    where: str

    def add(self, totals: Deltas, conversations: Mapping[str, tuple[str, float, Deltas]]) -> None:
        """Add ``totals`` to the totals, and to each conversation (by key: its route, the time of
        its last request, its figures) its own; a conversation not seen before counts as
        ``conversations_started``."""

    def totals(self) -> Deltas: ...

    def conversation(self, key: str) -> dict[str, Any] | None: ...

    def conversations(self, limit: int) -> list[dict[str, Any]]:
        """The ``limit`` conversations seen last, newest first."""

    def close(self) -> None: ...


class SQLiteStats:
    """The figures in a SQLite file (WAL: replicas on one machine or a shared disk add to it)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.where = f"sqlite:{self.path}"
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(
                "CREATE TABLE IF NOT EXISTS totals (name TEXT PRIMARY KEY, value REAL NOT NULL);"
                "CREATE TABLE IF NOT EXISTS conversations (key TEXT PRIMARY KEY, route TEXT NOT NULL,"
                " first_seen REAL NOT NULL, last_seen REAL NOT NULL);"
                "CREATE INDEX IF NOT EXISTS conversations_seen ON conversations (last_seen);"
                "CREATE TABLE IF NOT EXISTS figures (key TEXT NOT NULL, name TEXT NOT NULL,"
                " value REAL NOT NULL, PRIMARY KEY (key, name));"
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the proxy's statistics {self.path}: {exc}") from exc
        self._lock = threading.Lock()

    def add(self, totals: Deltas, conversations: Mapping[str, tuple[str, float, Deltas]]) -> None:
        with self._lock, self._errors():
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                started = 0
                for key, (route, seen, figures) in conversations.items():
                    made = db.execute(
                        "INSERT OR IGNORE INTO conversations VALUES (?, ?, ?, ?)", (key, route, seen, seen)
                    ).rowcount
                    started += made > 0
                    if not made:
                        db.execute(
                            "UPDATE conversations SET last_seen = max(last_seen, ?) WHERE key = ?",
                            (seen, key),
                        )
                    db.executemany(
                        "INSERT INTO figures VALUES (?, ?, ?) ON CONFLICT(key, name) DO UPDATE SET"
                        " value = value + excluded.value",
                        [(key, name, value) for name, value in figures.items()],
                    )
                rows = {**totals, "conversations_started": totals.get("conversations_started", 0) + started}
                db.executemany(
                    "INSERT INTO totals VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
                    [(name, value) for name, value in rows.items() if value],
                )
                old = time.time() - KEEP_SECONDS
                db.execute(
                    "DELETE FROM figures WHERE key IN (SELECT key FROM conversations WHERE last_seen < ?)",
                    (old,),
                )
                db.execute("DELETE FROM conversations WHERE last_seen < ?", (old,))
                db.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise

    def totals(self) -> Deltas:
        with self._lock, self._errors():
            return {name: value for name, value in self._db.execute("SELECT name, value FROM totals")}

    def conversation(self, key: str) -> dict[str, Any] | None:
        with self._lock, self._errors():
            row = self._db.execute(
                "SELECT key, route, first_seen, last_seen FROM conversations WHERE key = ?", (key,)
            ).fetchone()
            if row is None:
                return None
            figures = dict(
                self._db.execute("SELECT name, value FROM figures WHERE key = ?", (key,)).fetchall()
            )
        return _record(row[0], row[1], row[2], row[3], figures)

    def conversations(self, limit: int) -> list[dict[str, Any]]:
        with self._lock, self._errors():
            rows = self._db.execute(
                "SELECT key, route, first_seen, last_seen FROM conversations ORDER BY last_seen DESC LIMIT ?",
                (limit,),
            ).fetchall()
            out = []
            for key, route, first, last in rows:
                figures = dict(
                    self._db.execute("SELECT name, value FROM figures WHERE key = ?", (key,)).fetchall()
                )
                out.append(_record(key, route, first, last, figures))
        return out

    @contextlib.contextmanager
    def _errors(self) -> Any:
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreError(f"the proxy's statistics {self.path}: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            self._db.close()


class RedisStats:
    """The figures in Redis, beside the store's own keys (under its prefix): a hash of totals, a
    hash per conversation, and a sorted set of conversations by their last request."""

    def __init__(self, url: str, prefix: str, *, timeout: float = 5.0) -> None:
        import redis

        self.where = f"redis prefix {prefix}"
        self._client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
        self._errors_type = redis.RedisError
        tag = "{" + prefix + "}"
        self._totals, self._recent, self._conversation = (
            f"{tag}:stats:totals",
            f"{tag}:stats:recent",
            f"{tag}:stats:c:",
        )

    def add(self, totals: Deltas, conversations: Mapping[str, tuple[str, float, Deltas]]) -> None:
        with self._errors():
            pipe = self._client.pipeline(transaction=False)
            keep = math.ceil(KEEP_SECONDS)
            for key, (route, seen, figures) in conversations.items():
                name = self._conversation + key
                pipe.hsetnx(name, "first_seen", repr(seen))
                pipe.hset(name, mapping={"route": route, "last_seen": repr(seen)})
                for field, value in figures.items():
                    pipe.hincrbyfloat(name, field, value)
                pipe.expire(name, keep)
                pipe.zadd(self._recent, {key: seen})
            pipe.zremrangebyscore(self._recent, "-inf", time.time() - KEEP_SECONDS)
            for field, value in totals.items():
                if value:
                    pipe.hincrbyfloat(self._totals, field, value)
            results = pipe.execute()
            started, i = 0, 0
            for _, (_, _, figures) in conversations.items():
                started += bool(results[i])
                i += 2 + len(figures) + 2
            if started:
                self._client.hincrbyfloat(self._totals, "conversations_started", started)

    def totals(self) -> Deltas:
        with self._errors():
            raw = self._client.hgetall(self._totals)
        return {_text(k): float(v) for k, v in raw.items()}

    def conversation(self, key: str) -> dict[str, Any] | None:
        with self._errors():
            raw = self._client.hgetall(self._conversation + key)
        return _from_hash(key, raw) if raw else None

    def conversations(self, limit: int) -> list[dict[str, Any]]:
        with self._errors():
            keys = [_text(k) for k in self._client.zrevrange(self._recent, 0, max(limit, 1) - 1)]
            pipe = self._client.pipeline(transaction=False)
            for key in keys:
                pipe.hgetall(self._conversation + key)
            found = pipe.execute()
        return [_from_hash(key, raw) for key, raw in zip(keys, found, strict=True) if raw]

    @contextlib.contextmanager
    def _errors(self) -> Any:
        try:
            yield
        except self._errors_type as exc:
            raise StoreError(f"the proxy's statistics in Redis: {type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        self._client.close()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _from_hash(key: str, raw: Mapping[Any, Any]) -> dict[str, Any]:
    values = {_text(k): _text(v) for k, v in raw.items()}
    route = values.pop("route", "")
    first = float(values.pop("first_seen", "0"))
    last = float(values.pop("last_seen", "0"))
    return _record(key, route, first, last, {k: float(v) for k, v in values.items()})


def _record(key: str, route: str, first: float, last: float, figures: Mapping[str, float]) -> dict[str, Any]:
    """One conversation's statistics, as the per-conversation view shows them."""
    f = {name: figures.get(name, 0.0) for name in _FIGURES}
    return {
        "conversation": key,
        "route": route,
        "first_seen": round(first, 3),
        "last_seen": round(last, 3),
        **figures_document(f),
    }


_FIGURES = (
    "requests", "prepared", "failed_open", "tokens_before", "tokens_after", "repairs", "cuts",
    "cost_unmanaged", "cost_managed", "cache_read", "cache_write", "dollars_unmanaged",
    "dollars_managed", "store_errors",
)  # fmt: skip

TOKENS_UNIT = "chars/4"
TOKENS_COUNTED = (
    "chars/4 of each request's serialized history, as `toolkeep replay --tokens chars` counts it "
    "(an estimate, not the provider's tokenizer)"
)
COST_UNIT = (
    "input tokens at the base price; a prefix shared with the conversation's last request is read "
    "from the cache, the rest written to it, at the prices of the configured (or the format's) price list"
)


def figures_document(f: Mapping[str, float]) -> dict[str, Any]:
    """The figures as the statistics show them: the size of the histories and their
    cache-aware cost, each labelled with its unit, and never a share of one beside the other."""
    before, after = int(f.get("tokens_before", 0)), int(f.get("tokens_after", 0))
    unmanaged, managed = round(f.get("cost_unmanaged", 0.0), 1), round(f.get("cost_managed", 0.0), 1)
    return {
        "requests": int(f.get("requests", 0)),
        "prepared": int(f.get("prepared", 0)),
        "failed_open": int(f.get("failed_open", 0)),
        "tokens": {
            "unit": TOKENS_UNIT,
            "counted": TOKENS_COUNTED,
            "before": before,
            "after": after,
            "saved": before - after,
            "saved_share": round((before - after) / before, 4) if before else 0.0,
        },
        "repairs": int(f.get("repairs", 0)),
        "cuts": int(f.get("cuts", 0)),
        "store_errors": int(f.get("store_errors", 0)),
        "cost": {
            "unit": COST_UNIT,
            "unmanaged": unmanaged,
            "managed": managed,
            "saved": round(unmanaged - managed, 1),
            "ratio": round(managed / unmanaged, 4) if unmanaged else None,
            "cache_read_tokens": int(f.get("cache_read", 0)),
            "cache_write_tokens": int(f.get("cache_write", 0)),
            "dollars_unmanaged": round(f.get("dollars_unmanaged", 0.0), 4),
            "dollars_managed": round(f.get("dollars_managed", 0.0), 4),
        },
    }


def stats_backend(store: ArchiveStore, workspace: Path) -> StatsBackend:
    """Where the proxy whose store is ``store`` and workspace ``workspace`` keeps its statistics:
    beside a Redis store, else in the workspace's ``stats.db``."""
    if getattr(store, "backend", None) == "redis":
        url, prefix = getattr(store, "url", None), getattr(store, "prefix", None)
        if isinstance(url, str) and isinstance(prefix, str):
            return RedisStats(url, prefix)
    return SQLiteStats(workspace / "stats.db")


class Recorder:
    """Adds up each request's figures in memory and writes them to ``backend`` in one batch every
    ``interval`` seconds (a thread of its own), and before every read."""

    def __init__(
        self, backend: StatsBackend, *, interval: float = 1.0, clock: Callable[[], float] = time.time
    ) -> None:
        self.backend = backend
        self.interval = interval
        self.clock = clock
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self._totals: Deltas = {}
        self._conversations: dict[str, tuple[str, float, Deltas]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="toolkeep-proxy-stats", daemon=True)
        self._thread.start()

    def add(self, totals: Mapping[str, float], conversation: str | None = None, route: str = "",
            figures: Mapping[str, float] | None = None) -> None:  # fmt: skip
        """Count ``totals``, and ``figures`` for ``conversation`` (of ``route``)."""
        with self._lock:
            _merge(self._totals, totals)
            if conversation is not None:
                now = self.clock()
                _, _, own = self._conversations.get(conversation, (route, now, {}))
                _merge(own, figures or {})
                self._conversations[conversation] = (route, now, own)

    def flush(self) -> None:
        """Write what was counted since the last write (kept for the next one if it fails)."""
        with self._flushing:
            with self._lock:
                totals, conversations = self._totals, self._conversations
                self._totals, self._conversations = {}, {}
            if not totals and not conversations:
                return
            try:
                self.backend.add(totals, conversations)
            except (StoreError, OSError) as exc:
                metrics.store_error("stats")
                with self._lock:  # put back, added to what came meanwhile
                    _merge(self._totals, totals)
                    for key, (route, seen, figures) in conversations.items():
                        _, later, own = self._conversations.get(key, (route, seen, {}))
                        _merge(own, figures)
                        self._conversations[key] = (route, max(seen, later), own)
                raise StoreError(str(exc)) from exc

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            with contextlib.suppress(StoreError):
                self.flush()

    def close(self) -> None:
        """Write what is left and stop."""
        self._stop.set()
        self._thread.join(timeout=10)
        with contextlib.suppress(StoreError):
            self.flush()
        self.backend.close()


def _merge(into: Deltas, more: Mapping[str, float]) -> None:
    for name, value in more.items():
        into[name] = into.get(name, 0.0) + value
