"""Importers for recorded agent sessions, each detected automatically.

>>> [i.name for i in LOG_IMPORTERS]  # doctest: +NORMALIZE_WHITESPACE
['claude-code', 'engram', 'codex', 'gemini-cli', 'swe-agent', 'mini-swe-agent', 'openhands']

Detection tries the log formats in that order, then the provider formats of
``toolkeep.formats.FORMATS`` (a message list, or a request with ``messages``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from ...exceptions import DetectionError, FormatError
from ...formats import FORMATS
from ._base import Document, Importer, RecordedSession, TranscriptBuilder
from .api import APIImporter
from .claude_code import ClaudeCodeImporter, EngramImporter
from .codex import CodexImporter
from .gemini_cli import GeminiCLIImporter
from .mini_swe_agent import MiniSWEAgentImporter
from .openhands import OpenHandsImporter
from .swe_agent import SWEAgentImporter

__all__ = [
    "LOG_IMPORTERS",
    "LOG_SUFFIXES",
    "Document",
    "Importer",
    "RecordedSession",
    "TranscriptBuilder",
    "detect_importer",
    "format_names",
    "get_importer",
    "iter_log_files",
    "load_sessions",
    "read_document",
]

LOG_IMPORTERS: tuple[Importer, ...] = (
    ClaudeCodeImporter(),
    EngramImporter(),
    CodexImporter(),
    GeminiCLIImporter(),
    SWEAgentImporter(),
    MiniSWEAgentImporter(),
    OpenHandsImporter(),
)
"""The agent-log importers, in detection order (most specific first)."""

LOG_SUFFIXES = (".json", ".jsonl", ".traj")
"""File endings looked at when a directory is given (``.traj.json`` ends in ``.json``)."""


def format_names() -> list[str]:
    """Every name ``--format`` accepts: the log formats, then the provider formats registered now."""
    return [i.name for i in LOG_IMPORTERS] + list(FORMATS)


def get_importer(name: str) -> Importer:
    """The importer for a log format or provider format name."""
    for importer in LOG_IMPORTERS:
        if importer.name == name:
            return importer
    if name in FORMATS:
        return APIImporter(name)
    raise FormatError(f"unknown format {name!r} (known: {', '.join(format_names())}, or auto)")


def read_document(path: Path) -> Document:
    """Parse a JSON or JSON Lines file; raises :class:`FormatError` when it is neither."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise FormatError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise FormatError(f"{path}: not valid UTF-8 (byte {exc.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        pass
    else:
        if path.suffix == ".jsonl" and isinstance(data, dict):  # a one-line JSONL file
            return Document(path, [data], jsonl=True)
        return Document(path, data, jsonl=False)
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise FormatError(f"{path}: neither JSON nor JSON Lines (line {number}: {exc.msg})") from None
    return Document(path, records, jsonl=True)


def detect_importer(doc: Document) -> Importer:
    """The importer whose format ``doc`` is in; raises :class:`DetectionError` if none is."""
    for importer in (*LOG_IMPORTERS, APIImporter()):
        if importer.detect(doc):
            return importer
    raise DetectionError(
        f"{doc.path}: not a session log toolkeep knows ({', '.join(format_names())}); name one with --format"
    )


def load_sessions(path: str | Path, format: str = "auto") -> list[RecordedSession]:
    """The recorded sessions in one file, its format detected or named."""
    doc = read_document(Path(path))
    importer = detect_importer(doc) if format == "auto" else get_importer(format)
    if format != "auto" and not importer.detect(doc):
        raise FormatError(f"{path}: does not look like {format}")
    sessions = importer.load(doc)
    if importer.pricing is None:
        return sessions
    return [s if s.pricing else dataclasses.replace(s, pricing=importer.pricing) for s in sessions]


def iter_log_files(paths: Iterable[str | Path]) -> Iterator[tuple[Path, bool]]:
    """Each file to replay, and whether it was named (True) or found in a directory (False).

    Directories are walked recursively in sorted order, taking files with :data:`LOG_SUFFIXES`.
    """
    for p in paths:
        path = Path(p)
        if path.is_dir():
            for found in sorted(path.rglob("*")):
                if found.is_file() and found.name.endswith(LOG_SUFFIXES):
                    yield found, False
        else:
            yield path, True
