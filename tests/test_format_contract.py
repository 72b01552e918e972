"""The format contract, over every registered format and the SDK-object wrapper of each.

Every provider rule lives in the format module (``Format.rules``), so a step never asks which
provider it runs for; these tests hold every format and every policy to that:

- the rules survive wrapping for SDK objects;
- every policy's output passes ``validate`` in every format, broken input included;
- calls keep exactly the keys they came with, at every level;
- the cache-aware policy shrinks each format's history as much as it shrinks the Anthropic form
  of the same history;
- a session's output equals a fresh run's at every request, for every policy.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import toolkeep
from toolkeep.formats import FORMATS, resolve_format
from toolkeep.formats._sdk import ObjectFormat
from toolkeep.pipeline import POLICIES, run_pipeline
from toolkeep.stores import MemoryStore

from .convert_formats import corrupt, to_format

# ------------------------------------------------------------------------------- SDK objects


def _anthropic_objects(history: list[Any]) -> list[Any]:
    types = pytest.importorskip("anthropic").types
    kinds = {"text": types.TextBlock, "tool_use": types.ToolUseBlock}
    out = []
    for m in history:
        if m["role"] == "assistant" and isinstance(m["content"], list):
            content = [kinds[b["type"]].model_validate(b) if b["type"] in kinds else b for b in m["content"]]
            m = {**m, "content": content}
        out.append(m)
    return out


def _chat_objects(history: list[Any]) -> list[Any]:
    message = pytest.importorskip("openai").types.chat.ChatCompletionMessage
    return [message.model_validate(m) if m["role"] == "assistant" else m for m in history]


def _responses_objects(history: list[Any]) -> list[Any]:
    call = pytest.importorskip("openai").types.responses.ResponseFunctionToolCall
    return [call.model_validate(i) if i.get("type") == "function_call" else i for i in history]


def _gemini_objects(history: list[Any]) -> list[Any]:
    content = pytest.importorskip("google.genai.types").Content
    return [content.model_validate(m) for m in history]


OBJECTS: dict[str, Callable[[list[Any]], list[Any]]] = {
    "anthropic": _anthropic_objects,
    "openai-chat": _chat_objects,
    "openai-responses": _responses_objects,
    "gemini": _gemini_objects,
}
"""Histories of each SDK's own objects, where the SDK has them (boto3 takes dicts; LangChain
messages are objects already)."""

CASES = [(name, False) for name in FORMATS] + [(name, True) for name in OBJECTS]
IDS = [f"{name}{'-objects' if objects else ''}" for name, objects in CASES]


def history_in(name: str, objects: bool, anthropic: list[Any]) -> list[Any]:
    converted = to_format(anthropic, name)
    return OBJECTS[name](converted) if objects else converted


def plain(messages: list[Any]) -> Any:
    """JSON data of a history of dicts, SDK objects or LangChain messages."""
    if type(messages).__module__.startswith("langchain") or (
        messages and type(messages[0]).__module__.startswith("langchain")
    ):
        from langchain_core.messages import messages_to_dict

        return messages_to_dict(messages)

    def data(value: Any) -> Any:
        if hasattr(value, "model_dump"):
            return data(value.model_dump(mode="json", exclude_none=True))
        if isinstance(value, dict):
            return {k: data(v) for k, v in value.items()}
        if isinstance(value, list):
            return [data(v) for v in value]
        return value

    return data(messages)


# --------------------------------------------------------------------------------- histories


def _long_source(n: int, width: int) -> str:
    return "".join(
        f"def handler_{n}_{k}(request):\n    return render(request, 'p{k}.html')\n\n" for k in range(width)
    )


def session_history(turns: int = 40) -> list[Any]:
    """An Anthropic-shape coding session: big reads, test runs and greps, and write calls whose
    inputs carry whole files, the kinds of output the cache-aware policy shortens."""
    history: list[Any] = [{"role": "user", "content": "Port the handlers and keep the tests green."}]
    for n in range(turns):
        kind = n % 4
        call_id = f"toolu_{n:03d}"
        if kind == 0:
            call = {"name": "Read", "input": {"file_path": f"/repo/app/views_{n}.py"}}
            result = _long_source(n, 120)
        elif kind == 1:
            call = {
                "name": "Write",
                "input": {"file_path": f"/repo/app/new_{n}.py", "content": _long_source(n, 60)},
            }
            result = f"File created successfully at: /repo/app/new_{n}.py"
        elif kind == 2:
            call = {"name": "Bash", "input": {"command": "python -m pytest -q tests/"}}
            result = (
                "".join(f"tests/test_{k}.py::test_case_{k} PASSED\n" for k in range(250)) + "250 passed\n"
            )
        else:
            call = {"name": "Grep", "input": {"pattern": "render(", "path": "/repo"}}
            result = "".join(
                f"/repo/app/views_{k}.py:{k}:    return render(request, 'p.html')\n" for k in range(200)
            )
        history.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Step {n}."},
                    {"type": "tool_use", "id": call_id, **call},
                ],
            }
        )
        history.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": result}]}
        )
    history.append({"role": "assistant", "content": [{"type": "text", "text": "Done."}]})
    history.append({"role": "user", "content": "Thanks, now summarize."})
    return history


def request_ends(messages: list[Any]) -> list[int]:
    """One request per assistant turn (the history before it), and the whole history."""
    fmt = resolve_format(messages, "auto")
    loaded = fmt.load(messages)
    # neutral message i is provider message i for every format (see Format.load)
    ends = [i for i, m in enumerate(loaded) if m.role == "assistant" and i > 0]
    return [*ends, len(messages)]


# ---------------------------------------------------------------------------------- the rules


@pytest.mark.parametrize(
    ("name", "objects"), [c for c in CASES if c[1]], ids=[i for c, i in zip(CASES, IDS, strict=True) if c[1]]
)
def test_rules_survive_wrapping(name: str, objects: bool) -> None:
    """The wrapper for SDK objects carries its format's rules (it loads whole histories)."""
    messages = history_in(name, objects, session_history(3))
    fmt = resolve_format(messages, name)
    assert isinstance(fmt, ObjectFormat)
    inner = FORMATS[name].rules
    assert fmt.rules == dataclasses.replace(inner, per_message=False)
    assert fmt.rules.call_id_rule is inner.call_id_rule


def test_anthropic_objects_get_the_provider_repairs() -> None:
    """An Anthropic history of SDK objects with a blank text block and a refused call id is
    repaired as the same history of dicts is (the wrapper used to drop these two rules)."""
    broken = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "\n\n"},
                {"type": "tool_use", "id": "functions.ls:0", "name": "ls", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "functions.ls:0", "content": "a"}],
        },
    ]
    dicts, _ = run_pipeline(broken, format="anthropic")
    objs, report = run_pipeline(_anthropic_objects(broken), format="anthropic")
    assert toolkeep.validate(objs, "anthropic") == []
    assert {r.kind for r in report.repairs} >= {"renamed", "blank_text_dropped"}
    assert plain(objs) == plain(dicts)


# ------------------------------------------------------------------------ every policy, valid


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize(("name", "objects"), CASES, ids=IDS)
def test_every_policy_gives_valid_output(name: str, objects: bool, policy: str, tmp_path: Path) -> None:
    """Broken input (results dropped, ids duplicated and reused, results displaced) comes out
    valid for the provider, in every format, under every policy."""
    messages = history_in(name, objects, corrupt(session_history(24)))
    config = toolkeep.Config(policy=policy)
    with toolkeep.Session(config, workspace=tmp_path, store=MemoryStore()) as session:
        for end in request_ends(messages):
            out, _ = session.prepare(messages[:end], format=name)
            assert toolkeep.validate(out, name) == [], f"request of {end} messages"


# ----------------------------------------------------------------------- calls keep their keys


def _call_shapes(name: str, messages: list[Any]) -> dict[str, Any]:
    """Each call's key structure (the keys at every level of the call, not the values), by id."""
    data = plain(messages)
    shapes: dict[str, Any] = {}

    def keys(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: keys(v) if k not in ("input", "args", "arguments") else type(v).__name__
                for k, v in value.items()
            }
        return type(value).__name__

    for m in data:
        if name == "anthropic" and isinstance(m.get("content"), list):
            for b in m["content"]:
                if b.get("type") == "tool_use":
                    shapes[b["id"]] = keys(b)
        elif name == "openai-chat":
            for c in m.get("tool_calls") or ():
                shapes[c["id"]] = keys(c)
        elif name == "openai-responses" and m.get("type") == "function_call":
            shapes[m["call_id"]] = keys(m)
        elif name == "gemini":
            for k, p in enumerate(m.get("parts") or ()):
                call = p.get("functionCall") or p.get("function_call")
                if call is not None:
                    shapes[call.get("id") or f"{call.get('name')}#{k}"] = keys(p)
        elif name == "bedrock":
            for b in m.get("content") or ():
                if "toolUse" in b:
                    shapes[b["toolUse"]["toolUseId"]] = keys(b)
        elif name == "langchain":
            for c in (m.get("data") or {}).get("tool_calls") or ():
                shapes[c["id"]] = keys(c)
    return shapes


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize(("name", "objects"), CASES, ids=IDS)
def test_calls_keep_exactly_their_keys(name: str, objects: bool, policy: str, tmp_path: Path) -> None:
    """No policy adds a key to a call or loses one, whether or not it shortened its input."""
    messages = history_in(name, objects, session_history(24))
    config = toolkeep.Config(policy=policy)
    with toolkeep.Session(config, workspace=tmp_path, store=MemoryStore()) as session:
        out, _ = session.prepare(messages, format=name)
    before, after = _call_shapes(name, messages), _call_shapes(name, out)
    assert before and after == before


# --------------------------------------------------------------------- the same saving anywhere


def _size(messages: list[Any]) -> int:
    return len(json.dumps(plain(messages), ensure_ascii=False, separators=(",", ":"), default=str))


@pytest.mark.slow  # a long session per format: 15-25 s each
@pytest.mark.parametrize(("name", "objects"), CASES, ids=IDS)
def test_cache_aware_policy_shrinks_every_format_alike(name: str, objects: bool, tmp_path: Path) -> None:
    """The cache-aware policy saves in each format (nearly) the share it saves on the Anthropic
    form of the same session: results and old call inputs alike are shortened wherever they
    sit. Before, it wrote Anthropic's ``input`` key into every format's calls and shortened the
    inputs of Anthropic's alone (Gemini and Bedrock 1.63M -> 0.74M chars, Anthropic -> 0.26M)."""
    anthropic = session_history(40)
    config = toolkeep.Config(policy="economy")

    def saving(fmt: str, messages: list[Any], where: Path) -> float:
        with toolkeep.Session(config, workspace=where, store=MemoryStore()) as session:
            out: list[Any] = []
            for end in request_ends(messages):
                out, _ = session.prepare(messages[:end], format=fmt)
        return 1 - _size(out) / _size(messages)

    reference = saving("anthropic", anthropic, tmp_path / "a")
    mine = saving(name, history_in(name, objects, anthropic), tmp_path / "b")
    assert reference > 0.5
    assert mine >= reference - 0.05, f"{name}: saves {mine:.0%} where Anthropic saves {reference:.0%}"


# -------------------------------------------------------------------- incremental equals fresh


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize(("name", "objects"), CASES, ids=IDS)
def test_session_equals_a_fresh_run_at_every_request(
    name: str, objects: bool, policy: str, tmp_path: Path
) -> None:
    """Request by request, a session sends what a one-off run of the same request sends, and
    reports the same, in every format and under every policy."""
    messages = history_in(name, objects, corrupt(session_history(16)))
    config = toolkeep.Config(policy=policy)
    store = MemoryStore()
    with toolkeep.Session(config, workspace=tmp_path, store=store) as session:
        for end in request_ends(messages):
            out, report = session.prepare(messages[:end], format=name)
            fresh, fresh_report = run_pipeline(
                messages[:end], format=name, config=config, workspace=session.workspace, store=store
            )
            assert json.dumps(plain(out)) == json.dumps(plain(fresh)), f"request of {end} messages"
            assert report.to_dict() == fresh_report.to_dict()


# -------------------------------------------------------------------- entry previews in bounds


@pytest.mark.parametrize("limit", [20_000, 8_000])
@pytest.mark.parametrize(("name", "objects"), CASES, ids=IDS)
def test_an_entry_preview_with_its_names_index_stays_within_the_limit(
    name: str, objects: bool, limit: int, tmp_path: Path
) -> None:
    """A result over the per-result limit enters as the budget's preview plus the names index of
    what it left out, never longer together than the limit, in every format and SDK wrapper and
    through a Session, as a client sends it; the index fills the room the preview leaves."""
    grep = "".join(f"src/pkg_{n // 40}/module_{n}.py:{n * 7}: value_{n} = load({n})\n" for n in range(3_000))
    anthropic: list[Any] = [
        {"role": "user", "content": "where is load called?"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "grep", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": grep}]},
    ]
    messages = history_in(name, objects, anthropic)
    config = toolkeep.Config(max_result_chars=limit)
    with toolkeep.Session(config, workspace=tmp_path, store=MemoryStore()) as session:
        out, _ = session.prepare(messages, format=name)
    fmt = resolve_format(out, name)
    (entered,) = [r.text for m in fmt.load(out) for r in m.results]
    preview, index = entered.split("\nnames: ")
    assert "src/pkg_2/module_100.py" in index and "src/pkg_2/module_100.py" not in preview
    assert limit - 400 < len(entered) <= limit
