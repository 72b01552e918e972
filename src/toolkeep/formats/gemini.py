"""Google Gemini (``google-genai``): ``Content`` turns of ``Part`` s.

A ``model`` turn's ``functionCall`` parts are answered by ``functionResponse`` parts in the next
``user`` turn, as many responses as calls. Keys come camelCase (REST, ``by_alias`` dumps) or
snake_case (``google-genai`` field names); both are read, and a rebuilt part keeps the spelling of
the part it came from. ``google-genai`` ``types.Content`` objects are handled by the SDK layer
(``_sdk``), which hands this module the SDK's own dicts.

Ids: a call carries an ``id`` on some backends and not on others. Without one, a call is known as
``name#k`` (its k-th call of that name in the turn) and a response without an id answers the k-th
call of its name in the turn before it, the order the API itself matches them in.

The result text is ``response["output"]`` (or ``response["error"]``, an error), or the whole
``response`` as JSON when it has neither: the SDK's documented convention. A response's other
fields (``parts`` of a multimodal response, keys beside ``output``) are kept as they are when its
text is shortened.

A ``model`` turn with no parts (an interrupted stream) is refused ("contents.parts must not be
empty") and pairing drops it, as every empty assistant message. The user turns it stood between
would then sit side by side, which Gemini refuses on models that want user and model turns to
alternate ("Please ensure that multiturn requests alternate between user and model"), so the dump
joins them into one turn, parts in order. Turns that came side by side are left as they are (a
history that was valid comes back unchanged).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..exceptions import FormatError
from ..messages import History, Message, OpaquePart, Part, TextPart, ToolCallPart, ToolResultPart
from ._base import (
    Answer,
    Format,
    FormatRules,
    ProviderAPI,
    RequestShape,
    ToolCall,
    ToolSpec,
    Violation,
    changed_arguments,
    declared_tool,
    expect_mapping,
    field_of,
    input_chars,
    items_of,
    list_chars,
    list_in,
    mappings_in,
    object_chars,
    results_in_next_user,
)

__all__ = ["GEMINI_API", "GeminiFormat"]

_CALL_KEYS = ("functionCall", "function_call")
_RESPONSE_KEYS = ("functionResponse", "function_response")
_DISTINCT = {
    *_CALL_KEYS, *_RESPONSE_KEYS, "inlineData", "inline_data", "fileData", "file_data",
    "thoughtSignature", "thought_signature", "executableCode", "executable_code",
    "codeExecutionResult", "code_execution_result", "thought",
}  # fmt: skip
_SCHEMA_KEYS = ("parameters", "parametersJsonSchema", "parameters_json_schema")
_ROLES = {"user": "user", "model": "assistant", "function": "user"}


def _get(part: Mapping[str, Any], keys: tuple[str, str]) -> tuple[str, Mapping[str, Any]] | None:
    for key in keys:
        value = part.get(key)
        if isinstance(value, Mapping):
            return key, value
    return None


def response_text(response: Any) -> tuple[str, bool, str | None]:
    """``(text, is_error, key)``: the text of a ``functionResponse.response`` and where it sits."""
    if isinstance(response, Mapping):
        for key, error in (("output", False), ("error", True), ("result", False), ("content", False)):
            if key in response and len(response) == 1:
                value = response[key]
                text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                return text, error, key
        if isinstance(response.get("error"), str):
            return response["error"], True, "error"
        if isinstance(response.get("output"), str):
            return response["output"], False, "output"
    if response is None:
        return "", False, None
    return json.dumps(response, ensure_ascii=False), False, None


GEMINI_API = ProviderAPI(
    "gemini",
    "https://generativelanguage.googleapis.com",
    # every path of the Gemini API is versioned v1beta or v1alpha (uploads under /upload/),
    # but for its v1 models and tuned models, called as ``name:method``
    re.compile(r"(?:/upload)?/v1(?:alpha|beta)\d*/|/v1/(?:models|tunedModels)/[^/]+:"),
    ("x-goog-api-key",),
)
"""The Gemini API (``generativelanguage.googleapis.com``)."""


class GeminiFormat(Format):
    """Gemini ``contents`` (dicts in camelCase or snake_case; SDK objects through ``_sdk``)."""

    name = "gemini"
    request = RequestShape(
        "contents",
        text_history=True,
        system_keys=("systemInstruction", "system_instruction"),
        tools_keys=("tools",),
        config_key="config",
        config_keys=("system_instruction", "tools"),
        client_roles=frozenset({"user", "function"}),
        api=GEMINI_API,
        route=re.compile(
            r"/v1(?:alpha|beta\d*)?/(?:models|tunedModels)/[^/:]+:(?:generateContent|streamGenerateContent)"
        ),
    )
    """``generateContent`` over REST (``systemInstruction``) and google-genai's
    ``generate_content`` arguments (``config`` holding ``system_instruction`` and ``tools``)."""
    rules = FormatRules(grouped_results=True, editable_arguments=True, pricing="gemini")

    def detect(self, messages: Sequence[Any]) -> int:
        score = 1
        for m in messages:
            if not isinstance(m, Mapping) or not isinstance(m.get("parts"), list):
                return 0
            role = m.get("role", "user")
            if "content" in m or not isinstance(role, str) or role not in _ROLES:
                return 0
            score = 2
            for part in m["parts"]:
                if not isinstance(part, Mapping):
                    return 0
        return score

    def load(self, messages: Sequence[Any]) -> History:
        out: History = []
        last_calls: list[ToolCallPart] = []
        after_empty = False  # the last turn was a model turn with no parts
        for i, raw in enumerate(messages):
            m = self._load_message(i, raw, last_calls)
            if m.role == "assistant":
                last_calls = list(m.calls)
                after_empty = not m.parts
            elif after_empty:
                m = replace(m, meta={**m.meta, _JOINS: True})
                after_empty = False
            out.append(m)
        return out

    def _load_message(self, index: int, raw: Any, last_calls: list[ToolCallPart]) -> Message:
        m = expect_mapping(raw, index, "content")
        raw_role = m.get("role", "user")
        role = _ROLES.get(raw_role) if isinstance(raw_role, str) else None  # a list is no role
        if role is None:
            raise FormatError(f"role must be 'user' or 'model', got {m.get('role')!r}", index=index)
        parts = m.get("parts")
        if not isinstance(parts, list):
            raise FormatError("parts must be a list", index=index, field="parts")
        out: list[Part] = []
        seen: dict[str, int] = {}  # id-less calls or responses of each name so far
        for j, value in enumerate(parts):
            part = expect_mapping(value, index, f"parts[{j}]")
            call = _get(part, _CALL_KEYS) if role == "assistant" else None
            response = _get(part, _RESPONSE_KEYS)
            if call is not None:
                name = _str(call[1].get("name"))
                call_id = _str(call[1].get("id")) or _nameless_id(name, seen)
                out.append(ToolCallPart(call_id, name, call[1].get("args"), raw=part))
            elif response is not None:
                name = _str(response[1].get("name"))
                call_id = _str(response[1].get("id")) or _match_by_name(last_calls, name, seen)
                text, is_error, _ = response_text(response[1].get("response"))
                out.append(ToolResultPart(call_id, text, is_error=is_error, raw=part, name=name or None))
            elif isinstance(part.get("text"), str) and not part.get("thought"):
                out.append(TextPart(part["text"], raw=part))
            else:
                out.append(OpaquePart(part))
        return Message(role, tuple(out), raw=m)  # type: ignore[arg-type]

    def dump(self, history: History) -> list[Any]:
        snake = any(m.dirty for m in history) and any(_snake(m) for m in history)
        out: list[Any] = []
        for m in history:
            content = m.raw if not m.dirty else self._dump_message(m, snake)
            if m.meta.get(_JOINS) and out and _user_side(out[-1]) and _user_side(content):
                out[-1] = {**out[-1], "parts": [*out[-1]["parts"], *content["parts"]]}
            else:
                out.append(content)
        return out

    def _dump_message(self, m: Message, snake: bool) -> dict[str, Any]:
        role = "model" if m.role == "assistant" else "user"
        base = dict(m.raw) if isinstance(m.raw, Mapping) else {"role": role}
        base["parts"] = [self._dump_part(p, snake) for p in m.parts]
        return base

    def _dump_part(self, p: Part, snake: bool) -> Any:
        if isinstance(p, (TextPart, OpaquePart)):
            return p.raw if p.raw is not None else {"text": getattr(p, "text", "")}
        raw = p.raw if isinstance(p.raw, Mapping) else None
        if isinstance(p, ToolCallPart):
            return self._dump_call(p, raw, snake)
        found = _get(raw, _RESPONSE_KEYS) if raw is not None else None
        # an id-less response is matched by its name: one that pairing gave to a call of another
        # name (after pruning a duplicate call) must be sent under that call's name
        renamed = bool(
            found and p.name and not _str(found[1].get("id")) and _str(found[1].get("name")) != p.name
        )
        if not p.modified and p.raw is not None and not renamed:
            return p.raw
        key = found[0] if found else ("function_response" if snake else "functionResponse")
        body: dict[str, Any] = dict(found[1]) if found else {"name": p.name or ""}
        if "#" not in p.call_id and (found is None or "id" in body or p.synthetic):
            body["id"] = p.call_id
        if renamed and not _str(body.get("id")):
            body["name"] = p.name
        old = body.get("response")
        _, _, where = response_text(old)
        key_out = "error" if p.is_error else where or "output"
        kept = (
            {k: v for k, v in old.items() if k not in ("output", "error")}
            if isinstance(old, Mapping) and where
            else {}
        )
        body["response"] = {**kept, key_out: p.text}
        part = {k: v for k, v in raw.items() if k not in _RESPONSE_KEYS} if raw is not None else {}
        part[key] = body
        return part

    @staticmethod
    def _dump_call(p: ToolCallPart, raw: Mapping[str, Any] | None, snake: bool) -> Any:
        """The call's part: ``raw`` unless its arguments changed, then ``raw`` with its
        ``functionCall.args`` (in the spelling it came in) replaced. Its id is never renamed here
        (Gemini ids need not be unique, nor follow a pattern)."""
        found = _get(raw, _CALL_KEYS) if raw is not None else None
        if found is not None and not changed_arguments(p, found[1].get("args")):
            return raw
        if found is not None:
            key, call = found[0], dict(found[1])
        else:  # a call the pipeline made
            key, call = ("function_call" if snake else "functionCall"), {"name": p.name}
            if "#" not in p.id:
                call["id"] = p.id
        if p.arguments is None:  # Gemini's args are optional: none is no key
            call.pop("args", None)
        else:
            call["args"] = p.arguments
        return {**(raw or {}), key: call}

    def pack_results(self, results: list[ToolResultPart], rest: list[Message]) -> list[Message]:
        return results_in_next_user(results, rest)

    def validate(self, history: History) -> list[Violation]:
        out: list[Violation] = []
        for i, m in enumerate(history):
            if not m.parts:
                out.append(Violation(i, None, "empty_content", f"contents[{i}].parts must not be empty."))
            calls = m.calls if m.role == "assistant" else ()
            prev = history[i - 1] if i > 0 else None
            prev_calls = prev.calls if prev is not None and prev.role == "assistant" else ()
            results = m.results
            if results and not prev_calls:
                out.append(
                    Violation(
                        i,
                        results[0].call_id,
                        "orphan_result",
                        f"contents[{i}]: Please ensure that function response turn comes immediately after a function call turn.",
                    )
                )
            if calls:
                out.extend(self._check_calls(history, i))
        return out

    def _check_calls(self, history: History, i: int) -> list[Violation]:
        calls = history[i].calls
        nxt = history[i + 1] if i + 1 < len(history) else None
        if nxt is None:  # the model's own last turn: the app has not answered yet
            return [
                Violation(
                    i,
                    calls[0].id,
                    "missing_result",
                    f"contents[{i}]: Please ensure that function call turn is followed by a function response turn ({_ids(calls)} unanswered).",
                )
            ]
        results = nxt.results if nxt.role == "user" else ()
        out: list[Violation] = []
        ids = [c.id for c in calls]
        got = [r.call_id for r in results]
        if len(results) != len(calls) or sorted(got) != sorted(ids):
            missing = [c for c in ids if c not in got]
            extra = [r for r in got if r not in ids]
            at = i + 1 if results else i
            out.append(
                Violation(
                    at,
                    next(iter(missing or extra), None),
                    "missing_result" if missing else "orphan_result",
                    f"contents[{at}]: Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn. "
                    f"(calls: {_ids(calls)}; responses: {', '.join(got) or 'none'})",
                )
            )
        if len(set(ids)) != len(ids):
            dup = next(x for x in ids if ids.count(x) > 1)
            out.append(Violation(i, dup, "duplicate_id", f"contents[{i}]: duplicate function call id {dup}."))
        return out

    def tool_definitions(self, specs: Sequence[ToolSpec]) -> list[Any]:
        """One ``Tool`` holding a ``function_declarations`` entry per spec."""
        declarations = [
            {"name": s.name, "description": s.description, "parameters": _gemini_schema(s.fresh_schema())}
            for s in specs
        ]
        return [{"function_declarations": declarations}]

    def request_tools(self, request: Mapping[str, Any]) -> list[ToolSpec]:
        """The function declarations of every ``Tool`` in ``tools`` (``functionDeclarations`` or
        ``function_declarations``: ``name``, ``description``, and ``parameters`` or, as Gemini CLI
        sends an MCP server's tools, ``parametersJsonSchema``); a google-genai request's
        ``config.tools`` too. Other tools (``googleSearch``, ``codeExecution``, ...) declare no
        function."""
        config = request.get("config")
        tools = request.get("tools")
        if tools is None and isinstance(config, Mapping):
            tools = config.get("tools")
        found = []
        for tool in mappings_in(tools):
            for key in ("functionDeclarations", "function_declarations"):
                for d in mappings_in(tool.get(key)):
                    schema = next((d[k] for k in _SCHEMA_KEYS if isinstance(d.get(k), Mapping)), None)
                    spec = declared_tool(d.get("name"), d.get("description"), schema)
                    if spec is not None:
                        found.append(spec)
        return found

    def response_calls(self, response: Any) -> list[ToolCall]:
        """The ``function_call`` parts of a ``GenerateContentResponse``'s first candidate (or
        its dict, in either spelling), or of the model's ``Content`` or parts themselves. A call
        without an id is known as ``name#k``, as :meth:`load` knows it, and
        :meth:`result_messages` answers it by name."""
        candidates = items_of(field_of(response, "candidates"))
        content = field_of(candidates[0], "content") if candidates else response
        out = []
        seen: dict[str, int] = {}
        for part in list_in(content, "parts"):
            call = next((c for c in (field_of(part, k) for k in _CALL_KEYS) if _is_record(c)), None)
            if call is None:
                continue
            name = _str(field_of(call, "name"))
            call_id = _str(field_of(call, "id")) or _nameless_id(name, seen)
            out.append(ToolCall.read(call_id, name, field_of(call, "args")))
        return out

    def result_messages(self, answered: Sequence[Answer]) -> list[Any]:
        """One user ``Content`` of ``function_response`` parts, each naming its call (and giving
        its id, where the model gave one); the text is ``response.output``, or
        ``response.error`` for a failure."""
        if not answered:
            return []
        parts = []
        for call, text, error in answered:
            body: dict[str, Any] = {"name": call.name}
            if not _is_nameless(call.id, call.name):
                body["id"] = call.id
            body["response"] = {"error" if error else "output": text}
            parts.append({"function_response": body})
        return [{"role": "user", "parts": parts}]

    def message_chars(self, message: Message) -> int:
        m = message
        if not m.dirty and isinstance(m.raw, Mapping):
            return input_chars(m.raw)  # sent as it came
        base = m.raw if isinstance(m.raw, Mapping) else {"role": "model" if m.role == "assistant" else "user"}
        snake = _snake(m)
        return object_chars(base, {"parts": list_chars(_part_chars(p, snake) for p in m.parts)})


_JOINS = "joins_user_turn"
"""``meta`` key of a user turn that came right after a model turn with no parts: pairing drops
that turn (every empty assistant message goes), and the dump joins this user turn to the user
turn before it rather than send two user turns side by side."""


def _user_side(content: Any) -> bool:
    """True for a ``Content`` dict of the user side (``user``, the old ``function`` role, or none)."""
    return isinstance(content, Mapping) and content.get("role", "user") != "model"


def _nameless_id(name: str, seen: dict[str, int]) -> str:
    """The id of the next id-less call (or response) of ``name`` in a turn: ``name#k``."""
    k = seen[name] = seen.get(name, 0) + 1
    return f"{name}#{k}"


def _match_by_name(calls: list[ToolCallPart], name: str, seen: dict[str, int]) -> str:
    """The id of the call an id-less response of ``name`` answers: the k-th id-less call of that
    name; or, when the turn's calls all carry ids, the k-th call of that name."""
    own = _nameless_id(name, seen)
    if any(c.id == own for c in calls) or all(_is_nameless(c.id, c.name) for c in calls if c.name == name):
        return own
    named = [c for c in calls if c.name == name]
    k = seen[name]
    return named[k - 1].id if k <= len(named) else own


def _is_nameless(call_id: str, name: str) -> bool:
    """True for the id toolkeep gives a call that came without one (``name#k``)."""
    head, _, k = call_id.rpartition("#")
    return head == name and k.isdigit()


def _snake(m: Message) -> bool:
    """True when the message's parts spell their keys the snake_case way (``google-genai`` dumps)."""
    raws = [p.raw for p in m.parts if isinstance(getattr(p, "raw", None), Mapping)]
    keys = ("function_call", "function_response", "inline_data", "thought_signature", "file_data")
    return any(k in r for r in raws for k in keys)


def _ids(calls: Sequence[ToolCallPart]) -> str:
    return ", ".join(c.id for c in calls)


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _gemini_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Gemini's OpenAPI subset: no ``minimum`` on integers in every model; keep what all accept."""
    props = {
        name: {k: v for k, v in prop.items() if k in ("type", "description")}
        for name, prop in schema["properties"].items()
    }
    return {"type": "object", "properties": props, "required": list(schema["required"])}


def _is_record(value: Any) -> bool:
    """True for a part's ``function_call``: a mapping or an SDK object (not a stray scalar)."""
    return value is not None and not isinstance(value, (str, bytes, int, float, list, tuple))


def _call_chars(p: ToolCallPart, raw: Mapping[str, Any] | None, snake: bool) -> int:
    """Chars of the part :meth:`GeminiFormat._dump_call` sends for ``p``."""
    found = _get(raw, _CALL_KEYS) if raw is not None else None
    if found is not None and not changed_arguments(p, found[1].get("args")):
        return input_chars(raw)
    sized: dict[str, int | None] = {"args": None if p.arguments is None else input_chars(p.arguments)}
    if found is not None:
        key, body = found
    else:  # a call the pipeline made
        key, body = ("function_call" if snake else "functionCall"), {"name": p.name}
        if "#" not in p.id:
            sized["id"] = input_chars(p.id)
    return object_chars(raw, {key: object_chars(body, sized)})


def _part_chars(p: Part, snake: bool) -> int:
    """Chars of one part as :meth:`GeminiFormat._dump_part` sends it."""
    raw = p.raw if isinstance(p.raw, Mapping) else None
    if isinstance(p, ToolCallPart):
        return _call_chars(p, raw, snake)
    if not isinstance(p, ToolResultPart):
        if p.raw is not None:
            return input_chars(p.raw)
        return object_chars(None, {"text": input_chars(getattr(p, "text", ""))})
    found = _get(raw, _RESPONSE_KEYS) if raw is not None else None
    renamed = bool(found and p.name and not _str(found[1].get("id")) and _str(found[1].get("name")) != p.name)
    if not p.modified and p.raw is not None and not renamed:
        return input_chars(p.raw)
    key = found[0] if found else ("function_response" if snake else "functionResponse")
    body: Mapping[str, Any] = found[1] if found else {"name": p.name or ""}
    sized: dict[str, int | None] = {}
    if "#" not in p.call_id and (found is None or "id" in body or p.synthetic):
        sized["id"] = input_chars(p.call_id)
    if renamed and not _str(body.get("id")):
        sized["name"] = input_chars(p.name)
    old = body.get("response")
    _, _, where = response_text(old)
    kept = old if isinstance(old, Mapping) and where else None
    out = "error" if p.is_error else where or "output"
    sized["response"] = object_chars(kept, {"output": None, "error": None, out: input_chars(p.text)})
    around: dict[str, int | None] = dict.fromkeys(_RESPONSE_KEYS)
    around[key] = object_chars(body, sized)
    return object_chars(raw, around)
