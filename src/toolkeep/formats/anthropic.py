"""Anthropic Messages: ``tool_use`` blocks in assistant messages, ``tool_result`` blocks in the
next user message, first in its content.

**System messages.** ``{"role": "system", "content": ...}`` inside ``messages`` (the API's
mid-conversation system messages; Claude Code sends its reminders so) load as neutral ``system``
messages, their text blocks as text, and go out as they came. The API places them strictly: never
first; right after a user message, or after an assistant message that ends in a server tool use
(``server_tool_use`` or ``mcp_tool_use``: a paused turn); last, or followed by an assistant
message; never next to another one. So a system message can never stand between a ``tool_use``
and its ``tool_result``: the results belong in the user message right after the calls. Pairing
repair finds a result behind a system message in the call's block as it finds one behind any other
message (it is never taken for an orphan), and :meth:`AnthropicFormat.pack_results` puts the
results in the first user message after the calls' system messages, those system messages right
after it: what the API accepts, with nothing else moved. toolkeep changes a system message in no
other way (a blank one says ``(continue)``, as any blank text does); :meth:`AnthropicFormat.validate`
reports the placement rules as ``system_placement`` but no step repairs them. Where pairing would
leave a system message right after an assistant message, a user message saying ``(continue)``
stands before it (:attr:`~toolkeep.formats.FormatRules.user_before_system`): a user message that
held only orphan results stays so, and one is put after an empty assistant message pairing drops
when a system message came next (pairing decides turn by turn, so it cannot know whether the
turn before ended in a user message; the API joins two in a row). One breach stays as the
validator reports it: a system message between calls and results with another right after the
results (moved, the two would stand side by side; merged, both would change).

**Blocks toolkeep does not manage** load as :class:`~toolkeep.messages.OpaquePart` s, carried by
reference in their place: never a call, never a result, never reordered: ``thinking`` and
``redacted_thinking`` (whose ``signature`` and ``data`` the API checks byte for byte), server
tools (``server_tool_use`` and what the server wrote after it in the same assistant message:
``web_search_tool_result``, ``web_fetch_tool_result``, ``code_execution_tool_result``,
``bash_code_execution_tool_result``, ``text_editor_code_execution_tool_result``,
``tool_search_tool_result``, ``advisor_tool_result``), ``mcp_tool_use`` and ``mcp_tool_result``,
``container_upload``, ``compaction``, images, documents and any type yet to come. Only a
``tool_use`` in an assistant message and a ``tool_result`` are paired: a server tool's use needs
no ``tool_result``, and its result answers no ``tool_use``."""

from __future__ import annotations

import re
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
    ToolSpec,
    Violation,
    blank_text,
    changed_arguments,
    declared_tool,
    exact_path,
    expect_mapping,
    field_of,
    input_chars,
    list_chars,
    list_in,
    mappings_in,
    object_chars,
)

__all__ = ["ANTHROPIC_API", "AnthropicFormat", "replace_text_content", "result_text"]

_ROLES = ("user", "assistant", "system")
_DISTINCT_BLOCKS = {
    "tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use",
    "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result",
    "bash_code_execution_tool_result", "text_editor_code_execution_tool_result",
    "tool_search_tool_result", "advisor_tool_result", "document", "search_result",
    "mcp_tool_use", "mcp_tool_result", "container_upload", "compaction",
}  # fmt: skip
_SERVER_USES = ("server_tool_use", "mcp_tool_use")
"""Blocks of a tool the API runs itself: an assistant message ending in one (a paused turn) may be
followed by a system message."""
_NO_CONTENT = "no_content"  # meta key: a system message that came without ``content``


def result_text(content: Any) -> str:
    """The text of a ``tool_result`` content: the string, or its text blocks joined by newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [b.get("text", "") for b in content if isinstance(b, Mapping) and b.get("type") == "text"]
        return "\n".join(t for t in texts if isinstance(t, str))
    return ""


def replace_text_content(content: Any, text: str) -> Any:
    """``content`` with its text replaced by ``text``, non-text blocks (images) kept in place."""
    if not isinstance(content, list):
        return text
    out: list[Any] = []
    placed = False
    for block in content:
        if isinstance(block, Mapping) and block.get("type") == "text":
            if not placed:
                out.append({**block, "text": text})
                placed = True
            continue
        out.append(block)
    if not placed:
        out.insert(0, {"type": "text", "text": text})
    return out


_ID_RULE = CallIdRule(
    lambda i, j, _: f"messages.{i}.content.{j}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'",
    chars="a-zA-Z0-9_-",
)


ANTHROPIC_API = ProviderAPI(
    "anthropic",
    "https://api.anthropic.com",
    re.compile(r"/v1/messages(?:/|$)"),
    ("anthropic-version", "x-api-key"),
)
"""Anthropic's API: its paths, and the headers its clients send (Claude Code's ``GET
/v1/models`` is told apart by them)."""


class AnthropicFormat(Format):
    """Anthropic Messages API ``messages`` (dicts, as the SDK's ``MessageParam`` TypedDicts)."""

    name = "anthropic"
    request = RequestShape(
        "messages",
        system_keys=("system",),
        tools_keys=("tools",),
        client_roles=frozenset({"user", "system"}),
        api=ANTHROPIC_API,
        route=exact_path("/v1/messages"),
    )
    moving_keys = frozenset({"cache_control"})
    """Claude Code marks the last message for the cache: on the first request, the first."""
    rules = FormatRules(
        unique_call_ids=True,
        grouped_results=True,
        refuses_blank_text=True,
        call_id_rule=_ID_RULE,
        per_message=True,
        editable_arguments=True,
        user_before_system=True,
        pricing="anthropic-5m",  # the default cache: 5 minutes (see toolkeep.pricing)
    )

    def detect(self, messages: Sequence[Any]) -> int:
        score = 1
        for n, m in enumerate(messages):
            if not isinstance(m, Mapping) or m.get("role") not in _ROLES:
                return 0
            if m["role"] == "system" and n == 0:
                # never first in an Anthropic history (the API refuses it there), and first in
                # nearly every OpenAI Chat history: a plain one stays Chat's
                return 0
            if "tool_calls" in m or "tool_call_id" in m:
                return 0
            content = m.get("content")
            if isinstance(content, list):
                for block in content:
                    if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
                        return 0
                    if (
                        block["type"] in _DISTINCT_BLOCKS
                        or "cache_control" in block
                        or (block["type"] == "image" and "source" in block)
                    ):
                        score = 2
            elif not isinstance(content, str) and not (m["role"] == "system" and "content" not in m):
                return 0
        return score

    def load_message(self, index: int, raw: Any) -> Message:
        # hot path (a resumed session loads thousands): exact-type tests before the general ones
        m = raw if type(raw) is dict else expect_mapping(raw, index)
        role = m.get("role")
        if role not in _ROLES:
            raise FormatError(
                f"role must be 'user', 'assistant' or 'system', got {role!r}", index=index, field="role"
            )
        content = m.get("content")
        if isinstance(content, str):
            return Message(role, (TextPart(content),), raw=m, meta={"string": True})
        if role == "system" and "content" not in m:  # the beta's output_config alone
            return Message(role, (), raw=m, meta={_NO_CONTENT: True})
        if not isinstance(content, list):
            raise FormatError(
                f"content must be a string or a list of blocks, got {type(content).__name__}",
                index=index,
                field="content",
            )
        parts: list[Part] = []
        for j, block in enumerate(content):
            b = block if type(block) is dict else expect_mapping(block, index, f"content[{j}]")
            kind = b.get("type")
            if kind == "text":
                text = b.get("text")
                parts.append(TextPart(text, b) if isinstance(text, str) else OpaquePart(b))
            elif kind == "tool_result":
                value = b.get("content")
                if value is not None and not isinstance(value, (str, list)):
                    raise FormatError(
                        f"tool_result content must be a string or a list of blocks, got {type(value).__name__}",
                        index=index,
                        field=f"content[{j}].content",
                    )
                call_id = b.get("tool_use_id")
                if type(call_id) is not str:
                    call_id = _field_str(b, "tool_use_id", index, j)
                parts.append(ToolResultPart(call_id, result_text(value), bool(b.get("is_error")), b))
            elif kind == "tool_use" and role == "assistant":
                call_id, name = b.get("id"), b.get("name")
                if type(call_id) is not str or type(name) is not str:
                    call_id, name = _field_str(b, "id", index, j), _field_str(b, "name", index, j)
                parts.append(ToolCallPart(call_id, name, b.get("input"), b))
            else:
                parts.append(OpaquePart(b))
        return Message(role, tuple(parts), m)

    def dump(self, history: History) -> list[Any]:
        return [m.raw if not m.dirty else self.dump_message(m) for m in history]

    def dump_message(self, m: Message) -> dict[str, Any]:
        base = dict(m.raw) if isinstance(m.raw, Mapping) else {"role": m.role}
        base["role"] = m.role
        if m.meta.get("string") and len(m.parts) == 1 and isinstance(m.parts[0], TextPart):
            base["content"] = m.parts[0].text
        elif m.parts or not m.meta.get(_NO_CONTENT):
            base["content"] = [self._dump_part(p) for p in m.parts]
        return base

    @staticmethod
    def _dump_part(p: Part) -> Any:
        if isinstance(p, TextPart):
            return p.raw if p.raw is not None else {"type": "text", "text": p.text}
        if isinstance(p, OpaquePart):
            return p.raw
        if isinstance(p, ToolCallPart):
            held = p.raw.get("input") if p.raw is not None else None
            if p.raw is not None and p.raw.get("id") == p.id and not changed_arguments(p, held):
                return p.raw
            base = dict(p.raw) if p.raw is not None else {"type": "tool_use", "name": p.name}
            base["id"] = p.id
            base["input"] = p.arguments if p.arguments is not None else {}
            return base
        if not p.modified and p.raw is not None:
            return p.raw
        block = dict(p.raw) if p.raw is not None else {"type": "tool_result"}
        block["tool_use_id"] = p.call_id
        block["content"] = replace_text_content(block.get("content"), p.text)
        if p.is_error:
            block["is_error"] = True
        return block

    def pack_results(self, results: list[ToolResultPart], rest: list[Message]) -> list[Message]:
        """The results first in the block's first user message, or in a new one right after the
        calls; system messages that stood between the calls and that user message come right
        after it (the API wants a system message after a user message, never after calls)."""
        lead = 0
        while lead < len(rest) and rest[lead].role == "system":
            lead += 1
        systems, after = rest[:lead], rest[lead:]
        if after and after[0].role == "user":
            first = after[0]
            return [first.with_parts([*results, *first.parts]), *systems, *after[1:]]
        return [Message("user", tuple(results), dirty=True), *systems, *after]

    def validate(self, history: History) -> list[Violation]:
        out: list[Violation] = []
        seen: set[str] = set()
        last = len(history) - 1
        for i, m in enumerate(history):
            if not m.parts and not (i == last and m.role == "assistant") and not m.meta.get(_NO_CONTENT):
                out.append(
                    Violation(
                        i,
                        None,
                        "empty_content",
                        f"messages.{i}: all messages must have non-empty content except for the optional final assistant message",
                    )
                )
            out.extend(
                Violation(
                    i, None, "blank_text", "messages: text content blocks must contain non-whitespace text"
                )
                for p in m.parts
                if blank_text(p)
            )
            if m.role == "assistant":
                out.extend(self._check_calls(history, i, seen))
            else:
                out.extend(self._check_results(history, i))
            if m.role == "system":
                out.extend(_check_system(history, i))
        return out

    def _check_calls(self, history: History, i: int, seen: set[str]) -> list[Violation]:
        out: list[Violation] = []
        calls = history[i].calls
        for j, p in enumerate(history[i].parts):
            if not isinstance(p, ToolCallPart):
                continue
            if not p.id:  # the API words an empty id as a pattern breach too
                out.append(Violation(i, p.id, "empty_id", _ID_RULE.refusal(i, j, p.id)))
            elif not _ID_RULE.accepts(p.id):
                out.append(Violation(i, p.id, "invalid_id", _ID_RULE.refusal(i, j, p.id)))
            elif p.id in seen:
                out.append(
                    Violation(
                        i, p.id, "duplicate_id", f"messages.{i}.content.{j}: `tool_use` ids must be unique"
                    )
                )
            seen.add(p.id)
        if not calls:
            return out
        nxt = history[i + 1] if i + 1 < len(history) else None
        answered: set[str] = set()
        if nxt is not None and nxt.role == "user":
            for p in nxt.parts:
                if not isinstance(p, ToolResultPart):
                    break
                answered.add(p.call_id)
        between = (
            " (a system message may not stand between them)"
            if nxt is not None and nxt.role == "system"
            else ""
        )
        for c in dict.fromkeys(c.id for c in calls if c.id):
            if c not in answered:
                out.append(
                    Violation(
                        i,
                        c,
                        "missing_result",
                        f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {c}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.{between}",
                    )
                )
        return out

    def _check_results(self, history: History, i: int) -> list[Violation]:
        out: list[Violation] = []
        prev = history[i - 1] if i > 0 else None
        call_ids = {c.id for c in prev.calls} if prev is not None and prev.role == "assistant" else set()
        claimed: set[str] = set()
        leading = True
        system = history[i].role == "system"
        for j, p in enumerate(history[i].parts):
            if not isinstance(p, ToolResultPart):
                leading = False
                continue
            if system:
                out.append(
                    Violation(
                        i,
                        p.call_id,
                        "orphan_result",
                        f"messages.{i}.content.{j}: `tool_result` blocks belong in a user message, not a system message ({p.call_id})",
                    )
                )
            elif p.call_id not in call_ids:
                out.append(
                    Violation(
                        i,
                        p.call_id,
                        "orphan_result",
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {p.call_id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
                    )
                )
            elif p.call_id in claimed:
                out.append(
                    Violation(
                        i,
                        p.call_id,
                        "duplicate_result",
                        f"messages.{i}.content.{j}: each `tool_use` id must have a single `tool_result` block; found another for {p.call_id}",
                    )
                )
            elif not leading:
                out.append(
                    Violation(
                        i,
                        p.call_id,
                        "result_not_first",
                        f"messages.{i}.content.{j}: `tool_result` blocks must come first in the user message, before any other content ({p.call_id})",
                    )
                )
            claimed.add(p.call_id)
        return out

    def tool_definitions(self, specs: Sequence[ToolSpec]) -> list[Any]:
        return [
            {"name": s.name, "description": s.description, "input_schema": s.fresh_schema()} for s in specs
        ]

    def request_tools(self, request: Mapping[str, Any]) -> list[ToolSpec]:
        """The client tools of ``tools`` (``name``, ``description``, ``input_schema``; a deferred
        one, ``defer_loading``, too: the model finds it by tool search); the server tools (a
        ``type`` such as ``web_search_20250305``, no ``input_schema``) are left out."""
        found = []
        for t in mappings_in(request.get("tools")):
            if t.get("type", "custom") == "custom" and "input_schema" in t:
                spec = declared_tool(t.get("name"), t.get("description"), t.get("input_schema"))
                if spec is not None:
                    found.append(spec)
        return found

    def response_calls(self, response: Any) -> list[ToolCall]:
        """The ``tool_use`` blocks of a ``Message`` (or its dict), of an assistant message, or of
        its ``content`` list."""
        return [
            ToolCall.read(field_of(b, "id"), field_of(b, "name"), field_of(b, "input"))
            for b in list_in(response, "content")
            if field_of(b, "type") == "tool_use"
        ]

    def result_messages(self, answered: Sequence[Answer]) -> list[Any]:
        """One user message of ``tool_result`` blocks, in the order of the calls."""
        if not answered:
            return []
        blocks = []
        for call, text, error in answered:
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call.id, "content": text}
            if error:
                block["is_error"] = True
            blocks.append(block)
        return [{"role": "user", "content": blocks}]

    def message_chars(self, message: Message) -> int:
        m = message
        raw = m.raw if isinstance(m.raw, Mapping) else None
        if not m.dirty and raw is not None:
            return input_chars(raw)  # sent as it came
        if m.meta.get("string") and len(m.parts) == 1 and isinstance(m.parts[0], TextPart):
            content = input_chars(m.parts[0].text)
        else:
            content = list_chars(map(_part_chars, m.parts))
        return object_chars(raw, {"role": input_chars(m.role), "content": content})


def _check_system(history: History, i: int) -> list[Violation]:
    """Breaches of the API's placement rules by system message ``i``."""
    prev = history[i - 1] if i > 0 else None
    nxt = history[i + 1] if i + 1 < len(history) else None
    wrong = []
    if prev is None:
        wrong.append("cannot be the first message (use the top-level `system` parameter)")
    elif prev.role == "system":
        wrong.append("cannot follow another system message")
    elif prev.role == "assistant" and not _ends_in_server_use(prev):
        wrong.append("must follow a user message, or an assistant message that ends in a server tool use")
    if nxt is not None and nxt.role == "user":
        wrong.append("must be the last message or be followed by an assistant message")
    return [Violation(i, None, "system_placement", f"messages.{i}: a system message {w}") for w in wrong]


def _ends_in_server_use(m: Message) -> bool:
    last = m.parts[-1] if m.parts else None
    return isinstance(last, OpaquePart) and field_of(last.raw, "type") in _SERVER_USES


def _field_str(block: Mapping[str, Any], key: str, index: int, j: int) -> str:
    """A block's string field: ``""`` when absent (pairing repair handles that), an error when it
    holds something else (a number id would be silently lost)."""
    value = block.get(key)
    if value is None or isinstance(value, str):
        return value or ""
    raise FormatError(
        f"{key} must be a string, got {type(value).__name__}", index=index, field=f"content[{j}].{key}"
    )


_NEW_TEXT = {"type": "text"}
_NEW_RESULT = {"type": "tool_result"}


def _part_chars(p: Part) -> int:
    """Chars of one block as :meth:`AnthropicFormat.dump_message` sends it."""
    if isinstance(p, OpaquePart):
        return input_chars(p.raw)
    if isinstance(p, TextPart):
        return (
            input_chars(p.raw)
            if p.raw is not None
            else object_chars(_NEW_TEXT, {"text": input_chars(p.text)})
        )
    if isinstance(p, ToolCallPart):
        held = p.raw.get("input") if p.raw is not None else None
        if p.raw is not None and p.raw.get("id") == p.id and not changed_arguments(p, held):
            return input_chars(p.raw)
        base = p.raw if p.raw is not None else {"type": "tool_use", "name": p.name}
        arguments = p.arguments if p.arguments is not None else {}
        return object_chars(base, {"id": input_chars(p.id), "input": input_chars(arguments)})
    if not p.modified and p.raw is not None:
        return input_chars(p.raw)
    base = p.raw if p.raw is not None else _NEW_RESULT
    sized: dict[str, int | None] = {
        "tool_use_id": input_chars(p.call_id),
        "content": _content_chars(base.get("content"), p.text),
    }
    if p.is_error:
        sized["is_error"] = 4  # true
    return object_chars(base, sized)


def _content_chars(content: Any, text: str) -> int:
    """Chars of :func:`replace_text_content` of ``content`` and ``text``."""
    if not isinstance(content, list):
        return input_chars(text)
    sizes: list[int] = []
    placed = False
    for block in content:
        if isinstance(block, Mapping) and block.get("type") == "text":
            if not placed:
                sizes.append(object_chars(block, {"text": input_chars(text)}))
                placed = True
        else:
            sizes.append(input_chars(block))
    if not placed:
        sizes.append(object_chars(_NEW_TEXT, {"text": input_chars(text)}))
    return list_chars(sizes)
