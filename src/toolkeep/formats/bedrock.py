"""AWS Bedrock Converse: ``toolUse`` blocks in an assistant message, ``toolResult`` blocks in the
next user message.

A content block is a one-key object (``{"text": ...}``, ``{"toolUse": {...}}``,
``{"toolResult": {...}}``, ``{"image": ...}``, ``{"cachePoint": ...}``, ...). Converse also wants
the conversation to start with a user message and to alternate user/assistant, and it takes no
text beside ``toolResult`` blocks in one message ("Conversation blocks and tool result blocks
cannot be provided in the same turn"). Pairing repair can leave two messages of one role next to
each other (a user message that held only orphan results is dropped, an empty assistant message
goes, results are moved back in front of an interposed user message), and a user's words often
sit beside the results they answer, so :meth:`BedrockFormat.dump` keeps the rules itself:

- consecutive user messages are merged into one;
- the user's text in a message that holds ``toolResult`` blocks (a note typed while the tools
  ran, a message that sat between a call and its result) goes to a user message of its own after
  them, with the assistant turn :data:`FILLER_TEXT` between, the smallest turn Converse takes
  there: it wants the roles to alternate and refuses an empty or blank assistant message. The
  user's words stay the user's, in order, and the results stay as the tools gave them; other
  blocks (images, ``cachePoint``) beside the results stay where they are. LiteLLM's
  ``modify_params`` does the same with its own filler. The filler is recognised on the next
  load: it loads as an empty user-side message that no step counts as a turn (so ages, and the
  output, do not change when a prepared history is prepared again), which the dump leaves out
  and puts back wherever Converse still needs it. Nothing else in a history is that exact
  message, unless a model answered exactly :data:`FILLER_TEXT`;
- two assistant messages side by side get the user message ``(continue)`` between them (and a
  history that would start with an assistant message gets it first). Merging them instead would
  make every older result one turn younger on the next ``prepare``, and so break idempotence at
  the microcompaction boundaries; a fixed user turn keeps the turn count and the bytes stable.

Nothing is lost, no call or result is invented, and a history that was valid has no such pair, so
it comes back unchanged.

A ``toolResult``'s text is its text blocks joined by newlines (as Anthropic joins a result's text
blocks), or, for a result of ``json`` blocks only, their JSON: one original per result, archived
and recalled whole. A shortened result's text takes the first such block's place; its other
blocks (images, documents, ``json`` beside text) are kept as they are.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..exceptions import FormatError
from ..messages import History, Message, OpaquePart, Part, TextPart, ToolCallPart, ToolResultPart
from ._base import (
    CONTINUE_TEXT,
    Answer,
    CallIdRule,
    Format,
    FormatRules,
    RequestShape,
    ToolCall,
    ToolSpec,
    Violation,
    blank_text,
    changed_arguments,
    declared_tool,
    expect_mapping,
    field_of,
    input_chars,
    list_chars,
    list_in,
    mappings_in,
    object_chars,
)

__all__ = ["CONTINUE_MESSAGE", "FILLER_MESSAGE", "FILLER_TEXT", "BedrockFormat"]

_ROLES = ("user", "assistant")
CONTINUE_MESSAGE: dict[str, Any] = {"role": "user", "content": [{"text": CONTINUE_TEXT}]}
FILLER_TEXT = "(tool results received)"
"""The text of the assistant turn the dump puts between a user message of ``toolResult`` blocks
and the user's text that came with them (see the module docstring)."""
FILLER_MESSAGE: dict[str, Any] = {"role": "assistant", "content": [{"text": FILLER_TEXT}]}
_FILLER = "bedrock.filler"
"""``meta`` key of the neutral message a filler turn loads as."""
_DISTINCT = {"toolUse", "toolResult", "cachePoint", "reasoningContent", "guardContent", "citationsContent"}


def result_text(content: Any) -> str:
    """The text of a ``toolResult``: its text blocks joined by newlines, or, when it has none,
    its ``json`` blocks as JSON (joined the same way); ``""`` for neither."""
    blocks = [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []
    texts = [b["text"] for b in blocks if isinstance(b.get("text"), str)]
    if texts:
        return "\n".join(texts)
    return "\n".join(json.dumps(b["json"], ensure_ascii=False) for b in blocks if "json" in b)


_ID_RULE = CallIdRule(
    lambda i, j, c: (
        f"1 validation error detected: Value '{c}' at 'messages.{i + 1}.member.content.{j + 1}.member"
        ".toolUse.toolUseId' failed to satisfy constraint: "
        + (
            "Member must have length less than or equal to 64"
            if len(c) > 64
            else "Member must satisfy regular expression pattern: [a-zA-Z0-9_.:-]+"
        )
    ),
    chars="a-zA-Z0-9_.:-",
    max_length=64,
)


class BedrockFormat(Format):
    """Bedrock Converse ``messages`` (dicts, as boto3 takes them)."""

    name = "bedrock"
    request = RequestShape(
        "messages", system_keys=("system",), tools_keys=("toolConfig",), client_roles=frozenset({"user"})
    )
    """Converse's request (boto3's keyword arguments): no route, the proxy serves no Bedrock API."""
    moving_keys = frozenset({"cachePoint"})
    """A ``{"cachePoint": ...}`` block marks where the cache ends, and moves with it."""
    rules = FormatRules(
        unique_call_ids=True,
        grouped_results=True,
        refuses_blank_text=True,
        call_id_rule=_ID_RULE,
        editable_arguments=True,
        pricing="bedrock",
    )

    def detect(self, messages: Sequence[Any]) -> int:
        score = 1
        for m in messages:
            if not isinstance(m, Mapping) or m.get("role") not in _ROLES:
                return 0
            content = m.get("content")
            if not isinstance(content, list):
                return 0
            for block in content:
                if not isinstance(block, Mapping) or "type" in block:
                    return 0
                if _DISTINCT & block.keys() or (len(block) == 1 and "text" in block):
                    score = 2
        return score

    def load_message(self, index: int, raw: Any) -> Message:
        m = expect_mapping(raw, index)
        role = m.get("role")
        if role not in _ROLES:
            raise FormatError(f"role must be 'user' or 'assistant', got {role!r}", index=index, field="role")
        content = m.get("content")
        if not isinstance(content, list):
            raise FormatError("content must be a list of content blocks", index=index, field="content")
        if role == "assistant" and content == FILLER_MESSAGE["content"]:
            return Message("user", (), raw=m, meta={_FILLER: True})  # no turn: see the docstring
        parts: list[Part] = []
        for j, value in enumerate(content):
            block = expect_mapping(value, index, f"content[{j}]")
            use, result = block.get("toolUse"), block.get("toolResult")
            if isinstance(use, Mapping) and role == "assistant":
                parts.append(
                    ToolCallPart(
                        _str(use.get("toolUseId")), _str(use.get("name")), use.get("input"), raw=block
                    )
                )
            elif isinstance(result, Mapping):
                if not isinstance(result.get("content") or [], list):  # a shortened text goes in it
                    raise FormatError(
                        f"toolResult content must be a list of blocks, got {type(result['content']).__name__}",
                        index=index,
                        field=f"content[{j}].toolResult.content",
                    )
                parts.append(
                    ToolResultPart(
                        _str(result.get("toolUseId")),
                        result_text(result.get("content")),
                        is_error=result.get("status") == "error",
                        raw=block,
                    )
                )
            elif isinstance(block.get("text"), str) and len(block) == 1:
                parts.append(TextPart(block["text"], raw=block))
            else:
                parts.append(OpaquePart(block))
        return Message(role, tuple(parts), raw=m)

    def dump(self, history: History) -> list[Any]:
        out: list[Any] = []
        run: list[Any] = []  # consecutive user messages, sent as one turn (or split, see _user_turns)
        filler: Any = None  # a filler the run held: given back where one is still needed
        last = ""  # the role of the last message in out
        for m in history:
            if m.meta.get(_FILLER):
                filler = filler or m.raw  # put back below wherever it is still needed
                continue
            msg = m.raw if not m.dirty else {**(m.raw or {}), "role": m.role, "content": self._blocks(m)}
            if m.role == "user":
                run.append(msg)
                continue
            if run:
                out.extend(_user_turns(run, filler))
                run, last = [], "user"
            filler = None
            if last != "user":
                out.append(copy.deepcopy(CONTINUE_MESSAGE))
            out.append(msg)
            last = m.role
        out.extend(_user_turns(run, filler))
        return out

    def _blocks(self, m: Message) -> list[Any]:
        return [self._dump_part(p) for p in m.parts]

    @staticmethod
    def _dump_part(p: Part) -> Any:
        if isinstance(p, TextPart):
            return p.raw if p.raw is not None else {"text": p.text}
        if isinstance(p, OpaquePart):
            return p.raw
        if isinstance(p, ToolCallPart):
            use = p.raw.get("toolUse") if isinstance(p.raw, Mapping) else None
            if isinstance(use, Mapping):
                changed = changed_arguments(p, use.get("input"))
                if use.get("toolUseId") == p.id and not changed:
                    return p.raw
                body = dict(use)
            else:  # a call the pipeline made
                changed, body = True, {"name": p.name}
            if changed:
                body["input"] = p.arguments if p.arguments is not None else {}
            return {**(p.raw or {}), "toolUse": {**body, "toolUseId": p.id}}
        if not p.modified and p.raw is not None:
            return p.raw
        old = p.raw.get("toolResult") if isinstance(p.raw, Mapping) else None
        body = dict(old) if isinstance(old, Mapping) else {}
        body["toolUseId"] = p.call_id
        body["content"] = _with_text(list(body.get("content") or ()), {"text": p.text})
        if p.is_error:
            body["status"] = "error"
        return {**(p.raw or {}), "toolResult": body}

    def pack_results(self, results: list[ToolResultPart], rest: list[Message]) -> list[Message]:
        return [Message("user", tuple(results), dirty=True), *rest]

    def validate(self, history: History) -> list[Violation]:
        out: list[Violation] = []
        seen: set[str] = set()
        for i, m in enumerate(history):
            role = _turn(m)
            if i == 0 and role != "user":
                out.append(
                    Violation(
                        i,
                        None,
                        "first_not_user",
                        "A conversation must start with a user message. Try again with a conversation that starts with a user message.",
                    )
                )
            if i > 0 and _turn(history[i - 1]) == role:
                out.append(
                    Violation(
                        i,
                        None,
                        "roles_not_alternating",
                        f"messages.{i}: A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again.",
                    )
                )
            if m.meta.get(_FILLER):
                continue  # a turn of its own text, nothing else in it
            if not m.parts:
                out.append(
                    Violation(
                        i,
                        None,
                        "empty_content",
                        f"The content field in the Message object at messages.{i} is empty. Add a ContentBlock object to the content field and try again.",
                    )
                )
            out.extend(
                Violation(
                    i,
                    None,
                    "blank_text",
                    f"The text field in the ContentBlock object at messages.{i}.content.{j} is blank. Add text to the text field, and try again.",
                )
                for j, p in enumerate(m.parts)
                if blank_text(p)
            )
            if m.role == "assistant":
                out.extend(self._check_calls(history, i, seen))
            else:
                out.extend(self._check_results(history, i))
        return out

    def _check_calls(self, history: History, i: int, seen: set[str]) -> list[Violation]:
        out: list[Violation] = []
        for j, p in enumerate(history[i].parts):
            if not isinstance(p, ToolCallPart):
                continue
            if p.id and not _ID_RULE.accepts(p.id):
                out.append(Violation(i, p.id, "invalid_id", _ID_RULE.refusal(i, j, p.id)))
            elif not p.id or p.id in seen:
                rule = "empty_id" if not p.id else "duplicate_id"
                what = "is empty" if not p.id else f"{p.id} is used by another toolUse block"
                out.append(
                    Violation(
                        i,
                        p.id,
                        rule,
                        f"The toolUseId at messages.{i}.content.{j}.toolUse {what}. Provide a unique toolUseId and try again.",
                    )
                )
            seen.add(p.id)
        calls = [c.id for c in history[i].calls if c.id]
        if not calls:
            return out
        nxt = history[i + 1] if i + 1 < len(history) else None
        answered = {r.call_id for r in nxt.results} if nxt is not None and nxt.role == "user" else set()
        missing = [c for c in dict.fromkeys(calls) if c not in answered]
        if missing:
            out.append(
                Violation(
                    i,
                    missing[0],
                    "missing_result",
                    f"Expected toolResult blocks at messages.{i + 1}.content for the following Ids: {', '.join(missing)}",
                )
            )
        return out

    def _check_results(self, history: History, i: int) -> list[Violation]:
        m = history[i]
        results = m.results
        if not results:
            return []
        out: list[Violation] = []
        prev = history[i - 1] if i > 0 else None
        calls = [c.id for c in prev.calls] if prev is not None and prev.role == "assistant" else []
        if len(results) > len(calls):
            out.append(
                Violation(
                    i,
                    results[-1].call_id,
                    "orphan_result",
                    f"The number of toolResult blocks at messages.{i}.content exceeds the number of toolUse blocks of previous turn.",
                )
            )
        claimed: set[str] = set()
        for j, p in enumerate(m.parts):
            if isinstance(p, TextPart):
                out.append(
                    Violation(
                        i,
                        None,
                        "text_beside_results",
                        f"messages.{i}.content: Conversation blocks and tool result blocks cannot be provided in the same turn. (text at content.{j})",
                    )
                )
            if not isinstance(p, ToolResultPart):
                continue
            if p.call_id not in calls or p.call_id in claimed:
                out.append(
                    Violation(
                        i,
                        p.call_id,
                        "orphan_result" if p.call_id not in calls else "duplicate_result",
                        f"The toolUseId {p.call_id} at messages.{i}.content.{j}.toolResult does not match any unanswered toolUse block of the previous turn.",
                    )
                )
            claimed.add(p.call_id)
        return out

    def tool_definitions(self, specs: Sequence[ToolSpec]) -> list[Any]:
        """``toolSpec`` entries for ``toolConfig={"tools": [...]}``."""
        return [
            {
                "toolSpec": {
                    "name": s.name,
                    "description": s.description,
                    "inputSchema": {"json": s.fresh_schema()},
                }
            }
            for s in specs
        ]

    def request_tools(self, request: Mapping[str, Any]) -> list[ToolSpec]:
        """The ``toolSpec`` entries of ``toolConfig.tools`` (``name``, ``description``,
        ``inputSchema.json``)."""
        config = request.get("toolConfig")
        found = []
        for t in mappings_in(config.get("tools") if isinstance(config, Mapping) else None):
            spec = t.get("toolSpec")
            if isinstance(spec, Mapping):
                schema = spec.get("inputSchema")
                declared = declared_tool(
                    spec.get("name"),
                    spec.get("description"),
                    schema.get("json") if isinstance(schema, Mapping) else None,
                )
                if declared is not None:
                    found.append(declared)
        return found

    def response_calls(self, response: Any) -> list[ToolCall]:
        """The ``toolUse`` blocks of a Converse response's ``output.message`` (boto3 gives a
        dict), or of the assistant message or its ``content`` list."""
        message = field_of(field_of(response, "output"), "message", response)
        uses = [field_of(block, "toolUse") for block in list_in(message, "content")]
        return [
            ToolCall.read(use.get("toolUseId"), use.get("name"), use.get("input"))
            for use in uses
            if isinstance(use, Mapping)
        ]

    def result_messages(self, answered: Sequence[Answer]) -> list[Any]:
        """One user message of ``toolResult`` blocks (``status: "error"`` for a failure)."""
        if not answered:
            return []
        blocks = []
        for call, text, error in answered:
            result: dict[str, Any] = {"toolUseId": call.id, "content": [{"text": text}]}
            if error:
                result["status"] = "error"
            blocks.append({"toolResult": result})
        return [{"role": "user", "content": blocks}]

    def message_chars(self, message: Message) -> int:
        """Chars of ``message`` as sent: a user message with text beside its results as the
        three messages the dump makes of it; a filler as nothing, as the dump sends it alone
        (it puts one back wherever Converse still needs it, as it would where the history held
        none: a results message followed by the user's text). So a prepared history, fillers
        and all, measures as the history it was prepared from, and the cache-aware policy
        decides the same on it (it once decided otherwise on a prepared Bedrock history, by the
        fillers' chars, and preparing it again changed it)."""
        m = message
        if m.meta.get(_FILLER):
            return 0
        raw = m.raw if isinstance(m.raw, Mapping) else None
        if not m.dirty and raw is not None:
            if m.role == "user":
                return sum(map(input_chars, _user_turns([raw])))
            return input_chars(raw)  # sent as it came
        sizes = [_part_chars(p) for p in m.parts]
        kinds = [_kind(p) for p in m.parts]
        role = input_chars(m.role)
        if m.role != "user" or "result" not in kinds or "text" not in kinds:
            return object_chars(raw, {"role": role, "content": list_chars(sizes)})
        keep, moved = _partition(kinds)
        head = object_chars(raw, {"role": role, "content": list_chars(sizes[k] for k in keep)})
        tail = object_chars(None, {"role": role, "content": list_chars(sizes[k] for k in moved)})
        return head + input_chars(FILLER_MESSAGE) + tail


def _turn(m: Message) -> str:
    """The role Converse sees for a loaded message (a filler loads as a user-side placeholder)."""
    return "assistant" if m.meta.get(_FILLER) else m.role


def _merged(messages: list[Any]) -> Any:
    """One user message holding the blocks of ``messages`` in order (the first as it is when
    alone)."""
    if len(messages) == 1:
        return messages[0]
    return {**messages[0], "content": [b for msg in messages for b in _content(msg)]}


def _user_turns(run: list[Any], filler: Any = None) -> list[Any]:
    """The user messages Converse takes for consecutive user messages ``run``: one message, or,
    when text would sit beside ``toolResult`` blocks, the results (and the blocks that were with
    them), the filler turn (``filler``, the one the input had there, else a new
    :data:`FILLER_MESSAGE`), and the rest: the text blocks, each block that followed one after
    the last result, and the messages after the results, in order."""
    if not run:
        return []
    last = max((k for k, msg in enumerate(run) if any(map(_is_result, _content(msg)))), default=-1)
    head, tail = _merged(run[: last + 1]) if last >= 0 else None, run[last + 1 :]
    blocks = _content(head) if head is not None else []
    if head is None or not (
        any(map(_is_text, blocks)) or any(_is_text(b) for m in tail for b in _content(m))
    ):
        return [_merged(run)]
    keep, moved = _partition(["result" if _is_result(b) else "text" if _is_text(b) else "" for b in blocks])
    if moved:
        head = {**head, "content": [blocks[k] for k in keep]}
        tail = [{"role": "user", "content": [blocks[k] for k in moved]}, *tail]
    return [head, filler if filler is not None else copy.deepcopy(FILLER_MESSAGE), _merged(tail)]


def _partition(kinds: list[str]) -> tuple[list[int], list[int]]:
    """Where the blocks of a user message (``"result"``, ``"text"`` or ``""`` each) go when its
    text must leave its results: the indexes that stay, and those that move after the filler
    (every text block, and every block after the last result once a text block moved)."""
    cut = max(k for k, kind in enumerate(kinds) if kind == "result")
    keep: list[int] = []
    moved: list[int] = []
    for k, kind in enumerate(kinds):
        (moved if kind == "text" or (k > cut and moved) else keep).append(k)
    return keep, moved


def _kind(p: Part) -> str:
    """What the block :meth:`BedrockFormat._dump_part` sends for ``p`` is, for :func:`_partition`."""
    if isinstance(p, ToolResultPart):
        return "result"
    return "text" if isinstance(p, TextPart) and (p.raw is None or _is_text(p.raw)) else ""


def _content(msg: Any) -> list[Any]:
    content = msg.get("content") if isinstance(msg, Mapping) else None
    return content if isinstance(content, list) else []


def _is_result(block: Any) -> bool:
    return isinstance(block, Mapping) and isinstance(block.get("toolResult"), Mapping)


def _is_text(block: Any) -> bool:
    return isinstance(block, Mapping) and isinstance(block.get("text"), str) and len(block) == 1


def _outputs(blocks: list[Any]) -> list[int]:
    """Where a ``toolResult``'s text is (:func:`result_text`): its text blocks, else its json
    blocks."""
    texts = [k for k, b in enumerate(blocks) if isinstance(b, Mapping) and isinstance(b.get("text"), str)]
    return texts or [k for k, b in enumerate(blocks) if isinstance(b, Mapping) and "json" in b]


def _with_text(blocks: list[Any], text: Any, items: list[Any] | None = None) -> list[Any]:
    """A ``toolResult``'s content with ``text`` in place of the blocks its text was read from, at
    the first one's place (first when there were none); every other block as it was. With
    ``items`` (one per block, such as their sizes), those items are placed instead of the blocks."""
    kept = blocks if items is None else items
    outputs = _outputs(blocks)
    if not outputs:
        return [text, *kept]
    drop = set(outputs[1:])
    return [text if k == outputs[0] else b for k, b in enumerate(kept) if k not in drop]


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _call_chars(p: ToolCallPart, raw: Mapping[str, Any] | None) -> int:
    """Chars of the ``toolUse`` block :meth:`BedrockFormat._dump_part` sends for ``p``."""
    use = raw.get("toolUse") if raw is not None else None
    changed = not isinstance(use, Mapping) or changed_arguments(p, use.get("input"))
    if isinstance(use, Mapping) and use.get("toolUseId") == p.id and not changed:
        return input_chars(raw)
    sized: dict[str, int | None] = {"toolUseId": input_chars(p.id)}
    if changed:
        sized["input"] = input_chars(p.arguments if p.arguments is not None else {})
    body = use if isinstance(use, Mapping) else {"name": p.name}
    return object_chars(raw, {"toolUse": object_chars(body, sized)})


def _part_chars(p: Part) -> int:
    """Chars of one content block as :meth:`BedrockFormat._dump_part` sends it."""
    if isinstance(p, OpaquePart):
        return input_chars(p.raw)
    if isinstance(p, TextPart):
        return input_chars(p.raw) if p.raw is not None else object_chars(None, {"text": input_chars(p.text)})
    raw = p.raw if isinstance(p.raw, Mapping) else None
    if isinstance(p, ToolCallPart):
        return _call_chars(p, raw)
    if not p.modified and raw is not None:
        return input_chars(raw)
    old = raw.get("toolResult") if raw is not None else None
    body = old if isinstance(old, Mapping) else {}
    blocks = list(body.get("content") or ())
    text = object_chars(None, {"text": input_chars(p.text)})
    sizes = _with_text(blocks, text, [input_chars(b) for b in blocks])  # not the old text
    sized: dict[str, int | None] = {"toolUseId": input_chars(p.call_id), "content": list_chars(sizes)}
    if p.is_error:
        sized["status"] = input_chars("error")
    return object_chars(raw, {"toolResult": object_chars(body, sized)})
