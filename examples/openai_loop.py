"""A hand-written OpenAI Chat Completions tool loop with toolkeep (ToolLoop), resuming a history
whose last tool call was interrupted.

Runs offline: the client talks to a scripted stand-in for the API (an httpx2 MockTransport) that
checks every request it gets with ``toolkeep.validate``. With a real key, drop ``http_client=...``.
For the Responses API use ``format="openai-responses"`` and ``input=loop.prepare(items)``.

    pip install 'toolkeep[openai]'
    python examples/openai_loop.py
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
import openai

import toolkeep
from toolkeep.integrations.raw import ToolLoop


def search(query: str) -> str:
    return "\n".join(f"src/module_{n}.py:{n * 7}: {query} = load({n})" for n in range(3_000))


def scripted_api(request: httpx2.Request) -> httpx2.Response:
    """Stand-in for Chat Completions: insist on a valid history, search once, then answer."""
    messages = json.loads(request.content)["messages"]
    assert toolkeep.validate(messages, "openai-chat") == [], "the API would answer 400"
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if messages[-1]["role"] == "user":
        message["tool_calls"] = [{"id": "call_2", "type": "function",
                                  "function": {"name": "search", "arguments": '{"query": "config"}'}}]  # fmt: skip
    else:
        message["content"] = (
            f"found it; the search result I was sent is {len(messages[-1]['content']):,} chars"
        )
    finish = "tool_calls" if message["content"] is None else "stop"
    return httpx2.Response(200, json={
        "id": "c", "object": "chat.completion", "created": 0, "model": "gpt-x",
        "choices": [{"index": 0, "finish_reason": finish, "message": message}],
    })  # fmt: skip


def main() -> None:
    client = openai.OpenAI(
        api_key="offline", http_client=httpx2.Client(transport=httpx2.MockTransport(scripted_api))
    )
    my_tools: list[Any] = [{"type": "function", "function": {
        "name": "search", "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}}]  # fmt: skip
    messages: list[Any] = [  # the last session stopped mid-call: call_1 never got its result
        {"role": "user", "content": "Find where config is loaded."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": "{}"}}]},
        {"role": "user", "content": "Sorry, I stopped that. Try again."},
    ]  # fmt: skip

    with ToolLoop({"search": search}, format="openai-chat") as loop:
        while True:
            completion = client.chat.completions.create(
                model="gpt-x", tools=my_tools + loop.tool_definitions(), messages=loop.prepare(messages)
            )
            assert loop.report is not None  # every request is repaired; `messages` is left as it was
            repairs = [f"{r.kind} {r.id}" for r in loop.report.repairs]
            print(f"request with {len(messages)} messages: repairs {repairs}")
            messages.append(completion.choices[0].message)
            results = loop.results(completion)
            if not results:
                break
            messages += results

    print("model:", completion.choices[0].message.content)


if __name__ == "__main__":
    main()
