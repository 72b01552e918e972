"""Restoration swaps in an original only for a result toolkeep itself shortened, recognized by
the exact shape it made, never because a text mentions a known key (issue: "a quoted marker
pulls in an archived original"); and every policy's prepared history, sent back, is prepared
the same (the exact shapes are recognized)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import toolkeep
from toolkeep.pipeline import POLICIES
from toolkeep.shorten import archive_key, cleared_form, compact_form, summary_form
from toolkeep.stores import MemoryStore

from .test_format_contract import history_in, session_history

ORIGINAL = "".join(f"line {k}: some output value={k}\n" for k in range(500))
KEY = archive_key(ORIGINAL)


def turn(text: str) -> list[Any]:
    return [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "grep", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": text}]},
    ]


def result(messages: list[Any]) -> str:
    text: str = messages[2]["content"][0]["content"]
    return text


@pytest.mark.parametrize(
    "quoted",
    [
        f"[Old tool result cleared -- see log] <<ccr:{KEY}>>",
        f"see <<ccr:{KEY}>> for details",
        f"[Old tool result cleared -- 3 lines, 10 chars, text] <<ccr:{KEY}>>",
        f"{ORIGINAL[:40]}\n[... 5 chars omitted from old tool result ...] <<ccr:{KEY}>>\nfoo",
        f"[result cleared] <<ccr:{KEY}>> and then some",
        f"[result cleared] <<ccr:{'0' * 16}>> <<ccr:{KEY}>>",
    ],
    ids=[
        "issue-example",
        "mention",
        "wrong-counts",
        "wrong-omission",
        "cleared-and-more",
        "cleared-of-another",
    ],
)
def test_a_quoted_marker_pulls_nothing_in(quoted: str) -> None:
    store = MemoryStore()
    store.put(KEY, ORIGINAL)
    with toolkeep.Session(store=store) as session:
        out, _ = session.prepare(turn(quoted), "anthropic")
    assert result(out) == quoted


@pytest.mark.parametrize(
    "form",
    [
        summary_form(ORIGINAL, "text", keys=[KEY]),
        compact_form(ORIGINAL, 2_000, 500, keys=[KEY]),
        compact_form(ORIGINAL, 0, 0, keys=[KEY]),
        cleared_form(keys=[KEY]),
        cleared_form(keys=[KEY, "0" * 16]),
    ],
    ids=["summary", "compact", "compact-empty", "cleared", "cleared-carrying"],
)
def test_toolkeeps_own_forms_are_restored(form: str) -> None:
    store = MemoryStore()
    store.put(KEY, ORIGINAL)
    config = toolkeep.Config(truncate_turns=99, summarize_turns=99)  # nothing cut again
    with toolkeep.Session(config, store=store) as session:
        out, _ = session.prepare(turn(form), "anthropic")
    assert result(out) == ORIGINAL


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("name", ["anthropic", "openai-chat", "gemini", "bedrock"])
def test_a_prepared_history_sent_back_is_prepared_the_same(name: str, policy: str, tmp_path: Path) -> None:
    messages = history_in(name, False, session_history(24))
    config = toolkeep.Config(policy=policy)
    store = MemoryStore()
    with toolkeep.Session(config, workspace=tmp_path, store=store) as session:
        once, _ = session.prepare(messages, format=name)
    with toolkeep.Session(config, workspace=tmp_path, store=store) as session:
        twice, _ = session.prepare(once, format=name)
    assert json.dumps(twice) == json.dumps(once)
