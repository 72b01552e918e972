"""Each format declares its provider's request (:attr:`toolkeep.formats.Format.request`), and the
request objects, the proxy's routes and the raw tool loop read their tables from there: the
tables are what they were when each kept its own copy."""

from __future__ import annotations

import typing

import pytest

from toolkeep.formats import FORMATS
from toolkeep.integrations.raw import LOOP_FORMATS, LoopFormat
from toolkeep.proxy.files import last_turn_start
from toolkeep.proxy.routes import PROVIDERS, prepared_route, provider_for
from toolkeep.requests import (
    CONTINUING_KEYS,
    EXTRA_KEYS,
    HISTORY_KEYS,
    SYSTEM_KEYS,
    read_request,
    system_text,
)

SHAPED = {name: f.request for name, f in FORMATS.items() if f.request is not None}


def test_the_request_tables_read_from_the_formats_are_the_ones_written_before() -> None:
    assert HISTORY_KEYS == {"messages": None, "input": "openai-responses", "contents": "gemini"}
    assert list(HISTORY_KEYS) == ["messages", "input", "contents"]
    assert SYSTEM_KEYS == ("system", "instructions", "systemInstruction", "system_instruction")
    assert (*SYSTEM_KEYS, "tools", "toolConfig") == EXTRA_KEYS
    assert CONTINUING_KEYS == ("previous_response_id", "conversation")
    assert typing.get_args(LoopFormat) == LOOP_FORMATS
    assert [p.name for p in PROVIDERS] == ["anthropic", "gemini", "openai"]
    assert [(p.name, [route for _, route in p.prepared]) for p in PROVIDERS] == [
        ("anthropic", ["anthropic"]),
        ("gemini", ["gemini"]),
        ("openai", ["openai-chat", "openai-responses"]),
    ]


def test_a_langchain_history_is_no_providers_request() -> None:
    assert FORMATS["langchain"].request is None
    assert "langchain" not in LOOP_FORMATS


@pytest.mark.parametrize("name", [n for n, s in SHAPED.items() if s.route is not None])
def test_a_formats_route_is_prepared_as_that_format_and_goes_to_its_api(name: str) -> None:
    shape = SHAPED[name]
    assert shape.api is not None and shape.route is not None
    path = {
        "anthropic": "/v1/messages",
        "openai-chat": "/v1/chat/completions",
        "openai-responses": "/v1/responses",
        "gemini": "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
    }[name]
    assert shape.route.fullmatch(path)
    assert prepared_route("POST", path) == name
    assert prepared_route("GET", path) is None
    assert provider_for(path, {}).name == shape.api.name


def test_formats_of_one_provider_share_its_api_object() -> None:
    assert SHAPED["openai-chat"].api is SHAPED["openai-responses"].api


def test_a_continued_responses_request_is_read_with_the_continuing_format() -> None:
    request = read_request({"input": [], "previous_response_id": "resp_1"})
    fmt = request.format()
    assert request.continues and not isinstance(fmt, str) and fmt.name == "openai-responses"
    assert fmt is read_request({"input": [], "conversation": "c"}).format()
    assert read_request({"messages": [], "previous_response_id": "r"}).continues is False


def test_system_text_takes_the_first_system_key_and_writes_others_as_json() -> None:
    assert system_text({"system": "be brief", "instructions": "x"}) == "be brief"
    assert system_text({"systemInstruction": {"parts": [{"text": "é"}]}}) == '{"parts": [{"text": "é"}]}'
    assert system_text({"messages": []}) is None


def test_the_last_turn_is_what_the_client_wrote_in_any_formats_roles() -> None:
    history = [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a"},
        {"role": "model", "parts": [{"text": "ok"}]},
        {"role": "function", "parts": []},
        {"role": "tool", "tool_call_id": "c2", "content": "b"},
    ]
    assert last_turn_start(history) == 4
    assert last_turn_start(history[:3]) == 2
