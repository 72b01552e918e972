"""Prepared histories through the real SDK clients, to a mock HTTP transport.

Each test builds its history the way an agent does (from the SDK's own parsed response objects),
prepares it, and sends it with the real client (``anthropic``, ``openai`` chat and responses,
``google-genai``) over ``httpx2.MockTransport``: the SDK accepts the payload, and the request body
that reaches the wire is asserted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

import toolkeep
from toolkeep.steps.pairing import MISSING_RESULT_TEXT

from .test_formats_golden import GOLDEN, expand


class Wire:
    """A mock HTTP server: answers each SDK with a canned response, records request bodies."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.replies: dict[str, Any] = {}

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.bodies.append(json.loads(request.content))
        for suffix, reply in self.replies.items():
            if request.url.path.endswith(suffix):
                return httpx2.Response(200, json=reply)
        return httpx2.Response(404, json={"error": {"message": f"no reply for {request.url.path}"}})

    def client(self) -> httpx2.Client:
        return httpx2.Client(transport=httpx2.MockTransport(self.handle))


@pytest.fixture
def wire() -> Iterator[Wire]:
    yield Wire()


def prepare(messages: list[Any], tmp_path: Path, fmt: str = "auto") -> list[Any]:
    with toolkeep.Session(toolkeep.Config(), workspace=tmp_path / "ws") as session:
        prepared, _ = session.prepare(messages, format=fmt)
    return prepared


ANTHROPIC_REPLY = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-test-model",
    "content": [
        {"type": "thinking", "thinking": "Two files to read.", "signature": "EqQBCkYIARgCIkA"},
        {"type": "text", "text": "Reading both."},
        {"type": "tool_use", "id": "toolu_01A", "name": "read", "input": {"path": "a.py"}},
        {"type": "tool_use", "id": "toolu_01B", "name": "read", "input": {"path": "b.py"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 20},
}


class TestAnthropic:
    def test_response_blocks_come_back_as_objects_and_reach_the_wire(
        self, wire: Wire, tmp_path: Path
    ) -> None:
        """Response blocks appended as the assistant turn stay the same objects; the synthetic
        result for the unanswered call is sent as an error ``tool_result``."""
        import anthropic

        wire.replies["/messages"] = ANTHROPIC_REPLY
        client = anthropic.Anthropic(api_key="k", http_client=wire.client(), max_retries=0)
        first = client.messages.create(
            model="claude-test-model", max_tokens=64, messages=[{"role": "user", "content": "read a and b"}]
        )
        assistant_turn = {"role": "assistant", "content": first.content}
        history = [
            {"role": "user", "content": "read a and b"},
            assistant_turn,
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_01A", "content": "A"}],
            },
        ]
        prepared = prepare(history, tmp_path)
        assert prepared[1] is assistant_turn
        assert all(a is b for a, b in zip(prepared[1]["content"], first.content, strict=True))
        assert toolkeep.validate(prepared, "anthropic") == []

        client.messages.create(model="claude-test-model", max_tokens=64, messages=prepared)
        sent = wire.bodies[-1]["messages"]
        assert sent[1]["content"][2] == {
            "type": "tool_use",
            "id": "toolu_01A",
            "name": "read",
            "input": {"path": "a.py"},
        }
        assert sent[1]["content"][0]["signature"] == "EqQBCkYIARgCIkA"
        assert sent[2]["content"] == [
            {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "A"},
            {
                "type": "tool_result",
                "tool_use_id": "toolu_01B",
                "content": MISSING_RESULT_TEXT,
                "is_error": True,
            },
        ]

    def test_valid_history_with_objects_sends_the_same_body(self, wire: Wire, tmp_path: Path) -> None:
        """A valid history holding response blocks sends byte-identical JSON before and after."""
        import anthropic

        wire.replies["/messages"] = ANTHROPIC_REPLY
        client = anthropic.Anthropic(api_key="k", http_client=wire.client(), max_retries=0)
        reply = client.messages.create(model="m", max_tokens=8, messages=[{"role": "user", "content": "go"}])
        history: list[Any] = [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": reply.content},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "A"},
                    {"type": "tool_result", "tool_use_id": "toolu_01B", "content": "B"},
                ],
            },
        ]
        client.messages.create(model="m", max_tokens=8, messages=history)
        client.messages.create(model="m", max_tokens=8, messages=prepare(history, tmp_path))
        assert json.dumps(wire.bodies[-1]) == json.dumps(wire.bodies[-2])


@pytest.mark.parametrize(
    ("fmt", "path"),
    [
        (p.parent.name, p)
        for p in sorted(GOLDEN.glob("*/*.prepared.json"))
        if p.parent.name in ("anthropic", "openai-chat")
    ],
    ids=lambda v: v.stem if isinstance(v, Path) else v,
)
def test_golden_prepared_output_is_sent_as_is(fmt: str, path: Path, wire: Wire) -> None:
    """The pinned Anthropic and OpenAI Chat outputs go through their SDK unchanged."""
    import anthropic
    import openai

    messages = json.loads(path.read_text(encoding="utf-8"))
    if fmt == "anthropic":
        wire.replies["/messages"] = ANTHROPIC_REPLY
        client = anthropic.Anthropic(api_key="k", http_client=wire.client(), max_retries=0)
        client.messages.create(model="claude-test-model", max_tokens=8, messages=messages)
    else:
        wire.replies["/chat/completions"] = CHAT_REPLY
        chat = openai.OpenAI(api_key="k", http_client=wire.client(), max_retries=0)
        chat.chat.completions.create(model="gpt-4o", messages=messages)
    assert wire.bodies[-1]["messages"] == messages


CHAT_REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_a", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
                    {"id": "call_a", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
                    {
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "cat", "arguments": '{"p":"x"}'},
                    },
                ],
            },
        }
    ],
}


class TestOpenAIChat:
    def test_chat_completion_message_rebuilt_as_its_class(self, wire: Wire, tmp_path: Path) -> None:
        """A ``ChatCompletionMessage`` with a duplicate call comes back as a ``ChatCompletionMessage``
        without it; the SDK sends it with the synthetic tool message."""
        import openai
        from openai.types.chat import ChatCompletionMessage

        wire.replies["/chat/completions"] = CHAT_REPLY
        client = openai.OpenAI(api_key="k", http_client=wire.client(), max_retries=0)
        message = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "ls"}])
        reply = message.choices[0].message
        history = [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "ls"},
            reply,
            {"role": "tool", "tool_call_id": "call_a", "content": "a.py"},
        ]
        prepared = prepare(history, tmp_path)
        assert isinstance(prepared[2], ChatCompletionMessage)
        assert [c.id for c in prepared[2].tool_calls or ()] == ["call_a", "call_b"]
        assert prepared[2].tool_calls is not None and prepared[2].tool_calls[0] is reply.tool_calls[0]  # type: ignore[index]
        assert reply.tool_calls is not None and len(reply.tool_calls) == 3  # the caller's object is untouched
        assert toolkeep.validate(prepared, "openai-chat") == []

        client.chat.completions.create(model="gpt-4o", messages=prepared)
        sent = wire.bodies[-1]["messages"]
        assert [c["id"] for c in sent[2]["tool_calls"]] == ["call_a", "call_b"]
        assert sent[3:] == [
            {"role": "tool", "tool_call_id": "call_a", "content": "a.py"},
            {"role": "tool", "tool_call_id": "call_b", "content": MISSING_RESULT_TEXT},
        ]


RESPONSES_REPLY = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1,
    "model": "gpt-5",
    "status": "completed",
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"},
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "grep",
            "arguments": '{"q":"def"}',
            "status": "completed",
        },
        {
            "type": "function_call",
            "id": "fc_2",
            "call_id": "call_2",
            "name": "read",
            "arguments": '{"p":"a"}',
            "status": "completed",
        },
    ],
}


class TestOpenAIResponses:
    def test_output_items_appended_to_input(self, wire: Wire, tmp_path: Path) -> None:
        """``input += response.output``: the items stay the same objects, the reasoning item stays
        right before its calls, and the unanswered call gets a ``function_call_output``."""
        import openai

        wire.replies["/responses"] = RESPONSES_REPLY
        client = openai.OpenAI(api_key="k", http_client=wire.client(), max_retries=0)
        user: Any = {"role": "user", "content": "find def"}
        response = client.responses.create(model="gpt-5", input=[user])
        history: list[Any] = [user, *response.output]
        history.append({"type": "function_call_output", "call_id": "call_1", "output": "a.py:1:def f()"})
        prepared = prepare(history, tmp_path)
        assert all(a is b for a, b in zip(prepared[1:4], response.output, strict=True))
        assert toolkeep.validate(prepared, "openai-responses") == []

        client.responses.create(model="gpt-5", input=prepared)
        sent = wire.bodies[-1]["input"]
        assert [item.get("type") for item in sent] == [
            None,
            "reasoning",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output",
        ]
        assert sent[5] == {"type": "function_call_output", "call_id": "call_2", "output": MISSING_RESULT_TEXT}

    def test_golden_prepared_output_is_accepted(self, wire: Wire) -> None:
        """The pinned Responses outputs go through the SDK unchanged."""
        import openai

        wire.replies["/responses"] = RESPONSES_REPLY
        client = openai.OpenAI(api_key="k", http_client=wire.client(), max_retries=0)
        for path in sorted(GOLDEN.glob("openai-responses/*.prepared.json")):
            items = json.loads(path.read_text(encoding="utf-8"))
            client.responses.create(model="gpt-5", input=items)
            assert wire.bodies[-1]["input"] == items


GEMINI_REPLY = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {
                        "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                        "thoughtSignature": "c2ln",
                    },
                    {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}},
                ],
            },
            "finishReason": "STOP",
        }
    ]
}


class TestGemini:
    def test_content_objects_come_back_as_content(self, wire: Wire, tmp_path: Path) -> None:
        """``types.Content`` turns stay objects; the missing response is a ``Content`` too, and
        the thought signature reaches the wire."""
        from google import genai
        from google.genai import types

        wire.replies[":generateContent"] = GEMINI_REPLY
        client = genai.Client(api_key="k", http_options=types.HttpOptions(httpx_client=wire.client()))
        question = types.Content(role="user", parts=[types.Part(text="weather in Paris and Rome?")])
        reply = client.models.generate_content(model="gemini-2.5-flash", contents=[question])
        model_turn = reply.candidates[0].content  # type: ignore[index]
        answered = types.Content(
            role="user",
            parts=[types.Part.from_function_response(name="get_weather", response={"output": "18C"})],
        )
        history = [question, model_turn, answered]
        prepared = prepare(history, tmp_path)
        assert prepared[0] is question and prepared[1] is model_turn
        assert all(isinstance(c, types.Content) for c in prepared)
        assert toolkeep.validate(prepared, "gemini") == []

        client.models.generate_content(model="gemini-2.5-flash", contents=prepared)
        sent = wire.bodies[-1]["contents"]
        assert sent[1]["parts"][0]["thoughtSignature"] == "c2ln"
        assert sent[2]["parts"] == [
            {"functionResponse": {"name": "get_weather", "response": {"output": "18C"}}},
            {"functionResponse": {"name": "get_weather", "response": {"error": MISSING_RESULT_TEXT}}},
        ]

    @pytest.mark.parametrize("path", sorted(GOLDEN.glob("gemini/*.prepared.json")), ids=lambda p: p.stem)
    def test_golden_prepared_output_is_accepted(self, path: Path, wire: Wire) -> None:
        """The pinned Gemini outputs (camelCase and snake_case) are sent as the same contents."""
        from google import genai
        from google.genai import types

        wire.replies[":generateContent"] = GEMINI_REPLY
        client = genai.Client(api_key="k", http_options=types.HttpOptions(httpx_client=wire.client()))
        contents = expand(json.loads(path.read_text(encoding="utf-8")))
        client.models.generate_content(model="gemini-2.5-flash", contents=contents)
        sent = wire.bodies[-1]["contents"]
        assert toolkeep.validate(sent, "gemini") == []
        assert _pairs(sent) == _pairs(contents)


def _pairs(contents: list[Any]) -> list[Any]:
    """Role, calls and results of each turn, as the gemini format reads them."""
    history = toolkeep.get_format("gemini").load(contents)
    return [
        (
            m.role,
            [(c.id, c.name, c.arguments) for c in m.calls],
            [(r.call_id, r.text, r.is_error) for r in m.results],
        )
        for m in history
    ]
