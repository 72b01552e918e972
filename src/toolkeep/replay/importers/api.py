"""Histories already in a provider format toolkeep reads (every format in ``toolkeep.formats``).

A file holds a JSON message list or a request object with a ``messages`` list (and maybe a
``system``). The format is detected by ``toolkeep.formats.detect_format`` at run time, so formats
registered later are replayed too.
"""

from __future__ import annotations

from typing import Any

from ...exceptions import FormatError
from ...formats import FORMATS, detect_format
from ._base import Document, Importer, RecordedSession, text_of

__all__ = ["APIImporter", "split_messages"]


def split_messages(data: Any) -> tuple[list[Any], str | None] | None:
    """The message list and system prompt of a document, or None if it holds neither shape."""
    if isinstance(data, list):
        return data, None
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        system = data.get("system")
        if system is None:
            return data["messages"], None
        return data["messages"], system if isinstance(system, str) else text_of(system)
    return None


class APIImporter(Importer):
    """A history in a provider format; ``format_name`` pins one, ``None`` detects it."""

    name = "api"
    description = "a provider-format history (JSON list of messages or {messages: [...]})"

    def __init__(self, format_name: str | None = None) -> None:
        self.format_name = format_name

    def detect(self, doc: Document) -> bool:
        found = None if doc.jsonl else split_messages(doc.data)
        if found is None or not found[0]:
            return False
        if self.format_name is not None:
            return True
        try:
            detect_format(found[0])
        except FormatError:
            return False
        return True

    def load(self, doc: Document) -> list[RecordedSession]:
        found = split_messages(doc.data)
        if found is None:
            raise FormatError(f"{doc.path}: expected a JSON list of messages or an object with 'messages'")
        messages, system = found
        name = self.format_name if self.format_name is not None else detect_format(messages).name
        if name not in FORMATS:
            raise FormatError(f"unknown format {name!r} (known: {', '.join(FORMATS)})")
        return [RecordedSession(str(doc.path), name, messages, api_format=name, system=system)]
