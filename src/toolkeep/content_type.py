"""Name the kind of content of a tool result, for the one-line summary of an old result.

The first rule that matches wins: the seed's rules first, then toolkeep's own, each asking for
evidence over several lines so that one stray word does not decide.

The seed's rules are kept in their order and intent, but read as *code* evidence: "contains
``package ``" means a Go package clause at the start of a line, "contains ``def ``" a Python
``def name(`` line, "contains ``function ``" a JavaScript function. Real agent output showed why:
Markdown plans and pip logs ("Resolved 126 packages", "the package `moto`") and Java files
(``package com.x;``) all contain ``package ``, and were all called "Go source".
:func:`detect_content_type_seed` keeps the literal rules for anyone who wants ChatCLI's labels.

Before the rules run, the wrappers agent harnesses put around output are looked through: a leading
``Exit code N`` line, SWE-agent's ``[File: PATH (N lines total)]`` header and ``(N more lines
above)`` lines, OpenHands' "result of running `cat -n` on PATH:" line, ``<returncode>`` /
``<output>`` tags, and the line numbers of ``cat -n``, ``nl`` and Claude Code's ``Read``
(``   12→``). A file name in such a header decides by its extension.

    >>> detect_content_type('{"a": 1}')
    'JSON'
    >>> detect_content_type("Traceback (most recent call last):\\n  File \\"x.py\\", line 1")
    'Python traceback'
    >>> detect_content_type("     1→package main\\n     2→\\n     3→func main() {}")
    'Go source'
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import partial

__all__ = ["detect_content_type", "detect_content_type_seed"]

_SAMPLE_LINES = 120
_SAMPLE_HEAD, _SAMPLE_TAIL = 8_000, 2_000
_SOURCE_CHARS = 3_000
_REPORT_CHARS = 2_000


# a line-number prefix as cat -n / nl (tab), Claude Code Read (arrow) or SWE-agent (colon) write it
_NUM = r"(?:[ \t]*\d+(?:→|\t|:))?"
_GO_CLAUSE = re.compile(rf"^{_NUM}package [A-Za-z_]\w*[ \t]*(?://.*)?$", re.MULTILINE)
_PY_DEF = re.compile(rf"^{_NUM}[ \t]*(?:async[ \t]+)?def [A-Za-z_]\w*[ \t]*\(", re.MULTILINE)
_JS_FUNCTION = re.compile(
    rf"^{_NUM}[ \t]*(?:export[ \t]+)?(?:default[ \t]+)?(?:async[ \t]+)?function\b"
    r"|\bfunction\b[ \t]*\*?[ \t]*[\w$]*[ \t]*\([^()\n]*\)[ \t]*\{",
    re.MULTILINE,
)


# the seed's code rules in its order: label, the seed's literal, and the evidence toolkeep asks
# for instead (a literal every match of the pattern holds, and the line-local pattern)
_CODE_RULES: tuple[tuple[str, str, str, re.Pattern[str]], ...] = (
    ("Go source", "package ", "package ", _GO_CLAUSE),
    ("Python source", "def ", "def ", _PY_DEF),
    ("JavaScript source", "function ", "function", _JS_FUNCTION),
)


def _seed_order(text: str, is_code: Callable[[str, str, re.Pattern[str]], bool]) -> str:
    """The seed's rules in the seed's order: JSON, the three code rules (``is_code`` decides
    each from its seed literal, hint and pattern), diff, git log, else text."""
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and _parses_as_json(stripped):
        return "JSON"
    for label, literal, hint, pattern in _CODE_RULES:
        if is_code(literal, hint, pattern):
            return label
    if stripped.startswith(("diff ", "--- ")):
        return "diff"
    if stripped.startswith("commit "):
        return "git log"
    return "text"


def detect_content_type_seed(text: str) -> str:
    """The seed's rules only, literally: JSON, Go, Python, JavaScript, diff, git log, else text."""
    return _seed_order(text, lambda literal, _hint, _pattern: literal in text)


def _seed_rules(text: str, body: str) -> str:
    """The seed's rules in the seed's order, each asking for the code it names (see above).

    JSON is parsed from the whole ``text``; the code rules read ``body``, the unwrapped head and
    tail, where a package clause or a ``def`` line shows if it is code at all (bounded cost).
    """
    return _seed_order(text, lambda _literal, hint, pattern: _on_lines_with(hint, pattern, body))


def _on_lines_with(literals: str | tuple[str, ...], pattern: re.Pattern[str], text: str) -> bool:
    """``pattern.search(text)``, for a pattern each match of which lies within one line and
    contains one of ``literals``: the regex runs only on the lines where one of them is.

    The patterns given to it are written so (no ``\\s`` or negated class that could cross a
    line end). A C-speed ``find`` costs far less than trying a pattern at every position of the
    text: that scan was most of the time of naming a result's content."""
    for literal in (literals,) if isinstance(literals, str) else literals:
        i = text.find(literal)
        while i >= 0:
            start = text.rfind("\n", 0, i) + 1
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            if pattern.search(text, start, end):
                return True
            i = text.find(literal, end)
    return False


def detect_content_type(text: str) -> str:
    """The seed's rules, then evidence-based rules for logs, traces, reports, listings, markup."""
    # the evidence rules read the head and tail only: enough to tell, and bounded in cost
    if len(text) > _SAMPLE_HEAD + _SAMPLE_TAIL:
        sample = text[:_SAMPLE_HEAD] + "\n" + text[-_SAMPLE_TAIL:]
    else:
        sample = text
    body, path, first_lines = _unwrap(sample)
    seed = _seed_rules(text if body is sample else body, body)
    if seed != "text":
        return seed
    if path is not None:
        by_name = _by_extension(path)
        if by_name is not None:
            return by_name
    lines = _Lines(list(filter(str.strip, first_lines())))
    if not lines.items:
        return "text"
    for name, rule in _RULES:
        if rule(body, lines):
            return name
    return "text"


_EXIT_CODE = re.compile(r"\AExit code -?\d+\n")
_SWE_HEADER = re.compile(r"\A\[File: (?P<path>[^\n]+?) \(\d+ lines total\)\]\n")
_CAT_N_HEADER = re.compile(r"\AHere's the result of running `cat -n` on (?P<path>[^\n]+?):\n")
_MORE_LINES = re.compile(r"^\(\d+ more lines (?:above|below)\)\n?", re.MULTILINE)
_TAG_WRAPPER = re.compile(r"\A(?:<(\w+)>[^<\n]*</\1>\s*)*<output>\n")
# (the character every such prefix holds, prefix at the start, prefix after a newline): a pattern
# that starts with a literal "\n" is found by a fast scan for that character, where a "^" pattern is
# tried at every position
_LINE_NUMBER = {
    kind: (mark, re.compile(rf"\A{prefix}"), re.compile(rf"\n{prefix}"))
    for kind, mark, prefix in (
        # (possessive: the digits and the blanks before them are never given back, as no
        # match could take fewer; it saves the regex engine the tries)
        ("arrow", "→", r"[ \t]*+\d++→"),
        ("tab", "\t", r"[ \t]*+\d++\t"),
        ("colon", ":", r"\d++:"),
    )
}
# the line breaks of str.splitlines other than "\n"
_OTHER_BREAKS = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def _split_head(text: str) -> tuple[list[str], int] | None:
    """The first :data:`_SAMPLE_LINES` lines of ``text``, blank ones too, split at "\\n" only as
    far as needed, with the length of ``text`` they span (to the "\\n" after the last of them);
    ``None`` when another line break of ``str.splitlines`` occurs in them.

    Without one, these are the lines of ``text.splitlines()[:_SAMPLE_LINES]``, but a last piece
    left empty by a final "\\n", which is blank (so dropped by :func:`_sample_lines` either way).
    Splitting the whole sample only to keep its head cost more than the rules that read it."""
    pieces = text.split("\n", _SAMPLE_LINES)
    end = len(text)
    if len(pieces) > _SAMPLE_LINES:
        end -= len(pieces.pop()) + 1  # the rest of the text, and the "\n" before it
    for other in _OTHER_BREAKS:
        if text.find(other, 0, end) >= 0:
            return None
    return pieces, end


def _first_lines(text: str) -> list[str]:
    """The first :data:`_SAMPLE_LINES` lines of ``text``, blank ones too (see :func:`_split_head`)."""
    split = _split_head(text)
    return text.splitlines()[:_SAMPLE_LINES] if split is None else split[0]


def _sample_lines(text: str) -> list[str]:
    """The first :data:`_SAMPLE_LINES` lines of ``text`` that are not blank."""
    return list(filter(str.strip, _first_lines(text)))


class _Lines:
    """A sample's :func:`_sample_lines` (``items``), and the same lines joined, each after a "\\n"
    (``joined``): a :func:`_line_pattern` counts in one regex scan the lines it matches, where a
    Python loop calling the pattern line by line was most of the time of the evidence rules."""

    __slots__ = ("items", "joined")

    def __init__(self, items: list[str]) -> None:
        self.items = items
        self.joined = "\n" + "\n".join(items)

    def count(self, pattern: re.Pattern[str], *, skip: int = 0) -> int:
        """How many lines ``pattern`` (a :func:`_line_pattern`) matches, leaving out the first ``skip``."""
        start = sum(map(len, self.items[:skip])) + skip  # the "\n" before line ``skip``
        return len(pattern.findall(self.joined, start))

    def share(
        self, pattern: re.Pattern[str], share: float, *, skip: int = 0, holds: tuple[str, ...] = ()
    ) -> bool:
        """True when ``pattern`` (a :func:`_line_pattern`) matches at least ``share`` of the lines
        after the first ``skip`` (and there are some).

        ``holds``: literals one of which every line it matches contains. Too few of them in all
        the lines decide without the regex (a count is a C loop; the regex is tried per line)."""
        total = len(self.items) - skip
        needed = share * total
        if total <= 0 or (holds and sum(self.joined.count(literal) for literal in holds) < needed):
            return False
        return self.count(pattern, skip=skip) >= needed


def _line_pattern(pattern: str) -> re.Pattern[str]:
    """``pattern``, to be matched at the start of a line, compiled to find such lines in
    :attr:`_Lines.joined`, after the "\\n" each line follows there (a literal first character is
    found by a fast scan, where a ``^`` pattern is tried at every position).

    ``pattern`` must match no "\\n" (``[^\\S\\n]`` for ``\\s``, ``[^\\w\\n]`` for ``\\W``), so that each
    match stays on its line: then ``len(findall)`` is the number of lines ``pattern`` matches at
    their start, as if each were matched alone (``$`` matches before the "\\n" ending a line as at
    the end of a line alone, and ``\\b`` sees a non-word character either way)."""
    return re.compile(rf"\n(?:{pattern})", re.MULTILINE)


def _unwrap(text: str) -> tuple[str, str | None, Callable[[], list[str]]]:
    """The output inside the harness's wrapper, without line numbers; the file path a header
    names, if any; and its :func:`_first_lines`, split when asked for (the seed's rules name most
    outputs without them). Returns ``text`` itself (same object) when there was nothing to strip."""
    body, path = text, None
    body = _EXIT_CODE.sub("", body, count=1)
    header = _SWE_HEADER.match(body) or _CAT_N_HEADER.match(body)
    if header is not None:
        path = header.group("path")
        body = body[header.end() :]
    wrapper = _TAG_WRAPPER.match(body)
    if wrapper is not None:
        body = body[wrapper.end() :]
        end = body.rfind("</output>")
        body = body[:end] if end >= 0 else body
    if _SWE_HEADER.match(text) or "more lines" in body[:200]:
        body = _MORE_LINES.sub("", body)
    body, first_lines = _strip_numbers(body, allow_colon=header is not None)
    return (text if body == text else body), path, first_lines


def _strip_numbers(text: str, *, allow_colon: bool) -> tuple[str, Callable[[], list[str]]]:
    """``text`` without its line-number prefixes when most of its :func:`_sample_lines` carry
    one, and a function giving the :func:`_first_lines` of what is returned.

    The colon form (``12:code``) is only taken after a SWE-agent header: elsewhere it is more
    likely a timestamp or ``file:line`` grep output.

    The numbers after the "\\n"s are stripped in one pass, which counts them: most often that
    count alone tells, and the sampled lines need not be split nor tried one by one.
    """
    split: tuple[list[str], int] | None = None
    split_done = False
    for kind, (mark, first, later) in _LINE_NUMBER.items():
        # most texts hold no arrow and no tab at all: then no line carries such a number
        if (kind == "colon" and not allow_colon) or mark not in text:
            continue
        if first.match(text) and not any(other in text for other in _OTHER_BREAKS):
            # the first line is numbered, so most likely all are (cat -n, Read): strip the whole
            # text. The sampled lines are its first "\n"-separated ones: past them, no more
            # numbers were stripped than there are "\n"s, and among them no more lines are not
            # blank than there are lines; if enough are numbered even so, it is decided
            body, hits = later.subn("\n", text)
            breaks = text.count("\n")
            past = max(0, breaks - (_SAMPLE_LINES - 1))
            if 1 + hits - past >= 0.6 * min(breaks + 1, _SAMPLE_LINES):
                body = first.sub("", body, count=1)
                return body, partial(_first_lines, body)
        # else count exactly, on the sampled lines only
        if not split_done:
            split, split_done = _split_head(text), True
        if split is None:  # not lines split at "\n" alone (rare): try each
            lines = _sample_lines(text)
            if lines and len(later.findall(_Lines(lines).joined)) >= 0.6 * len(lines):
                body = later.sub("\n", first.sub("", text, count=1))
                return body, partial(_first_lines, body)
            continue
        # the sampled lines are the head's: each numbered one is the head's first line or
        # follows a "\n" of the head, so stripping the head counts them; the rest of the text
        # starts with the "\n" after the head. A numbered line is never blank: when most of all
        # the head's lines are numbered, those that are not blank need not be counted
        pieces, end = split
        head, hits = later.subn("\n", text[:end])
        head, first_hit = first.subn("", head, count=1)
        hits += first_hit
        if hits and (hits >= 0.6 * len(pieces) or hits >= 0.6 * len(list(filter(str.strip, pieces)))):
            # stripping keeps every "\n" and adds no line break: the head's lines stay its lines
            return head + later.sub("\n", text[end:]), partial(str.split, head, "\n")
    if split is None:
        return text, partial(_first_lines, text)
    return text, partial(list, split[0])


_EXTENSIONS = {
    ".py": "Python source", ".pyi": "Python source", ".go": "Go source",
    ".js": "JavaScript source", ".jsx": "JavaScript source", ".mjs": "JavaScript source",
    ".ts": "TypeScript source", ".tsx": "TypeScript source", ".java": "Java source",
    ".rs": "Rust source", ".c": "C/C++ source", ".h": "C/C++ source", ".cc": "C/C++ source",
    ".cpp": "C/C++ source", ".hpp": "C/C++ source", ".md": "Markdown", ".rst": "text",
    ".json": "JSON", ".yaml": "YAML", ".yml": "YAML", ".xml": "XML", ".html": "HTML",
    ".htm": "HTML", ".sh": "shell script", ".bash": "shell script", ".csv": "CSV",
}  # fmt: skip


def _by_extension(path: str) -> str | None:
    name = path.rsplit("/", 1)[-1].lower()
    dot = name.rfind(".")
    return _EXTENSIONS.get(name[dot:]) if dot > 0 else None


def _parses_as_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


# line patterns (see _line_pattern: no "\n" may match, so [^\S\n] stands for \s and [^\w\n] for \W)
_GREP = _line_pattern(r"[^\s:]+:\d+[:-]")
# a stamp starts with a digit, "[" or a level's initial: the lookahead turns the other lines away
# before the alternatives are tried one by one
_TIMESTAMP = _line_pattern(
    r"(?=[^\w\n]{0,2}[\d\[DIWEFT])"
    r"[^\w\n]{0,2}(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}|\d{2}:\d{2}:\d{2}[.,]\d+|"
    r"\[?(DEBUG|INFO|WARN|WARNING|ERROR|FATAL|TRACE)\b)"
)
_LS_LONG = _line_pattern(r"[-dlcbps][rwxsStT-]{9}[@+.]?[^\S\n]+\d+")
_PATH_LINE = _line_pattern(r"\.{0,2}/?[\w@.+-]+(?:/[\w@.+-]*)+/?$")
# tree(1) output: box-drawing branches, or the ASCII "|-- name" / "`-- name" of tree -A; a
# Markdown table's "|---|" must not count
# (the lookahead: after the indent, a branch or a bar; most lines fail it at once)
_TREE_LINE = _line_pattern(r"(?=[ \t]*+[│├└|`])(?:[│ \t]*[├└]──[^\S\n]*\S|[| \t]*[|`]-- \S)")
_LS_R_HEADER = _line_pattern(r"\.{1,2}(?:/[^:\n]*)?:$")
_BARE_NAME = _line_pattern(r"[^\s/]+$")
_LINT = _line_pattern(
    r"[ \t]*--> \S+:\d+:\d+|\S+:\d+:\d+: [A-Z]{1,4}\d{2,4}\b|(?:warning|error)(?:\[\w+\])?: "
)
# possessive "++": a key cannot end before its colon, and a line that is no YAML is left at once
_YAML_LINE = _line_pattern(r"[ \t]*(- )?[\w.-]++:(?:[^\S\n]|$)")
_YAML_COMMENT = _line_pattern(r"[^\S\n]*#")  # what line.lstrip().startswith("#") tells
_JAVA_FRAME = _line_pattern(r"[^\S\n]+at [\w$.<>]+\(.*\)$")


def _python_traceback(text: str, lines: _Lines) -> bool:
    return "Traceback (most recent call last):" in text


def _java_trace(text: str, lines: _Lines) -> bool:
    return lines.count(_JAVA_FRAME) >= 3


# the markers a report line starts with, as one pattern looked for after each "\n" of the text
# (with one put before it): a literal first character is found by a fast scan, and a line that
# starts otherwise is turned away at once, where the literals of the words (PASS, FAIL, ok) are
# found all over prose and code
_REPORT_LINE = re.compile(
    r"\n(?=[ \t]*[=PFo\-tRT✓×❯])(?:"  # the first characters the markers can start with
    + "|".join(
        (
            r"=+ .*\b\d+ (passed|failed)",
            r"(PASS|FAIL|ok|--- (PASS|FAIL)):?(?:\s|$)",
            r"test result: (ok|FAILED)\.",
            r"Ran \d+ tests? in ",
            # vitest / jest
            r"[ \t]*Test (?:Files|Suites):?[ \t]+.*\d+ (?:passed|failed)",
            r"[ \t]*[✓×❯] \S+\.(?:test|spec)\.[jt]sx? \(\d+ tests?",
        )
    )
    + ")",
    re.MULTILINE,
)
# markers anywhere in a line, each with the literals one of which any match contains: the regex
# runs only where one is present (an alternation of them all ran at every position of every
# result: 0.4 ms a result)
_REPORT_MARKERS: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = tuple(
    (hints, re.compile(pattern, re.MULTILINE))
    for hints, pattern in (
        (("test session starts",), r"=+ test session starts =+"),
        (("Tests run:",), r"\bTests run: \d+, Failures: \d+"),
        (("passing", "failing"), r"\b\d+ (passing|failing)\b"),
    )
)


def _test_report(text: str, lines: _Lines) -> bool:
    # a report announces itself at the start and sums up at the end
    ends = text if len(text) <= 2 * _REPORT_CHARS else text[:_REPORT_CHARS] + "\n" + text[-_REPORT_CHARS:]
    return _REPORT_LINE.search("\n" + ends) is not None or any(
        _on_lines_with(hints, p, ends) for hints, p in _REPORT_MARKERS
    )


def _starts_with_markup(text: str) -> bool:
    """Whether the first character that is not blank is "<" (a text is only stripped, which
    copies it, when it starts blank)."""
    first = text[:1]
    return (text.lstrip()[:1] if first.isspace() else first) == "<"


def _html(text: str, lines: _Lines) -> bool:
    if not _starts_with_markup(text):
        return False
    head = text.lstrip()[:2000].lower()
    # "<body" inside a JSON error or a test's DOM dump is not an HTML page: it must start as markup
    return head.startswith(("<!doctype html", "<html")) or (head.startswith("<") and "<body" in head)


def _xml(text: str, lines: _Lines) -> bool:
    if not _starts_with_markup(text):
        return False
    head = text.lstrip()
    return head.startswith("<?xml") or (
        head.startswith("<") and head.rstrip().endswith(">") and head.count("</") >= 2
    )


def _grep(text: str, lines: _Lines) -> bool:
    # SWE-agent's search_dir / search_file say so on their first line
    if re.match(r"Found \d+ matches for ", lines.items[0]):
        return True
    return len(lines.items) >= 2 and lines.share(_GREP, 0.6, holds=(":",))


def _lint(text: str, lines: _Lines) -> bool:
    return lines.count(_LINT) >= 2


def _log(text: str, lines: _Lines) -> bool:
    n = len(lines.items)
    if n < 3:
        return False
    # long training and server logs interleave progress bars and warnings with stamped lines
    # half the lines stamped, or a quarter and at least five
    return lines.count(_TIMESTAMP) >= min(0.5 * n, max(5, 0.25 * n))


def _listing(text: str, lines: _Lines) -> bool:
    if len(lines.items) < 3:
        return False
    if lines.items[0].startswith("total ") and lines.share(_LS_LONG, 0.6, skip=1):
        return True
    # ls -R: "./dir:" section headers over bare names
    if lines.count(_LS_R_HEADER) >= 2 and lines.share(_BARE_NAME, 0.8):
        return True
    return (
        lines.share(_LS_LONG, 0.6)
        or lines.share(_TREE_LINE, 0.5)
        or lines.share(_PATH_LINE, 0.7, holds=("/",))
    )


def _csv(text: str, lines: _Lines) -> bool:
    if len(lines.items) < 3:
        return False
    counts = {line.count(",") for line in lines.items[:20]}
    return len(counts) == 1 and counts.pop() >= 2


def _yaml(text: str, lines: _Lines) -> bool:
    # comments do not count either way: a YAML file often opens with "# ..." lines
    n = len(lines.items)
    if n < 3:
        return False
    start = text.lstrip() if text[:1].isspace() else text
    if start.startswith(("---\n", "apiVersion:")):
        return n - lines.count(_YAML_COMMENT) >= 3
    # else: 4 lines or more that are no comment, 80% of them YAML lines. No comment is a YAML
    # line, so these are counted over all the lines; 4 of them at least (80% of 4 or more), each
    # with a colon, before the comments are worth counting
    if lines.joined.count(":") < 4:
        return False
    found = lines.count(_YAML_LINE)
    others = n - lines.count(_YAML_COMMENT) if found >= 4 else 0
    return others >= 4 and found >= 0.8 * others


def _source(
    patterns: tuple[tuple[tuple[str, ...], str], ...], needed: int = 2
) -> Callable[[str, _Lines], bool]:
    """A rule that holds when ``needed`` of ``patterns`` match. Each pattern comes with literals
    one of which any match contains, on the same line: the regex runs only on those lines
    (:func:`_on_lines_with`; summaries are made on the agent's hot path).

    A pattern with no literals starts with ``^`` (and has no ``|`` outside a group), and is
    looked for after each "\\n" of the head (with one put before it): so are the patterns whose
    words are common in prose and code, where the lines holding one are many, and a line that
    does not start so is turned away at once.

    The patterns are tried in order, and the rule gives up when those left cannot make up the
    count: the costliest come last (most text is none of these languages)."""
    tests = [
        (hints, re.compile(p, re.MULTILINE) if hints else re.compile(rf"\n(?:{p[1:]})", re.MULTILINE))
        for hints, p in patterns
    ]

    def rule(text: str, lines: _Lines) -> bool:
        # a file's first lines name its language; the rest only costs
        head = "\n" + text[:_SOURCE_CHARS]  # the "\n" added is a line of its own, with no literal
        found = 0
        for i, (hints, pattern) in enumerate(tests):
            if found + len(tests) - i < needed:  # this pattern and those after it cannot make it
                return False
            if _on_lines_with(hints, pattern, head) if hints else pattern.search(head) is not None:
                found += 1
                if found >= needed:
                    return True
        return False

    return rule


_RULES: tuple[tuple[str, Callable[[str, _Lines], bool]], ...] = (
    ("Python traceback", _python_traceback),
    ("stack trace", _java_trace),
    ("test report", _test_report),
    ("HTML", _html),
    ("XML", _xml),
    ("lint output", _lint),
    ("grep output", _grep),
    ("log", _log),
    ("directory listing", _listing),
    ("Rust source", _source(((("fn ",), r"\bfn \w+"), (("let ",), r"\blet (mut )?\w+"),
                             (("impl",), r"\bimpl\b"), (("use ",), r"^[ \t]*use \w+::"),
                             (("#[derive(",), r"^[ \t]*#\[derive\("),
                             (("pub ",), r"^[ \t]*pub (struct|enum|fn|mod) \w+")))),
    ("Java source", _source(((("import java",), r"^import java"), (("class ",), r"\bclass \w+"),
                             (("@Override",), r"@Override"),
                             (("public ", "private ", "protected "),
                              r"\b(public|private|protected) (static )?[\w<>\[\]]+ \w+\(")))),
    ("C/C++ source", _source(((("#include",), r"^#include [<\"]"), (("int main(",), r"\bint main\("),
                              (("#define ",), r"^#define "),
                              (("struct ", "typedef "), r"\b(struct|typedef) \w+")))),
    ("TypeScript source", _source(((("interface ",), r"^(export )?interface \w+"),
                                   ((": string", ": number", ": boolean"),
                                    r"\w\??: (string|number|boolean)\b"),
                                   ((), r"^export (type|enum) \w+"),
                                   ((";",), r"^[ \t]*\w+\??: [\w.<>\[\]| ]+;[ \t]*$")), 2)),
    # Python without a def line (models, constants, a slice of a file): imports, classes, self.
    ("Python source", _source(((("import ",), r"^(from [\w.]+ import \S|import [\w.]+( as \w+)?$)"),
                               (("class ",), r"^[ \t]*class \w+(\([^)\n]*\))?:[ \t]*$"),
                               (("self.",), r"\bself\.\w+"), (('"""',), r'^[ \t]*"""'),
                               (("if ", "elif ", "for ", "while ", "with ", "except"),
                                r"^[ \t]*(if|elif|for|while|with|except)\b[^\n;{]*:[ \t]*(#.*)?$")), 2)),
    ("shell script", _source(((("#!/",), r"^#!/(usr/)?bin/(env )?(ba|z)?sh"),
                              (("; then", "; do"), r"^[ \t]*(if|for) .*; (then|do)")), 1)),
    ("YAML", _yaml),
    ("Markdown", _source(((("#",), r"^#{1,6} \S"), (("- ", "* "), r"^[ \t]*[-*] \S"),
                          (("](", "```"), r"\[[^\]\n]+\]\([^)\n]+\)|^```")), 2)),
    ("CSV", _csv),
)  # fmt: skip
