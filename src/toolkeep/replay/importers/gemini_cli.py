"""Gemini CLI ``--output-format stream-json`` transcripts.

One event per line: ``init`` (a session starts), ``message`` (``role``, ``content``; streamed
assistant text comes as ``delta`` chunks), ``tool_use`` (``tool_name``, ``tool_id``,
``parameters``), ``tool_result`` (``tool_id``, ``status``, ``output`` or ``error``) and a final
``result``. A file that holds several ``init`` events holds several sessions (``FILE#2`` ...):
each started from an empty context.
"""

from __future__ import annotations

from typing import Any

from ._base import Document, Importer, RecordedSession, TranscriptBuilder, split_sessions, text_of

__all__ = ["GeminiCLIImporter"]

_EVENT_TYPES = {"init", "message", "tool_use", "tool_result", "result"}


class GeminiCLIImporter(Importer):
    """Gemini CLI stream-json transcripts."""

    name = "gemini-cli"
    pricing = "gemini"
    description = "Gemini CLI stream-json transcript (JSONL of init/message/tool_use/tool_result)"

    def detect(self, doc: Document) -> bool:
        head = doc.records[:50]
        return (
            bool(head)
            and all(r.get("type") in _EVENT_TYPES for r in head)
            and any(r.get("type") in ("tool_use", "init") for r in head)
        )

    def load(self, doc: Document) -> list[RecordedSession]:
        parts: list[list[dict[str, Any]]] = [[]]
        for event in doc.records:
            if event.get("type") == "init" and any(e.get("type") == "init" for e in parts[-1]):
                parts.append([])
            parts[-1].append(event)
        return split_sessions(doc, self.name, [_build(events) for events in parts])


def _build(events: list[dict[str, Any]]) -> TranscriptBuilder:
    b = TranscriptBuilder()
    for e in events:
        kind = e.get("type")
        if kind == "message":
            text = text_of(e.get("content"))
            if e.get("role") == "user":
                b.user_text(text)
                continue
            last = b.messages[-1] if b.messages else None
            # Streamed chunks of one reply are one text block.
            if e.get("delta") and last and last["role"] == "assistant" and last["content"]:
                block = last["content"][-1]
                if block.get("type") == "text":
                    block["text"] += text
                    continue
            b.assistant_text(text)
        elif kind == "tool_use":
            b.tool_call(e.get("tool_name"), e.get("parameters"), e.get("tool_id"))
        elif kind == "tool_result":
            output = e.get("output")
            if output is None:
                error = e.get("error")
                output = error.get("message", "") if isinstance(error, dict) else str(error or "")
            b.tool_result(output, e.get("tool_id"), is_error=e.get("status") == "error")
    return b
