"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Each line is ``{"timestamp", "type", "payload"}``. ``session_meta`` comes first (its payload may
carry the ``instructions``); ``response_item`` payloads are the Responses API items the model saw
or produced: ``message`` (role ``user``/``developer``/``assistant``, content of
``input_text``/``output_text`` parts), ``function_call`` (``name``, ``arguments`` as a JSON string,
``call_id``), ``function_call_output`` (``call_id``, ``output``: a string, a list of content
items, or in older versions ``{"content", "success"}``), ``custom_tool_call``/
``custom_tool_call_output`` (freeform input such as ``apply_patch``), ``local_shell_call``
(``action.command`` argv) and ``reasoning`` (not resent as text; skipped). ``event_msg`` and
``turn_context`` lines repeat what the items already say, for the UI, and are skipped. A
``compacted`` line ends the context: what follows starts from its ``replacement_history`` (or its
summary ``message``), and each context is a session, ``FILE#1``, ``FILE#2`` ...

Older rollouts have no envelope: the first line is ``{"id", "timestamp", "instructions"}`` and the
others are the items themselves (plus ``{"record_type": "state"}`` markers).
"""

from __future__ import annotations

from typing import Any

from ._base import Document, Importer, RecordedSession, TranscriptBuilder, split_sessions, text_of

__all__ = ["CodexImporter"]

_ENVELOPE_TYPES = {"session_meta", "response_item", "turn_context", "event_msg", "compacted"}
_ITEM_TYPES = {
    "message",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "reasoning",
    "web_search_call",
}


class CodexImporter(Importer):
    """Codex CLI rollout JSONL."""

    name = "codex"
    pricing = "openai"
    description = "Codex CLI rollout JSONL (~/.codex/sessions/**/rollout-*.jsonl)"

    def detect(self, doc: Document) -> bool:
        head = doc.records[:50]
        if any(r.get("type") in _ENVELOPE_TYPES and isinstance(r.get("payload"), dict) for r in head):
            return True
        # Legacy: a metadata line, then bare Responses items.
        return (
            bool(head)
            and "id" in head[0]
            and "timestamp" in head[0]
            and any(r.get("type") in _ITEM_TYPES for r in head[1:])
        )

    def load(self, doc: Document) -> list[RecordedSession]:
        builders = [TranscriptBuilder()]
        system: str | None = None
        for record in doc.records:
            if record.get("type") in _ENVELOPE_TYPES:
                payload = record.get("payload")
                if not isinstance(payload, dict):
                    continue
                if record["type"] == "session_meta":
                    system = _instructions(payload) or system
                elif record["type"] == "response_item":
                    _item(builders[-1], payload)
                elif record["type"] == "compacted":
                    builders.append(_compacted(payload))
            elif record.get("type") in _ITEM_TYPES:
                _item(builders[-1], record)
            elif "instructions" in record and "id" in record:
                system = _instructions(record) or system
        return split_sessions(doc, self.name, builders, system)


def _compacted(payload: dict[str, Any]) -> TranscriptBuilder:
    """The context a compaction leaves: its replacement history, or else its summary message."""
    b = TranscriptBuilder()
    history = payload.get("replacement_history")
    if isinstance(history, list):
        for item in history:
            if isinstance(item, dict):
                _item(b, item)
    else:
        b.user_text(text_of(payload.get("message")))
    return b


def _instructions(meta: dict[str, Any]) -> str | None:
    value = meta.get("instructions")
    if isinstance(value, str) and value:
        return value
    base = meta.get("base_instructions")
    if isinstance(base, dict) and isinstance(base.get("text"), str):
        return str(base["text"])
    return None


def _item(b: TranscriptBuilder, item: dict[str, Any]) -> None:
    kind = item.get("type")
    if kind == "message":
        text = text_of(item.get("content"))
        if item.get("role") == "assistant":
            b.assistant_text(text)
        else:  # user and developer messages are both input the model reads
            b.user_text(text)
    elif kind == "function_call":
        b.tool_call(item.get("name"), item.get("arguments"), item.get("call_id"))
    elif kind == "custom_tool_call":
        b.tool_call(item.get("name"), {"input": item.get("input", "")}, item.get("call_id"))
    elif kind == "local_shell_call":
        raw = item.get("action")
        action: dict[str, Any] = raw if isinstance(raw, dict) else {}
        b.tool_call("shell", {"command": action.get("command", [])}, item.get("call_id") or item.get("id"))
    elif kind in ("function_call_output", "custom_tool_call_output"):
        text, ok = _output(item.get("output"))
        b.tool_result(text, item.get("call_id"), is_error=not ok)


def _output(output: Any) -> tuple[str, bool]:
    """The text of a call output and whether it succeeded."""
    if isinstance(output, str):
        return output, True
    if isinstance(output, dict):  # older rollouts: {"content": ..., "success": bool}
        return text_of(output.get("content")), output.get("success") is not False
    return text_of(output), True
