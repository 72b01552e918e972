"""A hand-written Anthropic tool loop with toolkeep (toolkeep.integrations.raw.ToolLoop).

Runs offline: the client talks to a scripted stand-in for the API (an httpx2 MockTransport) that
reads a big log, then pages it back with ``recall``. With a real key, drop ``http_client=...``.

    pip install 'toolkeep[anthropic]'
    python examples/anthropic_loop.py
"""

from __future__ import annotations

import json
import re
from typing import Any

import anthropic
import httpx2

import toolkeep
from toolkeep.integrations.raw import ToolLoop


def read_log(path: str) -> str:
    return "".join(f"{path}:{n} GET /items/{n} 200 {n % 90} ms\n" for n in range(2_000))


def scripted_api(request: httpx2.Request) -> httpx2.Response:
    """Stand-in for the Messages API: read the log, recall it, answer with what came back."""
    messages = json.loads(request.content)["messages"]
    last = messages[-1]["content"]
    results = [b["content"] for b in last if isinstance(b, dict) and b.get("type") == "tool_result"]
    if not results:
        content = [{"type": "tool_use", "id": "toolu_1", "name": "read_log", "input": {"path": "app.log"}}]
    elif key := re.search(r"<<ccr:([0-9a-f]{16})>>", results[0]):
        content = [{"type": "tool_use", "id": "toolu_2", "name": "recall", "input": {"key": key[1]}}]
    else:
        page = results[0].splitlines()
        content = [{"type": "text", "text": f"recall gave back {page[0]!r} ... {page[-1]}"}]
    stop = "tool_use" if content[0]["type"] == "tool_use" else "end_turn"
    return httpx2.Response(200, json={
        "id": "msg", "type": "message", "role": "assistant", "model": "claude-x", "content": content,
        "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1},
    })  # fmt: skip


def main() -> None:
    client = anthropic.Anthropic(
        api_key="offline", http_client=httpx2.Client(transport=httpx2.MockTransport(scripted_api))
    )
    my_tools: list[Any] = [{
        "name": "read_log", "description": "Read a log file.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    }]  # fmt: skip
    messages: list[Any] = [{"role": "user", "content": "What is in app.log?"}]

    with ToolLoop({"read_log": read_log}, format="anthropic", config=toolkeep.Config()) as loop:
        while True:
            response = client.messages.create(
                model="claude-x", max_tokens=1024, tools=my_tools + loop.tool_definitions(),
                messages=loop.prepare(messages),
            )  # fmt: skip
            messages.append({"role": "assistant", "content": response.content})
            results = loop.results(response)
            if not results:
                break
            messages += results
            for block in results[0]["content"]:  # what entered the history (capped at the door)
                print(f"{block['tool_use_id']}: {len(block['content']):,} chars in the history")

    print("model:", response.content[0].text)  # type: ignore[union-attr]


if __name__ == "__main__":
    main()
