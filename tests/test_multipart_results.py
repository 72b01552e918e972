"""One original per result, in every format: a result of several text parts is read, archived
and recalled whole (its parts joined by newlines, as Anthropic joins a ``tool_result``'s text
blocks), and its other parts (images, documents, JSON beside text) are sent as they came."""

from __future__ import annotations

import json
from typing import Any

import pytest

import toolkeep
from toolkeep.messages import ToolResultPart
from toolkeep.shorten import CCR_MARKER_RE, archive_key

FIRST = "".join(f"first part, line {n}\n" for n in range(2_000))
SECOND = "".join(f"second part, line {n}\n" for n in range(2_000))
WHOLE = f"{FIRST}\n{SECOND}"
PNG = "iVBORw0KGgo="


def anthropic() -> list[Any]:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    content = [{"type": "text", "text": FIRST}, image, {"type": "text", "text": SECOND}]
    return [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": content}]},
    ]


def bedrock() -> list[Any]:
    image = {"image": {"format": "png", "source": {"bytes": PNG}}}
    document = {"document": {"format": "txt", "name": "notes", "source": {"bytes": "aGk="}}}
    content = [{"text": FIRST}, image, {"text": SECOND}, {"json": {"rows": 2}}, document]
    return [
        {"role": "user", "content": [{"text": "go"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "read", "input": {}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": content}}]},
    ]


def openai_chat() -> list[Any]:
    content = [{"type": "text", "text": FIRST}, {"type": "text", "text": SECOND}]
    return [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "read", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "t1", "content": content},
    ]


def langchain() -> list[Any]:
    image = {"type": "image", "source_type": "base64", "data": PNG, "mime_type": "image/png"}
    return [
        {"type": "human", "data": {"content": "go", "type": "human"}},
        {
            "type": "ai",
            "data": {
                "content": "",
                "type": "ai",
                "tool_calls": [{"id": "t1", "name": "read", "args": {}, "type": "tool_call"}],
            },
        },
        {
            "type": "tool",
            "data": {
                "content": [{"type": "text", "text": FIRST}, image, SECOND],
                "type": "tool",
                "tool_call_id": "t1",
            },
        },
    ]


def gemini() -> list[Any]:
    inline = {"inlineData": {"mimeType": "image/png", "data": PNG}}
    response = {"id": "t1", "name": "read", "response": {"output": WHOLE}, "parts": [inline]}
    return [
        {"role": "user", "parts": [{"text": "go"}]},
        {"role": "model", "parts": [{"functionCall": {"id": "t1", "name": "read", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": response}]},
    ]


HISTORIES = {
    "anthropic": anthropic,
    "bedrock": bedrock,
    "openai-chat": openai_chat,
    "langchain": langchain,
    "gemini": gemini,
}


def result_of(fmt: str, messages: list[Any]) -> ToolResultPart:
    (result,) = [p for m in toolkeep.get_format(fmt).load(messages) for p in m.results]
    return result


def kept_parts(fmt: str, messages: list[Any]) -> Any:
    """The result's parts that are not its text, as the provider holds them."""
    last = messages[-1]
    if fmt == "anthropic":
        return [b for b in last["content"][0]["content"] if b["type"] != "text"]
    if fmt == "bedrock":
        return [b for b in last["content"][0]["toolResult"]["content"] if "text" not in b]
    if fmt == "openai-chat":
        return [p for p in last["content"] if p["type"] != "text"]
    if fmt == "langchain":
        return [b for b in last["data"]["content"] if isinstance(b, dict) and b["type"] != "text"]
    return last["parts"][0]["functionResponse"]["parts"]


@pytest.mark.parametrize("fmt", sorted(HISTORIES))
def test_a_result_is_one_original_whatever_its_parts(fmt: str) -> None:
    """The result reads as its text parts joined; shortened, it names the key of that whole text
    and ``recall`` gives it back byte-exact; its other parts come out as they went in."""
    messages = HISTORIES[fmt]()
    assert result_of(fmt, messages).text == WHOLE
    config = toolkeep.Config(default_tool_cap=30_000, max_result_chars=20_000)
    with toolkeep.Session(config) as session:
        out, report = session.prepare(messages, format=fmt)
        sent = result_of(fmt, out).text
        (key,) = CCR_MARKER_RE.findall(sent)
        assert key == archive_key(WHOLE)
        assert session.recall(key) == WHOLE
    assert len(sent) < len(WHOLE) and report.capped + report.persisted == 1
    assert kept_parts(fmt, out) == kept_parts(fmt, messages)
    assert json.dumps(messages) == json.dumps(HISTORIES[fmt]())  # the input untouched


def test_bedrock_text_takes_the_first_text_blocks_place() -> None:
    """Bedrock: the shortened text is one text block where the first one was; the later text
    block goes (it is in the original), images, JSON and documents stay in their order."""
    with toolkeep.Session(toolkeep.Config(max_result_chars=20_000)) as session:
        out, _ = session.prepare(bedrock(), format="bedrock")
    content = out[2]["content"][0]["toolResult"]["content"]
    assert [next(iter(b)) for b in content] == ["text", "image", "json", "document"]


def test_bedrock_json_only_result_reads_as_its_json() -> None:
    """A result of JSON blocks alone reads as their JSON, so it too can be capped; cut, its text
    takes the JSON's place."""
    rows = {"rows": [f"row {n}" for n in range(5_000)]}
    messages = bedrock()
    messages[2] = {
        "role": "user",
        "content": [{"toolResult": {"toolUseId": "t1", "content": [{"json": rows}]}}],
    }
    assert result_of("bedrock", messages).text == json.dumps(rows)
    with toolkeep.Session(toolkeep.Config(max_result_chars=20_000)) as session:
        out, _ = session.prepare(messages, format="bedrock")
        (block,) = out[2]["content"][0]["toolResult"]["content"]
        (key,) = CCR_MARKER_RE.findall(block["text"])
        assert session.recall(key) == json.dumps(rows)
