"""What every format adapter provides, and the pieces they share."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ..exceptions import FormatError
from ..messages import History, Message, ToolResultPart

__all__ = [
    "CONTINUE_TEXT",
    "Format",
    "ToolMessageRules",
    "Violation",
    "check_tool_messages",
    "expect_mapping",
]

CONTINUE_TEXT = "(continue)"
"""Text of the user message a format puts between two model turns that pairing repair left side
by side (their separator held only orphan results), where the provider wants roles to alternate
or where merging the turns would change the turn count and so the next run's microcompaction."""


@dataclass(frozen=True, slots=True)
class Violation:
    """One breach of a provider's pairing rules, worded like the provider's own 400 error."""

    index: int
    """Index of the offending message in the history."""
    id: str | None
    """The call id concerned, if any."""
    rule: str
    """Short rule name, e.g. ``missing_result``, ``orphan_result``, ``duplicate_id``."""
    message: str

    def __str__(self) -> str:
        return f"messages[{self.index}] {self.rule}: {self.message}"


class Format(ABC):
    """A provider's history format: load to the neutral model, dump back, validate.

    ``load`` is one-to-one: neutral message ``i`` is provider message ``i``, so indexes in errors
    and violations mean the same in both.
    """

    name: ClassVar[str]
    unique_call_ids: ClassVar[bool] = False
    """True when the provider rejects a call id used twice anywhere in one request."""
    grouped_results: ClassVar[bool] = False
    """True when all results of one block must sit in the single message after the calls."""
    native_objects: ClassVar[bool] = False
    """True when ``load``/``dump`` read and give back SDK objects themselves (LangChain)."""
    per_message: ClassVar[bool] = False
    """True when :meth:`load_message` and :meth:`dump_message` work one message at a time, so
    a session can reuse the neutral form of every message it has seen before."""

    def load_message(self, index: int, raw: Any) -> Message:
        """The neutral form of one message (formats with ``per_message``)."""
        raise NotImplementedError(f"{self.name} loads whole histories only")

    def dump_message(self, message: Message) -> Any:
        """The provider form of one rebuilt message (formats with ``per_message``)."""
        raise NotImplementedError(f"{self.name} dumps whole histories only")

    @abstractmethod
    def detect(self, messages: Sequence[Any]) -> int:
        """0: cannot be this format; 1: compatible; 2: shows features only this format has."""

    def load(self, messages: Sequence[Any]) -> History:
        """The neutral form of a history; raises :class:`FormatError` on a malformed message.

        One :meth:`load_message` per message; formats that read a message in the light of the
        ones before it (Gemini, OpenAI Responses, SDK objects) override this."""
        return [self.load_message(i, m) for i, m in enumerate(messages)]

    @abstractmethod
    def dump(self, history: History) -> list[Any]:
        """The provider form of a neutral history; untouched messages come back as they were."""

    @abstractmethod
    def pack_results(self, results: list[ToolResultPart], rest: list[Message]) -> list[Message]:
        """Messages that carry ``results`` right after their calls, followed by ``rest``.

        ``rest`` holds the other messages of the block, in order, result parts already taken out.
        """

    @abstractmethod
    def validate(self, history: History) -> list[Violation]:
        """Every breach of the provider's pairing rules in a loaded history."""


@dataclass(frozen=True, slots=True)
class ToolMessageRules:
    """How a provider with one result message per call, right after the calls, words breaches."""

    empty_id: Callable[[int], str]
    duplicate_id: Callable[[int, str], str]
    missing: Callable[[int, str], str]
    orphan: Callable[[int, str], str]
    ids_unique_across: bool = False
    """True when an id may not repeat anywhere in the request (else only within one message)."""


def check_tool_messages(history: History, rules: ToolMessageRules) -> list[Violation]:
    """Breaches of "each call answered by its own ``tool`` message, right after the calls"."""
    out: list[Violation] = []
    seen_anywhere: set[str] = set()
    i = 0
    while i < len(history):
        m = history[i]
        if m.role == "tool":
            call_id = m.results[0].call_id
            out.append(Violation(i, call_id, "orphan_result", rules.orphan(i, call_id)))
            i += 1
            continue
        if m.role != "assistant" or not m.calls:
            i += 1
            continue
        wanted: dict[str, bool] = {}
        for c in m.calls:
            seen = seen_anywhere if rules.ids_unique_across else wanted
            if not c.id:
                out.append(Violation(i, c.id, "empty_id", rules.empty_id(i)))
            elif c.id in seen:
                out.append(Violation(i, c.id, "duplicate_id", rules.duplicate_id(i, c.id)))
            seen_anywhere.add(c.id)
            wanted.setdefault(c.id, False)
        j = i + 1
        while j < len(history) and history[j].role == "tool":
            call_id = history[j].results[0].call_id
            if wanted.get(call_id) is False:
                wanted[call_id] = True
            else:
                out.append(Violation(j, call_id, "orphan_result", rules.orphan(j, call_id)))
            j += 1
        for call_id, answered in wanted.items():
            if not answered and call_id:
                out.append(Violation(i, call_id, "missing_result", rules.missing(i, call_id)))
        i = j
    return out


def expect_mapping(value: Any, index: int, what: str = "message") -> Mapping[str, Any]:
    if type(value) is dict or isinstance(value, Mapping):  # a plain dict without the ABC check
        return value
    raise FormatError(f"{what} must be an object, got {type(value).__name__}", index=index)


def results_in_next_user(results: list[ToolResultPart], rest: list[Message]) -> list[Message]:
    """``pack_results`` for formats that answer a block in one user message, first in it."""
    if rest and rest[0].role == "user":
        first = rest[0]
        return [first.with_parts([*results, *first.parts]), *rest[1:]]
    return [Message("user", tuple(results), dirty=True), *rest]


def results_as_tool_messages(results: list[ToolResultPart], rest: list[Message]) -> list[Message]:
    """``pack_results`` for formats with one ``tool`` message (or item) per result."""
    packed = [Message("tool", (r,), raw=r.raw, dirty=r.raw is None or r.modified) for r in results]
    return [*packed, *rest]
