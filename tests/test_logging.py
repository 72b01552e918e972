"""The ``toolkeep`` logger tells what a ``prepare`` did (issue: "the logs are silent")."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import toolkeep
from toolkeep.pipeline import POLICIES
from toolkeep.stores import MemoryStore


def history() -> list[Any]:
    out: list[Any] = [{"role": "user", "content": "go"}]
    out.append(
        {"role": "assistant", "content": [{"type": "tool_use", "id": "dangling", "name": "ls", "input": {}}]}
    )
    out.append({"role": "user", "content": "again"})
    for n in range(8):
        text = "".join(f"row {n}.{k}\n" for k in range(4_000))
        out += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{n}", "name": "grep", "input": {}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": text}]},
        ]
    return out


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_one_debug_record_per_repair_and_cut_and_an_info_summary(
    policy: str, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        toolkeep.Session(toolkeep.Config(policy=policy), store=MemoryStore()) as session,
        caplog.at_level(logging.DEBUG, logger="toolkeep"),
    ):
        _, report = session.prepare(history(), "anthropic")
    records = [r for r in caplog.records if r.name == "toolkeep"]
    repairs = [
        r for r in records if r.levelno == logging.DEBUG and r.getMessage().startswith("toolkeep: repair")
    ]
    cuts = [r for r in records if r.levelno == logging.DEBUG and hasattr(r, "chars_after")]
    assert len(repairs) == len(report.repairs) >= 1
    assert repairs[0].kind == "synthetic" and repairs[0].id == "dangling"  # type: ignore[attr-defined]
    assert len(cuts) == report.capped + report.persisted + report.truncated + report.summarized >= 1
    for r in cuts:
        assert r.chars_after < r.chars_before and r.kind in toolkeep.report.CUT_KINDS  # type: ignore[attr-defined]
    (summary,) = [r for r in records if r.levelno == logging.INFO]
    assert "prepared" in summary.getMessage() and summary.chars_after < summary.chars_before  # type: ignore[attr-defined]


def test_silent_when_nothing_changed(caplog: pytest.LogCaptureFixture) -> None:
    with toolkeep.Session(store=MemoryStore()) as session, caplog.at_level(logging.DEBUG, logger="toolkeep"):
        session.prepare([{"role": "user", "content": "hello"}], "anthropic")
    assert [r for r in caplog.records if r.name == "toolkeep"] == []
