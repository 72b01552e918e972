"""OpenAI Chat Completions: ``tool_calls`` on assistant messages, one ``role: "tool"`` message per
call right after them.

An assistant message with ``content: null`` (or ``[]``) and no calls is refused; pairing drops it,
and the user messages it stood between may then sit side by side, which Chat Completions takes as
it is (it does not want roles to alternate)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..exceptions import FormatError
from ..messages import History, Message, OpaquePart, Part, TextPart, ToolCallPart, ToolResultPart
from ._base import (
    Answer,
    CallIdRule,
    Format,
    FormatRules,
    ProviderAPI,
    RequestShape,
    ToolCall,
    ToolMessageRules,
    ToolSpec,
    Violation,
    arguments_json,
    blocks_chars,
    changed_arguments,
    check_tool_messages,
    declared_tool,
    exact_path,
    expect_mapping,
    field_of,
    input_chars,
    items_of,
    list_chars,
    mappings_in,
    object_chars,
)

__all__ = ["OPENAI_API", "OpenAIChatFormat", "content_text", "function_tools"]

_ROLES = ("system", "developer", "user", "assistant", "tool", "function")


def content_text(content: Any) -> str:
    """Text of a chat message content: the string, or its ``text`` parts joined by newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p["text"] for p in content
            if isinstance(p, Mapping) and p.get("type") == "text" and isinstance(p.get("text"), str)
        )  # fmt: skip
    return ""


_ID_RULE = CallIdRule(
    lambda i, k, c: (
        f"Invalid 'messages[{i}].tool_calls[{k}].id': string too long. Expected a string with "
        f"maximum length 40, but got a string with length {len(c)} instead."
    ),
    max_length=40,
)


OPENAI_API = ProviderAPI("openai", "https://api.openai.com", None)
"""OpenAI's API, the default provider: it claims no path of its own (it has the widest range of
paths, and the OpenAI-compatible servers share them), and its clients send no header of their
own."""


class OpenAIChatFormat(Format):
    """OpenAI Chat Completions ``messages`` (dicts, as the SDK's ``ChatCompletionMessageParam``)."""

    name = "openai-chat"
    request = RequestShape(
        "messages",
        tools_keys=("tools",),
        client_roles=frozenset({"user", "system", "developer", "tool", "function"}),
        api=OPENAI_API,
        route=exact_path("/v1/chat/completions"),
    )
    rules = FormatRules(call_id_rule=_ID_RULE, per_message=True, editable_arguments=True, pricing="openai")

    def detect(self, messages: Sequence[Any]) -> int:
        score = 1
        for m in messages:
            if not isinstance(m, Mapping) or m.get("role") not in _ROLES:
                return 0
            if m["role"] in ("system", "developer", "tool", "function") or "tool_calls" in m:
                score = 2
            content = m.get("content")
            if isinstance(content, list):
                for part in content:
                    if not isinstance(part, Mapping):
                        return 0
                    if part.get("type") in ("tool_use", "tool_result", "thinking"):
                        return 0
                    if part.get("type") in ("image_url", "input_audio", "refusal", "file"):
                        score = 2
            elif content is not None and not isinstance(content, str):
                return 0
        return score

    def load_message(self, index: int, raw: Any) -> Message:
        m = expect_mapping(raw, index)
        role = m.get("role")
        if role not in _ROLES:
            raise FormatError(f"unknown role {role!r}", index=index, field="role")
        content = m.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise FormatError(
                f"content must be a string, a list of parts or null, got {type(content).__name__}",
                index=index,
                field="content",
            )
        if role == "tool":
            call_id = _field_str(m, "tool_call_id", index, "tool_call_id")
            part = ToolResultPart(call_id, content_text(content), raw=m)
            return Message("tool", (part,), raw=m)
        parts: list[Part] = []
        if isinstance(content, str):
            if content:
                parts.append(TextPart(content))
        elif isinstance(content, list) and content:
            parts.append(OpaquePart(content))
        if role == "assistant":
            # what else an assistant message can carry instead of content: it is not empty
            parts.extend(OpaquePart(m[key]) for key in _OTHER_OUTPUT if m.get(key))
            calls = m.get("tool_calls")
            if calls is not None and not isinstance(calls, list):
                raise FormatError("tool_calls must be a list", index=index, field="tool_calls")
            for j, call in enumerate(calls or ()):
                c = expect_mapping(call, index, f"tool_calls[{j}]")
                fn = c.get("function")
                if fn is None:
                    fn = {}
                elif not isinstance(fn, Mapping):
                    raise FormatError(
                        f"function must be an object, got {type(fn).__name__}",
                        index=index,
                        field=f"tool_calls[{j}].function",
                    )
                call_id = _field_str(c, "id", index, f"tool_calls[{j}].id")
                name = _field_str(fn, "name", index, f"tool_calls[{j}].function.name")
                parts.append(ToolCallPart(call_id, name, fn.get("arguments"), raw=c))
        return Message(role if role != "developer" and role != "function" else "system", tuple(parts), raw=m)

    def dump(self, history: History) -> list[Any]:
        return [m.raw if not m.dirty else self.dump_message(m) for m in history]

    def dump_message(self, m: Message) -> dict[str, Any]:
        if m.role == "tool":
            (p,) = m.parts
            assert isinstance(p, ToolResultPart)
            if p.raw is None:
                return {"role": "tool", "tool_call_id": p.call_id, "content": p.text}
            base = dict(p.raw)
            base["tool_call_id"] = p.call_id
            base["content"] = _replace_text(base.get("content"), p.text)
            return base
        base = dict(m.raw) if isinstance(m.raw, Mapping) else {"role": m.role}
        if m.raw is None:  # a message the pipeline made (the note of archived turns): its text
            base["content"] = "\n".join([p.text for p in m.parts if isinstance(p, TextPart)])
        calls = [self._dump_call(p) for p in m.parts if isinstance(p, ToolCallPart)]
        if calls:
            base["tool_calls"] = calls
        else:
            base.pop("tool_calls", None)
        return base

    @staticmethod
    def _dump_call(p: ToolCallPart) -> Any:
        function = p.raw.get("function") if p.raw is not None else None
        held = function.get("arguments") if isinstance(function, Mapping) else None
        if p.raw is not None and p.raw.get("id") == p.id and not changed_arguments(p, held):
            return p.raw
        base = dict(p.raw) if p.raw is not None else {"type": "function"}
        base["id"] = p.id
        base["function"] = {
            **(function if isinstance(function, Mapping) else {"name": p.name}),
            "arguments": arguments_json(p.arguments),
        }
        return base

    def pack_results(self, results: list[ToolResultPart], rest: list[Message]) -> list[Message]:
        packed = [Message("tool", (r,), raw=r.raw, dirty=r.raw is None or r.modified) for r in results]
        return [*packed, *rest]

    def validate(self, history: History) -> list[Violation]:
        out = check_tool_messages(history, _RULES, _ID_RULE)
        empty = [
            _empty_assistant(i, m) for i, m in enumerate(history) if m.role == "assistant" and not m.parts
        ]
        out.extend(v for v in empty if v is not None)
        return sorted(out, key=lambda v: v.index)

    def tool_definitions(self, specs: Sequence[ToolSpec]) -> list[Any]:
        return function_tools(specs)

    def request_tools(self, request: Mapping[str, Any]) -> list[ToolSpec]:
        """The ``function`` tools of ``tools`` (``{"type": "function", "function": {"name",
        "description", "parameters"}}``); custom tools (free text in, no schema) are left out."""
        found = []
        for t in mappings_in(request.get("tools")):
            function = t.get("function")
            if t.get("type", "function") == "function" and isinstance(function, Mapping):
                spec = declared_tool(
                    function.get("name"), function.get("description"), function.get("parameters")
                )
                if spec is not None:
                    found.append(spec)
        return found

    def response_calls(self, response: Any) -> list[ToolCall]:
        """The function ``tool_calls`` of a ``ChatCompletion``'s first choice (or its dict), or
        of the assistant message itself."""
        choices = items_of(field_of(response, "choices"))
        message = field_of(choices[0], "message") if choices else response
        out = []
        for c in items_of(field_of(message, "tool_calls")):
            function = field_of(c, "function")
            if function is None:
                continue  # a custom tool's call: no function to run
            out.append(
                ToolCall.read(field_of(c, "id"), field_of(function, "name"), field_of(function, "arguments"))
            )
        return out

    def result_messages(self, answered: Sequence[Answer]) -> list[Any]:
        """One ``role: "tool"`` message per call (Chat Completions has no error flag)."""
        return [{"role": "tool", "tool_call_id": call.id, "content": text} for call, text, _ in answered]

    def message_chars(self, message: Message) -> int:
        m = message
        if not m.dirty and isinstance(m.raw, Mapping):
            return input_chars(m.raw)  # sent as it came
        if m.role == "tool":
            return sum(map(_result_chars, m.results))
        base = m.raw if isinstance(m.raw, Mapping) else {"role": m.role}
        calls = [_call_chars(p) for p in m.parts if isinstance(p, ToolCallPart)]
        return object_chars(base, {"tool_calls": list_chars(calls) if calls else None})


_RULES = ToolMessageRules(
    empty_id=lambda i: (
        f"Invalid 'messages[{i}].tool_calls[].id': empty string. Expected a string with minimum length 1."
    ),
    duplicate_id=lambda i, c: f"Invalid 'messages[{i}].tool_calls': duplicate tool_call id {c!r}.",
    missing=lambda i, c: (
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        f"'tool_call_id'. The following tool_call_ids did not have response messages: {c}"
    ),
    orphan=lambda i, c: (
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
        f"'tool_calls'. (messages[{i}], tool_call_id {c!r})"
    ),
)


_OTHER_OUTPUT = ("refusal", "audio", "function_call")
"""Keys of an assistant message that hold what the model gave instead of content (a refusal, a
spoken answer's id, a legacy function call): the message is not empty when one is set."""


def _empty_assistant(i: int, m: Message) -> Violation | None:
    """The 400 an assistant message with nothing in it gets: content ``null`` (or none) or ``[]``
    and no calls. An empty string is accepted."""
    content = m.raw.get("content") if isinstance(m.raw, Mapping) else None
    if content is None:
        message = f"Invalid value for 'messages[{i}].content': expected a string, got null."
    elif content == []:
        message = (
            f"Invalid 'messages[{i}].content': empty array. Expected an array with minimum length 1, "
            "but got an empty array instead."
        )
    else:
        return None
    return Violation(i, None, "empty_content", message)


def _replace_text(content: Any, text: str) -> Any:
    if isinstance(content, list):
        return [{"type": "text", "text": text}] + [
            p for p in content if not (isinstance(p, Mapping) and p.get("type") == "text")
        ]
    return text


def _field_str(obj: Mapping[str, Any], key: str, index: int, field: str) -> str:
    """A string field: ``""`` when absent (pairing repair handles that), an error when it holds
    something else (a number id would be silently lost)."""
    value = obj.get(key)
    if value is None or isinstance(value, str):
        return value or ""
    raise FormatError(f"{key} must be a string, got {type(value).__name__}", index=index, field=field)


def function_tools(specs: Sequence[ToolSpec]) -> list[Any]:
    """``{"type": "function", "function": {...}}`` tool definitions (Chat Completions, and
    LangChain's ``bind_tools``)."""
    return [
        {
            "type": "function",
            "function": {"name": s.name, "description": s.description, "parameters": s.fresh_schema()},
        }
        for s in specs
    ]


_NEW_RESULT = {"role": "tool"}
_NEW_CALL = {"type": "function"}


def _result_chars(p: ToolResultPart) -> int:
    """Chars of the ``tool`` message :meth:`OpenAIChatFormat.dump_message` sends for ``p``."""
    if p.raw is None:
        return object_chars(
            _NEW_RESULT, {"tool_call_id": input_chars(p.call_id), "content": input_chars(p.text)}
        )
    if not p.modified:
        return input_chars(p.raw)
    size = blocks_chars(p.raw.get("content"), p.text, "text")
    return object_chars(p.raw, {"tool_call_id": input_chars(p.call_id), "content": size})


def _call_chars(p: ToolCallPart) -> int:
    """Chars of one entry of ``tool_calls`` as :meth:`OpenAIChatFormat._dump_call` sends it."""
    function = p.raw.get("function") if p.raw is not None else None
    held = function.get("arguments") if isinstance(function, Mapping) else None
    if p.raw is not None and p.raw.get("id") == p.id and not changed_arguments(p, held):
        return input_chars(p.raw)
    fn = function if isinstance(function, Mapping) else {"name": p.name}
    arguments = input_chars(arguments_json(p.arguments))
    return object_chars(
        p.raw if p.raw is not None else _NEW_CALL,
        {"id": input_chars(p.id), "function": object_chars(fn, {"arguments": arguments})},
    )
