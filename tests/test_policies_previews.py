"""Content-aware forms of the economy policy: what each keeps, and that the way back stays."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from toolkeep.formats import resolve_format
from toolkeep.shorten import archive_key
from toolkeep.shortforms.previews import (
    excerpt_form,
    leading_lines,
    names_index,
    names_of,
    outline,
    outline_lines,
    outline_summary,
    tail_weighted,
)
from toolkeep.steps import StepContext
from toolkeep.steps.originals import restore_originals
from toolkeep.stores import MemoryStore

PYTEST = "\n".join(
    ["============================= test session starts ==============================", "collected 120 items", ""]
    + [f"tests/test_mod.py::test_case_{i} PASSED" for i in range(100)]
    + ["tests/test_mod.py::test_edge FAILED", "E   AssertionError: assert 3 == 4"]
    + [f"tests/test_other.py::test_{i} PASSED" for i in range(18)]
    + ["=========================== short test summary info ============================",
       "FAILED tests/test_mod.py::test_edge - AssertionError: assert 3 == 4",
       "========================= 1 failed, 119 passed in 2.31s ========================="]
)  # fmt: skip

SOURCE = "\n".join(
    f"{n:6d}\t{line}"
    for n, line in enumerate(
        ["import os", "", "class Loader:", '    """Loads things."""', "", "    def load(self, path):",
         "        return open(path).read()", "", "    async def fetch(self, url):", "        pass", "",
         "def main():", "    Loader().load('x')", "", "CONSTANT = 3"] * 8,
        start=1,
    )
)  # fmt: skip


class TestTailWeighted:
    def test_keeps_the_verdict_and_the_failure(self) -> None:
        """Test-run output keeps its last lines and the failure lines, not the passing middle."""
        lines = PYTEST.split("\n")
        kept = {lines[n] for n in tail_weighted(PYTEST, 600)}
        assert "========================= 1 failed, 119 passed in 2.31s =========================" in kept
        assert "tests/test_mod.py::test_edge FAILED" in kept
        assert "E   AssertionError: assert 3 == 4" in kept
        assert "tests/test_mod.py::test_case_3 PASSED" not in kept

    def test_fits_the_budget(self) -> None:
        """The kept lines never exceed the budget."""
        lines = PYTEST.split("\n")
        assert sum(len(lines[n]) + 1 for n in tail_weighted(PYTEST, 500)) <= 500


class TestLeadingLines:
    def test_first_matches_whole(self) -> None:
        """Search output keeps its first lines, whole, in order, as many as fit."""
        grep = "\n".join(f"src/m{i}.py:{i}:def handler_{i}():" for i in range(200))
        kept = leading_lines(grep, 300)
        assert kept == list(range(len(kept)))
        assert 5 < len(kept) < 20


class TestOutline:
    def test_definitions_with_their_line_numbers(self) -> None:
        """A numbered listing's outline is its class and def lines, with the file's own numbers and indent."""
        lines = outline_lines(SOURCE, 10_000)
        assert lines[:4] == [
            "3\tclass Loader:",
            "6\t    def load(self, path):",
            "9\t    async def fetch(self, url):",
            "12\tdef main():",
        ]

    def test_unnumbered_source_gets_numbers(self) -> None:
        """Plain source gets ``N: `` prefixes counted from 1."""
        text = "package main\n\nfunc main() {\n}\n\ntype Server struct {\n}\n"
        assert outline_lines(text, 1_000) == [
            "1: package main",
            "3: func main() {",
            "6: type Server struct {",
        ]

    def test_other_languages(self) -> None:
        """Rust, Java and TypeScript definitions are found too."""
        text = (
            "pub fn parse(x: &str) -> u32 {\n}\nimpl Parser {\n}\n"
            "public static void main(String[] args) {\n}\n"
            "export interface Props {\n}\nexport const App = () => 1\n"
        )
        assert len(outline(text)) == 5


class TestForms:
    def test_excerpt_starts_like_the_original_and_ends_with_the_way_back(self) -> None:
        """An excerpt keeps the first line, marks gaps, and ends with SPEC's marker and ``<<ccr:KEY>>``."""
        key = archive_key(PYTEST)
        text = excerpt_form(PYTEST, tail_weighted(PYTEST, 400), keys=[key])
        assert text.startswith(PYTEST[:32])
        assert "lines omitted ...]" in text
        last = text.rsplit("\n", 1)[1]
        assert last.startswith("[... ") and "chars omitted from old tool result ...]" in last
        assert last.endswith(f"<<ccr:{key}>>")

    def test_summary_line_comes_first(self) -> None:
        """The summary form is SPEC's one-line summary, then the extra lines."""
        text = outline_summary(SOURCE, "Python source", outline_lines(SOURCE, 200), keys=["0123456789abcdef"])
        first, *rest = text.split("\n")
        assert first.startswith("[Old tool result cleared -- 120 lines, ")
        assert first.endswith("Python source] <<ccr:0123456789abcdef>>")
        assert rest and rest[0] == "3\tclass Loader:"

    def test_restore_recognizes_every_form(self) -> None:
        """``restore_originals`` brings back the original from an excerpt or a summary, so prepare stays idempotent."""
        store = MemoryStore()
        key = archive_key(PYTEST)
        store.put(key, PYTEST)
        forms = [
            excerpt_form(PYTEST, tail_weighted(PYTEST, 400), keys=[key]),
            outline_summary(PYTEST, "test report", [], keys=[key]),
        ]
        for form in forms:
            history = [
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t", "name": "bash", "input": {}}],
                },
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": form}]},
            ]
            fmt = resolve_format(history, "anthropic")
            ctx = StepContext(fmt, store=store)
            restored = restore_originals(fmt.load(history), ctx)
            assert restored[2].results[0].text == PYTEST


NAME_WORDS = (
    "src/app/main.py:120:", "load_config", "parseArgs", "48213", "test.mod.Case.test_x", "test_x",
    "README.md", "plain", "v2.1.0", "lib/x/y.py", "line 404", "alpha_beta", "ab",
)  # fmt: skip


class TestNamesIndex:
    def test_names_not_in_the_kept_text(self) -> None:
        """The index lists identifiers, paths and numbers the kept text does not show, each once."""
        text = "ok src/app/main.py:12 calls load_config and parseArgs; pid 48213; load_config again"
        assert names_index(text, 1_000, skip="load_config") == ["src/app/main.py", "parseArgs", "48213"]

    def test_line_number_prefixes_are_not_names(self) -> None:
        """A numbered listing's own line numbers are no names: each goes with the first new name
        of its line, as ``N:name``, and a line with no new name leaves its number out."""
        text = "   118\tdef load_config(path):\n   119\t    return load_config(path)\n   120\t    x = 1"
        assert names_index(text, 10_000) == ["118:load_config"]
        assert "120" not in " ".join(names_index(SOURCE, 10_000))

    def test_names_an_earlier_entry_or_known_show_are_left_out(self) -> None:
        """A path's file name after the path, and names in ``known``, are not listed again."""
        text = "see src/app/main.py then main.py and parse_args, load_config"
        assert names_index(text, 1_000, known={"parse_args"}) == ["src/app/main.py", "load_config"]

    def test_names_of_is_what_the_index_may_list(self) -> None:
        """``names_of`` holds every name the index lists (less their line numbers)."""
        every = names_of(SOURCE + " src/app/main.py:120: parseArgs 48213")
        assert {"src/app/main.py", "parseArgs", "48213"} <= every
        assert all(n.partition(":")[2] in every for n in names_index(SOURCE, 10_000))

    def test_budget(self) -> None:
        """The index stops when the budget is spent."""
        text = " ".join(f"name_{i}" for i in range(1_000))
        assert sum(len(n) + 1 for n in names_index(text, 200)) <= 200

    @given(st.lists(st.sampled_from(NAME_WORDS), max_size=60), st.integers(0, 400))
    def test_index_invariants(self, words: list[str], budget: int) -> None:
        """Within budget, each name once, each from the text and not in ``skip``, in order of
        appearance; everything when everything fits."""
        text = " ".join(words)
        skip = words[0] if words else ""
        names = names_index(text, budget, skip=skip)
        assert sum(len(n) + 1 for n in names) <= budget
        assert len(set(names)) == len(names)
        # an entry is a name of the text, or N:name where N is its line's number
        bare = [
            n.partition(":")[2] if n[:1].isdigit() and ":" in n and n.partition(":")[2] else n for n in names
        ]
        assert all(n in text and n not in skip for n in bare)
        every = names_index(text, 10**6, skip=skip)
        rest = iter(every)
        assert all(n in rest for n in names)  # a subsequence: the full index's order
        if sum(len(n) + 1 for n in every) <= budget:
            assert names == every
