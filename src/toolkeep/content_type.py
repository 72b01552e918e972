"""Name the kind of content of a tool result, for the one-line summary of an old result.

The first rule that matches wins: the seed's rules first, exactly as ChatCLI documents them, then
toolkeep's own, each asking for evidence over several lines so that one stray word does not decide.

    >>> detect_content_type('{"a": 1}')
    'JSON'
    >>> detect_content_type("Traceback (most recent call last):\\n  File \\"x.py\\", line 1")
    'Python traceback'
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

__all__ = ["detect_content_type", "detect_content_type_seed"]

_SAMPLE_LINES = 200
_SAMPLE_HEAD, _SAMPLE_TAIL = 16_000, 4_000


def detect_content_type_seed(text: str) -> str:
    """The seed's rules only: JSON, Go, Python, JavaScript, diff, git log, else text."""
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and _parses_as_json(stripped):
        return "JSON"
    if "package " in text:
        return "Go source"
    if "def " in text:
        return "Python source"
    if "function " in text:
        return "JavaScript source"
    if stripped.startswith(("diff ", "--- ")):
        return "diff"
    if stripped.startswith("commit "):
        return "git log"
    return "text"


def detect_content_type(text: str) -> str:
    """The seed's rules, then evidence-based rules for logs, traces, reports, listings, markup."""
    seed = detect_content_type_seed(text)
    if seed != "text":
        return seed
    # the evidence rules read the head and tail only: enough to tell, and bounded in cost
    if len(text) > _SAMPLE_HEAD + _SAMPLE_TAIL:
        text = text[:_SAMPLE_HEAD] + "\n" + text[-_SAMPLE_TAIL:]
    lines = [line for line in text.splitlines()[:_SAMPLE_LINES] if line.strip()]
    if not lines:
        return "text"
    for name, rule in _RULES:
        if rule(text, lines):
            return name
    return "text"


def _parses_as_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _share(lines: list[str], pattern: re.Pattern[str]) -> float:
    return sum(1 for line in lines if pattern.search(line)) / len(lines)


_NUMBERED = re.compile(r"^\s*\d+(?:\t|→|:\s|\s{2})")
_GREP = re.compile(r"^[^\s:]+:\d+[:-]")
_TIMESTAMP = re.compile(
    r"^\W{0,2}(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}|\d{2}:\d{2}:\d{2}[.,]\d+|"
    r"\[?(DEBUG|INFO|WARN|WARNING|ERROR|FATAL|TRACE)\b)"
)
_LS_LONG = re.compile(r"^[-dlcbps][rwxsStT-]{9}[@+.]?\s+\d+")
_PATH_LINE = re.compile(r"^\.{0,2}/?[\w@.+-]+(?:/[\w@.+-]*)+/?$")
_TREE_LINE = re.compile(r"^[│├└\s|`+-]*[├└|`]-{1,2}|^[│ ]*[├└]── ")
_YAML_LINE = re.compile(r"^\s*(- )?[\w.-]+:(\s|$)")
_JAVA_FRAME = re.compile(r"^\s+at [\w$.<>]+\(.*\)$")


def _python_traceback(text: str, lines: list[str]) -> bool:
    return "Traceback (most recent call last):" in text


def _java_trace(text: str, lines: list[str]) -> bool:
    return sum(1 for line in lines if _JAVA_FRAME.match(line)) >= 3


def _test_report(text: str, lines: list[str]) -> bool:
    markers = (
        r"=+ test session starts =+",
        r"^=+ .*\b\d+ (passed|failed)",
        r"\bTests run: \d+, Failures: \d+",
        r"^(PASS|FAIL|ok|---\s(PASS|FAIL)):?\s",
        r"^test result: (ok|FAILED)\.",
        r"\b\d+ (passing|failing)\b",
        r"^Ran \d+ tests? in ",
    )
    return any(re.search(p, text, re.MULTILINE) for p in markers)


def _html(text: str, lines: list[str]) -> bool:
    head = text.lstrip()[:200].lower()
    return head.startswith(("<!doctype html", "<html")) or "<body" in text[:2000].lower()


def _xml(text: str, lines: list[str]) -> bool:
    head = text.lstrip()
    return head.startswith("<?xml") or (
        head.startswith("<") and head.rstrip().endswith(">") and head.count("</") >= 2
    )


def _grep(text: str, lines: list[str]) -> bool:
    return len(lines) >= 2 and _share(lines, _GREP) >= 0.6


def _log(text: str, lines: list[str]) -> bool:
    return len(lines) >= 3 and _share(lines, _TIMESTAMP) >= 0.5


def _listing(text: str, lines: list[str]) -> bool:
    if len(lines) < 3:
        return False
    if lines[0].startswith("total ") and _share(lines[1:], _LS_LONG) >= 0.6:
        return True
    return (
        _share(lines, _LS_LONG) >= 0.6
        or _share(lines, _TREE_LINE) >= 0.5
        or (_share(lines, _PATH_LINE) >= 0.8)
    )


def _csv(text: str, lines: list[str]) -> bool:
    if len(lines) < 3:
        return False
    counts = {line.count(",") for line in lines[:20]}
    return len(counts) == 1 and counts.pop() >= 2


def _yaml(text: str, lines: list[str]) -> bool:
    return (len(lines) >= 3 and text.lstrip().startswith(("---\n", "apiVersion:"))) or (
        len(lines) >= 4 and _share(lines, _YAML_LINE) >= 0.8
    )


def _source(patterns: tuple[str, ...], needed: int = 2) -> Callable[[str, list[str]], bool]:
    compiled = [re.compile(p, re.MULTILINE) for p in patterns]

    def rule(text: str, lines: list[str]) -> bool:
        return sum(1 for p in compiled if p.search(text)) >= needed

    return rule


_RULES: tuple[tuple[str, Callable[[str, list[str]], bool]], ...] = (
    ("Python traceback", _python_traceback),
    ("stack trace", _java_trace),
    ("test report", _test_report),
    ("HTML", _html),
    ("XML", _xml),
    ("grep output", _grep),
    ("log", _log),
    ("directory listing", _listing),
    ("Rust source", _source((r"\bfn \w+", r"\blet (mut )?\w+", r"\bimpl\b", r"^\s*use \w+::"))),
    ("Java source", _source((r"\b(public|private|protected) (static )?[\w<>\[\]]+ \w+\(",
                             r"^import java", r"\bclass \w+", r"@Override"))),
    ("C/C++ source", _source((r"^#include [<\"]", r"\bint main\(", r"\b(struct|typedef) \w+",
                              r"^#define "))),
    ("TypeScript source", _source((r"^(export )?interface \w+", r": (string|number|boolean)\b",
                                   r"^import .* from ['\"]", r"\bconst \w+"), 3)),
    ("shell script", _source((r"^#!/(usr/)?bin/(env )?(ba|z)?sh", r"^\s*(if|for) .*; (then|do)"), 1)),
    ("Markdown", _source((r"^#{1,6} \S", r"^\s*[-*] \S", r"\[[^\]]+\]\([^)]+\)|^```"), 2)),
    ("CSV", _csv),
    ("YAML", _yaml),
)  # fmt: skip
