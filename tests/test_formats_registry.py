"""The format registry, auto-detection across all formats, and SDK objects in and out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import toolkeep
from toolkeep.exceptions import DetectionError
from toolkeep.formats import FORMATS, resolve_format
from toolkeep.formats._sdk import ObjectFormat, has_objects

from .convert_formats import to_format

NAMES = ["anthropic", "openai-chat", "openai-responses", "gemini", "bedrock", "langchain"]

SOURCE: list[Any] = [
    {"role": "user", "content": "list the files"},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "ok"},
            {"type": "tool_use", "id": "t1", "name": "ls", "input": {}},
        ],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}]},
]


class TestRegistry:
    def test_format_names(self) -> None:
        """The registry (and so the CLI's ``--format`` choices) has exactly the six names."""
        from toolkeep.cli._app import FORMAT_CHOICES

        assert list(FORMATS) == NAMES
        assert ["auto", *NAMES] == FORMAT_CHOICES

    @pytest.mark.parametrize("name", NAMES)
    def test_each_format_is_detected(self, name: str) -> None:
        """A history with tool traffic is detected as its own format, and valid."""
        messages = to_format(SOURCE, name)
        assert toolkeep.detect_format(messages).name == name
        assert toolkeep.validate(messages) == []

    def test_plain_text_goes_to_the_first_format(self) -> None:
        """A plain text history that several formats read alike is not an error."""
        assert toolkeep.detect_format([{"role": "user", "content": "hi"}]).name == "anthropic"

    def test_no_match_names_every_candidate(self) -> None:
        """A history no format reads is a DetectionError listing all the formats."""
        mixed = [{"role": "tool", "tool_call_id": "x", "content": "r"}, {"role": "model", "parts": []}]
        with pytest.raises(DetectionError) as err:
            toolkeep.detect_format(mixed)
        assert all(name in str(err.value) for name in NAMES)

    def test_ambiguous_history_names_the_candidates(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """When two formats both claim a history, the error names both."""
        clone = type("Clone", (type(FORMATS["gemini"]),), {"name": "gemini-clone"})()
        monkeypatch.setitem(FORMATS, "gemini-clone", clone)
        with pytest.raises(DetectionError, match="could be gemini or gemini-clone"):
            toolkeep.detect_format(to_format(SOURCE, "gemini"))


class TestSdkObjects:
    def test_plain_histories_are_not_wrapped(self) -> None:
        """Dict histories get the plain format; SDK objects get the object-aware wrapper."""
        assert not has_objects(SOURCE)
        assert resolve_format(SOURCE, "anthropic") is FORMATS["anthropic"]

    def test_anthropic_blocks_round_trip_as_objects(self, tmp_path: Path) -> None:
        """Pydantic response blocks in an assistant turn are detected, kept as the same objects,
        and a renamed duplicate id comes back in the same kind of message."""
        from anthropic.types import TextBlock, ToolUseBlock

        blocks: list[Any] = [
            TextBlock(type="text", text="ok"),
            ToolUseBlock(type="tool_use", id="t1", name="ls", input={}),
        ]
        history = [*SOURCE, {"role": "assistant", "content": blocks}]
        fmt = resolve_format(history)
        assert isinstance(fmt, ObjectFormat) and fmt.name == "anthropic" and fmt.rules.unique_call_ids
        with toolkeep.Session(toolkeep.Config(), workspace=tmp_path / "ws") as session:
            out, report = session.prepare(history)
        assert out[3]["content"][0] is blocks[0]
        assert out[3]["content"][1] == {"type": "tool_use", "id": "t1_2", "name": "ls", "input": {}}
        assert out[4]["content"][0]["tool_use_id"] == "t1_2"
        assert [r.kind for r in report.repairs] == ["renamed", "synthetic"]
        assert blocks[1].id == "t1"

    def test_genai_contents_detected_and_validated(self) -> None:
        """google-genai ``Content`` objects are read as Gemini and validated by its rules."""
        from google.genai import types

        contents = [
            types.Content(role="user", parts=[types.Part(text="hi")]),
            types.Content(role="model", parts=[types.Part.from_function_call(name="ls", args={})]),
        ]
        assert toolkeep.detect_format(contents).name == "gemini"
        assert [v.rule for v in toolkeep.validate(contents)] == ["missing_result"]
