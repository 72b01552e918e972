"""What every format adapter provides, and the pieces they share."""

from __future__ import annotations

import functools
import hashlib
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeAlias

from ..exceptions import FormatError
from ..messages import History, Message, Part, TextPart, ToolCallPart, ToolResultPart

__all__ = [
    "CONTINUE_TEXT",
    "MESSAGE_CHARS_SLACK",
    "Answer",
    "CallIdRule",
    "Format",
    "FormatRules",
    "ProviderAPI",
    "RequestShape",
    "ToolCall",
    "ToolMessageRules",
    "ToolSpec",
    "Violation",
    "blank_text",
    "blocks_chars",
    "check_tool_messages",
    "declared_tool",
    "exact_path",
    "expect_mapping",
    "field_of",
    "input_chars",
    "items_of",
    "list_chars",
    "list_in",
    "mappings_in",
    "object_chars",
    "parse_arguments",
    "text_chars",
]

CONTINUE_TEXT = "(continue)"
"""Text of the user message that stands where a provider needs one and the history has none: a
format whose provider wants roles to alternate puts it between two model turns that pairing
repair left side by side (their separator held only orphan results; Bedrock), and pairing puts it
in a user message that held only text the provider refuses (Anthropic, Bedrock). A provider with
no such rule never gets it: where two turns side by side read as one, pairing joins them
(:attr:`FormatRules.adjacent_turns_join`)."""


@dataclass(frozen=True, slots=True)
class Violation:
    """One breach of a provider's pairing rules, worded like the provider's own 400 error."""

    index: int
    """Index of the offending message in the history."""
    id: str | None
    """The call id concerned, if any."""
    rule: str
    """Short rule name, e.g. ``missing_result``, ``orphan_result``, ``duplicate_id``."""
    message: str

    def __str__(self) -> str:
        return f"messages[{self.index}] {self.rule}: {self.message}"


def blank_text(p: Part) -> bool:
    """True for a text block that is empty or only whitespace (Anthropic and Bedrock refuse it)."""
    return isinstance(p, TextPart) and (not p.text or p.text.isspace())


def changed_arguments(call: ToolCallPart, held: Any) -> bool:
    """True when a dump must write ``call.arguments`` over ``held``, what the call's ``raw`` holds
    in the provider's place: the call is ``modified``, or its arguments are another object than
    ``held`` (a step that replaced them with ``dataclasses.replace`` alone)."""
    return call.modified or call.arguments is not held


def arguments_json(arguments: Any) -> str:
    """Call arguments as a JSON string, the way OpenAI holds them: a string as it is (a step that
    changes a JSON-string argument gives back a string), ``"{}"`` for none, else the value."""
    if isinstance(arguments, str):
        return arguments
    return "{}" if arguments is None else json.dumps(arguments, ensure_ascii=False)


@dataclass(frozen=True)
class CallIdRule:
    """The call ids a provider accepts: made of the characters of ``chars`` (a regex character
    class body, e.g. ``a-zA-Z0-9_-``) and at most ``max_length`` long. ``refusal(message index,
    call position, id)`` words a breach as the provider's 400 error does.

    Ids another provider or framework made break such rules (Kimi's ``functions.get:0`` for
    Anthropic, a 53-char Responses ``fc_...`` id for OpenAI Chat); pairing repair renames them
    with :meth:`conforming`."""

    refusal: Callable[[int, int, str], str]
    chars: str | None = None
    max_length: int | None = None
    _whole: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _other: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        whole = re.compile(f"[{self.chars}]+") if self.chars else None
        other = re.compile(f"[^{self.chars}]") if self.chars else None
        object.__setattr__(self, "_whole", whole)
        object.__setattr__(self, "_other", other)

    def accepts(self, call_id: str) -> bool:
        if self.max_length is not None and len(call_id) > self.max_length:
            return False
        return self._whole is None or self._whole.fullmatch(call_id) is not None

    def conforming(self, call_id: str) -> str:
        """An id this rule accepts standing for ``call_id``: every character the rule refuses
        made ``_``, cut to fit, then ``_`` and 8 hex digits of the id's hash, so that two ids
        made alike stay apart. A function of ``call_id`` alone: a result still finds its call,
        and a block renames the same way whatever came before it."""
        base = self._other.sub("_", call_id) if self._other is not None else call_id
        if self.max_length is not None:
            base = base[: self.max_length - 9]
        return f"{base}_{hashlib.sha256(call_id.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"

    def accepted(self, call_id: str) -> str:
        """``call_id`` when the rule accepts it, else :meth:`conforming`."""
        return call_id if self.accepts(call_id) else self.conforming(call_id)


@dataclass(frozen=True)
class FormatRules:
    """A provider's rules for a history, and what its adapter can do with one: one object per
    format, read by every step (the SDK-object wrapper of a format carries the same object)."""

    unique_call_ids: bool = False
    """The provider rejects a call id used twice anywhere in one request."""
    grouped_results: bool = False
    """All results of one block must sit in the single message after the calls."""
    refuses_blank_text: bool = False
    """The provider refuses a text block that is empty or only whitespace (pairing drops such
    blocks, and a message left with nothing)."""
    call_id_rule: CallIdRule | None = None
    """The call ids the provider accepts, where it restricts them (pairing renames the rest)."""
    per_message: bool = False
    """:meth:`Format.load_message` and :meth:`Format.dump_message` work one message at a time,
    so a session can reuse the neutral form of every message it has seen before."""
    editable_arguments: bool = False
    """The adapter writes a changed call argument (:attr:`ToolCallPart.arguments` with
    ``modified``) back in the provider's own shape, so a step may shorten call inputs."""
    adjacent_turns_join: bool = False
    """Two model turns with nothing between them are one turn as the provider reads them: its
    history marks no boundary of its own between them (OpenAI Responses, where a turn is a run of
    model items). Where pairing repair leaves two assistant messages side by side (what stood
    between them was removed), it joins them into one, so that results are aged by the turns the
    next request reads (``prepare`` stays idempotent) and no :data:`CONTINUE_TEXT` message the
    user never sent goes between them. A rule for formats that load whole histories (not
    ``per_message``): only there does pairing see two blocks at once."""
    user_before_system: bool = False
    """A system message inside the history must follow a user message (Anthropic). Where pairing
    empties a user message of orphan results and a system message comes right after it, the
    message stays, saying :data:`CONTINUE_TEXT`, instead of going: gone, it would leave the
    system message after the assistant message, which the provider refuses."""
    pricing: str | None = None
    """The prompt-cache price list (a preset of :data:`toolkeep.pricing.PRESETS`) that fits the
    provider, used when the config names none; ``None``: the default, ``anthropic-5m``."""


@dataclass(frozen=True)
class ProviderAPI:
    """A provider's HTTP API as a proxy tells its requests apart: one object per provider,
    shared by the formats it serves (OpenAI's Chat Completions and Responses)."""

    name: str
    """The provider's name (``anthropic``, ``gemini``, ``openai``): its upstream's setting."""
    upstream: str
    """The base URL its requests go to unless told another."""
    paths: re.Pattern[str] | None
    """Matches the paths that are its own (a match from the start); ``None``: the default
    provider, which claims no path of its own (the widest range of paths, and the compatible
    servers)."""
    headers: tuple[str, ...] = ()
    """Request headers (lower case) only its clients send."""


@dataclass(frozen=True)
class RequestShape:
    """Where a provider's request body keeps what toolkeep reads: one object per format that is
    a provider's request (a format of a framework's message objects has none)."""

    history_key: str
    """The key holding the history (``messages``, ``input``, ``contents``); a key only one format
    uses names that format, a key several share leaves it to detection."""
    text_history: bool = False
    """The history may be a plain string, which the API takes as one user turn."""
    system_keys: tuple[str, ...] = ()
    """Keys of the request's system prompt, beside the history."""
    tools_keys: tuple[str, ...] = ()
    """Keys of the request's tool definitions."""
    config_key: str | None = None
    """The key of an SDK call's configuration object (google-genai's ``config``), if any."""
    config_keys: tuple[str, ...] = ()
    """The system prompt's and tools' keys (or attributes) inside :attr:`config_key`."""
    continuation_keys: tuple[str, ...] = ()
    """Keys that, when set, make the request continue state kept on the server: its history
    holds only what is new since then (read with :meth:`Format.continuing`)."""
    client_roles: frozenset[str] = frozenset()
    """Roles of the history items the client writes (the rest are the model's)."""
    client_item_suffix: str | None = None
    """How the type of a role-less item the client writes ends (Responses' ``*_output``)."""
    api: ProviderAPI | None = None
    """The provider's API the request is sent to."""
    route: re.Pattern[str] | None = None
    """The path (a whole match) of the ``POST`` request whose body holds such a history."""


def exact_path(path: str) -> re.Pattern[str]:
    """A pattern matching ``path`` and nothing else."""
    return re.compile(re.escape(path))


@dataclass(frozen=True)
class ToolSpec:
    """A tool as every provider describes it, before it is put in one provider's schema."""

    name: str
    description: str
    schema: Mapping[str, Any]
    """The JSON schema of the tool's arguments (an ``object`` schema)."""
    server: str | None = None
    """For a tool a request names on a remote MCP server the provider calls itself (an OpenAI
    Responses ``mcp`` tool), that server's URL, else its label; ``None`` for a tool the request
    defines (the client runs it)."""

    def fresh_schema(self) -> dict[str, Any]:
        """A deep copy of :attr:`schema`: each definition made gets its own, free to change."""
        copy: dict[str, Any] = json.loads(json.dumps(self.schema))
        return copy


class ToolCall:
    """One call the model made: ``id``, tool ``name`` and ``arguments`` (a mapping, or the raw
    JSON string when it does not parse)."""

    __slots__ = ("arguments", "id", "name")

    def __init__(self, id: str, name: str, arguments: Mapping[str, Any] | str) -> None:
        self.id = id
        self.name = name
        self.arguments = arguments

    def __repr__(self) -> str:
        return f"ToolCall({self.id!r}, {self.name!r}, {self.arguments!r})"

    @classmethod
    def read(cls, id: Any, name: Any, arguments: Any) -> ToolCall:
        """The call a response's fields make, whatever they hold: an id or a name that is no
        string as ``""``, the arguments through :func:`parse_arguments`."""
        return cls(_string(id), _string(name), parse_arguments(arguments))


Answer: TypeAlias = tuple[ToolCall, str, bool]
"""A call with its result: ``(call, text, is_error)``."""

MESSAGE_CHARS_SLACK = 50
"""Chars by which :meth:`Format.message_chars` may miss a message as its format sends it (text
blocks merged into one, a key the dump adds or drops in a way the estimate does not follow)."""


class Format(ABC):
    """A provider's history format: load to the neutral model, dump back, validate.

    ``load`` is one-to-one: neutral message ``i`` is provider message ``i``, so indexes in errors
    and violations mean the same in both.
    """

    name: ClassVar[str]
    rules: ClassVar[FormatRules] = FormatRules()
    """What the provider accepts and what this adapter can do; every step reads it."""
    native_objects: ClassVar[bool] = False
    """True when ``load``/``dump`` read and give back SDK objects themselves (LangChain)."""
    request: ClassVar[RequestShape | None] = None
    """Where a provider's request body holds this format's history, system prompt and tools, and
    where the request goes; ``None`` for a format that is no provider's request (LangChain)."""
    moving_keys: ClassVar[frozenset[str]] = frozenset()
    """Keys a client moves from request to request (Anthropic's ``cache_control``, Bedrock's
    ``cachePoint`` blocks): dropped, at any depth, from a conversation's first message before its
    key is computed (:func:`toolkeep.conversation_key.conversation_key`), so that moving them
    starts no new conversation."""

    def continuing(self) -> Format:
        """The format to read the history of a request that continues state kept on the server
        (:attr:`RequestShape.continuation_keys` set) with; here, this one."""
        return self

    def load_message(self, index: int, raw: Any) -> Message:
        """The neutral form of one message (formats whose rules say ``per_message``)."""
        raise NotImplementedError(f"{self.name} loads whole histories only")

    def dump_message(self, message: Message) -> Any:
        """The provider form of one rebuilt message (formats whose rules say ``per_message``)."""
        raise NotImplementedError(f"{self.name} dumps whole histories only")

    @abstractmethod
    def detect(self, messages: Sequence[Any]) -> int:
        """0: cannot be this format; 1: compatible; 2: shows features only this format has."""

    def load(self, messages: Sequence[Any]) -> History:
        """The neutral form of a history; raises :class:`FormatError` on a malformed message.

        One :meth:`load_message` per message; formats that read a message in the light of the
        ones before it (Gemini, OpenAI Responses, SDK objects) override this."""
        return [self.load_message(i, m) for i, m in enumerate(messages)]

    @abstractmethod
    def dump(self, history: History) -> list[Any]:
        """The provider form of a neutral history; untouched messages come back as they were."""

    @abstractmethod
    def pack_results(self, results: list[ToolResultPart], rest: list[Message]) -> list[Message]:
        """Messages that carry ``results`` right after their calls, followed by ``rest``.

        ``rest`` holds the other messages of the block, in order, result parts already taken out.
        """

    def stands_alone(self, part: Part) -> bool:
        """True when ``part`` is sent with nothing else beside it in its message: what keeps an
        assistant message (a turn) from going when pairing prunes the rest. Here, every part."""
        return True

    @abstractmethod
    def validate(self, history: History) -> list[Violation]:
        """Every breach of the provider's pairing rules in a loaded history."""

    def tool_definitions(self, specs: Sequence[ToolSpec]) -> list[Any]:
        """``specs`` as the provider's request takes its tools, as plain data (JSON-ready), each
        definition with its own copy of the schema."""
        raise NotImplementedError(f"{self.name} has no tool definitions")

    def request_tools(self, request: Mapping[str, Any]) -> list[ToolSpec]:
        """The tools a request object of this format declares (its ``tools``, as
        :meth:`tool_definitions` writes them), in order, each read as far as it is written: a
        name, the description (``""`` when it has none) and the arguments' schema (``{}``).
        Entries of other kinds (a provider's own tools: web search, code execution, ...) and
        malformed ones are left out; never raises on what a client sends. Here: none."""
        return []

    def response_calls(self, response: Any) -> list[ToolCall]:
        """The tool calls in a model response: the SDK's response object, its ``model_dump()``,
        or the assistant message (or output items) itself, in order. Never raises on what a
        model sends: arguments that do not parse come as their text (:func:`parse_arguments`),
        a response of any other shape holds no calls."""
        raise NotImplementedError(f"{self.name} reads no tool calls from a model response")

    def result_messages(self, answered: Sequence[Answer]) -> list[Any]:
        """The messages answering ``answered`` calls of one response, to append to the history
        right after the model's message (``[]`` for no calls): together they pass
        :meth:`validate`."""
        raise NotImplementedError(f"{self.name} builds no result messages")

    def message_chars(self, message: Message) -> int:
        """Chars of ``message`` as this format sends it (compact JSON of the provider's shape),
        within :data:`MESSAGE_CHARS_SLACK`; texts are measured, not dumped.

        Here, for a format that does not say better: priced as an Anthropic message, from the
        neutral parts alone."""
        size = _MESSAGE_OVERHEAD
        for p in message.parts:
            if isinstance(p, ToolResultPart):
                size += _RESULT_OVERHEAD + len(p.call_id) + text_chars(p.text)
            elif isinstance(p, TextPart):
                size += _PART_OVERHEAD + text_chars(p.text)
            elif isinstance(p, ToolCallPart):
                size += _CALL_OVERHEAD + len(p.id) + len(p.name) + input_chars(p.arguments)
            else:
                size += input_chars(p.raw)
        return size


_MESSAGE_OVERHEAD = 30
"""Chars of a message besides its parts (``{"role":"user","content":[...]}``)."""
_PART_OVERHEAD = 26
"""Chars of a part besides its contents and ids (``{"type":"text","text":"..."}``)."""
_RESULT_OVERHEAD = 54
"""Chars of a tool result part besides its text and call id."""
_CALL_OVERHEAD = 46
"""Chars of a tool call part besides its id, name and input."""


@dataclass(frozen=True, slots=True)
class ToolMessageRules:
    """How a provider with one result message per call, right after the calls, words breaches."""

    empty_id: Callable[[int], str]
    duplicate_id: Callable[[int, str], str]
    missing: Callable[[int, str], str]
    orphan: Callable[[int, str], str]
    ids_unique_across: bool = False
    """True when an id may not repeat anywhere in the request (else only within one message)."""


def check_tool_messages(
    history: History, rules: ToolMessageRules, id_rule: CallIdRule | None = None
) -> list[Violation]:
    """Breaches of "each call answered by its own ``tool`` message, right after the calls" (and
    of ``id_rule``, where the provider restricts call ids)."""
    out: list[Violation] = []
    seen_anywhere: set[str] = set()
    i = 0
    while i < len(history):
        m = history[i]
        if m.role == "tool":
            call_id = m.results[0].call_id
            out.append(Violation(i, call_id, "orphan_result", rules.orphan(i, call_id)))
            i += 1
            continue
        if m.role != "assistant" or not m.calls:
            i += 1
            continue
        wanted: dict[str, bool] = {}
        for k, c in enumerate(m.calls):
            seen = seen_anywhere if rules.ids_unique_across else wanted
            if not c.id:
                out.append(Violation(i, c.id, "empty_id", rules.empty_id(i)))
            elif id_rule is not None and not id_rule.accepts(c.id):
                out.append(Violation(i, c.id, "invalid_id", id_rule.refusal(i, k, c.id)))
            elif c.id in seen:
                out.append(Violation(i, c.id, "duplicate_id", rules.duplicate_id(i, c.id)))
            seen_anywhere.add(c.id)
            wanted.setdefault(c.id, False)
        j = i + 1
        while j < len(history) and history[j].role == "tool":
            call_id = history[j].results[0].call_id
            if wanted.get(call_id) is False:
                wanted[call_id] = True
            else:
                out.append(Violation(j, call_id, "orphan_result", rules.orphan(j, call_id)))
            j += 1
        for call_id, answered in wanted.items():
            if not answered and call_id:
                out.append(Violation(i, call_id, "missing_result", rules.missing(i, call_id)))
        i = j
    return out


def expect_mapping(value: Any, index: int, what: str = "message") -> Mapping[str, Any]:
    if type(value) is dict or isinstance(value, Mapping):  # a plain dict without the ABC check
        return value
    raise FormatError(f"{what} must be an object, got {type(value).__name__}", index=index)


def results_in_next_user(results: list[ToolResultPart], rest: list[Message]) -> list[Message]:
    """``pack_results`` for formats that answer a block in one user message, first in it."""
    if rest and rest[0].role == "user":
        first = rest[0]
        return [first.with_parts([*results, *first.parts]), *rest[1:]]
    return [Message("user", tuple(results), dirty=True), *rest]


def results_as_tool_messages(results: list[ToolResultPart], rest: list[Message]) -> list[Message]:
    """``pack_results`` for formats with one ``tool`` message (or item) per result."""
    packed = [Message("tool", (r,), raw=r.raw, dirty=r.raw is None or r.modified) for r in results]
    return [*packed, *rest]


# ----------------------------------------------------------------------------- model responses


def field_of(obj: Any, name: str, default: Any = None) -> Any:
    """A field of an SDK object or of its dict form (``model_dump()``); ``default`` when absent."""
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def items_of(value: Any) -> list[Any]:
    """The items of a list field (an SDK's list or tuple); ``[]`` for anything else."""
    return list(value) if isinstance(value, (list, tuple)) else []


def list_in(value: Any, key: str) -> list[Any]:
    """The items ``value`` is, when it is a list (an assistant message's content, a response's
    output items, given as they are), else those of its field ``key``."""
    return items_of(value if isinstance(value, (list, tuple)) else field_of(value, key))


def declared_tool(name: Any, description: Any, schema: Any, server: str | None = None) -> ToolSpec | None:
    """The :class:`ToolSpec` a request's tool entry declares, read leniently: ``None`` without a
    name that is a non-empty string; a description or schema of another type reads as none."""
    if not isinstance(name, str) or not name:
        return None
    return ToolSpec(
        name,
        description if isinstance(description, str) else "",
        schema if isinstance(schema, Mapping) else {},
        server,
    )


def mappings_in(value: Any) -> list[Mapping[str, Any]]:
    """The mappings of ``value`` when it is a list (a request's ``tools``), else none: what a
    client sends is read, never trusted to have the right shape."""
    if not isinstance(value, (list, tuple)):
        return []
    return [v for v in value if isinstance(v, Mapping)]


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""


def parse_arguments(value: Any) -> Mapping[str, Any] | str:
    """A call's arguments as a mapping: as given, or parsed from the JSON text some providers
    send (OpenAI); ``{}`` for none.

    Never raises on what a model sends: text that is no JSON object (malformed or cut short, a
    list, a number too long for ``int()``, nesting too deep for the parser) comes back as the text
    itself, and a value of any other type as its JSON text."""
    if isinstance(value, Mapping):
        return value
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}
    if not isinstance(value, str):
        return _json_text(value)
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):  # ValueError: bad JSON, or an int past int()'s limit
        return value
    return parsed if isinstance(parsed, Mapping) else value


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):  # odd keys, a cycle, nested too deep
        return f"<{type(value).__name__}>"


# ------------------------------------------------------------------------------------ sizes


def text_chars(text: str) -> int:
    """Chars of ``text`` as a JSON string's contents (escapes counted, quotes not)."""
    return len(json.dumps(text, ensure_ascii=False)) - 2


def input_chars(value: Any) -> int:
    """Chars of a value (a tool call's input, a block sent as it came) as compact JSON; counted
    without recursion where the value is nested too deep for ``json.dumps`` (what a model may
    write into its arguments), and a value met twice (a cycle) counted once."""
    try:
        return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str))
    except (RecursionError, ValueError):
        return _walked_chars(value)


def _walked_chars(value: Any) -> int:
    size = 0
    seen: set[int] = set()
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, (Mapping, list, tuple)):
            if id(v) in seen:
                continue
            seen.add(id(v))
            items = list(v.items()) if isinstance(v, Mapping) else [(None, x) for x in v]
            size += 2 + max(len(items) - 1, 0)
            for k, x in items:
                if k is not None:
                    size += text_chars(str(k)) + 3  # quotes and the colon
                stack.append(x)
        elif isinstance(v, str):
            size += text_chars(v) + 2
        else:
            size += len(json.dumps(v, default=str))
    return size


def list_chars(sizes: Iterable[int]) -> int:
    """Chars of a compact JSON array whose items take ``sizes`` chars each."""
    total = count = 0
    for size in sizes:
        total += size
        count += 1
    return 2 + total + max(count - 1, 0)


def blocks_chars(content: Any, text: str, text_type: str, *, strings_are_text: bool = False) -> int:
    """Chars of a result's ``content`` once its text blocks (``type`` ``text_type``; and bare
    strings, with ``strings_are_text``) are replaced by one such block holding ``text``, put
    first: what the dumps send for a result that came as a list of blocks. Of ``text`` alone
    when ``content`` is no list."""
    if not isinstance(content, list):
        return input_chars(text)
    rest = [
        b
        for b in content
        if not (
            (strings_are_text and isinstance(b, str))
            or (isinstance(b, Mapping) and b.get("type") == text_type)
        )
    ]
    return list_chars(
        [object_chars({"type": text_type}, {"text": input_chars(text)}), *map(input_chars, rest)]
    )


def object_chars(base: Mapping[str, Any] | None, sized: Mapping[str, int | None]) -> int:
    """Chars of ``base`` as compact JSON once each key of ``sized`` holds a value of that many
    chars (set or added; ``None``: the key removed): what a dump that copies a block and sets
    some of its keys sends, without dumping the values it sets."""
    total = count = 0
    for key, value in base.items() if base is not None else ():
        if key not in sized:
            total += _key_chars(key) + input_chars(value)
            count += 1
    for key, size in sized.items():
        if size is not None:
            total += _key_chars(key) + size
            count += 1
    return 2 + total + max(count - 1, 0)


@functools.lru_cache(maxsize=1024)
def _key_chars(key: Any) -> int:
    """Chars of ``"key":`` in compact JSON (a message uses the same few keys over and over)."""
    return input_chars({key: 0}) - 3
