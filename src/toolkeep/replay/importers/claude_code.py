"""Claude Code sessions: the project JSONL Claude Code writes, and Engram's export of it.

Claude Code (``~/.claude/projects/<project>/<session>.jsonl``) writes one entry per line:
``{"type": "user"|"assistant", "uuid", "parentUuid", "isSidechain", "message": {...}}`` plus
bookkeeping entries (``summary``, ``queue-operation``, ``file-history-snapshot``, ``system``).
``message`` is an Anthropic Messages message; one API response is split over several lines that
share ``message.id``, one content block each, with tool results logged between them.
Sub-agent (sidechain) entries belong to another context and are skipped; thinking blocks are not
resent in later requests and are skipped too. A ``compact_boundary`` system entry starts a new
context (the compaction summary, then what follows): each context is a session, ``FILE#1``,
``FILE#2`` ... Branches left by a rewind are replayed in file order (parallel tool results are
sibling branches too, so the parent links cannot tell a rewind apart cheaply).

Engram exports the same sessions as ``{"timestamp", "role", "content": {"type": ...}}`` lines,
one block per line (``tool_use`` with ``tool_name``/``tool_id``, ``tool_result`` with
``output``).
"""

from __future__ import annotations

from typing import Any

from ._base import Document, Importer, RecordedSession, TranscriptBuilder, split_sessions

__all__ = ["ClaudeCodeImporter", "EngramImporter"]

_SKIPPED_BLOCKS = {"thinking", "redacted_thinking"}


class ClaudeCodeImporter(Importer):
    """Claude Code's own project JSONL."""

    name = "claude-code"
    pricing = "anthropic-5m"
    description = "Claude Code project JSONL (~/.claude/projects/*/*.jsonl)"

    def detect(self, doc: Document) -> bool:
        return any(
            r.get("type") in ("user", "assistant")
            and isinstance(r.get("message"), dict)
            and ("uuid" in r or "sessionId" in r)
            for r in doc.records[:50]
        )

    def load(self, doc: Document) -> list[RecordedSession]:
        builders = [TranscriptBuilder()]
        for entry in doc.records:
            kind = entry.get("type")
            if kind == "system" and entry.get("subtype") == "compact_boundary":
                # After /compact (or auto-compact) the agent starts over from a summary: a new context.
                builders.append(TranscriptBuilder())
                continue
            message = entry.get("message")
            if kind not in ("user", "assistant") or entry.get("isSidechain") or not isinstance(message, dict):
                continue
            content = message.get("content")
            if kind == "assistant":
                _assistant_blocks(builders[-1], content, message.get("id"))
            else:
                _user_blocks(builders[-1], content)
        return split_sessions(doc, self.name, builders)


def _assistant_blocks(b: TranscriptBuilder, content: Any, turn: Any) -> None:
    if isinstance(content, str):
        b.assistant_text(content, turn)
        return
    for block in content or []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            b.assistant_text(block.get("text", ""), turn)
        elif kind == "tool_use":
            b.tool_call(block.get("name"), block.get("input"), block.get("id"), turn)


def _user_blocks(b: TranscriptBuilder, content: Any) -> None:
    if isinstance(content, str):
        b.user_text(content)
        return
    for block in content or []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "tool_result":
            b.tool_result(
                block.get("content", ""), block.get("tool_use_id"), is_error=bool(block.get("is_error"))
            )
        elif kind == "text":
            b.user_text(block.get("text", ""))
        elif kind not in _SKIPPED_BLOCKS:
            b.user_block(block)


class EngramImporter(Importer):
    """Claude Code sessions as exported by Engram (one content block per line)."""

    name = "engram"
    pricing = "anthropic-5m"
    description = "Claude Code sessions exported by Engram (JSONL of {role, content: {type}})"

    def detect(self, doc: Document) -> bool:
        head = doc.records[:50]
        return bool(head) and any(
            "role" in r and isinstance(r.get("content"), dict) and "type" in r["content"] for r in head
        )

    def load(self, doc: Document) -> list[RecordedSession]:
        b = TranscriptBuilder()
        for entry in doc.records:
            role, block = entry.get("role"), entry.get("content")
            if not isinstance(block, dict):
                if role == "user" and isinstance(block, str):
                    b.user_text(block)
                continue
            kind = block.get("type")
            if kind == "text" and role == "assistant":
                b.assistant_text(block.get("text", ""))
            elif kind == "text":
                b.user_text(block.get("text", ""))
            elif kind == "tool_use":
                b.tool_call(block.get("tool_name"), block.get("input"), block.get("tool_id"))
            elif kind == "tool_result":
                output = block.get("output")
                b.tool_result(
                    "" if output is None else output,
                    block.get("tool_id"),
                    is_error=bool(block.get("is_error")),
                )
        return [RecordedSession(str(doc.path), self.name, b.finish(), notes=b.notes())]
