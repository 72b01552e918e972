"""Result budget (SPEC 4): per result over 20,000 chars, per turn over 200,000, and the preview."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

import toolkeep
from toolkeep import Config, ResultBudget, Session, run_pipeline
from toolkeep.shorten import archive_key

from .strategies import (
    anthropic_turns,
    assistant,
    oa_assistant,
    oa_tool,
    oa_user,
    tool_result,
    tool_use,
    user,
)

OMISSION = re.compile(
    r"\n\n\.\.\. \[([\d,]+) chars omitted -- full output saved to ([^\]]+)\] <<ccr:([0-9a-f]{16})>>\n\n"
)


def one_result(text: str, name: str = "ls", **extra: Any) -> list[Any]:
    """A valid one-block Anthropic history whose single result is ``text``."""
    return [user("go"), assistant(tool_use("t1", name)), user(tool_result("t1", text, **extra))]


def sent_text(out: list[Any], index: int = 2, block: int = 0) -> str:
    content = out[index]["content"][block]["content"]
    assert isinstance(content, str)
    return content


def split(preview: str) -> tuple[str, int, str, str, str]:
    """``(head, N, path, key, tail)`` of a budget preview."""
    (match,) = list(OMISSION.finditer(preview))
    n = int(match.group(1).replace(",", ""))
    return preview[: match.start()], n, match.group(2), match.group(3), preview[match.end() :]


class TestPerResultThreshold:
    def test_exactly_at_limit_is_untouched(self, session: Session) -> None:
        """A result of exactly 20,000 chars is sent as it is."""
        h = one_result("x" * 20_000)
        out, report = session.prepare(h)
        assert out == h
        assert report.persisted == 0

    def test_one_past_limit_is_persisted_and_previewed(self, session: Session) -> None:
        """A result of 20,001 chars is saved whole and replaced by head + omission line + tail."""
        text = "y" * 20_001
        out, report = session.prepare(one_result(text))
        head, n, path, key, tail = split(sent_text(out))
        assert (head, tail) == ("y" * 4_000, "y" * 1_000)
        assert n == 15_001
        assert Path(path).read_text(encoding="utf-8") == text
        assert Path(path).name == f"budget_t1_{archive_key(text)}.txt"
        assert key == archive_key(text) and session.recall(key) == text
        assert report.persisted == 1 and report.to_dict()["results"]["persisted"] == 1

    def test_omitted_count_has_thousands_separators(self, session: Session) -> None:
        """N is exact and written with thousands separators."""
        out, _ = session.prepare(one_result("z" * 79_432, name="read"))
        assert "... [74,432 chars omitted -- full output saved to " in sent_text(out)

    def test_custom_limit_from_config(self, tmp_path: Path) -> None:
        """The limit is configurable: at 300 a 301-char result is previewed with smaller parts."""
        config = Config(max_result_chars=300, preview_head_chars=40, preview_tail_chars=10)
        with Session(config, workspace=tmp_path) as s:
            assert s.prepare(one_result("a" * 300))[0] == one_result("a" * 300)
            head, n, _, _, tail = split(sent_text(s.prepare(one_result("a" * 301))[0]))
        assert (len(head), n, len(tail)) == (40, 251, 10)

    def test_error_results_are_budgeted_and_keep_error_text(self, session: Session) -> None:
        """An error result over the limit is previewed too; head and tail keep the error text."""
        text = "Error: boom\n" + "trace line\n" * 2_000 + "FATAL: gave up"
        out, report = session.prepare(one_result(text, is_error=True))
        block = out[2]["content"][0]
        assert block["is_error"] is True
        head, _, _, _, tail = split(block["content"])
        assert head.startswith("Error: boom\n") and tail.endswith("FATAL: gave up")
        assert report.persisted == 1

    def test_openai_result_is_budgeted_the_same_way(self, session: Session) -> None:
        """OpenAI Chat tool messages get the same preview."""
        text = "q" * 30_000
        out, _ = session.prepare([oa_user(), oa_assistant(("c1", "ls")), oa_tool("c1", text)])
        head, n, path, _, tail = split(out[2]["content"])
        assert (len(head), n, len(tail)) == (4_000, 25_000, 1_000)
        assert Path(path).name == f"budget_c1_{archive_key(text)}.txt"


class TestPreviewLineBreaks:
    def test_no_line_breaks_gives_plain_head_and_tail(self, session: Session) -> None:
        """Without line breaks the head is exactly 4,000 chars and the tail 1,000."""
        text = "".join(chr(0x61 + i % 26) for i in range(25_000))
        head, n, _, _, tail = split(sent_text(session.prepare(one_result(text))[0]))
        assert head == text[:4_000] and tail == text[-1_000:] and n == 20_000

    @pytest.mark.parametrize(("at", "cut"), [(1_999, False), (2_000, True), (3_999, True)])
    def test_head_cut_back_to_last_line_break_in_second_half(
        self, at: int, cut: bool, session: Session
    ) -> None:
        """The head is cut back to its last line break only if that lies in its second half."""
        text = "h" * at + "\n" + "h" * (25_000 - at - 1)
        head, n, _, _, tail = split(sent_text(session.prepare(one_result(text))[0]))
        assert head == (text[:at] if cut else text[:4_000])
        assert n == len(text) - len(head) - len(tail)

    @pytest.mark.parametrize(("at", "cut"), [(0, True), (499, True), (500, False), (999, False)])
    def test_tail_cut_forward_past_first_line_break_in_first_half(
        self, at: int, cut: bool, session: Session
    ) -> None:
        """The tail is cut forward past its first line break only if that lies in its first half."""
        text = "t" * (25_000 - 1_000 + at) + "\n" + "t" * (1_000 - at - 1)
        head, n, _, _, tail = split(sent_text(session.prepare(one_result(text))[0]))
        assert tail == (text[-1_000 + at + 1 :] if cut else text[-1_000:])
        assert n == len(text) - len(head) - len(tail)

    def test_non_ascii_and_astral_chars_are_never_split(self, session: Session) -> None:
        """Counts are in code points; an astral char at the cut stays whole and encodes cleanly."""
        text = "é中🙂𝄞" * 6_000
        preview = sent_text(session.prepare(one_result(text))[0])
        head, n, path, _, tail = split(preview)
        assert head == text[:4_000] and tail == text[-1_000:] and n == 19_000
        preview.encode("utf-8")  # raises on a lone surrogate
        assert Path(path).read_bytes() == text.encode("utf-8")


class TestPerTurn:
    def turn(self, sizes: list[int]) -> list[Any]:
        """One block whose results have these sizes, each result a distinct char."""
        calls = [tool_use(f"c{n}") for n in range(len(sizes))]
        results = [tool_result(f"c{n}", chr(0x41 + n) * size) for n, size in enumerate(sizes)]
        return [user("go"), assistant(*calls), user(*results)]

    def previewed(self, out: list[Any]) -> list[int]:
        return [n for n, b in enumerate(out[2]["content"]) if OMISSION.search(b["content"])]

    def test_turn_exactly_at_budget_is_untouched(self, session: Session) -> None:
        """Ten results of 20,000 chars add up to exactly 200,000: nothing is cut."""
        h = self.turn([20_000] * 10)
        out, report = session.prepare(h)
        assert out == h and report.persisted == 0

    def test_one_past_budget_cuts_the_largest_earliest_first(self, session: Session) -> None:
        """At 200,001 chars the largest result is cut; among equals the earliest."""
        out, report = session.prepare(self.turn([1] + [20_000] * 10))
        assert self.previewed(out) == [1]
        assert report.persisted == 1

    def test_cuts_until_the_turn_fits(self, session: Session) -> None:
        """Eleven results of 20,000 chars need two cuts: the first two."""
        out, _ = session.prepare(self.turn([20_000] * 11))
        assert self.previewed(out) == [0, 1]
        assert sum(len(b["content"]) for b in out[2]["content"]) <= 200_000

    def test_largest_first_regardless_of_position(self, session: Session) -> None:
        """The largest result is cut first even when it comes last."""
        out, _ = session.prepare(self.turn([18_000] * 10 + [20_000] + [1_000]))
        assert self.previewed(out) == [10]

    def test_turns_are_budgeted_separately(self, session: Session) -> None:
        """Two turns of 150,000 chars each are each within budget."""
        h = [user("go")]
        for t in range(2):
            h += [
                assistant(*[tool_use(f"c{t}{n}") for n in range(10)]),
                user(*[tool_result(f"c{t}{n}", "r" * 15_000) for n in range(10)]),
            ]
        out, report = run_pipeline(h, steps=[ResultBudget()])
        assert out == h and report.persisted == 0

    def test_small_numbers_ties_and_order(self) -> None:
        """With a budget of 750 and three results of 300, one cut (the first of equals) fits it."""
        budget = ResultBudget(max_result_chars=1_000, turn_budget_chars=750, head=20, tail=10)
        out, report = run_pipeline(self.turn([300, 300, 300]), steps=[budget])
        texts = [b["content"] for b in out[2]["content"]]
        # no workspace here: the preview says the output was not saved
        assert texts[0].startswith("A" * 20 + "\n\n... [270 chars omitted -- full output could not be saved")
        assert texts[1:] == ["B" * 300, "C" * 300]
        assert sum(map(len, texts)) <= 750
        assert report.persisted == 1


class TestWriteFailure:
    def break_results_dir(self, s: Session) -> None:
        """Put a plain file where the persisted outputs go, so every write fails (even as root)."""
        shutil.rmtree(s.workspace.results_dir)
        s.workspace.results_dir.write_text("not a directory")

    def test_preview_says_it_could_not_be_saved_and_pipeline_goes_on(self, tmp_path: Path) -> None:
        """A failed write yields a preview naming the failure, no path, and the run completes."""
        text = "w" * 25_000
        with Session(Config(), workspace=tmp_path / "ws") as s:
            self.break_results_dir(s)
            out, report = s.prepare([*one_result(text), assistant("next"), user("more")])
            preview = sent_text(out)
            assert "... [20,000 chars omitted -- full output could not be saved: Not a directory]" in preview
            assert "saved to" not in preview
            # the archive still has it: the marker leads back
            (key,) = re.findall(r"<<ccr:([0-9a-f]{16})>>", preview)
            assert s.recall(key) == text
        assert report.save_errors and report.save_errors[0].startswith("persist t1")
        assert toolkeep.validate(out) == []

    def test_without_workspace_preview_says_so(self) -> None:
        """Run without a workspace, the preview says there was none instead of naming a file."""
        out, _ = run_pipeline(one_result("n" * 25_000))
        assert "full output could not be saved: no session workspace]" in sent_text(out)

    def test_read_only_directory(self, tmp_path: Path) -> None:
        """A results directory the process cannot write to gives the failure preview."""
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only directories")
        with Session(Config(), workspace=tmp_path / "ws") as s:
            s.workspace.results_dir.chmod(0o500)
            try:
                out, _ = s.prepare(one_result("r" * 25_000))
            finally:
                s.workspace.results_dir.chmod(0o700)
        assert "full output could not be saved: Permission denied]" in sent_text(out)


def test_preview_is_shorter_than_limit_after_budget(session: Session) -> None:
    """Every result sent after the budget is at most the per-result limit (or its preview)."""
    h = anthropic_turns(("a", "ls", "1" * 21_000), ("b", "read", "2" * 79_000), ("c", "tree", "3" * 5))
    out, _ = session.prepare(h)
    for m in out[2::2]:
        assert len(m["content"][0]["content"]) <= 20_000
