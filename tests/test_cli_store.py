"""The archive commands as a user runs them, in real subprocesses: ``prepare --store``,
``recall``, ``read`` and ``store stats|gc``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolkeep.shorten import CCR_MARKER_RE, SAVED_PATH_RE, archive_key
from toolkeep.stores.sqlite import SQLiteStore

from .strategies import anthropic_turns
from .test_stores import FakeClock

TOOLKEEP = [sys.executable, "-m", "toolkeep"]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    full_env = {k: v for k, v in os.environ.items() if k != "TOOLKEEP_STORE_URL"}
    full_env.update(env or {})
    return subprocess.run([*TOOLKEEP, *args], capture_output=True, env=full_env, timeout=120)


def big(n: int, salt: str = "") -> str:
    return "".join(
        f"{salt}{i:05d} é中🙂 \t line\r\n" if i % 7 == 0 else f"{salt}{i:05d} x\n" for i in range(n)
    )


@pytest.fixture
def session(tmp_path: Path) -> tuple[Path, list[str], dict[str, Any]]:
    """A history of three big results prepared into a SQLite store: (tmp, originals, outcome)."""
    originals = [big(3_000, str(n)) for n in range(3)]
    source = tmp_path / "in.json"
    source.write_text(json.dumps(anthropic_turns(*[(f"c{n}", "grep", t) for n, t in enumerate(originals)])))
    url = f"sqlite://{tmp_path}/archive.db"
    done = run("prepare", str(source), "-o", str(tmp_path / "out.json"), "--workspace", str(tmp_path / "ws"),
               "--store", url)  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = (tmp_path / "out.json").read_text()
    return tmp_path, originals, {"url": url, "out": out}


class TestRecall:
    def test_prepare_store_then_recall_every_key(
        self, session: tuple[Path, list[str], dict[str, Any]]
    ) -> None:
        """prepare --store archives there; recall --store prints each original byte-exact."""
        _, originals, outcome = session
        keys = list(dict.fromkeys(CCR_MARKER_RE.findall(outcome["out"])))
        assert sorted(keys) == sorted(archive_key(t) for t in originals)
        for key in keys:
            done = run("recall", key, "--store", outcome["url"])
            assert done.returncode == 0, done.stderr
            assert done.stdout.decode("utf-8") in originals
            assert archive_key(done.stdout.decode("utf-8")) == key

    def test_line_range(self, session: tuple[Path, list[str], dict[str, Any]]) -> None:
        """--start-line/--end-line print exactly those lines (CRLF kept)."""
        _, originals, outcome = session
        key = archive_key(originals[0])
        done = run("recall", key, "--store", outcome["url"], "--start-line", "7", "--end-line", "8")
        assert done.stdout.decode() == "".join(originals[0].split("\n")[6:8][i] + "\n" for i in range(2))

    def test_store_from_environment(self, session: tuple[Path, list[str], dict[str, Any]]) -> None:
        """Without --store or --workspace, TOOLKEEP_STORE_URL names the store."""
        _, originals, outcome = session
        done = run("recall", archive_key(originals[1]), env={"TOOLKEEP_STORE_URL": outcome["url"]})
        assert done.returncode == 0 and done.stdout.decode() == originals[1]

    def test_default_workspace_archive(self, tmp_path: Path) -> None:
        """Without --store, prepare archives in the workspace and recall --workspace finds it."""
        original = big(4_000)
        source = tmp_path / "in.json"
        source.write_text(json.dumps(anthropic_turns(("c1", "grep", original))))
        prepared = run(
            "prepare", str(source), "-o", str(tmp_path / "o.json"), "--workspace", str(tmp_path / "w")
        )
        assert prepared.returncode == 0 and "<<ccr:" in (tmp_path / "o.json").read_text()
        done = run("recall", archive_key(original), "--workspace", str(tmp_path / "w"))
        assert done.returncode == 0 and done.stdout.decode() == original

    def test_unknown_key_exits_1(self, session: tuple[Path, list[str], dict[str, Any]]) -> None:
        """An unknown key: exit 1 and one line on stderr."""
        _, _, outcome = session
        done = run("recall", "0123456789abcdef", "--store", outcome["url"])
        assert done.returncode == 1 and done.stdout == b""
        assert b"no archived original under key 0123456789abcdef" in done.stderr

    @pytest.mark.parametrize(
        "args",
        [["../../etc/passwd"], ["0123456789ABCDEG"],
         ["0123456789abcdef", "--store", "memory://", "--workspace", "."],
         ["0123456789abcdef", "--store", "memory://", "--start-line", "3", "--end-line", "2"],
         ["0123456789abcdef", "--store", "ftp://x"]],
    )  # fmt: skip
    def test_bad_usage_exits_2(self, args: list[str], tmp_path: Path) -> None:
        """A malformed key, both stores, a reversed range, a bad URL: exit 2, one line."""
        if args[0] == "../../etc/passwd":
            args = [*args, "--store", "memory://"]
        done = run("recall", *args)
        assert done.returncode == 2, done.stderr
        assert done.stderr.count(b"\n") == 1 and b"Traceback" not in done.stderr


class TestRead:
    def test_read_relative_and_absolute(self, session: tuple[Path, list[str], dict[str, Any]]) -> None:
        """A saved path from the prepared output reads by absolute path or relative to the workspace."""
        tmp, originals, outcome = session
        paths = SAVED_PATH_RE.findall(outcome["out"])
        assert paths
        for path in paths:
            done = run("read", path, "--workspace", str(tmp / "ws"))
            assert done.returncode == 0 and done.stdout.decode() in originals
            relative = os.path.relpath(path, tmp / "ws")
            assert run("read", relative, "--workspace", str(tmp / "ws")).stdout == done.stdout
        done = run("read", paths[0], "--workspace", str(tmp / "ws"), "--start-line", "2", "--end-line", "3")
        assert done.stdout.decode().count("\n") == 2

    @pytest.mark.parametrize(
        "path", ["../in.json", "/etc/passwd", "tool-results", "nothing.txt", "..\uff0fin.json"]
    )
    def test_refused_exits_1(self, session: tuple[Path, list[str], dict[str, Any]], path: str) -> None:
        """Outside, not a file, missing, look-alike: exit 1 with the reason, nothing on stdout."""
        tmp, _, _ = session
        done = run("read", path, "--workspace", str(tmp / "ws"))
        assert done.returncode == 1 and done.stdout == b""
        assert done.stderr.startswith(b"toolkeep: error: ")


class TestStoreCommands:
    def test_stats(self, session: tuple[Path, list[str], dict[str, Any]]) -> None:
        """store stats --json reports the SQLite store's entries and bytes."""
        _, originals, outcome = session
        done = run("store", "stats", "--store", outcome["url"], "--json")
        stats = json.loads(done.stdout)
        assert stats["backend"] == "sqlite" and stats["entries"] == 3
        assert stats["bytes"] == sum(len(t.encode()) for t in originals)
        assert b"entries" in run("store", "stats", "--store", outcome["url"]).stdout

    def test_gc_removes_expired(self, tmp_path: Path) -> None:
        """store gc with a ttl in the URL deletes what was last used longer ago than that."""
        url = f"sqlite://{tmp_path}/a.db"
        clock = FakeClock(now=1_000.0)  # 1970: long expired for any real clock
        with SQLiteStore(tmp_path / "a.db", clock=clock) as store:
            store.put("0123456789abcdef", "old")
        with SQLiteStore(tmp_path / "a.db") as store:
            store.put("fedcba9876543210", "new")
        done = run("store", "gc", "--store", url + "?ttl=1d")
        assert done.returncode == 0, done.stderr
        assert done.stdout.decode().startswith("removed 1 expired, evicted 0; 1 originals")
        assert run("recall", "0123456789abcdef", "--store", url).returncode == 1
        assert run("recall", "fedcba9876543210", "--store", url).stdout == b"new"

    def test_gc_evicts_to_the_cap(self, tmp_path: Path) -> None:
        """store gc with max_entries evicts the least recently used."""
        url = f"sqlite://{tmp_path}/a.db"
        clock = FakeClock()
        with SQLiteStore(tmp_path / "a.db", clock=clock) as store:
            for n in range(5):
                store.put(f"{n:016x}", str(n))
                clock.tick()
        done = run("store", "gc", "--store", url + "?max_entries=2")
        assert done.stdout.decode().startswith("removed 0 expired, evicted 3; 2 originals")

    def test_no_store_named_is_the_per_user_archive(self, tmp_path: Path) -> None:
        """With no store named, store stats and recall use the per-user archive, where a capped
        tool output keeps its original: stats show its limits (1 GiB, 30 days), recall finds the
        original, also after a miss in a workspace's archive. Before anything was kept there:
        exit 1, and no archive is made."""
        env = {"TOOLKEEP_CACHE_DIR": str(tmp_path / "cache")}
        assert run("store", "stats", env=env).returncode == 1
        assert run("recall", "0123456789abcdef", env=env).returncode == 1
        assert not (tmp_path / "cache" / "archive.db").exists()
        original = big(4_000)
        code = (
            "import re, sys, toolkeep\n"
            "with toolkeep.Session() as s:\n"
            "    print(re.search(r'<<ccr:(\\w+)>>', s.cap_result('c1', 'ls', sys.stdin.read()))[1])\n"
        )
        capped = subprocess.run(
            [sys.executable, "-c", code], input=original.encode(), capture_output=True,
            env={**os.environ, **env}, timeout=120,
        )  # fmt: skip
        key = capped.stdout.decode().strip()
        assert key == archive_key(original), capped.stderr
        assert run("recall", key, env=env).stdout.decode() == original
        (tmp_path / "ws" / "archive").mkdir(parents=True)
        assert run("recall", key, "--workspace", str(tmp_path / "ws"), env=env).stdout.decode() == original
        stats = json.loads(run("store", "stats", "--json", env=env).stdout)
        assert (stats["entries"], stats["max_bytes"], stats["ttl"]) == (1, 2**30, 30 * 86_400)
        url = f"sqlite://{tmp_path / 'cache' / 'archive.db'}"
        text = run("store", "stats", "--store", url, env=env).stdout.decode()
        assert "1,073,741,824 (1 GiB)" in text and "2,592,000 s (30 days)" in text
        assert "max_entries  none" in text
