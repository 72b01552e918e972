"""Whole old turns archived by the request budget (:mod:`toolkeep.turns`), in every format: every
request sent is within the budget and valid, the archived span only grows, the note's key
recalls the caller's own messages byte for byte, a session sends what a fresh run sends, and a
request is refused only when the parts never archived are over the budget."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolkeep
from toolkeep.messages import TextPart
from toolkeep.pipeline import POLICIES
from toolkeep.tokens import serialize_message
from toolkeep.turns import HEADER, first_start, note_text, payload
from toolkeep.window import request_tokens

from .convert_formats import to_format
from .strategies import budget_sessions, property_settings, user

FORMATS = ["anthropic", "openai-chat", "openai-responses", "gemini", "bedrock", "langchain"]
NOTE = re.compile(re.escape(HEADER) + r" (\d+) turns?, [^\]]*\] <<ccr:([0-9a-f]{16})>>")


def long_session(turns: int, size: int = 3_000) -> list[Any]:
    """A valid session of ``turns`` tool calls with results of ``size`` chars, an error now and
    then, and the user's words between some turns."""
    history: list[Any] = [user("start the task")]
    for n in range(turns):
        call_id = f"toolu_{n:02d}"
        name = "Edit" if n % 3 == 0 else "Read"
        history.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"step {n}"},
                    {"type": "tool_use", "id": call_id, "name": name, "input": {"file_path": f"src/m{n}.py"}},
                ],
            }
        )
        text = "\n".join(f"line {n}.{k}: value_{n}_{k} = compute({k})" for k in range(size // 40))
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": text}
        if n % 5 == 4:
            block = {**block, "content": f"Error: no such file src/m{n}.py", "is_error": True}
        history.append({"role": "user", "content": [block]})
        if n % 4 == 1:
            history.append({"role": "assistant", "content": [{"type": "text", "text": "noted"}]})
            history.append(user(f"please keep going with part {n}"))
    return history


def text(value: Any) -> str:
    return serialize_message(value)


def notes(out: list[Any]) -> list[tuple[int, str]]:
    """(turns, key) of each note of archived turns in ``out``."""
    return [(int(n), k) for n, k in NOTE.findall(text(out))]


def is_run_of(history: list[Any], recalled: str) -> bool:
    """True when ``recalled`` is the compact JSON of a run of ``history``'s messages."""
    messages = json.loads(recalled)
    first = text(messages[0])
    starts = [i for i, m in enumerate(history) if text(m) == first]
    return any(text(history[i : i + len(messages)]) == recalled for i in starts)


def request_ends(history: list[Any], fmt: str) -> list[int]:
    """The end of each request: the history before each model turn (and the whole)."""
    loaded = toolkeep.get_format(fmt).load(history)
    ends = set()
    for i, m in enumerate(loaded):
        if m.role == "assistant" and i > 0:
            raw = m.raw[0] if type(m.raw) is tuple else m.raw
            ends.update(n for n, r in enumerate(history) if r is raw and n > 0)
    return [*sorted(ends), len(history)]


class TestArchive:
    @pytest.mark.parametrize("fmt", FORMATS)
    def test_a_long_session_fits_with_one_note_that_recalls_its_turns(self, fmt: str, tmp_path: Path) -> None:
        history = to_format(long_session(30), fmt)
        config = toolkeep.Config(max_request_tokens=4_000)
        with toolkeep.Session(config, workspace=tmp_path) as session:
            out, report = session.prepare(history, format=fmt)
            assert report.tokens_after is not None and report.tokens_after <= 4_000
            assert request_tokens(out) == report.tokens_after
            assert toolkeep.validate(out, fmt) == []
            ((turns, key),) = notes(out)
            assert turns > 0
            recalled = session.recall(key)
            assert recalled is not None and is_run_of(history, recalled)
        # what the note says: the tools called on what, the files, the errors, the user's words
        note = next(line for line in text(out).split("\\n") if "Tools called" in line)
        assert "Read x" in note and "src/m1.py" in note
        whole = text(out)
        assert "Files touched: " in whole and "(edited)" in whole
        if fmt not in ("openai-chat", "openai-responses"):  # their results carry no error flag
            assert "Errors: " in whole and "no such file" in whole
        assert "please keep going with part 1" in whole
        # the first message and the last turn are kept as they were (Bedrock's dump joins the
        # note to the first user message: Converse wants the roles to alternate)
        assert text(out[-1]) == text(history[-1])
        if fmt != "bedrock":
            assert text(out[0]) == text(history[0])

    def test_note_text_and_payload(self) -> None:
        fmt = toolkeep.get_format("anthropic")
        history = long_session(6)
        loaded = fmt.load(history)
        start = first_start(loaded)
        assert start == 1
        span = loaded[start:-2]
        assert payload(span) == text(history[1:-2])
        note = note_text(span, "0123456789abcdef")
        assert note.startswith(f"{HEADER} 7 turns,") and "<<ccr:0123456789abcdef>>" in note
        long = user("word " * 200)
        assert "1,000 chars, whole in the archive" in note_text(fmt.load([long]), None)
        assert "(not recallable: no archive store)" in note_text(span, None)

    def test_refused_only_when_the_kept_parts_are_over(self, tmp_path: Path) -> None:
        history = long_session(20)
        history.append({"role": "assistant", "content": [{"type": "text", "text": "now read this"}]})
        history.append(user("please look: " + "word " * 4_000))  # the last user turn alone is over
        with toolkeep.Session(toolkeep.Config(max_request_tokens=3_000), workspace=tmp_path) as session:
            with pytest.raises(toolkeep.RequestTooLargeError, match="parts never archived") as caught:
                session.prepare(history, format="anthropic")
            # what is left: the first message, the note, the last turn
            kept = request_tokens([history[0], *history[-2:]])
            assert caught.value.floor > kept and caught.value.floor - kept < 1_000
            out, report = session.prepare(history[:-2], format="anthropic")
            assert report.tokens_after is not None and report.tokens_after <= 3_000 and notes(out)

    def test_fed_back_history_comes_back_whole(self, tmp_path: Path) -> None:
        history = long_session(30)
        config = toolkeep.Config(max_request_tokens=4_000)
        with toolkeep.Session(config, workspace=tmp_path) as session:
            once, _ = session.prepare(history, format="anthropic")
            twice, _ = session.prepare(once, format="anthropic")
        assert notes(once) and text(twice) == text(once)

    def test_a_quoted_note_is_not_taken_for_one(self, tmp_path: Path) -> None:
        history = long_session(3)
        history[0] = user(f"{HEADER} 3 turns, 9 messages: 3 tool calls, 0 errors] <<ccr:0123456789abcdef>>")
        config = toolkeep.Config(max_request_tokens=100_000)
        with toolkeep.Session(config, workspace=tmp_path) as session:
            out, _ = session.prepare(history, format="anthropic")
        assert text(out) == text(history)

    def test_the_note_is_a_text_message_in_every_format(self) -> None:
        from toolkeep.messages import Message

        note = Message("user", (TextPart("NOTE"),), dirty=True)
        for name in FORMATS:
            fmt = toolkeep.get_format(name)
            dumped = [fmt.dump_message(note)] if fmt.rules.per_message else fmt.dump([note])
            assert "NOTE" in text(dumped) and [m.role for m in fmt.load(dumped)] == ["user"], name


class TestProperties:
    @pytest.mark.parametrize("fmt", FORMATS)
    @property_settings(12)
    @given(case=budget_sessions(max_blocks=10), limit=st.sampled_from([300, 1_500, 4_000]))
    def test_every_request_of_a_growing_session(
        self, fmt: str, case: tuple[str, list[Any]], limit: int, tmp_path_factory: Any
    ) -> None:
        """At every request: within the budget and valid (or refused, and then the parts never
        archived are over it), the same bytes as a fresh run, the archived span never smaller
        than the request before's, and each note's key recalling a run of the caller's
        messages byte for byte."""
        _, source = case
        history = to_format(source, fmt)
        config = toolkeep.Config(max_request_tokens=limit)
        last = 0
        with toolkeep.Session(config, workspace=tmp_path_factory.mktemp("ws")) as session:
            for end in request_ends(history, fmt):
                request = history[:end]
                try:
                    out, report = session.prepare(request, format=fmt)
                except toolkeep.RequestTooLargeError as error:
                    assert error.floor > limit and "parts never archived" in str(error)
                    with pytest.raises(toolkeep.RequestTooLargeError) as again:
                        toolkeep.run_pipeline(
                            request,
                            format=fmt,
                            config=config,
                            workspace=session.workspace,
                            store=session.store,
                        )
                    assert again.value.floor == error.floor
                    continue
                assert report.tokens_after is not None and report.tokens_after <= limit
                assert toolkeep.validate(out, fmt) == []
                fresh, _ = toolkeep.run_pipeline(
                    request, format=fmt, config=config, workspace=session.workspace, store=session.store
                )
                assert text(fresh) == text(out)
                found = notes(out)
                assert len(found) <= 1
                turns = found[0][0] if found else 0
                assert turns >= last
                last = turns
                for _, key in found:
                    recalled = session.recall(key)
                    assert recalled is not None and is_run_of(request, recalled)

    @pytest.mark.parametrize("policy", sorted(POLICIES))
    @property_settings(12)
    @given(case=budget_sessions(max_blocks=10), limit=st.sampled_from([300, 1_500, 4_000]))
    def test_deterministic_under_every_policy(
        self, policy: str, case: tuple[str, list[Any]], limit: int, tmp_path_factory: Any
    ) -> None:
        """Two sessions on the same history send the same bytes (or refuse it alike)."""
        fmt, history = case
        config = toolkeep.Config(policy=policy, max_request_tokens=limit)
        outs = []
        ws = tmp_path_factory.mktemp("ws")
        for _ in range(2):
            with toolkeep.Session(config, workspace=ws) as session:
                try:
                    outs.append(text(session.prepare(history, format=fmt)[0]))
                except toolkeep.RequestTooLargeError as error:
                    outs.append(f"refused at {error.floor}")
        assert outs[0] == outs[1]


IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_an_edit_inside_the_archived_span_archives_it_anew(policy: str, tmp_path: Path) -> None:
    """A message inside the archived span removed (a duplicate result, which pairing drops
    anyway, so what the fold compares is unchanged): the session archives the span's messages
    as they are now, under the key a fresh run gives them, not the key of the messages it saw
    before (found by the slow incremental property)."""
    read = {"type": "tool_use", "id": "toolu_01", "name": "read", "input": {"path": "a.py"}}
    later = {"type": "future_block", "payload": [1, 2]}  # a block type toolkeep does not know
    history: list[Any] = [
        {"role": "user", "content": "Please fix the failing test."},
        {"role": "assistant", "content": [read, later]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": ""}]},
        {"role": "user", "content": [{"type": "text", "text": "look at this"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": ""}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Let me look."}, later]},
        {"role": "user", "content": [{"type": "text", "text": "look at this"}, IMAGE]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "gone", "content": ""}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Let me look."}, read, later]},
    ]
    config = toolkeep.Config(
        truncate_turns=1, summarize_turns=2, recall_protect_turns=1, policy=policy, max_request_tokens=300
    )
    edited = history[:2] + history[3:]
    with toolkeep.Session(config, workspace=tmp_path) as session:
        for request in (history[:1], history):
            session.prepare(request, format="anthropic")
        got, _ = session.prepare(edited, format="anthropic")
        fresh, _ = toolkeep.run_pipeline(
            edited, format="anthropic", config=config, workspace=session.workspace, store=session.store
        )
        assert json.dumps(got) == json.dumps(fresh)
        keys = re.findall(r"<<ccr:([0-9a-f]{16})>>", json.dumps(got))
        notes = [k for k in keys if (session.recall(k) or "").startswith("[{")]
        assert notes and json.loads(session.recall(notes[0]) or "") == edited[1:7]
