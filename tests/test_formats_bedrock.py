"""The Bedrock Converse format: toolUse/toolResult, alternation, no text beside results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import toolkeep
from toolkeep.formats._base import CONTINUE_TEXT
from toolkeep.steps.pairing import MISSING_RESULT_TEXT

FMT = "bedrock"


def use(call_id: str, name: str = "calc") -> dict[str, Any]:
    return {"toolUse": {"toolUseId": call_id, "name": name, "input": {}}}


def result(call_id: str, *content: Any, **extra: Any) -> dict[str, Any]:
    return {"toolResult": {"toolUseId": call_id, "content": list(content) or [{"text": "ok"}], **extra}}


def msg(role: str, *blocks: Any) -> dict[str, Any]:
    return {"role": role, "content": [{"text": b} if isinstance(b, str) else b for b in blocks]}


def prepared(messages: list[Any], tmp_path: Path) -> tuple[list[Any], toolkeep.Report]:
    with toolkeep.Session(toolkeep.Config(), workspace=tmp_path / "ws") as session:
        return session.prepare(messages, format=FMT)


class TestValidate:
    def test_missing_results_are_worded_like_converse(self) -> None:
        """Unanswered toolUse blocks: 'Expected toolResult blocks at messages.N.content ...'."""
        messages = [msg("user", "go"), msg("assistant", use("t1"), use("t2")), msg("user", result("t1"))]
        (v,) = toolkeep.validate(messages, FMT)
        assert (v.index, v.id, v.rule) == (1, "t2", "missing_result")
        assert v.message == "Expected toolResult blocks at messages.2.content for the following Ids: t2"

    def test_extra_results_and_alternation(self) -> None:
        """More results than calls, and two user messages in a row, are both reported."""
        messages = [
            msg("user", "go"),
            msg("assistant", use("t1")),
            msg("user", result("t1"), result("t9")),
            msg("user", "x"),
        ]
        found = [(v.rule, v.message) for v in toolkeep.validate(messages, FMT)]
        assert (
            "orphan_result",
            "The number of toolResult blocks at messages.2.content exceeds the number of toolUse blocks of previous turn.",
        ) in found
        assert any(
            rule == "roles_not_alternating"
            and "A conversation must alternate between user and assistant roles." in text
            for rule, text in found
        )

    def test_text_beside_results_and_first_message(self) -> None:
        """Text in a message with toolResults, and a first message from the assistant, are refused."""
        messages = [
            msg("assistant", "hi"),
            msg("user", "go"),
            msg("assistant", use("t1")),
            msg("user", result("t1"), "note"),
        ]
        rules = {(v.index, v.rule) for v in toolkeep.validate(messages, FMT)}
        assert {(0, "first_not_user"), (3, "text_beside_results")} <= rules

    def test_duplicate_tool_use_id_across_the_request(self) -> None:
        """A toolUseId used twice in one request is refused (Claude on Bedrock requires unique ids)."""
        messages = [msg("user", "go"), msg("assistant", use("t1")), msg("user", result("t1"))]
        messages += [msg("assistant", use("t1")), msg("user", result("t1"))]
        (v,) = toolkeep.validate(messages, FMT)
        assert (v.index, v.rule) == (3, "duplicate_id")


class TestRepair:
    def test_synthetic_result_is_an_error_result(self, tmp_path: Path) -> None:
        """A missing result becomes a toolResult with status error and the missing-result text."""
        messages = [msg("user", "go"), msg("assistant", use("t1"))]
        out, _ = prepared(messages, tmp_path)
        assert out[2] == msg("user", result("t1", {"text": MISSING_RESULT_TEXT}, status="error"))

    def test_interposed_text_goes_inside_the_last_result(self, tmp_path: Path) -> None:
        """A user's note between the calls and their results ends up inside the last toolResult,
        so the results message holds no text and the roles still alternate."""
        messages = [
            msg("user", "go"),
            msg("assistant", use("t1"), use("t2")),
            msg("user", "hurry"),
            msg("user", result("t1"), result("t2")),
        ]
        out, report = prepared(messages, tmp_path)
        assert out[2] == msg("user", result("t1"), result("t2", {"text": "ok"}, {"text": "hurry"}))
        assert len(out) == 3 and toolkeep.validate(out, FMT) == []
        assert [r.kind for r in report.repairs] == ["relocated", "relocated"]

    def test_assistant_turns_left_side_by_side_get_a_continue_message(self, tmp_path: Path) -> None:
        """Dropping a user message that held only an orphan result puts a fixed user message
        between the two assistant messages, so roles alternate and turns keep their count."""
        messages = [
            msg("user", "go"),
            msg("assistant", "a"),
            msg("user", result("gone")),
            msg("assistant", "b"),
        ]
        out, _ = prepared(messages, tmp_path)
        assert out == [messages[0], messages[1], msg("user", CONTINUE_TEXT), messages[3]]
        again, report = prepared(out, tmp_path)
        assert again == out and report.repairs == []

    def test_json_and_image_results(self, tmp_path: Path) -> None:
        """A json result reads as its JSON; a shortened result keeps its image block."""
        messages = [msg("user", "go"), msg("assistant", use("t1"))]
        messages.append(msg("user", result("t1", {"json": {"rows": [1, 2]}})))
        history = toolkeep.get_format(FMT).load(messages)
        assert history[2].results[0].text == '{"rows": [1, 2]}'
        big = "line\n" * 10_000
        image = {"image": {"format": "png", "source": {"bytes": "iVBORw0KGgo="}}}
        messages[2] = msg("user", result("t1", {"text": big}, image))
        out, _ = prepared(messages, tmp_path)
        content = out[2]["content"][0]["toolResult"]["content"]
        assert content[1] == image and len(content[0]["text"]) < len(big)


def test_blank_text_block_is_reported_as_bedrock_words_it() -> None:
    """Bedrock refuses a text block that is empty or only whitespace; the validator says where."""
    history = [
        {"role": "user", "content": [{"text": "go"}]},
        {"role": "assistant", "content": [{"text": "  \n"}, {"text": "fine"}]},
    ]
    violations = toolkeep.validate(history, "bedrock")
    assert [(v.index, v.rule) for v in violations] == [(1, "blank_text")]
    assert "messages.1.content.0 is blank" in violations[0].message
