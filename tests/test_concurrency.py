"""Concurrency: many sessions at once, in threads and in processes, sharing one real Redis store
(and, in threads, one workspace): no two sessions' files or keys collide, and every original
archived by any of them is recallable afterwards, byte-exact.

Sessions use the same call ids (``t0``, ``t1``, ...) and some share result texts, the cases where a
collision would show: same persisted file name, same archive key.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import toolkeep
from toolkeep import Config, Session
from toolkeep.shorten import CCR_MARKER_RE, SAVED_PATH_RE, archive_key
from toolkeep.stores.redis import RedisStore

from . import redis_server
from .redis_server import fresh_prefix

redis_url = redis_server.redis_url  # the session-wide Redis fixture

TURNS = 6


def result_text(session: int, turn: int) -> str:
    """Turn results of one session: big enough to be persisted and compacted; every third one is
    the same text in every session (same archive key from many writers)."""
    owner = "shared" if turn % 3 == 0 else f"session {session}"
    line = f"{owner} turn {turn} line é中🙂\n"
    return line * (30_000 // len(line) + turn * 50)


def turns(session: int) -> Iterator[list[Any]]:
    """The requests of one agent session: the history before each assistant reply."""
    history: list[Any] = [{"role": "user", "content": f"task {session}"}]
    for turn in range(TURNS):
        history = [
            *history,
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{turn}", "name": "cat", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"t{turn}", "content": result_text(session, turn)}
                ],
            },
        ]
        yield history


def run_session(session: int, store: Any, workspace: Path | None) -> dict[str, Any]:
    """Prepare every request of one session; what it sent, where it saved, what it archived."""
    out: list[Any] = []
    with Session(Config(), workspace=workspace, store=store) as s:
        for request in turns(session):
            out, report = s.prepare(request)
            assert report.save_errors == []
            assert toolkeep.validate(out) == []
        sent = json.dumps(out, ensure_ascii=False)
        saved = {
            p: Path(p).read_text(encoding="utf-8") for p in SAVED_PATH_RE.findall(sent)
        }  # read before the workspace goes
        return {"workspace": str(s.workspace.path), "keys": set(CCR_MARKER_RE.findall(sent)), "saved": saved}


def originals(sessions: range) -> dict[str, str]:
    return {archive_key(result_text(s, t)): result_text(s, t) for s in sessions for t in range(TURNS)}


def check(results: list[dict[str, Any]], url: str, prefix: str, sessions: range, shared_ws: bool) -> None:
    """Every session's files are its own and whole, every key is recallable byte-exact."""
    if not shared_ws:
        assert len({r["workspace"] for r in results}) == len(results)
    expected = originals(sessions)
    for r in results:
        for path, text in r["saved"].items():
            assert path.startswith(r["workspace"] + "/")
            assert archive_key(text) in expected and expected[archive_key(text)] == text
    keys = set().union(*(r["keys"] for r in results))
    assert keys and keys <= set(expected)
    with RedisStore(url, prefix=prefix) as store:
        for key in keys:
            assert store.get(key) == expected[key]
        assert store.stats().entries == len(expected)  # every original once, none lost, none extra


@pytest.mark.parametrize("shared_store", [True, False], ids=["one-client", "client-per-session"])
def test_sessions_in_threads(redis_url: str, shared_store: bool) -> None:
    """Sixteen sessions in eight threads, each with its own workspace, one Redis namespace."""
    prefix = fresh_prefix()
    url = f"{redis_url}?prefix={prefix}"
    shared = toolkeep.open_store(url) if shared_store else None
    try:
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda n: run_session(n, shared or url, None), range(16)))
        check(results, redis_url, prefix, range(16), shared_ws=False)
    finally:
        if shared is not None:
            shared.close()
        RedisStore(redis_url, prefix=prefix).clear()


def test_sessions_in_threads_sharing_a_workspace(redis_url: str, tmp_path: Path) -> None:
    """Eight sessions on one workspace directory at once (same call ids, same names): every
    persisted file is whole and holds what its name says."""
    prefix = fresh_prefix()
    ws = tmp_path / "ws"
    barrier = threading.Barrier(8)

    def one(n: int) -> dict[str, Any]:
        barrier.wait()
        return run_session(n, f"{redis_url}?prefix={prefix}", ws)

    try:
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(one, range(8)))
        check(results, redis_url, prefix, range(8), shared_ws=True)
        for path in (ws / "tool-results").iterdir():
            assert not path.name.startswith(".tmp-")
            assert path.name.endswith(archive_key(path.read_text(encoding="utf-8")) + ".txt")
    finally:
        RedisStore(redis_url, prefix=prefix).clear()


WORKER = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from tests import test_concurrency as tc
url, first, count = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
results = [tc.run_session(n, url, None) for n in range(first, first + count)]
json.dump([{**r, "keys": sorted(r["keys"])} for r in results], sys.stdout)
"""


def test_sessions_in_processes(redis_url: str) -> None:
    """Four processes, three sessions each, one Redis namespace: every key recallable afterwards."""
    prefix = fresh_prefix()
    root = str(Path(__file__).resolve().parents[1])
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, root, f"{redis_url}?prefix={prefix}", str(3 * p), "3"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for p in range(4)
    ]
    try:
        results: list[dict[str, Any]] = []
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=300)
            assert proc.returncode == 0, stderr.decode()
            results += [{**r, "keys": set(r["keys"])} for r in json.loads(stdout)]
        check(results, redis_url, prefix, range(12), shared_ws=False)
    finally:
        RedisStore(redis_url, prefix=prefix).clear()


def test_namespaces_do_not_mix(redis_url: str) -> None:
    """Two prefixes on one server: a key archived under one is unknown to the other."""
    a, b = fresh_prefix(), fresh_prefix()
    try:
        run_session(0, f"{redis_url}?prefix={a}", None)
        with RedisStore(redis_url, prefix=b) as other:
            assert all(other.get(k) is None for k in originals(range(1)))
            assert other.stats().entries == 0
    finally:
        RedisStore(redis_url, prefix=a).clear()
        RedisStore(redis_url, prefix=b).clear()
