"""pydantic-ai's message objects as a format: ``ModelRequest``/``ModelResponse`` lists, read into
toolkeep's neutral model and given back as the objects they were.

The format of :mod:`toolkeep.integrations.pydantic_ai` (which hands it on). It is not in
:data:`toolkeep.formats.FORMATS`: its histories are objects of a framework toolkeep does not
need, never JSON, and a caller names it (``format=FORMAT``) rather than having it detected.

Needs ``pip install 'toolkeep[pydantic-ai]'`` (``pydantic-ai-slim``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ..messages import History, Message, OpaquePart, Part, TextPart, ToolCallPart, ToolResultPart
from ._base import Format, FormatRules, Violation, changed_arguments, results_in_next_user
from .anthropic import AnthropicFormat

try:
    from pydantic_ai import messages as pa
except ImportError as exc:  # pragma: no cover - the extra is installed where this is tested
    raise ImportError(
        f"the pydantic-ai format needs pydantic_ai: pip install 'toolkeep[pydantic-ai]' ({exc})"
    ) from exc

__all__ = ["FORMAT", "PydanticAIFormat"]

_ERROR_OUTCOMES = ("failed", "retried")


def _result_text(part: pa.ToolReturnPart) -> str:
    if isinstance(part.content, str):
        return part.content
    return part.model_response_str(wrap_if_error=False)


class PydanticAIFormat(Format):
    """pydantic-ai ``ModelRequest``/``ModelResponse`` lists, read and given back as objects.

    A ``ModelRequest`` is a user turn whose ``ToolReturnPart`` s (and tool ``RetryPromptPart`` s)
    are results; a ``ModelResponse`` an assistant turn whose ``ToolCallPart`` s are calls. Native
    (provider-run) tool parts, prompts, thinking and files are carried untouched. pydantic-ai sends
    a history on to any provider, so :meth:`validate` holds it to the strictest rules in use
    (Anthropic's: every call answered in the next request, ids unique in the history).
    """

    name = "pydantic-ai"
    rules = FormatRules(unique_call_ids=True, grouped_results=True, editable_arguments=True)
    native_objects = True

    def detect(self, messages: Sequence[Any]) -> int:
        ok = all(isinstance(m, (pa.ModelRequest, pa.ModelResponse)) for m in messages)
        return 2 if messages and ok else 0

    def load(self, messages: Sequence[Any]) -> History:
        return [self._load_message(m) for m in messages]

    @staticmethod
    def _load_message(m: Any) -> Message:
        parts: list[Part] = []
        if isinstance(m, pa.ModelResponse):
            for p in m.parts:
                if isinstance(p, pa.ToolCallPart):
                    parts.append(ToolCallPart(p.tool_call_id, p.tool_name, p.args, raw=p))
                elif isinstance(p, pa.TextPart):
                    parts.append(TextPart(p.content, raw=p))
                else:
                    parts.append(OpaquePart(p))
            return Message("assistant", tuple(parts), raw=m)
        for q in m.parts:
            if isinstance(q, pa.ToolReturnPart):
                parts.append(
                    ToolResultPart(
                        q.tool_call_id, _result_text(q), q.outcome in _ERROR_OUTCOMES, raw=q, name=q.tool_name
                    )
                )
            elif isinstance(q, pa.RetryPromptPart) and q.tool_name is not None:
                parts.append(
                    ToolResultPart(q.tool_call_id, q.model_response(), True, raw=q, name=q.tool_name)
                )
            else:
                parts.append(OpaquePart(q))
        return Message("user", tuple(parts), raw=m)

    def dump(self, history: History) -> list[Any]:
        return [m.raw if not m.dirty else self._dump_message(m) for m in history]

    def _dump_message(self, m: Message) -> Any:
        parts = [self._dump_part(p) for p in m.parts]
        if m.raw is not None:
            return dataclasses.replace(m.raw, parts=parts)
        return pa.ModelRequest(parts=parts)  # results pairing repair had to put in a new turn

    @staticmethod
    def _dump_part(p: Part) -> Any:
        if isinstance(p, ToolCallPart):
            if p.raw.tool_call_id == p.id and not changed_arguments(p, p.raw.args):
                return p.raw
            return dataclasses.replace(p.raw, tool_call_id=p.id, args=p.arguments)
        if not isinstance(p, ToolResultPart):
            return p.raw
        if p.raw is None:  # a synthetic result for a call that had none
            return pa.ToolReturnPart(p.name or "", p.text, p.call_id, outcome="failed")
        if not p.modified:
            return p.raw
        if isinstance(p.raw, pa.RetryPromptPart):
            return dataclasses.replace(p.raw, content=p.text, tool_call_id=p.call_id)
        files = p.raw.files if not isinstance(p.raw.content, str) else []
        content: Any = [p.text, *files] if files else p.text  # images and documents stay
        outcome = p.raw.outcome if p.is_error == (p.raw.outcome in _ERROR_OUTCOMES) else "failed"
        return dataclasses.replace(p.raw, content=content, tool_call_id=p.call_id, outcome=outcome)

    def pack_results(self, results: list[ToolResultPart], rest: list[Message]) -> list[Message]:
        return results_in_next_user(results, rest)

    def validate(self, history: History) -> list[Violation]:
        return _STRICTEST.validate(history)


_STRICTEST = AnthropicFormat()
FORMAT = PydanticAIFormat()
"""The format instance to pass as ``Session.prepare(messages, format=FORMAT)``."""
