"""Properties of ``prepare`` in the Responses, Gemini, Bedrock and LangChain formats (SPEC 1, 2, 8)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import given

import toolkeep

from .strategies import every_format_histories, property_settings


def snapshot(messages: list[Any]) -> str:
    """A deep, comparable copy of a history, LangChain objects included."""
    return json.dumps([m.model_dump() if hasattr(m, "model_dump") else m for m in messages], sort_keys=True)


def comparable(messages: list[Any]) -> list[Any]:
    """Messages as plain data, so histories of LangChain objects compare by value."""
    return [m.model_dump() if hasattr(m, "model_dump") else m for m in messages]


class TestEveryFormat:
    @property_settings(40)
    @given(case=every_format_histories())
    def test_prepared_is_valid_idempotent_and_input_untouched(
        self, case: tuple[str, list[Any]], tmp_path_factory: Any
    ) -> None:
        """A broken history comes out valid by its own validator, stable when prepared again, and
        the caller's messages are not mutated."""
        name, messages = case
        before = snapshot(messages)
        copies = copy.copy(messages)
        workspace: Path = tmp_path_factory.mktemp("ws")
        with toolkeep.Session(toolkeep.Config(), workspace=workspace) as session:
            prepared, _ = session.prepare(messages, format=name)
            assert toolkeep.validate(prepared, name) == []
            again, report = session.prepare(prepared, format=name)
        assert comparable(again) == comparable(prepared)
        assert report.repairs == []
        assert snapshot(messages) == before
        assert all(a is b for a, b in zip(messages, copies, strict=True))

    @property_settings(40)
    @given(case=every_format_histories())
    def test_detection_finds_the_format(self, case: tuple[str, list[Any]]) -> None:
        """A history with any tool traffic is detected as its own format, never another."""
        name, messages = case
        load = toolkeep.get_format(name).load(messages)
        if not any(m.calls or m.results for m in load):
            return  # plain text: several formats read it the same way
        assert toolkeep.detect_format(messages).name == name
