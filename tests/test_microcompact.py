"""Progressive microcompaction (SPEC 6): by age, from the original, with the way back carried.

SPEC's ages, sizes and preserved tools are its policy's, ``spec``: every config here names it
(the default, ``economy``, decides by cost, and shortens execution output as it pays)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolkeep import Config, Microcompactor, Session, StepContext, get_format, run_pipeline
from toolkeep.messages import ToolResultPart
from toolkeep.shorten import archive_key
from toolkeep.stores import MemoryStore

from .strategies import assistant, oa_assistant, oa_tool, oa_user, tool_result, tool_use, user

SPEC = Config(policy="spec")


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    """A session of SPEC's policy."""
    with Session(SPEC, workspace=tmp_path / "ws") as s:
        yield s


COMPACT = re.compile(r"\n\[\.\.\. (\d+) chars omitted from old tool result \.\.\.\]((?: \S+)*)\n")
SUMMARY = re.compile(r"^\[Old tool result cleared -- (\d+) lines, (\S+) chars, ([^\]]+)\]((?: \S+)*)$")


def aged(text: str, age: int, name: str = "ls", **extra: Any) -> list[Any]:
    """A history where the one result (id t1) has ``age``: that many assistant messages after it."""
    h: list[Any] = [user("go"), assistant(tool_use("t1", name)), user(tool_result("t1", text, **extra))]
    for n in range(age):
        h += [assistant(f"step {n}"), user(f"next {n}")]
    return h


def sent(out: list[Any]) -> str:
    content = out[2]["content"][0]["content"]
    assert isinstance(content, str)
    return content


def go_source(lines: int) -> str:
    body = "\n".join(f"func f{i}() int {{ return {i} }}" for i in range(lines))
    return "package main\n\n" + body + "\n"


class TestAges:
    @pytest.mark.parametrize("age", [0, 1])
    def test_young_results_unchanged(self, age: int, session: Session) -> None:
        """Ages 0 and 1 leave even a large result as it is."""
        h = aged("x" * 19_000, age)
        out, report = session.prepare(h)
        assert out == h and report.truncated == report.summarized == 0

    @pytest.mark.parametrize("age", [2, 3])
    def test_ages_two_and_three_truncate(self, age: int, session: Session) -> None:
        """From age 2 the result is its first 2,000 and last 500 chars around the omission line."""
        text = "".join(chr(0x3B1 + i % 20) for i in range(3_001))
        out, report = session.prepare(aged(text, age))
        s = sent(out)
        (m,) = COMPACT.finditer(s)
        assert s[: m.start()] == text[:2_000] and s[m.end() :] == text[-500:]
        assert int(m.group(1)) == 501
        assert m.group(2) == f" <<ccr:{archive_key(text)}>>"
        assert session.recall(archive_key(text)) == text
        assert (report.truncated, report.summarized) == (1, 0)

    @pytest.mark.parametrize("age", [4, 5, 9])
    def test_age_four_and_more_summarize(self, age: int, session: Session) -> None:
        """From age 4 the result is one line naming lines, size and content type."""
        text = go_source(600)
        assert len(text) == 18_394  # 602 lines, under the per-result limit
        out, report = session.prepare(aged(text, age))
        (m,) = SUMMARY.finditer(sent(out))
        assert m.groups() == ("602", "18K", "Go source", f" <<ccr:{archive_key(text)}>>")
        assert (report.truncated, report.summarized) == (0, 1)

    def test_age_counts_assistant_messages_not_user_messages(self, session: Session) -> None:
        """Many user messages but one assistant message after the call: age 1, unchanged."""
        h = [*aged("y" * 5_000, 1), user("a"), user("b"), user("c")]
        out, _ = session.prepare(h)
        assert out == h

    def test_openai_chat_ages(self, session: Session) -> None:
        """OpenAI Chat results age the same way."""
        h = [oa_user(), oa_assistant(("c1", "ls")), oa_tool("c1", "z" * 4_000)]
        for n in range(4):
            h += [oa_assistant(content=f"step {n}"), oa_user()]
        out, _ = session.prepare(h)
        assert SUMMARY.match(out[2]["content"])


class TestMinimumSize:
    @pytest.mark.parametrize("age", [2, 4])
    def test_exactly_3000_chars_is_kept(self, age: int, session: Session) -> None:
        """A result of exactly 3,000 chars is never compacted."""
        h = aged("m" * 3_000, age)
        assert session.prepare(h)[0] == h

    def test_3001_chars_is_compacted(self, session: Session) -> None:
        """One char past the minimum and it is summarized at age 4."""
        out, _ = session.prepare(aged("m" * 3_001, 4))
        assert sent(out).startswith("[Old tool result cleared -- 1 lines, 3K chars, text]")

    def test_configured_minimum_and_ages(self, tmp_path: Path) -> None:
        """The ages and the minimum come from the config."""
        config = SPEC.replace(truncate_turns=1, summarize_turns=2, compact_min_chars=10)
        with Session(config, workspace=tmp_path) as s:
            assert s.prepare(aged("k" * 10, 5))[0] == aged("k" * 10, 5)
            assert "chars omitted from old tool result" in sent(s.prepare(aged("k" * 3_000, 1))[0])
            # a shortened form is never longer than what it replaces: 11 chars stay as they are
            assert sent(s.prepare(aged("k" * 11, 2))[0]) == "k" * 11
            assert sent(s.prepare(aged("k" * 999, 2))[0]).startswith(
                "[Old tool result cleared -- 1 lines, 999 chars, text]"
            )


class TestPreserved:
    @pytest.mark.parametrize(
        "name", ["write", "Edit", "patch", "BASH", "shell", "exec", "run", "str_replace_based_edit_tool"]
    )
    def test_write_and_exec_tools_preserved(self, name: str, session: Session) -> None:
        """Results of write and execution tools stay whole at any age (names case-insensitive)."""
        h = aged("p" * 10_000, 6, name=name)
        out, report = session.prepare(h)
        assert out == h and report.preserved == 1

    def test_error_results_preserved(self, session: Session) -> None:
        """An error result stays whole at any age."""
        h = aged("Traceback...\n" * 500, 6, is_error=True)
        out, report = session.prepare(h)
        assert out == h and report.preserved == 1

    def test_preserve_set_is_configurable(self, tmp_path: Path) -> None:
        """A configured preserve set replaces the default one; errors can be let go."""
        config = SPEC.replace(preserve_tools=frozenset({"Fetch"}), preserve_errors=False)
        with Session(config, workspace=tmp_path) as s:
            assert s.prepare(aged("f" * 5_000, 4, name="fetch"))[0] == aged("f" * 5_000, 4, name="fetch")
            assert SUMMARY.match(sent(s.prepare(aged("b" * 5_000, 4, name="bash"))[0]))
            assert SUMMARY.match(sent(s.prepare(aged("e" * 5_000, 4, is_error=True))[0]))


class TestWayBackAcrossLevels:
    def conversation(self, session: Session, first: str, name: str = "ls") -> list[str]:
        """Grow a conversation one turn at a time, sending back the prepared history each time;
        the sent text of the first result at ages 0 to 5."""
        history: list[Any] = [user("go"), assistant(tool_use("t1", name)), user(tool_result("t1", first))]
        seen = []
        for age in range(6):
            history, _ = session.prepare(history)
            seen.append(sent(history))
            history = [*history, assistant(f"step {age}"), user(f"next {age}")]
        return seen

    def test_persisted_preview_keeps_path_and_key_when_truncated_and_summarized(
        self, session: Session
    ) -> None:
        """A persisted preview, later truncated then summarized, keeps its path and marker."""
        text = "line of output\n" * 2_000
        key = archive_key(text)
        forms = self.conversation(session, text)
        (path,) = re.findall(r"full output saved to ([^\]]+)\]", forms[0])
        assert Path(path).read_text(encoding="utf-8") == text
        assert forms[0] == forms[1] and "chars omitted -- full output saved to" in forms[0]
        for form in forms:
            assert form.count(f"<<ccr:{key}>>") == 1
            assert form.count(path) == 1
        assert COMPACT.search(forms[2]) and forms[2] == forms[3]
        assert f"[full output saved to {path}]" in forms[2]
        assert SUMMARY.match(forms[4]) and forms[4] == forms[5]
        assert (
            forms[4]
            == f"[Old tool result cleared -- 2000 lines, 30K chars, text] [full output saved to {path}] <<ccr:{key}>>"
        )
        assert session.recall(key) == text

    def test_truncated_result_still_reaches_summary(self, session: Session) -> None:
        """The size test uses the original: a result cut at age 2 (to 2,5xx chars) is summarized at 4."""
        forms = self.conversation(session, "s" * 3_500)
        assert len(forms[2]) < 3_000
        assert SUMMARY.match(forms[4])

    def test_marker_already_in_original_is_carried_once(self, session: Session) -> None:
        """A marker in the original is carried at each level, never duplicated."""
        old = "<<ccr:00112233445566ff>>"
        text = old + "\n" + "a" * 25_000
        for form in self.conversation(session, text):
            assert form.count(old) == 1
            assert form.count(f"<<ccr:{archive_key(text)}>>") == 1

    def test_step_alone_works_from_original(self) -> None:
        """Given a part already shortened, the compactor measures and cuts its original."""
        original = "o" * 3_500
        part = ToolResultPart("t1", "o" * 2_600, original=original, key=archive_key(original), name="ls")
        ctx = StepContext(get_format("anthropic"))
        summary = Microcompactor().compact(part, 4, ctx)
        assert summary is not None
        assert (
            summary.text
            == f"[Old tool result cleared -- 1 lines, 3.5K chars, text] <<ccr:{archive_key(original)}>>"
        )
        assert summary.full_text == original


class TestAgeAfterRepair:
    def history(self) -> list[Any]:
        """A result at age 1 in the repaired history, 2 if an assistant message that pairing drops
        (its only call has an empty id) were counted."""
        return [
            user("go"),
            assistant(tool_use("t1", "read")),
            user(tool_result("t1", "0" * 3_001)),
            assistant(tool_use("")),
            user("again"),
            assistant("ok"),
        ]

    def test_pipeline_counts_the_repaired_history(self, session: Session) -> None:
        """A dropped empty assistant message does not age results: the result stays whole."""
        out, report = run_pipeline(
            self.history(), config=session.config, workspace=session.workspace, store=session.store
        )
        assert sent(out) == "0" * 3_001 and report.truncated == 0

    def test_session_agrees_with_pipeline(self, session: Session) -> None:
        """``Session.prepare`` (the incremental engine) gives what ``run_pipeline`` gives."""
        out, report = session.prepare(self.history())
        assert sent(out) == "0" * 3_001 and report.truncated == 0


class TestContentTypeMemory:
    def test_names_a_repeated_original_once_and_keeps_at_most_its_bound(self) -> None:
        """A repeated original (same archive key) is named once; the labels kept stay within
        ``types_kept``, the least recently used going first, and the summaries do not change."""
        named: list[str] = []

        def content_type(text: str) -> str:
            named.append(text)
            return "text"

        compactor = Microcompactor(content_type=content_type)
        compactor.types_kept = 2
        a, b, c = ("a" * 4_000, "b" * 4_000, "c" * 4_000)
        ctx = StepContext(get_format("anthropic"), store=MemoryStore())
        forms = [
            compactor.compact(ToolResultPart("t", text, name="ls"), 4, ctx) for text in (a, b, a, c, b, a)
        ]
        # a, b named; a again from memory (now the most recent); c evicts b; b named again
        # and evicts a; a named again
        assert named == [a, b, c, b, a]
        assert len(compactor._types) == 2
        assert [f.text if f else None for f in forms] == [
            f"[Old tool result cleared -- 1 lines, 4K chars, text] <<ccr:{archive_key(t)}>>"
            for t in (a, b, a, c, b, a)
        ]
