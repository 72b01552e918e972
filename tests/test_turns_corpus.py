"""The turn-boundary corpus (``tests/corpus/turns``, listed in its README): every history is
prepared through ``Session.prepare`` and through the CLI as a real subprocess, and comes out valid,
the same when prepared again, with the user's words still the user's, in order, and no assistant
message left empty; each file's own outcome is checked too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import toolkeep
from toolkeep.formats._base import CONTINUE_TEXT
from toolkeep.formats.bedrock import FILLER_MESSAGE
from toolkeep.messages import TextPart
from toolkeep.shorten import CCR_MARKER_RE, archive_key

TURNS = Path(__file__).parent / "corpus" / "turns"
ENV = {**{k: v for k, v in os.environ.items() if not k.startswith(("TOOLKEEP_", "CHATCLI_"))}}
ENV["TOOLKEEP_TOOL_RESULT_MAX_CHARS"] = "1000"
CONFIG = toolkeep.Config.from_env(ENV)


def load(name: str) -> Any:
    return json.loads((TURNS / name).read_text(encoding="utf-8"))


def user_words(fmt: str, messages: list[Any]) -> list[str]:
    """Every text in a user message, in order, as the format loads it (the ``(continue)`` a
    format puts between two assistant turns is no one's words)."""
    return [
        p.text
        for m in toolkeep.get_format(fmt).load(messages)
        if m.role == "user"
        for p in m.parts
        if isinstance(p, TextPart) and p.text != CONTINUE_TEXT
    ]


def results(fmt: str, messages: list[Any]) -> dict[str, str]:
    return {p.call_id: p.text for m in toolkeep.get_format(fmt).load(messages) for p in m.results}


def cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "toolkeep", *args], capture_output=True, timeout=120, env=ENV
    )


def cli_prepare(source: Path, fmt: str, target: Path, workspace: Path) -> bytes:
    done = cli("prepare", str(source), "--format", fmt, "-o", str(target), "--workspace", str(workspace))
    assert done.returncode == 0, done.stderr.decode()
    return target.read_bytes()


# ----------------------------------------------------------------- what each file must give


def _empties_gone(count: int) -> Callable[[list[Any], list[Any], toolkeep.Report], None]:
    def check(messages: list[Any], out: list[Any], report: toolkeep.Report) -> None:
        assert report.repair_counts()["empty_assistant_dropped"] == count

    return check


def _gemini_joined(messages: list[Any], out: list[Any], report: toolkeep.Report) -> None:
    assert out == [
        messages[0],
        messages[1],
        {"role": "user", "parts": [*messages[2]["parts"], *messages[4]["parts"], *messages[6]["parts"]]},
    ]


def _bedrock_question_after_filler(messages: list[Any], out: list[Any], report: toolkeep.Report) -> None:
    assert out == [*messages[:3], FILLER_MESSAGE, messages[4]]


def _bedrock_words_after_results(messages: list[Any], out: list[Any], report: toolkeep.Report) -> None:
    results = [b for b in messages[3]["content"] if "toolResult" in b]
    assert out[2] == {"role": "user", "content": results}
    assert out[3] == FILLER_MESSAGE
    assert out[4] == {"role": "user", "content": [{"text": "Hurry, please."}, {"text": "Also compare them."}]}
    assert out[5:] == messages[4:]


def _unchanged(messages: list[Any], out: list[Any], report: toolkeep.Report) -> None:
    assert out == messages and report.repairs == [] and not report.changed


def _multipart(fmt: str) -> Callable[[list[Any], list[Any], toolkeep.Report], None]:
    def check(messages: list[Any], out: list[Any], report: toolkeep.Report) -> None:
        (original,) = results(fmt, messages).values()
        assert original.count("part one, line 0") == original.count("part two, line 0") == 1
        (sent,) = results(fmt, out).values()
        assert CCR_MARKER_RE.findall(sent) == [archive_key(original)]
        assert _kept(fmt, out) == _kept(fmt, messages)

    return check


def _kept(fmt: str, messages: list[Any]) -> Any:
    """The last message's blocks that are no text (images, JSON), as the provider holds them."""
    if fmt == "bedrock":
        return [b for b in messages[-1]["content"][0]["toolResult"]["content"] if "text" not in b]
    if fmt == "gemini":
        return messages[-1]["parts"][0]["functionResponse"]["parts"]
    if fmt == "langchain":
        return [b for b in messages[-1]["data"]["content"] if isinstance(b, dict) and b["type"] != "text"]
    return [p for p in messages[-1]["content"] if p["type"] != "text"]


CASES: dict[str, tuple[str, Callable[[list[Any], list[Any], toolkeep.Report], None]]] = {
    "anthropic-empty-assistants.json": ("anthropic", _empties_gone(4)),
    "openai-chat-two-empty-assistants.json": ("openai-chat", _empties_gone(2)),
    "gemini-empty-model-turns.json": ("gemini", _gemini_joined),
    "bedrock-empty-assistant.json": ("bedrock", _bedrock_question_after_filler),
    "langchain-empty-ai-messages.json": ("langchain", _empties_gone(2)),
    "bedrock-text-beside-results.json": ("bedrock", _bedrock_words_after_results),
    "bedrock-prepared-with-filler.json": ("bedrock", _unchanged),
    "bedrock-multipart-result.json": ("bedrock", _multipart("bedrock")),
    "gemini-multipart-result.json": ("gemini", _multipart("gemini")),
    "langchain-multipart-result.json": ("langchain", _multipart("langchain")),
    "openai-chat-content-parts.json": ("openai-chat", _multipart("openai-chat")),
    "big-exponent.json": ("anthropic", _unchanged),
    "anthropic-system-after-interrupt.json": ("anthropic", _empties_gone(1)),
    "openai-responses-empty-messages.json": ("openai-responses", _empties_gone(3)),
}
REFUSED = {"nan-literal.json": "NaN is not a JSON number"}


def test_every_file_is_listed() -> None:
    files = {p.name for p in TURNS.iterdir() if p.suffix == ".json"}
    assert files == set(CASES) | set(REFUSED)
    listed = (TURNS / "README.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in listed for name in files)


@pytest.mark.parametrize("name", sorted(CASES))
def test_session_prepares_it_valid_idempotent_and_keeps_the_users_words(name: str, tmp_path: Path) -> None:
    fmt, check = CASES[name]
    messages = load(name)
    with toolkeep.Session(CONFIG, workspace=tmp_path / "ws") as session:
        out, report = session.prepare(messages, format=fmt)
        again, again_report = session.prepare(out, format=fmt)
        for call_id, text in results(fmt, out).items():
            for key in CCR_MARKER_RE.findall(text):
                assert session.recall(key) == results(fmt, messages)[call_id]
    assert toolkeep.validate(out, fmt) == []
    assert again == out and again_report.repairs == []
    assert user_words(fmt, out) == user_words(fmt, messages)
    loaded = toolkeep.get_format(fmt).load(out)
    assert not [m for m in loaded if m.role == "assistant" and not m.parts]
    check(messages, out, report)
    assert messages == load(name)  # the caller's data untouched


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_cli_gives_what_the_session_gives_and_the_same_again(name: str, tmp_path: Path) -> None:
    fmt, _ = CASES[name]
    workspace = tmp_path / "ws"
    first = cli_prepare(TURNS / name, fmt, tmp_path / "out.json", workspace)
    out = json.loads(first)
    assert toolkeep.validate(out, fmt) == []
    assert user_words(fmt, out) == user_words(fmt, load(name))
    with toolkeep.Session(CONFIG, workspace=workspace) as session:
        expected, _ = session.prepare(load(name), format=fmt)
    assert out == expected
    assert cli_prepare(tmp_path / "out.json", fmt, tmp_path / "again.json", workspace) == first
    for call_id, text in results(fmt, out).items():
        for key in CCR_MARKER_RE.findall(text):
            recalled = cli("recall", key, "--workspace", str(workspace))
            assert recalled.stdout.decode() == results(fmt, load(name))[call_id]
    if name == "big-exponent.json":
        assert b"1e400" in first and b"-1E+400" in first and b"Infinity" not in first


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_the_cli_refuses_what_is_not_json(name: str, tmp_path: Path) -> None:
    done = cli("prepare", str(TURNS / name), "--workspace", str(tmp_path / "ws"))
    err = done.stderr.decode()
    assert done.returncode == 2 and "Traceback" not in err
    assert err.count("\n") == 1 and err.rstrip().endswith(REFUSED[name])
