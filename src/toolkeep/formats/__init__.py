"""Provider formats: a registry by name and auto-detection.

>>> get_format("anthropic").name
'anthropic'
>>> detect_format([{"role": "tool", "tool_call_id": "c1", "content": "ok"}]).name
'openai-chat'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..exceptions import DetectionError, FormatError
from . import _sdk

# ``_base`` and ``_sdk`` are this package's own: what other packages use of them (an adapter's
# pieces, the sizes and texts steps and policies share with the formats) is handed on here.
from ._base import (
    CONTINUE_TEXT,
    MESSAGE_CHARS_SLACK,
    Answer,
    CallIdRule,
    Format,
    FormatRules,
    ProviderAPI,
    RequestShape,
    ToolCall,
    ToolSpec,
    Violation,
    blank_text,
    changed_arguments,
    input_chars,
    results_in_next_user,
    text_chars,
)
from ._sdk import has_objects, plain_view
from .anthropic import AnthropicFormat
from .bedrock import BedrockFormat
from .gemini import GeminiFormat
from .langchain import LangChainFormat
from .openai_chat import OpenAIChatFormat
from .openai_responses import OpenAIResponsesFormat

__all__ = [
    "CONTINUE_TEXT",
    "FORMATS",
    "MESSAGE_CHARS_SLACK",
    "Answer",
    "CallIdRule",
    "Format",
    "FormatRules",
    "ProviderAPI",
    "RequestShape",
    "ToolCall",
    "ToolSpec",
    "Violation",
    "blank_text",
    "changed_arguments",
    "detect_format",
    "get_format",
    "has_objects",
    "input_chars",
    "looks_like",
    "plain_view",
    "resolve_format",
    "results_in_next_user",
    "text_chars",
    "validate",
]

FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        AnthropicFormat(),
        OpenAIChatFormat(),
        OpenAIResponsesFormat(),
        GeminiFormat(),
        BedrockFormat(),
        LangChainFormat(),
    )
}
"""Every registered format by name, in detection order (plain text histories go to the first)."""


def get_format(name: str) -> Format:
    """The format registered under ``name``."""
    try:
        return FORMATS[name]
    except KeyError:
        known = ", ".join(FORMATS)
        raise FormatError(f"unknown format {name!r} (known: {known}, or auto)") from None


def detect_format(messages: Sequence[Any]) -> Format:
    """The format a history is written in.

    A history with features only one format has is that format. A history every format reads the
    same way (plain text turns, no tool calls) gets the first compatible format: nothing in it is
    format-specific. Two formats with distinctive features, or none compatible, is an error.
    """
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        raise DetectionError(f"a history is a list of messages, got {type(messages).__name__}")
    plain = _sdk.plain_view(messages)
    scores = {name: f.detect(plain) for name, f in FORMATS.items()}
    best = max(scores.values(), default=0)
    if best == 0:
        index, field = _first_unreadable(plain)
        raise DetectionError(
            "could not detect the history's format: "
            + ("it" if index is None else "this message")
            + " matches none of "
            + ", ".join(FORMATS)
            + " (name one with format=...)",
            index=index,
            field=field,
        )
    candidates = [name for name, score in scores.items() if score == best]
    if best == 2 and len(candidates) > 1:
        raise DetectionError(
            "ambiguous history format: could be " + " or ".join(candidates) + " (name one with format=...)"
        )
    return FORMATS[candidates[0]]


def looks_like(messages: Sequence[Any], format: str) -> list[str]:
    """The formats ``messages`` look like when the named ``format`` is not one of them: empty
    when it is (or for ``"auto"``, an unknown name, or a history that is not a list).

    A history every format reads the same way (plain text turns) looks like any of them; one
    with features only some formats have looks like those, and a format it cannot be, or that
    reads it only as plain text, is not one. What the CLI warns with when ``--format`` names a
    format the input does not look like.

    >>> looks_like([{"role": "tool", "tool_call_id": "c1", "content": "ok"}], "anthropic")
    ['openai-chat']
    >>> looks_like([{"role": "user", "content": "hi"}], "anthropic")
    []
    """
    if format not in FORMATS or not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        return []
    plain = _sdk.plain_view(messages)
    scores = {name: f.detect(plain) for name, f in FORMATS.items()}
    best = max(scores.values(), default=0)
    if best == 0 or scores[format] == best:
        return []
    return [name for name, score in scores.items() if score == best]


def _first_unreadable(messages: Sequence[Any]) -> tuple[int | None, str | None]:
    """Where detection failed: the first message no format accepts on its own, and the field the
    first format that can say so names (``(None, None)`` when each message fits some format)."""
    for i, m in enumerate(messages):
        if any(f.detect([m]) for f in FORMATS.values()):
            continue
        for f in FORMATS.values():
            try:
                f.load([m])
            except FormatError as exc:
                if exc.field:
                    return i, exc.field
            except Exception:  # a loader's own bug must not hide the detection error
                continue
        return i, None
    return None, None


def resolve_format(messages: Sequence[Any], format: str | Format = "auto") -> Format:
    """``format`` itself, the registered format it names, or the detected one for ``"auto"``.

    When ``messages`` holds SDK objects (pydantic models), the format comes wrapped so that it
    reads them and gives them back as objects of the same class.
    """
    if isinstance(format, Format):
        fmt = format
    elif format == "auto":
        fmt = detect_format(messages)
    else:
        fmt = get_format(format)
    return _sdk.wrap(fmt) if _sdk.has_objects(messages) else fmt


def validate(messages: Sequence[Any], format: str | Format = "auto") -> list[Violation]:
    """Every breach of the provider's pairing rules in ``messages`` (empty when valid).

    >>> validate([{"role": "assistant", "content": [
    ...     {"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]}])[0].rule
    'missing_result'
    """
    fmt = resolve_format(messages, format)
    return fmt.validate(fmt.load(messages))
