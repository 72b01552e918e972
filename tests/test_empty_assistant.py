"""Empty assistant messages (``content: []`` or ``null``, left by an interrupted stream) go, in
every format, and ``prepare`` stays idempotent; what an assistant message holds instead of
content (a refusal, an audio answer, calls cut short) keeps it."""

from __future__ import annotations

import json
from typing import Any

import pytest

import toolkeep
from toolkeep.formats import get_format
from toolkeep.messages import OpaquePart, TextPart
from toolkeep.steps.pairing import survives_pruning

from .strategies import oa_assistant, oa_tool, oa_user


def twice(messages: list[Any], fmt: str) -> tuple[list[Any], toolkeep.Report, list[Any]]:
    """``prepare`` once and on its own output, each in a new session."""
    with toolkeep.Session() as session:
        once, report = session.prepare(messages, format=fmt)
    with toolkeep.Session() as session:
        again, _ = session.prepare(once, format=fmt)
    return once, report, again


# one history per format: a user turn, an empty assistant message, a user turn, a call and its
# result, two empty assistant messages in a row, a user turn, and an empty one last
EMPTY: dict[str, list[Any]] = {
    "anthropic": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": []},
        {"role": "user", "content": "still there?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}]},
        {"role": "assistant", "content": []},
        {"role": "assistant", "content": []},
        {"role": "user", "content": "and now?"},
        {"role": "assistant", "content": []},
    ],
    "openai-chat": [
        oa_user("go"),
        oa_assistant(),
        oa_user("still there?"),
        oa_assistant(("t1", "ls")),
        oa_tool("t1", "a.py"),
        {"role": "assistant", "content": []},
        {"role": "assistant", "content": ""},
        oa_user("and now?"),
        oa_assistant(),
    ],
    "gemini": [
        {"role": "user", "parts": [{"text": "go"}]},
        {"role": "model", "parts": []},
        {"role": "user", "parts": [{"text": "still there?"}]},
        {"role": "model", "parts": [{"functionCall": {"id": "t1", "name": "ls", "args": {}}}]},
        {
            "role": "user",
            "parts": [{"functionResponse": {"id": "t1", "name": "ls", "response": {"output": "a.py"}}}],
        },
        {"role": "model", "parts": []},
        {"role": "model", "parts": []},
        {"role": "user", "parts": [{"text": "and now?"}]},
        {"role": "model", "parts": []},
    ],
    "bedrock": [
        {"role": "user", "content": [{"text": "go"}]},
        {"role": "assistant", "content": []},
        {"role": "user", "content": [{"text": "still there?"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "ls", "input": {}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "a.py"}]}}]},
        {"role": "assistant", "content": []},
        {"role": "assistant", "content": []},
        {"role": "user", "content": [{"text": "and now?"}]},
        {"role": "assistant", "content": []},
    ],
    "openai-responses": [
        {"type": "message", "role": "user", "content": "go"},
        {"type": "message", "role": "assistant", "content": []},
        {"type": "message", "role": "user", "content": "still there?"},
        {"type": "function_call", "call_id": "t1", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "t1", "output": "a.py"},
        {"type": "message", "role": "assistant", "content": []},
        {"type": "message", "role": "user", "content": "and now?"},
        {"type": "message", "role": "assistant", "content": None},
    ],
}
# (Responses reads adjacent model items as one turn, so its history has three empty turns, not
# two in a row: four empty items in one run would be one empty assistant message)


def langchain_history() -> list[Any]:
    pytest.importorskip("langchain_core")
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    return [
        HumanMessage("go"),
        AIMessage(""),
        HumanMessage("still there?"),
        AIMessage("", tool_calls=[{"id": "t1", "name": "ls", "args": {}, "type": "tool_call"}]),
        ToolMessage("a.py", tool_call_id="t1"),
        AIMessage([]),
        AIMessage(""),
        HumanMessage("and now?"),
        AIMessage(""),
    ]


def user_words(fmt: str, messages: list[Any]) -> list[str]:
    """Every text the user wrote, in order, as the format loads it."""
    return [
        p.text if isinstance(p, TextPart) else p.raw["content"]
        for m in get_format(fmt).load(messages)
        if m.role == "user"
        for p in m.parts
        if isinstance(p, TextPart) or (isinstance(p, OpaquePart) and isinstance(p.raw.get("content"), str))
    ]


CASES = [*sorted(EMPTY), "langchain"]


def history_for(fmt: str) -> list[Any]:
    return langchain_history() if fmt == "langchain" else EMPTY[fmt]


@pytest.mark.parametrize("fmt", CASES)
def test_empty_assistant_messages_go_in_every_format(fmt: str) -> None:
    """No assistant message without content is left, the output is valid and the same when
    prepared again, the call keeps its result, and every word the user wrote is still there,
    as user text, in order."""
    messages = history_for(fmt)
    once, report, again = twice(messages, fmt)
    adapter = get_format(fmt)
    assert [m for m in adapter.load(once) if m.role == "assistant" and not m.parts] == []
    assert toolkeep.validate(once, fmt) == []
    assert _plain(again) == _plain(once)
    loaded = adapter.load(once)
    assert [c.id for m in loaded for c in m.calls] == ["t1"]
    assert [(r.call_id, r.text) for m in loaded for r in m.results] == [("t1", "a.py")]
    assert user_words(fmt, once) == user_words(fmt, messages) == ["go", "still there?", "and now?"]
    assert report.repair_counts()["empty_assistant_dropped"] == (3 if fmt == "openai-responses" else 4)


def _plain(messages: list[Any]) -> str:
    return json.dumps([m.model_dump() if hasattr(m, "model_dump") else m for m in messages], sort_keys=True)


@pytest.mark.parametrize("fmt", CASES)
def test_the_validator_names_an_empty_assistant_message(fmt: str) -> None:
    """Every validator reports the empty message (mid-history) that the provider refuses."""
    messages = history_for(fmt)
    assert (1, "empty_content") in {(v.index, v.rule) for v in toolkeep.validate(messages, fmt)}


def test_gemini_joins_the_user_turns_an_empty_model_turn_stood_between() -> None:
    """Gemini wants user and model turns to alternate: the two user turns around a dropped empty
    model turn are sent as one, parts in order; turns that came side by side stay as they are."""
    messages = EMPTY["gemini"][:3]
    out, _, again = twice(messages, "gemini")
    assert out == [{"role": "user", "parts": [{"text": "go"}, {"text": "still there?"}]}]
    assert again == out
    side_by_side = [messages[0], messages[2]]
    out, _, _ = twice(side_by_side, "gemini")
    assert out == side_by_side and all(a is b for a, b in zip(out, side_by_side, strict=True))


def test_gemini_joins_a_function_response_turn_and_the_user_text_after_it() -> None:
    """After a call's response, an empty model turn and the user's next words: the words join
    the response turn, after the response, and the call is still answered."""
    messages = EMPTY["gemini"][3:8]
    out, _, again = twice([EMPTY["gemini"][0], *messages], "gemini")
    assert out[-1] == {
        "role": "user",
        "parts": [*messages[1]["parts"], {"text": "and now?"}],
    }
    assert again == out and toolkeep.validate(out, "gemini") == []


@pytest.mark.parametrize(
    "extra",
    [
        {"refusal": "I can't help with that."},
        {"audio": {"id": "audio_abc"}},
        {"function_call": {"name": "ls", "arguments": "{}"}},
    ],
    ids=["refusal", "audio", "function_call"],
)
def test_openai_chat_assistant_message_with_other_output_is_kept(extra: dict[str, Any]) -> None:
    """A refusal, an audio answer or a legacy function call stands for content: not empty."""
    message = {"role": "assistant", "content": None, **extra}
    history = [oa_user("go"), message, oa_user("ok")]
    out, report, _ = twice(history, "openai-chat")
    assert out == history and out[1] is message
    assert report.repairs == []
    assert toolkeep.validate(history, "openai-chat") == []


def test_langchain_message_with_invalid_tool_calls_is_kept() -> None:
    """An AIMessage whose only calls came cut short (``invalid_tool_calls``) is not empty."""
    pytest.importorskip("langchain_core")
    from langchain_core.messages import AIMessage, HumanMessage

    cut = AIMessage(
        "",
        invalid_tool_calls=[
            {"id": "c", "name": "ls", "args": '{"pa', "error": "bad json", "type": "invalid_tool_call"}
        ],
    )
    history = [HumanMessage("go"), cut, HumanMessage("ok")]
    out, report, _ = twice(history, "langchain")
    assert out[1] is cut and report.repairs == []


def test_one_rule_decides_what_goes_and_what_the_engine_counts() -> None:
    """Pairing's rule is the message's alone: what the step declares to the engine (its
    ``Reuse.keeps_turn``) is the rule pairing itself decides by."""
    fmt = get_format("anthropic")
    empty = fmt.load_message(0, {"role": "assistant", "content": []})
    said = fmt.load_message(0, {"role": "assistant", "content": [{"type": "text", "text": "hi"}]})
    keeps_turn = toolkeep.steps.reuse_of(toolkeep.repair_pairing).keeps_turn
    assert keeps_turn is not None
    assert [keeps_turn(empty, fmt), keeps_turn(said, fmt)] == [False, True]
    assert survives_pruning(empty, fmt) is False and survives_pruning(said, fmt) is True
