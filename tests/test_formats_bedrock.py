"""The Bedrock Converse format: toolUse/toolResult, alternation, no text beside results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import toolkeep
from toolkeep.formats._base import CONTINUE_TEXT
from toolkeep.formats.bedrock import FILLER_MESSAGE
from toolkeep.steps import StepContext, repair_pairing
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

    def test_interposed_text_stays_the_users_own_turn(self, tmp_path: Path) -> None:
        """A user's note between the calls and their results comes after the results, in a user
        turn of its own behind the filler assistant turn: the results stay as the tools gave
        them, the note stays the user's words, roles alternate, and preparing again changes
        nothing."""
        messages = [
            msg("user", "go"),
            msg("assistant", use("t1"), use("t2")),
            msg("user", "hurry"),
            msg("user", result("t1"), result("t2")),
        ]
        out, report = prepared(messages, tmp_path)
        assert out[2:] == [msg("user", result("t1"), result("t2")), FILLER_MESSAGE, msg("user", "hurry")]
        assert toolkeep.validate(out, FMT) == []
        assert [r.kind for r in report.repairs] == ["relocated", "relocated"]
        again, report = prepared(out, tmp_path)
        assert again == out and report.repairs == []

    def test_text_beside_results_gets_a_turn_of_its_own(self, tmp_path: Path) -> None:
        """Converse refuses text beside toolResult blocks: the results go first as they came, the
        user's words after the filler turn, in their order, images with them; the result's text
        is unchanged (before, the words were folded into the last result's content)."""
        image = {"image": {"format": "png", "source": {"bytes": "iVBORw0KGgo="}}}
        messages = [
            msg("user", "go"),
            msg("assistant", use("t1")),
            msg("user", result("t1", {"text": "out"}), "first note", image, "second note"),
        ]
        assert {(v.index, v.rule) for v in toolkeep.validate(messages, FMT)} == {(2, "text_beside_results")}
        out, report = prepared(messages, tmp_path)
        assert out[2:] == [
            msg("user", result("t1", {"text": "out"})),
            FILLER_MESSAGE,
            msg("user", "first note", image, "second note"),
        ]
        assert toolkeep.validate(out, FMT) == [] and report.repairs == []
        again, report = prepared(out, tmp_path)
        assert again == out and report.repairs == []
        assert all(a is b for a, b in zip(again, out, strict=True))  # the filler too is shared

    def test_size_estimate_counts_the_turns_the_dump_makes(self) -> None:
        """``message_chars`` of a user message with text beside its results is the size of the
        three messages the dump sends for it, whether it is sent as it came or rebuilt."""
        fmt = toolkeep.get_format(FMT)
        (m,) = fmt.load([msg("user", result("t1", {"text": "out " * 50}), "a note", "another")])
        rebuilt = m.with_parts([m.parts[0].with_text("short"), *m.parts[1:]])
        for message in (m, rebuilt):
            sent = fmt.dump([message])
            assert len(sent) == 3
            size = sum(len(json.dumps(x, ensure_ascii=False, separators=(",", ":"))) for x in sent)
            assert fmt.message_chars(message) == size

    def test_a_prepared_history_measures_as_the_one_it_came_from(self, tmp_path: Path) -> None:
        """A displaced result goes back in front of the user's words, which the dump sends after
        a filler: loaded again, that filler measures nothing (as the dump sends it alone), so the
        prepared history measures as the repaired one did, message for message where both have
        them, and the cache-aware policy, deciding by these sizes, decides the same."""
        fmt = toolkeep.get_format(FMT)
        messages = [
            msg("user", "go"),
            msg("assistant", use("t1", "grep")),
            msg("user", "meanwhile, also this"),
            msg("user", result("t1", {"text": "out\n" * 500})),
            msg("assistant", "done"),
        ]
        out, report = prepared(messages, tmp_path)
        assert [r.kind for r in report.repairs] == ["relocated"]
        assert FILLER_MESSAGE in out
        ctx = StepContext(fmt)
        repaired = repair_pairing(fmt.load(messages), ctx)
        loaded = fmt.load(out)
        (filler,) = [m for m in loaded if m.raw == FILLER_MESSAGE]
        assert fmt.message_chars(filler) == 0 and fmt.dump([filler]) == []
        assert [fmt.message_chars(m) for m in loaded if m is not filler] == [
            fmt.message_chars(m) for m in repaired
        ]

    def test_a_prepared_filler_is_no_turn(self, tmp_path: Path) -> None:
        """The filler loads as a placeholder that no step counts as a turn: a result one turn from
        truncation is not truncated when the prepared history is prepared again."""
        config = toolkeep.Config(truncate_turns=1, summarize_turns=3, compact_min_chars=100)
        big = "row\n" * 2_000
        messages = [
            msg("user", "go"),
            msg("assistant", use("t1", "grep")),
            msg("user", result("t1", {"text": big}), "and check the totals"),
        ]
        with toolkeep.Session(config, workspace=tmp_path / "ws") as session:
            out, _ = session.prepare(messages, format=FMT)
            again, report = session.prepare(out, format=FMT)
        assert out[2]["content"][0]["toolResult"]["content"] == [{"text": big}]
        assert again == out and report.truncated == 0
        history = toolkeep.get_format(FMT).load(out)
        assert [m.role for m in history] == ["user", "assistant", "user", "user", "user"]
        assert history[3].parts == ()

    def test_the_validator_reads_a_filler_as_the_assistant_turn_it_is(self) -> None:
        """Between results and the user's text the filler keeps roles alternating; first, or
        between two assistant turns, it breaks the rules Converse has."""
        ok = [
            msg("user", "go"),
            msg("assistant", use("t1")),
            msg("user", result("t1")),
            FILLER_MESSAGE,
            msg("user", "x"),
        ]
        assert toolkeep.validate(ok, FMT) == []
        first = [FILLER_MESSAGE, msg("user", "go")]
        assert [v.rule for v in toolkeep.validate(first, FMT)] == ["first_not_user"]
        twice = [msg("user", "go"), FILLER_MESSAGE, msg("assistant", "hi")]
        assert [(v.index, v.rule) for v in toolkeep.validate(twice, FMT)] == [(2, "roles_not_alternating")]

    def test_a_filler_no_longer_needed_goes(self, tmp_path: Path) -> None:
        """A filler with nothing to keep apart (the text after it was removed) is not sent."""
        messages = [msg("user", "go"), msg("assistant", use("t1")), msg("user", result("t1")), FILLER_MESSAGE]
        out, _ = prepared(messages, tmp_path)
        assert out == messages[:3]

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
