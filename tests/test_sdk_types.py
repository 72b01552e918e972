"""The prepared output is accepted by the real ``anthropic`` and ``openai`` SDKs.

Two checks: pydantic validation against the SDKs' own request param types (``MessageParam``,
``ChatCompletionMessageParam``), with every lazy ``Iterable`` field iterated so that nothing goes
unchecked; and a real request through each SDK's client over ``httpx2.MockTransport``, whose body
must carry the prepared messages unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

import toolkeep

from .conftest import TRAJECTORIES, load_trajectory, shared_or_skip
from .strategies import (
    anthropic_turns,
    assistant,
    oa_assistant,
    oa_tool,
    oa_user,
    property_settings,
    sdk_anthropic_histories,
    sdk_openai_chat_histories,
    tool_use,
    user,
)

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")
httpx2 = pytest.importorskip("httpx2")
pydantic = pytest.importorskip("pydantic")

# the SDK modules come from importorskip (typed Any), so mypy cannot see these as types
ANTHROPIC_MESSAGES = pydantic.TypeAdapter(list[anthropic.types.MessageParam])  # type: ignore[name-defined]
OPENAI_MESSAGES = pydantic.TypeAdapter(list[openai.types.chat.ChatCompletionMessageParam])  # type: ignore[name-defined]


def force(value: Any) -> Any:
    """Materialize a validated value: iterate every lazy ``ValidatorIterator`` (which is what
    raises for a bad block inside an ``Iterable`` field) and dump any model to a dict."""
    if isinstance(value, pydantic.BaseModel):
        return force(value.model_dump(exclude_unset=True))
    if isinstance(value, dict):
        return {k: force(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, Iterator)):
        return [force(v) for v in value]
    return value


ANTHROPIC_REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 1},
}
OPENAI_REPLY = {
    "id": "c",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
}


def recording_client(reply: dict[str, Any]) -> tuple[Any, list[Any]]:
    """An ``httpx2.Client`` whose transport records each request body and answers ``reply``."""
    sent: list[Any] = []

    def handler(request: Any) -> Any:
        sent.append(json.loads(request.content))
        return httpx2.Response(200, json=reply)

    return httpx2.Client(transport=httpx2.MockTransport(handler)), sent


def anthropic_accepts(messages: list[Any]) -> None:
    assert force(ANTHROPIC_MESSAGES.validate_python(messages)) == messages


def openai_accepts(messages: list[Any]) -> None:
    assert force(OPENAI_MESSAGES.validate_python(messages)) == messages


def session_prepare(tmp: Path, messages: list[Any], fmt: str) -> list[Any]:
    with toolkeep.Session(toolkeep.Config(), workspace=tmp) as s:
        out, _ = s.prepare(messages, format=fmt)
    assert toolkeep.validate(out, fmt) == []
    return out


class TestForcing:
    def test_lazy_fields_are_checked(self) -> None:
        """Without forcing, a bad block inside ``content`` slips through; forcing catches it."""
        bad = [{"role": "user", "content": [{"type": "no-such-block"}]}]
        ANTHROPIC_MESSAGES.validate_python(bad)  # lazy: no error yet
        with pytest.raises(pydantic.ValidationError):
            force(ANTHROPIC_MESSAGES.validate_python(bad))

    def test_missing_required_key_rejected(self) -> None:
        """A tool_result without tool_use_id is refused by the SDK type."""
        with pytest.raises(pydantic.ValidationError):
            force(
                ANTHROPIC_MESSAGES.validate_python([{"role": "user", "content": [{"type": "tool_result"}]}])
            )


class TestAnthropic:
    @property_settings(40)
    @given(history=sdk_anthropic_histories())
    def test_prepared_broken_histories_fit_message_param(
        self, history: list[Any], tmp_path_factory: Any
    ) -> None:
        """Every prepared broken history validates as ``list[anthropic.types.MessageParam]``."""
        anthropic_accepts(session_prepare(tmp_path_factory.mktemp("ws"), history, "anthropic"))

    def test_client_sends_prepared_messages_unchanged(self, tmp_path: Path) -> None:
        """``Anthropic().messages.create`` takes the output and sends exactly it."""
        history = [
            *anthropic_turns(("t1", "read", "r" * 90_000), ("t2", "grep", "g" * 25_000)),
            assistant(tool_use("t3", "ls")),
        ]
        out = session_prepare(tmp_path, history, "anthropic")
        http, sent = recording_client(ANTHROPIC_REPLY)
        client = anthropic.Anthropic(api_key="test", base_url="https://anthropic.invalid", http_client=http)
        client.messages.create(model="m", max_tokens=8, messages=out)
        assert sent[0]["messages"] == out
        anthropic_accepts(out)

    @pytest.mark.parametrize("path", TRAJECTORIES[:6] or [None], ids=lambda p: p.stem[:40] if p else "absent")
    def test_real_trajectories_fit_message_param(self, path: Path | None, tmp_path: Path) -> None:
        """Prepared real trajectories validate as the SDK's MessageParam."""
        shared_or_skip()
        assert path is not None
        anthropic_accepts(session_prepare(tmp_path, load_trajectory(path), "anthropic"))


class TestOpenAIChat:
    @property_settings(40)
    @given(history=sdk_openai_chat_histories())
    def test_prepared_broken_histories_fit_message_param(
        self, history: list[Any], tmp_path_factory: Any
    ) -> None:
        """Every prepared broken history validates as ``list[ChatCompletionMessageParam]``."""
        openai_accepts(session_prepare(tmp_path_factory.mktemp("ws"), history, "openai-chat"))

    def test_client_sends_prepared_messages_unchanged(self, tmp_path: Path) -> None:
        """``OpenAI().chat.completions.create`` takes the output and sends exactly it."""
        history = [
            {"role": "system", "content": "sys"},
            oa_user(),
            oa_assistant(("c1", "read"), ("c2", "ls")),
            oa_tool("c1", "r" * 90_000),
            oa_user("interrupted"),
            oa_tool("zz", "orphan"),
        ]
        out = session_prepare(tmp_path, history, "openai-chat")
        http, sent = recording_client(OPENAI_REPLY)
        client = openai.OpenAI(api_key="test", base_url="https://openai.invalid/v1", http_client=http)
        client.chat.completions.create(model="m", messages=out)
        assert sent[0]["messages"] == out
        openai_accepts(out)

    def test_synthetic_result_fits_tool_message_param(self, tmp_path: Path) -> None:
        """The synthetic tool message has exactly the keys the SDK's tool message type wants."""
        out = session_prepare(tmp_path, [oa_user(), oa_assistant(("c1", "ls"))], "openai-chat")
        assert out[2] == {"role": "tool", "tool_call_id": "c1", "content": toolkeep.MISSING_RESULT_TEXT}
        openai_accepts(out)
        anthropic_accepts(session_prepare(tmp_path, [user("go"), assistant(tool_use("t"))], "anthropic"))
