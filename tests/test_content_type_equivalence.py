"""The shortcuts of content typing against the plain definitions they stand for.

Naming a result's content is on the agent's hot path, so :mod:`toolkeep.content_type` counts lines
with one regex scan over the joined lines, splits only the head it samples, and strips line
numbers in one pass. Each shortcut must give exactly what the plain, line-by-line definition
gives: these properties compare them on generated texts (line ends of every kind, numbered and
unnumbered lines around the 60% threshold, texts longer than the sample).
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from toolkeep import content_type as ct

# every line break str.splitlines knows
OTHER_BREAKS = st.sampled_from(["\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028"])
LINE_CHARS = st.sampled_from([*"ab:/._-# \t|`@0123456789→├└─│", "  ", "├── ", "at ", "- "])
# lines of the kinds the rules look for, and near misses of them
TEMPLATES = st.sampled_from([
    "key: value", "key:", "  - name: x", "# comment", "  # indented", "src/a.py:12:import os",
    "a.py:3-ctx", "drwxr-xr-x  2 root root 4096 a", "-rw-r--r-- 1 u g 12 f", "├── src", "│   └── a.py",
    "|-- lib", "`-- b", "./dir:", "..:", "name", "a/b/c", "./x/y/", "2024-01-01 12:00 INFO start",
    "12:30:01.123 tick", "[WARN] x", "  at a.b.C.run(C.java:1)", "error: bad", "warning[E1]: w",
    " --> src/m.rs:1:2", "f.py:1:2: E501 long", "", "   ",
])  # fmt: skip
NUMBERS = {"arrow": "{:6}→", "tab": "{:6}\t", "colon": "{}:"}


@st.composite
def lines(draw: st.DrawFn) -> str:
    if draw(st.booleans()):
        return draw(TEMPLATES) + "".join(draw(st.lists(LINE_CHARS, max_size=3)))
    return "".join(draw(st.lists(LINE_CHARS, max_size=12)))


@st.composite
def texts(draw: st.DrawFn) -> str:
    """Up to 260 lines, a share of them numbered in one of the ways (around 60% often); most
    texts end their lines with "\n" alone, others mix in every other line break."""
    body = draw(st.lists(lines(), min_size=0, max_size=260))
    number = NUMBERS[draw(st.sampled_from(sorted(NUMBERS)))]
    share = draw(st.sampled_from([0.0, 0.5, 0.58, 0.6, 0.62, 0.7, 1.0]))
    mixed = draw(st.integers(min_value=0, max_value=3)) == 0
    out = ""
    for i, line in enumerate(body):
        numbered = draw(st.floats(min_value=0, max_value=1)) < share
        end = draw(OTHER_BREAKS) if mixed and draw(st.booleans()) else "\n"
        out += (number.format(i + 1) if numbered else "") + line + end
    return out if draw(st.booleans()) else out.rstrip("\n")


def line_patterns() -> list[re.Pattern[str]]:
    """Every module-level pattern made by ``_line_pattern``."""
    found = [
        value
        for value in vars(ct).values()
        if isinstance(value, re.Pattern) and value.pattern.startswith("\\n(?:")
    ]
    assert len(found) >= 9  # grep, timestamp, ls -l, path, tree, ls -R, bare name, lint, yaml...
    return found


LINE_PATTERNS = line_patterns()


@given(texts())
def test_first_lines_are_those_of_splitlines(text: str) -> None:
    """The head split at "\n" only is ``splitlines``' head (but an empty piece after a final
    "\n", blank, which no rule reads)."""
    head = ct._first_lines(text)
    expected = text.splitlines()[: ct._SAMPLE_LINES]
    assert head == expected or (head[:-1] == expected and head[-1] == "")


@given(st.lists(lines(), max_size=150), st.integers(min_value=0, max_value=3))
def test_counting_in_one_scan_counts_each_line_once(items: list[str], skip: int) -> None:
    """``_Lines.count`` is the number of lines the pattern matches at their start, one by one."""
    sample = ct._Lines([line for line in items if line.strip()])
    for pattern in LINE_PATTERNS:
        alone = re.compile(pattern.pattern[len("\\n(?:") : -1])
        expected = sum(1 for line in sample.items[skip:] if alone.match(line))
        assert sample.count(pattern, skip=skip) == expected, pattern.pattern


def reference_strip(text: str, *, allow_colon: bool) -> str:
    """Strip the line numbers when 60% of the sampled lines that are not blank carry one."""
    sampled = [line for line in text.splitlines()[: ct._SAMPLE_LINES] if line.strip()]
    if not sampled:
        return text
    for kind, (_, first, later) in ct._LINE_NUMBER.items():
        if kind == "colon" and not allow_colon:
            continue
        if sum(1 for line in sampled if first.match(line)) >= 0.6 * len(sampled):
            return later.sub("\n", first.sub("", text, count=1))
    return text


@settings(max_examples=400)  # fast (~2 ms an example), and the 60% edge needs many draws
@given(texts(), st.booleans())
def test_numbers_are_stripped_as_the_line_by_line_rule_says(text: str, allow_colon: bool) -> None:
    body, first_lines = ct._strip_numbers(text, allow_colon=allow_colon)
    assert body == reference_strip(text, allow_colon=allow_colon)
    assert [line for line in first_lines() if line.strip()] == ct._sample_lines(body)
