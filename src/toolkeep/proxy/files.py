"""A way back the agent has: every shortened result names one, and keeps its marker.

Every shortened text carries ``<<ccr:KEY>>``, the key of its original in the proxy's store, and
names a way back the agent behind the proxy really has, chosen when the text is first sent:

- a recall tool the request declares, under the name the agent gives it (toolkeep's MCP server,
  ``/toolkeep/mcp`` on the proxy, as ``mcp__toolkeep__recall``, ``mcp_toolkeep_recall``, ...;
  see :func:`toolkeep.recall.recall_tool_name`):
  ``[full output: call mcp__toolkeep__recall with key KEY] <<ccr:KEY>>``;
- else a file the agent opens with its own read tool: :class:`PersistOnEntry` saves every result
  long enough to be shortened into the workspace's ``tool-results/`` when it enters the history
  (the file's name depends only on the call id and the text, as the budget's does) and records
  the path on the part without changing its text, so every later form (cap, preview, trimmed,
  summary) carries ``[full output saved to PATH] <<ccr:KEY>>``;
- a proxy whose agents cannot read its files (``toolkeep proxy --remote-agents``) names no path:
  without the tool, the text says where to get it,
  ``[full output: connect the MCP server URL/toolkeep/mcp, then call its recall tool with key
  KEY] <<ccr:KEY>>``.

The forms are written with the saved path; :func:`name_ways_back` puts the way back chosen in
its place in what the proxy sends (and before a marker that names none, as the request budget's
``[result cleared] <<ccr:KEY>>``). The choice is made once per conversation and result
(:class:`WaysBack`, kept in the store the replicas share), when the result is first sent
shortened: the same text goes out in every later request, whatever the later requests declare,
so the prompt cache keeps hitting.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..exceptions import StoreError
from ..formats import FORMATS, Format, ToolSpec, validate
from ..messages import History, Message, Part
from ..recall import MCP_PATH, recall_tool_name
from ..shorten import archive_key
from ..steps import Pipeline, Reuse, StepContext
from ..stores import ArchiveStore

__all__ = [
    "PATH",
    "PersistOnEntry",
    "WaysBack",
    "keep_last_turn",
    "last_turn_start",
    "name_ways_back",
    "note",
    "previous_end",
    "request_way",
    "with_files",
]

PATH = "path"
"""The way back of a result whose text names the file it was saved to."""
_TOOL = "tool:"
_MCP = "mcp:"

_WAY_BACK = re.compile(
    r"(full output saved to [^\]\n]+\]|\])( <<ccr:([0-9a-f]{16})>>(?: <<ccr:[0-9a-f]{16}>>)*)"
)
"""A saved file's reference, or any other note's closing bracket, and the markers toolkeep's forms
put right after it; group 3 is the first marker's key (the result's own: the others are markers
its original carried)."""


def request_way(tools: Sequence[ToolSpec], remote_agents: bool, mcp_url: str | None = None) -> str:
    """The way back for a result first sent shortened in a request that declares ``tools``: the
    recall tool by its declared name, else (agents that cannot read the proxy's files) the MCP
    server at ``mcp_url``, else the saved file (:data:`PATH`)."""
    name = recall_tool_name(tools)
    if name is not None:
        return _TOOL + name
    if remote_agents:
        return _MCP + (mcp_url or MCP_PATH)
    return PATH


def note(way: str, key: str) -> str | None:
    """The words of way back ``way`` for the original under ``key``, up to their closing bracket
    (``None`` for :data:`PATH`: the saved file's reference stays)."""
    if way.startswith(_TOOL):
        return f"full output: call {way[len(_TOOL) :]} with key {key}]"
    if way.startswith(_MCP):
        return f"full output: connect the MCP server {way[len(_MCP) :]}, then call its recall tool with key {key}]"
    return None


def name_ways_back(prepared: Sequence[Any], original: Sequence[Any], way: Callable[[str], str]) -> list[Any]:
    """``prepared`` with the way back ``way(KEY)`` says in the place of each saved file's reference
    that a marker follows, and before each marker that follows another note, in the messages
    toolkeep changed (those that are not the input's own objects); every marker stays, and the
    text the client sent stays as it came. Pure for a given ``way``: the same input gives the
    same output, so the prompt cache keeps hitting."""
    kept = {id(m) for m in original}
    return [m if id(m) in kept else _named(m, way) for m in prepared]


def _named(value: Any, way: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        if "<<ccr:" not in value:
            return value
        return _WAY_BACK.sub(lambda match: _way_text(match, way), value)
    if isinstance(value, Mapping):
        return {k: _named(v, way) for k, v in value.items()}
    if isinstance(value, list):
        return [_named(v, way) for v in value]
    return value


def _way_text(match: re.Match[str], way: Callable[[str], str]) -> str:
    before, markers, key = match.group(1), match.group(2), match.group(3)
    words = note(way(key), key)
    if words is None:
        return match.group(0)
    return f"] [{words}{markers}" if before == "]" else words + markers


class WaysBack:
    """The way back of each result of one conversation, chosen the first time it is asked for and
    then kept: in memory, and in ``store`` (one small record per result, written once), where
    every replica of the proxy, and this one after the conversation left its table, finds it."""

    def __init__(self, store: ArchiveStore, conversation: str) -> None:
        self.store = store
        self.conversation = conversation
        self.chosen: dict[str, str] = {}

    def chooser(self, current: str) -> Callable[[str], str]:
        """The way of each key: the one chosen before, else ``current`` (the request's), kept."""

        def way(key: str) -> str:
            found = self.chosen.get(key)
            if found is None:
                found = self._read(key)
                if found is None:
                    found = current
                    self._write(key, found)
                self.chosen[key] = found
            return found

        return way

    def _record(self, key: str) -> str:
        return archive_key(f"toolkeep-proxy-way-back\0{self.conversation}\0{key}")

    def _read(self, key: str) -> str | None:
        try:
            text = self.store.get(self._record(key))
            value = json.loads(text) if text is not None else None
        except (StoreError, ValueError):
            return None
        found = value.get("way") if isinstance(value, dict) else None
        return (
            found if isinstance(found, str) and (found == PATH or found.startswith((_TOOL, _MCP))) else None
        )

    def _write(self, key: str, way: str) -> None:
        with contextlib.suppress(StoreError):  # (then this process keeps it in memory alone)
            self.store.put(self._record(key), json.dumps({"way": way}, separators=(",", ":")))


class PersistOnEntry:
    """Save each result over ``min_chars`` to the workspace and set its ``saved_path``.

    The message is not marked dirty: its text is what it was, so it goes out as it came."""

    reuse = Reuse(block_local=True)

    def __init__(self, min_chars: int) -> None:
        self.min_chars = min_chars

    def __call__(self, history: History, ctx: StepContext) -> History:
        out: History | None = None
        for i, m in enumerate(history):
            if m.role == "assistant":
                continue
            parts: list[Part] | None = None
            for j, p in enumerate(m.parts):
                if p.kind != "tool_result" or p.saved_path or len(p.full_text) <= self.min_chars:
                    continue
                path, _ = ctx.persist(p.call_id, p.full_text)
                if path is None:
                    continue  # the save error is in the report; the forms say so
                if parts is None:
                    parts = list(m.parts)
                parts[j] = replace(p, saved_path=path)
            if parts is not None:
                if out is None:
                    out = list(history)
                out[i] = Message(m.role, tuple(parts), m.raw, m.dirty, m.meta)
        return history if out is None else out


def with_files(pipeline: Pipeline, min_chars: int) -> Pipeline:
    """``pipeline`` with :class:`PersistOnEntry` first in its ``enter`` slot (where results
    enter the history, before the caps)."""
    return pipeline.with_slot("enter", PersistOnEntry(min_chars), *pipeline.enter)


_SHAPES = [f.request for f in FORMATS.values() if f.request is not None]
_CLIENT_ROLES = frozenset().union(*(shape.client_roles for shape in _SHAPES))
"""The roles of the items a client writes, in any format's history (:attr:`RequestShape.client_roles`)."""
_CLIENT_ITEMS = tuple(dict.fromkeys(s.client_item_suffix for s in _SHAPES if s.client_item_suffix))
"""How the types of the role-less items a client writes end (Responses' ``*_output``)."""


def _from_client(item: Any) -> bool:
    """True for a history item the client wrote (a user, system or tool message, a Responses
    ``*_output`` item), False for one the model wrote (an assistant message, a call, reasoning),
    as the formats' request shapes say."""
    if not isinstance(item, Mapping):
        return True
    role = item.get("role")
    if role is not None:
        return role in _CLIENT_ROLES
    kind = item.get("type")
    return isinstance(kind, str) and kind.endswith(_CLIENT_ITEMS)


def last_turn_start(history: Sequence[Any]) -> int:
    """Where the last turn of ``history`` (what the client sent after the model's last output)
    begins: ``len(history)`` when it ends in the model's output."""
    start = len(history)
    while start > 0 and _from_client(history[start - 1]):
        start -= 1
    return start


def previous_end(history: Sequence[Any]) -> int:
    """How many items of ``history`` the request before it sent: all but the last turn and the
    model's output before it (``0``: the model has not answered yet)."""
    end = last_turn_start(history)
    while end > 0 and not _from_client(history[end - 1]):
        end -= 1
    return end


def keep_last_turn(prepared: list[Any], original: Sequence[Any], format: str | Format) -> list[Any]:
    """``prepared`` with the last turn (what the client sent after the model's last output) as the
    client sent it, unless that breaks a pairing rule of ``format`` that ``prepared`` keeps; the
    model reads the newest results whole once, later requests carry their shortened forms."""
    start, tail = last_turn_start(original), last_turn_start(prepared)
    if start == len(original) or len(prepared) - tail != len(original) - start:
        return prepared  # nothing sent after the model, or pairing changed the turn: keep the repair
    if all(a is b for a, b in zip(prepared[tail:], original[start:], strict=True)):
        return prepared
    candidate = [*prepared[:tail], *original[start:]]
    return candidate if len(validate(candidate, format)) <= len(validate(prepared, format)) else prepared
