"""Properties of ``prepare`` in the Responses, Gemini, Bedrock and LangChain formats (SPEC 1, 2, 8)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import toolkeep
from toolkeep.formats._base import CONTINUE_TEXT
from toolkeep.formats._sdk import wrap
from toolkeep.messages import TextPart

from .strategies import (
    bedrock_text_beside_results,
    empty_assistant_histories,
    every_format_histories,
    gemini_histories,
    property_settings,
    responses_histories,
    sdk_anthropic_histories,
    sdk_openai_chat_histories,
)


def snapshot(messages: list[Any]) -> str:
    """A deep, comparable copy of a history, LangChain objects included."""
    return json.dumps([m.model_dump() if hasattr(m, "model_dump") else m for m in messages], sort_keys=True)


def comparable(messages: list[Any]) -> list[Any]:
    """Messages as plain data, so histories of LangChain objects compare by value."""
    return [m.model_dump() if hasattr(m, "model_dump") else m for m in messages]


def boundary_histories() -> st.SearchStrategy[tuple[str, list[Any]]]:
    """Broken histories of every format with empty assistant messages put in, and Bedrock
    histories with the user's words beside results."""
    return st.one_of(empty_assistant_histories(), bedrock_text_beside_results().map(lambda h: ("bedrock", h)))


class TestEveryFormat:
    @property_settings(40)
    @given(case=st.one_of(every_format_histories(), boundary_histories()))
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
    @given(case=boundary_histories())
    def test_no_empty_assistant_is_left_and_the_users_words_stay_theirs(
        self, case: tuple[str, list[Any]], tmp_path_factory: Any
    ) -> None:
        """No assistant message is sent empty, and every word the user wrote (but blank text,
        which Bedrock and Anthropic refuse) is still user text, in order: none is folded into a
        result."""
        name, messages = case
        with toolkeep.Session(toolkeep.Config(), workspace=tmp_path_factory.mktemp("ws")) as session:
            prepared, _ = session.prepare(messages, format=name)
        loaded = toolkeep.get_format(name).load(prepared)
        assert not [m for m in loaded if m.role == "assistant" and not m.parts]
        assert _user_words(name, prepared) == _user_words(name, messages)

    @property_settings(30)
    @given(case=boundary_histories())
    def test_a_growing_history_gets_what_a_fresh_run_gives(
        self, case: tuple[str, list[Any]], tmp_path_factory: Any
    ) -> None:
        """Request by request (the history before each assistant message, then all of it), a
        session sends and reports what a one-off run sends, and so does an agent that sends
        back each prepared request plus the next messages."""
        name, messages = case
        loaded = toolkeep.get_format(name).load(messages)
        cuts = [*(i for i, m in enumerate(loaded) if m.role == "assistant" and i > 0), len(messages)]
        workspace = tmp_path_factory.mktemp("ws")
        with (
            toolkeep.Session(toolkeep.Config(), workspace=workspace) as session,
            toolkeep.Session(toolkeep.Config(), workspace=workspace) as feedback,
        ):
            sent: list[Any] = []
            start = 0
            for cut in cuts:
                out, report = session.prepare(messages[:cut], format=name)
                fresh, fresh_report = toolkeep.run_pipeline(
                    messages[:cut], format=name, workspace=session.workspace, store=session.store
                )
                assert snapshot(out) == snapshot(fresh)
                assert report.to_dict() == fresh_report.to_dict()
                sent, _ = feedback.prepare([*sent, *messages[start:cut]], format=name)
                start = cut
                assert snapshot(sent) == snapshot(fresh)

    @property_settings(40)
    @given(case=every_format_histories())
    def test_detection_finds_the_format(self, case: tuple[str, list[Any]]) -> None:
        """A history with any tool traffic is detected as its own format, never another."""
        name, messages = case
        load = toolkeep.get_format(name).load(messages)
        if not any(m.calls or m.results for m in load):
            return  # plain text: several formats read it the same way
        assert toolkeep.detect_format(messages).name == name


def _user_words(name: str, messages: list[Any]) -> list[str]:
    """The non-blank texts of the user messages, in order, but the ``(continue)`` a format puts
    where a user message held only blank text."""
    return [
        p.text
        for m in toolkeep.get_format(name).load(messages)
        if m.role == "user"
        for p in m.parts
        if isinstance(p, TextPart) and p.text.strip() and p.text != CONTINUE_TEXT
    ]


def whole_history(name: str) -> toolkeep.Format:
    """Format ``name`` run the way SDK-object histories run: the whole-history pipeline, not the
    session's per-message block engine, so the two sides differ only in objects versus dicts."""
    return wrap(toolkeep.get_format(name))


def _sdk_json(messages: list[Any]) -> str:
    """The JSON an SDK sends for a history, objects dumped the way the SDKs dump them."""

    def dump(obj: Any) -> Any:
        return obj.model_dump(exclude_unset=True, mode="json", by_alias=True)

    return json.dumps(messages, default=dump, sort_keys=True)


def _anthropic_objects(message: dict[str, Any]) -> dict[str, Any]:
    """An assistant message with its text and tool_use blocks as the SDK's response blocks."""
    from anthropic.types import TextBlock, ToolUseBlock

    if message["role"] != "assistant" or not isinstance(message["content"], list):
        return message
    blocks: list[Any] = []
    for b in message["content"]:
        if b["type"] == "text":
            blocks.append(TextBlock(type="text", text=b["text"]))
        elif b["type"] == "tool_use":
            blocks.append(ToolUseBlock(type="tool_use", id=b["id"], name=b["name"], input=b["input"]))
        else:
            blocks.append(b)
    return {**message, "content": blocks}


class TestSdkObjects:
    @property_settings(30)
    @given(history=sdk_anthropic_histories())
    def test_anthropic_blocks_prepare_like_their_dicts(
        self, history: list[Any], tmp_path_factory: Any
    ) -> None:
        """A history holding response blocks is prepared to the same request JSON as the same
        history in dicts, and every untouched block comes back as the same object."""
        objects = [_anthropic_objects(m) for m in history]
        workspace = tmp_path_factory.mktemp("ws")  # one directory, so previews name the same files
        with toolkeep.Session(toolkeep.Config(), workspace=workspace) as session:
            from_dicts, _ = session.prepare(history, format=whole_history("anthropic"))
        with toolkeep.Session(toolkeep.Config(), workspace=workspace) as session:
            from_objects, _ = session.prepare(objects, format="auto")
        assert _sdk_json(from_objects) == _sdk_json(from_dicts)
        originals = {id(b) for m in objects if isinstance(m["content"], list) for b in m["content"]}
        kept = [
            b
            for m in from_objects
            if isinstance(m["content"], list)
            for b in m["content"]
            if hasattr(b, "model_dump")
        ]
        assert all(id(b) in originals for b in kept)

    @property_settings(30)
    @given(contents=gemini_histories())
    def test_genai_contents_prepare_like_their_dicts(
        self, contents: list[Any], tmp_path_factory: Any
    ) -> None:
        """``types.Content`` objects come out as ``Content``, valid, pairing the same calls and
        results as the same history in dicts."""
        from google.genai import types

        objects = [types.Content.model_validate(c) for c in contents]
        workspace = tmp_path_factory.mktemp("ws")
        with toolkeep.Session(toolkeep.Config(), workspace=workspace) as session:
            from_dicts, _ = session.prepare(contents, format="gemini")
        with toolkeep.Session(toolkeep.Config(), workspace=workspace) as session:
            from_objects, _ = session.prepare(objects, format="gemini")
        assert all(isinstance(c, types.Content) for c in from_objects)
        assert toolkeep.validate(from_objects, "gemini") == []
        assert _pairs(from_objects) == _pairs(from_dicts)


def _pairs(contents: list[Any]) -> list[Any]:
    history = toolkeep.formats.resolve_format(contents, "gemini").load(contents)
    return [(m.role, [c.name for c in m.calls], [(r.text, r.is_error) for r in m.results]) for m in history]


def _openai_objects(fmt: str, item: Any) -> Any:
    """An assistant message or output item as the object the OpenAI SDK parses it into."""
    if fmt == "openai-chat" and item.get("role") == "assistant":
        from openai.types.chat import ChatCompletionMessage

        return ChatCompletionMessage.model_validate(item)
    if fmt == "openai-responses" and item.get("type") == "function_call":
        from openai.types.responses import ResponseFunctionToolCall

        return ResponseFunctionToolCall.model_validate(item)
    if fmt == "openai-responses" and item.get("type") == "reasoning":
        from openai.types.responses import ResponseReasoningItem

        return ResponseReasoningItem.model_validate(item)
    return item


class TestOpenAIObjects:
    @property_settings(30)
    @given(
        case=st.one_of(
            sdk_openai_chat_histories().map(lambda h: ("openai-chat", h)),
            responses_histories().map(lambda h: ("openai-responses", h)),
        )
    )
    def test_openai_objects_prepare_like_their_dicts(
        self, case: tuple[str, list[Any]], tmp_path_factory: Any
    ) -> None:
        """``ChatCompletionMessage`` and Responses output items are prepared to the same request
        JSON as their dicts; untouched ones come back as the same objects."""
        fmt, history = case
        objects = [_openai_objects(fmt, m) for m in history]
        workspace = tmp_path_factory.mktemp("ws")
        with toolkeep.Session(toolkeep.Config(), workspace=workspace) as session:
            from_dicts, _ = session.prepare(history, format=whole_history(fmt))
        with toolkeep.Session(toolkeep.Config(), workspace=workspace) as session:
            from_objects, _ = session.prepare(objects, format=fmt)
        assert _sdk_json(from_objects) == _sdk_json(from_dicts)
        assert toolkeep.validate(from_objects, fmt) == []
        kept_dicts = {id(m) for m in from_dicts}
        kept_objects = {id(m) for m in from_objects}
        untouched = [j for j, m in enumerate(history) if id(m) in kept_dicts]
        assert all(id(objects[j]) in kept_objects for j in untouched)
