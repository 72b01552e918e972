"""Importers: real agent logs from ../shared, and small hand-written excerpts of every format."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import toolkeep
from toolkeep.exceptions import DetectionError, FormatError
from toolkeep.replay.importers import (
    RecordedSession,
    format_names,
    iter_log_files,
    load_sessions,
    read_document,
)
from toolkeep.replay.importers.swe_agent import command_word

from .conftest import BENCH_DATA, shared_or_skip

FIXTURES = Path(__file__).parent / "fixtures" / "logs"
RAW = sorted(p for p in (BENCH_DATA / "raw").glob("*/*") if p.is_file())

EXPECTED_FORMAT = {
    "claude-code": "claude-code",
    "gemini-cli": "gemini-cli",
    "mini-swe-agent": "mini-swe-agent",
    "openhands": "openhands",
    "swe-agent": "swe-agent",
}


def raw_format(path: Path) -> str:
    """The log format a raw sample is in, from where the provider filed it."""
    if path.name.startswith("engram__"):
        return "engram"
    return EXPECTED_FORMAT[path.parent.name]


def base_name(name: str) -> str:
    for ext in (".traj.json", ".traj", ".jsonl", ".json"):
        if name.endswith(ext):
            return name[: -len(ext)]
    return name


def tool_outputs(messages: list[Any]) -> Counter[str]:
    """The non-empty tool_result contents of an Anthropic history, as a multiset."""
    return Counter(
        json.dumps(block["content"], ensure_ascii=False, sort_keys=True)
        for m in messages
        if isinstance(m["content"], list)
        for block in m["content"]
        if block.get("type") == "tool_result" and block["content"] not in ("", None, [])
    )


def converted_whole(path: Path) -> Path:
    return BENCH_DATA / "anthropic" / f"{path.parent.name}__{base_name(path.name)}.json"


def converted(path: Path, session: RecordedSession) -> Path:
    """The provider's own conversion of the same session in ../shared/bench-data/anthropic/."""
    suffix = "__" + session.source.rsplit("#", 1)[1] if "#" in session.source else ""
    return BENCH_DATA / "anthropic" / f"{path.parent.name}__{base_name(path.name)}{suffix}.json"


class TestRealLogs:
    @pytest.mark.parametrize("path", RAW or [None], ids=lambda p: p.name[:50] if p else "absent")
    def test_detected_and_every_output_kept_verbatim(self, path: Path | None) -> None:
        """Each real log is detected as its format and carries every tool output the provider's converter found."""
        shared_or_skip()
        assert path is not None
        sessions = load_sessions(path)
        assert sessions
        assert {s.format for s in sessions} == {raw_format(path)}
        mine: Counter[str] = Counter()
        targets: set[Path] = set()
        for s in sessions:
            target = converted(path, s)
            if "#" in s.source and not target.exists():
                if path.parent.name == "openhands":
                    continue  # the provider converted only some instances of this file
                target = converted_whole(path)  # a Gemini CLI file with two inits, converted as one
            mine += tool_outputs(s.messages)
            targets.add(target)
        theirs: Counter[str] = Counter()
        for target in targets:
            theirs += tool_outputs(json.loads(target.read_text(encoding="utf-8")))
        assert theirs, "no converted counterpart found"
        assert mine == theirs

    @pytest.mark.parametrize("path", RAW or [None], ids=lambda p: p.name[:50] if p else "absent")
    def test_histories_break_no_rule_but_calls_the_log_never_answered(self, path: Path | None) -> None:
        """An imported history is valid Anthropic input except where the log itself left a call unanswered."""
        shared_or_skip()
        assert path is not None
        for s in load_sessions(path):
            violations = toolkeep.validate(s.messages, "anthropic")
            assert {v.rule for v in violations} <= {"missing_result"}
            assert len(violations) == s.notes.get("unanswered_calls", 0)
            assert s.messages[0]["role"] == "user"


def session_of(name: str) -> RecordedSession:
    (session,) = load_sessions(FIXTURES / name)
    return session


def blocks(session: RecordedSession, kind: str) -> list[dict[str, Any]]:
    return [
        b
        for m in session.messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == kind
    ]


class TestClaudeCode:
    def test_one_response_split_over_lines_is_one_message(self) -> None:
        """Lines sharing message.id, interleaved with their results, become one assistant message."""
        s = session_of("claude-code-session.jsonl")
        assert s.format == "claude-code"
        assert [m["role"] for m in s.messages] == [
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant",
        ]
        assert [b["id"] for b in s.messages[1]["content"] if b["type"] == "tool_use"] == [
            "toolu_01Read",
            "toolu_02Grep",
        ]
        assert [b["tool_use_id"] for b in s.messages[2]["content"]] == ["toolu_01Read", "toolu_02Grep"]

    def test_sidechains_thinking_and_bookkeeping_are_left_out(self) -> None:
        """Sub-agent entries, thinking blocks, summaries and queue operations are not part of the requests."""
        text = json.dumps(session_of("claude-code-session.jsonl").messages)
        assert "sub-agent chatter" not in text
        assert "thinking" not in text
        assert "Fix the flaky test" not in text

    def test_list_results_are_kept_as_lists(self) -> None:
        """A Task result stored as text blocks stays a list of blocks."""
        results = blocks(session_of("claude-code-session.jsonl"), "tool_result")
        assert results[2]["content"] == [
            {"type": "text", "text": "Failed 3 of 20 runs: a race on the temp file."}
        ]

    def test_compaction_starts_a_new_context(self) -> None:
        """A compact_boundary entry splits the log: the second session starts from the summary."""
        before, after = load_sessions(FIXTURES / "claude-code-compacted.jsonl")
        assert before.source.endswith("#1") and after.source.endswith("#2")
        assert [m["role"] for m in before.messages] == ["user", "assistant", "user", "assistant"]
        assert after.messages[0]["content"][0]["text"].startswith("This session is being continued")
        assert [b["id"] for b in blocks(after, "tool_use")] == ["toolu_p2"]

    def test_engram_parallel_calls_are_regrouped(self) -> None:
        """A call logged while its response still awaits results joins that response's message."""
        s = session_of("engram-export.jsonl")
        assert s.format == "engram"
        assert [b["id"] for b in blocks(s, "tool_use")] == ["toolu_e1", "toolu_e2", "toolu_e3"]
        assert len(s.messages) == 4
        assert blocks(s, "tool_result")[2]["is_error"] is True


class TestCodex:
    def test_rollout_items_become_calls_and_results(self) -> None:
        """function_call, custom_tool_call and local_shell_call each pair with their output by call_id."""
        s = session_of("rollout-2025-12-08T00-37-46-codex.jsonl")
        assert s.format == "codex"
        assert s.system == "You are Codex, a coding agent."
        calls = blocks(s, "tool_use")
        assert [(c["id"], c["name"]) for c in calls] == [
            ("call_make", "shell"),
            ("call_patch", "apply_patch"),
            ("call_ls", "shell"),
        ]
        assert calls[0]["input"] == {"command": ["bash", "-lc", "make test"], "workdir": "/home/dev/app"}
        results = blocks(s, "tool_result")
        assert results[2] == {
            "type": "tool_result",
            "tool_use_id": "call_ls",
            "content": "permission denied",
            "is_error": True,
        }

    def test_reasoning_and_ui_events_are_not_input(self) -> None:
        """Reasoning items, event_msg and turn_context lines add nothing to the history."""
        text = json.dumps(session_of("rollout-2025-12-08T00-37-46-codex.jsonl").messages)
        assert "gAAAA" not in text
        assert "token_count" not in text
        assert "on-request" not in text

    def test_compacted_line_starts_from_the_replacement_history(self) -> None:
        """After a compacted line the context is its replacement history, then the items that follow."""
        before, after = load_sessions(FIXTURES / "rollout-compacted-codex.jsonl")
        assert [b["id"] for b in blocks(before, "tool_use")] == ["call_q1"]
        assert [b["text"] for b in after.messages[0]["content"]] == [
            "Find the slow query.",
            "Summary: orders is scanned sequentially.",
        ]
        assert [b["id"] for b in blocks(after, "tool_use")] == ["call_q2"]
        assert after.system is None

    def test_legacy_rollouts_without_envelope(self) -> None:
        """Old rollouts (metadata line, then bare items) are read too."""
        s = session_of("rollout-legacy-codex.jsonl")
        assert (s.format, s.system) == ("codex", "Be brief.")
        assert [m["role"] for m in s.messages] == ["user", "assistant", "user", "assistant"]


class TestGeminiCLI:
    def test_each_init_starts_a_session_and_deltas_join(self) -> None:
        """Two init events make two sessions; streamed text chunks are one block; error status marks the result."""
        first, second = load_sessions(FIXTURES / "gemini-cli-stream.jsonl")
        assert first.source.endswith("#1") and second.source.endswith("#2")
        assert first.messages[3]["content"][0] == {"type": "text", "text": "I will add a Login component."}
        assert blocks(first, "tool_result")[1]["is_error"] is True
        assert blocks(first, "tool_result")[1]["content"] == "EACCES: permission denied"
        assert second.messages[0]["content"] == [{"type": "text", "text": "Try again."}]


class TestSWEAgents:
    def test_swe_agent_steps_become_calls_named_by_command(self) -> None:
        """Each step is one call named by its command word, answered by its observation."""
        s = session_of("sweagent-demo.traj")
        assert s.format == "swe-agent"
        assert s.system == "SETTING: You are an autonomous programmer."
        assert [c["name"] for c in blocks(s, "tool_use")] == ["find_file", "open", "python", "submit"]
        assert blocks(s, "tool_result")[2]["content"] == "1 failed"
        assert s.messages[0]["content"][1]["text"] == "ISSUE: writes are not atomic."

    def test_command_word(self) -> None:
        """The command word skips assignments and wrappers and paths."""
        assert command_word("FOO=1 sudo /usr/bin/python -m x") == "python"
        assert command_word("\n\n  ls -la\n") == "ls"
        assert command_word("") == "bash"

    def test_mini_swe_agent_tool_calls_and_text_protocol(self) -> None:
        """Tool calls pair by id; a fenced bash block answered by the next user message is a call too."""
        s = session_of("mini-swe-agent-demo.traj.json")
        assert s.format == "mini-swe-agent"
        calls = blocks(s, "tool_use")
        assert [c["id"] for c in calls][:2] == ["call_grep", "call_sed"]
        assert calls[2]["input"] == {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}
        assert blocks(s, "tool_result")[2]["content"].endswith("COMPLETE\n</output>")
        assert "exit" not in {m["role"] for m in s.messages}


class TestOpenHands:
    def test_classic_events_group_calls_of_one_response(self) -> None:
        """Calls of one model response share a message; an observation without metadata pairs by cause."""
        s = session_of("openhands-trajectory.json")
        assert s.format == "openhands"
        assert s.system == "You are OpenHands agent."
        assert [b["type"] for b in s.messages[1]["content"]] == ["text", "tool_use", "tool_use"]
        assert blocks(s, "tool_result")[1]["content"].startswith("from flask import Flask")
        assert s.notes == {"unanswered_calls": 1}

    def test_sdk_output_is_one_session_per_instance(self) -> None:
        """Each record of an evaluation output is a session named by its instance id."""
        alpha, beta = load_sessions(FIXTURES / "openhands-sdk-output.jsonl")
        assert alpha.source.endswith("#task-alpha") and beta.source.endswith("#task-beta")
        assert alpha.messages[0]["content"] == [
            {"type": "text", "text": "Download the report and summarise it."}
        ]
        assert blocks(beta, "tool_result")[0]["is_error"] is True


class TestProviderFormats:
    def test_anthropic_request_object(self) -> None:
        """A request object is replayed as is, with its system prompt."""
        s = session_of("anthropic-request.json")
        assert (s.format, s.api_format, s.system) == ("anthropic", "anthropic", "You are terse.")
        assert s.messages == json.loads((FIXTURES / "anthropic-request.json").read_text())["messages"]

    def test_openai_chat_list(self) -> None:
        """An OpenAI Chat history keeps its own format."""
        s = session_of("openai-chat-history.json")
        assert (s.format, s.api_format) == ("openai-chat", "openai-chat")

    def test_every_registered_format_can_be_named(self) -> None:
        """--format accepts the log formats and every format registered in toolkeep.formats."""
        assert set(toolkeep.formats.FORMATS) <= set(format_names())


class TestErrors:
    def test_unknown_document_is_a_detection_error(self) -> None:
        """A JSON file in no known shape names the formats it was tried against."""
        with pytest.raises(DetectionError, match="claude-code"):
            load_sessions(FIXTURES / "not-a-log.json")

    def test_named_format_that_does_not_fit(self) -> None:
        """Naming a format the file is not in is a FormatError, not a silent empty replay."""
        with pytest.raises(FormatError, match="does not look like swe-agent"):
            load_sessions(FIXTURES / "claude-code-session.jsonl", "swe-agent")

    def test_broken_json_lines(self, tmp_path: Path) -> None:
        """A file that is neither JSON nor JSON Lines says which line broke."""
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"type": "user"}\n{oops\n')
        with pytest.raises(FormatError, match="line 2"):
            read_document(bad)

    def test_one_line_jsonl_is_still_jsonl(self, tmp_path: Path) -> None:
        """A .jsonl file with a single record reads as one record, not as a JSON object."""
        one = tmp_path / "one.jsonl"
        one.write_text(json.dumps({"type": "init", "session_id": "x"}) + "\n")
        doc = read_document(one)
        assert doc.jsonl and doc.records == [{"type": "init", "session_id": "x"}]

    def test_directories_are_walked_for_log_files(self, tmp_path: Path) -> None:
        """A directory yields its .json/.jsonl/.traj files, sorted, marked as not named."""
        (tmp_path / "sub").mkdir()
        for name in ("b.traj", "a.jsonl", "sub/c.json", "notes.txt"):
            (tmp_path / name).write_text("[]")
        found = [(p.relative_to(tmp_path).as_posix(), named) for p, named in iter_log_files([tmp_path])]
        assert found == [("a.jsonl", False), ("b.traj", False), ("sub/c.json", False)]
