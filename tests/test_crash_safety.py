"""Crash safety: a process SIGKILLed in the middle of persisting or archiving leaves nothing partial
that the reader or recall could return.

The invariant, checked after every kill: each persisted file ``budget_<id>_<hash>.txt`` and each
archived original ``<key>.txt`` (or SQLite row, or Redis entry) holds text whose SHA-256 prefix is
its name, so it is whole; anything else in the workspace (a ``.tmp-*`` file cut short) is refused
by the reader. Kills land at chosen points (a hook in the child pauses there and says so) and at
random moments of a real ``toolkeep prepare``.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from toolkeep import ReaderError, Session
from toolkeep.recall import recall_answer
from toolkeep.shorten import archive_key
from toolkeep.stores import FileStore
from toolkeep.stores.sqlite import SQLiteStore
from toolkeep.workspace import WorkspaceReader

from . import redis_server
from .redis_server import fresh_prefix
from .test_cli_core import TOOLKEEP

redis_url = redis_server.redis_url  # the session-wide Redis fixture

PERSISTED = re.compile(r"budget_.+_([0-9a-f]{16})\.txt")
ARCHIVED = re.compile(r"([0-9a-f]{16})\.txt")


def assert_nothing_partial(ws: Path) -> int:
    """Every file the reader or recall would return is whole; the rest is refused. The count of
    whole files."""
    reader = WorkspaceReader(ws)
    whole = 0
    for path in sorted(p for p in ws.rglob("*") if p.is_file()):
        rel = str(path.relative_to(ws))
        if path.parent.name == "archive" and path.name == ".epoch":
            continue  # the store's epoch marker (FileStore.epoch: its identity, not its text), not an entry
        if path.parent.name == "archive-state" and ARCHIVED.fullmatch(path.name):
            json.loads(reader.read_text(rel))  # a conversation's kept state (toolkeep.resume): whole JSON
            continue
        if path.parent.name == "archive-state" and path.name == ".epoch":
            continue
        name = PERSISTED.fullmatch(path.name) if path.parent.name == "tool-results" else None
        name = name or (ARCHIVED.fullmatch(path.name) if path.parent.name == "archive" else None)
        if name is None:
            with pytest.raises(ReaderError, match="unfinished write"):
                reader.read_text(rel)
            continue
        text = reader.read_text(rel)
        assert archive_key(text) == name[1], f"{rel} is not whole"
        if path.parent.name == "archive":
            assert FileStore(ws / "archive").get(name[1]) == text
        whole += 1
    return whole


# a child that pauses where it is told, says so on stdout, and waits for its SIGKILL
HOOKED = r"""
import os, sys, time
import toolkeep.workspace as workspace

point, target, ws = sys.argv[1], sys.argv[2], sys.argv[3]
text = "".join(f"{i:08d} crash test line\n" for i in range(400_000))   # 9.6 MB

def pause():
    sys.stdout.write("paused\n"); sys.stdout.flush(); time.sleep(120)

real_write = os.write

def write(fd, data):
    if point == "opened": pause()
    real_write(fd, data[: len(data) // 2])
    pause()

if point in ("opened", "half"):
    os.write = write
else:
    def replace(src, dst, **dir_fds):
        pause()
    os.replace = replace

if target == "persist":
    workspace.Workspace(ws).persist("toolu_1", text)
else:
    from toolkeep.stores import FileStore
    from toolkeep.shorten import archive_key
    FileStore(os.path.join(ws, "archive")).put(archive_key(text), text)
"""


def kill_when_paused(args: list[str]) -> None:
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line == b"paused\n", proc.stderr.read() if proc.stderr else line
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    if proc.stderr is not None:
        proc.stderr.close()


@pytest.mark.parametrize("point", ["opened", "half", "before-rename"])
@pytest.mark.parametrize("target", ["persist", "archive"])
def test_killed_at_each_point_of_a_write(point: str, target: str, tmp_path: Path) -> None:
    """Killed after opening, halfway through, or just before the rename: no file under the final
    name, the leftover temp file is refused by the reader, recall finds nothing, and the next
    session saves the output whole."""
    ws = tmp_path / "ws"
    Session(workspace=ws).close()
    kill_when_paused([sys.executable, "-c", HOOKED, point, target, str(ws)])
    (leftover,) = ws.rglob(".tmp-*")
    assert (leftover.stat().st_size > 0) is (point != "opened")
    assert assert_nothing_partial(ws) == 0
    text = "".join(f"{i:08d} crash test line\n" for i in range(400_000))
    key = archive_key(text)
    with Session(workspace=ws) as session:
        assert session.recall(key) is None
        assert "nothing is archived" in recall_answer(session.store, key)
        history = [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "cat", "input": {}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": text}]},
        ]
        _, report = session.prepare(history)
        assert report.save_errors == []
        assert session.recall(key) == text
    assert assert_nothing_partial(ws) == 2


def big_history(results: int, size: int) -> list[Any]:
    history: list[Any] = [{"role": "user", "content": "go"}]
    for n in range(results):
        text = "".join(f"{n:03d}:{i:08d} output line\n" for i in range(size // 24))
        history.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{n}", "name": "cat", "input": {}}],
            }
        )
        history.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": text}]}
        )
    return history


@pytest.mark.slow  # a crash sweep: minutes
def test_killed_at_random_moments_of_prepare(tmp_path: Path) -> None:
    """``toolkeep prepare`` killed at random moments while it saves 24 results of 2 MB: whatever is
    left is whole or refused, and a rerun completes every file."""
    source = tmp_path / "in.json"
    history = big_history(24, 2_000_000)
    source.write_text(json.dumps(history))
    rng = random.Random(8)
    ws = tmp_path / "ws"
    counts: list[int] = []
    for _ in range(6):
        proc = subprocess.Popen([*TOOLKEEP, "prepare", str(source), "--workspace", str(ws), "-o", os.devnull])
        deadline = time.monotonic() + 60
        # kill once the run is inside its saving, a random number of files further than before
        wanted = (counts[-1] if counts else 0) + rng.randint(1, 8)
        while time.monotonic() < deadline and proc.poll() is None:
            if len(list(ws.rglob("*.txt"))) >= wanted:
                time.sleep(rng.uniform(0, 0.01))
                break
            time.sleep(0.002)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        counts.append(assert_nothing_partial(ws))
    assert counts == sorted(counts)  # a killed run never takes back what an earlier one saved
    assert counts[0] < 48, "no kill landed before the work was done"
    done = subprocess.run(
        [*TOOLKEEP, "prepare", str(source), "--workspace", str(ws), "-o", os.devnull], timeout=300
    )
    assert done.returncode == 0
    assert assert_nothing_partial(ws) == 48


SQLITE_WRITER = r"""
import sys
from toolkeep.stores.sqlite import SQLiteStore
from toolkeep.shorten import archive_key
store = SQLiteStore(sys.argv[1])
for n in range(10_000):
    text = f"{n:06d} " * 400_000           # 2.8 MB each
    store.put(archive_key(text), text)
    sys.stdout.write(archive_key(text) + "\n"); sys.stdout.flush()
"""


def test_sqlite_killed_mid_transaction(tmp_path: Path) -> None:
    """A process killed while writing big originals to SQLite: the database is intact, every put
    it acknowledged is there whole, and nothing half-written can be read."""
    db = tmp_path / "archive.db"
    proc = subprocess.Popen([sys.executable, "-c", SQLITE_WRITER, str(db)], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    acknowledged = [proc.stdout.readline().decode().strip() for _ in range(5)]
    time.sleep(random.Random(3).uniform(0.0, 0.05))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        rows = conn.execute("SELECT key, body FROM entries").fetchall()
    assert {k for k, _ in rows} >= set(acknowledged)
    for key, body in rows:
        assert archive_key(bytes(body).decode("utf-8", "surrogatepass")) == key
    with SQLiteStore(db) as store:
        assert all(store.get(k) is not None for k in acknowledged)


REDIS_WRITER = r"""
import sys
from toolkeep.stores.redis import RedisStore
from toolkeep.shorten import archive_key
store = RedisStore(sys.argv[1], prefix=sys.argv[2])
for n in range(10_000):
    text = f"{n:06d} " * 2_000_000         # 14 MB each: a kill lands while one is on the wire
    store.put(archive_key(text), text)
    sys.stdout.write(archive_key(text) + "\n"); sys.stdout.flush()
"""


def test_redis_client_killed_mid_put(redis_url: str) -> None:
    """A client killed while sending big originals to Redis: each entry is whole or absent."""
    from toolkeep.stores.redis import RedisStore

    prefix = fresh_prefix()
    proc = subprocess.Popen([sys.executable, "-c", REDIS_WRITER, redis_url, prefix], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    acknowledged = [proc.stdout.readline().decode().strip() for _ in range(2)]
    time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    with RedisStore(redis_url, prefix=prefix) as store:
        try:
            client = store._live()
            keys = [k.decode() for k in client.hkeys(store.keys[0])]
            assert set(keys) >= set(acknowledged)
            for key in keys:
                text = store.get(key)
                assert text is not None and archive_key(text) == key
            sizes = {k.decode(): int(v) for k, v in client.hgetall(store.keys[1]).items()}
            assert set(sizes) == set(keys)
            assert int(client.hget(store.keys[3], "bytes") or 0) == sum(sizes.values())
        finally:
            store.clear()


def test_stale_temp_files_are_swept_when_a_workspace_is_reused(tmp_path: Path) -> None:
    """A temp file a killed process left an hour ago goes when the workspace is opened again;
    a recent one (perhaps a write in progress in another process) stays."""
    ws = tmp_path / "ws"
    Session(workspace=ws).close()
    kill_when_paused([sys.executable, "-c", HOOKED, "half", "persist", str(ws)])
    (old,) = ws.rglob(".tmp-*")
    recent = old.with_name(".tmp-1-1-budget_x_0123456789abcdef.txt")
    recent.write_bytes(b"partial")
    an_hour_ago = time.time() - 3_601
    os.utime(old, (an_hour_ago, an_hour_ago))
    Session(workspace=ws).close()
    assert not old.exists() and recent.exists()
