"""Content-aware shortened forms: keep the lines an agent is likely to use again.

A head+tail cut keeps what happens to sit at the ends. These keep, by kind of output:

- execution output (test runs, builds, logs): the tail, where the verdict is, and the lines that
  report errors or failures wherever they are (:func:`tail_weighted`);
- search and listing output: the first matching lines, whole (:func:`leading_lines`);
- source files: an outline, the definitions with their line numbers (:func:`outline`).

Every form starts with the original's first line(s) or the SPEC's one-line summary, ends with the
way back (``<<ccr:KEY>>``, saved path), and keeps SPEC's literal omission marker
``[... N chars omitted from old tool result ...]``, so ``restore_originals`` recognizes it and
``prepare`` stays idempotent.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Sequence
from functools import lru_cache

from ..shorten import compact_form, summary_form

__all__ = [
    "excerpt_form",
    "leading_lines",
    "lines_summary",
    "names_index",
    "names_of",
    "outline",
    "outline_lines",
    "outline_summary",
    "tail_weighted",
    "trimmed_form",
    "with_names",
]

_DEFINITION = re.compile(
    r"^\s*(?:(?:export|pub(?:\(\w+\))?|public|private|protected|static|async|abstract|final|"
    r"override|default|internal|open|unsafe|extern|inline|virtual)\s+)*"
    r"(?:def|class|fn|func|function|struct|enum|trait|impl|interface|type|module|object|"
    r"record|namespace|package|macro_rules!|const|let|var|val)\s+[\w$<>:.]+"
    # a C-family signature: type, name, parameters, maybe a brace; not a statement
    r"|^\s*(?:@\w+|#define\s+\w+|(?!(?:return|new|await|else|throw|yield|if|while|for|switch|catch)\b)"
    r"\w[\w<>\[\],.? ]*\s+\w+\s*\([^;{()]*\)\s*(?:throws [\w., ]+)?\s*\{?\s*$)"
)
_NUMBERED = re.compile(r"^\s*(\d+)(?:\t|→|:|\s{1,2}\S)")
_PROBLEM = re.compile(
    r"error|fail|exception|traceback|assert|panic|fatal|denied|not found|no such|cannot|"
    r"undefined|expected|warning|E\d{3,4}\b|\bFAILED\b|\bERROR\b",
    re.IGNORECASE,
)
_MARK = "[... {n} chars omitted from old tool result ...]"


def _head_lines(lines: Sequence[str], minimum: int = 32) -> int:
    """How many leading lines make at least ``minimum`` chars (so the form starts like the original)."""
    size = 0
    for n, line in enumerate(lines, 1):
        size += len(line) + 1
        if size >= minimum:
            return n
    return len(lines)


def excerpt_form(text: str, keep: Iterable[int], *, keys: Iterable[str], paths: Iterable[str] = ()) -> str:
    """The original's lines at the indexes in ``keep`` (plus its first line), in order, with a
    ``[... L lines omitted ...]`` line at each gap and SPEC's omission marker at the end."""
    lines = text.split("\n")
    chosen = sorted(set(keep) | set(range(_head_lines(lines))))
    out: list[str] = []
    last = -1
    kept_chars = 0
    for n in chosen:
        if n >= len(lines):
            break
        if n > last + 1:
            out.append(f"[... {n - last - 1} lines omitted ...]")
        out.append(lines[n])
        kept_chars += len(lines[n]) + 1
        last = n
    if last < len(lines) - 1:
        out.append(f"[... {len(lines) - 1 - last} lines omitted ...]")
    omitted = max(0, len(text) - kept_chars)
    # compact_form with an empty head and tail gives SPEC's marker line plus the way back
    marker = compact_form("", 0, 0, keys=keys, paths=paths).strip("\n")
    marker = marker.replace(_MARK.format(n=0), _MARK.format(n=omitted), 1)
    return "\n".join(out) + "\n" + marker


def _fit(lines: Sequence[str], order: Iterable[int], budget: int) -> list[int]:
    """Indexes from ``order`` (most wanted first) whose lines fit in ``budget`` chars."""
    taken: list[int] = []
    used = 0
    for n in order:
        size = min(len(lines[n]), 400) + 1
        if used + size > budget:
            continue
        taken.append(n)
        used += size
    return taken


def tail_weighted(text: str, budget: int) -> list[int]:
    """Line indexes for execution output: error lines first, then the tail, then the head."""
    lines = text.split("\n")
    problems = [n for n, line in enumerate(lines) if _PROBLEM.search(line)]
    tail = list(range(len(lines) - 1, -1, -1))
    # the last problems matter most (the final failure summary), then the tail itself
    return _fit(lines, [*problems[::-1][:40], *tail], budget)


def leading_lines(text: str, budget: int) -> list[int]:
    """Line indexes for search or listing output: the first lines, as many as fit."""
    lines = text.split("\n")
    return _fit(lines, range(len(lines)), budget)


def outline(text: str) -> list[int]:
    """Line indexes of definitions (functions, classes, types, constants) in source text."""
    out = []
    for n, line in enumerate(text.split("\n")):
        body = _NUMBERED.sub("", line, count=1) if _NUMBERED.match(line) else line
        if len(body) <= 200 and _DEFINITION.match(body):
            out.append(n)
    return out


def outline_lines(text: str, budget: int) -> list[str]:
    """The outline as lines ``N: definition`` (the file's own numbers when it shows them)."""
    lines = text.split("\n")
    out: list[str] = []
    used = 0
    for n in outline(text):
        line = lines[n].strip() if _NUMBERED.match(lines[n]) else f"{n + 1}: {lines[n].strip()}"
        if used + len(line) + 1 > budget:
            break
        out.append(line)
        used += len(line) + 1
    return out


def outline_summary(
    text: str,
    content_type: str,
    extra: Sequence[str],
    *,
    keys: Iterable[str],
    paths: Iterable[str] = (),
) -> str:
    """SPEC's one-line summary (with its way back), then ``extra`` lines (an outline, the last
    error lines, the first matches) so the agent still sees what was there."""
    line = summary_form(text, content_type, keys=keys, paths=paths)
    return line if not extra else line + "\n" + "\n".join(extra)


_NAME_WORD = re.compile(r"[\w./-]+")
_NAME_IDENT = re.compile(r"[A-Za-z_][\w.]*\Z")
_NAME_CAMEL = re.compile(r"[a-z][A-Z]")


def _name_like(word: str) -> bool:
    if "/" in word:
        return len(word) >= 4
    if word.isdigit() or word.replace(".", "").isdigit():
        return sum(c.isdigit() for c in word) >= 3
    if len(word) < 4 or not _NAME_IDENT.match(word):
        return False
    return "_" in word or "." in word or any(c.isdigit() for c in word) or bool(_NAME_CAMEL.search(word))


def _names(text: str) -> tuple[tuple[int, str, str], ...]:
    """``(line, number, name)`` for each distinctive name of ``text`` at its first appearance:
    the index of its line, and that line's own number in a numbered listing (else ``""``). A
    listing's line numbers are no names (its ``N`` column is not scanned). Kept for the last 16
    texts asked about, of up to 1 MB each (so at most 16 MB outlive the sessions that asked): a
    result's names are read for its own set and for each of its forms, within a request."""
    return _kept_names(text) if len(text) <= _KEPT_CHARS else _scan_names(text)


_KEPT_CHARS = 1_000_000


@lru_cache(maxsize=16)
def _kept_names(text: str) -> tuple[tuple[int, str, str], ...]:
    return _scan_names(text)


def _scan_names(text: str) -> tuple[tuple[int, str, str], ...]:
    seen: set[str] = set()  # every word met once, name or not: each is judged only once
    out: list[tuple[int, str, str]] = []
    for n, line in enumerate(text.split("\n")):
        match = _NUMBERED.match(line)
        number = match.group(1) if match else ""
        for word in _NAME_WORD.findall(line[match.end(1) :] if match else line):
            word = word.strip("./-")
            if word not in seen:
                seen.add(word)
                if _name_like(word):
                    out.append((n, number, word))
    return tuple(out)


def names_index(text: str, budget: int, *, skip: str = "", known: Container[str] = ()) -> list[str]:
    """The distinctive names in ``text`` (identifiers with ``_``, ``.``, digits or camelCase,
    paths, numbers of 3+ digits), each once, in order of appearance, that ``skip`` does not
    already show, as many as fit in ``budget`` chars.

    These are what an agent copies from an old result into a later call (a function to edit, a
    path to open, a failing test's id); listing them keeps the agent aware they exist, and the
    archive marker next to them gives the rest back. A name that an earlier entry already shows
    (a path's file name after the path), or that is in ``known`` (names the conversation showed
    before this result), is not listed again.

    In a numbered listing (``cat -n``, a read tool's ``N→`` lines) a line's own number is no
    name, but where a name is matters to an agent that goes on to edit or read around it: the
    first new name of such a line is listed as ``N:name``.
    """
    out: list[str] = []
    parts: set[str] = set()  # the components and tails of the paths listed so far
    numbered = -1  # the last line whose number an entry carries
    used = 0
    for line, number, word in _names(text):
        if word in parts or word in known or word in skip:
            continue
        entry = f"{number}:{word}" if number and line != numbered else word
        if used + len(entry) + 1 > budget:
            return out
        out.append(entry)
        used += len(entry) + 1
        numbered = line
        if "/" in word:
            pieces = word.split("/")
            parts.update(pieces)
            parts.update("/".join(pieces[k:]) for k in range(1, len(pieces)))
    return out


def trimmed_form(text: str, kind: str, budget: int, *, keys: Iterable[str], paths: Iterable[str] = ()) -> str:
    """The trimmed tier: an excerpt of about ``budget`` chars chosen by ``kind``: ``"exec"``
    (error lines and tail), ``"search"`` (first lines), ``"source"`` (head and outline), else the
    first lines."""
    lines = text.split("\n")
    if kind == "exec":
        keep = tail_weighted(text, budget)
    elif kind == "source":
        keep = leading_lines(text, budget // 2)
        used = sum(len(lines[n]) + 1 for n in keep)
        for n in outline(text):
            if used + len(lines[n]) + 1 > budget:
                break
            keep.append(n)
            used += len(lines[n]) + 1
    else:
        keep = leading_lines(text, budget)
    return excerpt_form(text, keep, keys=keys, paths=paths)


def lines_summary(
    text: str, content_type: str, kind: str, budget: int, *, keys: Iterable[str], paths: Iterable[str] = ()
) -> str:
    """The summary tier: SPEC's one-line summary, then about ``budget`` chars of lines chosen by
    ``kind`` (as :func:`trimmed_form`; the outline alone for source)."""
    lines = text.split("\n")
    if kind == "exec":
        extra = [lines[n] for n in sorted(tail_weighted(text, budget))]
    elif kind == "source":
        extra = outline_lines(text, budget)
    else:
        extra = [lines[n] for n in leading_lines(text, budget)]
    return outline_summary(text, content_type, extra, keys=keys, paths=paths)


def names_of(text: str) -> frozenset[str]:
    """Every name in ``text`` that :func:`names_index` would judge a name (a numbered listing's
    line numbers are none)."""
    return frozenset(word for _, _, word in _names(text))


def with_names(form: str, original: str, budget: int, known: Container[str] = ()) -> str:
    """``form`` followed by a ``names:`` line indexing what of ``original`` it does not show
    (nor ``known``: see :func:`names_index`)."""
    names = names_index(original, budget, skip=form, known=known)
    return form + ("\nnames: " + " ".join(names) if names else "")
