"""The Gemini format: camelCase and snake_case, ids or name+order, provider-worded validation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import toolkeep
from toolkeep.steps.pairing import MISSING_RESULT_TEXT

FMT = "gemini"


def model(*calls: tuple[str, str | None], key: str = "functionCall") -> dict[str, Any]:
    parts = []
    for name, call_id in calls:
        body: dict[str, Any] = {"name": name, "args": {}}
        if call_id is not None:
            body["id"] = call_id
        parts.append({key: body})
    return {"role": "model", "parts": parts}


def responses(*answers: tuple[str, str | None, Any], key: str = "functionResponse") -> dict[str, Any]:
    parts = []
    for name, call_id, response in answers:
        body: dict[str, Any] = {"name": name, "response": response}
        if call_id is not None:
            body["id"] = call_id
        parts.append({key: body})
    return {"role": "user", "parts": parts}


ASK = {"role": "user", "parts": [{"text": "go"}]}


def prepared(contents: list[Any], tmp_path: Path) -> tuple[list[Any], toolkeep.Report]:
    with toolkeep.Session(toolkeep.Config(), workspace=tmp_path / "ws") as session:
        return session.prepare(contents, format=FMT)


class TestIds:
    def test_idless_responses_match_calls_by_name_and_order(self) -> None:
        """Without ids, the k-th response named N answers the k-th call named N."""
        contents = [
            ASK,
            model(("read", None), ("ls", None), ("read", None)),
            responses(
                ("ls", None, {"output": "x"}),
                ("read", None, {"output": "1"}),
                ("read", None, {"output": "2"}),
            ),
        ]
        history = toolkeep.get_format(FMT).load(contents)
        assert [c.id for c in history[1].calls] == ["read#1", "ls#1", "read#2"]
        assert [r.call_id for r in history[2].results] == ["ls#1", "read#1", "read#2"]
        assert toolkeep.validate(contents, FMT) == []

    def test_idless_response_answers_a_call_that_has_an_id(self) -> None:
        """When the calls carry ids and the responses do not, name and order still pair them."""
        contents = [ASK, model(("read", "c-1")), responses(("read", None, {"output": "x"}))]
        assert toolkeep.validate(contents, FMT) == []

    def test_synthetic_response_has_no_id_when_the_call_had_none(self, tmp_path: Path) -> None:
        """A missing response is added under the call's name, with an ``error`` key and no id."""
        contents = [ASK, model(("read", None), ("read", None)), responses(("read", None, {"output": "1"}))]
        out, report = prepared(contents, tmp_path)
        assert out[2]["parts"][1] == {
            "functionResponse": {"name": "read", "response": {"error": MISSING_RESULT_TEXT}}
        }
        assert [r.kind for r in report.repairs] == ["synthetic"]


class TestShapes:
    def test_snake_case_history_gets_snake_case_parts(self, tmp_path: Path) -> None:
        """A history in google-genai's snake_case gets its synthetic response in snake_case."""
        contents = [ASK, model(("ls", "c1"), ("cat", "c2"), key="function_call")]
        contents.append(responses(("ls", "c1", {"output": "a"}), key="function_response"))
        out, _ = prepared(contents, tmp_path)
        assert out[2]["parts"][1] == {
            "function_response": {"name": "cat", "id": "c2", "response": {"error": MISSING_RESULT_TEXT}}
        }

    def test_response_text_conventions(self) -> None:
        """``output`` is the text, ``error`` an error, anything else the whole response as JSON."""
        contents = [
            ASK,
            model(("a", "1"), ("b", "2"), ("c", "3")),
            responses(("a", "1", {"output": "x"}), ("b", "2", {"error": "boom"}), ("c", "3", {"rows": [1]})),
        ]
        results = toolkeep.get_format(FMT).load(contents)[2].results
        assert [(r.text, r.is_error) for r in results] == [
            ("x", False),
            ("boom", True),
            ('{"rows": [1]}', False),
        ]

    def test_thought_signature_and_untouched_turns_are_kept(self, tmp_path: Path) -> None:
        """A repair elsewhere leaves the model turn with its thought signature as the same object."""
        turn = {
            "role": "model",
            "parts": [{"functionCall": {"name": "ls", "args": {}}, "thoughtSignature": "c2ln"}],
        }
        contents = [ASK, turn]
        out, _ = prepared(contents, tmp_path)
        assert out[1] is turn
        assert out[2] == {
            "role": "user",
            "parts": [{"functionResponse": {"name": "ls", "response": {"error": MISSING_RESULT_TEXT}}}],
        }


class TestValidate:
    def test_count_mismatch_is_worded_like_the_api(self) -> None:
        """Fewer responses than calls: Gemini's 'number of function response parts' error."""
        contents = [ASK, model(("a", "1"), ("b", "2")), responses(("a", "1", {"output": "x"}))]
        (v,) = toolkeep.validate(contents, FMT)
        assert (v.index, v.id, v.rule) == (2, "2", "missing_result")
        assert (
            "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn."
            in v.message
        )

    def test_response_turn_not_after_call_turn(self) -> None:
        """A response turn after a text turn: 'function response turn comes immediately after'."""
        contents = [ASK, model(("a", "1")), ASK, responses(("a", "1", {"output": "x"}))]
        rules = [(v.index, v.rule) for v in toolkeep.validate(contents, FMT)]
        assert (3, "orphan_result") in rules and (1, "missing_result") in rules
        assert any(
            "function response turn comes immediately after a function call turn" in v.message
            for v in toolkeep.validate(contents, FMT)
        )

    def test_empty_parts(self) -> None:
        """A content without parts is rejected."""
        (v,) = toolkeep.validate([{"role": "user", "parts": []}], FMT)
        assert v.rule == "empty_content"


def test_id_less_response_given_to_a_call_of_another_name_is_sent_under_its_name() -> None:
    """Pruning a duplicate call can leave an id-less response (matched by name) answering a call
    of another name; it must go out so the provider pairs it with that call (found by the
    property test over genai Content objects)."""
    for response in ({"id": "", "name": "Read"}, {"name": "Read"}):
        contents: list[Any] = [
            {"role": "user", "parts": [{"text": "go"}]},
            {
                "role": "model",
                "parts": [
                    {"functionCall": {"id": "toolu_01", "name": "read", "args": {}}},
                    {"functionCall": {"id": "toolu_01", "name": "Read", "args": {}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {**response, "response": {"output": "a"}}},
                    {"functionResponse": {"id": "toolu_01", "name": "Read", "response": {"output": "b"}}},
                ],
            },
        ]
        out, report = toolkeep.run_pipeline(contents, format="gemini")
        assert toolkeep.validate(out, "gemini") == []
        assert report.to_dict()["repairs"]["duplicates_pruned"] == 1
        assert [p["functionResponse"]["response"] for p in out[2]["parts"]] == [{"output": "a"}]
