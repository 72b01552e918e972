"""A step that changes a call's arguments: every format writes them back in its own place.

Steps never edit ``raw``: a step builds ``call.with_arguments(new)`` and the adapter writes the
arguments where the provider keeps them (Anthropic and Bedrock ``input``, Gemini
``functionCall.args``, OpenAI ``function.arguments`` / ``arguments`` as a JSON string, LangChain
``tool_calls[k]["args"]``), with exactly the keys the call came with; everything untouched comes
back as the very object it was. Checked on the golden histories, on hypothesis' broken histories
once prepared, and on SDK-object histories; then on the economy policy, whose shortened old inputs
once put Anthropic's ``input`` key into every format's calls.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolkeep
from toolkeep.formats import FORMATS, resolve_format
from toolkeep.formats.langchain import is_langchain_message
from toolkeep.messages import History, ToolCallPart
from toolkeep.policies import Economy

from .convert_formats import to_format
from .strategies import (
    every_format_histories,
    gemini_histories,
    histories,
    property_settings,
    responses_histories,
    sdk_anthropic_histories,
    sdk_openai_chat_histories,
)
from .test_formats_golden import GOLDEN, expand

# ------------------------------------------------------------------------------------ helpers


def plain(value: Any) -> Any:
    """``value`` as the JSON-shaped data its SDK sends (LangChain messages in their dict form)."""
    if is_langchain_message(value):
        from langchain_core.messages import messages_to_dict

        return messages_to_dict([value])[0]
    if hasattr(type(value), "model_dump"):
        if type(value).__module__.startswith("google.genai"):
            return value.model_dump(exclude_none=True, mode="json")
        return value.model_dump(exclude_unset=True, mode="json", by_alias=True)
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def keys(value: Any) -> Any:
    """The shape of JSON-shaped data: every key at every level, the leaves left out."""
    if isinstance(value, Mapping):
        return {k: keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [keys(v) for v in value]
    return None


_GEMINI_CALL = ("functionCall", "function_call")


def calls_in(fmt: str, message: Any) -> list[Mapping[str, Any]]:
    """The objects that hold each call's arguments in a plain message, found by the provider's
    own layout (not by toolkeep's loader)."""
    m = plain(message)
    if fmt == "anthropic":
        content = m["content"] if m["role"] == "assistant" else None
        return [b for b in content if b.get("type") == "tool_use"] if isinstance(content, list) else []
    if fmt == "bedrock":
        return [b["toolUse"] for b in m["content"] if "toolUse" in b] if m["role"] == "assistant" else []
    if fmt == "gemini":
        parts = m["parts"] if m.get("role") == "model" else []
        return [
            next(p[k] for k in _GEMINI_CALL if k in p)
            for p in parts
            if _GEMINI_CALL[0] in p or _GEMINI_CALL[1] in p
        ]
    if fmt == "openai-chat":
        return [c["function"] for c in m.get("tool_calls") or ()] if m["role"] == "assistant" else []
    if fmt == "openai-responses":
        return [m] if m.get("type") in ("function_call", "custom_tool_call") else []
    assert fmt == "langchain"
    return list(m["data"].get("tool_calls") or ()) if m["type"] in ("ai", "AIMessageChunk") else []


_PLACE = {"anthropic": "input", "bedrock": "input", "gemini": "args", "langchain": "args"}


def arguments_at(fmt: str, call: Mapping[str, Any]) -> Any:
    """A call's arguments in the provider's own place."""
    if fmt in _PLACE:
        return call.get(_PLACE[fmt])
    return call.get("input") if call.get("type") == "custom_tool_call" else call.get("arguments")


def shortened(arguments: Any) -> Any:
    """``arguments`` with its first non-empty string value cut to half, in the same shape: a JSON
    string stays a JSON string, a free-form string is cut itself; ``None`` when there is nothing
    to cut."""
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except ValueError:
            return arguments[: len(arguments) // 2] if arguments else None
        cut = shortened(value) if isinstance(value, dict) else None
        return None if cut is None else json.dumps(cut)
    if isinstance(arguments, Mapping):
        for k, v in arguments.items():
            if isinstance(v, str) and v:
                return {**arguments, k: v[: len(v) // 2]}
    return None


def all_calls(history: History) -> list[ToolCallPart]:
    return [c for m in history for c in m.calls]


def change_every_other_call(history: History) -> tuple[History, list[Any]]:
    """``history`` with every other call that has a string to cut given shortened arguments (by
    ``with_arguments``), and the arguments every call should then have, in order."""
    out: History = []
    expected: list[Any] = []
    n = 0
    for m in history:
        parts = list(m.parts)
        for j, p in enumerate(parts):
            if not isinstance(p, ToolCallPart):
                continue
            new = shortened(p.arguments) if n % 2 == 0 else None
            n += 1
            if new is not None:
                assert new != p.arguments
                parts[j] = p.with_arguments(new)
            expected.append(new if new is not None else p.arguments)
        changed = any(a is not b for a, b in zip(parts, m.parts, strict=True))
        out.append(m.with_parts(parts) if changed else m)
    return out, expected


def item_lists(fmt: str, message: Any) -> list[tuple[list[Any], list[Any]]]:
    """``(items, plain items)`` of each list in a message whose items an adapter keeps or
    rebuilds one by one."""
    if fmt == "langchain":
        data = message["data"] if isinstance(message, dict) else message
        names = ("content", "tool_calls", "tool_call_chunks")
    else:
        data, names = message, ("content", "tool_calls", "parts")
    out = []
    for name in names:
        items = data.get(name) if isinstance(data, Mapping) else getattr(data, name, None)
        if isinstance(items, list):
            out.append((items, [plain(x) for x in items]))
    return out


def check_changed_arguments(fmt: str, messages: list[Any]) -> int:
    """Change every other call's arguments in ``messages`` (a valid history) and check the dump;
    the number of calls changed."""
    adapter = resolve_format(messages, fmt)
    before = json.dumps(plain(messages))
    history = adapter.load(messages)
    changed, expected = change_every_other_call(history)
    out = adapter.dump(changed)

    assert json.dumps(plain(messages)) == before  # raw untouched
    assert len(out) == len(messages)
    assert toolkeep.validate(out, fmt) == []
    placed = [arguments_at(fmt, c) for x in out for c in calls_in(fmt, x)]
    assert placed == expected  # in the provider's place, a string where a string came in
    assert [type(a) for a in placed] == [type(c.arguments) for c in all_calls(history)]
    assert [c.arguments for c in all_calls(resolve_format(out, fmt).load(out))] == expected
    for x, m in zip(out, messages, strict=True):
        assert type(x) is type(m)  # an SDK object comes back rebuilt in its class
        px, pm = plain(x), plain(m)
        assert keys(px) == keys(pm)  # no key added, none lost, at any level
        if px == pm:
            assert x is m  # untouched: the very object
            continue
        for (items_out, plain_out), (items_in, plain_in) in zip(
            item_lists(fmt, x), item_lists(fmt, m), strict=True
        ):
            for a, b, pa, pb in zip(items_out, items_in, plain_out, plain_in, strict=True):
                assert pa != pb or a is b  # an untouched block or call inside a changed message
    return sum(1 for c in all_calls(changed) if c.modified)


def golden_valid(fmt: str) -> list[Path]:
    """The valid golden histories of ``fmt``: the valid inputs and every prepared output."""
    folder = GOLDEN / fmt
    return sorted([*folder.glob("valid*.input.json"), *folder.glob("*.prepared.json")])


GOLDEN_CASES = [(fmt, path) for fmt in FORMATS for path in golden_valid(fmt)]


def prepared(messages: list[Any], fmt: str, workspace: Path) -> list[Any]:
    with toolkeep.Session(toolkeep.Config(), workspace=workspace) as session:
        out, _ = session.prepare(messages, format=fmt)
    return out


# ----------------------------------------------------------------------------- every format


def test_every_format_writes_call_arguments_back() -> None:
    """Every registered format (and so its SDK-object wrapper, which carries its rules) says it
    writes changed arguments back; a step may rely on it."""
    assert {name: f.rules.editable_arguments for name, f in FORMATS.items()} == dict.fromkeys(FORMATS, True)
    from toolkeep.formats._sdk import wrap

    assert all(wrap(f).rules.editable_arguments for f in FORMATS.values())


@pytest.mark.parametrize(("fmt", "path"), GOLDEN_CASES, ids=lambda v: v if isinstance(v, str) else v.name)
def test_golden_histories(fmt: str, path: Path) -> None:
    messages = expand(json.loads(path.read_text(encoding="utf-8")))
    assert check_changed_arguments(fmt, messages) > 0


def test_golden_covers_both_gemini_spellings_and_custom_tool_calls() -> None:
    """The golden cases reach the spellings and kinds whose place differs."""
    text = {fmt: "".join(p.read_text(encoding="utf-8") for p in golden_valid(fmt)) for fmt in FORMATS}
    assert '"functionCall"' in text["gemini"] and '"function_call"' in text["gemini"]
    assert '"custom_tool_call"' in text["openai-responses"]


@property_settings(30)
@given(case=st.one_of(histories(max_blocks=4), every_format_histories(max_blocks=4)))
def test_prepared_broken_histories(case: tuple[str, list[Any]], tmp_path_factory: Any) -> None:
    """A broken history of any format, once prepared, takes changed arguments the same way."""
    fmt, messages = case
    check_changed_arguments(fmt, prepared(messages, fmt, tmp_path_factory.mktemp("ws")))


# ------------------------------------------------------------------------------ SDK objects


def anthropic_objects(messages: list[Any]) -> list[Any]:
    """Assistant text and tool_use blocks as the SDK's response blocks (an agent appends
    ``response.content``)."""
    from anthropic.types import TextBlock, ToolUseBlock

    def block(b: Any) -> Any:
        if b.get("type") == "text":
            return TextBlock(type="text", text=b["text"])
        if b.get("type") == "tool_use":
            return ToolUseBlock(type="tool_use", id=b["id"], name=b["name"], input=b["input"])
        return b

    return [
        {**m, "content": [block(b) for b in m["content"]]}
        if m["role"] == "assistant" and isinstance(m["content"], list)
        else m
        for m in messages
    ]


def openai_chat_objects(messages: list[Any]) -> list[Any]:
    from openai.types.chat import ChatCompletionMessage

    return [ChatCompletionMessage.model_validate(m) if m.get("role") == "assistant" else m for m in messages]


def responses_objects(items: list[Any]) -> list[Any]:
    from openai.types.responses import ResponseCustomToolCall, ResponseFunctionToolCall, ResponseReasoningItem

    classes: dict[str, Any] = {
        "function_call": ResponseFunctionToolCall,
        "custom_tool_call": ResponseCustomToolCall,
        "reasoning": ResponseReasoningItem,
    }
    return [classes[x["type"]].model_validate(x) if x.get("type") in classes else x for x in items]


def gemini_objects(contents: list[Any]) -> list[Any]:
    from google.genai import types

    return [types.Content.model_validate(c) for c in contents]


SDK_OBJECTS: dict[str, Callable[[list[Any]], list[Any]]] = {
    "anthropic": anthropic_objects,
    "openai-chat": openai_chat_objects,
    "openai-responses": responses_objects,
    "gemini": gemini_objects,
}
"""Each format with SDK types installed here, and how an agent's history holds its objects
(LangChain's messages are objects natively: the golden LangChain cases run as objects too)."""


def sdk_history(fmt: str, messages: list[Any]) -> list[Any]:
    pytest.importorskip({"gemini": "google.genai", "anthropic": "anthropic"}.get(fmt, "openai"))
    return SDK_OBJECTS[fmt](copy.deepcopy(messages))


@pytest.mark.parametrize(
    ("fmt", "path"),
    [(fmt, p) for fmt, p in GOLDEN_CASES if fmt in SDK_OBJECTS],
    ids=lambda v: v if isinstance(v, str) else v.name,
)
def test_golden_histories_as_sdk_objects(fmt: str, path: Path) -> None:
    objects = sdk_history(fmt, expand(json.loads(path.read_text(encoding="utf-8"))))
    assert resolve_format(objects, fmt) is not FORMATS[fmt]  # read through the wrapper
    assert check_changed_arguments(fmt, objects) > 0


@pytest.mark.parametrize("path", golden_valid("langchain"), ids=lambda p: p.name)
def test_golden_langchain_histories_as_objects(path: Path) -> None:
    from langchain_core.messages import messages_from_dict

    objects = messages_from_dict(expand(json.loads(path.read_text(encoding="utf-8"))))
    assert check_changed_arguments("langchain", objects) > 0


@property_settings(20)
@given(
    case=st.one_of(
        sdk_anthropic_histories(max_blocks=4).map(lambda h: ("anthropic", h)),
        sdk_openai_chat_histories(max_blocks=4).map(lambda h: ("openai-chat", h)),
        responses_histories(max_blocks=4).map(lambda h: ("openai-responses", h)),
        gemini_histories(max_blocks=4).map(lambda h: ("gemini", h)),
    )
)
def test_prepared_broken_histories_as_sdk_objects(case: tuple[str, list[Any]], tmp_path_factory: Any) -> None:
    fmt, messages = case
    out = prepared(messages, fmt, tmp_path_factory.mktemp("ws"))
    check_changed_arguments(fmt, sdk_history(fmt, out))


def test_responses_call_item_comes_back_in_its_class() -> None:
    """A Responses call item is a message of its own: changed (the last item of its run, or
    renamed), it is rebuilt as the SDK class it came in."""
    from openai.types.responses import ResponseFunctionToolCall

    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        ResponseFunctionToolCall(
            type="function_call", call_id="c1", name="write", arguments='{"content": "abcdef"}', id="fc_1"
        ),
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ]
    adapter = resolve_format(items, "openai-responses")
    history = adapter.load(items)
    run = next(i for i, m in enumerate(history) if m.calls)
    (call,) = history[run].calls
    history[run] = history[run].with_parts([call.with_arguments('{"content": "abc"}')])
    out = adapter.dump(history)
    assert isinstance(out[1], ResponseFunctionToolCall)
    assert out[1].arguments == '{"content": "abc"}' and out[1].id == "fc_1"
    assert out[0] is items[0] and out[2] is items[2]


# -------------------------------------------------------------- LangChain's copies of a call


def test_langchain_keeps_the_copies_of_a_call_consistent() -> None:
    """An ``AIMessage`` may hold its calls twice more: the provider's raw calls in
    ``additional_kwargs`` and Anthropic-style ``tool_use`` blocks in ``content``; an
    ``AIMessageChunk`` holds ``tool_call_chunks`` and rebuilds ``tool_calls`` from them when
    loaded again. A changed call's arguments reach every copy, in each one's own form."""
    from langchain_core.messages import (
        AIMessage,
        AIMessageChunk,
        HumanMessage,
        ToolMessage,
        messages_from_dict,
        messages_to_dict,
    )

    args = {"path": "a.py", "content": "x" * 30}
    raw_call = {"id": "c1", "type": "function", "function": {"name": "write", "arguments": json.dumps(args)}}
    messages = [
        HumanMessage("go"),
        AIMessage(
            content=[{"type": "tool_use", "id": "c1", "name": "write", "input": args}],
            additional_kwargs={"tool_calls": [raw_call]},
            tool_calls=[{"name": "write", "args": args, "id": "c1", "type": "tool_call"}],
        ),
        ToolMessage("ok", tool_call_id="c1"),
        AIMessageChunk(
            content="", tool_calls=[{"name": "write", "args": args, "id": "c2", "type": "tool_call"}]
        ),
        ToolMessage("ok", tool_call_id="c2"),
    ]
    assert messages[3].tool_call_chunks  # the chunk made them from its tool_calls
    for form in (messages, messages_to_dict(messages)):
        check_changed_arguments("langchain", form)
        adapter = FORMATS["langchain"]
        history = adapter.load(form)
        new = {"path": "a.py", "content": "x" * 5}
        history = [
            m.with_parts([p.with_arguments(new) if isinstance(p, ToolCallPart) else p for p in m.parts])
            if m.calls
            else m
            for m in history
        ]
        out = adapter.dump(history)
        data = [plain(m)["data"] for m in out]
        assert data[1]["tool_calls"][0]["args"] == new
        assert data[1]["content"][0]["input"] == new
        assert json.loads(data[1]["additional_kwargs"]["tool_calls"][0]["function"]["arguments"]) == new
        assert data[3]["tool_calls"][0]["args"] == new
        assert json.loads(data[3]["tool_call_chunks"][0]["args"]) == new
        # loaded again from their dict form, they are what was set (the chunk from its chunks)
        again = messages_from_dict([plain(m) for m in out])
        assert again[1].tool_calls[0]["args"] == new and again[3].tool_calls[0]["args"] == new


# ---------------------------------------------------------------------------------- pydantic-ai


def test_pydantic_ai_calls_take_changed_arguments() -> None:
    """pydantic-ai's own format writes a changed ``ToolCallPart.args`` back (a dict or a JSON
    string, as it came), the rest of the part and message as they were."""
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import messages as pa

    from toolkeep.integrations.pydantic_ai import FORMAT

    assert FORMAT.rules.editable_arguments
    response = pa.ModelResponse(
        parts=[
            pa.ToolCallPart("write", {"path": "a.py", "content": "x" * 30}, tool_call_id="c1"),
            pa.ToolCallPart("write", '{"path": "b.py", "content": "yyyy"}', tool_call_id="c2"),
            pa.ToolCallPart("ls", {"path": "."}, tool_call_id="c3"),
        ]
    )
    messages = [pa.ModelRequest(parts=[pa.UserPromptPart("go")]), response]
    history = FORMAT.load(messages)
    calls = history[1].calls
    new = [shortened(calls[0].arguments), shortened(calls[1].arguments)]
    history[1] = history[1].with_parts(
        [calls[0].with_arguments(new[0]), calls[1].with_arguments(new[1]), calls[2]]
    )
    out = FORMAT.dump(history)
    assert out[0] is messages[0]
    parts = out[1].parts
    assert [p.args for p in parts] == [*new, {"path": "."}]
    assert isinstance(parts[1].args, str)
    assert parts[2] is response.parts[2]
    for a, b in zip(parts[:2], response.parts[:2], strict=True):
        assert {f.name: getattr(a, f.name) for f in dataclasses.fields(a) if f.name != "args"} == {
            f.name: getattr(b, f.name) for f in dataclasses.fields(b) if f.name != "args"
        }
    assert [c.arguments for c in FORMAT.load(out)[1].calls] == [*new, {"path": "."}]


# ------------------------------------------------------------------------------ the economy policy

_OMITTED = "chars omitted from old tool call input"
_MARKER = re.compile(r"<<ccr:([0-9a-f]{16})>>")


def long_write_session(turns: int = 40, size: int = 5_000, id_prefix: str = "toolu_") -> list[Any]:
    """An Anthropic-shape coding session of ``turns`` turns: a write call sending a file of
    ``size`` chars on even turns, a test run with a long output on odd ones (whose shortening
    pays for rewriting the prompt: the policy shortens old inputs only when savings allow)."""
    messages: list[Any] = [{"role": "user", "content": "write the modules and test them"}]
    for n in range(turns):
        call_id = f"{id_prefix}{n:03d}"
        if n % 2 == 0:
            body = "".join(f"def f{n}_{i}(x):\n    return x + {i}\n\n" for i in range(size // 30))[:size]
            name, arguments, text = "Write", {"file_path": f"/src/m{n}.py", "content": body}, "File written"
        else:
            name, arguments = "bash", {"command": f"pytest tests/test_m{n - 1}.py"}
            text = "".join(f"tests/test_m{n - 1}.py::test_{i} PASSED\n" for i in range(300))
        use = {"type": "tool_use", "id": call_id, "name": name, "input": arguments}
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"Step {n}."}, use]})
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": text}]}
        )
    return messages


def written(source: list[Any]) -> dict[str, str]:
    """The file contents the session's write calls sent, by path."""
    return {
        b["input"]["file_path"]: b["input"]["content"]
        for m in source
        if m["role"] == "assistant"
        for b in m["content"]
        if b.get("type") == "tool_use" and b["name"] == "Write"
    }


def writes_sent(fmt: str, out: list[Any]) -> list[Any]:
    """The arguments of the write calls as ``out`` sends them, from the provider's own place
    (a JSON string where the provider holds one, checked and parsed)."""
    sent = [arguments_at(fmt, c) for x in out for c in calls_in(fmt, x)]
    assert len(sent) == 40
    if fmt in ("openai-chat", "openai-responses"):
        assert all(isinstance(a, str) for a in sent)
        return [json.loads(a) for a in sent[::2]]
    return sent[::2]


def economy_config(fmt: str) -> toolkeep.Config:
    """The economy policy; on Responses without batching: there the policy's cost model finds no
    batch that pays on this session (results included, already before call inputs were written
    back), so nothing would be shortened to check."""
    if fmt == "openai-responses":
        return toolkeep.Config(policy="economy", economy=Economy(batch=False))
    return toolkeep.Config(policy="economy")


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_economy_shortens_old_inputs_in_the_providers_place(fmt: str, tmp_path: Path) -> None:
    """The economy policy on a long session of 5k-char writes: the old calls' file contents are
    shortened in the provider's own place (a JSON string stays one), no call gets a key it did
    not have, the output is valid and stable when sent back, and what was cut is recoverable."""
    source = long_write_session()
    messages = to_format(source, fmt)
    originals = written(source)
    with toolkeep.Session(economy_config(fmt), workspace=tmp_path) as session:
        out, _ = session.prepare(messages, format=fmt)
        again, _ = session.prepare(out, format=fmt)
        assert toolkeep.validate(out, fmt) == []
        assert json.dumps(plain(again)) == json.dumps(plain(out))
        assert len(out) == len(messages)
        for x, m in zip(out, messages, strict=True):
            assert keys(plain(x)) == keys(plain(m))  # no call (nor anything else) got a new key
        writes = writes_sent(fmt, out)
        cut = [a for a in writes if _OMITTED in a["content"]]
        assert len(cut) >= 10  # the old ones
        assert writes[-1]["content"] == originals[writes[-1]["file_path"]]  # the newest is whole
        for a in cut:
            key = _MARKER.search(a["content"])
            assert key is not None and session.recall(key.group(1)) == originals[a["file_path"]]
        loaded = [c.arguments for c in all_calls(resolve_format(out, fmt).load(out))]
        assert [json.loads(a) if isinstance(a, str) else a for a in loaded[::2]] == writes


@pytest.mark.parametrize(
    ("fmt", "id_prefix"),
    [("anthropic", "write/"), ("bedrock", "write/"), ("openai-chat", "call_" + "0" * 40)],
)
def test_economy_shortens_inputs_of_renamed_calls(fmt: str, id_prefix: str, tmp_path: Path) -> None:
    """Ids the provider refuses are renamed by pairing and the same calls' old inputs shortened
    by the economy policy, in one run: each call goes out with both, its result with the new id."""
    messages = to_format(long_write_session(id_prefix=id_prefix), fmt)
    with toolkeep.Session(economy_config(fmt), workspace=tmp_path) as session:
        out, report = session.prepare(messages, format=fmt)
    assert toolkeep.validate(out, fmt) == []
    assert len([r for r in report.repairs if r.kind == "renamed"]) == 40
    history = FORMATS[fmt].load(out)
    calls = all_calls(history)
    rule = FORMATS[fmt].rules.call_id_rule
    assert rule is not None and all(rule.accepts(c.id) for c in calls)
    assert [r.call_id for m in history for r in m.results] == [c.id for c in calls]
    assert sum(_OMITTED in a["content"] for a in writes_sent(fmt, out)) >= 10
    for x, m in zip(out, messages, strict=True):
        assert keys(plain(x)) == keys(plain(m))
