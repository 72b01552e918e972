"""Fault injection: real trajectories replayed through a Session whose store or workspace fails.

Each fault is real: a ``redis-server`` stopped with SIGSTOP (then SIGCONT), killed with SIGKILL
(then restarted on the same port, its append-only file intact), a workspace on a tmpfs filled up
(ENOSPC), a workspace bind-mounted read-only over itself (which stops root too, unlike a chmod),
and SQLite, file and Redis stores over their ``max_bytes`` / ``max_entries``. Where the machine
cannot mount, the disk faults fall back to a store that refuses every call while the fault lasts,
and the table says so.

The store can also lose what it held, once, mid-session: a Redis ``FLUSHALL``, a Redis restarted
without persistence (``--save '' --appendonly no``), a Redis whose ``maxmemory`` policy
(``allkeys-lru``) evicts the archive, a SQLite file deleted and made again by another process. For
those, every marker of every request prepared after the loss must recall its original, byte-exact,
through a new opening of the store (a second table).

Every request (each prefix of the history, as an agent sends it) goes through one Session; the
fault starts at a chosen request and ends later (a cap lasts the whole run). Measured:

- requests prepared (``prepare`` returned a valid history), of all requests;
- after the run, the final output's shortened results whose original is recoverable: a
  ``<<ccr:KEY>>`` marker that recalls it, a saved path that reads it back, or a text that says
  ``could not be saved`` (no way back was promised); must be 100 %;
- markers in the final output that recall nothing (must be 0);
- the longest single ``prepare`` while the fault lasted, and the median outside it.

    python bench/faults.py [--write] [--trajectory NAME ...]

``--write`` records the tables in bench/results.md (sections "Faults" and "Store losses";
``--losses`` runs the losses alone). The trajectories are read
from ``$TOOLKEEP_SHARED/bench-data`` (default ``../shared/bench-data``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import toolkeep
from toolkeep.exceptions import StoreError
from toolkeep.shorten import CCR_MARKER_RE, SAVED_PATH_RE, archive_key
from toolkeep.stores import ArchiveStore, MemoryStore, open_store
from toolkeep.workspace import Workspace

HERE = Path(__file__).resolve().parent
DATA = Path(os.environ.get("TOOLKEEP_SHARED", HERE.parent.parent / "shared")) / "bench-data" / "anthropic"
TRAJECTORIES = (
    "claude-code__engram__diffusion__3f0a6f23.json",
    "gemini-cli__metaphi-figma-eval-010ac575__transcript.json",
    "swe-agent__msb-java__doubao-pro-128k__fasterxml__jackson-databind-4304.json",
)
SOCKET_TIMEOUT = 1.0
"""Seconds a Redis call waits for an answer here (``socket_timeout`` in the store URL)."""
READING = (
    "Before pins (main at 38e6870), the SQLite row of the first trajectory ended with 3 of its 37 "
    "markers recalling nothing (evicted). A longest wait near `socket_timeout` is the one call per "
    "back-off window that waits for a stalled Redis; the rest fail at once. Save errors count "
    "every refused write, retried at each request."
)
LOSS_READING = (
    "Before (main at 2549596), the requests after the same losses sent markers of which only "
    "33,914 of 87,914 (39 %, claude-code), 227 of 999 (23 %, gemini-cli) and 37 of 121 (31 %, "
    "swe-agent) recalled after each Redis loss, and none after the SQLite file was made again "
    "(the session went on writing to the deleted file): a live session never archived again what "
    "the store had lost. Now the check costs one epoch read per request that sends markers (a "
    "round trip to Redis, a read of the SQLite file or of the file store's directory) and one "
    "batched existence check for the keys not yet seen held under the store's epoch (after a "
    "loss: all of them, once; and every 32 requests, for an entry lost with no change of epoch). "
    "Under `allkeys-lru` Redis evicts whole keys, and the epoch lives in the hash that holds the "
    "originals: they cannot go without it."
)
RETRY_AFTER = 2.0
"""Seconds a Redis that did not answer is left alone (``retry_after`` in the store URL)."""

__all__ = [
    "FAULTS",
    "LOSSES",
    "After",
    "Outcome",
    "RedisServer",
    "check_output",
    "load",
    "main",
    "replay",
]


# ------------------------------------------------------------------------------- real facilities


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class RedisServer:
    """A ``redis-server`` on a free loopback port that logs every write to its append-only file
    before answering (``appendfsync always``), so SIGKILL loses nothing it acknowledged; it can
    be stopped (SIGSTOP), resumed, killed and started again on the same port."""

    def __init__(self, directory: Path, *options: str, persist: bool = True) -> None:
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        if not os.access(binary, os.X_OK):
            raise FileNotFoundError("redis-server")
        self.binary, self.directory, self.port = binary, directory, free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.options = [*(("--appendonly", "yes", "--appendfsync", "always") if persist else
                          ("--appendonly", "no")), *options]  # fmt: skip
        """With ``persist=False`` a restart loses everything."""

    def command(self, *args: str) -> bytes:
        """One command, its raw reply (the bench needs no client library for it)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(f"*{len(args)}\r\n".encode() + b"".join(
                f"${len(a.encode())}\r\n{a}\r\n".encode() for a in args))  # fmt: skip
            return s.recv(4096)

    def restart(self) -> None:
        self.kill()
        self.start()

    def start(self) -> None:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--dir", str(self.directory), *self.options]  # fmt: skip
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def run_quiet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, check=False)


def can_mount(base: Path) -> str | None:
    """``None`` if this process may mount a tmpfs and a read-only bind mount here, else why not."""
    point = base / "probe"
    point.mkdir()
    try:
        done = run_quiet("mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", str(point))
        if done.returncode != 0:
            return f"mount -t tmpfs failed: {done.stderr.strip() or done.returncode}"
        run_quiet("umount", str(point))
        done = run_quiet("mount", "--bind", str(point), str(point))
        if done.returncode != 0:
            return f"mount --bind failed: {done.stderr.strip() or done.returncode}"
        ro = run_quiet("mount", "-o", "remount,bind,ro", str(point))
        run_quiet("umount", str(point))
        if ro.returncode != 0:
            return f"a read-only remount failed: {ro.stderr.strip() or ro.returncode}"
        return None
    except FileNotFoundError:
        return "no mount command"
    finally:
        point.rmdir()


class FailingStore(MemoryStore):
    """The fallback where nothing can be mounted: a store that refuses every call while ``down``."""

    down = False

    def put(self, key: str, text: str) -> None:
        if self.down:
            raise StoreError("injected: the store refuses writes")
        super().put(key, text)

    def get(self, key: str) -> str | None:
        if self.down:
            raise StoreError("injected: the store refuses reads")
        return super().get(key)


# ---------------------------------------------------------------------------------------- faults


@dataclass
class Setup:
    """What one fault gives the session, and how to start and end it."""

    workspace: Path
    store: ArchiveStore | str | None = None
    inject: Any = None
    heal: Any = None
    note: str = ""
    cleanup: list[Any] = field(default_factory=list)
    settle: float = 0.0
    """Seconds after the run before its originals are checked (a Redis breaker's window)."""
    loss: str | None = None
    """For a loss (injected once, never healed): the store URL every marker sent after it is
    checked through, each request."""


def _redis(base: Path, query: str = "") -> tuple[RedisServer, str]:
    server = RedisServer(base)
    server.start()
    url = (f"{server.url}?socket_timeout={SOCKET_TIMEOUT}&connect_timeout={SOCKET_TIMEOUT}"
           f"&retry_after={RETRY_AFTER}{query}")  # fmt: skip
    return server, url


def redis_stopped(base: Path) -> Setup:
    server, url = _redis(base)
    return Setup(
        base / "ws", url,
        inject=lambda: server.signal(signal.SIGSTOP), heal=lambda: server.signal(signal.SIGCONT),
        note=f"SIGSTOP, then SIGCONT; socket_timeout={SOCKET_TIMEOUT:g}, retry_after={RETRY_AFTER:g}",
        cleanup=[lambda: server.signal(signal.SIGCONT), server.kill], settle=RETRY_AFTER,
    )  # fmt: skip


def redis_killed(base: Path) -> Setup:
    server, url = _redis(base)
    return Setup(
        base / "ws", url, inject=server.kill, heal=server.start,
        note="SIGKILL, then restarted on the same port (appendfsync always)", cleanup=[server.kill],
        settle=RETRY_AFTER,
    )  # fmt: skip


def _mounted(base: Path, options: str) -> Path | None:
    point = base / "mnt"
    point.mkdir()
    if run_quiet("mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)).returncode != 0:
        point.rmdir()
        return None
    return point


def disk_full(base: Path) -> Setup:
    why = can_mount(base)
    point = None if why else _mounted(base, "size=64M,mode=0700")
    if point is None:
        return _failing(base, f"no tmpfs ({why}): a store that refuses every call instead")
    filler = point / "filler"

    def fill() -> None:
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            for size in (1 << 20, 4096, 1):  # then the last few blocks
                try:
                    while True:
                        os.write(fd, b"\0" * size)
                except OSError:
                    pass
        finally:
            os.close(fd)

    return Setup(
        point / "ws", None, inject=fill, heal=lambda: filler.unlink(),
        note="workspace (and its archive) on a 64M tmpfs filled to ENOSPC, then freed",
        cleanup=[lambda: run_quiet("umount", "-l", str(point))],
    )  # fmt: skip


def read_only(base: Path) -> Setup:
    why = can_mount(base)
    if why:
        return _failing(base, f"no read-only mount ({why}): a store that refuses every call instead")
    ws = base / "ws"
    mounted: list[bool] = []

    def inject() -> None:
        assert run_quiet("mount", "--bind", str(ws), str(ws)).returncode == 0
        mounted.append(True)
        assert run_quiet("mount", "-o", "remount,bind,ro", str(ws)).returncode == 0

    def heal() -> None:
        while mounted:
            run_quiet("umount", str(ws))
            mounted.pop()

    return Setup(
        ws, None, inject=inject, heal=heal,
        note="workspace bind-mounted read-only over itself (root too), then unmounted",
        cleanup=[heal],
    )  # fmt: skip


def _failing(base: Path, note: str) -> Setup:
    store = FailingStore()

    def down(value: bool) -> None:
        store.down = value

    return Setup(base / "ws", store, inject=lambda: down(True), heal=lambda: down(False), note=note)


def capped(url: str, note: str) -> Any:
    def make(base: Path) -> Setup:
        setup = Setup(base / "ws", url.replace("BASE", str(base)), note=note)
        return setup

    return make


def redis_capped(base: Path) -> Setup:
    server, url = _redis(base, "&max_bytes=200K")
    return Setup(base / "ws", url, note="a Redis namespace with max_bytes=200K", cleanup=[server.kill])


def redis_flushed(base: Path) -> Setup:
    server = RedisServer(base, persist=False)
    server.start()
    return Setup(
        base / "ws", server.url, inject=lambda: server.command("FLUSHALL"), note="FLUSHALL between two requests",
        cleanup=[server.kill], loss=server.url,
    )  # fmt: skip


def redis_restarted_empty(base: Path) -> Setup:
    server = RedisServer(base, persist=False)
    server.start()
    return Setup(
        base / "ws", server.url, inject=server.restart,
        note="killed and restarted on the same port between two requests, `--save '' --appendonly no`",
        cleanup=[server.kill], loss=server.url,
    )  # fmt: skip


def redis_evicted(base: Path) -> Setup:
    server = RedisServer(base, "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru", persist=False)
    server.start()
    filler = "f" * 1_000_000

    def evict() -> None:
        for n in range(5_000):  # newer keys, until the server's (sampled) LRU takes the archive's hash
            server.command("SET", f"other:{n}", filler)
            if server.command("EXISTS", "{toolkeep}:data").startswith(b":0"):
                return
        raise RuntimeError("the archive was never evicted")

    return Setup(
        base / "ws", server.url, inject=evict,
        note="`maxmemory 64mb`, `allkeys-lru`: other keys written until the server evicts the archive's hash",
        cleanup=[server.kill], loss=server.url,
    )  # fmt: skip


def sqlite_recreated(base: Path) -> Setup:
    db = base / "archive.db"
    url = f"sqlite://{db}"

    def lose() -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        made = "import sys, toolkeep.stores.sqlite as s; s.SQLiteStore(sys.argv[1]).close()"
        subprocess.run([sys.executable, "-c", made, str(db)], check=True)

    return Setup(
        base / "ws", url, inject=lose,
        note="`archive.db*` deleted between two requests and made again (empty) by another process",
        loss=url,
    )  # fmt: skip


LOSSES: dict[str, Any] = {
    "redis FLUSHALL": redis_flushed,
    "redis restarted, no persistence": redis_restarted_empty,
    "redis maxmemory evicts the archive": redis_evicted,
    "sqlite deleted, made again": sqlite_recreated,
}


FAULTS: dict[str, Any] = {
    "redis stopped": redis_stopped,
    "redis killed, restarted": redis_killed,
    "disk full": disk_full,
    "read-only workspace": read_only,
    "sqlite over max_bytes": capped("sqlite:///BASE/archive.db?max_bytes=300K", "sqlite max_bytes=300K"),
    "file over max_entries": capped("file://BASE/archive?max_entries=8", "file max_entries=8"),
    "redis over max_bytes": redis_capped,
    **LOSSES,
}


# -------------------------------------------------------------------------------------- checking


def originals(history: list[Any]) -> dict[str, str]:
    return {
        b["tool_use_id"]: b["content"]
        for m in history
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == "tool_result" and isinstance(b.get("content"), str)
    }


@dataclass
class Check:
    """The way back of every shortened result of one output."""

    shortened: int = 0
    recoverable: int = 0
    by_marker: int = 0
    by_file: int = 0
    said_unsaved: int = 0
    markers: int = 0
    dangling: int = 0
    lost: list[str] = field(default_factory=list)


def check_output(store: ArchiveStore, workspace: Workspace, history: list[Any], out: list[Any]) -> Check:
    """Whether each result the output shortened leads back to its original (see the module doc)."""
    whole = originals(history)
    check = Check()
    for m in out:
        for b in m["content"] if isinstance(m.get("content"), list) else []:
            text = b.get("content") if b.get("type") == "tool_result" else None
            for key in CCR_MARKER_RE.findall(json.dumps(b, ensure_ascii=False)):
                check.markers += 1
                got = store.get(key)
                check.dangling += got is None or archive_key(got) != key
            if not isinstance(text, str) or text == whole.get(b["tool_use_id"], text):
                continue
            original = whole[b["tool_use_id"]]
            check.shortened += 1
            marker = any(store.get(key) == original for key in CCR_MARKER_RE.findall(text))
            saved = SAVED_PATH_RE.search(text)
            try:
                by_file = saved is not None and workspace.reader.read_text(saved[1]) == original
            except OSError:
                by_file = False
            unsaved = "could not be saved" in text and not saved and not CCR_MARKER_RE.search(text)
            check.by_marker += marker
            check.by_file += by_file
            check.said_unsaved += unsaved
            if marker or by_file or unsaved:
                check.recoverable += 1
            else:
                check.lost.append(b["tool_use_id"])
    return check


@dataclass
class Outcome:
    fault: str
    trajectory: str
    requests: int
    prepared: int
    check: Check
    save_errors: int
    longest_in_fault: float
    median_outside: float
    note: str
    in_fault: bool = True
    """False for a fault that lasts the whole run (a cap): every request is in it."""
    after: After | None = None
    """For a loss: what the requests after it sent."""


@dataclass
class After:
    """The requests prepared after a loss, and the markers they sent."""

    requests: int = 0
    markers: int = 0
    recalled: int = 0
    dead: list[str] = field(default_factory=list)
    first: float = 0.0
    """Seconds the first request after the loss took to prepare."""
    round_trips: int = 0
    """Calls the session made to check its markers (epoch reads, batched checks), whole run."""


def replay(
    fault: str,
    history: list[Any],
    base: Path,
    start: float = 0.4,
    end: float = 0.7,
    every: int = 1,
    faults: dict[str, Any] = FAULTS,
    policy: str | None = None,
) -> Outcome:
    """Replay ``history`` request by request under ``faults[fault]``, injected at the ``start``
    fraction of the requests and healed at the ``end`` fraction (a cap lasts throughout), with
    ``Config(policy=policy)`` (``None``: the default policy)."""
    setup: Setup = faults[fault](base)
    ends = list(range(1, len(history) + 1, every))
    if ends[-1] != len(history):
        ends.append(len(history))
    first, last = int(len(ends) * start), int(len(ends) * end)
    prepared = save_errors = 0
    inside: list[float] = []
    outside: list[float] = []
    out: list[Any] = []
    after = After() if setup.loss else None
    checker = None
    try:
        config = toolkeep.Config() if policy is None else toolkeep.Config(policy=policy)
        with toolkeep.Session(config, workspace=setup.workspace, store=setup.store) as session:
            for n, stop in enumerate(ends):
                if setup.inject is not None and n == first:
                    setup.inject()
                if setup.heal is not None and n == last:
                    setup.heal()
                t = time.perf_counter()
                try:
                    out, report = session.prepare(history[:stop], "anthropic")
                except toolkeep.ToolkeepError as exc:
                    print(f"  request {n}: {type(exc).__name__}: {exc}", file=sys.stderr)
                    continue
                finally:
                    took = time.perf_counter() - t
                    during = n == first if setup.loss else first <= n < last
                    (inside if during and setup.inject else outside).append(took)
                prepared += toolkeep.validate(out, "anthropic") == []
                save_errors += len(report.save_errors)
                if after is not None and setup.loss and n >= first:
                    checker = checker or open_store(setup.loss)
                    sent_after(checker, out, after)
                    after.first = after.first or took
            time.sleep(setup.settle)
            check = check_output(session.recall_store, session.workspace, history, out)
            if after is not None:  # (a session of before this check counts none)
                trackers = getattr(session, "_trackers", {})
                after.round_trips = sum(t.round_trips for t in trackers.values())
    finally:
        if checker is not None:
            checker.close()
        for clean in setup.cleanup:
            clean()
    return Outcome(
        fault, "", len(ends), prepared, check, save_errors,
        max(inside, default=0.0), statistics.median(outside) if outside else 0.0, setup.note,
        setup.inject is not None, after,
    )  # fmt: skip


def sent_after(store: ArchiveStore, out: list[Any], after: After) -> None:
    """Count the markers of one request sent after a loss, and those that recall their
    original byte-exact through ``store`` (a new opening of the session's store)."""
    after.requests += 1
    for key in sorted(set(CCR_MARKER_RE.findall(json.dumps(out, ensure_ascii=False)))):
        after.markers += 1
        got = store.get(key)
        if got is not None and archive_key(got) == key:
            after.recalled += 1
        elif key not in after.dead:
            after.dead.append(key)


def load(name: str) -> list[Any]:
    data: list[Any] = json.loads((DATA / name).read_text(encoding="utf-8"))
    return data


@contextmanager
def scratch() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="toolkeep-faults-"))
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def table(rows: list[Outcome]) -> str:
    head = (
        "| fault | trajectory | requests prepared | shortened | recoverable | by marker / file / "
        "says unsaved | dangling markers | save errors | longest prepare in fault | median outside |\n"
        "|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in rows:
        c = r.check
        pct = 100.0 * c.recoverable / c.shortened if c.shortened else 100.0
        lines.append(
            f"| {r.fault} | {r.trajectory} | {r.prepared}/{r.requests} | {c.shortened} | "
            f"{c.recoverable} ({pct:.0f} %) | {c.by_marker} / {c.by_file} / {c.said_unsaved} | "
            f"{c.dangling} of {c.markers} | {r.save_errors} | "
            f"{f'{r.longest_in_fault:.3f} s' if r.in_fault else '(throughout)'} | "
            f"{r.median_outside * 1000:.2f} ms |"
        )
    return "\n".join(lines)


def losses_table(rows: list[Outcome]) -> str:
    lines = [
        "| loss | trajectory | requests after it | markers they sent | recall byte-exact | "
        "first request after it | median prepare | check calls / request |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        a = r.after
        if a is None:
            continue
        pct = 100.0 * a.recalled / a.markers if a.markers else 100.0
        lines.append(
            f"| {r.fault} | {r.trajectory} | {a.requests} | {a.markers:,} | {a.recalled:,} ({pct:.0f} %) | "
            f"{a.first * 1000:.1f} ms | {r.median_outside * 1000:.2f} ms | {a.round_trips / r.requests:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="record the table in bench/results.md")
    parser.add_argument("--trajectory", action="append", help="a file under ../shared/bench-data/anthropic")
    parser.add_argument("--fault", action="append", choices=sorted(FAULTS))
    parser.add_argument("--losses", action="store_true", help="only the losses (section 'Store losses')")
    args = parser.parse_args()
    if not DATA.is_dir():
        sys.exit(
            f"no trajectories under {DATA}: this benchmark needs ../shared/bench-data (or $TOOLKEEP_SHARED)"
        )
    rows: list[Outcome] = []
    notes: dict[str, str] = {}
    for name in args.trajectory or TRAJECTORIES:
        history = load(name)
        for fault in args.fault or (LOSSES if args.losses else FAULTS):
            with scratch() as base:
                row = replay(fault, history, base)
            row.trajectory = name.split("__")[0] + "…" + name[-13:-5]
            notes[fault] = row.note
            rows.append(row)
            print(table([row]).splitlines()[-1], flush=True)
            if row.after is not None:
                print(losses_table([row]).splitlines()[-1], flush=True)
    body = table(rows)
    lost = losses_table(rows)
    print(body)
    print(lost)
    if not args.write:
        return
    from speed import write_section

    faults = [r for r in rows if r.after is None]
    losses = [r for r in rows if r.after is not None]
    when = f"({time.strftime('%Y-%m-%d')}, as root in a container)"
    if faults:
        how = "\n".join(f"- {fault}: {notes[fault]}" for fault in dict.fromkeys(r.fault for r in faults))
        write_section(
            "Faults",
            "Each trajectory replayed request by request (every prefix) through one Session; the "
            "fault starts at 40 % of the requests and ends at 70 % (a cap lasts throughout). "
            "*Recoverable*: a shortened result of the final output whose marker recalls its "
            "original, whose saved path reads it back, or that says `could not be saved`. "
            f"`python bench/faults.py --write` {when}:\n\n" + how + "\n\n" + table(faults) + "\n\n" + READING,
        )
    if losses:
        how = "\n".join(f"- {fault}: {notes[fault]}" for fault in dict.fromkeys(r.fault for r in losses))
        write_section(
            "Store losses",
            "The store loses what it held once, between two requests at 40 % of the trajectory, "
            "replayed as in *Faults*; after the loss, every request: each marker it sends, "
            "recalled through a new opening of the store (*first request after it*: the one that "
            "finds the loss and archives again; *check calls*: epoch reads and batched checks of "
            f"the whole run, per request). `python bench/faults.py --write --losses` {when}:\n\n"
            + how
            + "\n\n"
            + lost
            + "\n\nThe final output of each run, checked as in *Faults*:\n\n"
            + table(losses)
            + "\n\n"
            + LOSS_READING,
        )


if __name__ == "__main__":
    main()
