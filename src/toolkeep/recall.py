"""The way back, as tools the model can call: ``recall`` and ``read_result``.

``recall(key)`` returns the original behind a ``<<ccr:KEY>>`` marker; ``read_result(path)`` pages a
file persisted in the session workspace (the ``[full output saved to PATH]`` of a preview). Both
take ``start_line``/``end_line`` and answer in pages small enough that the answer itself is never
cut again by the pipeline (under ``recall_page_chars``, ``max_result_chars`` and the tool's cap);
a page that stops early ends with a note saying how to ask for the rest. An unknown or expired
key, a refused path or bad arguments get a plain answer for the model, never an exception.

Give the model the tools, and answer its calls::

    tools = toolkeep.recall.tool_definitions("anthropic")
    ...
    answer = toolkeep.recall.handle_tool_call(call.name, call.input, store=session.store,
                                              workspace=session.workspace, config=session.config)
    if answer is not None:   # it was one of ours
        results.append({"type": "tool_result", "tool_use_id": call.id, "content": answer})
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .config import Config
from .exceptions import ConfigError, ReaderError, StoreError
from .formats import FORMATS, ToolSpec
from .stores import ArchiveStore
from .workspace import Workspace, WorkspaceReader, split_lines

__all__ = [
    "MCP_PATH",
    "READ_TOOL",
    "RECALL_TOOL",
    "TOOL_FORMATS",
    "Page",
    "handle_tool_call",
    "langchain_tools",
    "page_limit",
    "page_text",
    "read_answer",
    "recall_answer",
    "recall_tool_name",
    "tool_definitions",
    "tool_specs",
]

log = logging.getLogger("toolkeep")

RECALL_TOOL = "recall"
READ_TOOL = "read_result"
MCP_PATH = "/toolkeep/mcp"
"""Where ``toolkeep proxy`` serves ``recall`` and ``read_result`` over MCP (streamable HTTP) on its
own archive and workspace, for an agent on any machine to register (:mod:`toolkeep.mcp_server`)."""
TOOL_FORMATS = tuple(FORMATS)
"""Formats :func:`tool_definitions` knows: every registered format."""

# room kept for the closing note of a page, so that note and text together stay under the limit
_NOTE_ROOM = 240
_MIN_PAGE = 64
_KEY_IN = re.compile(r"\s*(?:<<ccr:)?([0-9A-Fa-f]{16})(?:>>)?\s*")

_LINES = {
    "start_line": {
        "type": "integer",
        "minimum": 1,
        "description": "First line to return (1-based). Default: 1.",
    },
    "end_line": {
        "type": "integer",
        "minimum": 1,
        "description": "Last line to return (inclusive). Default: the last line.",
    },
    "start_char": {
        "type": "integer",
        "minimum": 1,
        "description": "Where to resume inside start_line (1-based char), for lines longer "
        "than one page. Only needed when a previous answer says so.",
    },
}

_SPECS: dict[str, tuple[str, dict[str, Any]]] = {
    RECALL_TOOL: (
        "Get back the full original of a tool result that was shortened. Shortened results carry "
        "a marker <<ccr:KEY>>; pass KEY (16 hex digits). Returns the original, or the requested "
        "lines of it; a large original comes in pages, each ending with a note on how to get the "
        "next one.",
        {
            "type": "object",
            "properties": {
                "key": {
                    "type": "string",
                    "description": "The 16 hex digits of the <<ccr:KEY>> marker.",
                },
                **_LINES,
            },
            "required": ["key"],
        },
    ),
    READ_TOOL: (
        "Read a tool output that was saved to a file: the path named in '[full output saved to "
        "PATH]'. Only files inside the session workspace can be read. Returns the requested "
        "lines; a large file comes in pages, each ending with a note on how to get the next one.",
        {
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "The saved file's path, as given in the shortened result.",
                },
                **_LINES,
            },
            "required": ["path"],
        },
    ),
}


def tool_specs(tools: tuple[str, ...] = (RECALL_TOOL, READ_TOOL)) -> list[ToolSpec]:
    """The neutral specs of toolkeep's tools (``recall``, ``read_result``), new ones each call;
    :class:`~toolkeep.exceptions.ConfigError` for a name that is none of them."""
    specs = []
    for name in tools:
        if name not in _SPECS:
            raise ConfigError(f"unknown toolkeep tool {name!r} (known: {', '.join(_SPECS)})")
        description, schema = _SPECS[name]
        specs.append(ToolSpec(name, description, json.loads(json.dumps(schema))))
    return specs


def tool_definitions(format: str, tools: tuple[str, ...] = (RECALL_TOOL, READ_TOOL)) -> list[Any]:
    """The tool definitions for a provider's request, as plain data (JSON-ready): the format's
    own :meth:`~toolkeep.formats.Format.tool_definitions` of :func:`tool_specs`.

    - ``anthropic``: entries for ``tools=[...]`` (``name``, ``description``, ``input_schema``)
    - ``openai-chat``: ``{"type": "function", "function": {...}}`` entries
    - ``openai-responses``: ``{"type": "function", "name": ..., "parameters": ...}`` entries
    - ``gemini``: one ``Tool`` with ``function_declarations``
    - ``bedrock``: ``toolSpec`` entries for ``toolConfig={"tools": [...]}``
    - ``langchain``: OpenAI-style dicts, as ``bind_tools`` takes them (see also
      :func:`langchain_tools` for runnable tools)

    >>> [d["name"] for d in tool_definitions("anthropic")]
    ['recall', 'read_result']
    """
    specs = tool_specs(tools)
    if format not in TOOL_FORMATS:
        raise ConfigError(f"no tool definitions for format {format!r} (known: {', '.join(TOOL_FORMATS)})")
    return FORMATS[format].tool_definitions(specs)


def recall_tool_name(tools: Sequence[ToolSpec]) -> str | None:
    """The name under which ``tools`` (a request's, as :meth:`~toolkeep.formats.Format.request_tools`
    reads them) hold toolkeep's ``recall`` tool, the first one if several do; ``None`` if none.

    An agent names an MCP server's tool its own way (Claude Code ``mcp__toolkeep__recall``, Gemini
    CLI ``mcp_toolkeep_recall``, Codex ``toolkeep__recall`` or ``mcp__toolkeep__recall``; a
    server may be registered under any name), so a tool is known by what it is, not by its name:
    its arguments' schema has a string ``key`` property, and its description speaks of the
    ``<<ccr:KEY>>`` markers it redeems (toolkeep's own description does, however an agent
    shortens or adds to it); a tool without any description, by a name whose last word is
    ``recall``. A tool of a remote MCP server the provider calls itself (:attr:`ToolSpec.server`)
    is toolkeep's ``recall`` when that server is toolkeep's (its URL ends in :data:`MCP_PATH`;
    a server named without a URL, by its label ``toolkeep``) and the request allows the tool
    (its name ``recall``, or any).

        >>> from toolkeep.formats import get_format
        >>> body = {"tools": [{"type": "function", "function": {"name": "mcp__toolkeep__recall",
        ...     "description": _SPECS[RECALL_TOOL][0], "parameters": _SPECS[RECALL_TOOL][1]}}]}
        >>> recall_tool_name(get_format("openai-chat").request_tools(body))
        'mcp__toolkeep__recall'
    """
    for spec in tools:
        if spec.server is not None:
            if spec.name in ("", RECALL_TOOL) and _toolkeep_server(spec.server):
                return RECALL_TOOL
            continue
        if not _key_property(spec.schema):
            continue
        if "<<ccr:" in spec.description:
            return spec.name
        if not spec.description.strip() and re.split(r"[^0-9A-Za-z]+", spec.name)[-1].lower() == RECALL_TOOL:
            return spec.name
    return None


def _toolkeep_server(server: str) -> bool:
    path = server.split("?", 1)[0].split("#", 1)[0].rstrip("/")
    return path.endswith(MCP_PATH) or server.strip().lower() == "toolkeep"


def _key_property(schema: Mapping[str, Any]) -> bool:
    """True when ``schema`` (JSON schema, or Gemini's with upper-case types) has a string ``key``."""
    properties = schema.get("properties")
    key = properties.get("key") if isinstance(properties, Mapping) else None
    if not isinstance(key, Mapping):
        return False
    kind = key.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    return any(isinstance(k, str) and k.lower() == "string" for k in kinds)


# ------------------------------------------------------------------------------------------ paging


@dataclass(frozen=True, slots=True)
class Page:
    """One answer's worth of a text.

    ``text`` is the slice itself (byte-exact); ``first_line``/``last_line`` the lines it touches;
    ``next_line``/``next_char`` where the next page starts (``None`` when the range is done).
    """

    text: str
    first_line: int
    last_line: int
    total_lines: int
    start_char: int = 1
    next_line: int | None = None
    next_char: int = 1
    whole: bool = False
    """True when ``text`` is the entire original (nothing asked for, and it fit)."""


def page_limit(config: Config, tool: str = RECALL_TOOL) -> int:
    """Most chars one answer of ``tool`` may hold so that no later step cuts it."""
    return max(1, min(config.recall_page_chars, config.max_result_chars, config.cap_for(tool)))


def page_text(
    text: str,
    *,
    start_line: int | None = None,
    end_line: int | None = None,
    start_char: int | None = None,
    limit: int,
) -> Page:
    """The page of ``text`` that starts at ``start_line``/``start_char`` and fits in ``limit``
    (less room for the closing note). Raises :class:`ValueError` on an impossible range.

        >>> page_text("a\\nb\\nc\\n", start_line=2, limit=1000).text
        'b\\nc\\n'
    """
    lines = split_lines(text)
    total = len(lines)
    if start_line is None and end_line is None and start_char is None and len(text) <= limit:
        return Page(text, 1 if total else 0, total, total, whole=True)
    first = 1 if start_line is None else start_line
    last = total if end_line is None else min(end_line, total)
    char = 1 if start_char is None else start_char
    if first < 1 or char < 1 or (end_line is not None and end_line < first):
        raise ValueError(f"invalid range: start_line={first}, end_line={end_line}, start_char={char}")
    if first > total:
        raise ValueError(f"start_line={first} is past the end: the text has {total} line(s)")
    if char > 1 and char > len(lines[first - 1]):
        raise ValueError(f"start_char={char} is past the end of line {first}")
    budget = max(_MIN_PAGE, limit - _NOTE_ROOM)
    out: list[str] = []
    used = 0
    n = first
    offset = char - 1
    while n <= last:
        piece = lines[n - 1][offset:]
        if used + len(piece) > budget:
            if not out:  # one line longer than a page: cut inside it, resume at the next char
                out.append(piece[:budget])
                return Page("".join(out), first, n, total, char, n, offset + budget + 1)
            return Page("".join(out), first, n - 1, total, char, n, 1)
        out.append(piece)
        used += len(piece)
        n += 1
        offset = 0
    return Page("".join(out), first, last, total, char)


def _render(page: Page, next_call: str) -> str:
    """The page's text and, unless it is the whole original, a closing note."""
    if page.whole:
        return page.text
    if page.first_line == page.last_line:
        where = f"line {page.first_line:,} of {page.total_lines:,}"
    else:
        where = f"lines {page.first_line:,}-{page.last_line:,} of {page.total_lines:,}"
    cut_inside = page.next_line == page.last_line and page.next_char > 1
    if cut_inside:
        where += f" (chars {page.start_char:,}-{page.next_char - 1:,} of line {page.last_line:,})"
    elif page.start_char > 1:
        where += f" (line {page.first_line:,} from char {page.start_char:,})"
    if page.next_line is None:
        note = f"[{where}; end of the requested range]"
    else:
        more = f"start_line={page.next_line}"
        if page.next_char > 1:
            more += f", start_char={page.next_char}"
        note = f"[{where}; more: call {next_call}, {more}]"
    # always exactly one blank line: the page's text is everything before the last "\n\n["
    return f"{page.text}\n\n{note}"


# ----------------------------------------------------------------------------------------- answers


def recall_answer(
    store: ArchiveStore | None,
    key: str,
    *,
    start_line: int | None = None,
    end_line: int | None = None,
    start_char: int | None = None,
    config: Config | None = None,
) -> str:
    """The ``recall`` tool's answer: the original under ``key`` (or a page of it), or a sentence
    saying why not. Never raises for a missing key, a bad argument or a store failure."""
    config = config if config is not None else Config()
    m = _KEY_IN.fullmatch(key) if isinstance(key, str) else None
    if m is None:
        return f"[recall: {_shown(key)} is not an archive key: pass the 16 hex digits of <<ccr:KEY>>]"
    key = m[1].lower()
    if store is None:
        return "[recall: this session has no archive, so nothing can be recalled]"
    try:
        original = store.get(key)
    except StoreError as exc:
        log.warning("toolkeep: recall %s failed: %s", key, type(exc).__name__)
        return f"[recall: the archive could not be read just now ({exc}); try again later]"
    if original is None:
        return (
            f"[recall: nothing is archived under {key} -- it expired, was evicted, or never existed. "
            "Work from the shortened result in the history, or run the tool again if you need "
            "its full output.]"
        )
    lines = (start_line, end_line, start_char)
    return _paged(original, RECALL_TOOL, lines, config, f"recall with key={key}")


def read_answer(
    reader: WorkspaceReader | Workspace | None,
    path: str,
    *,
    start_line: int | None = None,
    end_line: int | None = None,
    start_char: int | None = None,
    config: Config | None = None,
) -> str:
    """The ``read_result`` tool's answer: a page of a file inside the session workspace, or a
    sentence saying why not (refused path, no such file, bad range). Never raises for those."""
    config = config if config is not None else Config()
    if reader is None:
        return "[read_result: this session has no workspace, so there is nothing to read]"
    if isinstance(reader, Workspace):
        reader = reader.reader
    if not isinstance(path, str):
        return "[read_result: path must be a string]"
    try:
        text = reader.read_text(path)
    except ReaderError as exc:
        return f"[read_result: {exc}]"
    # the path is not echoed: it may be long, and the note must fit the room kept for it
    lines = (start_line, end_line, start_char)
    return _paged(text, READ_TOOL, lines, config, "read_result with the same path")


def _paged(
    text: str, tool: str, lines: tuple[int | None, int | None, int | None], config: Config, next_call: str
) -> str:
    """One page of ``text`` as ``tool``'s answer, or what is wrong with the range."""
    start_line, end_line, start_char = lines
    try:
        page = page_text(
            text,
            start_line=start_line,
            end_line=end_line,
            start_char=start_char,
            limit=page_limit(config, tool),
        )
    except ValueError as exc:
        return f"[{tool}: {exc}]"
    return _render(page, next_call)


def handle_tool_call(
    name: str,
    arguments: Mapping[str, Any] | str | None,
    *,
    store: ArchiveStore | None,
    workspace: Workspace | WorkspaceReader | None,
    config: Config | None = None,
) -> str | None:
    """Answer a call to ``recall`` or ``read_result``; ``None`` for any other tool.

    ``arguments`` is the call's input as a mapping, or a JSON string (OpenAI sends those). Whatever
    the model sends (any JSON, text that is not JSON, nesting too deep to parse, numbers too long
    to convert, lone surrogates), the answer is a sentence it can act on, never an exception.
    """
    if not isinstance(name, str) or name not in (RECALL_TOOL, READ_TOOL):
        return None
    args = _arguments(arguments)
    if isinstance(args, str):
        return f"[{name}: {args}]"
    lines: dict[str, int | None] = {}
    for field in ("start_line", "end_line", "start_char"):
        value = args.get(field)
        number = _integer(value)
        if number is _NOT_A_NUMBER:
            return f"[{name}: {field} must be a whole number up to {_MAX_NUMBER:,}, got {_shown(value)}]"
        lines[field] = number
    if name == RECALL_TOOL:
        return recall_answer(store, args.get("key", ""), config=config, **lines)
    return read_answer(workspace, args.get("path", ""), config=config, **lines)


_MAX_NUMBER = 10**15
"""Line and char numbers past this are refused as such (no text has that many lines); it keeps
every number an answer quotes short, and clear of Python's limit on int-to-text conversion."""
_NOT_A_NUMBER: Any = object()
_WHOLE = re.compile(r"\s*[+-]?\d{1,16}\s*")  # \d: the decimal digits int() reads, in any script


def _arguments(arguments: object) -> Mapping[str, Any] | str:
    """The call's arguments as a mapping, or a sentence saying what is wrong with them."""
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            return f"arguments are not valid JSON ({exc.msg} at char {exc.pos:,})"
        except RecursionError:
            return "arguments are nested too deeply to read; send a flat JSON object"
        except ValueError:  # an integer literal past the int-to-text digit limit
            return "arguments hold a number too long to read; send a flat JSON object"
    if not isinstance(arguments, Mapping):
        return f"arguments must be an object, got {_shown(arguments)}"
    return arguments


def _integer(value: object) -> Any:
    """``value`` as an int (models send ``3``, ``3.0`` or ``"3"``); ``None`` if absent;
    ``_NOT_A_NUMBER`` if it is not a whole number of at most :data:`_MAX_NUMBER`."""
    if value is None:
        return None
    number: int
    if isinstance(value, bool):
        return _NOT_A_NUMBER
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and _WHOLE.fullmatch(value):
        try:
            number = int(value)
        except ValueError:  # a space or digit the pattern and int() see differently
            return _NOT_A_NUMBER
    else:
        return _NOT_A_NUMBER
    return number if -_MAX_NUMBER <= number <= _MAX_NUMBER else _NOT_A_NUMBER


def _shown(value: object) -> str:
    """A model-supplied value, quoted short enough for an answer and safe to print: no huge
    number converted to text, no deep structure walked, lone surrogates escaped."""
    if isinstance(value, str):
        return repr(value) if len(value) <= 60 else f"{value[:48]!r}... ({len(value):,} chars)"
    if isinstance(value, bool) or value is None:
        return "null" if value is None else str(value).lower()
    if isinstance(value, int):
        if value.bit_length() <= 64:
            return str(value)
        return f"a number of about {int(value.bit_length() * 0.30103):,} digits"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Mapping):
        return "a JSON object"
    if isinstance(value, (list, tuple)):
        return "a JSON array"
    return f"a {type(value).__name__}"


def langchain_tools(
    *,
    store: ArchiveStore | None,
    workspace: Workspace | WorkspaceReader | None,
    config: Config | None = None,
) -> list[Any]:
    """``recall`` and ``read_result`` as LangChain ``StructuredTool`` objects, bound to a store
    and a workspace (needs ``pip install 'toolkeep[langchain]'``)."""
    try:
        from langchain_core.tools import StructuredTool
    except ImportError as exc:
        raise ConfigError("LangChain tools need langchain-core: pip install 'toolkeep[langchain]'") from exc

    def bind(name: str) -> Any:
        def run(**arguments: Any) -> str:
            return handle_tool_call(name, arguments, store=store, workspace=workspace, config=config) or ""

        return run

    out = []
    for name in (RECALL_TOOL, READ_TOOL):
        description, schema = _SPECS[name]
        out.append(
            StructuredTool.from_function(
                func=bind(name),
                name=name,
                description=description,
                args_schema=json.loads(json.dumps(schema)),
            )
        )
    return out
