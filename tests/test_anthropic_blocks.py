"""Anthropic histories as real agents send them: system messages inside ``messages`` and the blocks
toolkeep does not manage (thinking, server tools, MCP, container uploads, compaction).

What the API does with a system message (``formats/anthropic.py`` says it in full): never first,
right after a user message (or an assistant message ending in a server tool use), last or before
an assistant message, never next to another one. A system message between a ``tool_use`` and its
``tool_result`` is therefore refused; pairing repair puts the results right after their calls and
the system message right after them, losing nothing.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

import toolkeep
from toolkeep import MISSING_RESULT_TEXT, repair_pairing, run_pipeline
from toolkeep.formats import detect_format, get_format
from toolkeep.messages import OpaquePart, TextPart

from .strategies import assistant, oa_assistant, oa_tool, tool_result, tool_use, user

FMT = "anthropic"


def system(content: Any = "<system-reminder>Keep the todo list current.</system-reminder>") -> dict[str, Any]:
    return {"role": "system", "content": content}


def prepared(messages: list[Any]) -> tuple[list[Any], toolkeep.Report]:
    """The whole default pipeline, once; the input untouched."""
    before = copy.deepcopy(messages)
    out, report = run_pipeline(messages, format=FMT)
    assert messages == before
    return out, report


def rules(messages: list[Any]) -> list[tuple[int, str]]:
    return [(v.index, v.rule) for v in toolkeep.validate(messages, FMT)]


def kinds(report: toolkeep.Report) -> list[tuple[str, int]]:
    return [(r.kind, r.index) for r in report.repairs]


# ------------------------------------------------------------------------------- system messages


class TestSystemMessagesLoad:
    def test_loaded_as_system_and_sent_back_as_they_came(self) -> None:
        """A string and a block-list system message are neutral ``system`` messages of text parts;
        a valid history with them comes back as the very same objects."""
        blocks = system([{"type": "text", "text": "Plan first.", "cache_control": {"type": "ephemeral"}}])
        history = [
            user("go"),
            assistant(tool_use("t1", "read")),
            user(tool_result("t1", "data")),
            system(),
            assistant("done"),
            user("again"),
            blocks,
        ]
        neutral = get_format(FMT).load(history)
        assert [m.role for m in neutral] == [
            "user",
            "assistant",
            "user",
            "system",
            "assistant",
            "user",
            "system",
        ]
        assert neutral[3].parts == (TextPart(history[3]["content"]),)
        assert neutral[6].parts == (TextPart("Plan first.", blocks["content"][0]),)
        assert rules(history) == []
        out, report = prepared(history)
        assert all(o is i for o, i in zip(out, history, strict=True))
        assert report.repairs == []

    def test_output_config_without_content(self) -> None:
        """The beta's system message carrying only ``output_config`` reads as an empty system
        message that is no breach, and goes out without a ``content`` key."""
        bare = {"role": "system", "output_config": {"effort": "low"}}
        history = [user("go"), bare]
        assert rules(history) == []
        out, _ = prepared(history)
        assert out[1] is bare
        fmt = get_format(FMT)
        rebuilt = fmt.dump_message(fmt.load_message(1, bare).with_parts([]))
        assert rebuilt == bare

    def test_detection(self) -> None:
        """An Anthropic history with system messages is detected as Anthropic; a plain history
        that starts with a system message is OpenAI Chat's, as before (Anthropic refuses one
        there); a Chat history with a system message further on stays Chat's."""
        claude = [user("go"), assistant(tool_use("t1")), user(tool_result("t1")), system()]
        assert detect_format(claude).name == "anthropic"
        chat = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hi"}]
        assert detect_format(chat).name == "openai-chat"
        chat_tools = [{"role": "user", "content": "go"}, oa_assistant(("c1", "ls")), oa_tool("c1"), system()]
        assert detect_format(chat_tools).name == "openai-chat"

    def test_role_error_names_system(self) -> None:
        """A role of no kind is refused naming the three the API takes."""
        with pytest.raises(toolkeep.FormatError, match="'user', 'assistant' or 'system'"):
            get_format(FMT).load([{"role": "developer", "content": "x"}])


class TestSystemPlacement:
    @pytest.mark.parametrize(
        ("history", "expected"),
        [
            ([system(), user("go")], [(0, "system_placement"), (0, "system_placement")]),
            ([user("go"), system(), system()], [(2, "system_placement")]),
            ([user("go"), assistant("hi"), system()], [(2, "system_placement")]),
            ([user("go"), system(), user("more")], [(1, "system_placement")]),
        ],
        ids=["first", "adjacent", "after-assistant-text", "before-user"],
    )
    def test_each_rule_is_reported(self, history: list[Any], expected: list[tuple[int, str]]) -> None:
        """Each placement rule the API has for system messages is a ``system_placement``."""
        assert rules(history) == expected

    def test_after_a_paused_server_tool_use(self) -> None:
        """After an assistant message that ends in a server tool use (a paused turn) a system
        message is accepted, as before the assistant message that goes on."""
        search = {
            "type": "server_tool_use",
            "id": "srvtoolu_1",
            "name": "web_search",
            "input": {"query": "x"},
        }
        history = [user("go"), assistant("Searching.", search), system(), assistant("Found it.")]
        assert rules(history) == []
        mcp = {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "q", "server_name": "db", "input": {}}
        assert rules([user("go"), assistant(mcp), system()]) == []

    def test_between_call_and_result_is_a_breach(self) -> None:
        """A system message between a tool_use and its tool_result: the result is not right after
        the call, and the system message is in a place the API refuses."""
        history = [user("go"), assistant(tool_use("t1")), system(), user(tool_result("t1"))]
        assert rules(history) == [
            (1, "missing_result"),
            (2, "system_placement"),
            (2, "system_placement"),
            (3, "orphan_result"),
        ]
        assert "a system message may not stand between them" in toolkeep.validate(history, FMT)[0].message


class TestSystemMessagesAndPairing:
    def test_result_behind_a_system_message_is_moved_not_orphaned(self) -> None:
        """The result behind a system message is its call's: it goes right after the call, the
        system message right after it; nothing is removed, nothing else moves."""
        reminder = system()
        result = user(tool_result("t1", "data"))
        history = [user("go"), assistant("looking", tool_use("t1", "read")), reminder, result]
        out, report = prepared(history)
        assert out == [history[0], history[1], result, reminder]
        assert out[3] is reminder and out[1] is history[1]
        assert kinds(report) == [("relocated", 3)]
        assert rules(out) == []

    def test_result_with_text_behind_a_system_message(self) -> None:
        """The results' message keeps its text after the results; the system message follows it."""
        reminder = system()
        history = [
            user("go"),
            assistant(tool_use("t1")),
            reminder,
            user(tool_result("t1", "ok"), {"type": "text", "text": "and then?"}),
            assistant("next"),
        ]
        out, _ = prepared(history)
        assert out[2] == history[3]
        assert out[3] is reminder and out[4] is history[4]
        assert rules(out) == []

    def test_interrupted_call_before_a_system_message(self) -> None:
        """A call left without a result, a reminder after it: the synthetic result comes in its own
        user message right after the call, the reminder after that."""
        reminder = system()
        history = [user("go"), assistant(tool_use("t1", "bash")), reminder]
        out, report = prepared(history)
        assert out[2] == {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": MISSING_RESULT_TEXT, "is_error": True}
            ],
        }
        assert out[3] is reminder and len(out) == 4
        assert kinds(report) == [("synthetic", 1)]
        assert rules(out) == []

    def test_system_message_after_the_results_is_left_alone(self) -> None:
        """Where Claude Code puts its reminders, after the results: the block is valid as it is."""
        history = [
            user("go"),
            assistant(tool_use("t1"), tool_use("t2")),
            user(tool_result("t2"), tool_result("t1")),
            system(),
            assistant(tool_use("t3")),
            user(tool_result("t3")),
            system("<system-reminder>Two files changed.</system-reminder>"),
        ]
        out, report = run_pipeline(history, format=FMT, steps=[repair_pairing])
        assert all(o is i for o, i in zip(out, history, strict=True))
        assert report.repairs == []

    def test_result_inside_a_system_message_goes_to_a_user_message(self) -> None:
        """A tool_result the API would refuse in a system message is a result all the same: it
        answers its call from the user message right after it, the system text stays."""
        history = [
            user("go"),
            assistant(tool_use("t1")),
            {"role": "system", "content": [tool_result("t1", "ok"), {"type": "text", "text": "note"}]},
        ]
        assert (1, "missing_result") in rules(history) and (2, "orphan_result") in rules(history)
        out, _ = prepared(history)
        assert out[2] == user(tool_result("t1", "ok"))
        assert out[3] == {"role": "system", "content": [{"type": "text", "text": "note"}]}
        assert rules(out) == []

    def test_ages_count_assistant_turns_only(self) -> None:
        """System messages are no turns: results age the same with and without them."""
        big = "line of output\n" * 400
        plain = [user("go")]
        for n in range(5):
            plain += [assistant(tool_use(f"t{n}", "grep")), user(tool_result(f"t{n}", big))]
        with_systems = []
        for m in plain:
            with_systems.append(m)
            if m["role"] == "user" and m is not plain[0]:
                with_systems.append(system())
        out_plain, report_plain = prepared(plain)
        out_systems, report_systems = prepared(with_systems)
        assert [m for m in out_systems if m["role"] != "system"] == out_plain
        assert report_systems.to_dict() == report_plain.to_dict()

    def test_two_system_messages_around_the_results(self) -> None:
        """A system message before the results and another after them: the results go right
        after their call and both system messages keep their text and order, side by side, which
        the validator reports (the only repair left would merge them)."""
        first, second = system("before"), system("after")
        history = [user("go"), assistant(tool_use("t1")), first, user(tool_result("t1")), second]
        out, _ = prepared(history)
        assert out == [history[0], history[1], history[3], first, second]
        assert rules(out) == [(4, "system_placement")]

    def test_orphan_only_message_before_a_system_message(self) -> None:
        """A user message holding only orphan results, a system message after it: pairing must
        leave a user message there (``(continue)``) for the system message to follow."""
        history = [user("go"), assistant("thinking aloud"), user(tool_result("gone")), system()]
        assert rules(history) == [(2, "orphan_result")]
        out, report = prepared(history)
        assert out == [history[0], history[1], user({"type": "text", "text": "(continue)"}), history[3]]
        assert kinds(report) == [("orphans_removed", 2)]
        assert rules(out) == []
        assert prepared(out)[0] == out

    def test_empty_assistant_message_before_a_system_message(self) -> None:
        """An interrupted (empty) assistant message between a user message emptied of orphans
        and a system message: both go, and a ``(continue)`` user message stands before the system
        message, which the API wants after a user message."""
        history = [
            user("go"),
            assistant("thinking aloud"),
            user(tool_result("gone")),
            {"role": "assistant", "content": []},
            system(),
        ]
        out, report = prepared(history)
        continued = user({"type": "text", "text": "(continue)"})
        assert out == [history[0], history[1], continued, history[4]]
        assert ("empty_assistant_dropped", 3) in kinds(report)
        assert rules(out) == []
        assert prepared(out)[0] == out

    def test_orphan_only_message_before_a_system_message_with_results(self) -> None:
        """The same, where the block's call has its result later on: the result goes right after
        the call, the system message after it, and no ``(continue)`` is needed."""
        history = [
            user("go"),
            assistant(tool_use("t1")),
            user(tool_result("gone")),
            system(),
            user(tool_result("t1")),
        ]
        out, _ = prepared(history)
        assert rules(out) == []
        assert "(continue)" not in json.dumps(out)


# ------------------------------------------------------------------- blocks toolkeep leaves alone

SIGNATURE = "EqQBCkYIBxgCKkDk0mTfS1G9ZbWq8c3n2Qx+7sRyZ6v1bQ=="
THINKING = {
    "type": "thinking",
    "thinking": "The test fails on line 3; read it first.",
    "signature": SIGNATURE,
}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIw"}


def server_tool(n: int, name: str, arguments: Any, result_type: str, content: Any) -> tuple[Any, Any]:
    """A server tool's use and the result the server wrote after it, as the API returns them."""
    call_id = f"srvtoolu_0{n}"
    use = {"type": "server_tool_use", "id": call_id, "name": name, "input": arguments}
    return use, {"type": result_type, "tool_use_id": call_id, "content": content}


def run_result(kind: str, stdout: str) -> dict[str, Any]:
    return {"type": kind, "stdout": stdout, "stderr": "", "return_code": 0, "content": []}


SEARCH_USE, SEARCH_RESULT = server_tool(
    1,
    "web_search",
    {"query": "pytest"},
    "web_search_tool_result",
    [
        {
            "type": "web_search_result",
            "url": "https://docs.pytest.org/",
            "title": "pytest",
            "encrypted_content": "EqgfCioIARgB",
            "page_age": "2 days ago",
        }
    ],
)
FETCH_PAIR = server_tool(
    2,
    "web_fetch",
    {"url": "https://x.test"},
    "web_fetch_tool_result",
    {
        "type": "web_fetch_result",
        "url": "https://x.test",
        "content": {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "hi"}},
    },
)
CODE_PAIR = server_tool(
    3,
    "code_execution",
    {"code": "1+1"},
    "code_execution_tool_result",
    run_result("code_execution_result", "2\n"),
)
BASH_PAIR = server_tool(
    4,
    "bash_code_execution",
    {"command": "ls"},
    "bash_code_execution_tool_result",
    run_result("bash_code_execution_result", "a.py\n"),
)
EDIT_PAIR = server_tool(
    5,
    "text_editor_code_execution",
    {"command": "view", "path": "a.py"},
    "text_editor_code_execution_tool_result",
    {"type": "text_editor_code_execution_view_result", "content": "print(1)\n", "file_type": "text"},
)
MCP_USE = {
    "type": "mcp_tool_use",
    "id": "mcptoolu_01",
    "name": "query",
    "server_name": "db",
    "input": {"q": "x"},
}
MCP_RESULT = {
    "type": "mcp_tool_result",
    "tool_use_id": "mcptoolu_01",
    "is_error": False,
    "content": [{"type": "text", "text": "3 rows"}],
}
UPLOAD = {"type": "container_upload", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"}
COMPACTION = {
    "type": "compaction",
    "content": "Summary: the user asked to fix the failing test; a.py was read.",
}

SERVER_PAIRS = [
    (SEARCH_USE, SEARCH_RESULT),
    FETCH_PAIR,
    CODE_PAIR,
    BASH_PAIR,
    EDIT_PAIR,
    (MCP_USE, MCP_RESULT),
]


def unmanaged_history() -> list[Any]:
    """Every unmanaged block in its natural place, next to client calls and results (valid)."""
    return [
        user(UPLOAD, {"type": "text", "text": "Fix the failing test in the uploaded repo."}),
        assistant(
            COMPACTION, THINKING, *[b for pair in SERVER_PAIRS for b in pair], tool_use("toolu_01", "read")
        ),
        user(tool_result("toolu_01", "print(1)"), UPLOAD),
        assistant(REDACTED, THINKING, "Reading the other file.", tool_use("toolu_02", "read")),
        user(tool_result("toolu_02", "x = 2")),
        assistant(SEARCH_USE),  # a paused turn: the server has not answered yet
    ]


def unmanaged_blocks(messages: list[Any]) -> list[Any]:
    """The unmanaged blocks of a history, as objects, in order."""
    managed = ("text", "tool_use", "tool_result")
    return [
        b
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] not in managed
    ]


class TestUnmanagedBlocks:
    def test_loaded_as_opaque_parts(self) -> None:
        """None of them is a call or a result: each is an opaque part holding the block itself."""
        history = unmanaged_history()
        neutral = get_format(FMT).load(history)
        opaque = [p.raw for m in neutral for p in m.parts if isinstance(p, OpaquePart)]
        assert all(a is b for a, b in zip(opaque, unmanaged_blocks(history), strict=True))
        assert [c.id for m in neutral for c in m.calls] == ["toolu_01", "toolu_02"]
        assert [r.call_id for m in neutral for r in m.results] == ["toolu_01", "toolu_02"]

    def test_valid_history_comes_back_as_is(self) -> None:
        """Server tool uses need no tool_result, their results answer no tool_use, a paused turn
        ends the history: valid, and sent back as the very same objects."""
        history = unmanaged_history()
        assert rules(history) == []
        out, report = prepared(history)
        assert all(o is i for o, i in zip(out, history, strict=True))
        assert report.repairs == [] and report.total == 2

    def test_repairs_around_them_move_none(self) -> None:
        """Calls renamed, pruned and answered around unmanaged blocks: every block stays the same
        object in the same order, thinking first in its message."""
        history = [
            user(UPLOAD, {"type": "text", "text": "go"}),
            assistant(
                THINKING,
                SEARCH_USE,
                SEARCH_RESULT,
                tool_use("functions.read:0", "read"),  # an id Anthropic refuses: renamed
                tool_use("toolu_02", "ls"),
                tool_use("toolu_02", "ls"),  # a duplicate: pruned
                MCP_USE,
                MCP_RESULT,
            ),
            user(tool_result("functions.read:0", "ok"), UPLOAD, tool_result("toolu_02", "late")),
            assistant(REDACTED, COMPACTION, tool_use("toolu_03", "bash")),  # never answered
            user("and?"),
        ]
        out, report = prepared(history)
        assert rules(out) == []
        assert {r.kind for r in report.repairs} == {"renamed", "duplicates_pruned", "relocated", "synthetic"}
        assert all(a is b for a, b in zip(unmanaged_blocks(out), unmanaged_blocks(history), strict=True))
        assert len(unmanaged_blocks(out)) == len(unmanaged_blocks(history))
        assert out[1]["content"][0] is THINKING and out[3]["content"][0] is REDACTED
        assert [b["type"] for b in out[1]["content"]] == [
            "thinking", "server_tool_use", "web_search_tool_result", "tool_use", "tool_use",
            "mcp_tool_use", "mcp_tool_result",
        ]  # fmt: skip
        assert [b["type"] for b in out[2]["content"]] == ["tool_result", "tool_result", "container_upload"]
        assert out[4]["content"][0]["content"] == MISSING_RESULT_TEXT

    @pytest.mark.parametrize("use", [pair[0] for pair in SERVER_PAIRS], ids=lambda b: b["name"])
    def test_server_tool_use_alone_needs_no_result(self, use: dict[str, Any]) -> None:
        """A server (or MCP) tool use without its result, then a user turn: nothing to repair."""
        history = [user("go"), assistant(THINKING, use), user("go on")]
        assert rules(history) == []
        out, report = prepared(history)
        assert out == history and report.repairs == []

    @pytest.mark.parametrize("result", [pair[1] for pair in SERVER_PAIRS], ids=lambda b: b["type"])
    def test_server_result_answers_no_call(self, result: dict[str, Any]) -> None:
        """A server tool's result whose use is nowhere (a trimmed history) is no orphan toolkeep
        removes: the server's blocks are the caller's to keep or drop."""
        history = [user("go"), assistant(result, "so"), user("ok")]
        out, report = prepared(history)
        assert out == history and report.repairs == []

    def test_signatures_survive_byte_for_byte(self) -> None:
        """Through every policy the thinking signatures and redacted data go out unchanged, even
        when the message holding them is rebuilt."""
        history = unmanaged_history()
        history[4] = user(tool_result("toolu_02", "x" * 90_000))  # capped: the message is rebuilt
        for policy in sorted(toolkeep.pipeline.POLICIES):
            out, _ = run_pipeline(history, format=FMT, config=toolkeep.Config(policy=policy))
            sent = json.dumps(out)
            assert json.dumps(THINKING) in sent and json.dumps(REDACTED) in sent
            assert unmanaged_blocks(out) == unmanaged_blocks(history)
