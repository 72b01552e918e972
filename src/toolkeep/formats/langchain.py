"""LangChain messages: ``BaseMessage`` objects, or their ``messages_to_dict`` JSON form.

``AIMessage.tool_calls`` holds the calls; each is answered by one ``ToolMessage`` (its
``tool_call_id``; ``status="error"`` marks a failure; ``artifact`` is carried untouched) right
after the ``AIMessage``. The objects are read and given back natively (``langchain-core`` is needed
only to build a new ``ToolMessage`` when the input holds objects); the dict form
``{"type": "ai", "data": {...}}`` needs nothing.

LangChain sends a history on to some provider, so its validator takes the strictest of their rules:
one result per call right after its message (OpenAI), and call ids unique in the request
(Anthropic), and no ``AIMessage`` with neither content nor calls (every provider refuses one
mid-history). Violations are worded like LangGraph's ``INVALID_CHAT_HISTORY`` error. Pairing drops
such an empty ``AIMessage``; the messages it stood between are left side by side, as a LangChain
history may hold them: each provider integration sends them on in its provider's shape
(``langchain-anthropic`` merges consecutive human messages, for one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..exceptions import FormatError
from ..messages import History, Message, OpaquePart, Part, Role, TextPart, ToolCallPart, ToolResultPart
from ._base import (
    Format,
    FormatRules,
    ToolMessageRules,
    ToolSpec,
    Violation,
    arguments_json,
    blocks_chars,
    changed_arguments,
    check_tool_messages,
    input_chars,
    list_chars,
    object_chars,
    results_as_tool_messages,
)
from .openai_chat import function_tools

__all__ = ["LangChainFormat", "is_langchain_message"]

_ROLES: dict[str, Role] = {
    "human": "user",
    "ai": "assistant",
    "AIMessageChunk": "assistant",
    "system": "system",
    "tool": "tool",
    "chat": "user",
    "function": "user",
}


def is_langchain_message(value: Any) -> bool:
    """True for a ``langchain_core`` message object (checked without importing LangChain)."""
    return type(value).__module__.startswith("langchain_core.") and isinstance(
        getattr(value, "type", None), str
    )


def _fields(m: Any) -> tuple[str, Mapping[str, Any] | Any] | None:
    """``(type, data)`` of a message object or of its dict form; ``None`` for anything else."""
    if is_langchain_message(m):
        return m.type, m
    if isinstance(m, Mapping) and isinstance(m.get("type"), str) and isinstance(m.get("data"), Mapping):
        return m["type"], m["data"]
    return None


def _get(data: Any, key: str, default: Any = None) -> Any:
    if isinstance(data, Mapping):
        return data.get(key, default)
    return getattr(data, key, default)


def content_text(content: Any) -> str:
    """Text of a message content: the string, or its text blocks (or plain strings) joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b if isinstance(b, str) else b.get("text", "")
            for b in content
            if isinstance(b, str) or (isinstance(b, Mapping) and b.get("type") == "text")
        )
    return ""


class LangChainFormat(Format):
    """LangChain ``BaseMessage`` lists (objects or ``messages_to_dict`` dicts)."""

    name = "langchain"
    # LangChain sends a history on to whichever provider the model is: it suggests no price
    # list, so the default (anthropic-5m) applies unless the config names one
    rules = FormatRules(unique_call_ids=True, editable_arguments=True, pricing=None)
    native_objects = True

    def detect(self, messages: Sequence[Any]) -> int:
        for m in messages:
            fields = _fields(m)
            if fields is None or fields[0] not in _ROLES:
                return 0
        return 2 if messages else 0

    def load_message(self, index: int, raw: Any) -> Message:
        fields = _fields(raw)
        if fields is None:
            raise FormatError(
                f"expected a LangChain message or its dict form, got {type(raw).__name__}", index=index
            )
        kind, data = fields
        role = _ROLES.get(kind)
        if role is None:
            raise FormatError(f"unknown message type {kind!r}", index=index, field="type")
        content = _get(data, "content")
        if role == "tool":
            call_id = _get(data, "tool_call_id")
            part = ToolResultPart(
                call_id if isinstance(call_id, str) else "",
                content_text(content),
                is_error=_get(data, "status") == "error",
                raw=raw,
                name=name if isinstance(name := _get(data, "name"), str) else None,  # steps lower() it
            )
            return Message("tool", (part,), raw=raw)
        parts: list[Part] = []
        if isinstance(content, str) and content:
            parts.append(TextPart(content))
        elif isinstance(content, list) and content:
            parts.append(OpaquePart(content))
        if role == "assistant":
            invalid = _get(data, "invalid_tool_calls")
            if invalid:  # calls the model sent cut short or malformed: the message is not empty
                parts.append(OpaquePart(invalid))
            calls = _get(data, "tool_calls") or ()
            if not isinstance(calls, (list, tuple)):
                raise FormatError(
                    f"tool_calls must be a list, got {type(calls).__name__}", index=index, field="tool_calls"
                )
            for call in calls:
                if not isinstance(call, Mapping):
                    raise FormatError("tool_calls items must be objects", index=index, field="tool_calls")
                call_id, name = call.get("id"), call.get("name")
                parts.append(
                    ToolCallPart(
                        call_id if isinstance(call_id, str) else "",
                        name if isinstance(name, str) else "",
                        call.get("args"),
                        raw=call,
                    )
                )
        return Message(role, tuple(parts), raw=raw)

    def dump(self, history: History) -> list[Any]:
        objects = any(is_langchain_message(m.raw) for m in history)
        return [m.raw if not m.dirty else self._dump_message(m, objects) for m in history]

    def _dump_message(self, m: Message, objects: bool) -> Any:
        if m.role == "tool":
            (p,) = m.parts
            assert isinstance(p, ToolResultPart)
            return self._dump_result(p, objects)
        if m.raw is None:  # a message the pipeline made (the note of archived turns): its text
            return _made_text(m, objects)
        kept = {c.id for c in m.calls}
        update: dict[str, Any] = {"tool_calls": [self._dump_call(c) for c in m.calls]}
        fields = _fields(m.raw)
        data = fields[1] if fields is not None else None
        content = _get(data, "content")
        if isinstance(content, list):  # Anthropic-style tool_use blocks of pruned calls go too
            update["content"] = [
                b for b in content
                if not (isinstance(b, Mapping) and b.get("type") == "tool_use" and b.get("id") not in kept)
            ]  # fmt: skip
        changed = _changed_arguments(m.calls)
        if changed:
            update.update(_mirrored(data, update.get("content"), changed))
        return _updated(m.raw, update)

    @staticmethod
    def _dump_call(c: ToolCallPart) -> Any:
        """``tool_calls[k]``: ``raw``, or a copy with the call's id and (changed) ``args``."""
        raw = c.raw if c.raw is not None else {}
        changed = changed_arguments(c, raw.get("args"))
        if c.raw is not None and raw.get("id") == c.id and not changed:
            return c.raw
        call = {**raw, "id": c.id}
        if changed:
            call["args"] = c.arguments
        return call

    @staticmethod
    def _dump_result(p: ToolResultPart, objects: bool) -> Any:
        if not p.modified and p.raw is not None:
            return p.raw
        status = "error" if p.is_error else None
        if p.raw is not None:
            fields = _fields(p.raw)
            old = _get(fields[1], "content") if fields is not None else None
            update: dict[str, Any] = {"tool_call_id": p.call_id, "content": _replace_text(old, p.text)}
            if status:
                update["status"] = status
            return _updated(p.raw, update)
        if objects:
            try:
                from langchain_core.messages import ToolMessage
            except ImportError as exc:  # pragma: no cover - objects imply langchain-core is there
                raise FormatError("building a ToolMessage needs pip install 'toolkeep[langchain]'") from exc
            return ToolMessage(
                content=p.text, tool_call_id=p.call_id, name=p.name, status=status or "success"
            )
        data: dict[str, Any] = {
            "content": p.text,
            "additional_kwargs": {},
            "response_metadata": {},
            "type": "tool",
            "name": p.name,
            "id": None,
            "tool_call_id": p.call_id,
            "artifact": None,
            "status": status or "success",
        }
        return {"type": "tool", "data": data}

    def pack_results(self, results: list[ToolResultPart], rest: list[Message]) -> list[Message]:
        return results_as_tool_messages(results, rest)

    def validate(self, history: History) -> list[Violation]:
        out = check_tool_messages(history, _RULES)
        out.extend(
            Violation(
                i,
                None,
                "empty_content",
                f"AIMessage at messages[{i}] has no content and no tool calls: providers refuse an empty "
                "assistant message (Anthropic but as the last message).",
            )
            for i, m in enumerate(history)
            if m.role == "assistant" and not m.parts
        )
        return sorted(out, key=lambda v: v.index)

    def tool_definitions(self, specs: Sequence[ToolSpec]) -> list[Any]:
        """OpenAI-style dicts, as ``bind_tools`` takes them."""
        return function_tools(specs)

    def message_chars(self, message: Message) -> int:
        """Chars of the message's ``messages_to_dict`` form (``{"type": ..., "data": {...}}``),
        the JSON a LangChain history is kept in; an object is measured as that form."""
        m = message
        if m.role == "tool":
            return sum(map(_result_chars, m.results))
        fields = _fields(m.raw)
        if not m.dirty or fields is None:
            return _sent_chars(m.raw)
        data = _data(fields[1])
        sized: dict[str, int | None] = {"tool_calls": list_chars(map(_call_chars, m.calls))}
        content = data.get("content")
        update: dict[str, Any] = {}
        if isinstance(content, list):  # mirrors the pruning of tool_use blocks in _dump_message
            kept = {c.id for c in m.calls}
            update["content"] = [
                b for b in content
                if not (isinstance(b, Mapping) and b.get("type") == "tool_use" and b.get("id") not in kept)
            ]  # fmt: skip
        changed = _changed_arguments(m.calls)
        if changed:  # the message's other copies of the calls, as the dump updates them
            update.update(_mirrored(fields[1], update.get("content"), changed))
        sized.update({key: input_chars(value) for key, value in update.items()})
        return _envelope(fields[0], object_chars(data, sized))


_RULES = ToolMessageRules(
    empty_id=lambda i: (
        f"AIMessage at messages[{i}] has a tool call with an empty id: every tool call needs its own id."
    ),
    duplicate_id=lambda i, c: (
        f"AIMessage at messages[{i}] has a tool call with the id {c!r} used before: every tool call needs its own id."
    ),
    missing=lambda i, c: (
        "Found AIMessages with tool_calls that do not have a corresponding ToolMessage. Here are the first few "
        f"of those tool calls: [messages[{i}] id {c!r}]. Every tool call (LLM requesting to call a tool) in the "
        "message history MUST have a corresponding ToolMessage (result of a tool invocation to return to the "
        "LLM) - this is required by most LLM providers."
    ),
    orphan=lambda i, c: (
        f"ToolMessage at messages[{i}] with tool_call_id {c!r} must be a response to a preceding AIMessage with "
        "tool_calls."
    ),
    ids_unique_across=True,
)


def _changed_arguments(calls: Sequence[ToolCallPart]) -> dict[str, Any]:
    """The new arguments of the changed calls, by the id the message holds them under (calls
    whose id is not the only one of its kind in the message are left out: their copies cannot be
    told apart)."""
    ids = [c.raw.get("id") if c.raw is not None else None for c in calls]
    return {
        held: c.arguments
        for held, c in zip(ids, calls, strict=True)
        if isinstance(held, str) and ids.count(held) == 1 and changed_arguments(c, c.raw.get("args"))
    }


def _mirrored(data: Any, content: Any, changed: dict[str, Any]) -> dict[str, Any]:
    """Updates that keep the other copies a message holds of its calls' arguments equal to the
    changed ``tool_calls``: ``additional_kwargs["tool_calls"][k].function.arguments`` (the
    provider's raw calls, a JSON string), ``tool_call_chunks[k].args`` (an ``AIMessageChunk``
    rebuilds its ``tool_calls`` from them, a JSON string) and the ``input`` of Anthropic-style
    ``tool_use`` or the ``args`` of ``tool_call`` content blocks. Each copy is found by the id
    the message holds; only values already there are replaced, no key is added. Ids are not
    renamed in the copies: pairing's renames reach ``tool_calls``, which is what LangChain's
    provider integrations send (they fall back to ``additional_kwargs`` only without it)."""
    update: dict[str, Any] = {}
    kwargs = _get(data, "additional_kwargs")
    raw_calls = kwargs.get("tool_calls") if isinstance(kwargs, Mapping) else None
    if isinstance(raw_calls, list):
        update["additional_kwargs"] = {
            **kwargs,
            "tool_calls": [
                {**tc, "function": {**tc["function"], "arguments": arguments_json(changed[tc["id"]])}}
                if _copy_of(tc, changed) and isinstance(tc.get("function"), Mapping)
                else tc
                for tc in raw_calls
            ],
        }
    chunks = _get(data, "tool_call_chunks")
    if isinstance(chunks, list):
        update["tool_call_chunks"] = [
            {**ch, "args": arguments_json(changed[ch["id"]])} if _copy_of(ch, changed) else ch
            for ch in chunks
        ]
    if isinstance(content, list):
        keys = {"tool_use": "input", "tool_call": "args"}
        update["content"] = [
            {**b, keys[b.get("type")]: changed[b["id"]]}
            if _copy_of(b, changed) and isinstance(b.get("type"), str) and keys.get(b["type"], "") in b
            else b
            for b in content
        ]
    return update


def _copy_of(value: Any, changed: dict[str, Any]) -> bool:
    return isinstance(value, Mapping) and isinstance(value.get("id"), str) and value["id"] in changed


def _made_text(m: Message, objects: bool) -> Any:
    """A human message holding the text of ``m``, a message the pipeline made."""
    text = "\n".join([p.text for p in m.parts if isinstance(p, TextPart)])
    if objects:
        try:
            from langchain_core.messages import HumanMessage
        except ImportError as exc:  # pragma: no cover - objects imply langchain-core is there
            raise FormatError("building a HumanMessage needs pip install 'toolkeep[langchain]'") from exc
        return HumanMessage(content=text)
    data: dict[str, Any] = {
        "content": text,
        "additional_kwargs": {},
        "response_metadata": {},
        "type": "human",
        "id": None,
    }
    return {"type": "human", "data": data}


def _updated(raw: Any, update: dict[str, Any]) -> Any:
    """A copy of a message object or dict with ``update`` applied to its fields."""
    if is_langchain_message(raw):
        return raw.model_copy(update=update)
    data = raw["data"]
    return {**raw, "data": {**data, **update}}


def _replace_text(content: Any, text: str) -> Any:
    if isinstance(content, list):
        rest = [
            b
            for b in content
            if not (isinstance(b, str) or (isinstance(b, Mapping) and b.get("type") == "text"))
        ]
        return [{"type": "text", "text": text}, *rest]
    return text


def _call_chars(c: ToolCallPart) -> int:
    """Chars of ``tool_calls[k]`` as :meth:`LangChainFormat._dump_call` sends it."""
    raw = c.raw if c.raw is not None else {}
    changed = changed_arguments(c, raw.get("args"))
    if c.raw is not None and raw.get("id") == c.id and not changed:
        return input_chars(c.raw)
    sized: dict[str, int | None] = {"id": input_chars(c.id)}
    if changed:
        sized["args"] = input_chars(c.arguments)
    return object_chars(raw, sized)


def _data(data: Any) -> Mapping[str, Any]:
    """A message's fields as a mapping: the dict form's ``data``, or the object's fields."""
    if isinstance(data, Mapping):
        return data
    dumped: dict[str, Any] = data.model_dump()  # fields hold references: no text is copied
    return dumped


def _envelope(kind: str, data_chars: int) -> int:
    """Chars of ``{"type": kind, "data": ...}`` around data of ``data_chars`` chars."""
    return object_chars(None, {"type": input_chars(kind), "data": data_chars})


def _sent_chars(raw: Any) -> int:
    """Chars of a message kept as it came, in its dict form."""
    fields = _fields(raw)
    if fields is None or isinstance(raw, Mapping):
        return input_chars(raw)
    return _envelope(fields[0], input_chars(_data(fields[1])))


_NEW_TOOL_DATA: dict[str, Any] = {
    "additional_kwargs": {},
    "response_metadata": {},
    "type": "tool",
    "id": None,
    "artifact": None,
}
"""The fields of a new ``ToolMessage`` (object or dict) besides those a result sets."""


def _result_chars(p: ToolResultPart) -> int:
    """Chars of the ``ToolMessage`` :meth:`LangChainFormat._dump_result` sends for ``p``."""
    if not p.modified and p.raw is not None:
        return _sent_chars(p.raw)
    fields = _fields(p.raw) if p.raw is not None else None
    data = _data(fields[1]) if fields is not None else _NEW_TOOL_DATA
    status = "error" if p.is_error else None
    content = blocks_chars(data.get("content"), p.text, "text", strings_are_text=True)
    sized: dict[str, int | None] = {"tool_call_id": input_chars(p.call_id), "content": content}
    if fields is None:
        sized.update(name=input_chars(p.name), status=input_chars(status or "success"))
    elif status:
        sized["status"] = input_chars(status)
    return _envelope(fields[0] if fields is not None else "tool", object_chars(data, sized))
