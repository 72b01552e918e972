"""The Session's tool-facing methods: recall/read_result answers and their definitions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import toolkeep
from toolkeep.policies import POLICIES
from toolkeep.shorten import CCR_MARKER_RE


def long_read_session(tmp_path: Path, policy: str = "economy") -> tuple[toolkeep.Session, list[Any], str]:
    original = "".join(f"line {n}: {'x' * 40}\n" for n in range(2_000))
    history: list[Any] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "r1", "name": "read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "r1", "content": original}]},
    ]
    for n in range(5):
        history.append({"role": "assistant", "content": [{"type": "text", "text": f"step {n}"}]})
        history.append({"role": "user", "content": "next"})
    return toolkeep.Session(toolkeep.Config(policy=policy), workspace=tmp_path), history, original


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_session_answers_recall_of_a_summarized_result(policy: str, tmp_path: Path) -> None:
    """An old result shortened by prepare (SPEC's policy summarizes it, the others shorten it
    their way) comes back whole through Session.handle_tool_call."""
    session, history, original = long_read_session(tmp_path, policy)
    with session:
        out, report = session.prepare(history)
        assert {cut.id for cut in report.cuts} == {"r1"}
        assert report.summarized == 1 or policy != "spec"
        key = CCR_MARKER_RE.search(out[2]["content"][0]["content"])
        assert key is not None
        pages: list[str] = []
        start = 1
        while True:
            answer = session.handle_tool_call("recall", {"key": key.group(1), "start_line": start})
            assert answer is not None
            body, _, note = answer.partition("\n\n[lines ")
            pages.append(body if note else answer)
            if "start_line=" not in note:
                break
            start = int(note.split("start_line=")[1].split(",")[0].rstrip("]) "))
        assert "".join(pages) == original


def test_session_leaves_other_tools_to_the_agent(tmp_path: Path) -> None:
    """A call to a tool that is not toolkeep's gets None: the agent runs it."""
    with toolkeep.Session(toolkeep.Config(), workspace=tmp_path) as session:
        assert session.handle_tool_call("bash", {"command": "ls"}) is None
        unknown = session.handle_tool_call("recall", {"key": "0" * 16})
        assert unknown is not None and "0000000000000000" in unknown


def test_session_tool_definitions_name_both_tools(tmp_path: Path) -> None:
    """The Anthropic tool definitions are recall and read_result with input schemas."""
    with toolkeep.Session(toolkeep.Config(), workspace=tmp_path) as session:
        tools = session.tool_definitions("anthropic")
    assert sorted(t["name"] for t in tools) == ["read_result", "recall"]
    assert all(t["input_schema"]["type"] == "object" for t in tools)


def test_turn_budget_never_cuts_recalled_pages(tmp_path: Path) -> None:
    """Thirteen 16,000-char recall pages in one turn exceed 200,000 chars yet none is cut."""
    page = "p" * 16_000
    calls = [
        {"type": "tool_use", "id": f"c{n}", "name": "recall", "input": {"key": "0" * 16}} for n in range(13)
    ]
    results = [{"type": "tool_result", "tool_use_id": f"c{n}", "content": page + str(n)} for n in range(13)]
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": calls},
        {"role": "user", "content": results},
    ]
    with toolkeep.Session(toolkeep.Config(), workspace=tmp_path) as session:
        out, report = session.prepare(history)
    assert report.persisted == 0
    assert out == history
