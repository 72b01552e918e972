"""The session workspace and persisted outputs (SPEC 5)."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from toolkeep import Config, ReaderError, Session, Workspace
from toolkeep.workspace import persisted_name

from .strategies import anthropic_turns


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


class TestPersistedName:
    @pytest.mark.parametrize(
        ("call_id", "safe"),
        [
            ("toolu_01AbC-x", "toolu_01AbC-x"),
            ("call/b c", "call_b_c"),
            ("../../etc", "______etc"),
            ("é🙂:*", "____"),
            ("", "result"),
        ],
    )
    def test_name_is_id_with_unsafe_chars_replaced_and_content_hash(self, call_id: str, safe: str) -> None:
        """``budget_<id>_<hash>.txt``: unsafe chars become ``_``, ``result`` for no id, SHA-256[:16]."""
        text = "content é"
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        assert persisted_name(call_id, text) == f"budget_{safe}_{digest}.txt"

    def test_name_is_byte_stable(self) -> None:
        """The name depends only on id and content: no counter, clock or randomness."""
        assert persisted_name("a", "x") == persisted_name("a", "x")
        assert persisted_name("a", "x") != persisted_name("a", "y")
        assert persisted_name("a", "x") != persisted_name("b", "x")

    def test_name_stable_across_processes(self) -> None:
        """Another interpreter computes the same name."""
        code = "from toolkeep.workspace import persisted_name; print(persisted_name('c/1', 'é' * 9))"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == persisted_name("c/1", "é" * 9)


class TestDirectory:
    def test_private_directory_layout_and_modes(self) -> None:
        """``<tmp>/toolkeep-<random>/`` 0700 with tool-results/ 0700 and scratch/."""
        with Workspace() as ws:
            assert ws.path.parent == Path(tempfile.gettempdir()).resolve()
            assert ws.path.name.startswith("toolkeep-") and len(ws.path.name) > len("toolkeep-")
            assert mode(ws.path) == 0o700
            assert mode(ws.results_dir) == 0o700
            assert ws.scratch_dir.is_dir()

    def test_persisted_file_is_0600_and_exact(self) -> None:
        """A persisted output is mode 0600 and holds the text byte for byte."""
        text = "a\r\nb\x00c é 🙂\n"
        with Workspace() as ws:
            path = ws.persist("toolu_1", text)
            assert path.parent == ws.results_dir
            assert mode(path) == 0o600
            assert path.read_bytes() == text.encode("utf-8")

    def test_written_once_and_reused(self) -> None:
        """Persisting the same output twice reuses the file; no temp files are left behind."""
        with Workspace() as ws:
            first = ws.persist("t", "same")
            inode = first.stat().st_ino
            second = ws.persist("t", "same")
            assert first == second and second.stat().st_ino == inode
            assert [p.name for p in ws.results_dir.iterdir()] == [first.name]

    def test_parallel_sessions_of_two_conversations_never_share(self) -> None:
        """Two sessions at once on two conversations get two directories."""
        with Session(Config()) as a, Session(Config()) as b:
            a.prepare(anthropic_turns(("t1", "ls", "a")))
            b.prepare([{"role": "user", "content": "another conversation"}])
            assert a.workspace.path != b.workspace.path

    def test_removed_on_close_and_context_exit(self) -> None:
        """close() and leaving the with-block remove the directory."""
        s = Session(Config())
        s.prepare(anthropic_turns(("t1", "ls", "x" * 25_000)))
        path = s.workspace.path
        assert any(s.workspace.results_dir.iterdir())
        s.close()
        assert not path.exists()
        s.close()  # a second close is harmless
        with Session(Config()) as s2:
            s2.prepare([{"role": "user", "content": "removed on exit"}])
            path = s2.workspace.path
        assert not path.exists()

    def test_kept_with_keep_tmpdir(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """TOOLKEEP_KEEP_TMPDIR=true (or CHATCLI_AGENT_KEEP_TMPDIR) keeps it after close."""
        for var in ("TOOLKEEP_KEEP_TMPDIR", "CHATCLI_AGENT_KEEP_TMPDIR"):
            monkeypatch.setenv(var, "true")
            with Session() as s:
                s.prepare([{"role": "user", "content": f"kept by {var}"}])
                path = s.workspace.path
            try:
                assert path.is_dir()
            finally:
                shutil.rmtree(path)
            monkeypatch.delenv(var)

    def test_explicit_directory_created_and_kept(self, tmp_path: Path) -> None:
        """A named directory is created if missing (0700) and kept after close."""
        target = tmp_path / "a" / "b"
        with Session(Config(), workspace=target) as s:
            assert s.workspace.path == target.resolve()
            assert mode(target) == 0o700
        assert (target / "tool-results").is_dir()

    @pytest.mark.parametrize(("keep", "kept"), [("", False), ("TOOLKEEP_KEEP_TMPDIR=true", True)])
    def test_removed_at_interpreter_exit(self, keep: str, kept: bool) -> None:
        """A session never closed is removed when the interpreter exits, unless kept."""
        env = {k: v for k, v in os.environ.items() if not k.endswith("KEEP_TMPDIR")}
        if keep:
            name, value = keep.split("=")
            env[name] = value
        code = (
            "import toolkeep; s = toolkeep.Session()\n"
            f"s.prepare([{{'role': 'user', 'content': 'never closed {keep}'}}]); print(s.workspace.path)"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
        )
        path = Path(out.stdout.strip())
        try:
            assert path.parent == Path(os.environ["TOOLKEEP_CACHE_DIR"]).resolve() / "sessions"
            assert path.exists() is kept
        finally:
            if path.exists():
                shutil.rmtree(path)


class TestReader:
    def test_reads_line_range_of_persisted_file(self) -> None:
        """The reader pages a persisted file by 1-based inclusive line range."""
        with Workspace() as ws:
            path = ws.persist("t", "".join(f"line {i}\n" for i in range(1, 101)))
            assert ws.read(path, 10, 12) == "line 10\nline 11\nline 12\n"
            assert ws.read(path.relative_to(ws.path), 100) == "line 100\n"

    @pytest.mark.parametrize("make", ["outside", "dotdot", "symlink", "directory", "missing"])
    def test_refuses_anything_outside(self, make: str, tmp_path: Path) -> None:
        """Paths outside the workspace (directly, by ``..`` or a symlink), directories and missing
        files are refused with ReaderError."""
        secret = tmp_path / "secret.txt"
        secret.write_text("no")
        with Workspace() as ws:
            targets: dict[str, str | Path] = {
                "outside": secret,
                "dotdot": f"{ws.results_dir}/{os.path.relpath(secret, ws.results_dir)}",
                "symlink": ws.scratch_dir / "link.txt",
                "directory": ws.results_dir,
                "missing": ws.results_dir / "nope.txt",
            }
            target = targets[make]
            if make == "symlink":
                (ws.scratch_dir / "link.txt").symlink_to(secret)
            with pytest.raises(ReaderError):
                ws.read(target)
