"""The proxy's files on disk: each result written once, and the whole kept under caps.

A result long enough to be shortened is saved when it enters the history (``tool-results/``, the
file a shortened form names), and its original archived when it is shortened
(``archive/<key>.txt`` when the proxy's store is its workspace's): the same text. The proxy
writes it once: :class:`ProxyArchive` archives it as a hard link to the saved file (a copy where
the filesystem has no hard links, or the store is elsewhere).

:class:`DiskCap` keeps ``tool-results/``, ``archive/`` and ``archive-state/`` (each conversation's
kept state, :mod:`toolkeep.resume`: a new process resumes from it, and folds the whole history
again where a file of it is gone) under ``max_bytes`` (as ``du`` counts:
allocated blocks, each file once however many names it has) and removes what was last used more
than ``max_age`` seconds ago. An original and its saved files are one unit, named by its key; a
unit's last use is its files' newest modification time (the archive stamps each read and write).
Units go least recently used first, and never one a live conversation's markers name (the keys
its store pins, and those the other proxies sharing the workspace pin: each writes its own
``.pinned-<host>-<pid>`` file), nor one used in the last :data:`GRACE_SECONDS` (a request being
prepared). The proxy collects when its writes may have taken it past the cap (down to
:data:`LOW_WATER` of it, so not at every write), at least every :data:`CHECK_SECONDS`, and when
it starts; ``toolkeep store gc --proxy DIR`` collects a proxy's folder from outside.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..exceptions import StoreError
from ..shorten import archive_key, utf8_chunks
from ..stores import ArchiveStore, FileStore, Limits, validate_key
from ..workspace import Workspace, atomic_write, opened_directory

__all__ = [
    "CHECK_SECONDS",
    "DEFAULT_MAX_AGE_DAYS",
    "DEFAULT_MAX_BYTES",
    "GRACE_SECONDS",
    "LOW_WATER",
    "DiskCap",
    "DiskUsage",
    "ProxyArchive",
    "ProxyWorkspace",
]

DEFAULT_MAX_BYTES = 1 << 30
"""``--max-disk-bytes``: 1 GiB."""
DEFAULT_MAX_AGE_DAYS = 30.0
"""``--max-age-days``."""
GRACE_SECONDS = 10.0
"""A unit used this recently is never collected (its request may still be being prepared)."""
LOW_WATER = 0.9
"""A collection the proxy's own writes start goes down to this share of the cap."""
CHECK_SECONDS = 600.0
"""The proxy collects at least this often while it writes (for the age cap)."""
PIN_FILE_SECONDS = 30.0
"""How often the proxy rewrites its ``.pinned-*`` file while it writes."""
PIN_FILE_LIFE = 3_600.0
"""A ``.pinned-*`` file not rewritten for this long is a stopped proxy's: ignored, then removed."""

_ARCHIVED = re.compile(r"([0-9a-f]{16})\.txt")
_SAVED = re.compile(r"budget_.*_([0-9a-f]{16})\.txt")
_PIN_FILE = re.compile(r"\.pinned-[A-Za-z0-9_.-]{1,200}")
_DIRS = ("archive", "tool-results", "archive-state")
"""The capped folders: the archive, the saved results, and the conversations' kept states
(:mod:`toolkeep.resume`, whose files are named as the archive's)."""


@dataclass(frozen=True)
class DiskUsage:
    """What a collection found and removed."""

    files: int
    bytes: int
    removed_files: int = 0
    removed_bytes: int = 0
    pinned: int = 0
    """Units kept because a live conversation names them."""


@dataclass
class _Unit:
    used: float
    size: int
    files: list[tuple[str, str]]  # (directory, name)


class DiskCap:
    """The caps on the proxy's folder ``path`` (see the module docstring); ``store``: the proxy's
    store, whose pins are kept (``None``: only the pins other proxies wrote down)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        store: ArchiveStore | None,
        *,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
        max_age: float | None = DEFAULT_MAX_AGE_DAYS * 86_400,
        grace: float = GRACE_SECONDS,
        clock: Callable[[], float] = time.time,
        pin_file: str | None = None,
    ) -> None:
        """``pin_file``: the name of this process's pin file (by default ``.pinned-<host>-<pid>``)."""
        self.path = Path(path)
        self.store = store
        self.max_bytes = max_bytes
        self.max_age = max_age
        self.grace = grace
        self.clock = clock
        self._pin_file = pin_file or f".pinned-{_safe(socket.gethostname())}-{os.getpid()}"
        self._lock = threading.Lock()
        self._estimate = 0
        self._checked = float("-inf")
        self._pins_written = float("-inf")

    # -- while serving --------------------------------------------------------------------------

    def wrote(self, size: int) -> None:
        """Count ``size`` bytes just written; collect when they may take the folder past the cap
        (or the last collection is old), unless another thread is collecting already."""
        now = self.clock()
        self._estimate += size
        if now - self._pins_written >= PIN_FILE_SECONDS:
            self.write_pins()
        over = self.max_bytes is not None and self._estimate > self.max_bytes
        if (over or now - self._checked >= CHECK_SECONDS) and self._lock.acquire(blocking=False):
            try:
                self._collect(LOW_WATER)
            finally:
                self._lock.release()

    def collect(self, low_water: float = 1.0) -> DiskUsage:
        """Remove what is past the age cap, then the least recently used units until the folder
        is under ``low_water`` of the size cap; what is left and what went."""
        with self._lock:
            return self._collect(low_water)

    def usage(self) -> DiskUsage:
        """The files and bytes of the folder now."""
        units = self._units()
        return DiskUsage(sum(len(u.files) for u in units.values()), sum(u.size for u in units.values()))

    def _collect(self, low_water: float) -> DiskUsage:
        now = self.clock()
        self.write_pins()
        units = self._units()
        pinned = self.pinned()
        total = sum(u.size for u in units.values())
        files = sum(len(u.files) for u in units.values())
        removed_files = removed_bytes = kept = 0
        target = None if self.max_bytes is None else int(self.max_bytes * low_water)
        for key, unit in sorted(units.items(), key=lambda item: (item[1].used, item[0])):
            old = self.max_age is not None and now - unit.used >= self.max_age
            if not old and (target is None or total <= target):
                break
            if now - unit.used < self.grace:
                break  # this one and every later one were used just now
            if key in pinned:
                kept += 1
                continue
            gone = self._remove(unit)
            removed_files += gone
            files -= gone
            removed_bytes += unit.size
            total -= unit.size
        self._estimate = total
        self._checked = now
        return DiskUsage(files, total, removed_files, removed_bytes, kept)

    def _units(self) -> dict[str, _Unit]:
        units: dict[str, _Unit] = {}
        seen: set[tuple[int, int]] = set()
        for directory in _DIRS:
            try:
                with opened_directory(self.path / directory) as fd:
                    for name in os.listdir(fd):
                        match = (_SAVED if directory == "tool-results" else _ARCHIVED).fullmatch(name)
                        if match is None:
                            continue
                        try:
                            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                        except FileNotFoundError:
                            continue
                        if not stat.S_ISREG(info.st_mode):
                            continue
                        size = 0
                        if (info.st_dev, info.st_ino) not in seen:
                            seen.add((info.st_dev, info.st_ino))
                            size = _allocated(info)
                        unit = units.setdefault(match[1], _Unit(info.st_mtime, 0, []))
                        unit.used = max(unit.used, info.st_mtime)
                        unit.size += size
                        unit.files.append((directory, name))
            except FileNotFoundError:
                continue
        return units

    def _remove(self, unit: _Unit) -> int:
        gone = 0
        for directory, name in unit.files:
            try:
                with opened_directory(self.path / directory) as fd:
                    os.unlink(name, dir_fd=fd)
                gone += 1
            except FileNotFoundError:
                continue
        return gone

    # -- pins -----------------------------------------------------------------------------------

    def own_pins(self) -> frozenset[str]:
        """The keys this process's store pins (live conversations' markers)."""
        read = getattr(self.store, "pinned", None)
        if callable(read):
            with contextlib.suppress(StoreError):
                found = read()
                if isinstance(found, frozenset):
                    return found
        return frozenset()

    def write_pins(self) -> None:
        """Write this process's pins down (``.pinned-<host>-<pid>``), for the other proxies that
        share the folder and for ``toolkeep store gc --proxy``."""
        self._pins_written = self.clock()
        if self.store is None:
            return
        with contextlib.suppress(OSError):
            atomic_write(self.path / self._pin_file, json.dumps(sorted(self.own_pins())))

    def remove_pins(self) -> None:
        """Remove this process's pin file (it is stopping: its conversations are gone)."""
        with contextlib.suppress(OSError):
            os.unlink(self.path / self._pin_file)

    def pinned(self) -> frozenset[str]:
        """The keys pinned here and in every recent pin file in the folder."""
        keys = set(self.own_pins())
        now = time.time()  # the files' own clock, not the store's
        try:
            names = [n for n in os.listdir(self.path) if _PIN_FILE.fullmatch(n)]
        except OSError:
            names = []
        for name in names:
            file = self.path / name
            try:
                if now - file.stat().st_mtime > PIN_FILE_LIFE:
                    file.unlink()
                    continue
                found = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(found, list):
                keys.update(k for k in found if isinstance(k, str))
        return frozenset(keys)


class ProxyWorkspace(Workspace):
    """The proxy's workspace: every saved result is counted by the proxy's :class:`DiskCap`, and
    remembered by key, so that its archive (:class:`ProxyArchive`) links to it rather than write
    its text again."""

    disk: DiskCap | None = None

    def __init__(self, path: str | os.PathLike[str] | None = None, *, keep: bool = False) -> None:
        super().__init__(path, keep=keep)
        self.saved: OrderedDict[str, str] = OrderedDict()
        """The name of the saved file of each key (the last :data:`REMEMBERED`)."""
        self._saved_lock = threading.Lock()

    def persist(self, call_id: str, text: str) -> Path:
        path = super().persist(call_id, text)
        with self._saved_lock:
            self.saved[archive_key(text)] = path.name
            if len(self.saved) > REMEMBERED:
                self.saved.popitem(last=False)
        if self.disk is not None:
            with contextlib.suppress(OSError):
                self.disk.wrote(_blocks(path.stat().st_size))
        return path

    def saved_name(self, key: str) -> str | None:
        with self._saved_lock:
            return self.saved.get(key)


REMEMBERED = 20_000
"""How many saved files' names a :class:`ProxyWorkspace` remembers by key."""


class ProxyArchive(FileStore):
    """The proxy's archive in its workspace's ``archive/``: an original whose text was saved to
    ``tool-results/`` (the same text: the saved file's name holds its key) is archived as a hard
    link to that file, not written again. A store with caps of its own, a file it cannot link
    (another filesystem) or one whose size differs is written as :class:`FileStore` writes it."""

    def __init__(
        self,
        workspace: ProxyWorkspace,
        *,
        limits: Limits | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        super().__init__(workspace.archive_dir, limits=limits, clock=clock)
        self.workspace = workspace
        self.disk: DiskCap | None = None
        """The caps its writes count toward."""

    def put(self, key: str, text: str) -> None:
        name = self.workspace.saved_name(validate_key(key))
        if name is not None and self.limits.max_bytes is None and self.limits.max_entries is None:
            try:
                with (
                    opened_directory(self.workspace.results_dir) as saved,
                    opened_directory(self.directory) as archive,
                ):
                    info = os.stat(name, dir_fd=saved, follow_symlinks=False)
                    if stat.S_ISREG(info.st_mode) and info.st_size == sum(map(len, utf8_chunks(text))):
                        os.link(
                            name, f"{key}.txt", src_dir_fd=saved, dst_dir_fd=archive, follow_symlinks=False
                        )
                        now = self.clock()
                        os.utime(f"{key}.txt", (now, now), dir_fd=archive, follow_symlinks=False)
                        return
            except OSError:
                pass  # there already (a use, below), or no link: written as any store writes
        super().put(key, text)
        if self.disk is not None:
            self.disk.wrote(_blocks(len(text)))  # (at least: a use of one there counts too)


def _blocks(size: int) -> int:
    """What a file of ``size`` bytes takes on disk, about: whole 4 KiB blocks."""
    return -(-max(size, 1) // 4096) * 4096


def _allocated(info: os.stat_result) -> int:
    blocks = getattr(info, "st_blocks", None)
    return blocks * 512 if isinstance(blocks, int) else info.st_size


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:100] or "host"
