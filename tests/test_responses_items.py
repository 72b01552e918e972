"""OpenAI Responses items toolkeep does not pair pass through untouched, in place; requests that
continue state stored on the server keep the outputs of the calls stored there.

Every item is written from the API's documented schema and checked to be one by the real SDK's
``ResponseInputItemParam`` (and, where the SDK has one, read as its output-item class), and every
prepared input is validated by that type too, as ``tests/test_sdk_types.py`` does for the others.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

import toolkeep
from toolkeep.formats import OpenAIResponsesFormat
from toolkeep.messages import OpaquePart, ToolCallPart, ToolResultPart
from toolkeep.steps.pairing import MISSING_RESULT_TEXT

from .test_sdk_types import force

openai = pytest.importorskip("openai")
pydantic = pytest.importorskip("pydantic")

FMT = "openai-responses"
STORED = OpenAIResponsesFormat(previous_response=True)
INPUT_ITEMS = pydantic.TypeAdapter(list[openai.types.responses.ResponseInputItemParam])  # type: ignore[name-defined]
OUTPUT_ITEM = pydantic.TypeAdapter(openai.types.responses.ResponseOutputItem)  # type: ignore[name-defined]

# model-side items toolkeep carries as opaque parts of a run (the model's turn), never as calls
MODEL_ITEMS: dict[str, dict[str, Any]] = {
    "reasoning": {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "look at the tests first"}],
        "encrypted_content": "gAAAAB-opaque-reasoning",
    },
    "compaction": {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAB-compacted-window"},
    "web_search_call": {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "toolkeep pairing"},
    },
    "file_search_call": {
        "type": "file_search_call",
        "id": "fs_1",
        "status": "completed",
        "queries": ["pairing"],
        "results": [{"file_id": "file_1", "text": "pairing", "filename": "a.md", "score": 0.5}],
    },
    "image_generation_call": {
        "type": "image_generation_call",
        "id": "ig_1",
        "status": "completed",
        "result": "iVBORw0KGgo=",
    },
    "code_interpreter_call": {
        "type": "code_interpreter_call",
        "id": "ci_1",
        "status": "completed",
        "code": "print(1)",
        "container_id": "cntr_1",
        "outputs": [{"type": "logs", "logs": "1\n"}],
    },
    "local_shell_call": {
        "type": "local_shell_call",
        "id": "lsh_1",
        "call_id": "lsc_1",
        "status": "completed",
        "action": {"type": "exec", "command": ["ls"], "env": {}},
    },
    "mcp_list_tools": {
        "type": "mcp_list_tools",
        "id": "mcpl_1",
        "server_label": "docs",
        "tools": [{"name": "search", "input_schema": {"type": "object"}}],
    },
    "mcp_call": {
        "type": "mcp_call",
        "id": "mcp_1",
        "server_label": "docs",
        "name": "search",
        "arguments": "{}",
        "output": "found 3 pages",
    },
}
# input-side items toolkeep carries as they are (nothing pairing reads)
INPUT_ONLY: dict[str, dict[str, Any]] = {
    "local_shell_call_output": {"type": "local_shell_call_output", "id": "lsc_1", "output": "a.py\n"},
    "computer_call_output": {
        "type": "computer_call_output",
        "call_id": "cu_1",
        "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,iVBORw0KGgo="},
    },
    "mcp_approval_response": {
        "type": "mcp_approval_response",
        "approval_request_id": "mcpr_1",
        "approve": True,
    },
}


def user(text: str = "go") -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def said(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"msg_{len(text)}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def call(call_id: str, name: str = "grep", **extra: Any) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": '{"q": "x"}', **extra}


def output(call_id: str, text: str = "ok") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def reasoning(rs_id: str) -> dict[str, Any]:
    return {**MODEL_ITEMS["reasoning"], "id": rs_id}


def accepted(items: list[Any]) -> None:
    """The SDK's input item type takes ``items`` as they are, every field checked."""
    assert force(INPUT_ITEMS.validate_python(items)) == items


def prepared(items: list[Any], tmp_path: Path, fmt: Any = FMT) -> tuple[list[Any], toolkeep.Report]:
    with toolkeep.Session(toolkeep.Config(), workspace=tmp_path / "ws") as session:
        out, report = session.prepare(items, format=fmt)
        again, again_report = session.prepare(out, format=fmt)
    assert as_json(again) == as_json(out) and again_report.repairs == []  # idempotent
    return out, report


def as_json(items: list[Any]) -> str:
    """The request body ``items`` make, SDK objects dumped the way the SDK dumps them."""
    return json.dumps(items, default=lambda o: o.model_dump(exclude_unset=True, mode="json"), sort_keys=True)


def subsequence(short: list[Any], long: list[Any]) -> bool:
    """True when the objects of ``short`` appear in ``long`` in the same order (by identity)."""
    it = iter(long)
    return all(any(x is y for y in it) for x in short)


ALL_ITEMS = {**MODEL_ITEMS, **INPUT_ONLY}


class TestSchemas:
    @pytest.mark.parametrize("kind", sorted(ALL_ITEMS))
    def test_each_item_is_one_the_sdk_describes(self, kind: str) -> None:
        """Control: every item here is a valid input item of the real SDK."""
        accepted([ALL_ITEMS[kind]])


class TestNeverPaired:
    @pytest.mark.parametrize("kind", sorted(ALL_ITEMS))
    def test_never_a_call_or_a_result(self, kind: str) -> None:
        """Loaded, the item is no call and no result: an opaque part of a run, or carried whole."""
        item = ALL_ITEMS[kind]
        items = [user(), call("c0"), item, call("c1"), output("c0"), output("c1")]
        history = toolkeep.get_format(FMT).load(items)
        for m in history:
            for p in m.parts:
                if isinstance(p, (ToolCallPart, ToolResultPart)):
                    assert p.raw is not item
        opaque = [p for m in history for p in m.parts if isinstance(p, OpaquePart) and p.raw is item]
        assert len(opaque) == (1 if kind in MODEL_ITEMS else 0)

    @pytest.mark.parametrize("kind", sorted(ALL_ITEMS))
    def test_a_valid_history_comes_back_as_it_is(self, kind: str, tmp_path: Path) -> None:
        """Item in a run with reasoning and calls, or after their outputs: the very same objects
        come back, in the same order, and the SDK takes them."""
        item = ALL_ITEMS[kind]
        for items in (
            [user(), item, reasoning("rs_9"), call("c1"), output("c1"), said("done")],
            [user(), reasoning("rs_9"), call("c1"), output("c1"), item, said("done")],
        ):
            accepted(items)
            out, report = prepared(items, tmp_path)
            assert len(out) == len(items) and all(a is b for a, b in zip(out, items, strict=True))
            assert report.repairs == []
            assert toolkeep.validate(out, FMT) == []

    @pytest.mark.parametrize("kind", sorted(ALL_ITEMS))
    def test_repairs_around_it_move_nothing_past_it(self, kind: str, tmp_path: Path) -> None:
        """A broken turn around the item (a call without output, an orphan output; the item in
        the model's run, or among the outputs for an input item): the repairs are made, the item
        is the same object, every surviving item keeps its order, and the reasoning item stays
        right before the call it precedes. (An input starting from a compaction item keeps the
        orphan: its call may be in the compaction.)"""
        item = ALL_ITEMS[kind]
        rs, c1, c2, gone = reasoning("rs_2"), call("c1"), call("c2"), output("gone")
        if kind in MODEL_ITEMS:
            items = [user(), rs, c1, item, c2, gone, output("c1"), user("and?")]
        else:
            items = [user(), rs, c1, c2, gone, item, output("c1"), user("and?")]
        accepted(items)
        out, report = prepared(items, tmp_path)
        accepted(out)
        assert toolkeep.validate(out, FMT) == []
        assert sum(x is item for x in out) == 1
        kept = kind == "compaction"
        assert subsequence([x for x in items if kept or x is not gone], out)
        assert out[out.index(rs) + 1] is c1
        assert output("c2", MISSING_RESULT_TEXT) in out
        expected = ["synthetic"] if kept else ["orphans_removed", "synthetic"]
        assert sorted(r.kind for r in report.repairs) == expected

    @pytest.mark.parametrize("kind", sorted(MODEL_ITEMS))
    def test_sdk_objects_come_back_as_the_same_objects(self, kind: str, tmp_path: Path) -> None:
        """The item as the SDK's own output-item object (``input += response.output``), in a turn
        pairing repairs: it comes back as that object, and the request is what the dicts give."""
        item = ALL_ITEMS[kind]
        obj = OUTPUT_ITEM.validate_python(item)
        call_obj = OUTPUT_ITEM.validate_python(call("c1"))
        items = [user(), obj, call_obj, user("interrupted")]
        out, _ = prepared(items, tmp_path)
        assert out[1] is obj and out[2] is call_obj
        dicts, _ = prepared([user(), item, call("c1"), user("interrupted")], tmp_path / "d")
        assert as_json(out) == as_json(dicts)

    def test_detected_as_responses(self) -> None:
        """A history holding any of these items is detected as Responses."""
        for kind, item in ALL_ITEMS.items():
            assert toolkeep.detect_format([user(), item]).name == FMT, kind


class TestPlaces:
    def test_item_between_a_call_and_its_output_keeps_its_place(self, tmp_path: Path) -> None:
        """An input item pairing cannot see, between a call and its output, stays there: the
        Responses API pairs by call id, so nothing needs to move."""
        shell_out = INPUT_ONLY["local_shell_call_output"]
        items = [user(), MODEL_ITEMS["local_shell_call"], call("c1"), shell_out, output("c1"), said("ok")]
        accepted(items)
        out, report = prepared(items, tmp_path)
        assert all(a is b for a, b in zip(out, items, strict=True)) and len(out) == len(items)
        assert report.repairs == []

    def test_it_stays_behind_the_outputs_before_it(self, tmp_path: Path) -> None:
        """When pairing repacks the outputs (one is missing), the item stays after the output that
        preceded it and before the synthetic one."""
        shell_out = INPUT_ONLY["local_shell_call_output"]
        items = [user(), call("c1"), call("c2"), output("c1"), shell_out]
        out, _ = prepared(items, tmp_path)
        assert out == [*items, output("c2", MISSING_RESULT_TEXT)]
        assert out[4] is shell_out


class TestReasoning:
    def test_goes_with_a_pruned_call_in_the_middle_of_a_run(self, tmp_path: Path) -> None:
        """The call a reasoning item preceded is pruned (no name): the reasoning item goes with
        it, not glued to the next reasoning item; the next pair stays together."""
        rs1, bad, rs2, good = reasoning("rs_1"), call("c9", ""), reasoning("rs_2"), call("c1")
        items = [user(), rs1, bad, rs2, good, output("c9"), output("c1")]
        out, report = prepared(items, tmp_path)
        assert out == [items[0], rs2, good, items[6]]
        assert [r.kind for r in report.repairs] == ["invalid_calls_pruned", "orphans_removed"]
        accepted(out)

    def test_goes_with_a_call_renamed_without_its_item_id(self, tmp_path: Path) -> None:
        """A call reusing an earlier call_id is renamed and loses its ``fc_`` id: the reasoning
        item tied to that id goes; the renamed call and its output remain."""
        rs = reasoning("rs_2")
        items = [
            user(),
            call("c1", id="fc_1"),
            output("c1"),
            user(),
            rs,
            call("c1", id="fc_2"),
            output("c1", "2"),
        ]
        out, report = prepared(items, tmp_path)
        assert rs not in out
        assert out[4:] == [call("c1_2"), output("c1_2", "2")]
        assert [r.kind for r in report.repairs] == ["renamed"]

    def test_stays_before_a_renamed_call_that_had_no_item_id(self, tmp_path: Path) -> None:
        """A call without an item id loses nothing by its rename: its reasoning item stays."""
        rs = reasoning("rs_2")
        items = [user(), call("c1"), output("c1"), user(), rs, call("c1"), output("c1", "2")]
        out, _ = prepared(items, tmp_path)
        assert out[4] is rs and out[5] == call("c1_2")

    def test_message_chars_follow_what_is_sent(self) -> None:
        """The size estimate of a run left with a dropped reasoning item counts what the dump
        sends (a big encrypted reasoning item dropped is not counted)."""
        from dataclasses import replace

        fmt = toolkeep.get_format(FMT)
        rs = {**reasoning("rs_1"), "encrypted_content": "g" * 5_000}
        (run,) = [m for m in fmt.load([rs, call("c9", ""), call("c1")]) if m.role == "assistant"]
        pruned = run.with_parts([run.parts[0], run.parts[2]])
        sent = fmt.dump([pruned])
        size = fmt.message_chars(replace(pruned))
        assert sent == [call("c1")]
        assert (
            abs(size - len(json.dumps(sent[0], separators=(",", ":"))))
            <= toolkeep.formats.MESSAGE_CHARS_SLACK
        )


class TestStoredState:
    def test_new_outputs_of_stored_calls_are_sent(self, tmp_path: Path) -> None:
        """``previous_response_id`` / ``conversation``: the request holds only the new outputs;
        they come back untouched, as the very same objects."""
        items = [output("call_1", "42"), output("call_2", "43")]
        accepted(items)
        out, report = prepared(items, tmp_path, STORED)
        assert len(out) == 2 and out[0] is items[0] and out[1] is items[1]
        assert report.repairs == []
        assert toolkeep.validate(out, STORED) == []

    def test_without_it_they_would_be_orphans(self, tmp_path: Path) -> None:
        """Control: read as a whole history, the same request loses both outputs."""
        out, report = prepared([output("call_1", "42"), output("call_2", "43")], tmp_path)
        assert out == [] and [r.kind for r in report.repairs] == ["orphans_removed", "orphans_removed"]

    def test_the_part_the_request_holds_is_repaired(self, tmp_path: Path) -> None:
        """A call the request holds still gets its output; an output of a call the request holds
        is still paired (its second copy goes); outputs of stored calls stay where they were."""
        stored_1, stored_2 = output("call_s1", "s1"), output("call_s2", "s2")
        c2 = call("c2")
        items = [stored_1, user("then?"), c2, stored_2, output("c2", "a"), output("c2", "b"), call("c3")]
        out, report = prepared(items, tmp_path, STORED)
        assert out == [
            stored_1,
            items[1],
            c2,
            stored_2,
            output("c2", "a"),
            call("c3"),
            output("c3", MISSING_RESULT_TEXT),
        ]
        assert out[0] is stored_1 and out[3] is stored_2
        assert [(r.kind, r.id) for r in report.repairs] == [("orphans_removed", "c2"), ("synthetic", "c3")]
        accepted(out)

    def test_outputs_of_stored_calls_are_never_shortened(self, tmp_path: Path) -> None:
        """They are carried as they are (toolkeep knows no tool name for them), even over every
        cap and budget."""
        big = output("call_s", "x" * 50_000)
        config = toolkeep.Config(default_tool_cap=1_000, max_result_chars=1_000, turn_budget_chars=1_000)
        with toolkeep.Session(config, workspace=tmp_path / "ws") as session:
            out, report = session.prepare([big], format=STORED)
        assert out == [big] and out[0] is big and report.capped == report.persisted == 0

    def test_compaction_holds_calls_toolkeep_cannot_see(self, tmp_path: Path) -> None:
        """An input that starts from a compaction item may answer a call inside it: the output is
        kept without any flag, as with ``item_reference`` items."""
        items = [MODEL_ITEMS["compaction"], output("call_in_compaction"), user("go on")]
        accepted(items)
        out, report = prepared(items, tmp_path)
        assert all(a is b for a, b in zip(out, items, strict=True)) and report.repairs == []

    def test_sdk_objects_with_stored_state(self, tmp_path: Path) -> None:
        """The SDK-object wrapper reads the format given, flag included."""
        reasoning_obj = OUTPUT_ITEM.validate_python(reasoning("rs_5"))
        call_obj = OUTPUT_ITEM.validate_python(call("c5"))
        items = [output("call_stored"), reasoning_obj, call_obj]
        out, report = prepared(items, tmp_path, STORED)
        assert out[0] is items[0] and out[1] is reasoning_obj and out[2] is call_obj
        assert out[3] == output("c5", MISSING_RESULT_TEXT)
        assert [r.kind for r in report.repairs] == ["synthetic"]

    def test_the_history_given_is_not_changed(self, tmp_path: Path) -> None:
        """Nothing of the caller's items is mutated."""
        items = [output("call_1"), user(), call("c2")]
        before = copy.deepcopy(items)
        prepared(items, tmp_path, STORED)
        assert items == before
