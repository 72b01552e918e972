"""Symbolic links planted in the workspace or a file store (by an agent's own tools, say) are
refused, on writes as on reads: no original is written outside, none counts as stored without
being written, and ``recall`` never prints a file it did not write."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import toolkeep
from toolkeep import Config, Session, StoreError, WorkspaceError
from toolkeep.recall import handle_tool_call, recall_answer
from toolkeep.shorten import CCR_MARKER_RE, SAVED_PATH_RE, archive_key
from toolkeep.stores import FileStore
from toolkeep.workspace import persisted_name

SECRET = "the outside file's secret contents\n"
ORIGINAL = "".join(f"{i:05d} line of a big tool result\n" for i in range(3_000))


def history(call_id: str = "t1", text: str = ORIGINAL) -> list[Any]:
    return [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": "cat", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": text}]},
    ]


def result_text(out: list[Any]) -> str:
    return str(out[2]["content"][0]["content"])


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside every workspace, holding a file nobody may read through toolkeep."""
    place = tmp_path / "outside"
    place.mkdir()
    (place / "secret.txt").write_text(SECRET)
    return place


def assert_untouched(outside: Path) -> None:
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == SECRET


@pytest.mark.parametrize("sub", ["tool-results", "archive"])
def test_reused_workspace_with_a_linked_directory_is_refused(sub: str, tmp_path: Path, outside: Path) -> None:
    """A workspace passed again whose tool-results/ or archive/ is now a link: WorkspaceError
    naming it, before anything is written (or swept) there."""
    ws = tmp_path / "ws"
    toolkeep.Workspace(ws).close()
    shutil.rmtree(ws / sub)
    (ws / sub).symlink_to(outside, target_is_directory=True)
    (outside / ".tmp-1-1-old").write_text("a stale temp file of someone else")
    os.utime(outside / ".tmp-1-1-old", (0, 0))
    with pytest.raises(
        WorkspaceError, match=rf"refused: .*{sub} is a symbolic link that toolkeep did not make"
    ):
        Session(workspace=ws)
    assert (outside / ".tmp-1-1-old").exists()  # the sweep of stale temp files did not follow it
    (outside / ".tmp-1-1-old").unlink()
    assert_untouched(outside)


def test_results_directory_swapped_for_a_link_mid_session(tmp_path: Path, outside: Path) -> None:
    """tool-results/ replaced by a link under a live session: the output is not written there;
    the preview says it could not be saved and why; the archive still works."""
    with Session(Config(), workspace=tmp_path / "ws") as session:
        results = session.workspace.results_dir
        shutil.rmtree(results)
        results.symlink_to(outside, target_is_directory=True)
        out, report = session.prepare(history())
        text = result_text(out)
        assert SAVED_PATH_RE.search(text) is None
        assert "could not be saved: refused: " in text and "symbolic link" in text
        assert [e.split()[0] for e in report.save_errors] == ["persist"]
        (key,) = CCR_MARKER_RE.findall(text)
        assert session.store.get(key) == ORIGINAL
    assert_untouched(outside)


def test_archive_directory_swapped_for_a_link_mid_session(
    tmp_path: Path, outside: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """archive/ replaced by a link: nothing is archived there, no marker is promised, the log
    says it was refused, and recall does not read through the link."""
    with Session(Config(), workspace=tmp_path / "ws") as session:
        archive = session.workspace.archive_dir
        shutil.rmtree(archive)
        archive.symlink_to(outside, target_is_directory=True)
        (outside / f"{archive_key(SECRET)}.txt").write_text(SECRET)
        with caplog.at_level(logging.WARNING, logger="toolkeep"):
            out, _ = session.prepare(history())
        assert CCR_MARKER_RE.search(result_text(out)) is None
        assert "symbolic link" in caplog.text
        answer = recall_answer(session.store, archive_key(SECRET))
        assert SECRET.strip() not in answer and "symbolic link" in answer
    (outside / f"{archive_key(SECRET)}.txt").unlink()
    assert_untouched(outside)


def test_planted_archive_entry_is_neither_trusted_nor_followed(tmp_path: Path, outside: Path) -> None:
    """archive/<key>.txt planted as a link before the original is archived: the put is refused
    (it used to count as stored, never written), and recall of that key, or of a key linked to
    any outside file, answers with the refusal, not the outside file's text."""
    with Session(Config(), workspace=tmp_path / "ws") as session:
        archive = session.workspace.archive_dir
        (archive / f"{archive_key(ORIGINAL)}.txt").symlink_to(outside / "secret.txt")
        (archive / "0123456789abcdef.txt").symlink_to(outside / "secret.txt")
        out, report = session.prepare(history())
        assert CCR_MARKER_RE.search(result_text(out)) is None  # not promised: it was not stored
        assert [e.split()[0] for e in report.save_errors] == ["archive"]
        for key in (archive_key(ORIGINAL), "0123456789abcdef"):
            with pytest.raises(StoreError, match="symbolic link"):
                session.store.get(key)
            answer = handle_tool_call(
                "recall", {"key": key}, store=session.store, workspace=session.workspace
            )
            assert answer is not None and "symbolic link" in answer and SECRET.strip() not in answer
        stats = session.store.stats()
        assert stats.entries == 0  # links are not entries
        cli = subprocess.run([sys.executable, "-m", "toolkeep", "recall", "0123456789abcdef", "--workspace",
                              str(session.workspace.path)], capture_output=True, text=True, timeout=120)  # fmt: skip
        assert cli.returncode == 2 and "symbolic link" in cli.stderr
        assert SECRET.strip() not in cli.stdout + cli.stderr
    assert_untouched(outside)


def test_planted_persisted_file_is_refused(tmp_path: Path, outside: Path) -> None:
    """tool-results/<name> planted as a link to an outside file: persist refuses it (it used to
    count as saved), and the outside file is left as it was."""
    with toolkeep.Workspace(tmp_path / "ws") as ws:
        name = persisted_name("t1", ORIGINAL)
        (ws.results_dir / name).symlink_to(outside / "secret.txt")
        with pytest.raises(OSError, match="symbolic link") as info:
            ws.persist("t1", ORIGINAL)
        assert info.value.strerror is not None and "symbolic link" in info.value.strerror
    assert_untouched(outside)


def test_file_store_directory_that_is_a_link(tmp_path: Path, outside: Path) -> None:
    """A file store whose directory is a link is refused at once, and if one is planted later,
    at the next call; nothing is written through it."""
    (tmp_path / "linked").symlink_to(outside, target_is_directory=True)
    with pytest.raises(StoreError, match="symbolic link"):
        FileStore(tmp_path / "linked")
    store = FileStore(tmp_path / "real")
    store.put("0123456789abcdef", "kept")
    shutil.rmtree(tmp_path / "real")
    (tmp_path / "real").symlink_to(outside, target_is_directory=True)
    for call in (lambda: store.put("fedcba9876543210", "new"), lambda: store.get("0123456789abcdef"),
                 store.stats, store.gc):  # fmt: skip
        with pytest.raises(StoreError, match="symbolic link"):
            call()
    assert_untouched(outside)
