"""Properties of ``prepare`` over generated broken histories, in both formats (SPEC 1, 2, 5, 7)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolkeep
from toolkeep.messages import ToolResultPart
from toolkeep.pipeline import POLICIES
from toolkeep.shorten import CCR_MARKER_RE, archive_key

from .strategies import (
    agent_histories,
    budget_sessions,
    empty_assistant_histories,
    long_sessions,
    property_settings,
    request_budgets,
)
from .test_request_budget import without_note_keys

TOOLKEEP = [sys.executable, "-m", "toolkeep"]


def broken_histories() -> st.SearchStrategy[tuple[str, list[Any]]]:
    """Broken histories in either format, Anthropic ones also as agents send them, some with empty
    assistant messages put in."""
    return st.one_of(agent_histories(), empty_assistant_histories(("anthropic", "openai-chat")))


def result_texts(fmt: str, messages: list[Any]) -> list[str]:
    """The text of every tool result in a history, as the format adapter reads it."""
    history = toolkeep.get_format(fmt).load(messages)
    return [p.text for m in history for p in m.parts if isinstance(p, ToolResultPart)]


def prepared_with(workspace: Path, fmt: str, messages: list[Any]) -> tuple[list[Any], toolkeep.Report]:
    with toolkeep.Session(toolkeep.Config(), workspace=workspace) as session:
        return session.prepare(messages, format=fmt)


class TestPrepareProperties:
    @property_settings(60)
    @given(case=broken_histories())
    def test_output_passes_validator_and_input_untouched(
        self, case: tuple[str, list[Any]], tmp_path_factory: Any
    ) -> None:
        """The output has no pairing violation and the caller's history is not mutated."""
        fmt, history = case
        before = copy.deepcopy(history)
        out, _ = prepared_with(tmp_path_factory.mktemp("ws"), fmt, history)
        assert history == before
        assert toolkeep.validate(out, fmt) == []

    @property_settings(60)
    @given(case=broken_histories())
    def test_idempotent_and_deterministic(self, case: tuple[str, list[Any]], tmp_path_factory: Any) -> None:
        """prepare(prepare(h)) == prepare(h), and two runs give byte-identical JSON."""
        fmt, history = case
        ws = tmp_path_factory.mktemp("ws")
        with toolkeep.Session(toolkeep.Config(), workspace=ws) as session:
            once, _ = session.prepare(history, format=fmt)
            again, _ = session.prepare(history, format=fmt)
            twice, _ = session.prepare(once, format=fmt)
        assert json.dumps(once) == json.dumps(again)
        assert twice == once
        # a second session on the same workspace gives the same bytes too
        other, _ = prepared_with(ws, fmt, history)
        assert json.dumps(other) == json.dumps(once)

    @property_settings(60)
    @given(case=agent_histories())
    def test_every_shortened_result_is_recoverable(
        self, case: tuple[str, list[Any]], tmp_path_factory: Any
    ) -> None:
        """Persisted files equal their originals; every new marker resolves to an original."""
        fmt, history = case
        ws = tmp_path_factory.mktemp("ws")
        originals = set(result_texts(fmt, history))
        carried = {k for t in originals for k in CCR_MARKER_RE.findall(t)}
        with toolkeep.Session(toolkeep.Config(), workspace=ws) as session:
            out, _ = session.prepare(history, format=fmt)
            for text in result_texts(fmt, out):
                if text in originals or text == toolkeep.MISSING_RESULT_TEXT:
                    continue
                keys = [k for k in CCR_MARKER_RE.findall(text) if k not in carried]
                assert keys, f"shortened result without a new marker: {text[:200]!r}"
                for key in keys:
                    assert session.recall(key) in originals
        for path in (ws / "tool-results").iterdir():
            content = path.read_bytes().decode("utf-8", "surrogatepass")
            assert content in originals
            assert path.name.endswith(f"_{archive_key(content)}.txt")
            assert str(path) in json.dumps(out, ensure_ascii=False)


class TestAcrossProcesses:
    @pytest.mark.slow  # two CLI processes per example: half a minute
    @property_settings(8)
    @given(case=agent_histories(max_blocks=4))
    def test_two_cli_processes_share_a_workspace_byte_identically(
        self, case: tuple[str, list[Any]], tmp_path_factory: Any
    ) -> None:
        """Two separate `toolkeep prepare --workspace` processes write byte-identical output."""
        fmt, history = case
        tmp = tmp_path_factory.mktemp("cli")
        source = tmp / "in.json"
        source.write_text(json.dumps(history), encoding="utf-8")
        outputs = []
        for n in range(2):
            target = tmp / f"out{n}.json"
            subprocess.run(
                [*TOOLKEEP, "prepare", str(source), "-o", str(target), "--format", fmt,
                 "--workspace", str(tmp / "ws")],
                check=True, capture_output=True,
            )  # fmt: skip
            outputs.append(target.read_bytes())
        assert outputs[0] == outputs[1]
        in_process, _ = prepared_with(tmp / "ws", fmt, history)
        assert json.loads(outputs[0]) == in_process


def _or_too_large(run: Any, *args: Any, **kwargs: Any) -> Any:
    """``run(*args, **kwargs)``, or what tells the RequestTooLargeError it raised (to compare two
    runs that both refuse)."""
    try:
        return run(*args, **kwargs)
    except toolkeep.RequestTooLargeError as error:
        return ("too large", error.tokens, error.floor)


class TestIncremental:
    @pytest.mark.slow  # 60 examples x 3 policies, a fresh run at every turn: minutes
    @pytest.mark.parametrize("policy", sorted(POLICIES))
    @property_settings(60)
    @given(case=st.one_of(broken_histories(), long_sessions(), budget_sessions()), limit=request_budgets)
    def test_growing_history_matches_a_fresh_run_at_every_turn(
        self, policy: str, case: tuple[str, list[Any]], limit: int | None, tmp_path_factory: Any
    ) -> None:
        """Turn by turn, a session sends what a from-scratch run (no memo) sends, whether the agent
        keeps its raw history or sends back each prepared history plus the next turn, under
        every policy, with and without a request budget (both refuse the same requests)."""
        fmt, history = case
        ws = tmp_path_factory.mktemp("ws")
        cuts = [*(i for i, m in enumerate(history) if m["role"] == "assistant" and i > 0), len(history)]
        config = toolkeep.Config(policy=policy, max_request_tokens=limit)
        with (
            toolkeep.Session(config, workspace=ws) as raw_agent,
            toolkeep.Session(config, workspace=ws) as feedback_agent,
        ):
            sent: list[Any] = []
            start = 0
            for cut in cuts:
                fresh = _or_too_large(
                    toolkeep.run_pipeline,
                    history[:cut],
                    format=fmt,
                    config=config,
                    workspace=raw_agent.workspace,
                    store=raw_agent.store,
                )
                raw = _or_too_large(raw_agent.prepare, history[:cut], format=fmt)
                fed = _or_too_large(feedback_agent.prepare, [*sent, *history[start:cut]], format=fmt)
                start = cut
                if fresh[0] == "too large":
                    assert raw == fresh and fed[0] == "too large"
                    sent = list(history[:cut])  # nothing came back to send again
                    continue
                assert json.dumps(raw[0]) == json.dumps(fresh[0])
                assert raw[1].to_dict() == fresh[1].to_dict()
                if policy != "seed" or limit is None:
                    # the seed cuts a result's text as it stands (ChatCLI's way), so what it cut
                    # comes back cut, not whole, and the budget measures it as it comes back
                    assert fed[0] != "too large"
                    # but for the key of a note of archived turns whose span grew over messages
                    # sent back prepared (it archives them as they were sent: toolkeep.turns)
                    assert without_note_keys(json.dumps(fed[0])) == without_note_keys(json.dumps(fresh[0]))
                sent = fed[0] if fed[0] != "too large" else list(history[:cut])

    @pytest.mark.slow  # tens of seconds per policy
    @pytest.mark.parametrize("policy", sorted(POLICIES))
    @property_settings(60)
    @given(case=st.one_of(broken_histories(), long_sessions(), budget_sessions()), data=st.data())
    def test_resumed_session_and_later_edits_match_a_fresh_run(
        self, policy: str, case: tuple[str, list[Any]], data: st.DataObject, tmp_path_factory: Any
    ) -> None:
        """A session whose first request is a long history (its settled blocks run as one), then
        the whole history, then the history with one earlier message replaced or removed, sends
        at each step what a from-scratch run sends. Short age tiers, so most blocks settle."""
        fmt, history = case
        limit = data.draw(request_budgets, label="max_request_tokens")
        config = toolkeep.Config(
            truncate_turns=1,
            summarize_turns=2,
            recall_protect_turns=1,
            policy=policy,
            max_request_tokens=limit,
        )
        first = data.draw(st.integers(1, len(history)), label="first request")
        changed = data.draw(st.integers(0, len(history) - 1), label="changed message")
        edited = [*history[:changed], *history[changed + 1 :]]
        if data.draw(st.booleans(), label="replace rather than remove"):
            edited.insert(changed, copy.deepcopy(history[changed]))
        with toolkeep.Session(config, workspace=tmp_path_factory.mktemp("ws")) as session:
            for request in (history[:first], history, edited):
                got = _or_too_large(session.prepare, request, format=fmt)
                fresh = _or_too_large(
                    toolkeep.run_pipeline,
                    request,
                    format=fmt,
                    config=config,
                    workspace=session.workspace,
                    store=session.store,
                )
                if fresh[0] == "too large":
                    assert got == fresh
                    continue
                assert json.dumps(got[0]) == json.dumps(fresh[0])
                assert got[1].to_dict() == fresh[1].to_dict()


def untouched_parts(fmt: str, messages: list[Any]) -> list[str]:
    """What the pipeline must carry as it is: every block that is neither a call nor a result
    nor blank text, which Anthropic refuses and pairing drops (or makes "(continue)" where a
    message held nothing else; the generated histories never say it) (Anthropic; a string
    content counts as one text block; thinking, server and MCP blocks, uploads and compaction
    included), then apart the system messages, which pairing moves after the results a system
    message stood before, or every user/system message and assistant text (OpenAI Chat), in
    order, as JSON."""
    out = []
    systems = []
    for m in messages:
        if fmt == "anthropic":
            content = m["content"]
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            (systems if m["role"] == "system" else out).extend(
                json.dumps(b)
                for b in blocks
                if b.get("type") not in ("tool_use", "tool_result")
                and not (b.get("type") == "text" and b["text"].strip() in ("", "(continue)"))
            )
        elif m["role"] in ("user", "system"):
            out.append(json.dumps(m))
        elif m["role"] == "assistant" and m.get("content"):
            out.append(json.dumps(m["content"]))
    return [*out, "systems:", *systems]


def thinking_leads(fmt: str, messages: list[Any]) -> bool:
    """True when no thinking block of an Anthropic assistant message comes after anything but a
    compaction block or other thinking (the API wants thinking first)."""
    for m in messages if fmt == "anthropic" else []:
        if m["role"] != "assistant" or isinstance(m["content"], str):
            continue
        other = False
        for b in m["content"]:
            if b["type"] in ("thinking", "redacted_thinking"):
                if other:
                    return False
            elif b["type"] != "compaction":
                other = True
    return True


class TestCarried:
    @property_settings(60)
    @given(case=agent_histories())
    def test_untouched_parts_round_trip_in_order(
        self, case: tuple[str, list[Any]], tmp_path_factory: Any
    ) -> None:
        """Images, text, cache_control, unknown blocks and keys outside calls and results, thinking
        (first in its message), server and MCP tool blocks, uploads, compaction and system messages
        come out exactly as they went in, in the same order."""
        fmt, history = case
        out, _ = prepared_with(tmp_path_factory.mktemp("ws"), fmt, history)
        assert untouched_parts(fmt, out) == untouched_parts(fmt, history)
        assert thinking_leads(fmt, history) and thinking_leads(fmt, out)


SMALL = toolkeep.Config(
    default_tool_cap=2_000,
    tool_caps={"read": 4_000},
    cap_head_chars=100,
    cap_tail_chars=50,
    max_result_chars=500,
    turn_budget_chars=800,
    preview_head_chars=100,
    preview_tail_chars=50,
    compact_min_chars=300,
    compact_head_chars=60,
    compact_tail_chars=20,
)
SHORTENED = ("chars omitted", "[TRUNCATED ", "[Old tool result cleared -- ")


class TestBudgetHolds:
    @property_settings(60)
    @given(case=agent_histories())
    def test_every_result_and_turn_within_small_limits(
        self, case: tuple[str, list[Any]], tmp_path_factory: Any
    ) -> None:
        """With small limits, every result sent is within the per-result limit, and a turn over its
        budget has nothing left to cut (every result in it that could be previewed is shortened)."""
        fmt, history = case
        with toolkeep.Session(SMALL, workspace=tmp_path_factory.mktemp("ws")) as session:
            out, _ = session.prepare(history, format=fmt)
        turns: list[list[str]] = [[]]
        for m in toolkeep.get_format(fmt).load(out):
            if m.role == "assistant":
                turns.append([])
            turns[-1] += [p.text for p in m.parts if isinstance(p, ToolResultPart)]
        for texts in turns:
            assert all(len(t) <= SMALL.max_result_chars for t in texts)
            if sum(map(len, texts)) > SMALL.turn_budget_chars:
                # over 400 chars a preview (150 kept + path and marker) is always shorter
                long = [t for t in texts if len(t) > 400]
                assert all(any(s in t for s in SHORTENED) for t in long)
