"""The OpenAI Responses format: runs of model items, 1:1 load, provider-worded validation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import toolkeep
from toolkeep.formats._base import CONTINUE_TEXT
from toolkeep.steps.pairing import MISSING_RESULT_TEXT

FMT = "openai-responses"


def call(call_id: str, name: str = "grep", **extra: Any) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": "{}", **extra}


def output(call_id: str, text: str = "ok") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def user(text: str = "go") -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def reasoning(rs_id: str) -> dict[str, Any]:
    return {"type": "reasoning", "id": rs_id, "summary": [], "encrypted_content": "gAAA"}


def prepared(items: list[Any], tmp_path: Path) -> tuple[list[Any], toolkeep.Report]:
    with toolkeep.Session(toolkeep.Config(), workspace=tmp_path / "ws") as session:
        return session.prepare(items, format=FMT)


class TestLoad:
    def test_load_is_one_to_one_with_a_run_per_model_turn(self) -> None:
        """Parallel calls and their reasoning item are one assistant message at the run's last
        index; the earlier items of the run are empty placeholders."""
        items = [user(), reasoning("rs_1"), call("c1"), call("c2"), output("c1"), output("c2")]
        history = toolkeep.get_format(FMT).load(items)
        assert [m.role for m in history] == ["user", "tool", "tool", "assistant", "tool", "tool"]
        assert [c.id for c in history[3].calls] == ["c1", "c2"]
        assert history[1].parts == () and history[2].parts == ()

    def test_item_without_type_is_a_message(self) -> None:
        """An item with a role and no type is an input message, as the API reads it."""
        items = [{"role": "user", "content": "hi"}, call("c1"), output("c1")]
        assert toolkeep.validate(items, FMT) == []
        assert toolkeep.detect_format(items).name == FMT


class TestValidate:
    def test_missing_output_is_worded_like_the_api(self) -> None:
        """A call without output is 'No tool output found for function call ...' at its index."""
        (v,) = toolkeep.validate([user(), call("call_9")], FMT)
        assert (v.index, v.id, v.rule) == (1, "call_9", "missing_result")
        assert v.message == "No tool output found for function call call_9."

    def test_orphan_output_is_worded_like_the_api(self) -> None:
        """An output with no call is 'No tool call found for function call output ...'."""
        (v,) = toolkeep.validate([user(), output("call_x")], FMT)
        assert (v.index, v.rule) == (1, "orphan_result")
        assert v.message == "No tool call found for function call output with call_id call_x."

    def test_custom_tool_call_wording(self) -> None:
        """Custom tool calls get the custom wording."""
        items = [user(), {"type": "custom_tool_call", "call_id": "p1", "name": "apply_patch", "input": "x"}]
        (v,) = toolkeep.validate(items, FMT)
        assert v.message == "No tool output found for custom tool call p1."

    def test_output_may_sit_anywhere_after_its_call(self) -> None:
        """The API pairs by call_id, so an output behind a user message is still valid."""
        assert toolkeep.validate([user(), call("c1"), user("wait"), output("c1")], FMT) == []

    def test_dangling_reasoning_and_duplicates(self) -> None:
        """A reasoning item with nothing after it, and a call_id used twice, are violations."""
        items = [user(), reasoning("rs_1"), user("x"), call("c1"), output("c1"), call("c1"), output("c1")]
        rules = {(v.index, v.rule) for v in toolkeep.validate(items, FMT)}
        assert (1, "dangling_reasoning") in rules
        assert (5, "duplicate_id") in rules


class TestRepair:
    def test_synthetic_output_matches_the_call_kind(self, tmp_path: Path) -> None:
        """A custom tool call gets a ``custom_tool_call_output``; a function call a
        ``function_call_output``; both carry the missing-result text."""
        items = [
            user(),
            {"type": "custom_tool_call", "call_id": "p1", "name": "apply_patch", "input": "x"},
            call("c1"),
        ]
        out, report = prepared(items, tmp_path)
        assert out[3:] == [
            {"type": "custom_tool_call_output", "call_id": "p1", "output": MISSING_RESULT_TEXT},
            {"type": "function_call_output", "call_id": "c1", "output": MISSING_RESULT_TEXT},
        ]
        assert [r.kind for r in report.repairs] == ["synthetic", "synthetic"]

    def test_reasoning_of_a_pruned_duplicate_goes_with_it(self, tmp_path: Path) -> None:
        """Pruning a duplicate call drops the reasoning item that only it followed."""
        items = [user(), reasoning("rs_1"), call("c1"), reasoning("rs_2"), call("c1"), output("c1")]
        out, _ = prepared(items, tmp_path)
        assert out == [items[0], items[1], items[2], items[5]]
        assert toolkeep.validate(out, FMT) == []

    def test_call_id_reused_in_a_later_turn_is_renamed_without_its_item_id(self, tmp_path: Path) -> None:
        """A later run reusing a call_id is renamed in call and output; the call loses its
        ``fc_`` item id, which belonged to the original."""
        items = [
            user(),
            call("c1", id="fc_1"),
            output("c1"),
            user(),
            call("c1", id="fc_1"),
            output("c1", "2"),
        ]
        out, report = prepared(items, tmp_path)
        assert out[4] == {"type": "function_call", "call_id": "c1_2", "name": "grep", "arguments": "{}"}
        assert out[5] == output("c1_2", "2")
        assert [r.kind for r in report.repairs] == ["renamed"]

    def test_runs_left_side_by_side_are_joined_without_words_nobody_said(self, tmp_path: Path) -> None:
        """Removing the orphan output between two turns leaves them side by side, as one run (the
        Responses API has no alternation rule): no ``(continue)`` message is invented, and the
        next ``prepare`` finds nothing to change."""
        answer = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}
        items = [user(), answer, output("gone"), dict(answer)]
        out, report = prepared(items, tmp_path)
        assert out == [items[0], items[1], items[3]]
        assert out[1] is items[1] and out[2] is items[3]
        assert CONTINUE_TEXT not in json.dumps(out)
        assert [r.kind for r in report.repairs] == ["orphans_removed"]
        again, report = prepared(out, tmp_path)
        assert again == out and report.repairs == []

    def test_joined_turns_age_results_as_the_next_request_reads_them(self, tmp_path: Path) -> None:
        """A result two runs old, one of which an invalid call's pruning joins to the next, is
        aged by the turns the output holds: one, so it is not truncated, then or on the next
        ``prepare`` (where a "(continue)" message once kept two turns apart)."""
        big = "line of output\n" * 400
        items = [
            user(),
            call("c1", "grep"),
            output("c1", big),
            _assistant_text("looking"),
            call("c9", ""),  # no tool name: pruned, and its output with it
            output("c9"),
            _assistant_text("done"),
        ]
        config = toolkeep.Config(policy="spec", truncate_turns=2, summarize_turns=4, compact_min_chars=100)
        with toolkeep.Session(config, workspace=tmp_path / "ws") as session:
            out, report = session.prepare(items, format=FMT)
            again, again_report = session.prepare(out, format=FMT)
        assert out == [*items[:4], items[6]]
        assert out[2]["output"] == big and report.truncated == 0
        assert again == out and again_report.repairs == []
        assert [r.kind for r in report.repairs] == ["invalid_calls_pruned", "orphans_removed"]

    def test_other_item_kinds_pass_through_in_place(self, tmp_path: Path) -> None:
        """Computer calls and their outputs, and unknown kinds (inside a run or between turns),
        are carried as they are."""
        items = [
            user(),
            {"type": "computer_call", "id": "cu_1", "call_id": "cc1", "action": {"type": "screenshot"}},
            {"type": "future_model_item", "payload": 0},
            call("c1"),
            output("c1"),
            {
                "type": "computer_call_output",
                "call_id": "cc1",
                "output": {"type": "input_image", "image_url": "x"},
            },
            {"type": "future_item", "payload": 1},
        ]
        out, report = prepared(items, tmp_path)
        assert all(a is b for a, b in zip(out, items, strict=True))
        assert report.repairs == []
        assert toolkeep.get_format(FMT).load(items)[3].role == "assistant"

    def test_input_item_between_call_and_output_stays_valid(self, tmp_path: Path) -> None:
        """An input-side item the pipeline does not read, between a call and its output, comes
        out valid (the output is put first, the item right after it)."""
        cc_output = {"type": "computer_call_output", "call_id": "cc1", "output": {"type": "input_image"}}
        items = [user(), call("c1"), cc_output, output("c1")]
        out, _ = prepared(items, tmp_path)
        assert toolkeep.validate(out, FMT) == []
        assert sorted(map(id, out)) == sorted(map(id, items))


class TestStoredResponses:
    def test_outputs_for_stored_calls_are_kept_with_previous_response(self, tmp_path: Path) -> None:
        """With ``previous_response_id`` the input is only the new outputs; they are carried,
        while a call in the input still gets its missing output."""
        from toolkeep.formats.openai_responses import OpenAIResponsesFormat

        fmt = OpenAIResponsesFormat(previous_response=True)
        items = [output("call_stored", "42"), user("and now?"), call("c2")]
        assert [v.rule for v in toolkeep.validate(items, fmt)] == ["missing_result"]
        with toolkeep.Session(toolkeep.Config(), workspace=tmp_path / "ws") as session:
            out, report = session.prepare(items, format=fmt)
        assert out[:3] == items and out[0] is items[0]
        assert out[3] == output("c2", MISSING_RESULT_TEXT)
        assert [r.kind for r in report.repairs] == ["synthetic"]

    def test_without_it_such_an_output_is_an_orphan(self, tmp_path: Path) -> None:
        """By default the input is the whole history, so the same output is removed."""
        items = [user(), output("call_stored", "42")]
        out, report = prepared(items, tmp_path)
        assert out == [items[0]] and [r.kind for r in report.repairs] == ["orphans_removed"]

    def test_item_reference_implies_stored_calls(self) -> None:
        """An input holding ``item_reference`` items keeps outputs whose call it does not show."""
        items = [{"type": "item_reference", "id": "fc_stored"}, output("call_stored")]
        assert toolkeep.validate(items, FMT) == []


def _assistant_text(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def test_unknown_item_left_last_in_a_run_goes_after_the_outputs() -> None:
    """An item of a new kind inside a run, left last when the calls after it are pruned, is sent
    after the run's outputs (as input it would split a call from its output on the next load,
    and a second prepare would move the output: found by the slow fuzz profile)."""
    future = {"type": "future_item", "id": "x_1"}
    cases: list[list[Any]] = [
        [  # a duplicate call pruned: the run's output comes before the unknown item
            {"role": "user", "content": "go"},
            {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"},
            future,
            {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        ],
        [  # a call without a name pruned, its output with it: another run follows at once
            {"role": "user", "content": "go"},
            _assistant_text("looking"),
            future,
            {"type": "function_call", "call_id": "c9", "name": "", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c9", "output": "ok"},
            _assistant_text("done"),
        ],
    ]
    for history in cases:
        once, _ = toolkeep.run_pipeline(history, format="openai-responses")
        twice, _ = toolkeep.run_pipeline(once, format="openai-responses")
        assert twice == once
        assert toolkeep.validate(once, "openai-responses") == []
        assert sum(item is future for item in once) == 1
        ahead = once[: once.index(future)]
        assert all(item.get("type") != "function_call_output" for item in once[once.index(future) :])
        assert ahead[-1].get("type") != "function_call"
