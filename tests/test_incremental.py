"""A long-lived session gives, at every turn, exactly what a fresh one-off run gives."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

import toolkeep
from toolkeep.engine import fingerprint
from toolkeep.pipeline import POLICIES, run_pipeline

from .conftest import TRAJECTORIES, load_trajectory, shared_or_skip


def request_ends(history: list[Any]) -> list[int]:
    return [i for i, m in enumerate(history) if m["role"] == "assistant" and i > 0] + [len(history)]


def fresh(history: list[Any], session: toolkeep.Session) -> tuple[list[Any], dict[str, Any]]:
    """A one-off run over the same workspace and store, with no memory of earlier runs."""
    out, report = run_pipeline(
        history, format="anthropic", config=session.config, workspace=session.workspace, store=session.store
    )
    return out, report.to_dict()


def assert_as_fresh(session: toolkeep.Session, request: list[Any]) -> None:
    """The session's output and report for ``request`` are a fresh run's."""
    out, report = session.prepare(request, format="anthropic")
    expected, expected_report = fresh(request, session)
    assert out == expected
    assert report.to_dict() == expected_report


def _turns(n: int) -> list[Any]:
    history: list[Any] = [{"role": "user", "content": "start"}]
    for k in range(n):
        history.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{k}", "name": "read", "input": {}}],
            }
        )
        history.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{k}", "content": f"{k}\n" * 3000}],
            }
        )
    return history


SMALL = [p for p in TRAJECTORIES if p.stat().st_size < 1_500_000]


@pytest.mark.slow  # a fresh run at every turn of eight real trajectories: minutes each under economy
@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("path", SMALL[:8] or [None], ids=lambda p: p.stem[:50] if p else "absent")
def test_cached_session_matches_fresh_run_at_every_turn(
    path: Path | None, policy: str, tmp_path: Path
) -> None:
    """Replaying a real trajectory turn by turn, the session's output and report equal a fresh
    run's, under every policy."""
    shared_or_skip()
    assert path is not None
    history = load_trajectory(path)
    with toolkeep.Session(toolkeep.Config(policy=policy), workspace=tmp_path) as session:
        for end in request_ends(history):
            request = history[:end]
            out, report = session.prepare(request, format="anthropic")
            expected, expected_report = fresh(request, session)
            assert json.dumps(out) == json.dumps(expected), f"turn ending at {end}"
            assert report.to_dict() == expected_report


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_edited_earlier_message_is_reprocessed(policy: str, tmp_path: Path) -> None:
    """Replacing an earlier result's text invalidates what the session remembered of it."""
    big = "line\n" * 5000
    history: list[Any] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": big}]},
        {"role": "assistant", "content": "done"},
    ]
    with toolkeep.Session(toolkeep.Config(policy=policy), workspace=tmp_path) as session:
        first, _ = session.prepare(history)
        edited = copy.copy(history)
        edited[2] = {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "a", "content": "short"}],
        }
        second, _ = session.prepare(edited)
        assert second[2]["content"][0]["content"] == "short"
        # going back to the first message object (edited in place meanwhile) is a change too
        history[2]["content"].append({"type": "text", "text": "note"})
        third, _ = session.prepare(history)
        assert third[2]["content"][-1] == {"type": "text", "text": "note"}
        assert first != third


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_removed_message_is_reprocessed(policy: str, tmp_path: Path) -> None:
    """Dropping an earlier message gives the same output as a fresh run over the shorter history."""
    history = _turns(6)
    with toolkeep.Session(toolkeep.Config(policy=policy), workspace=tmp_path) as session:
        session.prepare(history)
        assert_as_fresh(session, history[:3] + history[5:])


def test_fingerprint_sees_block_level_changes() -> None:
    """The fingerprint changes when a block is replaced, added or edited in place."""
    m: dict[str, Any] = {"role": "user", "content": [{"type": "text", "text": "a"}]}
    before = fingerprint(m)
    m["content"][0]["text"] = "b"
    assert fingerprint(m) != before


@pytest.mark.parametrize(
    "dropped",
    [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "", "name": "read", "input": {}}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "z", "name": "", "input": {}}]},
        {"role": "assistant", "content": []},
    ],
    ids=["no-id", "no-name", "empty"],
)
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_session_ages_skip_assistant_messages_pairing_drops(
    dropped: dict[str, Any], policy: str, tmp_path: Path
) -> None:
    """An assistant message that pairing drops does not age results, in a session as in a one-off run."""
    history: list[Any] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "0" * 3_001}]},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
        dropped,
        {"role": "user", "content": "more"},
    ]
    with toolkeep.Session(toolkeep.Config(policy=policy), workspace=tmp_path) as session:
        out, report = session.prepare(history, format="anthropic")
        expected, expected_report = fresh(history, session)
    assert out == expected
    assert report.to_dict() == expected_report
    assert report.truncated == 0


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_failed_request_leaves_no_stale_state(policy: str, tmp_path: Path) -> None:
    """After a request that fails, the next one is prepared as a fresh session would prepare it."""
    good: list[Any] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "x" * 30_000}]},
    ]
    other: list[Any] = [
        {"role": "user", "content": "other task"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "b", "name": "ls", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b", "content": "y" * 30_000}]},
    ]
    with toolkeep.Session(toolkeep.Config(policy=policy), workspace=tmp_path) as session:
        session.prepare(good)
        with pytest.raises(toolkeep.FormatError):  # detection fails before any block is run
            session.prepare([*other, {"role": "robot", "content": "?"}])
        out, _ = session.prepare(other)
        expected, _ = fresh(other, session)
    assert out == expected


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("change", ["grow", "edit-settled", "remove-settled", "edit-newest"])
def test_settled_blocks_run_as_one_and_stay_correct(change: str, policy: str, tmp_path: Path) -> None:
    """A session's first request runs its settled blocks as one (under the policies that cut by
    age alone: economy's plan may change any block's rendering, so it runs them one by one);
    later requests that grow the history or edit inside that run give what a fresh run gives."""
    history = _turns(12)
    with toolkeep.Session(toolkeep.Config(policy=policy), workspace=tmp_path) as session:
        first, _ = session.prepare(history)
        assert first == fresh(history, session)[0]
        if policy != "economy":
            assert len(session.state.blocks) < 12  # the old blocks were run (and are kept) as one
        if change == "grow":
            nxt = history + _turns(2)[1:]
            nxt[-2]["content"][0]["id"] = nxt[-1]["content"][0]["tool_use_id"] = "new"
        elif change == "edit-settled":
            nxt = list(history)
            nxt[4] = {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "short"}],
            }
        elif change == "remove-settled":
            nxt = history[:3] + history[5:]
        else:
            nxt = list(history)
            nxt[-1] = {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t11", "content": "x"}],
            }
        assert_as_fresh(session, nxt)


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_block_grown_by_removing_the_assistant_message_after_it(policy: str, tmp_path: Path) -> None:
    """Removing the assistant message that ended a block makes the messages after it part of
    that block: it must run again though all its own messages are unchanged (found by the
    property test: the block was kept, and its result not packed with the next user text)."""
    history: list[Any] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "r"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "reading"}]},
        {"role": "user", "content": [{"type": "text", "text": "look at this"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "gone", "content": ""}]},
    ]
    with toolkeep.Session(toolkeep.Config(policy=policy), workspace=tmp_path) as session:
        session.prepare(history)
        assert_as_fresh(session, history[:3] + history[4:])
