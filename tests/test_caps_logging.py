"""A save that fails where a cap cuts is a WARNING on the ``toolkeep`` logger (issue 18,
"Logging"), naming what failed but never the content; the cut says so too."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

import toolkeep
from toolkeep import Config, MemoryStore, Session
from toolkeep.exceptions import StoreError

SECRET = "s3cr3t-token "


class RefusingStore(MemoryStore):
    """A full store: every write fails."""

    def put(self, key: str, text: str) -> None:
        raise StoreError("store full")


def test_a_failed_save_is_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The archive refusing the original and the file that cannot be written are each one
    WARNING record on ``toolkeep``; neither holds the output; the cut names the failure."""
    workspace = toolkeep.Workspace(tmp_path / "ws")
    shutil.rmtree(workspace.path / "tool-results")
    (workspace.path / "tool-results").write_text("not a directory", encoding="utf-8")
    config = Config(caller_store_url="")
    with (
        Session(config, workspace=workspace, store=RefusingStore()) as session,
        caplog.at_level(logging.DEBUG, logger="toolkeep"),
    ):
        cut = session.cap_result("call_1", "bash", SECRET * 5_000, cap=1_000)
    warnings = [r for r in caplog.records if r.name == "toolkeep" and r.levelno == logging.WARNING]
    assert len(warnings) == 2, [r.getMessage() for r in caplog.records]
    assert {"archive", "persist"} == {
        "archive" if "archive" in r.getMessage() else "persist" for r in warnings
    }
    assert all(SECRET not in r.getMessage() for r in caplog.records)
    assert len(cut) <= 1_000 and "[full output could not be saved" in cut


def test_no_warning_when_saves_succeed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Control: the same cut with a working workspace and store logs no warning."""
    with (
        Session(Config(caller_store_url=""), workspace=tmp_path / "ws") as session,
        caplog.at_level(logging.DEBUG, logger="toolkeep"),
    ):
        session.cap_result("call_1", "bash", SECRET * 5_000, cap=1_000)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
