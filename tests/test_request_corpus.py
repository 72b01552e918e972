"""The request corpus (``tests/corpus/requests``): real request shapes of every provider, through
``Session.prepare``, through the CLI as a subprocess, and against the SDKs' own request types.

Each case must come out valid, idempotent, with every top-level field and every block toolkeep
does not manage unchanged, and with exactly the repairs ``tests/corpus/README.md`` lists.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import toolkeep
from toolkeep import Session
from toolkeep.formats import get_format
from toolkeep.messages import OpaquePart, TextPart, ToolCallPart
from toolkeep.requests import read_request, validate_request

REQUESTS = Path(__file__).with_name("corpus") / "requests"

# file -> (format, the repairs (kind, index) the report lists, in order)
CASES: dict[str, tuple[str, list[tuple[str, int]]]] = {
    "anthropic-claude-code.json": ("anthropic", []),
    "anthropic-claude-code-interrupted.json": ("anthropic", [("relocated", 3), ("synthetic", 4)]),
    "anthropic-server-tools.json": ("anthropic", []),
    "openai-chat.json": ("openai-chat", [("synthetic", 2)]),
    "openai-responses.json": ("openai-responses", []),
    "openai-responses-string.json": ("openai-responses", []),
    "gemini.json": ("gemini", [("synthetic", 3)]),
}
NAMES = sorted(CASES)


def load(name: str) -> dict[str, Any]:
    request: dict[str, Any] = json.loads((REQUESTS / name).read_bytes())
    return request


def carried(fmt: str, request: dict[str, Any]) -> list[str]:
    """What toolkeep must send as it came, in order, as JSON: every block or item that is neither
    a call nor a result (text as its block, or as the string it was), and every call's own
    block where it carries more than the call (a Gemini ``thoughtSignature``)."""
    history = read_request(request).history
    if history is None:
        return [json.dumps(request)]
    out = []
    for m in get_format(fmt).load(history):
        for p in m.parts:
            if isinstance(p, OpaquePart):
                out.append(json.dumps(p.raw))
            elif isinstance(p, TextPart):
                out.append(json.dumps(p.raw if p.raw is not None else p.text))
            elif isinstance(p, ToolCallPart) and isinstance(p.raw, dict) and "thoughtSignature" in p.raw:
                out.append(json.dumps(p.raw))
    return out


def others(request: dict[str, Any]) -> list[tuple[str, str]]:
    """The request's fields other than its history, in order, as JSON."""
    key = read_request(request).key
    return [(k, json.dumps(v)) for k, v in request.items() if k != key]


@pytest.fixture(scope="module")
def prepared(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[dict[str, Any], toolkeep.Report, Path]]:
    """Each case prepared once by a session of its own, with the workspace it used."""
    out = {}
    for name in NAMES:
        ws = tmp_path_factory.mktemp("ws")
        with Session(toolkeep.Config(), workspace=ws) as session:
            request, report = session.prepare(load(name))
        out[name] = (request, report, ws)
    return out


def test_corpus_is_listed() -> None:
    """Every file of the corpus is a case here, and every case a file."""
    assert sorted(p.name for p in REQUESTS.iterdir()) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_session_prepare(name: str, prepared: Any) -> None:
    """Valid, the listed repairs only, every other field and every unmanaged block unchanged; a
    case with nothing to repair comes back byte for byte."""
    fmt, repairs = CASES[name]
    request = load(name)
    out, report, _ = prepared[name]
    assert report.format == fmt
    assert [(r.kind, r.index) for r in report.repairs] == repairs
    assert validate_request(out) == []
    assert others(out) == others(request)
    assert carried(fmt, out) == carried(fmt, request)
    if not repairs:
        assert json.dumps(out) == json.dumps(request)


@pytest.mark.parametrize("name", NAMES)
def test_idempotent(name: str, prepared: Any) -> None:
    """``prepare(prepare(x)) == prepare(x)``, in the session that made it and in a new one."""
    out, _, ws = prepared[name]
    again = copy.deepcopy(out)
    with Session(toolkeep.Config(), workspace=ws) as session:
        assert session.prepare(again)[0] == out
        assert session.prepare(again)[0] == out
    assert again == out


@pytest.mark.parametrize("name", NAMES)
def test_cli_subprocess(name: str, prepared: Any, tmp_path: Path) -> None:
    """``python -m toolkeep prepare FILE -o OUT`` writes what the session gives; ``validate``
    finds OUT valid; a second ``prepare`` of OUT writes OUT again."""
    out, _, ws = prepared[name]
    target, again = tmp_path / "out.json", tmp_path / "again.json"
    cli = [sys.executable, "-m", "toolkeep"]
    for source, dest in ((REQUESTS / name, target), (target, again)):
        result = subprocess.run(
            [*cli, "prepare", str(source), "-o", str(dest), "--workspace", str(ws)],
            capture_output=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        assert json.loads(dest.read_bytes()) == out
    checked = subprocess.run([*cli, "validate", str(target)], capture_output=True, timeout=120)
    assert checked.returncode == 0, checked.stdout
    assert checked.stdout.decode().startswith("valid: ")


# ------------------------------------------------------------------------------ the SDKs' types


def force(value: Any) -> Any:
    """``tests/test_sdk_types.py``'s: a validated value with every lazy field iterated (imported
    here, where the SDKs it needs are there, so the rest of this module runs without them)."""
    from .test_sdk_types import force as materialized

    return materialized(value)


def sdk_request_type(name: str, request: dict[str, Any]) -> Any:
    """The SDK's TypedDict for the request body of case ``name``."""
    if name.startswith("anthropic"):
        beta = pytest.importorskip("anthropic").types.beta.message_create_params
        return (
            beta.MessageCreateParamsStreaming
            if request.get("stream")
            else beta.MessageCreateParamsNonStreaming
        )
    openai = pytest.importorskip("openai")
    if name.startswith("openai-chat"):
        return openai.types.chat.completion_create_params.CompletionCreateParamsNonStreaming
    return openai.types.responses.response_create_params.ResponseCreateParamsNonStreaming


@pytest.mark.parametrize("name", [n for n in NAMES if not n.startswith("gemini")])
def test_sdk_request_types(name: str, prepared: Any) -> None:
    """The prepared request validates as the SDK's own request type (Anthropic's beta
    ``MessageCreateParams``, OpenAI's ``CompletionCreateParams`` and ``ResponseCreateParams``),
    every lazy field iterated, and nothing in it is dropped by the validation."""
    pydantic = pytest.importorskip("pydantic")
    out, _, _ = prepared[name]
    adapter = pydantic.TypeAdapter(sdk_request_type(name, out))
    assert force(adapter.validate_python(out)) == out


def test_sdk_types_refuse_a_broken_request() -> None:
    """The check above can fail: a thinking block without its signature is refused."""
    pydantic = pytest.importorskip("pydantic")
    request = load("anthropic-claude-code.json")
    del request["messages"][2]["content"][0]["signature"]
    adapter = pydantic.TypeAdapter(sdk_request_type("anthropic-claude-code.json", request))
    with pytest.raises(pydantic.ValidationError):
        force(adapter.validate_python(request))


def test_sdk_gemini_types(prepared: Any) -> None:
    """google-genai reads the prepared Gemini request field by field (``Content`` for every turn
    and the system instruction, ``Tool``, ``ToolConfig``, ``GenerationConfig``: all refuse
    unknown keys) and gives the turns and configs back as they were sent."""
    types = pytest.importorskip("google.genai.types")
    out, _, _ = prepared["gemini.json"]

    def read(cls: Any, value: Any) -> Any:
        return cls.model_validate_json(json.dumps(value)).model_dump(
            mode="json", by_alias=True, exclude_none=True
        )

    assert [read(types.Content, c) for c in out["contents"]] == out["contents"]
    assert read(types.Content, out["systemInstruction"]) == out["systemInstruction"]
    assert read(types.ToolConfig, out["toolConfig"]) == out["toolConfig"]
    assert read(types.GenerationConfig, out["generationConfig"]) == out["generationConfig"]
    assert [len(read(types.Tool, t)["functionDeclarations"]) for t in out["tools"]] == [2]
