"""``toolkeep prepare`` and ``toolkeep validate`` on request objects of every provider, run as a
real subprocess: the history under its key, the request written back in its shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import toolkeep

from .strategies import assistant, tool_result, tool_use, user
from .test_cli_core import one_error_line, run

RESPONSES = {
    "model": "gpt-5",
    "instructions": "You are a coding agent.",
    "input": [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "zz", "output": "orphan"},
    ],
}
GEMINI = {
    "contents": [
        {"role": "user", "parts": [{"text": "go"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "ls", "args": {}}}]},
    ],
    "systemInstruction": {"parts": [{"text": "You are a coding agent."}]},
}
ANTHROPIC = {
    "model": "claude-opus-4-8",
    "max_tokens": 1024,
    "thinking": {"type": "adaptive"},
    "messages": [user("go"), assistant(tool_use("t1")), {"role": "system", "content": "reminder"}],
}


def write(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("request_", "key", "fmt"),
    [
        (ANTHROPIC, "messages", "anthropic"),
        (RESPONSES, "input", "openai-responses"),
        (GEMINI, "contents", "gemini"),
    ],
    ids=["anthropic", "responses", "gemini"],
)
def test_prepare_writes_the_request_back(request_: Any, key: str, fmt: str, tmp_path: Path) -> None:
    """The request comes back with every other field as it was and a valid history, equal to what
    ``Session.prepare`` gives, and the report names the format the key implies."""
    source = write(tmp_path, request_)
    report = tmp_path / "report.json"
    result = run("prepare", str(source), "-o", str(tmp_path / "out.json"), "--workspace", str(tmp_path / "ws"),
                 "--report", str(report))  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = json.loads((tmp_path / "out.json").read_bytes())
    assert list(out) == list(request_)
    assert {k: v for k, v in out.items() if k != key} == {k: v for k, v in request_.items() if k != key}
    assert toolkeep.validate(out[key], fmt) == [] and out[key] != request_[key]
    assert json.loads(report.read_bytes())["format"] == fmt
    with toolkeep.Session(toolkeep.Config(), workspace=tmp_path / "ws") as session:
        assert session.prepare(request_)[0] == out


def test_validate_names_the_history_key(tmp_path: Path) -> None:
    """Violations are listed under the request's own key, exit 1."""
    result = run("validate", str(write(tmp_path, RESPONSES)))
    assert result.returncode == 1
    lines = result.stdout.decode().splitlines()
    assert [line.split("\t")[:3] for line in lines] == [
        ["input[1]", "c1", "missing_result"],
        ["input[2]", "zz", "orphan_result"],
    ]


def test_validate_a_continued_responses_request(tmp_path: Path) -> None:
    """With ``previous_response_id`` an output answering a stored call is no violation."""
    request = {
        "previous_response_id": "resp_1",
        "input": [{"type": "function_call_output", "call_id": "s", "output": "4"}],
    }
    result = run("validate", str(write(tmp_path, request)))
    assert result.returncode == 0, result.stdout
    assert result.stdout.decode() == "valid: 1 messages, no pairing violations\n"
    out = run("prepare", str(write(tmp_path, request)), "--workspace", str(tmp_path / "ws"))
    assert json.loads(out.stdout) == request


def test_plain_string_input(tmp_path: Path) -> None:
    """A string ``input`` is valid and written back as it came."""
    request = {"model": "gpt-5", "input": "Summarize the repo.", "reasoning": {"effort": "low"}}
    source = write(tmp_path, request)
    assert (
        run("validate", str(source)).stdout.decode()
        == "valid: 'input' is plain text, no pairing violations\n"
    )
    out = run("prepare", str(source), "--workspace", str(tmp_path / "ws"))
    assert out.returncode == 0 and json.loads(out.stdout) == request


@pytest.mark.parametrize(
    ("document", "words"),
    [
        ({"input": 42}, "'input' must be a list or a string, got int"),
        ({"contents": {"parts": []}}, "'contents' must be a list or a string, got dict"),
        ({"messages": [], "contents": []}, "one history, this one has 'messages' and 'contents'"),
        ({"model": "m"}, "holds its history under 'messages', 'input' or 'contents'"),
    ],
)
def test_bad_request_object_one_line(document: Any, words: str, tmp_path: Path) -> None:
    """A request object without a usable history: exit 2 with one line naming the file, no
    workspace made."""
    source = write(tmp_path, document)
    for command in (["prepare", str(source), "--workspace", str(tmp_path / "ws")], ["validate", str(source)]):
        line = one_error_line(run(*command))
        assert words in line and "expected a JSON list of messages or a request object" in line
        assert str(source) in line
    assert not (tmp_path / "ws").exists()


def test_anthropic_request_with_the_format_named(tmp_path: Path) -> None:
    """``--format anthropic`` reads the request's messages as Anthropic's."""
    request = {"system": "sys", "messages": [user("hi"), assistant(tool_use("t")), user(tool_result("t"))]}
    result = run(
        "prepare", str(write(tmp_path, request)), "--format", "anthropic", "--workspace", str(tmp_path / "w")
    )
    assert result.returncode == 0 and json.loads(result.stdout) == request
