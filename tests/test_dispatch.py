"""Caps applied where a result enters the history, and caps that tools declare."""

from __future__ import annotations

from pathlib import Path

import pytest

import toolkeep
from toolkeep.shorten import CCR_MARKER_RE


def test_cap_result_cuts_over_the_tools_cap_and_keeps_the_way_back(tmp_path: Path) -> None:
    """A 40,000-char bash output is cut to its 30,000 cap, marker included, the head five sixths of
    what is kept; the marker's key recalls all of it."""
    text = "".join(f"{n:05d}\n" for n in range(6_700))[:40_000]
    with toolkeep.Session(toolkeep.Config(), workspace=tmp_path) as session:
        capped = session.cap_result("call_1", "bash", text)
        assert len(capped) == 30_000
        head, _, tail = capped.partition("\n\n[TRUNCATED ")
        tail = tail.split("\n\n", 1)[1]
        assert text.startswith(head) and text.endswith(tail) and 24_500 < len(head) < 25_000
        assert (
            f"[TRUNCATED {40_000 - len(head) - len(tail)} chars omitted, {len(head) + len(tail)} kept]"
            in capped
        )
        key = CCR_MARKER_RE.search(capped)
        assert key is not None and session.recall(key.group(1)) == text


def test_cap_result_leaves_results_within_the_cap_alone(tmp_path: Path) -> None:
    """A read result of 40,000 chars is within read's 80,000 cap and comes back as it was."""
    with toolkeep.Session(toolkeep.Config(), workspace=tmp_path) as session:
        assert session.cap_result("c", "Read", "y" * 40_000) == "y" * 40_000


def test_declared_cap_overrides_the_configured_one(tmp_path: Path) -> None:
    """A tool that declares 10,000 chars is cut at 10,000 even though read allows 80,000."""

    @toolkeep.result_cap(10_000)
    def read(path: str) -> str:
        return "z" * 40_000

    assert toolkeep.declared_cap(read) == 10_000
    with toolkeep.Session(toolkeep.Config(), workspace=tmp_path) as session:
        capped = session.cap_result("c", "read", read("f"), cap=toolkeep.declared_cap(read))
    assert "[TRUNCATED " in capped and len(capped) == 10_000


def test_prepare_keeps_a_result_capped_at_entry_as_it_is(tmp_path: Path) -> None:
    """A history holding a result capped at entry (under a tool's own cap, smaller than the
    config's) prepares to the same capped text: the original is known, but not put back."""
    with toolkeep.Session(toolkeep.Config(), workspace=tmp_path) as session:
        capped = session.cap_result("t1", "bash", "q" * 50_000, cap=5_000)
        history = [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": capped}]},
        ]
        out, _ = session.prepare(history)
    assert out[2]["content"][0]["content"] == capped


@pytest.mark.parametrize("bad", [0, -5, 2.5, True, "100"])
def test_result_cap_rejects_what_is_not_a_positive_whole_number(bad: object) -> None:
    """A cap of zero, a negative, a float, a bool or a string is a ConfigError."""
    with pytest.raises(toolkeep.ConfigError):
        toolkeep.result_cap(bad)  # type: ignore[arg-type]
