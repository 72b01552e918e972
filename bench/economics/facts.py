"""Later-used facts: what the agent takes from a tool result and uses afterwards.

A *fact* is a distinctive token (an identifier, a path, a number) that an assistant message uses
(in its text or its tool-call input), that first appeared in an earlier tool result, and that
nowhere the agent or the user wrote before that assistant message. Each fact counts once, at its
first use. Before that use, the request as sent holds the source result (the first result the
token appeared in) in some form:

- *visible*: that result's text as sent still contains the token;
- *recoverable*: visible, or the text as sent carries a way back (an archive marker
  ``<<ccr:KEY>>`` or a saved path) to a stored original that contains the token.

A fact is also marked *line number only* when it is a number that its source result shows
nowhere but in a numbered listing's line-number column (``cat -n``'s ``   206\t``, a read
tool's ``   206→``): such a token is a position in that listing, and the agent often did not
take it from there (it computed a range, ``sed -n 191,251p``, or read the number off a later
grep hit); the tables say how many of the facts a policy did not keep visible are of that kind.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .data import Trajectory, block_text

_WORD = re.compile(r"[\w./-]+")
_LINE_NUMBER = re.compile(r"^[ \t]*(\d+)(?:\t|→)", re.MULTILINE)
_CAMEL = re.compile(r"[a-z][A-Z]")
_IDENT = re.compile(r"[A-Za-z_][\w.]*\Z")
_NUMBER = re.compile(r"\d[\d.]*\Z")
_STRIP = "./-"


def distinctive_tokens(text: str) -> set[str]:
    """Identifiers, paths and numbers in ``text`` that are specific enough to be a fact.

    Paths: a ``/`` and at least 4 chars (their identifier-like components count too).
    Identifiers: at least 4 chars with an underscore, a dot, a digit or a camelCase hump.
    Numbers: at least 3 digits.
    """
    out: set[str] = set()
    for match in _WORD.finditer(text):
        word = match.group().strip(_STRIP)
        if len(word) < 3:
            continue
        if "/" in word:
            if len(word) >= 4:
                out.add(word)
            for part in word.split("/"):
                part = part.strip(_STRIP)
                if _is_identifier(part) or _is_number(part):
                    out.add(part)
        elif _is_identifier(word) or _is_number(word):
            out.add(word)
    return out


def _is_identifier(word: str) -> bool:
    if len(word) < 4 or not _IDENT.match(word):
        return False
    return "_" in word or "." in word or any(c.isdigit() for c in word) or bool(_CAMEL.search(word))


def _is_number(word: str) -> bool:
    return bool(_NUMBER.match(word)) and sum(c.isdigit() for c in word) >= 3


@dataclass(frozen=True, slots=True)
class Fact:
    """One later-used fact: ``token`` used first by assistant message ``use``, taken from the
    result ``call_id`` in message ``source``."""

    token: str
    use: int
    source: int
    call_id: str
    later: tuple[tuple[int, str], ...] = ()
    """Later results (before the use) that showed the token again: ``(message, call id)``."""
    line_number: bool = False
    """A number its source result shows only as a listing's line number (module docstring)."""


def line_number_only(token: str, text: str) -> bool:
    """Whether ``token`` is a number that ``text`` shows only in a numbered listing's line-number
    column."""
    if not _is_number(token) or token not in {m.group(1) for m in _LINE_NUMBER.finditer(text)}:
        return False
    return token not in distinctive_tokens(_LINE_NUMBER.sub("", text))


def _written_text(message: dict[str, Any]) -> Iterator[str]:
    content = message["content"]
    if isinstance(content, str):
        yield content
        return
    for block in content:
        kind = block.get("type")
        if kind == "text":
            yield block.get("text", "")
        elif kind == "tool_use":
            yield json.dumps(block.get("input"), ensure_ascii=False)


def later_used_facts(trajectory: Trajectory) -> list[Fact]:
    """Every later-used fact of a trajectory, in order of use."""
    written: set[str] = set()
    seen: dict[str, list[tuple[int, str]]] = {}
    texts: dict[tuple[int, str], str] = {}
    facts: list[Fact] = []
    for i, message in enumerate(trajectory.messages):
        content = message["content"]
        if message["role"] == "user" and isinstance(content, list):
            for block in content:
                if block.get("type") == "tool_result":
                    place = (i, block.get("tool_use_id", ""))
                    texts[place] = text = block_text(block)
                    for token in distinctive_tokens(text):
                        seen.setdefault(token, []).append(place)
        used: set[str] = set()
        for text in _written_text(message):
            used |= distinctive_tokens(text)
        if message["role"] == "assistant":
            for token in sorted(used - written):
                sources = seen.get(token)
                if sources:
                    source = sources[0]
                    gutter = line_number_only(token, texts[source])
                    facts.append(Fact(token, i, source[0], source[1], tuple(sources[1:]), gutter))
        written |= used
    return facts


@dataclass
class FactTally:
    """Counts over many facts."""

    total: int = 0
    visible: int = 0
    recoverable: int = 0
    anywhere: int = 0
    """Visible in the source result or a later result that repeated the token."""
    hidden_line_numbers: int = 0
    """Not visible, and a number its source shows only as a listing's line number."""

    def add(self, other: FactTally) -> None:
        """Add ``other``'s counts to these."""
        self.total += other.total
        self.visible += other.visible
        self.recoverable += other.recoverable
        self.anywhere += other.anywhere
        self.hidden_line_numbers += other.hidden_line_numbers

    def count(self, request: list[Any], fact: Fact, recover: Recover | None) -> None:
        """Count one fact, checked in the request sent before its use."""
        visible, recoverable = check_fact(request, fact, recover)
        self.total += 1
        self.visible += visible
        self.recoverable += recoverable
        self.anywhere += visible or visible_anywhere(request, fact)
        self.hidden_line_numbers += not visible and fact.line_number


Recover = Callable[[str], "str | None"]
"""Looks up the original behind a marker key or saved path (``None`` when there is none)."""

_KEY = re.compile(r"<<ccr:([0-9a-f]{16})>>")
_PATH = re.compile(r"full output saved to ([^\]\n]+)\]")


def sent_result_text(request: list[Any], message: int, call_id: str) -> str | None:
    """The text of the result ``call_id`` in ``request[message]`` as sent (``None`` if gone)."""
    if message >= len(request):
        return None
    content = request[message].get("content")
    if not isinstance(content, list):
        return None
    for block in content:
        if block.get("type") == "tool_result" and block.get("tool_use_id") == call_id:
            text: str = block_text(block)
            return text
    return None


def visible_anywhere(request: list[Any], fact: Fact) -> bool:
    """True when the source result or any later result that repeated the token still shows it."""
    for message, call_id in ((fact.source, fact.call_id), *fact.later):
        text = sent_result_text(request, message, call_id)
        if text is not None and fact.token in text:
            return True
    return False


def check_fact(request: list[Any], fact: Fact, recover: Recover | None) -> tuple[bool, bool]:
    """``(visible, recoverable)`` of one fact in the request sent before its use."""
    text = sent_result_text(request, fact.source, fact.call_id)
    if text is None:
        return False, False
    if fact.token in text:
        return True, True
    if recover is None:
        return False, False
    for ref in _KEY.findall(text) + _PATH.findall(text):
        original = recover(ref)
        if original is not None and fact.token in original:
            return False, True
    return False, False
