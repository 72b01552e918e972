"""OpenAI Responses: the ``input`` item list.

Each call is its own item (``function_call``, ``custom_tool_call``) and each result too
(``function_call_output``, ``custom_tool_call_output``); a reasoning model puts a ``reasoning``
item right before the call or message it belongs to. Toolkeep pairs calls and results per
assistant message, so the mapping is:

- A **run** of consecutive model-side items (``reasoning``, assistant ``message``, calls, and
  server items such as ``web_search_call``, ``file_search_call``, ``computer_call``, ``mcp_call``,
  ``compaction``) is one neutral assistant message holding one part per item, in order; it sits
  at the index of the run's *last* item. Parallel calls are therefore one block, and a reasoning
  item stays glued to the call after it: the run is dumped as a whole.
- Every earlier item of the run loads as an empty ``tool`` message (no parts; ``meta`` says which
  run holds it) that dumps to nothing. Load stays one-to-one, so neutral index ``i`` is
  ``input[i]`` in every error, violation and report. The placeholders sit *before* their run,
  behind the previous block's results, where pairing never sees them as content.
- ``function_call_output`` / ``custom_tool_call_output``: a ``tool`` message with one result.
- User, system and developer messages: ``user`` / ``system`` messages with one opaque part.
- An assistant ``message`` item with no content (``[]`` or ``null``, as an interrupted stream
  leaves it; the API refuses it) is a blank text part of its run, which pairing drops
  (``empty_assistant_dropped`` when the run held nothing else, else ``blank_text_dropped``).
- Any other input-side item (``computer_call_output``, ``mcp_approval_response``, unknown kinds):
  an empty ``user`` message carried through untouched (pairing cannot see it). It keeps its place
  among the outputs of its block: pairing puts the outputs it moves back after the outputs that
  came before such an item, never past it.
- With ``previous_response=True`` (the request has ``previous_response_id`` or ``conversation``),
  or when the input holds ``item_reference`` or ``compaction`` items (whose calls toolkeep cannot
  see), an output whose call is not in the input answers a call the server has stored (or the
  compaction holds): it is carried the same way, untouched, never removed as an orphan. The part
  of the conversation the input does hold is repaired as usual.

Two runs that pairing repair leaves side by side (the output items between them were orphans)
read as one run on the next load, so pairing joins them (the rules say
``adjacent_turns_join``): nothing is put between them, and the next ``prepare`` counts the turns
this one aged results by.

A changed run is dumped part by part. A reasoning item goes out only right before the item that
followed it in its run, as that item came (the API refuses a reasoning item "without its required
following item"): one whose call was pruned, or whose call was renamed and lost its item ``id``,
is dropped with it. An item of an unknown kind left last goes after the run's outputs (next time
it would load as input between them and their calls). A renamed call loses its item ``id``
(``fc_...``): the API ties an item id to its reasoning item and to the stored response, and a
renamed call is neither.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..exceptions import FormatError
from ..messages import History, Message, OpaquePart, Part, TextPart, ToolCallPart, ToolResultPart
from ._base import (
    Answer,
    Format,
    FormatRules,
    RequestShape,
    ToolCall,
    ToolSpec,
    Violation,
    arguments_json,
    blocks_chars,
    changed_arguments,
    declared_tool,
    exact_path,
    expect_mapping,
    field_of,
    input_chars,
    list_in,
    mappings_in,
    object_chars,
    results_as_tool_messages,
)
from .openai_chat import OPENAI_API

__all__ = ["OpenAIResponsesFormat", "outputs_only"]

_CALLS = {"function_call": "function_call_output", "custom_tool_call": "custom_tool_call_output"}
_OUTPUTS = {v: k for k, v in _CALLS.items()}
_MODEL_SIDE = {
    "reasoning", "web_search_call", "file_search_call", "computer_call", "code_interpreter_call",
    "image_generation_call", "local_shell_call", "shell_call", "apply_patch_call", "mcp_call",
    "mcp_list_tools", "mcp_approval_request", "item_reference", "compaction",
}  # fmt: skip
_STORED_STATE = {"item_reference", "compaction"}  # items standing for calls the input does not show
# input item kinds of the API that toolkeep reads no further than their kind (carried untouched)
_OTHER_INPUTS = {
    "computer_call_output", "local_shell_call_output", "shell_call_output", "apply_patch_call_output",
    "mcp_approval_response", "tool_search_call", "tool_search_output", "additional_tools",
    "configuration_update", "compaction_trigger", "program", "program_output",
}  # fmt: skip
_DISTINCT = {*_CALLS, *_OUTPUTS, *_MODEL_SIDE, *_OTHER_INPUTS, "message"}
_INPUT_ROLES = {"user": "user", "system": "system", "developer": "system"}
_RUN = "run"  # meta key of a placeholder: index of the message holding its run
_INDEXES = "indexes"  # meta key of a run: input index of each of its parts
_AFTER = "after"  # meta key of an item pairing cannot see: call ids of the outputs before it


def output_text(output: Any) -> str:
    """The text of a call output: the string, or its ``input_text`` parts joined by newlines."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(
            p["text"] for p in output
            if isinstance(p, Mapping) and p.get("type") in ("input_text", "output_text")
            and isinstance(p.get("text"), str)
        )  # fmt: skip
    return "" if output is None else json.dumps(output, ensure_ascii=False)


def _kind(item: Mapping[str, Any]) -> str:
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"
    return kind if isinstance(kind, str) else ""


def _side(item: Mapping[str, Any]) -> str:
    """``model`` for what the model wrote, ``input`` for the rest, ``unknown`` for new kinds."""
    kind = _kind(item)
    if kind == "message":
        return "model" if item.get("role") == "assistant" else "input"
    if kind in _CALLS or kind in _MODEL_SIDE:
        return "model"
    if kind in _OUTPUTS or kind.endswith(("_output", "_response")):
        return "input"
    return "unknown"


def _model_sides(items: list[Mapping[str, Any]]) -> list[bool]:
    """Which items belong to a model run. An unknown kind joins a run only when model items
    stand on both sides of it: it must not end a run (and split a reasoning item from its call)
    nor start one (and take a call's outputs away from it)."""
    sides = [_side(item) for item in items]
    model = [side == "model" for side in sides]
    for i, side in enumerate(sides):
        if side == "unknown" and i > 0 and model[i - 1]:
            nxt = next((s for s in sides[i + 1 :] if s != "unknown"), "input")
            model[i] = nxt == "model"
    return model


def outputs_only(items: Sequence[Any]) -> bool:
    """True when ``items`` (plain dicts) hold a call output and nothing the model wrote (no
    assistant message, call, reasoning or server item, no item of a kind toolkeep does not know):
    an input that can only answer calls stored on the server, such as the Agents SDK sends a run
    whose conversation the server keeps, after its first request.

    >>> outputs_only([{"type": "function_call_output", "call_id": "c1", "output": "ok"}])
    True
    >>> outputs_only([{"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
    ...               {"type": "function_call_output", "call_id": "c1", "output": "ok"}])
    False
    """
    answers = False
    for item in items:
        if not isinstance(item, Mapping) or _side(item) != "input":
            return False
        answers = answers or _kind(item) in _OUTPUTS
    return answers


class OpenAIResponsesFormat(Format):
    """OpenAI Responses API ``input`` items (dicts, as the SDK's ``ResponseInputItemParam``)."""

    name = "openai-responses"
    request = RequestShape(
        "input",
        text_history=True,
        system_keys=("instructions",),
        tools_keys=("tools",),
        continuation_keys=("previous_response_id", "conversation"),
        client_roles=frozenset({"user", "system", "developer"}),
        client_item_suffix="_output",
        api=OPENAI_API,
        route=exact_path("/v1/responses"),
    )
    rules = FormatRules(
        unique_call_ids=True,
        editable_arguments=True,
        adjacent_turns_join=True,
        refuses_blank_text=True,
        pricing="openai",
    )

    def __init__(self, *, previous_response: bool = False) -> None:
        self.previous_response = previous_response
        """True when the input continues state stored on the server (the request has
        ``previous_response_id`` or a ``conversation``): an output whose call is not in the input
        answers a stored call, so it is carried untouched instead of removed as an orphan; calls
        and outputs the input does hold are paired as usual. Pass
        ``OpenAIResponsesFormat(previous_response=True)`` as ``format=`` for such requests."""

    def continuing(self) -> Format:
        """The format of a request that continues stored state: one instance for every such
        request, so that a session sees the same format each time."""
        return _CONTINUED

    def detect(self, messages: Sequence[Any]) -> int:
        score = 1
        for m in messages:
            if not isinstance(m, Mapping) or "tool_calls" in m or "parts" in m:
                return 0
            kind = _kind(m)
            if kind == "message":
                if m.get("role") not in ("user", "system", "developer", "assistant"):
                    return 0
                content = m.get("content")
                if isinstance(content, list):
                    for part in content:
                        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
                            return 0
                        if part["type"].startswith(("input_", "output_")) or part["type"] == "refusal":
                            score = 2
                        elif part["type"] not in ("text",):
                            return 0
                elif not isinstance(content, str) and not _empty_message(m):
                    return 0
                if "type" in m:
                    score = 2
            elif kind in _DISTINCT:
                score = 2
            else:
                return 0
        return score

    def load(self, messages: Sequence[Any]) -> History:
        items = [expect_mapping(m, i, "item") for i, m in enumerate(messages)]
        model = _model_sides(items)
        stored: set[str] = set()  # call ids of outputs that answer a call the input does not hold
        if self.previous_response or any(_kind(item) in _STORED_STATE for item in items):
            visible = {item.get("call_id") for item in items if _kind(item) in _CALLS}
            stored = {
                item["call_id"]
                for item in items
                if _kind(item) in _OUTPUTS and isinstance(item.get("call_id"), str)
                and item["call_id"] not in visible
            }  # fmt: skip
        out: History = []
        run: list[int] = []
        since: list[str] = []  # call ids of the outputs since the last run
        for i, item in enumerate(items):
            if model[i]:
                run.append(i)
                if i + 1 < len(items) and model[i + 1]:
                    continue
                out.extend(self._load_run(items, run))
                run, since = [], []
                continue
            kind = _kind(item)
            call_id = item.get("call_id")
            if kind in _OUTPUTS and isinstance(call_id, str) and call_id in stored:
                m = Message("user", (), raw=item)  # answers a stored call: carried as is
            else:
                m = self._load_item(i, item)
            if not m.parts and m.role == "user":  # an item pairing cannot see keeps its place
                m = Message(m.role, m.parts, raw=item, meta={_AFTER: frozenset(since)})
            elif kind in _OUTPUTS and isinstance(call_id, str):
                since.append(call_id)
            out.append(m)
        return out

    def _load_run(self, items: list[Mapping[str, Any]], run: list[int]) -> list[Message]:
        last = run[-1]
        parts: list[Part] = []
        for i in run:
            item = items[i]
            if _kind(item) in _CALLS:
                call_id, name = item.get("call_id"), item.get("name")
                args = item.get("arguments", item.get("input"))
                parts.append(
                    ToolCallPart(
                        call_id if isinstance(call_id, str) else "",
                        name if isinstance(name, str) else "",
                        args,
                        raw=item,
                    )
                )
            elif _empty_message(item):
                parts.append(TextPart("", raw=item))  # pairing drops it (the rules refuse it)
            else:
                parts.append(OpaquePart(item))
        holders = [Message("tool", (), raw=items[i], meta={_RUN: last}) for i in run[:-1]]
        raws = tuple(items[i] for i in run)
        return [*holders, Message("assistant", tuple(parts), raw=raws, meta={_INDEXES: tuple(run)})]

    def stands_alone(self, part: Part) -> bool:
        """A reasoning item goes out only before the item that followed it (see the module
        docstring): a run left with nothing but reasoning items is sent as nothing, no turn."""
        return not (isinstance(part, OpaquePart) and _reasoning(part.raw))

    def _load_item(self, index: int, item: Mapping[str, Any]) -> Message:
        kind = _kind(item)
        if kind in _OUTPUTS:
            call_id = item.get("call_id")
            if not isinstance(call_id, str):
                raise FormatError("call_id must be a string", index=index, field="call_id")
            part = ToolResultPart(call_id, output_text(item.get("output")), raw=item)
            return Message("tool", (part,), raw=item)
        if kind == "message":
            role = _INPUT_ROLES.get(str(item.get("role")))
            if role is None:
                raise FormatError(f"unknown role {item.get('role')!r}", index=index, field="role")
            return Message(role, (OpaquePart(item),), raw=item)  # type: ignore[arg-type]
        return Message("user", (), raw=item)  # an input-side item pairing has no business with

    def dump(self, history: History) -> list[Any]:
        out: list[Any] = []
        kinds = {
            c.id: _CALLS.get(_kind(c.raw), "function_call_output") if isinstance(c.raw, Mapping) else ""
            for m in history
            if m.role == "assistant"
            for c in m.calls
        }
        after_outputs: list[Any] = []  # items of new kinds that ended a changed run
        for m in history:
            if _RUN in m.meta:
                continue
            if m.role != "tool" and after_outputs:
                out.extend(after_outputs)
                after_outputs = []
            if m.role == "assistant":
                items, after_outputs = self._dump_run(m)
                out.extend(items)
            elif not m.dirty and m.raw is not None:
                out.append(m.raw)
            elif m.raw is None and not m.results:  # a message the pipeline made: its text
                text = "\n".join([p.text for p in m.parts if isinstance(p, TextPart)])
                out.append({"type": "message", "role": m.role, "content": text})
            else:
                out.extend(self._dump_result(p, kinds.get(p.call_id, "")) for p in m.results)
        out.extend(after_outputs)
        return out

    def _dump_run(self, m: Message) -> tuple[list[Any], list[Any]]:
        """The run's items, and the items of new kinds to send after the outputs that follow it.

        An item of a kind toolkeep does not know belongs to a run only between two model items
        (see :func:`_model_sides`): one that a pruned call leaves at the end of the run would
        load next time as input between the calls and their outputs. It goes after the outputs
        instead (so a second ``prepare`` gives the same request), and a reasoning item left last
        goes, as the API refuses one "without its required following item"."""
        if not m.dirty and isinstance(m.raw, tuple):
            return list(m.raw), []
        parts, later = _sent_parts(m)
        items = [self._dump_call(p) if isinstance(p, ToolCallPart) else p.raw for p in parts]
        return items, [p.raw for p in later]

    @staticmethod
    def _dump_call(p: ToolCallPart) -> Any:
        """The call's item: ``raw``, or a copy with its arguments (``arguments`` of a
        ``function_call``, ``input`` of a ``custom_tool_call``) and its ``call_id`` as ``p``
        holds them; a renamed call loses its item ``id`` (see the module docstring)."""
        raw = p.raw if isinstance(p.raw, Mapping) else None
        if raw is None:
            arguments = arguments_json(p.arguments)
            return {"type": "function_call", "call_id": p.id, "name": p.name, "arguments": arguments}
        key = "input" if "input" in raw and "arguments" not in raw else "arguments"
        changed = changed_arguments(p, raw.get(key))
        renamed = raw.get("call_id") != p.id
        if not changed and not renamed:
            return raw
        item = {k: v for k, v in raw.items() if k != "id"} if renamed else dict(raw)
        item["call_id"] = p.id
        if changed:
            item[key] = arguments_json(p.arguments)
        return item

    @staticmethod
    def _dump_result(p: ToolResultPart, kind: str) -> Any:
        raw = p.raw if isinstance(p.raw, Mapping) else None
        if raw is not None and not p.modified:
            return raw
        if raw is None:  # the output item that answers this call's kind
            return {"type": kind or "function_call_output", "call_id": p.call_id, "output": p.text}
        item = dict(raw)
        item["call_id"] = p.call_id
        output = item.get("output")
        if isinstance(output, list):
            rest = [x for x in output if not (isinstance(x, Mapping) and x.get("type") == "input_text")]
            item["output"] = [{"type": "input_text", "text": p.text}, *rest]
        else:
            item["output"] = p.text
        return item

    def pack_results(self, results: list[ToolResultPart], rest: list[Message]) -> list[Message]:
        """The outputs right after their calls, but behind the items pairing cannot see that came
        after one of them (an item keeps its place among the outputs); the rest after them all."""
        loaded = [_loaded_call_id(r) for r in results]
        out: list[Message] = []
        placed = 0
        for m in rest:
            after = m.meta.get(_AFTER)
            if m.parts or not isinstance(after, frozenset):
                upto = len(results)
            else:
                upto = max((k + 1 for k, call_id in enumerate(loaded) if call_id in after), default=0)
            if upto > placed:
                out.extend(results_as_tool_messages(results[placed:upto], []))
                placed = upto
            out.append(m)
        return [*out, *results_as_tool_messages(results[placed:], [])]

    def validate(self, history: History) -> list[Violation]:
        out: list[Violation] = []
        calls: dict[str, str] = {}  # call_id -> kind of its call
        answered: set[str] = set()
        pending: dict[str, tuple[int, str]] = {}
        for i, m in enumerate(history):
            if m.role == "assistant":
                out.extend(self._check_run(m, i, calls, pending))
            for p in m.results:
                kind = _kind(p.raw) if isinstance(p.raw, Mapping) else "function_call_output"
                if p.call_id not in calls:
                    out.append(
                        Violation(
                            i,
                            p.call_id,
                            "orphan_result",
                            f"No tool call found for {kind.replace('_', ' ')} with call_id {p.call_id}.",
                        )
                    )
                elif p.call_id in answered:
                    out.append(
                        Violation(
                            i,
                            p.call_id,
                            "duplicate_result",
                            f"Duplicate {kind.replace('_', ' ')} for call_id {p.call_id} at input[{i}].",
                        )
                    )
                answered.add(p.call_id)
                pending.pop(p.call_id, None)
        for call_id, (i, kind) in pending.items():
            out.append(
                Violation(
                    i,
                    call_id,
                    "missing_result",
                    f"No tool output found for {kind.replace('_', ' ')} {call_id}.",
                )
            )
        return sorted(out, key=lambda v: v.index)

    @staticmethod
    def _check_run(
        m: Message, i: int, calls: dict[str, str], pending: dict[str, tuple[int, str]]
    ) -> list[Violation]:
        out: list[Violation] = []
        indexes: tuple[int, ...] = m.meta.get(_INDEXES, ())
        for n, p in enumerate(m.parts):
            at = indexes[n] if n < len(indexes) and not m.dirty else i
            raw = p.raw if isinstance(p.raw, Mapping) else {}
            if isinstance(p, OpaquePart) and raw.get("type") == "reasoning":
                nxt = m.parts[n + 1] if n + 1 < len(m.parts) else None
                if nxt is None:
                    out.append(
                        Violation(
                            at,
                            raw.get("id") if isinstance(raw.get("id"), str) else None,
                            "dangling_reasoning",
                            f"Item '{raw.get('id')}' of type 'reasoning' was provided without its required following item.",
                        )
                    )
            if isinstance(p, TextPart) and _empty_message(raw):
                out.append(
                    Violation(
                        at,
                        None,
                        "empty_content",
                        f"Invalid 'input[{at}].content': empty array. Expected an array with minimum "
                        "length 1, but got an empty array instead.",
                    )
                )
            if not isinstance(p, ToolCallPart):
                continue
            kind = _kind(raw) or "function_call"
            if not p.id:
                out.append(
                    Violation(at, p.id, "empty_id", f"Missing required parameter: 'input[{at}].call_id'.")
                )
                continue
            if p.id in calls:
                out.append(
                    Violation(
                        at,
                        p.id,
                        "duplicate_id",
                        f"Invalid 'input[{at}].call_id': duplicate value '{p.id}'; each call needs its own call_id.",
                    )
                )
                continue
            calls[p.id] = kind
            pending[p.id] = (at, kind)
        return out

    def tool_definitions(self, specs: Sequence[ToolSpec]) -> list[Any]:
        return [
            {
                "type": "function",
                "name": s.name,
                "description": s.description,
                "parameters": s.fresh_schema(),
                "strict": False,
            }
            for s in specs
        ]

    def request_tools(self, request: Mapping[str, Any]) -> list[ToolSpec]:
        """The ``function`` tools of ``tools`` (``name``, ``description``, ``parameters``), those of
        each ``namespace`` (``{"type": "namespace", "name": "mcp__toolkeep", "tools": [...]}``,
        as Codex sends an MCP server's tools: each named ``mcp__toolkeep__recall``), and
        the tools of each remote MCP server (``{"type": "mcp", "server_label", "server_url",
        "allowed_tools"}``, which the provider calls itself), each with :attr:`ToolSpec.server`
        set: one per allowed tool name, or one named ``""`` (any tool the server lists) when the
        request does not narrow them. The function tools of a ``namespace`` (Codex puts each MCP
        server's tools in one, ``mcp__toolkeep``) are named ``NAMESPACE__NAME``, as Codex names an
        MCP tool. Built-in tools (``web_search``, ``file_search``, ...) and custom tools are left
        out."""
        found = []
        for t in mappings_in(request.get("tools")):
            kind = t.get("type")
            if kind == "function":
                spec = declared_tool(t.get("name"), t.get("description"), t.get("parameters"))
                if spec is not None:
                    found.append(spec)
            elif kind == "namespace" and isinstance(t.get("name"), str):
                # Codex groups an MCP server's tools: namespace "mcp__toolkeep", function "recall",
                # which it names mcp__toolkeep__recall
                prefix = t["name"] if t["name"].endswith("__") else t["name"] + "__"
                for f in mappings_in(t.get("tools")):
                    name = f.get("name")
                    if f.get("type") == "function" and isinstance(name, str) and name:
                        spec = declared_tool(prefix + name, f.get("description"), f.get("parameters"))
                        if spec is not None:
                            found.append(spec)
            elif kind == "mcp":
                url, label = t.get("server_url"), t.get("server_label")
                server = url if isinstance(url, str) and url else label if isinstance(label, str) else ""
                allowed = t.get("allowed_tools")
                if isinstance(allowed, Mapping):  # the filter form: {"tool_names": [...], ...}
                    allowed = allowed.get("tool_names")
                names = [n for n in allowed if isinstance(n, str)] if isinstance(allowed, list) else [""]
                description = t.get("server_description")
                found += [
                    ToolSpec(n, description if isinstance(description, str) else "", {}, server)
                    for n in names
                ]
        return found

    def response_calls(self, response: Any) -> list[ToolCall]:
        """The ``function_call`` items of a ``Response``'s ``output`` (or its dict), or of the
        output items themselves."""
        return [
            ToolCall.read(field_of(i, "call_id"), field_of(i, "name"), field_of(i, "arguments"))
            for i in list_in(response, "output")
            if field_of(i, "type") == "function_call"
        ]

    def result_messages(self, answered: Sequence[Answer]) -> list[Any]:
        """One ``function_call_output`` item per call (the Responses API has no error flag)."""
        return [
            {"type": "function_call_output", "call_id": call.id, "output": text} for call, text, _ in answered
        ]

    def message_chars(self, message: Message) -> int:
        """Chars of the items ``message`` stands for: a run's whole (``0`` for the placeholders
        before it), a result's output item, any other item as it came."""
        m = message
        if _RUN in m.meta:
            return 0  # sent with its run
        if m.role == "assistant":
            if not m.dirty and isinstance(m.raw, tuple):
                return sum(map(input_chars, m.raw))
            return _run_chars(m)
        if not m.dirty and m.raw is not None:
            return input_chars(m.raw)
        return sum(map(_result_chars, m.results))


def _run_chars(m: Message) -> int:
    """Chars of the items :meth:`OpenAIResponsesFormat._dump_run` makes of a changed run: those
    of unknown kinds it moves after the outputs count, a reasoning item it drops does not."""
    parts, later = _sent_parts(m)
    sent = sum(_call_chars(p) if isinstance(p, ToolCallPart) else input_chars(p.raw) for p in parts)
    return sent + sum(input_chars(p.raw) for p in later)


def _empty_message(item: Mapping[str, Any]) -> bool:
    """True for an assistant ``message`` item with no content (``[]`` or ``null``): what an
    interrupted stream leaves, and what the API refuses. It loads as a blank text part, which
    pairing drops (the rules say ``refuses_blank_text``: no other text part loads here)."""
    return _kind(item) == "message" and item.get("role") == "assistant" and not item.get("content")


def _sent_parts(m: Message) -> tuple[list[ToolCallPart | OpaquePart], list[OpaquePart]]:
    """The parts of a changed run that go out as its items, in order, and the items of unknown
    kinds left last, which go after the run's outputs (see the module docstring). A reasoning
    item goes only where the item after it is the one that followed it in the run as loaded
    (``m.raw``), sent as it came: with its item ``id``; one that was not in the run goes where
    any item follows it."""
    raws: tuple[Any, ...] = m.raw if isinstance(m.raw, tuple) else ()
    followers = {
        id(x): raws[k + 1] if k + 1 < len(raws) else None for k, x in enumerate(raws) if _reasoning(x)
    }
    parts = [p for p in m.parts if isinstance(p, (ToolCallPart, OpaquePart))]
    kept: list[ToolCallPart | OpaquePart] = []
    for n, p in enumerate(parts):
        if not (isinstance(p, OpaquePart) and _reasoning(p.raw)):
            kept.append(p)
            continue
        nxt = parts[n + 1] if n + 1 < len(parts) else None
        if nxt is None:
            continue  # its following item was pruned
        follower = followers.get(id(p.raw), nxt.raw)
        if nxt.raw is follower and not (isinstance(nxt, ToolCallPart) and _loses_item_id(nxt)):
            kept.append(p)
    later: list[OpaquePart] = []
    while kept and isinstance(kept[-1], OpaquePart) and isinstance(kept[-1].raw, Mapping):
        last = kept[-1]
        if _side(last.raw) == "unknown":
            later.insert(0, last)
        elif not _reasoning(last.raw):
            break
        kept.pop()  # (a reasoning item whose following item went after the outputs goes)
    return kept, later


def _reasoning(item: Any) -> bool:
    return isinstance(item, Mapping) and item.get("type") == "reasoning"


def _loses_item_id(p: ToolCallPart) -> bool:
    """True for a renamed call whose item had an ``id``: it goes out without it."""
    raw = p.raw if isinstance(p.raw, Mapping) else None
    return raw is not None and "id" in raw and raw.get("call_id") != p.id


def _loaded_call_id(p: ToolResultPart) -> str:
    """The call id an output came with (before any rename), as :data:`_AFTER` holds them."""
    call_id = p.raw.get("call_id") if isinstance(p.raw, Mapping) else None
    return call_id if isinstance(call_id, str) else p.call_id


def _call_chars(p: ToolCallPart) -> int:
    """Chars of the item :meth:`OpenAIResponsesFormat._dump_call` sends for ``p``."""
    raw = p.raw if isinstance(p.raw, Mapping) else None
    if raw is None:
        arguments = input_chars(arguments_json(p.arguments))
        new = {"call_id": input_chars(p.id), "name": input_chars(p.name), "arguments": arguments}
        return object_chars(_NEW_CALL, new)
    key = "input" if "input" in raw and "arguments" not in raw else "arguments"
    changed = changed_arguments(p, raw.get(key))
    renamed = raw.get("call_id") != p.id
    if not changed and not renamed:
        return input_chars(raw)
    sized: dict[str, int | None] = {"call_id": input_chars(p.id)}
    if renamed:
        sized["id"] = None  # a renamed call loses its item id
    if changed:
        sized[key] = input_chars(arguments_json(p.arguments))
    return object_chars(raw, sized)


def _result_chars(p: ToolResultPart) -> int:
    """Chars of the output item :meth:`OpenAIResponsesFormat._dump_result` sends for ``p``."""
    raw = p.raw if isinstance(p.raw, Mapping) else None
    if raw is not None and not p.modified:
        return input_chars(raw)
    size = blocks_chars(raw.get("output") if raw is not None else None, p.text, "input_text")
    return object_chars(
        raw if raw is not None else _NEW_OUTPUT, {"call_id": input_chars(p.call_id), "output": size}
    )


_NEW_CALL = {"type": "function_call"}
_NEW_OUTPUT = {"type": "function_call_output"}


_CONTINUED = OpenAIResponsesFormat(previous_response=True)
"""The format of every Responses request that continues state kept on the server."""
