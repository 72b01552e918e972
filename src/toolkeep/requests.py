"""Request objects: a provider's whole request body, whose history toolkeep prepares.

A request object is the JSON body of one model request (or the keyword arguments of the SDK call
that sends it). toolkeep prepares the history it holds and gives back an object of the same shape
in which every other field is the very value it was: ``system``, ``tools``, ``thinking``,
``context_management``, ``metadata``, ``instructions``, ``systemInstruction``, ... The history's
key says which format it is in:

============  ==========================================  ===================================
key           request                                     format of the history
============  ==========================================  ===================================
``messages``  Anthropic Messages, OpenAI Chat Completions,  detected from the messages (or named)
              Bedrock Converse
``input``     OpenAI Responses                            ``openai-responses``
``contents``  Gemini ``generateContent`` (REST, with       ``gemini``
              ``systemInstruction``), google-genai's
              ``generate_content`` arguments (``config``
              holding ``system_instruction``)
============  ==========================================  ===================================

``input`` and ``contents`` may be a plain string, which both APIs take as one user turn: there is
nothing to pair in it, and the request comes back as it is. A Responses request that continues
state kept on the server (``previous_response_id`` or ``conversation`` set) holds only what is
new since then: its outputs may answer calls that only the server has, so its input is read with
``OpenAIResponsesFormat(previous_response=True)`` (:attr:`Request.continues`).

What one ``prepare`` is given, a request object or a list of messages with its tool definitions
and system prompt beside it, is read once, by :func:`read_input`, into an :class:`Incoming`: the
history, the format to read it in, what is sent beside it, the key of its conversation, and the
shape its answer takes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from .conversation_key import history_key
from .exceptions import FormatError
from .formats import FORMATS, Format, RequestShape, Violation, validate
from .report import Prepared, Report

__all__ = [
    "CONTINUING_KEYS",
    "EXTRA_KEYS",
    "HISTORY_KEYS",
    "SYSTEM_KEYS",
    "Incoming",
    "PreparedRequest",
    "Request",
    "read_input",
    "read_request",
    "system_text",
    "validate_request",
]

_SHAPES: dict[str, RequestShape] = {f.name: f.request for f in FORMATS.values() if f.request is not None}
"""Each format's request shape (:attr:`toolkeep.formats.Format.request`), by format name: what
this module knows of a request body, it reads there."""


def _keys(field: str) -> tuple[str, ...]:
    """The keys every request shape names under ``field``, in the formats' order, once each."""
    return tuple(dict.fromkeys(key for shape in _SHAPES.values() for key in getattr(shape, field)))


def _history_keys() -> dict[str, str | None]:
    by_key: dict[str, list[str]] = {}
    for name, shape in _SHAPES.items():
        by_key.setdefault(shape.history_key, []).append(name)
    return {key: names[0] if len(names) == 1 else None for key, names in by_key.items()}


HISTORY_KEYS: dict[str, str | None] = _history_keys()
"""The key that holds a request's history, and the format it implies (``None``: detected, the
key being shared by several formats)."""
_TEXT_KEYS = tuple(dict.fromkeys(s.history_key for s in _SHAPES.values() if s.text_history))
"""History keys whose value may be a plain string instead of a list."""
SYSTEM_KEYS = _keys("system_keys")
"""Keys of a request's system prompt (Anthropic, Bedrock Converse, OpenAI Responses, Gemini REST
and google-genai)."""
EXTRA_KEYS = SYSTEM_KEYS + _keys("tools_keys")
"""Keys of a request's system prompt and tool definitions (Anthropic, Bedrock Converse, OpenAI
Chat and Responses, Gemini REST): what the request budget counts beside the history."""
CONTINUING_KEYS = _keys("continuation_keys")
"""Keys of a Responses request that continues state kept on the server, when set."""
_CONTINUING_BY_KEY: dict[str, tuple[str, ...]] = {
    key: tuple(
        dict.fromkeys(k for s in _SHAPES.values() if s.history_key == key for k in s.continuation_keys)
    )
    for key in HISTORY_KEYS
}
_CONFIGS: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    dict.fromkeys((s.config_key, s.config_keys) for s in _SHAPES.values() if s.config_key is not None)
)
"""An SDK call's configuration object's key, and the keys in it :meth:`Request.extras` counts."""


class PreparedRequest(NamedTuple):
    """What ``prepare`` returns for a request object: the request to send and the report."""

    request: dict[str, Any]
    report: Report


@dataclass(frozen=True)
class Request:
    """A request object, read: where its history is and what format that history is in."""

    body: Mapping[str, Any]
    key: str
    """The key holding the history: ``messages``, ``input`` or ``contents``."""
    history: Sequence[Any] | None
    """The history, or ``None`` when it is a plain string (nothing to prepare)."""
    continues: bool
    """True for a Responses request that continues server-side state."""

    def format(self, requested: str | Format = "auto") -> str | Format:
        """The format to read the history with: ``requested`` itself, the one the key implies for
        ``"auto"``, and for a continued Responses request the format that keeps outputs of calls
        stored on the server (unless ``requested`` is a format object, used as given)."""
        if isinstance(requested, Format):
            return requested
        name = (HISTORY_KEYS[self.key] or requested) if requested == "auto" else requested
        if self.continues and name in FORMATS:
            continuing = FORMATS[name].continuing()
            if continuing is not FORMATS[name]:
                return continuing
        return name

    def format_name(self, requested: str | Format = "auto") -> str:
        fmt = self.format(requested)
        return fmt.name if isinstance(fmt, Format) else fmt

    def extras(self) -> tuple[Any, ...]:
        """What the request sends beside its history and the request budget counts: its tool
        definitions and system prompt, under the keys of :data:`EXTRA_KEYS` (and those of a
        google-genai ``config``), each as it is."""
        found = [self.body[k] for k in EXTRA_KEYS if self.body.get(k) is not None]
        for config_key, keys in _CONFIGS:
            config = self.body.get(config_key)
            for key in keys:
                value = config.get(key) if isinstance(config, Mapping) else getattr(config, key, None)
                if value is not None:
                    found.append(value)
        return tuple(found)

    def with_history(self, history: Any) -> dict[str, Any]:
        """The request with ``history`` in its history's place (the key keeps its position), every
        other field the very value it was."""
        out = dict(self.body)
        out[self.key] = history
        return out


def read_request(body: Mapping[str, Any]) -> Request:
    """Where the history of request object ``body`` is; a :class:`FormatError` naming the field
    when it has none, more than one, or one that is no list (nor a string where one is allowed)."""
    keys = [key for key in HISTORY_KEYS if key in body]
    if not keys:
        held = ", ".join(repr(k) for k in list(body)[:8]) or "none"
        raise FormatError(
            f"a request object holds its history under 'messages', 'input' or 'contents' (its keys: {held})"
        )
    if len(keys) > 1:
        raise FormatError(f"a request object holds one history, this one has {' and '.join(map(repr, keys))}")
    key = keys[0]
    value = body[key]
    if isinstance(value, str) and key in _TEXT_KEYS:
        history = None
    elif isinstance(value, (list, tuple)):
        history = value
    else:
        allowed = "a list or a string" if key in _TEXT_KEYS else "a list of messages"
        raise FormatError(f"the request's {key!r} must be {allowed}, got {type(value).__name__}", field=key)
    continues = any(body.get(k) is not None for k in _CONTINUING_BY_KEY[key])
    return Request(body, key, history, continues)


@dataclass(frozen=True)
class Incoming:
    """What one ``prepare`` is given, read once (:func:`read_input`): what every later step
    needs of it."""

    history: Sequence[Any] | None
    """The messages to prepare; ``None`` for a request whose history is a plain string."""
    format: str | Format
    """The format to read them in (for a request object, :meth:`Request.format`)."""
    extras: tuple[Any, ...]
    """What is sent beside the history and the request budget counts (tools, system prompt)."""
    key: str | None
    """The key of the conversation it begins (:func:`~toolkeep.conversation_key.history_key`: its
    first message's, without the keys its format's clients move); ``None`` when it continues the
    one in hand, or has no message."""
    request: Request | None = None
    """The request object it came in; ``None`` for a list of messages."""

    def answer(self, messages: list[Any], report: Report) -> Prepared | PreparedRequest:
        """What ``prepare`` returns for it: ``messages`` in a list, or in the request object in
        place of its history."""
        if self.request is None:
            return Prepared(messages, report)
        return PreparedRequest(self.request.with_history(messages), report)

    def unchanged(self) -> PreparedRequest:
        """What ``prepare`` returns for a request whose history is a plain string: the request as
        it came (nothing to pair: no policy runs, and the report is empty)."""
        request = self.request
        if request is None or self.history is not None:
            raise ValueError("only a request whose history is a plain string comes back unchanged")
        name = self.format.name if isinstance(self.format, Format) else self.format
        return PreparedRequest(request.with_history(request.body[request.key]), Report(format=name))


def read_input(
    given: Sequence[Any] | Mapping[str, Any],
    format: str | Format = "auto",
    *,
    tools: Any = None,
    system: Any = None,
    request: Request | None = None,
    key: str | None = None,
    continuing: Sequence[Any] = (),
) -> Incoming:
    """``given``, a request object or a list of messages (``tools`` and ``system``: any JSON
    value, as sent beside it), read: a :class:`FormatError` says what is wrong with it.

    ``request`` is what :func:`read_request` read of a request object already, and ``key`` the
    conversation's key, for a caller that has them: they are not computed again. A history whose
    first message is the very object ``continuing`` begins with (the conversation in hand) is not
    keyed at all."""
    if isinstance(given, Mapping):
        if tools is not None or system is not None:
            raise FormatError(
                "a request object carries its own tools and system prompt: pass them in it",
                field="tools" if tools is not None else "system",
            )
        if request is None:
            request = read_request(given)
        history, format, extras = request.history, request.format(format), request.extras()
    elif isinstance(given, (list, tuple)):
        history, extras = given, tuple(x for x in (tools, system) if x is not None)
    else:
        raise FormatError(f"a history is a list of messages, got {type(given).__name__}")
    if not history or (continuing and continuing[0] is history[0]):
        key = None
    elif key is None:
        key = history_key(history, format)
    return Incoming(history, format, extras, key, request)


def system_text(body: Mapping[str, Any]) -> str | None:
    """The system prompt of request object ``body`` as one string (its JSON when it is no
    string), under the first of :data:`SYSTEM_KEYS` it has; ``None`` when it has none."""
    for key in SYSTEM_KEYS:
        if key in body:
            value = body[key]
            return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return None


def validate_request(body: Mapping[str, Any], format: str | Format = "auto") -> list[Violation]:
    """Every breach of the provider's pairing rules in the history of request object ``body``
    (read as :meth:`Request.format` says); indexes are those of the history."""
    request = read_request(body)
    if request.history is None:
        return []
    return validate(request.history, request.format(format))
