"""An archive store in one SQLite file: local, no server, and it outlives the session.

Point a session at ``sqlite:///path/archive.db`` and a resumed session (another process, a day
later) can still recall what an earlier one archived. Counters live in the database too, so
``toolkeep store stats`` sees every process's hits and misses. Originals are stored as UTF-8 BLOBs
so that lone surrogates survive.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import stat
import threading
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import TypeVar

from ..exceptions import StoreError, StoreNotFoundError
from ..shorten import CHUNK_CHARS, utf8_chunks
from ._base import (
    PIN_LEASE,
    ArchiveStore,
    Clock,
    GcResult,
    Limits,
    StoreBase,
    StoreStats,
    decode_text,
    encode_text,
    new_epoch,
    utf8_size,
    validate_key,
)

__all__ = ["SQLiteStore"]

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    key  TEXT PRIMARY KEY,
    body BLOB NOT NULL,
    size INTEGER NOT NULL,
    used REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_by_use ON entries (used, key);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pins (
    key   TEXT NOT NULL,
    owner TEXT NOT NULL,
    until REAL NOT NULL,
    PRIMARY KEY (key, owner)
);
"""
_HAS_PINS = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'pins'"
_SHARED_PINS = "SELECT key FROM pins WHERE until > ?"
_META = "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)"

_COUNTERS = ("hits", "misses", "evictions", "expirations")
_HAS_TABLE = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'entries'"
_SIDE_FILES = ("-wal", "-shm", "-journal")
_OPEN_FLAGS = os.O_RDWR | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)

log = logging.getLogger("toolkeep")


def _make_private(path: Path, *, create: bool) -> None:
    """Create ``path`` (0600) if asked and missing, and make an existing one 0600: it holds
    originals. A file of another user that is wider is left as it is, with a warning."""
    fd = os.open(path, _OPEN_FLAGS | (os.O_CREAT if create else 0), 0o600)
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        if mode & 0o077:
            try:
                os.fchmod(fd, 0o600)
            except PermissionError:
                log.warning("toolkeep: %s is mode %04o and not ours to make 0600", path, mode)
    finally:
        os.close(fd)


class SQLiteStore(StoreBase):
    """Originals in a SQLite database file: it and its ``-wal``/``-shm`` files are made 0600 (an
    existing database too), its directory 0700 if missing. With ``create=False`` nothing is
    created: a missing file (or one without the archive's table) is :class:`StoreNotFoundError`.

    A file deleted (and perhaps made again by another process) while the store is open is
    noticed at the next call, by the path's identity: the store opens the file now at the path
    (creating it, unless ``create=False``) rather than go on with the deleted one, which no
    other process sees, and its :meth:`epoch` changes."""

    backend = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        limits: Limits | None = None,
        clock: Clock | None = None,
        create: bool = True,
    ) -> None:
        super().__init__(limits=limits, clock=clock)
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._shared_pins = False
        self._create = create
        self._closed = False
        self._identity: tuple[int, int] | None = None
        self._open(create)

    def _open(self, create: bool) -> None:
        """Connect to the file at the path (see the class docstring)."""
        try:
            if create:
                self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            # the file exists, 0600, before sqlite opens it (sqlite gives -wal/-shm its mode)
            _make_private(self.path, create=create)
            for suffix in _SIDE_FILES:  # left by an earlier opening, perhaps with a wider mode
                with contextlib.suppress(FileNotFoundError):
                    _make_private(Path(f"{self.path}{suffix}"), create=False)
            self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            self._identity = _identity(os.stat(self.path))
            if not create and not self._db.execute(_HAS_TABLE).fetchone():
                raise StoreNotFoundError(
                    f"SQLite archive {self.path} holds no archive: nothing was archived there"
                )
            self._db.execute("PRAGMA journal_mode=WAL")
            # with WAL, NORMAL never corrupts the file; a power cut may only lose the last uses
            # and originals, which the session would archive again. FULL costs an fsync per get.
            self._db.execute("PRAGMA synchronous=NORMAL")
            if create:
                self._db.executescript(_SCHEMA)
            # a file made before pins were shared has no such table: its pins stay in-process
            self._shared_pins = bool(self._db.execute(_HAS_PINS).fetchone())
        except FileNotFoundError as exc:
            self._drop()
            if not create:
                raise StoreNotFoundError(
                    f"no SQLite archive at {self.path}: nothing was archived there"
                ) from exc
            raise StoreError(f"cannot open SQLite archive {self.path}: {exc}") from exc
        except (OSError, sqlite3.Error) as exc:
            self._drop()
            raise StoreError(f"cannot open SQLite archive {self.path}: {exc}") from exc
        except StoreError:
            self._drop()
            raise

    def put(self, key: str, text: str) -> None:
        """Store ``text`` under ``key`` once; evict the least recently used rows over the caps."""
        validate_key(key)
        # a huge original goes in a chunk at a time through incremental blob I/O, so that it is
        # never held twice (as text and as encoded bytes)
        big = len(text) > CHUNK_CHARS
        body = b"" if big else encode_text(text)
        size = utf8_size(text) if big else len(body)

        def run(db: sqlite3.Connection) -> None:
            now = self.clock()
            self._expire(db, now)
            if db.execute("UPDATE entries SET used = ? WHERE key = ?", (now, key)).rowcount:
                return
            self.limits.check_fits(key, size)
            if big:
                row = db.execute("INSERT INTO entries VALUES (?, zeroblob(?), ?, ?)", (key, size, size, now))
                assert row.lastrowid is not None
                with db.blobopen("entries", "body", row.lastrowid) as blob:
                    for chunk in utf8_chunks(text):
                        blob.write(chunk)
            else:
                db.execute("INSERT INTO entries VALUES (?, ?, ?, ?)", (key, body, size, now))
            self._evict(db, keep=key)

        self._write(run)

    def get(self, key: str) -> str | None:
        """The original under ``key``, or ``None``; a hit counts as a use."""
        validate_key(key)

        def run(db: sqlite3.Connection) -> bytes | None:
            now = self.clock()
            row = db.execute("SELECT body, used FROM entries WHERE key = ?", (key,)).fetchone()
            if row is not None and self.limits.expired(row[1], now) and key not in self._all_pins(db, now):
                db.execute("DELETE FROM entries WHERE key = ?", (key,))
                self._count(db, "expirations")
                row = None
            if row is None:
                self._count(db, "misses")
                return None
            db.execute("UPDATE entries SET used = ? WHERE key = ?", (now, key))
            self._count(db, "hits")
            return bytes(row[0])

        body = self._write(run)
        return None if body is None else decode_text(body)

    def epoch(self) -> str:
        """The file's identity and the id in its ``meta`` table (written when missing): a file
        deleted and made again has a new one. A read, but the first time in a file."""
        made = new_epoch()

        def read(db: sqlite3.Connection) -> str | None:
            try:
                row = db.execute("SELECT value FROM meta WHERE name = 'epoch'").fetchone()
            except sqlite3.OperationalError:  # a file made before epochs: no such table yet
                return None
            return None if row is None else str(row[0])

        def write(db: sqlite3.Connection) -> str:
            db.execute(_META)
            db.execute("INSERT OR IGNORE INTO meta VALUES ('epoch', ?)", (made,))
            (value,) = db.execute("SELECT value FROM meta WHERE name = 'epoch'").fetchone()
            return str(value)

        value = self._read(read) or self._write(write)
        return f"{self._identity}:{value}"

    def missing(self, keys: Collection[str]) -> frozenset[str]:
        """Those of ``keys`` without a row (expired ones, not pinned, count as missing); one
        query, not a use."""
        wanted = sorted({validate_key(key) for key in keys})

        def run(db: sqlite3.Connection) -> frozenset[str]:
            now = self.clock()
            held: set[str] = set()
            for n in range(0, len(wanted), 500):  # within SQLite's limit on parameters
                batch = wanted[n : n + 500]
                rows = db.execute(
                    f"SELECT key, used FROM entries WHERE key IN ({','.join('?' * len(batch))})", batch
                ).fetchall()
                expired = [key for key, used in rows if self.limits.expired(used, now)]
                pins = self._all_pins(db, now) if expired else ()
                held.update(key for key, used in rows if not self.limits.expired(used, now) or key in pins)
            return frozenset(wanted) - held

        return self._read(run) if wanted else frozenset()

    def delete(self, key: str) -> bool:
        """Remove ``key``; ``True`` if it was there."""
        validate_key(key)
        return self._write(lambda db: db.execute("DELETE FROM entries WHERE key = ?", (key,)).rowcount > 0)

    def stats(self) -> StoreStats:
        """Entries and bytes now, and the counts of every process that used this file."""

        def run(db: sqlite3.Connection) -> StoreStats:
            entries, size = db.execute("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM entries").fetchone()
            counts = dict(db.execute("SELECT name, value FROM counters").fetchall())
            hits, misses, evictions, expirations = (int(counts.get(name, 0)) for name in _COUNTERS)
            lim = self.limits
            return StoreStats(
                self.backend,
                entries,
                size,
                hits,
                misses,
                evictions,
                expirations,
                lim.max_bytes,
                lim.max_entries,
                lim.ttl,
            )

        return self._write(run)

    def gc(self) -> GcResult:
        """Delete expired rows and evict down to the caps."""

        def run(db: sqlite3.Connection) -> GcResult:
            return GcResult(self._expire(db, self.clock()), self._evict(db, keep=None))

        return self._write(run)

    def pin(self, owner: str, keys: Iterable[str]) -> None:
        """Pin ``keys`` here and in the file (for :data:`PIN_LEASE` seconds), so that every
        process writing to it keeps them."""
        keys = tuple(keys)
        super().pin(owner, keys)
        if self._shared_pins and keys:
            until = self.clock() + PIN_LEASE
            self._write(
                lambda db: db.executemany(
                    "INSERT OR REPLACE INTO pins VALUES (?, ?, ?)", [(k, owner, until) for k in keys]
                )
            )

    def release(self, owner: str) -> None:
        """Drop ``owner``'s pins, here and in the file (and every lapsed one)."""
        super().release(owner)
        if self._shared_pins and not self._closed:
            now = self.clock()
            self._write(lambda db: db.execute("DELETE FROM pins WHERE owner = ? OR until <= ?", (owner, now)))

    def _all_pins(self, db: sqlite3.Connection, now: float) -> Collection[str]:
        """The keys pinned by this process or, in the file, by any other."""
        mine = self.pinned()
        if not self._shared_pins:
            return mine
        return mine | {key for (key,) in db.execute(_SHARED_PINS, (now,))}

    def _new_state_store(self, limits: Limits) -> ArchiveStore:
        """A database file beside this one (``a.db`` -> ``a.db-state``)."""
        return SQLiteStore(self.path.with_name(f"{self.path.name}-state"), limits=limits, clock=self.clock)

    def close(self) -> None:
        """Close the database connection (and the state store's). Safe to call more than once."""
        with self._lock:
            self._closed = True
            self._drop()
        if self._state is not None:
            self._state.close()

    def _drop(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def _read(self, run: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``run``, which only reads, outside a write transaction (other writers go on)."""
        with self._lock:
            if self._closed:
                raise StoreError(f"SQLite archive {self.path} is closed")
            self._follow_path()
            assert self._db is not None
            try:
                return run(self._db)
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite archive {self.path}: {exc}") from exc

    def _write(self, run: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``run`` in one immediate transaction: other processes wait, nobody sees half of it."""
        with self._lock:
            if self._closed:
                raise StoreError(f"SQLite archive {self.path} is closed")
            self._follow_path()
            db = self._db
            assert db is not None
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    result = run(db)
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite archive {self.path}: {exc}") from exc
            return result

    def _follow_path(self) -> None:
        """Reconnect when the file at the path is not the one open (deleted, perhaps made
        again): a stat per call. The old connection is closed without harm to the new file
        (SQLite leaves the write-ahead log of a moved database alone)."""
        try:
            now = _identity(os.stat(self.path))
        except FileNotFoundError:
            now = None
        except OSError as exc:
            raise StoreError(f"SQLite archive {self.path}: {exc.strerror}") from exc
        if self._db is not None and now == self._identity:
            return
        log.warning(
            "toolkeep: SQLite archive %s was deleted or replaced; opening the file there now", self.path
        )
        self._drop()
        self._open(self._create)

    def _count(self, db: sqlite3.Connection, name: str, n: int = 1) -> None:
        if n:
            db.execute(
                "INSERT INTO counters VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = value + ?",
                (name, n, n),
            )

    def _expire(self, db: sqlite3.Connection, now: float) -> int:
        if self.limits.ttl is None:
            return 0
        # expired(used, now) is now - used >= ttl; pinned keys stay. Usually nothing has expired:
        # the pins (as many as the session's originals) are read only when something has
        expired = [
            key for (key,) in db.execute("SELECT key FROM entries WHERE used <= ?", (now - self.limits.ttl,))
        ]
        if not expired:
            return 0
        pinned = self._all_pins(db, now)
        gone = [(key,) for key in expired if key not in pinned]
        db.executemany("DELETE FROM entries WHERE key = ?", gone)
        self._count(db, "expirations", len(gone))
        return len(gone)

    def _evict(self, db: sqlite3.Connection, keep: str | None) -> int:
        lim = self.limits
        if lim.max_bytes is None and lim.max_entries is None:
            return 0
        entries, total = db.execute("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM entries").fetchone()
        if not lim.over(total, entries):
            return 0
        rows = db.execute(
            "SELECT key, size FROM entries WHERE key IS NOT ? ORDER BY used, key", (keep,)
        ).fetchall()
        victims = lim.victims(rows, total, entries, self._all_pins(db, self.clock()), keep)
        db.executemany("DELETE FROM entries WHERE key = ?", [(k,) for k in victims])
        self._count(db, "evictions", len(victims))
        return len(victims)

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"


def _identity(info: os.stat_result) -> tuple[int, int]:
    return (info.st_dev, info.st_ino)
