"""A conversation's workspace (``Workspace.for_conversation``): where it is, who shares it, when it goes.

Every test here names conversations of its own (a fresh key, or a first message holding the test's
name), so that a test run in parallel with it never shares a directory it removes.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolkeep import Config, Session, Workspace, WorkspaceError
from toolkeep.conversation_key import conversation_key
from toolkeep.shorten import SAVED_PATH_RE
from toolkeep.userdirs import user_sessions_dir
from toolkeep.workspace import SESSION_TTL_SECONDS

from .strategies import anthropic_histories, property_settings


def key() -> str:
    return secrets.token_hex(8)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def history(name: str, size: int = 25_000) -> list[Any]:
    """A conversation of its own (first message ``name``) with one result big enough to persist."""
    return [
        {"role": "user", "content": name},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "grep", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x" * size}]},
    ]


class TestWhere:
    def test_under_the_per_user_cache_dir_private(self) -> None:
        """``<cache>/sessions/<key>/``, every level 0700, never under the system temp dir."""
        k = key()
        with Workspace.for_conversation(k) as ws:
            cache = Path(os.environ["TOOLKEEP_CACHE_DIR"]).resolve()
            assert ws.path == cache / "sessions" / k
            for path in (cache, cache / "sessions", ws.path, ws.results_dir, ws.archive_dir, ws.scratch_dir):
                assert mode(path) == 0o700, path
            assert mode(cache / "sessions" / f"{k}.lock") == 0o600

    def test_a_session_names_its_workspace_from_the_first_message(self) -> None:
        """The directory is the key of the first message, and the saved file is inside it."""
        h = history("named from me")
        with Session(Config()) as session:
            out, _ = session.prepare(h)
            assert session.workspace.path.name == conversation_key(h[0])
            assert f"{session.workspace.results_dir}/budget_t1_" in json.dumps(out)

    def test_no_directory_until_needed(self) -> None:
        """A Session makes no conversation directory before it serves a conversation."""
        sessions = user_sessions_dir()
        with Session(Config(store_url="memory://")):
            before = {p.name for p in sessions.iterdir()}
        assert {p.name for p in sessions.iterdir()} <= before

    def test_a_planted_link_is_refused(self, tmp_path: Path) -> None:
        """A symbolic link in place of a conversation's directory or its lock is refused."""
        k = key()
        target = tmp_path / "elsewhere"
        target.mkdir()
        (user_sessions_dir() / k).symlink_to(target)
        try:
            with pytest.raises(WorkspaceError, match="symbolic link"):
                Workspace.for_conversation(k)
        finally:
            (user_sessions_dir() / k).unlink()
            (user_sessions_dir() / f"{k}.lock").unlink(missing_ok=True)
        assert list(target.iterdir()) == []
        k = key()
        (user_sessions_dir() / f"{k}.lock").symlink_to(tmp_path / "lock")
        try:
            with pytest.raises(WorkspaceError, match="symbolic link"):
                Workspace.for_conversation(k)
        finally:
            (user_sessions_dir() / f"{k}.lock").unlink()
        assert not (tmp_path / "lock").exists()

    def test_a_bad_key_is_refused(self) -> None:
        with pytest.raises(WorkspaceError, match="16 lowercase hex"):
            Workspace.for_conversation("../../etc")

    def test_a_cache_dir_previews_cannot_name_is_refused(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A cache dir holding a ']' is refused, naming the variable to set."""
        monkeypatch.setenv("TOOLKEEP_CACHE_DIR", str(tmp_path / "a]b"))
        with pytest.raises(WorkspaceError, match="TOOLKEEP_CACHE_DIR"):
            Workspace.for_conversation(key())


class TestShared:
    def test_the_last_session_to_close_removes_it(self) -> None:
        """Two sessions of one conversation share its directory; it goes with the second."""
        h = history("shared by two")
        a, b = Session(Config()), Session(Config())
        out_a, _ = a.prepare(h)
        out_b, _ = b.prepare(h)
        assert a.workspace.path == b.workspace.path
        assert json.dumps(out_a) == json.dumps(out_b)
        saved = next(a.workspace.results_dir.iterdir())
        a.close()
        assert saved.read_text() == "x" * 25_000  # b's history still names it
        b.close()
        assert not b.workspace.path.exists()
        assert not (b.workspace.path.parent / f"{b.workspace.path.name}.lock").exists()

    def test_held_by_another_process(self, tmp_path: Path) -> None:
        """A session in another process holds the directory: closing ours leaves it, and the
        other's close removes it."""
        h = history("held by a child process")
        code = (
            "import json, sys, toolkeep\n"
            "s = toolkeep.Session(toolkeep.Config())\n"
            "s.prepare(json.loads(sys.argv[1])); print(s.workspace.path, flush=True)\n"
            "sys.stdin.readline(); s.close(); print('closed', flush=True)\n"
        )
        child = subprocess.Popen(
            [sys.executable, "-c", code, json.dumps(h)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout is not None and child.stdin is not None
            path = Path(child.stdout.readline().strip())
            with Session(Config()) as session:
                session.prepare(h)
                assert session.workspace.path == path
            assert path.is_dir() and any((path / "tool-results").iterdir())
            child.stdin.write("\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "closed"
        finally:
            child.wait(timeout=60)
        assert not path.exists()

    def test_one_that_keeps_it_keeps_it_for_all(self) -> None:
        """A session with keep_tmpdir keeps the shared directory, whoever closes last."""
        h = history("kept by one of two")
        with Session(Config(keep_tmpdir=True)) as keeper, Session(Config()) as other:
            keeper.prepare(h)
            other.prepare(h)
            path = other.workspace.path
        try:
            assert path.is_dir() and any((path / "tool-results").iterdir())
        finally:
            with Workspace.for_conversation(path.name):  # opened without keep: still kept
                pass
            assert path.is_dir()

    def test_evicted_conversation_releases_its_directory(self) -> None:
        """A conversation whose state a session drops lets go of its directory too."""
        with Session(Config()) as session:
            session.conversations_kept = 2
            session.prepare(history("evicted first"))
            first = session.workspace.path
            session.prepare(history("evicted second"))
            session.prepare(history("evicted third"))
            assert not first.exists()
            assert session.workspace.path.is_dir()

    def test_read_result_reaches_every_conversation_the_session_holds(self) -> None:
        """read_result of a path another conversation of the same session saved reads it."""
        with Session(Config()) as session:
            out, _ = session.prepare(history("reader one", 30_000))
            saved = SAVED_PATH_RE.search(out[-1]["content"][0]["content"])
            assert saved is not None
            path = saved[1]
            session.prepare(history("reader two"))
            answer = session.handle_tool_call("read_result", {"path": path})
            assert answer is not None and "x" * 100 in answer


class TestSweep:
    def age(self, k: str, seconds: float) -> None:
        old = time.time() - seconds
        os.utime(user_sessions_dir() / f"{k}.lock", (old, old))

    def sweep_now(self) -> None:
        stamp = user_sessions_dir() / ".swept"
        if stamp.exists():
            os.utime(stamp, (0, 0))

    def test_an_old_directory_nobody_holds_is_removed(self) -> None:
        """Kept (or left by a killed process) and unused past the TTL: the next opening removes it."""
        old, fresh = key(), key()
        for k in (old, fresh):
            Workspace.for_conversation(k, keep=True).close()
        self.age(old, SESSION_TTL_SECONDS + 60)
        self.age(fresh, SESSION_TTL_SECONDS - 3_600)
        self.sweep_now()
        with Workspace.for_conversation(key()):
            pass
        sessions = user_sessions_dir()
        assert not (sessions / old).exists() and not (sessions / f"{old}.lock").exists()
        assert (sessions / fresh).is_dir()
        with Workspace.for_conversation(fresh):
            pass
        (sessions / f"{fresh}.keep").unlink()
        Workspace.for_conversation(fresh).close()
        assert not (sessions / fresh).exists()

    def test_a_held_directory_is_never_swept(self) -> None:
        """A live session's directory stays, however old its last opening."""
        k = key()
        with Workspace.for_conversation(k) as held:
            self.age(k, SESSION_TTL_SECONDS * 2)
            self.sweep_now()
            with Workspace.for_conversation(key()):
                pass
            assert held.path.is_dir()


@property_settings(25)
@given(h=anthropic_histories())
def test_two_sessions_give_the_same_bytes(h: list[Any]) -> None:
    """Whatever the history, two sessions (one after the other, the first closed) prepare the
    same bytes: nothing in the output depends on the session object."""
    outs = []
    for _ in range(2):
        with Session(Config()) as session:
            out, _ = session.prepare(h)
            outs.append(json.dumps(out, sort_keys=True))
    assert outs[0] == outs[1]


@property_settings(50)
@given(first=st.recursive(st.none() | st.booleans() | st.integers() | st.text(), lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3), max_leaves=10))  # fmt: skip
def test_the_conversation_key_is_a_name(first: Any) -> None:
    """Any first message gives a key that is a valid directory name, the same every time."""
    k = conversation_key(first)
    assert len(k) == 16 and all(c in "0123456789abcdef" for c in k)
    assert conversation_key(first) == k
