"""What each format knows about its provider beyond histories: tool definitions in its schema,
the tool calls in a model response, the messages that answer them, and a message's size as sent.

Parametrized over every registered format (``toolkeep.formats.FORMATS``) and, where it applies,
the SDK-object wrapper of each. Responses come as the SDKs' own types (anthropic ``Message``,
openai ``ChatCompletion`` and ``Response``, google-genai ``GenerateContentResponse``, botocore's
parsed Converse dict), as their dicts, and as the message or items an agent appends.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolkeep
from toolkeep import recall
from toolkeep.formats import FORMATS, MESSAGE_CHARS_SLACK, Format, ToolCall, ToolSpec, resolve_format
from toolkeep.formats._sdk import _dump_model, is_sdk_object, wrap
from toolkeep.integrations.raw import LOOP_FORMATS
from toolkeep.messages import History, Message, Part, ToolCallPart, ToolResultPart
from toolkeep.pipeline import build_steps
from toolkeep.steps import StepContext

from .strategies import (
    configs,
    every_format_histories,
    histories,
    json_values,
    property_settings,
    sdk_anthropic_histories,
    sdk_openai_chat_histories,
)
from .test_formats_golden import GOLDEN, expand

NAMES = list(FORMATS)
FIXTURES = Path(__file__).parent / "fixtures"


def variants(name: str) -> list[Format]:
    """The registered format, and its SDK-object wrapper where it has one."""
    fmt = FORMATS[name]
    wrapped = wrap(fmt)
    return [fmt] if wrapped is fmt else [fmt, wrapped]


def each_variant(names: list[str] | tuple[str, ...]) -> list[Any]:
    return [
        pytest.param(f, id=f"{name}-{'objects' if k else 'plain'}")
        for name in names
        for k, f in enumerate(variants(name))
    ]


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# ------------------------------------------------------------------------------ tool definitions

SCHEMA = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "description": "A regular expression."},
        "limit": {"type": "integer", "minimum": 1, "description": "Most matches."},
    },
    "required": ["pattern"],
}
SCHEMA_TEXT = json.dumps(SCHEMA)
SPEC = ToolSpec("grep", "Search the files.", SCHEMA)
# what each provider's documentation asks for, written out (key order included: the bytes count)
EXPECTED_DEFINITIONS: dict[str, list[Any]] = {
    "anthropic": [{"name": "grep", "description": "Search the files.", "input_schema": SCHEMA}],
    "openai-chat": [
        {
            "type": "function",
            "function": {"name": "grep", "description": "Search the files.", "parameters": SCHEMA},
        }
    ],
    "openai-responses": [
        {
            "type": "function",
            "name": "grep",
            "description": "Search the files.",
            "parameters": SCHEMA,
            "strict": False,
        }
    ],
    "gemini": [
        {
            "function_declarations": [
                {
                    "name": "grep",
                    "description": "Search the files.",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "pattern": {"type": "string", "description": "A regular expression."},
                            "limit": {"type": "integer", "description": "Most matches."},
                        },
                        "required": ["pattern"],
                    },
                }
            ]
        }
    ],
    "bedrock": [
        {"toolSpec": {"name": "grep", "description": "Search the files.", "inputSchema": {"json": SCHEMA}}}
    ],
    "langchain": [
        {
            "type": "function",
            "function": {"name": "grep", "description": "Search the files.", "parameters": SCHEMA},
        }
    ],
}


def containers(value: Any) -> list[Any]:
    """Every dict and list inside ``value`` (itself included)."""
    if isinstance(value, dict):
        return [value, *(c for v in value.values() for c in containers(v))]
    if isinstance(value, list):
        return [value, *(c for v in value for c in containers(v))]
    return []


class TestToolDefinitions:
    def test_every_format_is_covered(self) -> None:
        assert set(EXPECTED_DEFINITIONS) == set(FORMATS)

    @pytest.mark.parametrize("fmt", each_variant(NAMES))
    def test_in_the_providers_schema(self, fmt: Format) -> None:
        """The definition is byte-equal to the provider's documented shape, and owns its schema:
        emptying every dict and list of it leaves the spec, and the next definitions, whole."""
        expected = json.dumps(EXPECTED_DEFINITIONS[fmt.name])
        first = fmt.tool_definitions([SPEC])
        assert json.dumps(first) == expected
        for container in containers(first):
            container.clear()
        assert json.dumps(SPEC.schema) == SCHEMA_TEXT
        assert json.dumps(fmt.tool_definitions([SPEC])) == expected

    @pytest.mark.parametrize("name", NAMES)
    def test_recall_gives_todays_bytes(self, name: str) -> None:
        """``recall.tool_definitions`` delegates to the format and sends what it sent before (the
        pin was written by the code that kept its own per-format table)."""
        pinned = json.loads((FIXTURES / "tool_definitions.json").read_text(encoding="utf-8"))
        assert json.dumps(recall.tool_definitions(name)) == json.dumps(pinned[name])
        assert recall.tool_definitions(name) == FORMATS[name].tool_definitions(recall.tool_specs())
        assert recall.TOOL_FORMATS == (
            "anthropic", "openai-chat", "openai-responses", "gemini", "bedrock", "langchain",
        )  # fmt: skip

    def test_recall_refuses_as_before(self) -> None:
        with pytest.raises(toolkeep.ConfigError, match=r"no tool definitions for format 'cohere' \(known: "):
            recall.tool_definitions("cohere")
        with pytest.raises(
            toolkeep.ConfigError, match=r"unknown toolkeep tool 'rm' \(known: recall, read_result\)"
        ):
            recall.tool_definitions("cohere", tools=("rm",))  # the tool is checked first, as before

    def test_the_sdks_accept_them(self) -> None:
        """Each SDK's own type for a tool definition validates the format's output."""
        import anthropic
        from google.genai import types
        from openai.types.chat import ChatCompletionToolParam
        from openai.types.responses import FunctionToolParam
        from pydantic import TypeAdapter

        TypeAdapter(anthropic.types.ToolParam).validate_python(
            FORMATS["anthropic"].tool_definitions([SPEC])[0]
        )
        TypeAdapter(ChatCompletionToolParam).validate_python(
            FORMATS["openai-chat"].tool_definitions([SPEC])[0]
        )
        TypeAdapter(FunctionToolParam).validate_python(
            FORMATS["openai-responses"].tool_definitions([SPEC])[0]
        )
        (tool,) = FORMATS["gemini"].tool_definitions([SPEC])
        declared = types.Tool.model_validate(tool).function_declarations
        assert declared is not None and declared[0].parameters is not None
        assert declared[0].parameters.required == ["pattern"]


# ------------------------------------------------------------------------------- model responses

CALLS = [("call_1", "read", {"path": "a.py"}), ("call_2", "grep", {"pattern": "def ", "limit": 3})]


def anthropic_body(calls: list[tuple[str, str, Any]]) -> dict[str, Any]:
    content: list[Any] = [{"type": "text", "text": "Two things to look at."}]
    content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
    return {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "content": content,
        "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1},
    }  # fmt: skip


def chat_body(calls: list[tuple[str, str, Any]]) -> dict[str, Any]:
    tool_calls = [
        {
            "id": i,
            "type": "function",
            "function": {"name": n, "arguments": a if isinstance(a, str) else json.dumps(a)},
        }
        for i, n, a in calls
    ]
    message = {"role": "assistant", "content": None, "tool_calls": tool_calls}
    return {
        "id": "c1", "object": "chat.completion", "created": 0, "model": "gpt-x",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
    }  # fmt: skip


def responses_body(calls: list[tuple[str, str, Any]]) -> dict[str, Any]:
    output: list[Any] = [{"type": "reasoning", "id": "rs_1", "summary": []}]
    output += [
        {
            "type": "function_call",
            "id": f"fc_{k}",
            "call_id": i,
            "name": n,
            "arguments": a if isinstance(a, str) else json.dumps(a),
            "status": "completed",
        }
        for k, (i, n, a) in enumerate(calls)
    ]
    return {
        "id": "resp_1", "object": "response", "created_at": 0, "model": "gpt-x", "status": "completed",
        "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
    }  # fmt: skip


def gemini_body(calls: list[tuple[str | None, str, Any]]) -> dict[str, Any]:
    """A REST (camelCase) ``generateContent`` response; a call without an id has none."""
    parts: list[Any] = [{"text": "Two things to look at."}]
    for k, (i, n, a) in enumerate(calls):
        call: dict[str, Any] = {"name": n, "args": a}
        if i is not None:
            call["id"] = i
        part: dict[str, Any] = {"functionCall": call}
        if k == 0:
            part["thoughtSignature"] = "c2ln"
        parts.append(part)
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]}


def converse_body(calls: list[tuple[str, str, Any]]) -> dict[str, Any]:
    content: list[Any] = [{"text": "Two things to look at."}]
    content += [{"toolUse": {"toolUseId": i, "name": n, "input": a}} for i, n, a in calls]
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": "tool_use",
        "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        "metrics": {"latencyMs": 1},
    }


def converse_parsed(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as boto3 hands it back: a real ``converse`` call answered by ``body``."""
    from botocore.awsrequest import AWSResponse

    from .test_sdk_bedrock import _Raw, client

    def answer(request: Any, **_: Any) -> AWSResponse:
        return AWSResponse(request.url, 200, {}, _Raw(json.dumps(body).encode()))

    bedrock = client()
    bedrock.meta.events.register_first("before-send.bedrock-runtime.Converse", answer)
    try:
        parsed: dict[str, Any] = bedrock.converse(
            modelId="m", messages=[{"role": "user", "content": [{"text": "go"}]}]
        )
    finally:
        bedrock.meta.events.unregister("before-send.bedrock-runtime.Converse", answer)
    parsed.pop("ResponseMetadata", None)
    return parsed


def anthropic_forms(body: dict[str, Any]) -> dict[str, Any]:
    import anthropic

    message = anthropic.types.Message.model_validate(body)
    return {
        "dict": body, "sdk": message, "model_dump": message.model_dump(), "content": message.content,
        "assistant": {"role": "assistant", "content": message.content}, "content_dicts": body["content"],
    }  # fmt: skip


def chat_forms(body: dict[str, Any]) -> dict[str, Any]:
    from openai.types.chat import ChatCompletion

    completion = ChatCompletion.model_validate(body)
    message = completion.choices[0].message
    return {
        "dict": body, "sdk": completion, "model_dump": completion.model_dump(), "message": message,
        "message_dict": body["choices"][0]["message"],
    }  # fmt: skip


def responses_forms(body: dict[str, Any]) -> dict[str, Any]:
    from openai.types.responses import Response

    response = Response.model_validate(body)
    return {
        "dict": body, "sdk": response, "model_dump": response.model_dump(), "output": response.output,
        "output_dicts": body["output"],
    }  # fmt: skip


def gemini_forms(body: dict[str, Any]) -> dict[str, Any]:
    from google.genai import types

    response = types.GenerateContentResponse.model_validate(body)
    assert response.candidates is not None and response.candidates[0].content is not None
    content = response.candidates[0].content
    return {
        "rest_dict": body, "sdk": response, "model_dump": response.model_dump(exclude_none=True),
        "content": content, "content_dict": content.model_dump(exclude_none=True), "parts": content.parts,
    }  # fmt: skip


def bedrock_forms(body: dict[str, Any]) -> dict[str, Any]:
    parsed = converse_parsed(body)
    message = parsed["output"]["message"]
    return {"boto3": parsed, "message": message, "content": message["content"]}


@dataclass(frozen=True)
class Provider:
    """How one provider's model answers with calls, and what an agent appends of the answer."""

    body: Callable[[list[Any]], dict[str, Any]]
    forms: Callable[[dict[str, Any]], dict[str, Any]]
    appended: Callable[[dict[str, Any]], list[Any]]
    """The history entries an agent appends for a response body (dicts)."""
    appended_objects: Callable[[dict[str, Any]], list[Any]] | None
    """The same as the SDK's objects, where the SDK has types for them."""
    prompt: Any


def _anthropic_objects(body: dict[str, Any]) -> list[Any]:
    import anthropic

    return [{"role": "assistant", "content": anthropic.types.Message.model_validate(body).content}]


def _chat_objects(body: dict[str, Any]) -> list[Any]:
    from openai.types.chat import ChatCompletion

    return [ChatCompletion.model_validate(body).choices[0].message]


def _responses_objects(body: dict[str, Any]) -> list[Any]:
    from openai.types.responses import Response

    return list(Response.model_validate(body).output)


def _gemini_objects(body: dict[str, Any]) -> list[Any]:
    from google.genai import types

    response = types.GenerateContentResponse.model_validate(body)
    assert response.candidates is not None
    return [response.candidates[0].content]


PROVIDERS: dict[str, Provider] = {
    "anthropic": Provider(
        anthropic_body, anthropic_forms, lambda b: [{"role": "assistant", "content": b["content"]}],
        _anthropic_objects, {"role": "user", "content": "Look at the code."},
    ),
    "openai-chat": Provider(
        chat_body, chat_forms, lambda b: [b["choices"][0]["message"]], _chat_objects,
        {"role": "user", "content": "Look at the code."},
    ),
    "openai-responses": Provider(
        responses_body, responses_forms, lambda b: list(b["output"]), _responses_objects,
        {"role": "user", "content": "Look at the code."},
    ),
    "gemini": Provider(
        gemini_body, gemini_forms, lambda b: [b["candidates"][0]["content"]], _gemini_objects,
        {"role": "user", "parts": [{"text": "Look at the code."}]},
    ),
    "bedrock": Provider(
        converse_body, bedrock_forms, lambda b: [b["output"]["message"]], None,
        {"role": "user", "content": [{"text": "Look at the code."}]},
    ),
}  # fmt: skip


def triples(calls: list[ToolCall]) -> list[tuple[str, str, Any]]:
    return [(c.id, c.name, c.arguments) for c in calls]


def form_cases() -> list[Any]:
    cases = []
    for name, provider in PROVIDERS.items():
        keys = provider.forms(provider.body(CALLS)).keys()  # bedrock's forms need botocore: cheap
        cases += [pytest.param(name, key, id=f"{name}-{key}") for key in keys]
    return cases


class TestResponseCalls:
    def test_loop_formats_are_the_providers(self) -> None:
        assert set(PROVIDERS) == set(LOOP_FORMATS)

    @pytest.mark.parametrize(("name", "form"), form_cases())
    def test_every_form_of_a_response(self, name: str, form: str) -> None:
        """The SDK object, its dict and the appended message or items give the same calls, in
        order, arguments parsed; text and reasoning are no calls."""
        response = PROVIDERS[name].forms(PROVIDERS[name].body(CALLS))[form]
        for fmt in variants(name):
            assert triples(fmt.response_calls(response)) == CALLS

    @pytest.mark.parametrize("form", ["rest_dict", "sdk", "model_dump", "content", "content_dict", "parts"])
    def test_gemini_calls_without_ids(self, form: str) -> None:
        """Id-less calls get ``name#k``, the id the format loads them under; ids given are kept."""
        calls = [
            (None, "read", {"path": "a"}),
            ("abc", "read", {"path": "b"}),
            (None, "read", {}),
            (None, "ls", {}),
        ]
        response = gemini_forms(gemini_body(calls))[form]
        got = triples(FORMATS["gemini"].response_calls(response))
        assert got == [
            ("read#1", "read", {"path": "a"}),
            ("abc", "read", {"path": "b"}),
            ("read#2", "read", {}),
            ("ls#1", "ls", {}),
        ]
        loaded = FORMATS["gemini"].load(PROVIDERS["gemini"].appended(gemini_body(calls)))
        assert [c.id for c in loaded[0].calls] == [c[0] for c in got]

    @pytest.mark.parametrize("name", NAMES)
    def test_no_calls(self, name: str) -> None:
        """A response without calls gives none; a format without responses says so."""
        fmt = FORMATS[name]
        if name not in PROVIDERS:
            with pytest.raises(NotImplementedError, match=name):
                fmt.response_calls({})
            with pytest.raises(NotImplementedError, match=name):
                fmt.result_messages([])
            return
        for response in (PROVIDERS[name].body([]), {}, [], None, "text", 3):
            assert fmt.response_calls(response) == []
        assert fmt.result_messages([]) == []

    def test_tool_call_is_the_loops(self) -> None:
        from toolkeep.integrations import raw

        assert raw.ToolCall is ToolCall


# ---------------------------------------------------------------------------- hostile arguments

DEEP = "[" * 100_000
HOSTILE: list[tuple[str, Any]] = [
    ("1" + "0" * 5000, "1" + "0" * 5000),  # past int()'s digit limit: ValueError, not JSONDecodeError
    ('{"n": 1' + "0" * 5000 + "}", '{"n": 1' + "0" * 5000 + "}"),
    (DEEP, DEEP),  # RecursionError in the parser
    ('{"a":' * 100_000, '{"a":' * 100_000),
    ('{"k": "\ud800"}', {"k": "\ud800"}),  # a lone surrogate, raw
    ('{"k": "\\udfff"}', {"k": "\udfff"}),  # and escaped
    ("\ud800", "\ud800"),
    ('{"path": "a.py"', '{"path": "a.py"'),  # cut short
    ("[1, 2]", "[1, 2]"),  # JSON, but no object
    ("null", "null"),
    ("", {}),
    (" \n", {}),
    ('{"path": "a.py"}', {"path": "a.py"}),
]


def one_call(name: str, arguments: Any) -> Any:
    """A dict response of provider ``name`` with one call whose arguments are ``arguments`` as
    the model sent them (a string where the provider sends JSON text, any value elsewhere)."""
    return PROVIDERS[name].body([("c1", "read", arguments)])


@pytest.mark.parametrize("name", LOOP_FORMATS)
@pytest.mark.parametrize(("sent", "expected"), HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_arguments_never_raise(name: str, sent: str, expected: Any) -> None:
    """The call is still returned, its arguments as the text that did not parse."""
    for fmt in variants(name):
        (call,) = fmt.response_calls(one_call(name, sent))
        assert (call.id, call.name) == ("c1", "read")
        assert call.arguments == expected


@property_settings(80)
@given(name=st.sampled_from(LOOP_FORMATS), sent=st.text(st.characters(exclude_categories=())))
def test_any_argument_text(name: str, sent: str) -> None:
    """Any text (lone surrogates included): its object when it is one, else the text itself."""
    (call,) = FORMATS[name].response_calls(one_call(name, sent))
    if isinstance(call.arguments, Mapping):
        assert call.arguments == (json.loads(sent) if sent.strip() else {})
    else:
        assert call.arguments == sent


@property_settings(80)
@given(name=st.sampled_from(LOOP_FORMATS), response=json_values(40))
def test_any_response_shape(name: str, response: Any) -> None:
    """A response of any shape gives calls (maybe none), never an exception."""
    for call in FORMATS[name].response_calls(response):
        assert isinstance(call.id, str) and isinstance(call.name, str)
        assert isinstance(call.arguments, (Mapping, str))


@pytest.mark.parametrize("name", LOOP_FORMATS)
def test_tool_loop_answers_hostile_arguments(name: str) -> None:
    """``ToolLoop`` reads calls and writes results through the format: a call whose arguments
    do not parse gets an error result, the others run, and the history stays valid."""
    from toolkeep.integrations.raw import ToolLoop

    provider = PROVIDERS[name]
    body = provider.body([("c1", "read", DEEP), ("c2", "read", '{"path": "a.py"}')])
    with ToolLoop({"read": lambda path: f"read {path}"}, format=name) as loop:
        results = loop.results(body)
    history = [provider.prompt, *provider.appended(body), *results]
    assert toolkeep.validate(history, name) == []
    first, second = (r for m in FORMATS[name].load(history) for r in m.results)
    assert "are not a JSON object" in first.text and first.is_error == (
        name not in ("openai-chat", "openai-responses")
    )
    assert (second.text, second.is_error) == ("read a.py", False)


def test_structured_arguments_that_are_no_object() -> None:
    """An input that is no mapping (a list, a number) comes as its JSON text."""
    (call,) = FORMATS["anthropic"].response_calls(anthropic_body([("c1", "read", [1, "a"])]))
    assert call.arguments == '[1, "a"]'
    (call,) = FORMATS["bedrock"].response_calls(converse_body([("c1", "read", 7)]))
    assert call.arguments == "7"


# ------------------------------------------------------------------------------ result messages

_ids = st.text(st.sampled_from("abcXYZ019_-"), min_size=1, max_size=12)
_texts = st.one_of(st.just(""), st.text(max_size=40), st.sampled_from(["ok", "中文 🙂", "a\nb", '"quoted"']))


@st.composite
def answered_calls(draw: st.DrawFn, name: str) -> list[tuple[Any, str, Any, str, bool]]:
    """``(id, tool name, arguments, result text, is_error)`` for 1-4 calls with distinct ids (a
    Gemini call may come without one)."""
    ids = draw(st.lists(_ids, min_size=1, max_size=4, unique=True))
    out = []
    for call_id in ids:
        cid: Any = None if name == "gemini" and draw(st.booleans()) else f"call_{call_id}"
        tool = draw(st.sampled_from(["read", "grep", "bash"]))
        out.append((cid, tool, {"x": draw(st.integers(0, 9))}, draw(_texts), draw(st.booleans())))
    return out


def answered_history(name: str, calls: list[Any], objects: bool) -> tuple[list[Any], list[Any]]:
    """The history an agent holds after appending the response and the format's results, and
    the results as :class:`ToolCall` answers."""
    provider = PROVIDERS[name]
    body = provider.body([c[:3] for c in calls])
    fmt = FORMATS[name]
    answered = [
        (call, text, error) for call, (*_, text, error) in zip(fmt.response_calls(body), calls, strict=True)
    ]
    appended = (
        provider.appended_objects(body) if objects and provider.appended_objects else provider.appended(body)
    )
    return [provider.prompt, *appended, *fmt.result_messages(answered)], answered


@pytest.mark.parametrize("name", LOOP_FORMATS)
@pytest.mark.parametrize("objects", [False, True], ids=["dicts", "objects"])
@property_settings(25)
@given(data=st.data())
def test_result_messages_pass_validate(name: str, objects: bool, data: st.DataObject) -> None:
    """The results a format builds, after the model's message, pass its own validate (through
    the SDK-object wrapper when the model's message is the SDK's object), and load back as the
    answers they carry: ids (and Gemini's names) echoed, texts whole, errors flagged."""
    calls = data.draw(answered_calls(name))
    history, answered = answered_history(name, calls, objects)
    fmt = resolve_format(history, name)
    assert objects == (fmt is not FORMATS[name]) or PROVIDERS[name].appended_objects is None
    loaded = fmt.load(history)
    assert fmt.validate(loaded) == []
    assert toolkeep.validate(history, name) == []
    flags = name not in ("openai-chat", "openai-responses")  # these two APIs have no error flag
    results = [(r.call_id, r.text, r.is_error) for m in loaded for r in m.results]
    assert results == [(c.id, text, error and flags) for c, text, error in answered]
    assert fmt.result_messages(answered) == FORMATS[name].result_messages(answered)


def test_gemini_results_name_their_calls() -> None:
    """A Gemini response part names its call, and gives its id only where the model gave one."""
    body = gemini_body([("abc", "read", {}), (None, "ls", {})])
    fmt = FORMATS["gemini"]
    first, second = fmt.response_calls(body)
    (content,) = fmt.result_messages([(first, "x", False), (second, "boom", True)])
    assert content == {
        "role": "user",
        "parts": [
            {"function_response": {"name": "read", "id": "abc", "response": {"output": "x"}}},
            {"function_response": {"name": "ls", "response": {"error": "boom"}}},
        ],
    }
    from google.genai import types

    types.Content.model_validate(content)  # the SDK's own type takes it


def test_bedrock_results_pass_botocore() -> None:
    """Bedrock's results, after the model's message, pass botocore's checks of a Converse call."""
    from .test_sdk_bedrock import assert_converse_accepts

    history, _ = answered_history(
        "bedrock", [("t1", "read", {}, "out", False), ("t2", "ls", {}, "", True)], False
    )
    assert history[-1]["content"][1] == {
        "toolResult": {"toolUseId": "t2", "content": [{"text": ""}], "status": "error"}
    }
    assert_converse_accepts(history)


# ---------------------------------------------------------------------------------- message sizes


def sent_chars(fmt: Format, m: Message) -> int:
    """Chars of ``m`` as its format sends it: the compact JSON of what ``dump`` makes of it alone
    (Bedrock's ``(continue)`` before a lone assistant message left out; an SDK object as the dict
    its SDK sends; a LangChain object as its ``messages_to_dict`` form)."""
    out = fmt.dump([m])
    if fmt.name == "bedrock" and m.role == "assistant":
        out = out[1:]
    return sum(len(compact(plain(x))) for x in out)


def plain(value: Any) -> Any:
    """``value`` with every SDK object in it as the dict its SDK sends, and a LangChain message
    as its ``messages_to_dict`` form."""
    if is_sdk_object(value):
        return _dump_model(value)
    if type(value).__module__.startswith("langchain_core."):
        from langchain_core.messages import messages_to_dict

        return messages_to_dict([value])[0]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def prepared_history(messages: list[Any], fmt: Format, config: toolkeep.Config) -> History:
    """The neutral history the policy's steps end with (pairing repaired, results and inputs
    cut), run over the whole history as a one-off ``run_pipeline`` runs them."""
    ctx = StepContext(fmt, config)
    history = fmt.load(messages)
    for step in build_steps(config):
        history = step(history, ctx)
    return history


def size_misses(messages: list[Any], name: str, config: toolkeep.Config) -> tuple[list[int], int]:
    """How far ``message_chars`` misses each message's size as sent, as loaded, as prepared and
    with every result halved (each within the slack); and how many prepared ones were rebuilt."""
    fmt = resolve_format(messages, name)
    prepared = prepared_history(messages, fmt, config)
    loaded = fmt.load(messages)
    misses = []
    for label, history in (("loaded", loaded), ("prepared", prepared), ("halved", halved(loaded))):
        for i, m in enumerate(history):
            estimate, real = fmt.message_chars(m), sent_chars(fmt, m)
            assert abs(estimate - real) <= MESSAGE_CHARS_SLACK, (label, i, m.role, m.dirty, estimate, real)
            misses.append(estimate - real)
    return misses, sum(m.dirty for m in prepared)


def halved(history: History) -> History:
    """``history`` with every result cut to the first half of its text (flagged an error when
    it was none, and the other way round) and every call given new arguments, in the shape the
    provider holds them (a JSON string for OpenAI, a mapping elsewhere)."""
    out = []
    for m in history:
        if m.results or m.calls:
            m = m.with_parts([edited(p) for p in m.parts])
        out.append(m)
    return out


def edited(p: Part) -> Part:
    if isinstance(p, ToolResultPart):
        return p.with_text(p.text[: len(p.text) // 2], is_error=not p.is_error)
    if isinstance(p, ToolCallPart):
        return p.with_arguments('{"cut": "\u00e9 1"}' if isinstance(p.arguments, str) else {"cut": "é 1"})
    return p


GOLDEN_CASES = sorted(GOLDEN.glob("*/*.input.json"))


@pytest.mark.parametrize("path", GOLDEN_CASES, ids=lambda p: f"{p.parent.name}/{p.name.split('.')[0]}")
def test_message_chars_on_golden_histories(path: Path) -> None:
    """The golden histories (images, cache points, thinking, server tools, unknown keys), as
    loaded and as prepared with the default config and with small limits (more rebuilt): the
    estimate follows every shape in them to the char."""
    messages = expand(json.loads(path.read_text(encoding="utf-8")))
    small = toolkeep.Config(
        default_tool_cap=200, max_result_chars=100, compact_min_chars=0, truncate_turns=0, summarize_turns=1
    )
    for config in (toolkeep.Config(), small):
        misses, rebuilt = size_misses(messages, path.parent.name, config)
        assert not any(misses)
    assert rebuilt > 0 or path.name.startswith("valid")  # the small limits changed something
    if path.parent.name == "langchain":
        from langchain_core.messages import messages_from_dict

        misses, _ = size_misses(messages_from_dict(messages), "langchain", small)
        assert not any(misses)


@property_settings(40)
@given(
    case=st.one_of(
        histories(),
        every_format_histories(),
        sdk_anthropic_histories().map(lambda h: ("anthropic", h)),
        sdk_openai_chat_histories().map(lambda h: ("openai-chat", h)),
    ),
    config=configs(),
    policy=st.sampled_from(["spec", "economy"]),
)
def test_message_chars_on_generated_histories(
    case: tuple[str, list[Any]], config: toolkeep.Config, policy: str
) -> None:
    """Broken histories of every format (dicts and SDK objects), loaded and prepared (by the
    economy policy too, which shortens call inputs): each message within the slack, and the
    misses of a whole history within one slack too (no per-message bias adds up over a long
    session)."""
    name, messages = case
    misses, _ = size_misses(messages, name, dataclasses.replace(config, policy=policy))
    assert abs(sum(misses)) <= MESSAGE_CHARS_SLACK


BIG = "x" * 1_000_000
BIG_RESULTS: dict[str, Any] = {
    "anthropic": {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": BIG}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}], "cache_control": {"type": "ephemeral"}}
        ],
    },
    "openai-chat": {"role": "tool", "tool_call_id": "t", "content": BIG, "name": "read"},
    "openai-responses": {"type": "function_call_output", "id": "fco_1", "call_id": "t", "output": BIG, "status": "completed"},
    "gemini": {"role": "user", "parts": [{"functionResponse": {"name": "r", "id": "t", "response": {"output": BIG, "exit_code": 1}}}]},
    "bedrock": {"role": "user", "content": [{"toolResult": {"toolUseId": "t", "content": [{"text": BIG}, {"json": {"rows": 3}}], "status": "success"}}]},
    "langchain": {"type": "tool", "data": {"content": BIG, "tool_call_id": "t", "type": "tool", "artifact": {"rows": 3}, "status": "success"}},
}  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_message_chars_prices_a_cut_result_at_its_new_text(name: str) -> None:
    """A result of 1 MB, with the keys and blocks its provider sends beside the text, cut short
    (and flagged an error): priced at its new text, everything beside it counted to the char."""
    fmt = FORMATS[name]
    (m,) = fmt.load([BIG_RESULTS[name]])
    (result,) = m.results
    cut = m.with_parts([result.with_text("short", is_error=True)])
    assert fmt.message_chars(m) == sent_chars(fmt, m) > 1_000_000
    assert fmt.message_chars(cut) == sent_chars(fmt, cut) < 400
