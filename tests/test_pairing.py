"""Pairing repair (SPEC 2), on both formats, through the step alone and through ``prepare``."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import toolkeep
from toolkeep import MISSING_RESULT_TEXT, repair_pairing, run_pipeline

from .strategies import (
    assistant,
    oa_assistant,
    oa_tool,
    oa_user,
    tool_result,
    tool_use,
    user,
)

EXACT_MISSING = (
    "[Tool result missing -- the tool execution was interrupted or failed silently. "
    "Do NOT retry this tool call. Analyze what went wrong and try a different approach.]"
)


def repair(messages: list[Any], fmt: str) -> tuple[list[Any], toolkeep.Report]:
    """Run the pairing step alone and check the input was not touched."""
    before = copy.deepcopy(messages)
    out, report = run_pipeline(messages, format=fmt, steps=[repair_pairing])
    assert messages == before
    assert toolkeep.validate(out, fmt) == []
    return out, report


def counts(report: toolkeep.Report) -> dict[str, int]:
    return {k: v for k, v in report.repair_counts().items() if v}


class TestSyntheticResult:
    def test_text_is_exactly_the_spec_text(self) -> None:
        """The synthetic result carries the SPEC's text, character for character."""
        assert MISSING_RESULT_TEXT == EXACT_MISSING

    def test_anthropic_missing_result_gets_synthetic_error(self) -> None:
        """A call with no result gets a tool_result with the text and is_error true, placed first."""
        out, report = repair([user("go"), assistant("hm", tool_use("t1")), user("next?")], "anthropic")
        assert out[2]["content"][0] == {
            "type": "tool_result",
            "tool_use_id": "t1",
            "content": EXACT_MISSING,
            "is_error": True,
        }
        assert out[2]["content"][1] == {"type": "text", "text": "next?"}
        assert counts(report) == {"synthetic": 1}
        assert [(r.kind, r.id) for r in report.repairs] == [("synthetic", "t1")]

    def test_anthropic_missing_result_at_end_of_history(self) -> None:
        """A trailing assistant message with calls gets a new user message with the results."""
        out, _ = repair([user("go"), assistant(tool_use("t1"), tool_use("t2"))], "anthropic")
        assert len(out) == 3
        assert [b["tool_use_id"] for b in out[2]["content"]] == ["t1", "t2"]
        assert all(b["is_error"] is True for b in out[2]["content"])

    def test_synthetic_placed_with_the_others_in_call_order(self) -> None:
        """The synthetic result goes with the real ones, in call order."""
        h = [
            user("go"),
            assistant(tool_use("a"), tool_use("b"), tool_use("c")),
            user(tool_result("c"), tool_result("a")),
        ]
        out, report = repair(h, "anthropic")
        assert [b["tool_use_id"] for b in out[2]["content"]] == ["a", "b", "c"]
        assert out[2]["content"][1]["content"] == EXACT_MISSING
        assert counts(report) == {"synthetic": 1}

    def test_openai_missing_result_gets_tool_message(self) -> None:
        """OpenAI Chat has no is_error field: the synthetic result is a tool message with the text."""
        h = [oa_user("go"), oa_assistant(("c1", "ls"), ("c2", "cat")), oa_tool("c2", "two"), oa_user("?")]
        out, report = repair(h, "openai-chat")
        assert out[2:5] == [
            oa_tool("c1", EXACT_MISSING),
            oa_tool("c2", "two"),
            oa_user("?"),
        ]
        assert "is_error" not in out[2] and "is_error" not in out[3]
        assert counts(report) == {"synthetic": 1}


class TestOrphans:
    def test_anthropic_orphan_removed_not_faked(self) -> None:
        """A result no call claims is removed; no call is invented for it."""
        h = [user("go"), assistant(tool_use("a")), user(tool_result("a"), tool_result("zz"))]
        out, report = repair(h, "anthropic")
        assert out == [user("go"), assistant(tool_use("a")), user(tool_result("a"))]
        assert counts(report) == {"orphans_removed": 1}
        assert report.repairs[0].id == "zz" and report.repairs[0].index == 2

    def test_anthropic_message_of_only_orphans_disappears(self) -> None:
        """A user message that held only orphan results goes away entirely."""
        h = [user("go"), user(tool_result("zz")), assistant("hi")]
        out, report = repair(h, "anthropic")
        assert out == [user("go"), assistant("hi")]
        assert counts(report) == {"orphans_removed": 1}

    def test_openai_orphan_tool_message_removed(self) -> None:
        """A tool message answering no call is removed."""
        h = [oa_user("go"), oa_tool("zz"), oa_assistant(content="hi")]
        out, report = repair(h, "openai-chat")
        assert out == [oa_user("go"), oa_assistant(content="hi")]
        assert counts(report) == {"orphans_removed": 1}

    def test_second_result_for_same_call_is_an_orphan(self) -> None:
        """Each call claims the first result with its id; a second one is removed."""
        h = [oa_user("go"), oa_assistant(("c1", "ls")), oa_tool("c1", "first"), oa_tool("c1", "second")]
        out, report = repair(h, "openai-chat")
        assert out == h[:3]
        assert counts(report) == {"orphans_removed": 1}

    def test_result_after_next_assistant_does_not_answer_earlier_call(self) -> None:
        """Claiming is block-scoped: a result behind the next assistant message is an orphan there."""
        h = [user("go"), assistant(tool_use("a")), assistant("later"), user(tool_result("a"))]
        out, report = repair(h, "anthropic")
        assert out[2]["content"][0]["content"] == EXACT_MISSING
        assert out[3] == assistant("later")
        assert len(out) == 4  # the orphan's message is gone, the synthetic one is new
        assert counts(report) == {"synthetic": 1, "orphans_removed": 1}

    def test_result_inside_assistant_message_removed(self) -> None:
        """A tool_result block inside an assistant message answers nothing and is removed."""
        h = [user("go"), assistant("x", tool_result("a"))]
        out, report = repair(h, "anthropic")
        assert out == [user("go"), assistant("x")]
        assert counts(report) == {"orphans_removed": 1}


class TestPrunedCalls:
    def test_duplicate_id_within_message_keeps_first(self) -> None:
        """A later call with the same id in the same assistant message is pruned."""
        h = [user("go"), assistant(tool_use("a", "ls"), tool_use("a", "cat")), user(tool_result("a"))]
        out, report = repair(h, "anthropic")
        assert out[1] == assistant(tool_use("a", "ls"))
        assert out[2] == user(tool_result("a"))
        assert counts(report) == {"duplicates_pruned": 1}

    def test_openai_duplicate_id_within_message_keeps_first(self) -> None:
        """The OpenAI Chat adapter prunes the same way."""
        h = [oa_user(), oa_assistant(("c", "ls"), ("c", "cat")), oa_tool("c")]
        out, report = repair(h, "openai-chat")
        assert out[1] == oa_assistant(("c", "ls"))
        assert counts(report) == {"duplicates_pruned": 1}

    def test_empty_id_call_pruned(self) -> None:
        """A call with an empty id is pruned, and a result with an empty id is an orphan."""
        h = [user("go"), assistant("t", tool_use(""), tool_use("b")), user(tool_result(""), tool_result("b"))]
        out, report = repair(h, "anthropic")
        assert out[1] == assistant("t", tool_use("b"))
        assert out[2] == user(tool_result("b"))
        assert counts(report) == {"invalid_calls_pruned": 1, "orphans_removed": 1}

    def test_empty_assistant_dropped(self) -> None:
        """An assistant message left with no content and no calls is dropped."""
        h = [user("go"), assistant(tool_use("")), user("again")]
        out, report = repair(h, "anthropic")
        assert out == [user("go"), user("again")]
        assert counts(report) == {"invalid_calls_pruned": 1, "empty_assistant_dropped": 1}

    def test_openai_empty_assistant_dropped(self) -> None:
        """The same in OpenAI Chat: an assistant with only a pruned call and no text goes."""
        h = [oa_user(), oa_assistant(("", "ls")), oa_user("again")]
        out, report = repair(h, "openai-chat")
        assert out == [oa_user(), oa_user("again")]
        assert counts(report)["empty_assistant_dropped"] == 1


class TestCrossMessageIds:
    def test_anthropic_renames_later_block_call_and_result_alike(self) -> None:
        """Anthropic wants unique ids per request: the later call and its result get a new id."""
        h = [
            user("go"),
            assistant(tool_use("a")),
            user(tool_result("a", "one")),
            assistant(tool_use("a")),
            user(tool_result("a", "two")),
        ]
        out, report = repair(h, "anthropic")
        assert out[:3] == h[:3]
        assert out[3] == assistant(tool_use("a_2"))
        assert out[4] == user(tool_result("a_2", "two"))
        assert counts(report) == {"renamed": 1}

    def test_rename_skips_ids_already_taken(self) -> None:
        """The new id never collides with an id used anywhere in the history."""
        h = [
            user("go"),
            assistant(tool_use("a")),
            user(tool_result("a")),
            assistant(tool_use("a_2")),
            user(tool_result("a_2")),
            assistant(tool_use("a")),
            user(tool_result("a")),
        ]
        out, _ = repair(h, "anthropic")
        assert out[5]["content"][0]["id"] == "a_3"
        assert out[6]["content"][0]["tool_use_id"] == "a_3"

    def test_rename_is_deterministic(self) -> None:
        """The same history is renamed the same way each time."""
        h = [user("go"), assistant(tool_use("a")), user(tool_result("a")), assistant(tool_use("a"))]
        assert repair(h, "anthropic")[0] == repair(h, "anthropic")[0]

    def test_openai_keeps_reused_ids_across_messages(self) -> None:
        """OpenAI Chat allows the same id in a later assistant message: nothing changes."""
        h = [oa_user(), oa_assistant(("c", "ls")), oa_tool("c"), oa_assistant(("c", "ls")), oa_tool("c")]
        out, report = repair(h, "openai-chat")
        assert out == h
        assert report.repairs == []


class TestRelocation:
    def test_anthropic_displaced_result_moves_back(self) -> None:
        """A result behind an interposed user message moves next to its call; the message follows."""
        h = [user("go"), assistant(tool_use("a")), user("wait, also check b"), user(tool_result("a", "A"))]
        out, report = repair(h, "anthropic")
        assert out == [
            user("go"),
            assistant(tool_use("a")),
            {
                "role": "user",
                "content": [tool_result("a", "A"), {"type": "text", "text": "wait, also check b"}],
            },
        ]
        assert counts(report) == {"relocated": 1}
        assert report.repairs[0].index == 3

    def test_openai_displaced_result_moves_back(self) -> None:
        """In OpenAI Chat the tool message moves before the interposed user message."""
        h = [
            oa_user(),
            oa_assistant(("a", "ls"), ("b", "ls")),
            oa_tool("a"),
            oa_user("hey"),
            oa_tool("b", "B"),
        ]
        out, report = repair(h, "openai-chat")
        assert out == [oa_user(), h[1], oa_tool("a"), oa_tool("b", "B"), oa_user("hey")]
        assert counts(report) == {"relocated": 1}

    def test_anthropic_results_split_over_two_user_messages_merge(self) -> None:
        """Results split over two user messages end up first in the one after the calls."""
        h = [
            user("go"),
            assistant(tool_use("a"), tool_use("b")),
            user(tool_result("a")),
            user(tool_result("b")),
        ]
        out, _ = repair(h, "anthropic")
        assert out[2] == user(tool_result("a"), tool_result("b"))

    def test_anthropic_result_after_text_in_same_message_moves_first(self) -> None:
        """Results must come first in the user message: text before them moves behind."""
        h = [user("go"), assistant(tool_use("a")), user({"type": "text", "text": "t"}, tool_result("a"))]
        out, _ = repair(h, "anthropic")
        assert out[2] == user(tool_result("a"), {"type": "text", "text": "t"})


class TestValidUnchanged:
    def test_anthropic_valid_history_identical(self) -> None:
        """A valid history comes back equal, message objects shared, result order kept."""
        h = [
            user("go"),
            assistant("two things", tool_use("a"), tool_use("b")),
            user(tool_result("b", "B", cache_control={"type": "ephemeral"}), tool_result("a", "A"), "thanks"),
            assistant("done"),
        ]
        h[2]["content"][2] = {"type": "text", "text": "thanks"}
        out, report = repair(h, "anthropic")
        assert out == h
        assert all(o is i for o, i in zip(out, h, strict=True))
        assert report.repairs == []

    def test_openai_valid_history_identical_with_result_order(self) -> None:
        """OpenAI Chat results answered out of call order stay in their order."""
        h = [
            {"role": "system", "content": "sys"},
            oa_user(),
            oa_assistant(("a", "ls"), ("b", "ls"), content="x"),
            oa_tool("b"),
            oa_tool("a"),
            oa_assistant(content="done"),
        ]
        out, report = repair(h, "openai-chat")
        assert out == h
        assert all(o is i for o, i in zip(out, h, strict=True))
        assert report.repairs == []

    @pytest.mark.parametrize("fmt", ["anthropic", "openai-chat"])
    def test_full_pipeline_leaves_small_valid_history_unchanged(
        self, fmt: str, session: toolkeep.Session
    ) -> None:
        """``prepare`` on a valid, small history returns it as it was."""
        if fmt == "anthropic":
            h = [user("go"), assistant(tool_use("a")), user(tool_result("a", "A")), assistant("ok")]
        else:
            h = [oa_user(), oa_assistant(("a", "ls")), oa_tool("a"), oa_assistant(content="ok")]
        out, report = session.prepare(h, format=fmt)
        assert out == h
        assert not report.changed


class TestUnknownPartsCarried:
    def test_images_cache_control_unknown_keys_kept_through_repair(self) -> None:
        """Blocks and keys the pipeline does not know survive a repair of their message."""
        image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}
        h = [
            user("go"),
            {
                "role": "assistant",
                "content": [tool_use("a", cache_control={"type": "ephemeral"})],
                "x_meta": 1,
            },
            user(image, tool_result("zz")),
            user(tool_result("a", [{"type": "text", "text": "A"}, image], x_extra=True)),
        ]
        out, _ = repair(h, "anthropic")
        assert out[1] is h[1]
        assert out[2]["content"] == [
            tool_result("a", [{"type": "text", "text": "A"}, image], x_extra=True),
            image,
        ]


def rules(messages: list[Any], fmt: str) -> list[tuple[int, str | None, str]]:
    return [(v.index, v.id, v.rule) for v in toolkeep.validate(messages, fmt)]


class TestValidators:
    """The validators that the output is checked against must see every breach."""

    @pytest.mark.parametrize(
        ("messages", "expected"),
        [
            ([user("go"), assistant(tool_use("a"))], [(1, "a", "missing_result")]),
            ([user("go"), assistant(tool_use("a")), user("no result")], [(1, "a", "missing_result")]),
            ([user(tool_result("z"))], [(0, "z", "orphan_result")]),
            (
                [user("go"), assistant(tool_use("a"), tool_use("a")), user(tool_result("a"))],
                [(1, "a", "duplicate_id")],
            ),
            (
                [user("go"), assistant(tool_use("a")), user(tool_result("a")), assistant(tool_use("a")), user(tool_result("a"))],
                [(3, "a", "duplicate_id")],
            ),
            ([user("go"), assistant(tool_use("")), user("x")], [(1, "", "empty_id")]),
            (
                [user("go"), assistant(tool_use("a")), user({"type": "text", "text": "t"}, tool_result("a"))],
                [(1, "a", "missing_result"), (2, "a", "result_not_first")],
            ),
            (
                [user("go"), assistant(tool_use("a")), user(tool_result("a"), tool_result("a"))],
                [(2, "a", "duplicate_result")],
            ),
            ([user("go"), {"role": "assistant", "content": []}, user("x")], [(1, None, "empty_content")]),
            ([user("go"), {"role": "assistant", "content": []}], []),
        ],
    )  # fmt: skip
    def test_anthropic(self, messages: list[Any], expected: list[tuple[int, str | None, str]]) -> None:
        """Anthropic: results first in the next user message, one per call, ids unique and non-empty."""
        assert rules(messages, "anthropic") == expected

    @pytest.mark.parametrize(
        ("messages", "expected"),
        [
            ([oa_user(), oa_assistant(("a", "ls"))], [(1, "a", "missing_result")]),
            ([oa_user(), oa_assistant(("a", "ls")), oa_user(), oa_tool("a")], [(1, "a", "missing_result"), (3, "a", "orphan_result")]),
            ([oa_user(), oa_tool("z")], [(1, "z", "orphan_result")]),
            ([oa_user(), oa_assistant(("a", "ls")), oa_tool("a"), oa_tool("a")], [(3, "a", "orphan_result")]),
            ([oa_user(), oa_assistant(("a", "ls"), ("a", "ls")), oa_tool("a")], [(1, "a", "duplicate_id")]),
            ([oa_user(), oa_assistant(("", "ls"))], [(1, "", "empty_id")]),
            ([oa_user(), oa_assistant(("a", "ls")), oa_tool("a"), oa_assistant(("a", "ls")), oa_tool("a")], []),
        ],
    )  # fmt: skip
    def test_openai_chat(self, messages: list[Any], expected: list[tuple[int, str | None, str]]) -> None:
        """OpenAI Chat: one tool message per call, right after it; ids may repeat across messages."""
        assert rules(messages, "openai-chat") == expected


def test_empty_assistant_messages_are_dropped_wherever_they_sit() -> None:
    """An assistant message with no content goes, mid-history as last (Anthropic takes it last,
    where it prefills nothing; every other provider refuses it there too): one rule of the
    message alone, so a second run drops nothing more."""
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": []},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": []},
    ]
    out, report = toolkeep.run_pipeline(history, format="anthropic")
    assert out == [history[0], history[2]]
    assert report.repair_counts()["empty_assistant_dropped"] == 2
    assert toolkeep.validate(out, "anthropic") == []
    with toolkeep.Session() as session:
        assert session.prepare(history)[0] == out


def test_openai_chat_two_empty_assistants_go_in_one_run() -> None:
    """``[user, assistant(null), assistant(null), tool(orphan), user]`` lost one empty message per
    run (the first, followed by nothing in its own block, was kept): both go at once now, and
    preparing the output again changes nothing."""
    history = [
        oa_user("go"),
        oa_assistant(),
        oa_assistant(),
        oa_tool("gone"),
        oa_user("more"),
    ]
    assert [v.rule for v in toolkeep.validate(history, "openai-chat")] == [
        "empty_content",
        "empty_content",
        "orphan_result",
    ]
    out, report = toolkeep.run_pipeline(history, format="openai-chat")
    assert out == [history[0], history[4]]
    assert counts(report) == {"empty_assistant_dropped": 2, "orphans_removed": 1}
    again, report = toolkeep.run_pipeline(out, format="openai-chat")
    assert again == out and report.repairs == []


@pytest.mark.parametrize(
    ("fmt", "message", "new_arguments", "read_back"),
    [
        (
            "anthropic",
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "a", "name": "Write", "input": {"c": "long"}}],
            },
            {"c": "short"},
            lambda m: m["content"][0]["input"],
        ),
        (
            "openai-chat",
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "w", "arguments": '{"c": "long"}'}}
                ],
            },
            '{"c": "short"}',
            lambda m: m["tool_calls"][0]["function"]["arguments"],
        ),
    ],
)
def test_changed_call_arguments_reach_the_output(
    fmt: str, message: dict, new_arguments: object, read_back: object
) -> None:
    """A step that rewrites a call's arguments sees them in the dumped message, input untouched."""
    from dataclasses import replace

    from toolkeep.formats import get_format

    adapter = get_format(fmt)
    history = adapter.load([{"role": "user", "content": "x"}, message])
    call = history[1].calls[0]
    history[1] = history[1].with_parts([replace(call, arguments=new_arguments)])
    dumped = adapter.dump(history)[1]
    assert read_back(dumped) == new_arguments  # type: ignore[operator]
    assert read_back(message) != new_arguments  # type: ignore[operator]


class TestRefusedIds:
    """Ids the provider's rule refuses are renamed, the same way every time, with their results."""

    @pytest.mark.parametrize(
        ("fmt", "ids"),
        [
            ("anthropic", ["functions.ls:0", "functions.ls.0", "a b", "toolu_\x00"]),
            ("bedrock", ["call/1", "call 1", "y" * 65]),
            ("openai-chat", ["fc_" + "0" * 50, "fc_" + "0" * 49 + "1"]),
        ],
    )
    def test_renamed_ids_are_accepted_distinct_and_stable(self, fmt: str, ids: list[str]) -> None:
        rule = toolkeep.get_format(fmt).rules.call_id_rule
        assert rule is not None
        renamed = [rule.conforming(i) for i in ids]
        assert not any(rule.accepts(i) for i in ids)
        assert all(rule.accepts(r) for r in renamed)
        assert len(set(renamed)) == len(ids)  # ids made alike stay apart
        assert renamed == [rule.conforming(i) for i in ids]

    def test_a_refused_id_taken_twice_is_renamed_apart(self) -> None:
        """The same refused id in two blocks: the second is renamed past the first's new id."""
        history = [
            user("go"),
            assistant(tool_use("functions.ls:0", "ls")),
            user(tool_result("functions.ls:0", "a")),
            assistant(tool_use("functions.ls:0", "ls")),
            user(tool_result("functions.ls:0", "b")),
        ]
        out, report = run_pipeline(history, format="anthropic")
        first = out[1]["content"][0]["id"]
        assert first.startswith("functions_ls_0_") and out[2]["content"][0]["tool_use_id"] == first
        assert out[3]["content"][0]["id"] == out[4]["content"][0]["tool_use_id"] == f"{first}_2"
        assert [r.kind for r in report.repairs] == ["renamed", "renamed"]
        assert toolkeep.validate(out, "anthropic") == []
