"""The neutral message model every step works on.

Each provider format maps its history to a list of :class:`Message` and back. A message keeps the
provider object it came from (``raw``) so that whatever the pipeline does not touch goes back out
exactly as it came in: a step never edits ``raw``, it builds new parts and marks the message
``dirty``; the format adapter then rebuilds only dirty messages.

Parts::

    Message(role, parts=[TextPart | ToolCallPart | ToolResultPart | OpaquePart, ...])

``OpaquePart`` is anything the pipeline has no business with (images, thinking blocks, server
tool blocks, unknown block types): carried through by reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar

__all__ = [
    "History",
    "Message",
    "OpaquePart",
    "Part",
    "Role",
    "TextPart",
    "ToolCallPart",
    "ToolResultPart",
]

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]

_T = TypeVar("_T")

# The model is immutable by contract: type checkers see frozen dataclasses and flag an assignment.
# At run time they are plain slotted dataclasses, built 3-4x faster than frozen ones (3.11 stores
# a slot directly; a frozen __init__ calls object.__setattr__ per field): a resumed session loads
# thousands of messages before its first request. Nothing may assign to one: the session's caches
# take an unchanged object for unchanged content. Use ``dataclasses.replace`` or the helpers.
if TYPE_CHECKING:
    from typing_extensions import dataclass_transform

    @dataclass_transform(frozen_default=True, field_specifiers=(field,))
    def _value(cls: type[_T]) -> type[_T]: ...

else:

    def _value(cls):
        # unsafe_hash: hashed by value as a frozen dataclass is (the contract makes it safe)
        return dataclass(slots=True, unsafe_hash=True)(cls)


@_value
class TextPart:
    """Plain text written by the user, the system or the model."""

    text: str
    raw: Any = None
    """The provider block this came from (``None`` when the text was a bare string)."""
    kind: Literal["text"] = "text"


@_value
class OpaquePart:
    """A block the pipeline never reads or changes (image, thinking, server tool, unknown)."""

    raw: Any
    kind: Literal["opaque"] = "opaque"


@_value
class ToolCallPart:
    """One tool call made by the model."""

    id: str
    """The call id; may differ from the id in ``raw`` after a deterministic rename."""
    name: str
    arguments: Any = None
    """What the provider holds as the call's input, as it holds it: a mapping (Anthropic, Bedrock,
    Gemini, LangChain) or a JSON string (OpenAI Chat and Responses ``function_call``; a free
    string for a Responses ``custom_tool_call``)."""
    raw: Any = None
    modified: bool = False
    """True once ``arguments`` or ``id`` differ from ``raw`` by a step's doing (:meth:`with_arguments`
    sets it); the adapter then writes them back in the provider's own place, with the keys the call
    came with, and an unmodified call goes out as ``raw`` itself. Pairing repair renames with
    ``replace(call, id=...)`` and leaves it False: adapters compare ``id`` with ``raw``'s own, so a
    rename is written back either way."""
    kind: Literal["tool_call"] = "tool_call"

    def with_arguments(self, arguments: Any) -> ToolCallPart:
        """A copy sent with ``arguments`` (in the shape the provider holds them: a step that
        changes a JSON-string argument gives back a string)."""
        return replace(self, arguments=arguments, modified=True)


@_value
class ToolResultPart:
    """The answer to one tool call, with what the pipeline knows about its original text.

    ``text`` is the text as it will be sent. When a step shortens it, ``original`` keeps the full
    text, ``key`` its archive key and ``saved_path`` the persisted copy, so that a later step
    works from the original and carries the way back.
    """

    call_id: str
    text: str
    is_error: bool = False
    raw: Any = None
    name: str | None = None
    """Name of the tool that produced it, filled in by pairing repair from the claiming call."""
    synthetic: bool = False
    """True for the error result that pairing repair puts in for a call that had none."""
    original: str | None = None
    """The full original text when ``text`` is a shortened form; ``None`` when ``text`` is it."""
    key: str | None = None
    saved_path: str | None = None
    save_error: str | None = None
    modified: bool = False
    """True once ``text``, ``call_id`` or ``is_error`` differ from ``raw``."""
    kind: Literal["tool_result"] = "tool_result"

    @property
    def full_text(self) -> str:
        """The original text, whether or not this result has been shortened."""
        return self.text if self.original is None else self.original

    def named(self, name: str | None) -> ToolResultPart:
        """A copy naming the tool that produced it (hot path: built directly, not by replace)."""
        return ToolResultPart(
            self.call_id, self.text, self.is_error, self.raw, name, self.synthetic, self.original,
            self.key, self.saved_path, self.save_error, self.modified,
        )  # fmt: skip

    def with_text(self, text: str, **changes: Any) -> ToolResultPart:
        """A copy sent as ``text``, remembering the original."""
        return replace(self, text=text, original=self.full_text, modified=True, **changes)


Part: TypeAlias = TextPart | OpaquePart | ToolCallPart | ToolResultPart


@_value
class Message:
    """One message of a history, in neutral form."""

    role: Role
    parts: tuple[Part, ...]
    raw: Any = None
    """The provider message this came from; ``None`` for a message the pipeline made."""
    dirty: bool = False
    """True when ``parts`` no longer match ``raw`` and the adapter must rebuild the message."""
    meta: dict[str, Any] = field(default_factory=dict, compare=False)
    """Adapter-private facts about ``raw`` (e.g. that its content was a bare string)."""

    @property
    def calls(self) -> tuple[ToolCallPart, ...]:
        return tuple([p for p in self.parts if isinstance(p, ToolCallPart)])

    @property
    def results(self) -> tuple[ToolResultPart, ...]:
        return tuple([p for p in self.parts if isinstance(p, ToolResultPart)])

    def with_parts(self, parts: Sequence[Part]) -> Message:
        """A copy holding ``parts``, marked for rebuilding."""
        return replace(self, parts=tuple(parts), dirty=True)


History: TypeAlias = list[Message]
