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


def _at_least(lines: list[str], test: Callable[[str], object], needed: float) -> bool:
    """True when ``test`` holds for ``needed`` of ``lines`` or more; stops once it is decided."""
    if needed <= 0:
        return True
    spare = len(lines) - needed  # lines that may fail with the answer still yes
    hits = misses = 0
    for line in lines:
        if test(line):
            hits += 1
            if hits >= needed:
                return True
        else:
            misses += 1
            if misses > spare:
                return False
    return False


def detect_content_type(text: str) -> str:
    """The seed's rules, then evidence-based rules for logs, traces, reports, listings, markup."""
    # the evidence rules read the head and tail only: enough to tell, and bounded in cost
    if len(text) > _SAMPLE_HEAD + _SAMPLE_TAIL:
        sample = text[:_SAMPLE_HEAD] + "\n" + text[-_SAMPLE_TAIL:]
    else:
        sample = text
    body, path, lines = _unwrap(sample)
    seed = _seed_rules(text if body is sample else body, body)
    if seed != "text":
        return seed
    if path is not None:
        by_name = _by_extension(path)
        if by_name is not None:
            return by_name
    if lines is None:
        lines = _sample_lines(body)
    if not lines:
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
# (prefix at the start, prefix after a newline): a pattern that starts with a literal "\n" is
# found by a fast scan for that character, where a "^" pattern is tried at every position
_LINE_NUMBER = {
    kind: (re.compile(rf"\A{prefix}"), re.compile(rf"\n{prefix}"))
    for kind, prefix in (("arrow", r"[ \t]*\d+→"), ("tab", r"[ \t]*\d+\t"), ("colon", r"\d+:"))
}


def _sample_lines(text: str) -> list[str]:
    """The first :data:`_SAMPLE_LINES` lines of ``text`` that are not blank."""
    return [line for line in text.splitlines()[:_SAMPLE_LINES] if line.strip()]


def _unwrap(text: str) -> tuple[str, str | None, list[str] | None]:
    """The output inside the harness's wrapper, without line numbers; the file path a header
    names, if any; and the output's :func:`_sample_lines` when they were taken on the way (else
    ``None``). Returns ``text`` itself (same object) when there was nothing to strip."""
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
    body, lines = _strip_numbers(body, allow_colon=header is not None)
    return (text if body == text else body), path, lines


def _strip_numbers(text: str, *, allow_colon: bool) -> tuple[str, list[str] | None]:
    """``text`` without its line-number prefixes when most of its lines carry one, with its
    :func:`_sample_lines` when it is returned unchanged.

    The colon form (``12:code``) is only taken after a SWE-agent header: elsewhere it is more
    likely a timestamp or ``file:line`` grep output.
    """
    lines = _sample_lines(text)
    if not lines:
        return text, lines
    for kind, (first, later) in _LINE_NUMBER.items():
        if kind == "colon" and not allow_colon:
            continue
        if _at_least(lines, first.match, 0.6 * len(lines)):
            return later.sub("\n", first.sub("", text, count=1)), None
    return text, lines


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


def _share(lines: list[str], pattern: re.Pattern[str], share: float) -> bool:
    """True when ``pattern`` is found in at least ``share`` of ``lines`` (not empty)."""
    return bool(lines) and _at_least(lines, pattern.search, share * len(lines))


_NUMBERED = re.compile(r"^[ \t]*\d+(?:\t|→|:\s|\s{2})")
_GREP = re.compile(r"^[^\s:]+:\d+[:-]")
_TIMESTAMP = re.compile(
    r"^\W{0,2}(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}|\d{2}:\d{2}:\d{2}[.,]\d+|"
    r"\[?(DEBUG|INFO|WARN|WARNING|ERROR|FATAL|TRACE)\b)"
)
_LS_LONG = re.compile(r"^[-dlcbps][rwxsStT-]{9}[@+.]?\s+\d+")
_PATH_LINE = re.compile(r"^\.{0,2}/?[\w@.+-]+(?:/[\w@.+-]*)+/?$")
# tree(1) output: box-drawing branches, or the ASCII "|-- name" / "`-- name" of tree -A; a
# Markdown table's "|---|" must not count
_TREE_LINE = re.compile(r"^[│ \t]*[├└]──\s*\S|^[| \t]*[|`]-- \S")
_LS_R_HEADER = re.compile(r"^\.{1,2}(?:/[^:\n]*)?:$")
_BARE_NAME = re.compile(r"^[^\s/]+$")
_LINT = re.compile(
    r"^[ \t]*--> \S+:\d+:\d+|^\S+:\d+:\d+: [A-Z]{1,4}\d{2,4}\b|^(?:warning|error)(?:\[\w+\])?: "
)
_YAML_LINE = re.compile(r"^[ \t]*(- )?[\w.-]+:(\s|$)")
_JAVA_FRAME = re.compile(r"^\s+at [\w$.<>]+\(.*\)$")


def _python_traceback(text: str, lines: list[str]) -> bool:
    return "Traceback (most recent call last):" in text


def _java_trace(text: str, lines: list[str]) -> bool:
    return _at_least(lines, _JAVA_FRAME.match, 3)


# each marker with the literals one of which any match contains: the regex runs only where one is
# present (an alternation of them all ran at every position of every result: 0.4 ms a result)
_REPORT_MARKERS: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = tuple(
    (hints, re.compile(pattern, re.MULTILINE))
    for hints, pattern in (
        (("test session starts",), r"=+ test session starts =+"),
        (("passed", "failed"), r"^=+ .*\b\d+ (passed|failed)"),
        (("Tests run:",), r"\bTests run: \d+, Failures: \d+"),
        (("PASS", "FAIL", "ok"), r"^(PASS|FAIL|ok|--- (PASS|FAIL)):?(?:\s|$)"),
        (("test result:",), r"^test result: (ok|FAILED)\."),
        (("passing", "failing"), r"\b\d+ (passing|failing)\b"),
        (("Ran ",), r"^Ran \d+ tests? in "),
        # vitest / jest
        (("Test Files", "Test Suites"), r"^[ \t]*Test (?:Files|Suites):?[ \t]+.*\d+ (?:passed|failed)"),
        (("✓", "×", "❯"), r"^[ \t]*[✓×❯] \S+\.(?:test|spec)\.[jt]sx? \(\d+ tests?"),
    )
)


def _test_report(text: str, lines: list[str]) -> bool:
    # a report announces itself at the start and sums up at the end
    ends = text if len(text) <= 2 * _REPORT_CHARS else text[:_REPORT_CHARS] + "\n" + text[-_REPORT_CHARS:]
    return any(_on_lines_with(hints, p, ends) for hints, p in _REPORT_MARKERS)


def _html(text: str, lines: list[str]) -> bool:
    head = text.lstrip()[:2000].lower()
    # "<body" inside a JSON error or a test's DOM dump is not an HTML page: it must start as markup
    return head.startswith(("<!doctype html", "<html")) or (head.startswith("<") and "<body" in head)


def _xml(text: str, lines: list[str]) -> bool:
    head = text.lstrip()
    return head.startswith("<?xml") or (
        head.startswith("<") and head.rstrip().endswith(">") and head.count("</") >= 2
    )


def _grep(text: str, lines: list[str]) -> bool:
    # SWE-agent's search_dir / search_file say so on their first line
    if re.match(r"Found \d+ matches for ", lines[0]):
        return True
    return len(lines) >= 2 and _share(lines, _GREP, 0.6)


def _lint(text: str, lines: list[str]) -> bool:
    return _at_least(lines, _LINT.match, 2)


def _log(text: str, lines: list[str]) -> bool:
    if len(lines) < 3:
        return False
    # long training and server logs interleave progress bars and warnings with stamped lines
    # half the lines stamped, or a quarter and at least five
    n = len(lines)
    return _at_least(lines, _TIMESTAMP.search, min(0.5 * n, max(5, 0.25 * n)))


def _listing(text: str, lines: list[str]) -> bool:
    if len(lines) < 3:
        return False
    if lines[0].startswith("total ") and _share(lines[1:], _LS_LONG, 0.6):
        return True
    # ls -R: "./dir:" section headers over bare names
    if _at_least(lines, _LS_R_HEADER.match, 2) and _share(lines, _BARE_NAME, 0.8):
        return True
    return _share(lines, _LS_LONG, 0.6) or _share(lines, _TREE_LINE, 0.5) or _share(lines, _PATH_LINE, 0.7)


def _csv(text: str, lines: list[str]) -> bool:
    if len(lines) < 3:
        return False
    counts = {line.count(",") for line in lines[:20]}
    return len(counts) == 1 and counts.pop() >= 2


def _yaml(text: str, lines: list[str]) -> bool:
    # comments do not count either way: a YAML file often opens with "# ..." lines
    lines = [line for line in lines if not line.lstrip().startswith("#")]
    return (len(lines) >= 3 and text.lstrip().startswith(("---\n", "apiVersion:"))) or (
        len(lines) >= 4 and _share(lines, _YAML_LINE, 0.8)
    )


def _source(
    patterns: tuple[tuple[tuple[str, ...], str], ...], needed: int = 2
) -> Callable[[str, list[str]], bool]:
    """A rule that holds when ``needed`` of ``patterns`` match. Each pattern comes with literals
    one of which any match contains, on the same line: the regex runs only on those lines
    (:func:`_on_lines_with`; summaries are made on the agent's hot path)."""
    compiled = [(hints, re.compile(p, re.MULTILINE)) for hints, p in patterns]

    def rule(text: str, lines: list[str]) -> bool:
        head = text[:_SOURCE_CHARS]  # a file's first lines name its language; the rest only costs
        found = 0
        for hints, pattern in compiled:
            if _on_lines_with(hints, pattern, head):
                found += 1
                if found >= needed:
                    return True
        return False

    return rule


_RULES: tuple[tuple[str, Callable[[str, list[str]], bool]], ...] = (
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
    ("Java source", _source(((("public ", "private ", "protected "),
                              r"\b(public|private|protected) (static )?[\w<>\[\]]+ \w+\("),
                             (("import java",), r"^import java"), (("class ",), r"\bclass \w+"),
                             (("@Override",), r"@Override")))),
    ("C/C++ source", _source(((("#include",), r"^#include [<\"]"), (("int main(",), r"\bint main\("),
                              (("struct ", "typedef "), r"\b(struct|typedef) \w+"),
                              (("#define ",), r"^#define ")))),
    ("TypeScript source", _source(((("interface ",), r"^(export )?interface \w+"),
                                   ((": string", ": number", ": boolean"),
                                    r"\w\??: (string|number|boolean)\b"),
                                   (("export type", "export enum"), r"^export (type|enum) \w+"),
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
