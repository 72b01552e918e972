"""One scripted agent session, shared by the framework integration tests.

The scripted model reads two Python modules, fetches a page over its tool's cap, reads a log over
the per-result budget, reads two more modules, then recalls the first module by the key its
one-line summary carries, and stops. With :data:`CONFIG` (SPEC's policy, whose ages make a short
session reach every tier) that session makes toolkeep do every kind of work: a result capped, one
persisted behind a preview, old ones truncated then summarized, a recall answered byte-exact. The history the agent starts from holds a call that was interrupted
(no result), which must be repaired before the first request.

Every request the fake model receives goes through :func:`check_request`: valid for its provider
and within budget.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import toolkeep
from toolkeep.formats import resolve_format
from toolkeep.shorten import CCR_MARKER_RE
from toolkeep.steps import iter_results

CONFIG = toolkeep.Config(
    policy="spec",
    max_result_chars=6_000,
    turn_budget_chars=20_000,
    default_tool_cap=10_000,
    cap_head_chars=3_000,
    cap_tail_chars=1_000,
)
"""Small limits, so that a short session reaches every tier, by SPEC's ages (the cache-aware
default waits for batches that pay, which a session this short does not make)."""

INTERRUPTED_ID = "call_interrupted"
"""Id of the call the starting history leaves without a result."""

FIRST_PROMPT = "Look at the project and report."
RESUME_PROMPT = "That tool call was interrupted; carry on without it."


def module_source(path: str) -> str:
    """A Python module of about 4,000 chars: over the compaction threshold, under every cap."""
    lines = [f"# {path}\n"]
    n = 0
    while sum(map(len, lines)) < 4_000:
        lines.append(f"def handler_{n}(event):\n    return event.get({n!r}, {path!r})\n\n")
        n += 1
    return "".join(lines)


def page(url: str) -> str:
    """A fetched page of 25,000 chars: over the default tool cap of :data:`CONFIG`."""
    return "".join(f"<p>{url} paragraph {n:05d} lorem ipsum dolor sit amet</p>\n" for n in range(450))[
        :25_000
    ]


def log_file(path: str) -> str:
    """A log of about 9,000 chars: under the ``read`` cap, over the per-result budget."""
    return "".join(
        f"2026-01-01T00:00:{n % 60:02d} INFO {path} request {n} served in {n % 97} ms\n" for n in range(160)
    )


def read(path: str) -> str:
    """The ``read`` tool of the scripted session."""
    return log_file(path) if path.endswith(".log") else module_source(path)


def fetch(url: str) -> str:
    """The ``fetch`` tool of the scripted session."""
    return page(url)


TOOLS = {"read": read, "fetch": fetch}

SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("read", {"path": "src/mod1.py"}),
    ("read", {"path": "src/mod2.py"}),
    ("fetch", {"url": "https://example.test/big"}),
    ("read", {"path": "logs/app.log"}),
    ("read", {"path": "src/mod3.py"}),
    ("read", {"path": "src/mod4.py"}),
]
"""The calls the model makes, one per turn, before it recalls the first module."""

FINAL_TEXT = "Done: four modules, one page and one log read."


@dataclass
class Step:
    """What the scripted model does next: call ``tool`` with ``arguments``, or say ``text``."""

    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    text: str | None = None


def next_step(turn: int, result_texts: Sequence[str]) -> Step:
    """The model's move at ``turn`` (0-based), given the tool results its request holds."""
    if turn < len(SCRIPT):
        name, arguments = SCRIPT[turn]
        return Step(name, dict(arguments))
    if turn == len(SCRIPT):
        return Step("recall", {"key": summary_key(result_texts)})
    return Step(text=FINAL_TEXT)


def summary_key(result_texts: Sequence[str]) -> str:
    """The archive key carried by the one-line summary of the first module's result."""
    for text in result_texts:
        if text.startswith("[Old tool result cleared") and "Python source" in text:
            match = CCR_MARKER_RE.search(text)
            assert match is not None, text
            return match[1]
    raise AssertionError(f"no summarized module in the request: {[t[:80] for t in result_texts]}")


@dataclass
class Seen:
    """What the model was shown over the session, checked at the end by :func:`check_session`."""

    requests: int = 0
    texts: list[str] = field(default_factory=list)
    last_texts: list[str] = field(default_factory=list)


def check_request(messages: Sequence[Any], format: str | toolkeep.Format, seen: Seen) -> list[str]:
    """Assert one request is valid for its provider and within budget; its result texts."""
    violations = toolkeep.validate(messages, format)
    assert violations == [], [str(v) for v in violations]
    fmt = resolve_format(messages, format)
    turns: dict[int, int] = defaultdict(int)
    texts = []
    for slot in iter_results(fmt.load(messages)):
        text = slot.result.text
        assert len(text) <= CONFIG.max_result_chars, (slot.result.call_id, len(text))
        turns[slot.block] += len(text)
        texts.append(text)
    assert all(total <= CONFIG.turn_budget_chars for total in turns.values()), dict(turns)
    seen.requests += 1
    seen.texts.extend(texts)
    seen.last_texts = texts
    return texts


def check_session(seen: Seen, repaired: str = toolkeep.MISSING_RESULT_TEXT) -> None:
    """Assert the model saw every kind of work done, and got the first module back byte-exact.

    ``repaired`` is the text the interrupted call's result carries (a framework that repairs
    histories itself, before toolkeep sees them, puts in its own)."""
    assert seen.requests == len(SCRIPT) + 2
    shown = "\n".join(seen.texts)
    assert repaired in shown  # the interrupted call, repaired
    assert "[TRUNCATED " in shown  # the page over its tool's cap
    assert "chars omitted -- full output saved to " in shown  # the log over the budget
    assert "chars omitted from old tool result" in shown  # an old module, truncated
    assert "[Old tool result cleared -- " in shown  # an older one, summarized
    assert seen.last_texts[-1] == module_source("src/mod1.py")  # recalled, byte-exact


def starting_messages(format: str) -> list[Any]:
    """The history the session starts from, as plain dicts of ``format`` (anthropic or
    openai-chat): the first prompt, a call left without its result, the user carrying on."""
    if format == "anthropic":
        call: dict[str, Any] = {"role": "assistant", "content": [
            {"type": "tool_use", "id": INTERRUPTED_ID, "name": "read", "input": {"path": "x"}}]}  # fmt: skip
    else:
        call = {"role": "assistant", "content": None, "tool_calls": [
            {"id": INTERRUPTED_ID, "type": "function", "function": {"name": "read", "arguments": "{}"}}]}  # fmt: skip
    return [{"role": "user", "content": FIRST_PROMPT}, call, {"role": "user", "content": RESUME_PROMPT}]


# --------------------------------------------------------- the scripted model's answers as JSON


def anthropic_message(turn: int, step: Step) -> dict[str, Any]:
    """An Anthropic Messages API response body for ``step``."""
    if step.tool is None:
        content: list[dict[str, Any]] = [{"type": "text", "text": step.text}]
    else:
        content = [{"type": "tool_use", "id": f"toolu_{turn}", "name": step.tool, "input": step.arguments}]
    return {
        "id": f"msg_{turn}", "type": "message", "role": "assistant", "model": "claude-x",
        "content": content, "stop_reason": "end_turn" if step.tool is None else "tool_use",
        "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1},
    }  # fmt: skip


def chat_completion(turn: int, step: Step) -> dict[str, Any]:
    """An OpenAI Chat Completions response body for ``step``."""
    message: dict[str, Any] = {"role": "assistant", "content": step.text}
    if step.tool is not None:
        message["tool_calls"] = [{
            "id": f"call_{turn}", "type": "function",
            "function": {"name": step.tool, "arguments": json.dumps(step.arguments)},
        }]  # fmt: skip
    return {
        "id": f"c{turn}", "object": "chat.completion", "created": 0, "model": "gpt-x",
        "choices": [{"index": 0, "finish_reason": "stop" if step.tool is None else "tool_calls",
                     "message": message}],
    }  # fmt: skip


def responses_response(turn: int, step: Step, tools: Any) -> dict[str, Any]:
    """An OpenAI Responses API response body for ``step``."""
    if step.tool is None:
        item: dict[str, Any] = {
            "type": "message", "id": f"msg_{turn}", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": step.text, "annotations": []}],
        }  # fmt: skip
    else:
        item = {
            "type": "function_call", "id": f"fc_{turn}", "call_id": f"call_{turn}",
            "name": step.tool, "arguments": json.dumps(step.arguments), "status": "completed",
        }  # fmt: skip
    return {
        "id": f"resp_{turn}", "object": "response", "created_at": 0, "model": "gpt-x",
        "status": "completed", "output": [item], "parallel_tool_calls": True,
        "tool_choice": "auto", "tools": tools,
    }  # fmt: skip


def gemini_response(turn: int, step: Step) -> dict[str, Any]:
    """A Gemini ``generateContent`` response body for ``step`` (REST JSON). The call carries no
    id, as the Gemini API's calls often do not."""
    if step.tool is None:
        part: dict[str, Any] = {"text": step.text}
    else:
        part = {"functionCall": {"name": step.tool, "args": step.arguments}}
    return {
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
        "modelVersion": "gemini-x", "responseId": f"r{turn}",
    }  # fmt: skip


def converse_response(turn: int, step: Step) -> dict[str, Any]:
    """A Bedrock ``Converse`` response body for ``step``."""
    if step.tool is None:
        block: dict[str, Any] = {"text": step.text}
    else:
        block = {"toolUse": {"toolUseId": f"tooluse_{turn}", "name": step.tool, "input": step.arguments}}
    return {
        "output": {"message": {"role": "assistant", "content": [block]}},
        "stopReason": "end_turn" if step.tool is None else "tool_use",
        "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2}, "metrics": {"latencyMs": 1},
    }  # fmt: skip
