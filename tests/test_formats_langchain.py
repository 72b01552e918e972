"""The LangChain format: ``BaseMessage`` objects and their ``messages_to_dict`` form."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)

import toolkeep
from toolkeep.steps.pairing import MISSING_RESULT_TEXT

FMT = "langchain"


def ai(*ids: str, content: Any = "") -> AIMessage:
    return AIMessage(
        content=content,
        tool_calls=[{"name": "search", "args": {"q": i}, "id": i, "type": "tool_call"} for i in ids],
    )


def prepared(messages: list[Any], tmp_path: Path) -> tuple[list[Any], toolkeep.Report]:
    with toolkeep.Session(toolkeep.Config(), workspace=tmp_path / "ws") as session:
        return session.prepare(messages, format="auto")


class TestObjects:
    def test_synthetic_result_is_a_tool_message_with_error_status(self, tmp_path: Path) -> None:
        """A missing result becomes a ``ToolMessage`` with ``status="error"``; the rest stay the
        same objects, artifact included."""
        answered = ToolMessage(content="found", tool_call_id="c1", name="search", artifact={"hits": 3})
        messages = [HumanMessage(content="find"), ai("c1", "c2"), answered]
        out, _ = prepared(messages, tmp_path)
        assert out[:3] == messages and all(a is b for a, b in zip(out, messages, strict=False))
        extra = out[3]
        assert isinstance(extra, ToolMessage)
        assert (extra.tool_call_id, extra.status, extra.content, extra.name) == (
            "c2",
            "error",
            MISSING_RESULT_TEXT,
            "search",
        )

    def test_duplicate_call_pruned_from_tool_calls_and_content_blocks(self, tmp_path: Path) -> None:
        """A call id reused in a later AIMessage is renamed; a duplicate within one AIMessage is
        pruned, its Anthropic-style ``tool_use`` block too; the input is not mutated."""
        blocks: list[Any] = [
            {"type": "tool_use", "id": "c1", "name": "search", "input": {}},
            {"type": "tool_use", "id": "c1", "name": "search", "input": {}},
        ]
        first = AIMessage(
            content=blocks, tool_calls=[{"name": "search", "args": {}, "id": "c1", "type": "tool_call"}] * 2
        )
        messages = [
            HumanMessage(content="x"),
            first,
            ToolMessage(content="r", tool_call_id="c1"),
            ai("c1"),
            ToolMessage(content="r2", tool_call_id="c1"),
        ]
        out, report = prepared(messages, tmp_path)
        assert [c["id"] for c in out[1].tool_calls] == ["c1"]
        assert len(first.tool_calls) == 2 and len(first.content) == 2
        assert [c["id"] for c in out[3].tool_calls] == ["c1_2"] and out[4].tool_call_id == "c1_2"
        assert toolkeep.validate(out, FMT) == []
        assert sorted(r.kind for r in report.repairs) == ["duplicates_pruned", "renamed"]


class TestDicts:
    def test_dict_form_round_trips_through_langchain(self, tmp_path: Path) -> None:
        """The ``messages_to_dict`` form is repaired in that form and reads back with
        ``messages_from_dict``."""
        data = messages_to_dict([HumanMessage(content="x"), ai("c1"), HumanMessage(content="more")])
        out, _ = prepared(data, tmp_path)
        assert out[2]["type"] == "tool" and out[2]["data"]["status"] == "error"
        back = messages_from_dict(out)
        assert isinstance(back[2], ToolMessage) and back[2].tool_call_id == "c1"
        assert out[3] is data[2]


class TestValidate:
    def test_missing_tool_message_is_worded_like_langgraph(self) -> None:
        """A call without a ToolMessage gets LangGraph's INVALID_CHAT_HISTORY wording."""
        (v,) = toolkeep.validate([HumanMessage(content="x"), ai("c1")], FMT)
        assert (v.index, v.id, v.rule) == (1, "c1", "missing_result")
        assert v.message.startswith(
            "Found AIMessages with tool_calls that do not have a corresponding ToolMessage."
        )

    def test_orphan_tool_message(self) -> None:
        """A ToolMessage answering nothing before it is reported with its index."""
        (v,) = toolkeep.validate(
            [HumanMessage(content="x"), ToolMessage(content="r", tool_call_id="zz")], FMT
        )
        assert (v.index, v.id, v.rule) == (1, "zz", "orphan_result")


def test_tool_calls_that_are_not_a_list_are_refused_with_a_typed_error() -> None:
    """A dict-form AI message whose ``tool_calls`` is no list gets a FormatError naming the
    message and field, not a TypeError from deep inside (found by the slow fuzz profile)."""

    for value in (5, "call", {"id": "a"}):
        history = [
            {"type": "human", "data": {"content": "hi"}},
            {"type": "ai", "data": {"content": "x", "tool_calls": value}},
        ]
        with pytest.raises(toolkeep.FormatError) as raised:
            toolkeep.run_pipeline(history, format="langchain")
        assert raised.value.index == 1
        assert raised.value.field == "tool_calls"
