"""The prepared Bedrock history is accepted by the real AWS SDK (botocore) for ``Converse``.

Bedrock takes plain dicts, so there are no SDK types to build; botocore's own service model of
``bedrock-runtime`` is the reference instead. Three checks, none of them over the network:

- botocore's parameter validation (what ``client.converse`` runs first: required members, types,
  one member per union, minimum lengths);
- the model's other constraints, which botocore leaves to the server: string patterns, maximum
  lengths and enums (a ``toolUseId`` is at most 64 chars of ``[a-zA-Z0-9_.:-]``);
- a real ``client.converse`` call whose HTTP request is caught before it is sent: its body must
  carry the prepared messages unchanged.

Inputs: the real trajectories converted to Converse shape, as they are and broken (results
dropped, ids duplicated and reused, results displaced), and generated histories.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolkeep

from .conftest import TRAJECTORIES, load_trajectory, shared_or_skip
from .convert_formats import corrupt, to_bedrock
from .strategies import bedrock_histories, bedrock_text_beside_results, property_settings

botocore_session = pytest.importorskip("botocore.session", reason="botocore is in the test extras")
from botocore.awsrequest import AWSResponse  # noqa: E402
from botocore.model import Shape  # noqa: E402
from botocore.validate import ParamValidator  # noqa: E402

_CLIENT: Any = None


def client() -> Any:
    """One ``bedrock-runtime`` client (made once: loading the service model takes a while)."""
    global _CLIENT
    if _CLIENT is None:
        _CLIENT = botocore_session.get_session().create_client(
            "bedrock-runtime",
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
    return _CLIENT


def converse_shape() -> Shape:
    return client().meta.service_model.operation_model("Converse").input_shape


def request(messages: list[Any]) -> dict[str, Any]:
    """A Converse request around ``messages``, with a tool spec for each tool they call."""
    names = sorted({b["toolUse"]["name"] for m in messages for b in m["content"] if "toolUse" in b})
    params: dict[str, Any] = {"modelId": "anthropic.claude-sonnet-4", "messages": messages}
    if names:
        params["toolConfig"] = {
            "tools": [{"toolSpec": {"name": n, "inputSchema": {"json": {"type": "object"}}}} for n in names]
        }
    return params


def server_side_violations(value: Any, shape: Shape, where: str = "") -> list[str]:
    """What the service model forbids and botocore's client-side validation does not check."""
    out: list[str] = []
    meta = shape.metadata
    if shape.type_name == "string" and isinstance(value, str):
        if "pattern" in meta and not re.fullmatch(meta["pattern"], value):
            out.append(f"{where}: {value[:40]!r} does not match {meta['pattern']}")
        if "max" in meta and len(value) > meta["max"]:
            out.append(f"{where}: longer than {meta['max']}")
        if shape.enum and value not in shape.enum:
            out.append(f"{where}: {value!r} not one of {shape.enum}")
    elif shape.type_name == "list" and isinstance(value, list):
        if "max" in meta and len(value) > meta["max"]:
            out.append(f"{where}: more than {meta['max']} items")
        for i, item in enumerate(value):
            out.extend(server_side_violations(item, shape.member, f"{where}[{i}]"))  # type: ignore[attr-defined]
    elif shape.type_name == "structure" and isinstance(value, dict) and not meta.get("document"):
        members = shape.members  # type: ignore[attr-defined]
        for key, item in value.items():
            if key in members:
                out.extend(server_side_violations(item, members[key], f"{where}.{key}"))
    return out


def assert_converse_accepts(messages: list[Any]) -> None:
    params = request(messages)
    report = ParamValidator().validate(params, converse_shape())
    assert not report.has_errors(), report.generate_report()
    assert server_side_violations(params, converse_shape()) == []
    assert sent_messages(params) == json.loads(json.dumps(messages))


def sent_messages(params: dict[str, Any]) -> Any:
    """The ``messages`` of the body ``client.converse(**params)`` sends (caught before sending)."""
    seen: list[Any] = []

    def catch(request: Any, **_: Any) -> AWSResponse:
        seen.append(json.loads(request.body))
        body = {
            "output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
            "stopReason": "end_turn",
            "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
            "metrics": {"latencyMs": 1},
        }
        return AWSResponse(request.url, 200, {}, _Raw(json.dumps(body).encode()))

    bedrock = client()
    bedrock.meta.events.register_first("before-send.bedrock-runtime.Converse", catch)
    try:
        answer = bedrock.converse(**params)
    finally:
        bedrock.meta.events.unregister("before-send.bedrock-runtime.Converse", catch)
    assert answer["output"]["message"]["content"] == [{"text": "ok"}]
    (body,) = seen
    return body["messages"]


class _Raw:
    """The raw stream botocore reads a response body from."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Any:
        yield self.data


@pytest.mark.parametrize("broken", [False, True], ids=["as-is", "broken"])
def test_real_trajectories_prepared_for_bedrock_pass_the_sdk(broken: bool, tmp_path: Path) -> None:
    shared_or_skip()
    for path in TRAJECTORIES:
        history = load_trajectory(path)
        messages = to_bedrock(corrupt(history) if broken else history)
        with toolkeep.Session(workspace=tmp_path / path.stem) as session:
            out, _ = session.prepare(messages, "bedrock")
        assert toolkeep.validate(out, "bedrock") == [], path.name
        assert_converse_accepts(out)


@property_settings(60)
@given(st.one_of(bedrock_histories(), bedrock_text_beside_results()))
def test_generated_histories_prepared_for_bedrock_pass_the_sdk(messages: list[Any]) -> None:
    out, _ = toolkeep.run_pipeline(messages, format="bedrock")
    assert_converse_accepts(out)


def test_the_checks_catch_what_bedrock_refuses() -> None:
    """A result without its id, and a call id Bedrock's pattern refuses, are caught."""
    missing_id = [{"role": "user", "content": [{"toolResult": {"content": [{"text": "x"}]}}]}]
    report = ParamValidator().validate(request(missing_id), converse_shape())
    assert report.has_errors() and "toolUseId" in report.generate_report()
    bad_id = [
        {"role": "user", "content": [{"text": "go"}]},
        {
            "role": "assistant",
            "content": [{"toolUse": {"toolUseId": "call 1/2", "name": "ls", "input": {}}}],
        },
    ]
    assert any("toolUseId" in v for v in server_side_violations(request(bad_id), converse_shape()))
