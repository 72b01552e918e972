"""Hypothesis strategies shared by the property tests.

The core ones generate *broken* agent histories as plain dicts, in the Anthropic Messages and the
OpenAI Chat Completions formats: calls without results, orphan results, duplicate and empty ids,
results displaced behind user messages, oversized results (around every threshold of the default
config), and the parts the pipeline must carry untouched (images, ``cache_control``, unknown keys).

Big texts are a drawn seed repeated to a drawn length: hypothesis would take far too long to
generate 90,000 random chars, and repetition still exercises every cut (the seed holds line breaks,
non-ASCII and astral chars, and sometimes a ``<<ccr:KEY>>`` marker).
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

__all__ = [
    "SIZES",
    "agent_anthropic_histories",
    "agent_histories",
    "anthropic_histories",
    "anthropic_turns",
    "assistant",
    "bedrock_histories",
    "bedrock_text_beside_results",
    "configs",
    "empty_assistant_histories",
    "every_format_histories",
    "gemini_histories",
    "histories",
    "json_values",
    "langchain_histories",
    "long_sessions",
    "mutated_histories",
    "oa_assistant",
    "oa_tool",
    "oa_user",
    "openai_chat_histories",
    "property_settings",
    "responses_histories",
    "result_texts",
    "sdk_anthropic_histories",
    "sdk_openai_chat_histories",
    "segment_pairs",
    "small_result_sessions",
    "tool_result",
    "tool_use",
    "user",
    "with_empty_assistants",
]


def property_settings(max_examples: int) -> settings:
    """Settings for a property test: ``max_examples`` by default, ten times that when the
    environment has ``TOOLKEEP_SLOW=1`` (the long run); no deadline, big examples allowed."""
    factor = 10 if os.environ.get("TOOLKEEP_SLOW") == "1" else 1
    return settings(
        max_examples=max_examples * factor,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# Sizes around the default limits: 3,000 (compaction), 20,000 (per result), 30,000 (default cap),
# 50/60/80,000 (tree/search/read caps); each exactly at and one past the limit.
SIZES = (0, 1, 50, 2_999, 3_000, 3_001, 19_999, 20_000, 20_001, 30_000, 30_001, 50_001, 80_001)

TOOL_NAMES = ("read", "Read", "search", "tree", "grep", "ls", "bash", "Write", "edit", "fetch")
CALL_IDS = ("toolu_01", "toolu_02", "call_a", "call/b c", "x", "", "toolu_01")

_alphabet = st.sampled_from(
    ["a", "b", "z", " ", "\n", "\n", "é", "ß", "中", "文", "🙂", "𝄞", "{", "}", "\t", "0"]
)
_seed = st.text(_alphabet, min_size=1, max_size=40)
_fake_marker = st.sampled_from(["", "", "", "<<ccr:0123456789abcdef>>"])


@st.composite
def result_texts(draw: st.DrawFn) -> str:
    """A result text: small random text, or a seed repeated to one of :data:`SIZES` (or nearby)."""
    if draw(st.integers(0, 3)) == 0:
        return draw(st.text(_alphabet, max_size=60))
    size = draw(st.sampled_from(SIZES))
    seed = draw(_seed) + draw(_fake_marker)
    text = (seed * (size // len(seed) + 1))[:size]
    return text


@st.composite
def _unknown_keys(draw: st.DrawFn) -> dict[str, Any]:
    """Keys the pipeline does not know, to be carried as they are."""
    return draw(st.dictionaries(st.sampled_from(["x_meta", "trace", "_id"]), st.integers(0, 9), max_size=1))


_cache = st.sampled_from([None, None, {"type": "ephemeral"}])
_image_source = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}


@st.composite
def _answered_ids(draw: st.DrawFn, calls: list[tuple[str, str]]) -> list[str]:
    """The ids results will carry: some of the calls' (maybe twice, maybe none) plus orphans."""
    ids = [cid for cid, _ in calls]
    answered = draw(st.lists(st.sampled_from(ids), max_size=len(ids) + 1)) if ids else []
    return answered + draw(st.lists(st.sampled_from(["gone", "toolu_99", ""]), max_size=1))


# --------------------------------------------------------------------------------------- Anthropic


@st.composite
def _anthropic_result(draw: st.DrawFn, call_id: str, sdk: bool) -> dict[str, Any]:
    text = draw(result_texts())
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id}
    shape = draw(st.integers(0, 3))
    if shape == 0:
        block["content"] = text
    elif shape == 1:
        block["content"] = [{"type": "text", "text": text}]
    elif shape == 2:
        block["content"] = [
            {"type": "text", "text": text},
            {"type": "image", "source": dict(_image_source)},
        ]
    else:
        block["content"] = text
        block["is_error"] = draw(st.booleans())
    cache = draw(_cache)
    if cache is not None:
        block["cache_control"] = cache
    if not sdk:
        block.update(draw(_unknown_keys()))
    return block


@st.composite
def _anthropic_user_text(draw: st.DrawFn, sdk: bool) -> dict[str, Any]:
    if draw(st.booleans()):
        return {"role": "user", "content": draw(st.sampled_from(["go on", "stop!", "中文 🙂", " \n"]))}
    # a blank text block (Anthropic and Bedrock refuse it; pairing drops it there)
    blocks: list[dict[str, Any]] = [{"type": "text", "text": draw(st.sampled_from(["look at this", "\n\n"]))}]
    if draw(st.booleans()):
        blocks.append({"type": "image", "source": dict(_image_source)})
    cache = draw(_cache)
    if cache is not None:
        blocks[0]["cache_control"] = cache
    return {"role": "user", "content": blocks}


@st.composite
def anthropic_histories(draw: st.DrawFn, sdk: bool = False, max_blocks: int = 6) -> list[Any]:
    """A broken Anthropic history (``sdk=True``: only block types and keys the SDK types know)."""
    messages: list[Any] = [{"role": "user", "content": "Please fix the failing test."}]
    for _ in range(draw(st.integers(0, max_blocks))):
        calls = draw(st.lists(st.tuples(st.sampled_from(CALL_IDS), st.sampled_from(TOOL_NAMES)), max_size=3))
        content: list[dict[str, Any]] = []
        if draw(st.booleans()) or not calls:
            content.append(
                {"type": "text", "text": draw(st.sampled_from(["Let me look.", "ok", "🙂", "\n\n"]))}
            )
        for cid, name in calls:
            content.append({"type": "tool_use", "id": cid, "name": name, "input": {"path": "a.py"}})
        if not sdk and draw(st.integers(0, 5)) == 0:
            content.append({"type": "future_block", "payload": [1, 2]})
        assistant: dict[str, Any] = {"role": "assistant", "content": content}
        if not sdk:
            assistant.update(draw(_unknown_keys()))
        messages.append(assistant)

        # results: a shuffled subset of the calls, plus orphans and duplicates
        results = [draw(_anthropic_result(cid, sdk)) for cid in draw(_answered_ids(calls))]
        results = draw(st.permutations(results))
        if not results:
            if draw(st.booleans()):
                messages.append(draw(_anthropic_user_text(sdk)))
            continue
        split = draw(st.integers(0, len(results)))
        first, second = results[:split], results[split:]
        if first:
            tail: list[dict[str, Any]] = []
            if draw(st.booleans()):
                tail.append({"type": "text", "text": "Here you go."})
            messages.append({"role": "user", "content": first + tail})
        if second:
            # displaced: a user message interposed before the rest of the results
            messages.append(draw(_anthropic_user_text(sdk)))
            messages.append({"role": "user", "content": second})
    if messages[-1]["role"] == "assistant" and draw(st.booleans()):
        messages.append({"role": "user", "content": "continue"})
    return messages


_SIGNATURE = "EqQBCkYIBxgCKkBzaWduZWQtYnktdGhlLXN0cmF0ZWd5"
_SERVER_RESULTS = (
    ("web_search", {"query": "q"}, "web_search_tool_result", []),
    ("web_fetch", {"url": "https://x.test"}, "web_fetch_tool_result", {"type": "web_fetch_tool_error", "error_code": "url_not_accessible"}),
    ("bash_code_execution", {"command": "ls"}, "bash_code_execution_tool_result", {"type": "bash_code_execution_result", "stdout": "a.py", "stderr": "", "return_code": 0, "content": []}),
    ("code_execution", {"code": "1"}, "code_execution_tool_result", {"type": "code_execution_result", "stdout": "1", "stderr": "", "return_code": 0, "content": []}),
)  # fmt: skip


@st.composite
def _thinking(draw: st.DrawFn, n: int) -> dict[str, Any]:
    if draw(st.booleans()):
        return {"type": "thinking", "thinking": f"step {n}: look first", "signature": f"{_SIGNATURE}{n}"}
    return {"type": "redacted_thinking", "data": f"EmwKAhgB{n}"}


@st.composite
def _server_blocks(draw: st.DrawFn, n: int) -> list[dict[str, Any]]:
    """A server tool's use with the result the server wrote after it, or an MCP call's pair."""
    if draw(st.integers(0, 4)) == 0:
        use_id = f"mcptoolu_{n}"
        return [
            {"type": "mcp_tool_use", "id": use_id, "name": "query", "server_name": "db", "input": {}},
            {
                "type": "mcp_tool_result",
                "tool_use_id": use_id,
                "content": [{"type": "text", "text": "3 rows"}],
            },
        ]
    name, arguments, kind, content = draw(st.sampled_from(_SERVER_RESULTS))
    use_id = f"srvtoolu_{n}"
    return [
        {"type": "server_tool_use", "id": use_id, "name": name, "input": arguments},
        {"type": kind, "tool_use_id": use_id, "content": content},
    ]


def _kept_by_pairing(message: dict[str, Any]) -> bool:
    """True when pairing repair keeps ``message``: something in it is neither a result, nor blank
    text (replaced, not dropped, in a user message), nor a call without an id."""
    content = message["content"]
    if isinstance(content, str):
        return message["role"] == "user" or bool(content.strip())
    for b in content:
        if b["type"] == "tool_use":
            if b["id"]:
                return True
        elif b["type"] != "tool_result" and not (
            message["role"] == "assistant" and b["type"] == "text" and not b["text"].strip()
        ):
            return True
    return False


def _results_only(message: dict[str, Any]) -> bool:
    content = message["content"]
    return isinstance(content, list) and all(b["type"] in ("tool_result", "text") for b in content)


@st.composite
def agent_anthropic_histories(draw: st.DrawFn, max_blocks: int = 6) -> list[Any]:
    """A broken Anthropic history as agents such as Claude Code send it: :func:`anthropic_histories`
    with thinking or redacted thinking first in assistant messages (after a compaction block, at
    times), server and MCP tool blocks among the calls, a turn paused on a server tool use,
    container uploads in user messages, and system messages. A system message stands where the
    API takes one (after a user message pairing keeps, before an assistant message it keeps, or
    last), or between calls and the one user message of their results, where pairing must move
    the results before it."""
    base = draw(anthropic_histories(max_blocks=max_blocks))
    messages: list[dict[str, Any]] = []
    for n, m in enumerate(base):
        content = m["content"]
        if m["role"] == "assistant":
            head = [{"type": "compaction", "content": f"summary {n}"}] if draw(st.integers(0, 7)) == 0 else []
            if draw(st.booleans()):
                head.append(draw(_thinking(n)))
            body = list(content)
            if draw(st.integers(0, 2)) == 0:
                at = draw(st.integers(0, len(body)))
                body[at:at] = draw(_server_blocks(n))
            if not any(b["type"] == "tool_use" for b in body) and draw(st.integers(0, 3)) == 0:
                body.append(
                    {"type": "server_tool_use", "id": f"srvtoolu_p{n}", "name": "web_search", "input": {}}
                )
            m = {**m, "content": head + body}
        elif isinstance(content, list) and draw(st.integers(0, 4)) == 0:
            m = {**m, "content": [*content, {"type": "container_upload", "file_id": f"file_{n}"}]}
        messages.append(m)
    out: list[dict[str, Any]] = []
    between = -1  # the message a system message was put before (it moves after it)
    for i, m in enumerate(messages):
        out.append(m)
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        after = messages[i + 2] if i + 2 < len(messages) else None
        ahead_kept = nxt is None or (nxt["role"] == "assistant" and _kept_by_pairing(nxt))
        if m["role"] == "user" and _kept_by_pairing(m) and ahead_kept and between != i:
            if draw(st.integers(0, 2)) == 0:
                out.append(
                    {"role": "system", "content": f"<system-reminder>after message {i}</system-reminder>"}
                )
        elif (
            m["role"] == "assistant"
            and any(b["type"] == "tool_use" and b["id"] for b in m["content"])
            and nxt is not None
            and _results_only(nxt)
            and (after is None or (after["role"] == "assistant" and _kept_by_pairing(after)))
            and draw(st.booleans())
        ):
            out.append({"role": "system", "content": [{"type": "text", "text": f"between calls {i}"}]})
            between = i + 1
    if draw(st.booleans()):  # a reminder that came between the calls and their results
        calls = [
            tool_use(f"toolu_s{k}", name)
            for k, name in enumerate(draw(st.lists(st.sampled_from(TOOL_NAMES), min_size=1, max_size=2)))
        ]
        tail = [{"type": "text", "text": "and then?"}] if draw(st.booleans()) else []
        out += [
            assistant(draw(_thinking(len(out))), *calls),
            {"role": "system", "content": "<system-reminder>a file changed</system-reminder>"},
            user(*draw(st.permutations([tool_result(c["id"], draw(result_texts())) for c in calls])), *tail),
        ]
    return out


def sdk_anthropic_histories(max_blocks: int = 6) -> st.SearchStrategy[list[Any]]:
    """Broken Anthropic histories using only what ``anthropic.types.MessageParam`` describes."""
    return anthropic_histories(sdk=True, max_blocks=max_blocks)


# ------------------------------------------------------------------------------------- OpenAI Chat


@st.composite
def _openai_tool_message(draw: st.DrawFn, call_id: str, sdk: bool) -> dict[str, Any]:
    text = draw(result_texts())
    message: dict[str, Any] = {"role": "tool", "tool_call_id": call_id}
    if draw(st.integers(0, 3)) == 0:
        message["content"] = [{"type": "text", "text": text}]
    else:
        message["content"] = text
    if not sdk:
        message.update(draw(_unknown_keys()))
    return message


@st.composite
def _openai_user(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):
        return {"role": "user", "content": draw(st.sampled_from(["go on", "stop!", "中文 🙂"]))}
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": "see the screenshot"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ],
    }


@st.composite
def openai_chat_histories(draw: st.DrawFn, sdk: bool = False, max_blocks: int = 6) -> list[Any]:
    """A broken OpenAI Chat Completions history."""
    messages: list[Any] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Please fix the failing test."},
    ]
    for _ in range(draw(st.integers(0, max_blocks))):
        calls = draw(st.lists(st.tuples(st.sampled_from(CALL_IDS), st.sampled_from(TOOL_NAMES)), max_size=3))
        assistant: dict[str, Any] = {"role": "assistant"}
        assistant["content"] = draw(st.sampled_from([None, "", "Let me look.", "中文 🙂"]))
        if not calls and not assistant["content"]:
            assistant["content"] = "ok"
        if calls:
            assistant["tool_calls"] = [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": name, "arguments": '{"path": "a.py"}'},
                }
                for cid, name in calls
            ]
        if not sdk:
            assistant.update(draw(_unknown_keys()))
        messages.append(assistant)
        tools = [draw(_openai_tool_message(cid, sdk)) for cid in draw(_answered_ids(calls))]
        tools = draw(st.permutations(tools))
        split = draw(st.integers(0, len(tools)))
        messages.extend(tools[:split])
        if split < len(tools) or draw(st.booleans()):
            messages.append(draw(_openai_user()))
        messages.extend(tools[split:])
    return messages


def sdk_openai_chat_histories(max_blocks: int = 6) -> st.SearchStrategy[list[Any]]:
    """Broken OpenAI Chat histories using only what ``ChatCompletionMessageParam`` describes."""
    return openai_chat_histories(sdk=True, max_blocks=max_blocks)


def histories(max_blocks: int = 6) -> st.SearchStrategy[tuple[str, list[Any]]]:
    """``(format name, history)`` pairs in either format."""
    return st.one_of(
        anthropic_histories(max_blocks=max_blocks).map(lambda h: ("anthropic", h)),
        openai_chat_histories(max_blocks=max_blocks).map(lambda h: ("openai-chat", h)),
    )


def agent_histories(max_blocks: int = 6) -> st.SearchStrategy[tuple[str, list[Any]]]:
    """:func:`histories`, and Anthropic histories as agents send them
    (:func:`agent_anthropic_histories`)."""
    return st.one_of(
        histories(max_blocks=max_blocks),
        agent_anthropic_histories(max_blocks=max_blocks).map(lambda h: ("anthropic", h)),
    )


# ------------------------------------------------------------------ hand-written example builders


def tool_use(call_id: str, name: str = "ls", **extra: Any) -> dict[str, Any]:
    """An Anthropic ``tool_use`` block."""
    return {"type": "tool_use", "id": call_id, "name": name, "input": {}, **extra}


def tool_result(call_id: str, content: Any = "ok", **extra: Any) -> dict[str, Any]:
    """An Anthropic ``tool_result`` block."""
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **extra}


def user(*blocks: Any) -> dict[str, Any]:
    """An Anthropic user message: a string, or blocks."""
    if len(blocks) == 1 and isinstance(blocks[0], str):
        return {"role": "user", "content": blocks[0]}
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: Any) -> dict[str, Any]:
    """An Anthropic assistant message; strings become text blocks."""
    content = [{"type": "text", "text": b} if isinstance(b, str) else b for b in blocks]
    return {"role": "assistant", "content": content}


def anthropic_turns(*results: tuple[str, str, Any]) -> list[Any]:
    """A valid Anthropic history with one block per ``(id, tool name, result content)``."""
    messages: list[Any] = [user("start")]
    for call_id, name, content in results:
        messages += [assistant(tool_use(call_id, name)), user(tool_result(call_id, content))]
    return messages


def oa_assistant(*calls: tuple[str, str], content: str | None = None) -> dict[str, Any]:
    """An OpenAI Chat assistant message with ``(id, name)`` tool calls."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}
            for cid, name in calls
        ]
    return message


def oa_tool(call_id: str, content: Any = "ok") -> dict[str, Any]:
    """An OpenAI Chat tool message."""
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def oa_user(content: Any = "go on") -> dict[str, Any]:
    """An OpenAI Chat user message."""
    return {"role": "user", "content": content}


@st.composite
def segment_pairs(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    """Two serialized requests as segment lists that often share a prefix (replay cost model):
    the second keeps some leading segments of the first, then adds its own."""
    seg = st.text(st.sampled_from(["a", "b", ",", "{", "é", "🙂"]), min_size=1, max_size=6)  # never empty
    first = draw(st.lists(seg, max_size=6))
    kept = first[: draw(st.integers(0, len(first)))]
    second = kept + draw(st.lists(seg, max_size=4))
    return first, second


# ------------------------------------------- every other format: a broken Anthropic history, converted
# The converters of tests/convert_formats.py carry every breakage over (missing, orphan, duplicate
# and empty ids, displaced results); each strategy then adds what only its format has.


@st.composite
def responses_histories(draw: st.DrawFn, max_blocks: int = 5) -> list[Any]:
    """A broken OpenAI Responses ``input``, with reasoning and server items in the model's runs,
    and empty assistant messages (``content: []`` or ``null``) an interrupted stream leaves."""
    from .convert_formats import to_openai_responses

    items = to_openai_responses(draw(anthropic_histories(max_blocks=max_blocks)))
    out: list[Any] = []
    for n, item in enumerate(items):
        kind = item.get("type")
        if kind in ("function_call", "message") and item.get("role", "assistant") == "assistant":
            if draw(st.integers(0, 2)) == 0:
                out.append({"type": "reasoning", "id": f"rs_{n}", "summary": [], "encrypted_content": "gAAA"})
            if kind == "function_call" and draw(st.integers(0, 5)) == 0:
                out.append({"type": "web_search_call", "id": f"ws_{n}", "status": "completed"})
        if kind == "function_call" and draw(st.integers(0, 4)) == 0:
            item = {**item, "id": f"fc_{n}", "status": "completed"}
        out.append(item)
        if draw(st.integers(0, 6)) == 0:
            out.append({"type": "message", "role": "assistant", "content": draw(st.sampled_from([[], None]))})
    return out


@st.composite
def gemini_histories(draw: st.DrawFn, max_blocks: int = 5) -> list[Any]:
    """A broken Gemini ``contents`` list: camelCase or snake_case, with or without call ids."""
    from .convert_formats import to_gemini

    contents = to_gemini(draw(anthropic_histories(max_blocks=max_blocks)))
    with_ids, snake = draw(st.booleans()), draw(st.booleans())
    out: list[Any] = []
    for content in contents:
        parts = []
        for part in content["parts"]:
            part = dict(part)
            for camel, sn in (("functionCall", "function_call"), ("functionResponse", "function_response")):
                if camel in part:
                    body = dict(part.pop(camel))
                    if not with_ids:
                        body.pop("id", None)
                    part[sn if snake else camel] = body
            if "functionCall" in part or "function_call" in part:
                part["thought_signature" if snake else "thoughtSignature"] = "c2ln"
            parts.append(part)
        out.append({**content, "parts": parts})
    return out


@st.composite
def bedrock_histories(draw: st.DrawFn, max_blocks: int = 5) -> list[Any]:
    """A broken Bedrock Converse history, sometimes with consecutive same-role messages, the
    user's text beside results (merged) or behind LiteLLM's ``Please continue.`` turn."""
    from .convert_formats import to_bedrock

    shape = draw(st.sampled_from(["merged", "separate", "litellm"]))
    messages = to_bedrock(
        draw(anthropic_histories(max_blocks=max_blocks)),
        merge=shape != "separate",
        continue_text="Please continue." if shape == "litellm" else None,  # merged: text beside results
    )
    if messages and draw(st.booleans()):
        messages[0] = {
            **messages[0],
            "content": [*messages[0]["content"], {"cachePoint": {"type": "default"}}],
        }
    return messages


@st.composite
def langchain_histories(draw: st.DrawFn, max_blocks: int = 5) -> list[Any]:
    """A broken LangChain history: ``BaseMessage`` objects, or their ``messages_to_dict`` form."""
    from .convert_formats import to_langchain, to_langchain_dicts

    history = draw(anthropic_histories(max_blocks=max_blocks))
    return to_langchain_dicts(history) if draw(st.booleans()) else to_langchain(history)


@st.composite
def bedrock_text_beside_results(draw: st.DrawFn, max_blocks: int = 5) -> list[Any]:
    """A Bedrock history whose results messages often hold the user's words too (before, between
    or after the ``toolResult`` blocks), the shape Converse refuses."""
    out: list[Any] = []
    for m in draw(bedrock_histories(max_blocks=max_blocks)):
        if m["role"] == "user" and any("toolResult" in b for b in m["content"]) and draw(st.booleans()):
            content = list(m["content"])
            for _ in range(draw(st.integers(1, 2))):
                note = draw(st.sampled_from(["also check b.py", "hurry", "中文 🙂", "  "]))
                content.insert(draw(st.integers(0, len(content))), {"text": note})
            m = {**m, "content": content}
        out.append(m)
    return out


def _empty_assistants(fmt: str, history: list[Any]) -> list[Any]:
    """The empty assistant messages an interrupted stream leaves, as format ``fmt`` holds them."""
    if fmt == "langchain":
        if history and not isinstance(history[0], dict):
            from langchain_core.messages import AIMessage

            return [AIMessage(content=""), AIMessage(content=[])]
        return [{"type": "ai", "data": {"content": "", "type": "ai", "tool_calls": []}}]
    return {
        "anthropic": [{"role": "assistant", "content": []}],
        "openai-chat": [
            {"role": "assistant", "content": None},
            {"role": "assistant", "content": []},
            {"role": "assistant", "content": ""},
        ],
        "gemini": [{"role": "model", "parts": []}],
        "bedrock": [{"role": "assistant", "content": []}],
    }[fmt]


@st.composite
def with_empty_assistants(draw: st.DrawFn, case: tuple[str, list[Any]]) -> tuple[str, list[Any]]:
    """``case`` with one to three empty assistant messages put in anywhere (first, last, between
    a call and its results), each alone or two in a row."""
    import copy

    fmt, history = case
    out = list(history)
    shapes = _empty_assistants(fmt, history)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(out)))
        shape = draw(st.sampled_from(shapes))
        out[at:at] = [copy.deepcopy(shape) for _ in range(draw(st.integers(1, 2)))]
    return fmt, out


EMPTY_ASSISTANT_FORMATS = ("anthropic", "openai-chat", "gemini", "bedrock", "langchain")


def empty_assistant_histories(
    formats: tuple[str, ...] = EMPTY_ASSISTANT_FORMATS, max_blocks: int = 5
) -> st.SearchStrategy[tuple[str, list[Any]]]:
    """``(format name, history)``: a broken history of one of ``formats`` with empty assistant
    messages in it."""
    bases: dict[str, st.SearchStrategy[list[Any]]] = {
        "anthropic": anthropic_histories(max_blocks=max_blocks),
        "openai-chat": openai_chat_histories(max_blocks=max_blocks),
        "gemini": gemini_histories(max_blocks=max_blocks),
        "bedrock": bedrock_histories(max_blocks=max_blocks),
        "langchain": langchain_histories(max_blocks=max_blocks),
    }
    cases = [bases[f].map(lambda h, f=f: (f, h)) for f in formats]
    return st.one_of(*cases).flatmap(with_empty_assistants)


def every_format_histories(max_blocks: int = 5) -> st.SearchStrategy[tuple[str, list[Any]]]:
    """``(format name, history)`` pairs in the four formats of ``tests/convert_formats.py``."""
    return st.one_of(
        responses_histories(max_blocks=max_blocks).map(lambda h: ("openai-responses", h)),
        gemini_histories(max_blocks=max_blocks).map(lambda h: ("gemini", h)),
        bedrock_histories(max_blocks=max_blocks).map(lambda h: ("bedrock", h)),
        langchain_histories(max_blocks=max_blocks).map(lambda h: ("langchain", h)),
    )


# --------------------------------------------------------------------------------- configurations


@st.composite
def configs(draw: st.DrawFn) -> Any:
    """A valid ``toolkeep.Config`` of any policy, with every cut threshold drawn small or default,
    so that caps, previews, compaction and summaries all fire on :func:`result_texts`-sized
    results (SPEC's ages and sizes; the cache-aware policy's batches as they pay)."""
    from toolkeep import Config
    from toolkeep.policies import POLICIES

    truncate = draw(st.integers(0, 4))
    return Config(
        policy=draw(st.sampled_from(sorted(POLICIES))),
        default_tool_cap=draw(st.sampled_from([500, 3_000, 30_000])),
        cap_head_chars=draw(st.integers(0, 600)),
        cap_tail_chars=draw(st.integers(0, 300)),
        max_result_chars=draw(st.sampled_from([1_000, 2_000, 20_000])),
        turn_budget_chars=draw(st.sampled_from([1_000, 50_000, 200_000])),
        preview_head_chars=draw(st.integers(0, 500)),
        preview_tail_chars=draw(st.integers(0, 200)),
        truncate_turns=truncate,
        summarize_turns=truncate + draw(st.integers(0, 3)),
        compact_min_chars=draw(st.sampled_from([0, 100, 3_000])),
        compact_head_chars=draw(st.integers(0, 300)),
        compact_tail_chars=draw(st.integers(0, 100)),
        recall_page_chars=draw(st.sampled_from([1_000, 4_000, 16_000])),
        recall_protect_turns=draw(st.integers(0, 5)),
    )


@st.composite
def long_sessions(draw: st.DrawFn, max_blocks: int = 8) -> tuple[str, list[Any]]:
    """``("anthropic", history)``: a valid session of one call per turn whose results are mostly
    big, so that every cut (cap, preview, turn budget, truncation, summary) has old results to
    act on; tool names include the recall tools and preserved ones."""
    names = (*TOOL_NAMES, "recall", "read_result")
    turns = draw(st.lists(st.tuples(st.sampled_from(names), result_texts()), min_size=1, max_size=max_blocks))
    return "anthropic", anthropic_turns(
        *[(f"toolu_{n:02d}", name, text) for n, (name, text) in enumerate(turns)]
    )


# ---------------------------------------------------------------------- small results (issue 32)

# around the 3,000 chars up to which results stay whole, and the 1,200 the default once used
SMALL_SIZES = (0, 50, 1_199, 1_201, 2_000, 2_999, 3_000, 3_001, 4_500, 8_000, 20_001)
_CALLS = (
    ("bash", {"command": "cat src/app.py"}),
    ("bash", {"command": "python -m pytest tests/test_app.py"}),
    ("bash", {"command": "grep -rn handler src"}),
    ("Read", {"file_path": "/repo/src/app.py"}),
    ("Read", {"file_path": "/repo/src/views.py"}),
    ("Grep", {"pattern": "render"}),
    ("Write", {"file_path": "/repo/src/new.py", "content": "x = 1\n" * 300}),
    ("fetch", {"url": "https://example.com/doc"}),
)


@st.composite
def _small_result_text(draw: st.DrawFn) -> str:
    """Source-like, log-like or repeated text of one of :data:`SMALL_SIZES`, with names and numbers
    (so that every shortened form, names index included, has something to keep and to cut)."""
    size = draw(st.sampled_from(SMALL_SIZES))
    kind = draw(st.integers(0, 2))
    n = draw(st.integers(0, 99))
    if kind == 0:
        line = f"def handler_{{0}}_{n}(request):\n    return render(request, 'page_{{0}}.html')\n\n"
    elif kind == 1:
        line = f"tests/test_app.py::test_case_{{0}} PASSED [ {n}%]\nERROR at line {{0}}: value_{n}\n"
    else:
        line = draw(_seed) + " {0}\n"
    text = "".join(line.replace("{0}", str(i)) for i in range(size // max(len(line), 1) + 2))
    return text[:size]


@st.composite
def small_result_sessions(draw: st.DrawFn, max_turns: int = 14) -> list[Any]:
    """A valid Anthropic session (every call answered in the next message), of one to three calls
    per turn, whose results are mostly around the small-result threshold and some big, some
    failing, with the same files read again: what the default's batches, lean summaries,
    superseded reads and ages all act on."""
    messages: list[Any] = [user("Please fix the failing test.")]
    for turn in range(draw(st.integers(1, max_turns))):
        calls = draw(st.lists(st.sampled_from(_CALLS), min_size=1, max_size=3))
        ids = [f"toolu_{turn:02d}_{k}" for k in range(len(calls))]
        messages.append(
            assistant(
                *(tool_use(cid, name, input=dict(args)) for cid, (name, args) in zip(ids, calls, strict=True))
            )
        )
        blocks = [
            tool_result(
                cid,
                draw(_small_result_text()),
                **({"is_error": True} if draw(st.integers(0, 7)) == 0 else {}),
            )
            for cid in ids
        ]
        messages.append(user(*blocks))
    messages.append(assistant("Done."))
    return messages


# ------------------------------------------------------------------------------ bad input (fuzzing)

# keys and values the format adapters look at, so that junk often lands where it matters
_KEYS = ("role", "content", "type", "id", "name", "input", "text", "tool_use_id", "tool_call_id",
         "tool_calls", "function", "arguments", "is_error", "parts", "functionCall", "functionResponse",
         "toolUse", "toolResult", "toolUseId", "call_id", "output", "messages", "response")  # fmt: skip
_WORDS = ("user", "assistant", "tool", "system", "model", "tool_use", "tool_result", "text",
          "function_call", "function_call_output", "message", "ai", "human", "", "\x00", "\ud800",
          "toolu_1", "call_1", "<<ccr:0123456789abcdef>>", "\r\n")  # fmt: skip

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.sampled_from(_WORDS),
    st.text(st.characters(codec="utf-8", exclude_categories=()), max_size=20),
    st.text(st.sampled_from(["a", "\x00", "\ud800", "\udfff", "\r", "\n", "é", "🙂"]), max_size=30),
)


def json_values(max_leaves: int = 30) -> st.SearchStrategy[Any]:
    """Any JSON-shaped value (lone surrogates and NUL chars included), dict keys mostly the ones
    the format adapters read."""
    keys = st.one_of(st.sampled_from(_KEYS), st.text(max_size=8))
    return st.recursive(
        _scalars,
        lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(keys, inner, max_size=6)),
        max_leaves=max_leaves,
    )


def _slots(value: Any, depth: int = 0) -> list[tuple[Any, Any]]:
    """Every ``(container, key or index)`` inside a JSON-shaped value (plain dicts and lists)."""
    out: list[tuple[Any, Any]] = []
    if depth > 12:
        return out
    if isinstance(value, dict):
        for k, v in value.items():
            out.append((value, k))
            out.extend(_slots(v, depth + 1))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.append((value, i))
            out.extend(_slots(v, depth + 1))
    return out


@st.composite
def mutated_histories(draw: st.DrawFn, max_mutations: int = 4) -> tuple[str, list[Any]]:
    """``(format name, history)``: a history of any format with a few random faults: a value
    replaced by junk of any type, a key or item deleted, an item duplicated or moved."""
    import copy

    name, history = draw(st.one_of(histories(max_blocks=4), every_format_histories(max_blocks=4)))
    history = copy.deepcopy(history)
    for _ in range(draw(st.integers(1, max_mutations))):
        slots = _slots(history)
        if not slots:
            history.append(draw(json_values(8)))
            continue
        container, key = draw(st.sampled_from(slots))
        action = draw(st.sampled_from(["replace", "replace", "delete", "duplicate", "move"]))
        if action == "replace":
            container[key] = draw(json_values(8))
        elif action == "delete":
            del container[key]
        elif isinstance(container, list):
            item = container[key] if action == "duplicate" else container.pop(key)
            container.insert(draw(st.integers(0, len(container))), copy.deepcopy(item))
    return name, history


# ------------------------------------------------------------------------------ the request budget


@st.composite
def budget_sessions(draw: st.DrawFn, max_blocks: int = 8) -> tuple[str, list[Any]]:
    """``("anthropic", history)``: a valid session whose calls send inputs of every size (file
    contents written) and whose results are mostly big, with user text between some turns, so
    that the request budget has results to summarize and stub and inputs to shorten."""
    names = (*TOOL_NAMES, "recall")
    messages: list[Any] = [user("start")]
    for n in range(draw(st.integers(1, max_blocks))):
        call_id = f"toolu_{n:02d}"
        content = draw(result_texts())
        arguments = {"path": f"src/f{n}.py", "content": draw(result_texts())} if draw(st.booleans()) else {}
        messages.append(assistant(tool_use(call_id, draw(st.sampled_from(names)), input=arguments)))
        messages.append(user(tool_result(call_id, content)))
        if draw(st.integers(0, 3)) == 0:
            messages.append(assistant({"type": "text", "text": "noted"}))
            messages.append(user(draw(st.text(_alphabet, min_size=1, max_size=80))))
    return "anthropic", messages


request_budgets = st.sampled_from([None, 300, 2_000, 6_000, 20_000])
"""Values of ``Config.max_request_tokens`` small enough to bind on generated sessions."""
