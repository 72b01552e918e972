"""A cap is the most chars a result keeps, marker and note included, at every size from 100 to
200,000 chars, through every entry point: ``cap_form``, ``Session.cap_result`` (with and without
``cap=``), ``@toolkeep.result_cap`` through ``ToolLoop.results`` and ``aresults``, the
pipeline's ``ToolCaps`` step, and ``prepare`` (where the integrations' model requests are made).
Each time the full text is archived and comes back from ``recall`` byte-exact."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

import toolkeep
from toolkeep import Config, MemoryStore, Session, ToolCap, ToolCaps, repair_pairing, run_pipeline
from toolkeep.integrations.raw import ToolLoop
from toolkeep.policies import POLICIES
from toolkeep.shorten import CCR_MARKER_RE, archive_key, cap_form

from .strategies import anthropic_turns, property_settings

TRUNCATED = re.compile(r"\n\n\[TRUNCATED (\d+) chars omitted, (\d+) kept\][^\n]*\n\n")

caps = st.one_of(st.integers(100, 2_000), st.integers(2_000, 200_000))
heads = st.none() | st.integers(0, 250_000)


@st.composite
def outputs(draw: st.DrawFn, least: int = 101) -> str:
    """A tool output of ``least`` to 200,001 chars: lines of a drawn word, or one long line, with
    non-ASCII among them."""
    size = draw(st.one_of(st.integers(least, least + 2_000), st.integers(least, 200_001)))
    word = draw(st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12))
    line = draw(st.booleans())
    unit = f"{word} {size}\n" if line else word
    return (unit * (size // len(unit) + 1))[:size]


def check_cut(text: str, cut: str, cap: int, recall: Any) -> None:
    """``cut`` is ``text`` cut to at most ``cap`` chars, marker present, original recallable."""
    assert len(cut) <= cap, (len(cut), cap)
    found = TRUNCATED.search(cut)
    assert found is not None, cut[:300]
    head, tail = cut[: found.start()], cut[found.end() :]
    assert text.startswith(head) and text.endswith(tail)
    assert (int(found[1]), int(found[2])) == (len(text) - len(head) - len(tail), len(head) + len(tail))
    key = CCR_MARKER_RE.search(found[0])
    assert key is not None and key[1] == archive_key(text)
    assert recall(key[1]) == text


def pair(text: str, name: str = "grep") -> list[Any]:
    return anthropic_turns(("t1", name, text))


@property_settings(60)
@given(text=outputs(), cap=caps, head=heads, tail=heads, path=st.none() | st.text(min_size=1, max_size=300))
def test_cap_form_is_never_longer_than_its_cap(
    text: str, cap: int, head: int | None, tail: int | None, path: str | None
) -> None:
    """The pure form: at most ``cap``, the key always there, the path only when it fits."""
    assume(len(text) > cap)
    path = (path and path.replace("]", "").replace("\n", "")) or None
    key = archive_key(text)
    form = cap_form(text, head, tail, keys=[key, "0" * 16], path=path, cap=cap)
    assert len(form) <= cap
    assert form.count(f"<<ccr:{key}>>") >= 1
    found = TRUNCATED.search(form)
    assert found is not None
    if head is None and tail is None:
        assert len(form) >= cap - 2  # head and tail fill the cap (the counts' digits may vary by 1)


@property_settings(40)
@given(text=outputs(), cap=caps, save_error=st.text(min_size=1, max_size=400))
def test_a_failed_save_note_fits_too(text: str, cap: int, save_error: str) -> None:
    """With no key and no path, the form still says nothing was saved, within the cap."""
    assume(len(text) > cap)
    form = cap_form(text, None, None, keys=[], path=None, save_error=save_error, cap=cap)
    assert len(form) <= cap and "[full output could not be saved" in form


@property_settings(40)
@given(text=outputs(), cap=caps)
def test_cap_result_with_a_declared_cap(
    tmp_path_factory: pytest.TempPathFactory, text: str, cap: int
) -> None:
    """``cap_result(..., cap=N)``: at most N; within it, unchanged."""
    with Session(Config(), workspace=tmp_path_factory.mktemp("ws")) as session:
        cut = session.cap_result("c1", "grep", text, cap=cap)
        if len(text) <= cap:
            assert cut == text
        else:
            check_cut(text, cut, cap, session.recall)


@property_settings(30)
@given(
    text=outputs(), cap=caps, head=st.none() | st.integers(0, 5_000), tail=st.none() | st.integers(0, 5_000)
)
def test_cap_result_with_configured_settings(
    tmp_path_factory: pytest.TempPathFactory, text: str, cap: int, head: int | None, tail: int | None
) -> None:
    """``tool_caps`` with a ToolCap (head, tail) or a plain int: the cut is at most the cap and
    keeps at most the head and tail given."""
    config = Config(tool_caps={"grep": ToolCap(cap, head=head, tail=tail), "ls": cap})
    with Session(config, workspace=tmp_path_factory.mktemp("ws")) as session:
        for name in ("grep", "ls"):
            cut = session.cap_result("c1", name, text)
            if len(text) <= cap:
                assert cut == text
                continue
            check_cut(text, cut, cap, session.recall)
            found = TRUNCATED.search(cut)
            assert found is not None
            if name == "grep" and head is not None:
                assert found.start() <= head
            if name == "grep" and tail is not None:
                assert len(cut) - found.end() <= tail


@property_settings(30)
@given(text=outputs(), cap=caps)
def test_result_cap_through_tool_loop(text: str, cap: int) -> None:
    """``@toolkeep.result_cap(N)`` through ``ToolLoop.results`` and ``aresults``: the result
    entering the history is at most N; ``prepare`` sends it no longer; recall gives it back."""

    @toolkeep.result_cap(cap)
    def tool() -> str:
        return text

    async def atool() -> str:
        return text

    atool = toolkeep.result_cap(cap)(atool)
    response = {"content": [{"type": "tool_use", "id": "t1", "name": "tool", "input": {}}]}
    aresponse = {"content": [{"type": "tool_use", "id": "t1", "name": "atool", "input": {}}]}
    config = Config(max_result_chars=250_000, turn_budget_chars=500_000)
    with ToolLoop({"tool": tool, "atool": atool}, format="anthropic", config=config) as loop:
        (message,) = loop.results(response)
        cut = message["content"][0]["content"]
        (amessage,) = asyncio.run(loop.aresults(aresponse))
        assert amessage["content"][0]["content"] == cut
        history = [{"role": "user", "content": "go"}, {"role": "assistant", **response}, message]
        sent = loop.prepare(history)[2]["content"][0]["content"]
        if len(text) <= cap:
            assert cut == text == sent
            return
        check_cut(text, cut, cap, loop.session.recall)
        assert len(sent) <= cap


NUMBERED = "".join(f"line {n:05d}\n" for n in range(3_000))
"""Output full of names (numbers of 3+ digits), which the cache-aware policy's index lists."""


@pytest.mark.parametrize("policy", ["spec", "economy"])
@property_settings(30)
@given(text=outputs(), cap=caps)
@example(text=NUMBERED, cap=2_000)  # economy once sent the cap form with its names index
@example(text=NUMBERED, cap=5_000)
def test_caps_step_and_prepare(
    tmp_path_factory: pytest.TempPathFactory, text: str, cap: int, policy: str
) -> None:
    """The pipeline's ``ToolCaps`` step alone, and a whole ``prepare`` (what every integration
    sends its model) with a per-result limit over the cap, under SPEC's policy and the
    cache-aware one: at most the cap, recallable. (``seed`` keeps ChatCLI's fixed cap shape.)"""
    store = MemoryStore()
    out, _ = run_pipeline(pair(text), steps=[repair_pairing, ToolCaps(default=cap, caps={})], store=store)
    cut = out[2]["content"][0]["content"]
    if len(text) <= cap:
        assert cut == text
    else:
        check_cut(text, cut, cap, store.get)
    config = Config(policy=policy, tool_caps={"grep": ToolCap(cap, max_result_chars=max(cap, 20_000))})
    with Session(config, workspace=tmp_path_factory.mktemp("ws")) as session:
        sent = session.prepare(pair(text))[0][2]["content"][0]["content"]
        if len(text) <= cap:
            assert sent == text  # within its cap and its limit
        else:
            check_cut(text, sent, cap, session.recall)


def test_the_issues_examples(tmp_path: Path) -> None:
    """The numbers the issue reported: cap=2000 on 12k kept 6,162 chars; a 1,000 grep cap let
    4,000 through and cut larger ones to ~6,174; a 30,100 result at a 30k cap became 6,174."""
    with Session(Config(tool_caps={"grep": 1_000}), workspace=tmp_path) as session:
        assert len(session.cap_result("c1", "bash", "x" * 12_000, cap=2_000)) == 2_000
        assert len(session.cap_result("c2", "grep", "y" * 4_000)) == 1_000
        assert len(session.cap_result("c3", "grep", "y" * 40_000)) == 1_000
        assert len(session.cap_result("c4", "bash", "z" * 30_100)) == 30_000


def test_small_caps_keep_the_key_before_the_path(tmp_path: Path) -> None:
    """At 100 chars the path (about 100 chars itself) goes; the key, which recall follows, stays.
    At 5,000 the path is named too."""
    text = "w" * 50_000
    with Session(Config(), workspace=tmp_path / "a-rather-long-workspace-directory-name") as session:
        small = session.cap_result("call_1", "bash", text, cap=100)
        large = session.cap_result("call_1", "bash", text, cap=5_000)
    assert len(small) <= 100 and f"<<ccr:{archive_key(text)}>>" in small and "saved to" not in small
    assert len(large) <= 5_000 and "[full output saved to " in large


def test_a_cap_below_the_marker_is_refused(tmp_path: Path) -> None:
    """Caps under 100 chars cannot hold the marker: a ConfigError, at every entry point."""
    with Session(Config(), workspace=tmp_path) as session, pytest.raises(toolkeep.ConfigError):
        session.cap_result("c", "bash", "x" * 1_000, cap=99)
    with pytest.raises(toolkeep.ConfigError):
        toolkeep.result_cap(99)
    with pytest.raises(toolkeep.ConfigError):
        Config(default_tool_cap=99)


@property_settings(40)
@given(
    text=outputs(),
    cap=caps,
    path=st.text(st.characters(codec="ascii", exclude_characters="]\n"), min_size=1, max_size=300),
)
def test_without_a_key_the_path_is_the_way_back(text: str, cap: int, path: str) -> None:
    """An archive that refused the original leaves the saved path as the only way back: the
    form names it within the cap, or refuses (ValueError) when it cannot, never a cut with no
    way back."""
    assume(len(text) > cap)
    try:
        form = cap_form(text, None, None, keys=[], path=path, cap=cap)
    except ValueError:
        frame = len("\n\n[TRUNCATED  chars omitted,  kept]\n\n") + 2 * len(str(len(text)))
        assert frame + len(f" [full output saved to {path}]") > cap
        return
    assert len(form) <= cap and f"[full output saved to {path}]" in form


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_declared_cap_enters_with_the_tools_own_head_and_tail(policy: str) -> None:
    """A tool configured with its own head and tail that also declares a cap: the result enters
    cut to the declared cap with the configured head and tail, as ``prepare`` would cut it, so
    the two never disagree (the entering cut once took the plain default shape), under every
    policy (the cache-aware one once sent it with a names index, over the declared cap)."""
    text = "".join(f"line {n:05d}\n" for n in range(3_000))

    @toolkeep.result_cap(2_000)
    def grep() -> str:
        return text

    config = Config(policy=policy, tool_caps={"grep": toolkeep.ToolCap(50_000, head=300, tail=200)})
    response = {"content": [{"type": "tool_use", "id": "t1", "name": "grep", "input": {}}]}
    with ToolLoop({"grep": grep}, format="anthropic", config=config) as loop:
        (message,) = loop.results(response)
        cut = message["content"][0]["content"]
        assert len(cut) <= 2_000
        assert cut.startswith(text[:300]) and not cut.startswith(text[:301])
        assert cut.endswith(text[-200:]) and not cut.endswith(text[-201:])
        history = [{"role": "user", "content": "go"}, {"role": "assistant", **response}, message]
        assert loop.prepare(history)[2]["content"][0]["content"] == cut
