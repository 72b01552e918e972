"""An archive store of one file per original in a directory (by default, the session workspace).

The file's modification time is the entry's last use: ``get`` and a repeated ``put`` set it to the
store's clock, so least-recently-used order and TTL survive a restart and are shared by every
process that opens the same directory.

Every file operation goes through a descriptor of the directory, opened without following a
symbolic link in its last component, and never follows a link in place of an entry: a link
planted there (to make an original land outside, count as stored without being written, or make
``recall`` print another file) is refused with a :class:`StoreError` that says so.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import threading
import time
from collections.abc import Collection
from pathlib import Path

from ..exceptions import StoreError, StoreNotFoundError
from ..workspace import atomic_write, opened_directory, own_file_exists, refused_link
from ._base import (
    ArchiveStore,
    Clock,
    GcResult,
    Limits,
    StoreBase,
    StoreStats,
    decode_text,
    new_epoch,
    utf8_size,
    validate_key,
)

__all__ = ["FileStore"]

_NAME = re.compile(r"[0-9a-f]{16}\.txt")
_EPOCH = ".epoch"
"""The file that names the directory's epoch (:meth:`FileStore.epoch`); never an entry."""
_READ_FLAGS = (
    os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
)


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
        create: bool = True,
    ) -> None:
        """``create=False`` opens the directory only if it is there (to read it): a missing one is
        :class:`StoreNotFoundError`, and nothing is created."""
        super().__init__(limits=limits, clock=clock)
        self.directory = Path(directory)
        self._epoch_path = os.path.join(self.directory, _EPOCH)
        self._create = create
        try:
            if create:
                self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            with opened_directory(self.directory):  # a link in its place is refused at once
                pass
        except FileNotFoundError as exc:
            if create:
                raise StoreError(f"cannot create archive directory {self.directory}: {exc.strerror}") from exc
            raise StoreNotFoundError(
                f"no archive directory {self.directory}: nothing was archived there"
            ) from exc
        except OSError as exc:
            verb = "create" if create else "open"
            raise StoreError(f"cannot {verb} archive directory {self.directory}: {exc.strerror}") from exc
        self._lock = threading.Lock()

    def _new_state_store(self, limits: Limits) -> ArchiveStore:
        """A directory beside this one (``archive`` -> ``archive-state``), without a TTL: its
        writer deletes what a whole state stands for, and a TTL would scan the directory at
        every write (the directory goes with its workspace)."""
        return FileStore(self.directory.with_name(f"{self.directory.name}-state"), clock=self.clock)

    def put(self, key: str, text: str) -> None:
        """Store ``text`` under ``key`` once; evict the least recently used files over the caps."""
        name = f"{validate_key(key)}.txt"
        with self._lock:
            now = self.clock()
            try:
                if self._create and not os.path.lexists(self.directory):  # deleted: made again
                    self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
                with opened_directory(self.directory) as fd:
                    self._expire_all(fd, now)
                    if own_file_exists(name, fd, self.directory / name):
                        os.utime(name, (now, now), dir_fd=fd, follow_symlinks=False)  # a use
                        return
                    if self.limits.max_bytes is not None:
                        self.limits.check_fits(key, utf8_size(text))
                    atomic_write(name, text, dir_fd=fd)  # a chunk at a time: no encoded copy
                    if self.clock is not time.time:  # else the write stamped the file with it
                        os.utime(name, (now, now), dir_fd=fd, follow_symlinks=False)
                    try:
                        self._evict(fd, keep=name)
                    except StoreError:
                        os.unlink(name, dir_fd=fd)  # refused: no room without evicting what is pinned
                        raise
            except OSError as exc:
                raise StoreError(f"cannot archive {key} in {self.directory}: {exc.strerror}") from exc

    def get(self, key: str) -> str | None:
        """The original under ``key``, or ``None``; a hit counts as a use."""
        name = f"{validate_key(key)}.txt"
        with self._lock:
            now = self.clock()
            try:
                with opened_directory(self.directory) as fd:
                    data = self._read(fd, name, now)
            except FileNotFoundError:
                data = None
            except OSError as exc:
                raise StoreError(f"cannot read {key} from {self.directory}: {exc.strerror}") from exc
            if data is None:
                self._misses += 1
                return None
            self._hits += 1
        return decode_text(data)

    def _read(self, fd: int, name: str, now: float) -> bytes | None:
        """The bytes of entry ``name``, stamped as used; ``None`` if it expired (and is gone)."""
        try:
            handle = os.open(name, _READ_FLAGS, dir_fd=fd)
        except OSError as exc:
            own_file_exists(name, fd, self.directory / name)  # refuses a planted link by name
            raise exc
        with os.fdopen(handle, "rb") as file:
            info = os.fstat(handle)
            if not stat.S_ISREG(info.st_mode):
                raise refused_link(self.directory / name, "something other than a file")
            if self.limits.expired(info.st_mtime, now) and not self.is_pinned(name[:-4]):
                os.unlink(name, dir_fd=fd)
                self._expirations += 1
                return None
            data = file.read()
            os.utime(handle, (now, now))
        return data

    def epoch(self) -> str:
        """The identity of the directory's ``.epoch`` file (one ``lstat``), made when missing:
        a directory deleted (then made again here, unless opened with ``create=False``), or
        emptied of that file, has a new epoch."""
        try:
            info = os.lstat(self._epoch_path)
            if stat.S_ISREG(info.st_mode):
                return f"{info.st_dev}:{info.st_ino}:{info.st_mtime_ns}"
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StoreError(f"cannot read the epoch of {self.directory}: {exc.strerror}") from exc
        with self._lock:
            try:
                if self._create and not os.path.lexists(self.directory):
                    self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
                with opened_directory(self.directory) as fd:
                    self._epoch_id(fd)
                    info = os.stat(_EPOCH, dir_fd=fd, follow_symlinks=False)
                    if not stat.S_ISREG(info.st_mode):
                        raise refused_link(self.directory / _EPOCH, "something other than a file")
                    return f"{info.st_dev}:{info.st_ino}:{info.st_mtime_ns}"
            except OSError as exc:
                raise StoreError(f"cannot read the epoch of {self.directory}: {exc.strerror}") from exc

    def _epoch_id(self, fd: int) -> str:
        try:
            handle = os.open(_EPOCH, _READ_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            made = new_epoch()
            try:
                handle = os.open(
                    _EPOCH, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=fd
                )
            except FileExistsError:  # another process made it meanwhile: theirs
                return self._epoch_id(fd)
            with os.fdopen(handle, "w", encoding="ascii") as file:
                file.write(made)
            return made
        with os.fdopen(handle, "r", encoding="ascii", errors="replace") as file:
            return file.read(64)

    def missing(self, keys: Collection[str]) -> frozenset[str]:
        """Those of ``keys`` without a file here (expired ones count as missing); not a use."""
        names = [(key, f"{validate_key(key)}.txt") for key in keys]
        now = self.clock()
        out = set()
        with self._lock:
            try:
                with opened_directory(self.directory) as fd:
                    for key, name in names:
                        try:
                            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                        except FileNotFoundError:
                            out.add(key)
                            continue
                        if not stat.S_ISREG(info.st_mode) or (
                            self.limits.expired(info.st_mtime, now) and not self.is_pinned(key)
                        ):
                            out.add(key)
            except FileNotFoundError:
                return frozenset(key for key, _ in names)
            except OSError as exc:
                raise StoreError(f"cannot look in {self.directory}: {exc.strerror}") from exc
        return frozenset(out)

    def delete(self, key: str) -> bool:
        """Remove ``key``; ``True`` if it was there."""
        name = f"{validate_key(key)}.txt"
        with self._lock:
            try:
                with opened_directory(self.directory) as fd:
                    os.unlink(name, dir_fd=fd)  # a link is removed, never followed
            except FileNotFoundError:
                return False
            except OSError as exc:
                raise StoreError(f"cannot delete {key} from {self.directory}: {exc.strerror}") from exc
        return True

    def stats(self) -> StoreStats:
        """Entries and bytes on disk now, and this process's counts."""
        with self._lock:
            try:
                with opened_directory(self.directory) as fd:
                    entries = self._scan(fd)
            except OSError as exc:
                raise StoreError(f"cannot list {self.directory}: {exc.strerror}") from exc
            return self._stats(len(entries), sum(size for _, size, _ in entries))

    def gc(self) -> GcResult:
        """Delete expired files and evict down to the caps."""
        with self._lock:
            expired, evicted = self._expirations, self._evictions
            try:
                with opened_directory(self.directory) as fd:
                    self._expire_all(fd, self.clock())
                    self._evict(fd, keep=None)
            except OSError as exc:
                raise StoreError(f"cannot collect {self.directory}: {exc.strerror}") from exc
            return GcResult(self._expirations - expired, self._evictions - evicted)

    def _scan(self, fd: int) -> list[tuple[str, int, float]]:
        """``(name, size, last use)`` of every stored original, least recently used first; only
        regular files count (temp files of a write in progress, links and the rest are not ours)."""
        out: list[tuple[str, int, float]] = []
        for name in os.listdir(fd):
            if not _NAME.fullmatch(name):
                continue
            with contextlib.suppress(FileNotFoundError):
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISREG(st.st_mode):
                    out.append((name, st.st_size, st.st_mtime))
        out.sort(key=lambda e: (e[2], e[0]))
        return out

    def _expire_all(self, fd: int, now: float) -> None:
        if self.limits.ttl is None:
            return
        pinned = self.pinned()
        for name, _, used in self._scan(fd):
            if not self.limits.expired(used, now):
                break
            if name[:-4] in pinned:
                continue
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=fd)
                self._expirations += 1

    def _evict(self, fd: int, keep: str | None) -> None:
        if self.limits.max_bytes is None and self.limits.max_entries is None:
            return
        entries = self._scan(fd)
        # the entry just written is the newest and must not pay for its own arrival
        by_age = [(name[:-4], size) for name, size, _ in entries if name != keep]
        total = sum(size for _, size, _ in entries)
        new = None if keep is None else keep[:-4]
        for key in self.limits.victims(by_age, total, len(entries), self.pinned(), new):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{key}.txt", dir_fd=fd)
                self._evictions += 1

    def __repr__(self) -> str:
        return f"FileStore({str(self.directory)!r})"
