"""Test helper: an Anthropic-shape history rewritten in every other format, and corruptions.

The real trajectories under ``../shared/bench-data/anthropic`` are converted here at test time,
never copied into the repo. Each converter writes what that provider's own clients write: one
``tool`` message per result (OpenAI Chat), one item per call and output (Responses), one
``functionResponse`` per result in a ``user`` turn (Gemini), ``toolResult`` blocks with the user's
text that came with them in a user turn of its own, behind LiteLLM's ``Please continue.``
assistant turn (Bedrock, as LiteLLM's ``modify_params`` sends it; ``continue_text=None`` leaves the
text beside the results, what a client that merges consecutive user content sends and Converse
refuses), ``BaseMessage`` objects (LangChain).

The corruptions work on the Anthropic shape, before conversion, so that they mean the same thing
in every format: results dropped, ids duplicated within a message and reused by a later one,
results displaced behind an interposed user message.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["CONVERTERS", "corrupt", "to_format"]


def _blocks(m: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = m.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [b for b in content or () if isinstance(b, dict)]


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(
        b.get("text", "") for b in content or () if isinstance(b, dict) and b.get("type") == "text"
    )


def _names(history: list[Any]) -> dict[str, str]:
    return {
        b["id"]: b.get("name", "")
        for m in history
        if m["role"] == "assistant"
        for b in _blocks(m)
        if b.get("type") == "tool_use"
    }


def to_openai_chat(history: list[Any]) -> list[Any]:
    out: list[Any] = []
    for m in history:
        blocks = _blocks(m)
        text = "\n".join(b["text"] for b in blocks if b.get("type") == "text")
        if m["role"] == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": text or None}
            calls = [
                {
                    "id": b["id"],
                    "type": "function",
                    "function": {"name": b["name"], "arguments": json.dumps(b.get("input", {}))},
                }
                for b in blocks
                if b.get("type") == "tool_use"
            ]
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
            continue
        for b in blocks:
            if b.get("type") == "tool_result":
                out.append({"role": "tool", "tool_call_id": b["tool_use_id"], "content": _result_text(b)})
        if text:
            out.append({"role": "user", "content": text})
    return out


def to_openai_responses(history: list[Any]) -> list[Any]:
    out: list[Any] = []
    for m in history:
        for b in _blocks(m):
            kind = b.get("type")
            if kind == "text" and m["role"] == "assistant":
                out.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": b["text"], "annotations": []}],
                    }
                )
            elif kind == "text":
                out.append(
                    {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": b["text"]}],
                    }
                )
            elif kind == "tool_use":
                out.append(
                    {
                        "type": "function_call",
                        "call_id": b["id"],
                        "name": b["name"],
                        "arguments": json.dumps(b.get("input", {})),
                    }
                )
            elif kind == "tool_result":
                out.append(
                    {"type": "function_call_output", "call_id": b["tool_use_id"], "output": _result_text(b)}
                )
    return out


def to_gemini(history: list[Any]) -> list[Any]:
    names = _names(history)
    out: list[Any] = []
    for m in history:
        parts: list[Any] = []
        for b in _blocks(m):
            kind = b.get("type")
            if kind == "text":
                parts.append({"text": b["text"]})
            elif kind == "tool_use":
                parts.append({"functionCall": {"id": b["id"], "name": b["name"], "args": b.get("input", {})}})
            elif kind == "tool_result":
                key = "error" if b.get("is_error") else "output"
                parts.append(
                    {
                        "functionResponse": {
                            "id": b["tool_use_id"],
                            "name": names.get(b["tool_use_id"], "unknown"),
                            "response": {key: _result_text(b)},
                        }
                    }
                )
        if parts:
            out.append({"role": "model" if m["role"] == "assistant" else "user", "parts": parts})
    return out


def to_bedrock(
    history: list[Any], merge: bool = True, continue_text: str | None = "Please continue."
) -> list[Any]:
    """Converse messages, blocks in the order they came; ``merge=False`` keeps consecutive
    same-role messages (a broken shape). A user's text that ends up beside results goes to a user
    message of its own after them, behind an assistant message saying ``continue_text``
    (LiteLLM's ``modify_params``); with ``continue_text=None`` it stays beside them, which
    Converse refuses."""
    out: list[Any] = []
    for m in history:
        blocks: list[Any] = []
        for b in _blocks(m):
            kind = b.get("type")
            if kind == "text" and b["text"].strip():
                blocks.append({"text": b["text"]})
            elif kind == "tool_use":
                blocks.append(
                    {"toolUse": {"toolUseId": b["id"], "name": b["name"], "input": b.get("input", {})}}
                )
            elif kind == "tool_result":
                result: dict[str, Any] = {
                    "toolUseId": b["tool_use_id"],
                    "content": [{"text": _result_text(b)}],
                }
                if b.get("is_error"):
                    result["status"] = "error"
                blocks.append({"toolResult": result})
        if merge and out and out[-1]["role"] == m["role"]:
            out[-1]["content"].extend(blocks)
        elif blocks:
            out.append({"role": m["role"], "content": blocks})
    if continue_text is None:
        return out
    split: list[Any] = []
    for msg in out:
        results = [b for b in msg["content"] if "toolResult" in b]
        rest = [b for b in msg["content"] if "toolResult" not in b]
        if msg["role"] == "user" and results and any("text" in b for b in rest):
            split += [
                {"role": "user", "content": results},
                {"role": "assistant", "content": [{"text": continue_text}]},
                {"role": "user", "content": rest},
            ]
        else:
            split.append(msg)
    return split


def to_langchain(history: list[Any]) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    out: list[Any] = []
    for m in history:
        blocks = _blocks(m)
        text = "\n".join(b["text"] for b in blocks if b.get("type") == "text")
        if m["role"] == "assistant":
            calls = [
                {"name": b["name"], "args": b.get("input", {}), "id": b["id"], "type": "tool_call"}
                for b in blocks
                if b.get("type") == "tool_use"
            ]
            out.append(AIMessage(content=text, tool_calls=calls))
            continue
        for b in blocks:
            if b.get("type") == "tool_result":
                status = "error" if b.get("is_error") else "success"
                out.append(ToolMessage(content=_result_text(b), tool_call_id=b["tool_use_id"], status=status))
        if text:
            out.append(HumanMessage(content=text))
    return out


def to_langchain_dicts(history: list[Any]) -> list[Any]:
    from langchain_core.messages import messages_to_dict

    return messages_to_dict(to_langchain(history))


CONVERTERS: dict[str, Callable[[list[Any]], list[Any]]] = {
    "anthropic": copy.deepcopy,
    "openai-chat": to_openai_chat,
    "openai-responses": to_openai_responses,
    "gemini": to_gemini,
    "bedrock": to_bedrock,
    "langchain": to_langchain,
}


def to_format(history: list[Any], name: str) -> list[Any]:
    """``history`` (Anthropic shape) in format ``name``."""
    return CONVERTERS[name](history)


def corrupt(history: list[Any], every: int = 5) -> list[Any]:
    """A broken copy: results dropped, ids duplicated and reused, results displaced.

    Deterministic: every ``every``-th block loses a result, has a call duplicated, reuses the
    previous block's first id, or gets a user message between the call and its results.
    """
    out: list[Any] = []
    previous_id: str | None = None
    block = 0
    for m in copy.deepcopy(history):
        if m["role"] == "assistant" and isinstance(m["content"], list):
            uses = [b for b in m["content"] if b.get("type") == "tool_use"]
            if uses:
                block += 1
                if block % every == 1 and len(m["content"]) < 50:
                    m["content"].append(dict(uses[0]))  # duplicate within the message
                if block % every == 2 and previous_id is not None:
                    uses[0]["id"] = previous_id  # reuse an id of an earlier block
                previous_id = uses[-1]["id"]
            out.append(m)
            continue
        if isinstance(m["content"], list) and any(b.get("type") == "tool_result" for b in m["content"]):
            if block % every == 3:
                m["content"] = m["content"][1:]  # the first result goes
                if not m["content"]:
                    continue
            elif block % every == 4:
                out.append({"role": "user", "content": [{"type": "text", "text": "(interjection)"}]})
        out.append(m)
    return out
