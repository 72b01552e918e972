"""The raw SDK tool loop, end to end: the real ``anthropic``, ``openai`` and ``google-genai``
clients over an ``httpx2.MockTransport``, and botocore's ``bedrock-runtime`` client with its
request caught before sending, whose scripted model answers from the request body it receives."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("anthropic")
pytest.importorskip("openai")
pytest.importorskip("httpx2")

import anthropic
import httpx2
import openai

import toolkeep
from tests import integration_scenario as scenario
from toolkeep.integrations.raw import ToolCall, ToolLoop

Reply = Callable[[dict[str, Any]], dict[str, Any]]


def transport(format: str, seen: scenario.Seen, reply: Reply) -> Any:
    """A mock transport that checks each request body, then answers the scripted step."""

    def handle(request: Any) -> Any:
        body = json.loads(request.content)
        messages = body["input"] if format == "openai-responses" else body["messages"]
        scenario.check_request(messages, format, seen)
        assert {"recall", "read_result"} <= {_tool_name(t) for t in body["tools"]}
        return httpx2.Response(200, json=reply(body))

    return httpx2.Client(transport=httpx2.MockTransport(handle))


def _tool_name(tool: dict[str, Any]) -> str:
    name = tool.get("name") or tool["function"]["name"]
    assert isinstance(name, str)
    return name


def anthropic_reply(seen: scenario.Seen) -> Reply:
    def reply(body: dict[str, Any]) -> dict[str, Any]:
        turn = seen.requests - 1
        return scenario.anthropic_message(turn, scenario.next_step(turn, seen.last_texts))

    return reply


def chat_reply(seen: scenario.Seen) -> Reply:
    def reply(body: dict[str, Any]) -> dict[str, Any]:
        turn = seen.requests - 1
        return scenario.chat_completion(turn, scenario.next_step(turn, seen.last_texts))

    return reply


def responses_reply(seen: scenario.Seen) -> Reply:
    def reply(body: dict[str, Any]) -> dict[str, Any]:
        turn = seen.requests - 1
        return scenario.responses_response(turn, scenario.next_step(turn, seen.last_texts), body["tools"])

    return reply


READ_SPEC = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
FETCH_SPEC = {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}


class TestAnthropicLoop:
    def test_session_end_to_end(self, tmp_path: Path) -> None:
        """Each request is valid and within budget, every kind of work shows, recall is byte-exact."""
        seen = scenario.Seen()
        client = anthropic.Anthropic(
            api_key="test", max_retries=0, http_client=transport("anthropic", seen, anthropic_reply(seen))
        )
        tools = [
            {"name": "read", "description": "Read a file.", "input_schema": READ_SPEC},
            {"name": "fetch", "description": "Fetch a page.", "input_schema": FETCH_SPEC},
        ]
        messages: list[Any] = [
            {"role": "user", "content": scenario.FIRST_PROMPT},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": scenario.INTERRUPTED_ID, "name": "read", "input": {"path": "x"}}]},
            {"role": "user", "content": scenario.RESUME_PROMPT},
        ]  # fmt: skip
        with ToolLoop(scenario.TOOLS, format="anthropic", config=scenario.CONFIG) as loop:
            workspace = loop.session.workspace.path
            while True:
                response = client.messages.create(
                    model="claude-x", max_tokens=100, tools=tools + loop.tool_definitions(),
                    messages=loop.prepare(messages),
                )  # fmt: skip
                messages.append({"role": "assistant", "content": response.content})
                results = loop.results(response)
                if not results:
                    break
                messages += results
        scenario.check_session(seen)
        assert not workspace.exists()  # the loop's own session closed with it
        block = response.content[0]
        assert isinstance(block, anthropic.types.TextBlock) and block.text == scenario.FINAL_TEXT
        # the page was capped as it entered the history; the history holds the cap form
        fetched = messages[8]["content"][0]["content"]
        assert messages[8]["content"][0]["tool_use_id"] == "toolu_2"
        assert "[TRUNCATED " in fetched and len(fetched) < 5_000

    def test_without_prepare_request_is_invalid(self) -> None:
        """Control: the same first request sent unprepared carries the dangling call."""
        seen = scenario.Seen()
        client = anthropic.Anthropic(
            api_key="test", max_retries=0, http_client=transport("anthropic", seen, anthropic_reply(seen))
        )
        messages: list[Any] = [
            {"role": "user", "content": scenario.FIRST_PROMPT},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": scenario.INTERRUPTED_ID, "name": "read", "input": {"path": "x"}}]},
            {"role": "user", "content": scenario.RESUME_PROMPT},
        ]  # fmt: skip
        with (
            ToolLoop(scenario.TOOLS, format="anthropic") as loop,
            pytest.raises(anthropic.APIConnectionError) as raised,
        ):
            client.messages.create(
                model="claude-x", max_tokens=1, tools=loop.tool_definitions(), messages=messages
            )
        assert "missing_result" in str(raised.value.__cause__)  # the transport's check failed


class TestOpenAIChatLoop:
    def test_session_end_to_end(self, tmp_path: Path) -> None:
        """The same session through Chat Completions, with the SDK's message objects in the history."""
        seen = scenario.Seen()
        client = openai.OpenAI(
            api_key="test", max_retries=0, http_client=transport("openai-chat", seen, chat_reply(seen))
        )
        tools = [
            {"type": "function", "function": {"name": "read", "parameters": READ_SPEC}},
            {"type": "function", "function": {"name": "fetch", "parameters": FETCH_SPEC}},
        ]
        messages: list[Any] = [
            {"role": "user", "content": scenario.FIRST_PROMPT},
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": scenario.INTERRUPTED_ID, "type": "function",
                "function": {"name": "read", "arguments": "{}"}}]},
            {"role": "user", "content": scenario.RESUME_PROMPT},
        ]  # fmt: skip
        with toolkeep.Session(scenario.CONFIG, workspace=tmp_path / "ws") as session:
            loop = ToolLoop(scenario.TOOLS, format="openai-chat", session=session)
            while True:
                completion = client.chat.completions.create(
                    model="gpt-x", tools=tools + loop.tool_definitions(), messages=loop.prepare(messages)
                )
                message = completion.choices[0].message
                messages.append(message)
                results = loop.results(completion)
                if not results:
                    break
                messages += results
            loop.close()
            assert session.workspace.path.is_dir()  # a caller's session stays open
        scenario.check_session(seen)
        assert message.content == scenario.FINAL_TEXT


class TestOpenAIResponsesLoop:
    def test_session_end_to_end(self, tmp_path: Path) -> None:
        """The same session through the Responses API, output items appended as they come."""
        seen = scenario.Seen()
        client = openai.OpenAI(
            api_key="test",
            max_retries=0,
            http_client=transport("openai-responses", seen, responses_reply(seen)),
        )
        tools = [
            {"type": "function", "name": "read", "parameters": READ_SPEC, "strict": False},
            {"type": "function", "name": "fetch", "parameters": FETCH_SPEC, "strict": False},
        ]
        items: list[Any] = [
            {"role": "user", "content": scenario.FIRST_PROMPT},
            {"type": "function_call", "call_id": scenario.INTERRUPTED_ID, "name": "read", "arguments": "{}"},
            {"role": "user", "content": scenario.RESUME_PROMPT},
        ]
        with ToolLoop(scenario.TOOLS, format="openai-responses", config=scenario.CONFIG) as loop:
            while True:
                response = client.responses.create(
                    model="gpt-x", tools=tools + loop.tool_definitions(), input=loop.prepare(items)
                )
                items += response.output
                results = loop.results(response)
                if not results:
                    break
                items += results
        scenario.check_session(seen)
        assert response.output_text == scenario.FINAL_TEXT


class TestGeminiLoop:
    def test_session_end_to_end(self) -> None:
        """The same session through google-genai: the model's ``Content`` objects appended as they
        come, its calls without ids, the results as the format's dicts."""
        from google import genai
        from google.genai import types

        seen = scenario.Seen()

        def handle(request: Any) -> Any:
            body = json.loads(request.content)
            scenario.check_request(body["contents"], "gemini", seen)
            declared = {d["name"] for t in body["tools"] for d in t["functionDeclarations"]}
            assert {"read", "fetch", "recall", "read_result"} <= declared
            turn = seen.requests - 1
            return httpx2.Response(
                200, json=scenario.gemini_response(turn, scenario.next_step(turn, seen.last_texts))
            )

        http = httpx2.Client(transport=httpx2.MockTransport(handle))
        client = genai.Client(api_key="test", http_options=types.HttpOptions(httpx_client=http))
        tools: list[Any] = [{"function_declarations": [
            {"name": "read", "description": "Read a file.", "parameters": READ_SPEC},
            {"name": "fetch", "description": "Fetch a page.", "parameters": FETCH_SPEC},
        ]}]  # fmt: skip
        contents: list[Any] = [
            {"role": "user", "parts": [{"text": scenario.FIRST_PROMPT}]},
            {"role": "model", "parts": [{"functionCall": {"name": "read", "args": {"path": "x"}}}]},
            {"role": "user", "parts": [{"text": scenario.RESUME_PROMPT}]},
        ]
        with ToolLoop(scenario.TOOLS, format="gemini", config=scenario.CONFIG) as loop:
            while True:
                response = client.models.generate_content(
                    model="gemini-x",
                    contents=loop.prepare(contents),
                    config=types.GenerateContentConfig(tools=tools + loop.tool_definitions()),
                )
                assert response.candidates is not None
                contents.append(response.candidates[0].content)
                results = loop.results(response)
                if not results:
                    break
                contents += results
        scenario.check_session(seen)
        assert response.text == scenario.FINAL_TEXT
        assert contents[4]["parts"][0]["function_response"]["name"] == "read"


class TestBedrockLoop:
    def test_session_end_to_end(self) -> None:
        """The same session through botocore's Converse: its parsed dicts appended as they come;
        every request passes botocore's validation before it is caught."""
        from botocore.awsrequest import AWSResponse

        from .test_sdk_bedrock import _Raw, client

        seen = scenario.Seen()

        def answer(request: Any, **_: Any) -> AWSResponse:
            body = json.loads(request.body)
            scenario.check_request(body["messages"], "bedrock", seen)
            declared = {t["toolSpec"]["name"] for t in body["toolConfig"]["tools"]}
            assert {"read", "fetch", "recall", "read_result"} <= declared
            turn = seen.requests - 1
            reply = scenario.converse_response(turn, scenario.next_step(turn, seen.last_texts))
            return AWSResponse(request.url, 200, {}, _Raw(json.dumps(reply).encode()))

        tools: list[Any] = [
            {"toolSpec": {"name": "read", "description": "Read a file.", "inputSchema": {"json": READ_SPEC}}},
            {
                "toolSpec": {
                    "name": "fetch",
                    "description": "Fetch a page.",
                    "inputSchema": {"json": FETCH_SPEC},
                }
            },
        ]
        messages: list[Any] = [
            {"role": "user", "content": [{"text": scenario.FIRST_PROMPT}]},
            {"role": "assistant", "content": [
                {"toolUse": {"toolUseId": scenario.INTERRUPTED_ID, "name": "read", "input": {"path": "x"}}}]},
            {"role": "user", "content": [{"text": scenario.RESUME_PROMPT}]},
        ]  # fmt: skip
        bedrock = client()
        bedrock.meta.events.register_first("before-send.bedrock-runtime.Converse", answer)
        try:
            with ToolLoop(scenario.TOOLS, format="bedrock", config=scenario.CONFIG) as loop:
                while True:
                    response = bedrock.converse(
                        modelId="m",
                        messages=loop.prepare(messages),
                        toolConfig={"tools": tools + loop.tool_definitions()},
                    )
                    messages.append(response["output"]["message"])
                    results = loop.results(response)
                    if not results:
                        break
                    messages += results
        finally:
            bedrock.meta.events.unregister("before-send.bedrock-runtime.Converse", answer)
        scenario.check_session(seen)
        assert messages[-1]["content"] == [{"text": scenario.FINAL_TEXT}]


class TestToolLoop:
    def test_errors_become_error_results(self) -> None:
        """A raising tool, an unknown tool and unparsable arguments each get an error result."""

        def broken(path: str) -> str:
            raise OSError(f"cannot open {path}")

        with ToolLoop({"read": broken}, format="anthropic", config=scenario.CONFIG) as loop:
            content = [
                {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a"}},
                {"type": "tool_use", "id": "t2", "name": "nope", "input": {}},
                {"type": "text", "text": "thinking aloud"},
            ]
            (message,) = loop.results({"content": content})
        blocks = message["content"]
        assert [b["tool_use_id"] for b in blocks] == ["t1", "t2"]
        assert blocks[0] == {
            "type": "tool_result",
            "tool_use_id": "t1",
            "content": "Error: OSError: cannot open a",
            "is_error": True,
        }
        assert blocks[1]["is_error"] and "unknown tool 'nope'" in blocks[1]["content"]
        with ToolLoop({"read": broken}, format="openai-chat") as loop:
            text, error = loop.run(ToolCall("c1", "read", "{not json"))
        assert error and "not a JSON object" in text

    def test_cap_at_entry_keeps_the_way_back(self) -> None:
        """A result over its tool's cap enters capped, and ``recall`` of its key gives it back whole."""
        with ToolLoop(scenario.TOOLS, format="openai-chat", config=scenario.CONFIG) as loop:
            text, error = loop.run(ToolCall("c1", "fetch", {"url": "u"}))
            key = toolkeep.shorten.CCR_MARKER_RE.search(text)
            assert not error and key is not None and "[TRUNCATED " in text
            pages = []
            start: int | None = 1
            while start is not None:
                answer, _ = loop.run(ToolCall("c2", "recall", {"key": key[1], "start_line": start}))
                body, _, note = answer.rpartition("\n\n[")
                pages.append(body)
                start = int(note.split("start_line=")[1].rstrip("]")) if "more: call" in note else None
        assert "".join(pages) == scenario.page("u")

    def test_no_calls_no_results(self) -> None:
        """A response without tool calls gives nothing to append: the loop's stop signal."""
        with ToolLoop({}, format="openai-responses") as loop:
            assert loop.results({"output": [{"type": "message", "content": []}]}) == []

    def test_refuses_bad_setup(self) -> None:
        """A format whose model response holds no calls, or a tool named like toolkeep's own, is
        a ConfigError."""
        with pytest.raises(toolkeep.ConfigError, match="langchain"):
            ToolLoop({}, format="langchain")  # type: ignore[arg-type]
        with pytest.raises(toolkeep.ConfigError, match="recall"):
            ToolLoop({"recall": str}, format="anthropic")
