"""What toolkeep writes into the caller's own history outlives the session (issue: "gone when
the session closes"): originals behind ``cap_result`` and ``ToolLoop`` cuts are kept in the
per-user archive when the session's own archive goes with its workspace."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

import toolkeep
from toolkeep.integrations.raw import ToolLoop
from toolkeep.shorten import CCR_MARKER_RE
from toolkeep.userdirs import user_cache_dir

BIG = "".join(f"row {k}: {'x' * 60}\n" for k in range(1_300))  # ~80k chars


def big_read(path: str) -> str:
    return BIG


def anthropic_response(call_id: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": call_id, "name": "read", "input": {"path": "/f"}}],
    }


def test_a_second_tool_loop_recalls_what_the_first_one_cut() -> None:
    """The issue's case: 74k of 80k chars were gone for good once the first loop closed."""
    with ToolLoop({"read": big_read}, format="anthropic") as first:
        workspace = first.session.workspace.path
        results = first.results(anthropic_response("toolu_1"))
    assert not workspace.exists()  # the private workspace went with the session
    text = results[0]["content"][0]["content"]
    assert len(text) < len(BIG)
    (key,) = CCR_MARKER_RE.findall(text)
    with ToolLoop({"read": big_read}, format="anthropic") as second:
        answer = second.session.handle_tool_call("recall", {"key": key})
        assert answer is not None and answer.startswith(BIG[:1000])
        assert second.session.recall(key) == BIG


def test_cap_result_outlives_the_session() -> None:
    with toolkeep.Session() as session:
        text = session.cap_result("c1", "grep", BIG)
    (key,) = CCR_MARKER_RE.findall(text)
    with toolkeep.Session() as later:
        assert later.recall(key) == BIG


def test_the_per_user_archive_is_private() -> None:
    with toolkeep.Session() as session:
        session.cap_result("c1", "grep", BIG)
    directory = user_cache_dir()
    assert stat.S_IMODE(os.lstat(directory).st_mode) == 0o700
    for name in os.listdir(directory):
        if name.startswith("archive.db"):
            assert stat.S_IMODE(os.lstat(directory / name).st_mode) == 0o600, name


def test_a_session_whose_store_outlives_it_keeps_them_there(tmp_path: Path) -> None:
    """With a kept workspace (or a store given), that store holds them: nothing else is written."""
    with toolkeep.Session(workspace=tmp_path / "ws") as session:
        assert session.recall_store is session.store
        text = session.cap_result("c1", "grep", BIG)
    (key,) = CCR_MARKER_RE.findall(text)
    with toolkeep.Session(workspace=tmp_path / "ws") as later:
        assert later.recall(key) == BIG


def test_caller_store_url_empty_keeps_the_old_behaviour() -> None:
    config = toolkeep.Config(caller_store_url="")
    with toolkeep.Session(config) as session:
        text = session.cap_result("c1", "grep", BIG + "other")
    (key,) = CCR_MARKER_RE.findall(text)
    with toolkeep.Session(config) as later:
        assert later.recall(key) is None


@pytest.mark.parametrize("mode", [0o755, 0o777])
def test_a_per_user_directory_open_to_others_is_closed_again(
    mode: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "cache"
    directory.mkdir()
    directory.chmod(mode)
    monkeypatch.setenv("TOOLKEEP_CACHE_DIR", str(directory))
    assert user_cache_dir() == directory
    assert stat.S_IMODE(os.lstat(directory).st_mode) == 0o700


def test_a_symlinked_per_user_directory_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "cache").symlink_to(tmp_path / "elsewhere")
    monkeypatch.setenv("TOOLKEEP_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(toolkeep.WorkspaceError):
        user_cache_dir()
