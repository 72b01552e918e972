"""Smaller leaks and side effects: a SQLite archive and its -wal/-shm files are private even when
the database was there before; the reading commands (recall, read, store stats|gc) never create
a file or directory; a workspace whose path a preview could not name is refused at creation."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolkeep import Config, Session, Workspace, WorkspaceError
from toolkeep.exceptions import StoreNotFoundError
from toolkeep.recall import handle_tool_call
from toolkeep.shorten import SAVED_PATH_RE
from toolkeep.stores import FileStore, open_store
from toolkeep.stores.sqlite import SQLiteStore

from .test_recall import follow_pages, page_body

ORIGINAL = "".join(f"{i:05d} a line of a big result, é中\n" for i in range(2_500))


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TOOLKEEP_STORE_URL"}
    return subprocess.run([sys.executable, "-m", "toolkeep", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=120)  # fmt: skip


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_existing_sqlite_archive_and_its_wal_files_become_0600(tmp_path: Path) -> None:
    """A database made by someone with umask 022 (0644), its -wal and -shm there (0644) because
    a connection holds it open: opening it as a store makes all three 0600."""
    db = tmp_path / "archive.db"
    old = os.umask(0o022)
    try:
        other = sqlite3.connect(db)
        other.execute("PRAGMA journal_mode=WAL")
        other.execute("CREATE TABLE t (x)")
        other.execute("INSERT INTO t VALUES (1)")
        other.commit()  # the -wal and -shm stay while the connection is open
    finally:
        os.umask(old)
    try:
        assert [mode(Path(f"{db}{s}")) for s in ("", "-wal", "-shm")] == [0o644] * 3
        with SQLiteStore(db) as store:
            store.put("0123456789abcdef", "secret")
            assert [mode(Path(f"{db}{s}")) for s in ("", "-wal", "-shm")] == [0o600] * 3
    finally:
        other.close()


def test_new_sqlite_archive_under_umask_022(tmp_path: Path) -> None:
    """A database the store creates is 0600 with its -wal/-shm, whatever the umask."""
    old = os.umask(0o022)
    try:
        with SQLiteStore(tmp_path / "new.db") as store:
            store.put("0123456789abcdef", "secret")
            assert [mode(tmp_path / f"new.db{s}") for s in ("", "-wal", "-shm")] == [0o600] * 3
    finally:
        os.umask(old)


class TestReadingCreatesNothing:
    @pytest.mark.parametrize(
        "url", ["sqlite:///{d}/new.db", "sqlite:///{d}/sub/dir/new.db", "file://{d}/files", "{d}/bare"]
    )
    @pytest.mark.parametrize(
        "args",
        [["recall", "0123456789abcdef"], ["store", "stats"], ["store", "stats", "--json"], ["store", "gc"]],
    )
    def test_a_missing_store_is_nothing_archived(self, url: str, args: list[str], tmp_path: Path) -> None:
        """A store URL that names nothing yet: exit 1, one line saying nothing was archived there,
        and no file or directory made (it used to create an empty database)."""
        before = tree(tmp_path)
        done = run(*args, "--store", url.format(d=tmp_path), cwd=tmp_path)
        assert done.returncode == 1, done.stderr
        assert done.stderr.count("\n") == 1 and "nothing was archived there" in done.stderr
        assert tree(tmp_path) == before

    def test_sqlite_file_that_is_no_archive(self, tmp_path: Path) -> None:
        """An existing SQLite file without the archive's table is nothing archived either, and
        is not given the table."""
        sqlite3.connect(tmp_path / "other.db").execute("CREATE TABLE t (x)").connection.close()
        done = run("store", "stats", "--store", f"sqlite:///{tmp_path}/other.db", cwd=tmp_path)
        assert done.returncode == 1 and "nothing was archived there" in done.stderr
        names = sqlite3.connect(tmp_path / "other.db").execute("SELECT name FROM sqlite_master").fetchall()
        assert names == [("t",)]

    def test_workspace_commands_create_nothing(self, tmp_path: Path) -> None:
        """recall and store stats --workspace on a directory with no archive/, and read in it: exit 1
        and the directory stays empty."""
        (tmp_path / "ws").mkdir()
        for args in (["recall", "0123456789abcdef", "--workspace", "ws"], ["store", "stats", "--workspace", "ws"],
                     ["read", "tool-results/x.txt", "--workspace", "ws"]):  # fmt: skip
            done = run(*args, cwd=tmp_path)
            assert done.returncode == 1, (args, done.stderr)
            assert tree(tmp_path) == ["ws"]

    def test_an_existing_store_is_read(self, tmp_path: Path) -> None:
        """Once something was archived, the same commands read it (and create nothing new)."""
        with SQLiteStore(tmp_path / "a.db") as store:
            store.put("0123456789abcdef", "kept")
        before = tree(tmp_path)
        done = run("recall", "0123456789abcdef", "--store", f"sqlite:///{tmp_path}/a.db", cwd=tmp_path)
        assert done.returncode == 0 and done.stdout == "kept"
        assert tree(tmp_path) == before

    def test_api_create_false(self, tmp_path: Path) -> None:
        """open_store(..., create=False) is StoreNotFoundError for a missing file or directory."""
        for url in (f"sqlite:///{tmp_path}/x.db", f"file://{tmp_path}/d"):
            with pytest.raises(StoreNotFoundError):
                open_store(url, create=False)
        with pytest.raises(StoreNotFoundError):
            FileStore(tmp_path / "d", create=False)
        assert tree(tmp_path) == []


BAD_NAMES = ["w]s", "w\ns", "w\rs", "w\\s", "w…s", "w．s", "w\udcffs", "w\ts"]


class TestWorkspacePaths:
    @pytest.mark.parametrize("name", BAD_NAMES)
    def test_refused_at_creation(self, name: str, tmp_path: Path) -> None:
        """A path with a ']' or a line break (which end the path a preview names), or a char the
        reader refuses (a backslash, '…', '．', bytes that are not UTF-8): WorkspaceError naming
        the reason, and nothing made."""
        with pytest.raises(WorkspaceError, match="as the session workspace: the path "):
            Workspace(tmp_path / name / "ws")
        assert tree(tmp_path) == []

    @pytest.mark.parametrize("name", ["w]s", "w\\s", "w…s", "w．s"])
    def test_refused_on_the_command_line(self, name: str, tmp_path: Path) -> None:
        """prepare --workspace with such a path: one line, exit 2, nothing made."""
        (tmp_path / "in.json").write_text(json.dumps([{"role": "user", "content": "hi"}]))
        done = run("prepare", "in.json", "--workspace", name, cwd=tmp_path)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert "as the session workspace" in done.stderr and "Traceback" not in done.stderr
        assert tree(tmp_path) == ["in.json"]

    def test_temp_directory_refused_and_removed(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A TMPDIR with a ']': Workspace() says so (set TMPDIR) and leaves nothing behind."""
        import tempfile

        odd = tmp_path / "t]mp"
        odd.mkdir()
        monkeypatch.setattr(tempfile, "tempdir", str(odd))
        with pytest.raises(WorkspaceError, match="set TMPDIR"):
            Workspace()
        assert list(odd.iterdir()) == []

    @pytest.mark.parametrize("name", ["with space", "é中🙂", "a#b@c:d", "(x) [not]"[:5], "x'y\"z", "~tilde"])
    def test_odd_but_fine_paths_round_trip(self, name: str, tmp_path: Path) -> None:
        """Paths with spaces, non-ASCII, '#@:' or quotes: the path a preview names is read back by
        read_result, byte-exact."""
        config = Config()
        history: list[Any] = [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "cat", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": ORIGINAL}]},
        ]
        with Session(config, workspace=tmp_path / name) as session:
            out, _ = session.prepare(history)
            (path,) = SAVED_PATH_RE.findall(out[2]["content"][0]["content"])
            assert path.startswith(str(session.workspace.path))

            def ask(**lines: int) -> str:
                arguments = {"path": path, **lines}
                answer = handle_tool_call("read_result", arguments, store=session.store,
                                          workspace=session.workspace, config=config)  # fmt: skip
                assert answer is not None
                return answer

            assert "".join(page_body(a) for a in follow_pages(ask)) == ORIGINAL
