"""What every importer shares: the recorded session it returns and a builder of Anthropic histories.

Agent logs are event streams (a call here, its output there, thoughts and bookkeeping between).
Each importer walks its log once and feeds a :class:`TranscriptBuilder`, which turns the events
into an Anthropic Messages history: calls of one model response in one assistant message, their
results first in the next user message, consecutive same-role turns merged. The builder never
invents content: a call the log never answered stays unanswered, so pairing repair shows up in the
replay exactly where the log would have earned a provider 400.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ...figures import RecordedSession

__all__ = [
    "Document",
    "Importer",
    "RecordedSession",
    "TranscriptBuilder",
    "parse_arguments",
    "split_sessions",
    "text_of",
    "tool_name",
]

_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_NAME_PART_RE = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Document:
    """A parsed log file: one JSON value, or the records of a JSON Lines file."""

    path: Path
    data: Any
    jsonl: bool

    @property
    def records(self) -> list[dict[str, Any]]:
        """The JSONL records that are objects (other lines are ignored by every importer)."""
        if not self.jsonl:
            return []
        return [r for r in self.data if isinstance(r, dict)]


class Importer(ABC):
    """Reads one log format. ``detect`` looks at a parsed file; ``load`` returns its sessions."""

    name: ClassVar[str]
    description: ClassVar[str]
    pricing: ClassVar[str | None] = None
    """The price-list preset of the provider the agent runs on, when the log format implies one
    (a Codex rollout: ``openai``); ``None`` when agents of this format run on any provider."""

    @abstractmethod
    def detect(self, doc: Document) -> bool:
        """True when ``doc`` is in this format."""

    @abstractmethod
    def load(self, doc: Document) -> list[RecordedSession]:
        """The sessions recorded in ``doc`` (most files hold one)."""


def split_sessions(
    doc: Document, fmt: str, builders: list[TranscriptBuilder], system: str | None = None
) -> list[RecordedSession]:
    """One session per builder that holds messages; numbered ``FILE#n`` when there are several."""
    built = [(b.finish(), b.notes()) for b in builders]
    built = [(messages, notes) for messages, notes in built if messages]
    if len(built) == 1:
        return [RecordedSession(str(doc.path), fmt, built[0][0], system=system, notes=built[0][1])]
    return [
        RecordedSession(f"{doc.path}#{n}", fmt, messages, system=system, notes=notes)
        for n, (messages, notes) in enumerate(built, 1)
    ]


def text_of(content: Any) -> str:
    """The plain text of a content value: a string, a list of text blocks, or a text block."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text_of(c) for c in content if isinstance(c, (str, dict)))
    if isinstance(content, dict):
        text = content.get("text")
        if isinstance(text, str):
            return text
        return ""
    return str(content)


def parse_arguments(arguments: Any) -> dict[str, Any]:
    """Tool-call arguments as an object: JSON strings are parsed, other values wrapped."""
    if isinstance(arguments, dict):
        return arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except ValueError:
            return {"input": arguments}
        return value if isinstance(value, dict) else {"input": value}
    if arguments is None:
        return {}
    return {"input": arguments}


def tool_name(name: Any) -> str:
    """A tool name the Anthropic API accepts (``[A-Za-z0-9_-]{1,64}``)."""
    joined = "_".join(_NAME_PART_RE.findall(str(name or "")))[:64]
    return joined or "unknown_tool"


class TranscriptBuilder:
    """Builds an Anthropic Messages history from a log's events, in order.

    ``turn`` keys name the model response an event belongs to (a message id, a response id):
    calls of one response logged with their results interleaved are put back into one assistant
    message, as the model sent them.
    """

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self._turns: dict[int, Hashable] = {}
        self._ids: dict[str, str] = {}
        """Source call id -> id in the history."""
        self._open: set[str] = set()
        """Ids of calls not answered yet."""
        self._used: set[str] = set()
        self._call_message: dict[str, int] = {}
        """Index of the assistant message that holds each call."""
        self._counter = 0
        self.orphan_results = 0

    # -- assistant side -------------------------------------------------------------------------

    def _assistant(self, turn: Hashable | None) -> dict[str, Any]:
        msgs = self.messages
        if msgs and msgs[-1]["role"] == "assistant":
            if turn is not None:
                self._turns.setdefault(len(msgs) - 1, turn)
            return msgs[-1]
        if (
            len(msgs) >= 2
            and msgs[-2]["role"] == "assistant"
            and all(b.get("type") == "tool_result" for b in msgs[-1]["content"])
            and self._same_response(len(msgs) - 2, turn)
        ):
            return msgs[-2]
        msgs.append({"role": "assistant", "content": []})
        if turn is not None:
            self._turns[len(msgs) - 1] = turn
        return msgs[-1]

    def _same_response(self, index: int, turn: Hashable | None) -> bool:
        """Whether an event of response ``turn`` belongs to the assistant message at ``index``.

        With response ids, by id. Without, a call logged while that message still awaits results
        is one of its parallel calls: an agent sends no new request before every result is in.
        """
        known = self._turns.get(index)
        if turn is not None and known is not None:
            return bool(known == turn)
        return any(self._call_message[c] == index for c in self._open)

    def assistant_text(self, text: str, turn: Hashable | None = None) -> None:
        """Text the model wrote (blank text is skipped)."""
        if text and text.strip():
            self._assistant(turn)["content"].append({"type": "text", "text": text})

    def tool_call(
        self, name: Any, arguments: Any, source_id: Any = None, turn: Hashable | None = None
    ) -> str:
        """A call the model made; returns its id in the history."""
        call_id = self._new_id(source_id)
        self._assistant(turn)["content"].append(
            {"type": "tool_use", "id": call_id, "name": tool_name(name), "input": parse_arguments(arguments)}
        )
        self._open.add(call_id)
        self._call_message[call_id] = len(self.messages) - 1
        return call_id

    def _new_id(self, source_id: Any) -> str:
        # Keep the log's own id where the API accepts it, so reports point back into the log.
        src = None if source_id is None else str(source_id)
        if src is not None and _ID_RE.match(src) and src not in self._used:
            call_id = src
        else:
            while True:
                self._counter += 1
                call_id = f"toolu_{self._counter:05d}"
                if call_id not in self._used:
                    break
        self._used.add(call_id)
        if src is not None:
            self._ids[src] = call_id
        return call_id

    # -- user side ------------------------------------------------------------------------------

    def _user(self) -> dict[str, Any]:
        if not self.messages or self.messages[-1]["role"] != "user":
            self.messages.append({"role": "user", "content": []})
        return self.messages[-1]

    def user_text(self, text: str) -> None:
        """Text the user (or the harness, speaking as the user) sent."""
        if text:
            self._user()["content"].append({"type": "text", "text": text})

    def user_block(self, block: dict[str, Any]) -> None:
        """A user content block kept as it is (an image, a document)."""
        self._user()["content"].append(block)

    def tool_result(
        self, content: Any, source_id: Any = None, *, call_id: str | None = None, is_error: bool = False
    ) -> bool:
        """The output of a call, by the log's id or the history's; False if no open call has it.

        A result no open call claims is kept as user text (the model did see it), and counted.
        """
        cid = call_id if call_id is not None else self._ids.get(str(source_id))
        if cid is None or cid not in self._open:
            self.orphan_results += 1
            self.user_text(content if isinstance(content, str) else text_of(content))
            return False
        self._open.discard(cid)
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": cid, "content": content}
        if is_error:
            block["is_error"] = True
        user = self._user()["content"]
        # Results come first in their user message, in the order they arrived.
        at = sum(1 for b in user if b.get("type") == "tool_result")
        user.insert(at, block)
        return True

    def finish(self) -> list[dict[str, Any]]:
        """The history built so far, without messages left empty."""
        return [m for m in self.messages if m["content"]]

    def notes(self) -> dict[str, int]:
        notes = {}
        if self.orphan_results:
            notes["orphan_results"] = self.orphan_results
        if self._open:
            notes["unanswered_calls"] = len(self._open)
        return notes
