"""An archive store of one file per original in a directory (by default, the session workspace).

The file's modification time is the entry's last use: ``get`` and a repeated ``put`` set it to the
store's clock, so least-recently-used order and TTL survive a restart and are shared by every
process that opens the same directory.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from pathlib import Path

from ..exceptions import StoreError
from ..workspace import atomic_write
from ._base import Clock, GcResult, Limits, StoreBase, StoreStats, decode_text, utf8_size, validate_key

__all__ = ["FileStore"]

_NAME = re.compile(r"[0-9a-f]{16}\.txt")


class FileStore(StoreBase):
    """Stores each original as ``<directory>/<key>.txt`` (0600, in a 0700 directory), written
    atomically. Hits and misses are counted per process; the rest lives in the directory."""

    backend = "file"

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        limits: Limits | None = None,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(limits=limits, clock=clock)
        self.directory = Path(directory)
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create archive directory {self.directory}: {exc.strerror}") from exc
        self._directory = os.fspath(self.directory)
        self._lock = threading.Lock()

    def _path(self, key: str) -> str:
        return os.path.join(self._directory, f"{validate_key(key)}.txt")

    def put(self, key: str, text: str) -> None:
        """Store ``text`` under ``key`` once; evict the least recently used files over the caps."""
        path = self._path(key)
        with self._lock:
            now = self.clock()
            try:
                self._expire_all(now)
                try:
                    os.utime(path, (now, now))  # there already: a use (one call, no stat first)
                    return
                except FileNotFoundError:
                    pass
                if self.limits.max_bytes is not None:
                    self.limits.check_fits(key, utf8_size(text))
                atomic_write(path, text)  # written a chunk at a time: no encoded copy of a huge text
                if self.clock is not time.time:  # else the write stamped the file with it
                    os.utime(path, (now, now))
                self._evict(keep=path)
            except OSError as exc:
                raise StoreError(f"cannot archive {key} in {self.directory}: {exc.strerror}") from exc

    def get(self, key: str) -> str | None:
        """The original under ``key``, or ``None``; a hit counts as a use."""
        path = self._path(key)
        with self._lock:
            now = self.clock()
            try:
                used = os.stat(path).st_mtime
                if self.limits.expired(used, now):
                    os.unlink(path)
                    self._expirations += 1
                    self._misses += 1
                    return None
                with open(path, "rb") as handle:
                    data = handle.read()
                os.utime(path, (now, now))
            except FileNotFoundError:
                self._misses += 1
                return None
            except OSError as exc:
                raise StoreError(f"cannot read {key} from {self.directory}: {exc.strerror}") from exc
            self._hits += 1
        return decode_text(data)

    def delete(self, key: str) -> bool:
        """Remove ``key``; ``True`` if it was there."""
        path = self._path(key)
        with self._lock:
            try:
                os.unlink(path)
            except FileNotFoundError:
                return False
            except OSError as exc:
                raise StoreError(f"cannot delete {key} from {self.directory}: {exc.strerror}") from exc
        return True

    def stats(self) -> StoreStats:
        """Entries and bytes on disk now, and this process's counts."""
        with self._lock:
            entries = self._scan()
            return self._stats(len(entries), sum(size for _, size, _ in entries))

    def gc(self) -> GcResult:
        """Delete expired files and evict down to the caps."""
        with self._lock:
            expired, evicted = self._expirations, self._evictions
            try:
                self._expire_all(self.clock())
                self._evict(keep=None)
            except OSError as exc:
                raise StoreError(f"cannot collect {self.directory}: {exc.strerror}") from exc
            return GcResult(self._expirations - expired, self._evictions - evicted)

    def _scan(self) -> list[tuple[Path, int, float]]:
        """``(path, size, last use)`` of every stored original, least recently used first."""
        out: list[tuple[Path, int, float]] = []
        try:
            names = os.listdir(self.directory)
        except OSError as exc:
            raise StoreError(f"cannot list {self.directory}: {exc.strerror}") from exc
        for name in names:
            if not _NAME.fullmatch(name):
                continue  # temp files of a write in progress, or not ours
            with contextlib.suppress(FileNotFoundError):
                st = os.stat(self.directory / name, follow_symlinks=False)
                out.append((self.directory / name, st.st_size, st.st_mtime))
        out.sort(key=lambda e: (e[2], e[0].name))
        return out

    def _expire_all(self, now: float) -> None:
        if self.limits.ttl is None:
            return
        for path, _, used in self._scan():
            if not self.limits.expired(used, now):
                break
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                self._expirations += 1

    def _evict(self, keep: str | None) -> None:
        if self.limits.max_bytes is None and self.limits.max_entries is None:
            return
        entries = self._scan()
        # the entry just written is the newest and must not pay for its own arrival
        kept = None if keep is None else os.path.basename(keep)
        by_age = [(p.name, size) for p, size, _ in entries if p.name != kept]
        total = sum(size for _, size, _ in entries)
        for name in self.limits.victims(by_age, total, len(entries)):
            with contextlib.suppress(FileNotFoundError):
                (self.directory / name).unlink()
                self._evictions += 1

    def __repr__(self) -> str:
        return f"FileStore({str(self.directory)!r})"
