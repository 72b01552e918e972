"""``Config(keep_orphans=True)``: pairing leaves orphan results in place, in every format, and
repairs everything else as it does by default."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import toolkeep
from toolkeep.messages import ToolResultPart

from .convert_formats import CONVERTERS, to_format
from .strategies import assistant, tool_result, tool_use, user

FORMATS = sorted(CONVERTERS)

# A history trimmed at the front: it opens with the result of a call that is no longer in it;
# then a call answered twice, an orphan behind its result, and a call never answered.
PARTIAL: list[Any] = [
    user(tool_result("trimmed", "from before the cut"), {"type": "text", "text": "go on"}),
    assistant(tool_use("t1", "read")),
    user(tool_result("t1", "first"), tool_result("t1", "second"), tool_result("gone", "elsewhere")),
    assistant(tool_use("t2", "grep")),
]


def results(name: str, messages: list[Any]) -> list[tuple[str, str]]:
    """``(call id, text)`` of every result the format reads in ``messages``, in order."""
    fmt = toolkeep.formats.resolve_format(messages, name)
    return [(p.call_id, p.text) for m in fmt.load(messages) for p in m.parts if isinstance(p, ToolResultPart)]


def prepared(
    name: str, messages: list[Any], tmp_path: Path, **config: Any
) -> tuple[list[Any], toolkeep.Report]:
    with toolkeep.Session(toolkeep.Config(**config), workspace=tmp_path / "ws") as session:
        return session.prepare(messages, format=name)


@pytest.mark.parametrize("name", FORMATS)
def test_orphans_stay_and_the_rest_is_repaired(name: str, tmp_path: Path) -> None:
    """With the switch, the result of the trimmed call and the orphan behind a result stay; the
    second result of a call the history holds goes, and the unanswered call gets its synthetic
    result, as by default. The only violations left are the orphans the user asked to keep."""
    messages = to_format(PARTIAL, name)
    out, report = prepared(name, messages, tmp_path, keep_orphans=True)
    assert results(name, out) == [
        ("trimmed", "from before the cut"),
        ("t1", "first"),
        ("gone", "elsewhere"),
        ("t2", toolkeep.MISSING_RESULT_TEXT),
    ]
    assert [(r.kind, r.id) for r in report.repairs] == [("orphans_removed", "t1"), ("synthetic", "t2")]
    violations = toolkeep.validate(out, name)
    assert {(v.rule, v.id) for v in violations} == {("orphan_result", "trimmed"), ("orphan_result", "gone")}
    again, again_report = prepared(name, out, tmp_path, keep_orphans=True)
    assert results(name, again) == results(name, out) and again_report.repairs == []


@pytest.mark.parametrize("name", FORMATS)
def test_by_default_orphans_go(name: str, tmp_path: Path) -> None:
    """Control: without the switch both orphans are removed and the output is valid."""
    messages = to_format(PARTIAL, name)
    out, report = prepared(name, messages, tmp_path)
    assert results(name, out) == [("t1", "first"), ("t2", toolkeep.MISSING_RESULT_TEXT)]
    assert sorted(r.id for r in report.repairs if r.kind == "orphans_removed") == ["gone", "t1", "trimmed"]
    assert toolkeep.validate(out, name) == []


def test_a_pruned_calls_result_still_goes(tmp_path: Path) -> None:
    """The result of a call pairing prunes (it has no tool name) answers a call the history held:
    it goes with the call, switch or not."""
    messages = [user("go"), assistant("looking", tool_use("t9", "")), user(tool_result("t9", "x"))]
    out, report = prepared("anthropic", messages, tmp_path, keep_orphans=True)
    assert results("anthropic", out) == []
    assert [r.kind for r in report.repairs] == ["invalid_calls_pruned", "orphans_removed"]


def test_kept_orphans_are_capped_like_any_result(tmp_path: Path) -> None:
    """A kept orphan is still a result: the steps after pairing cap it (its tool is unknown, so
    the default cap applies)."""
    messages = [user(tool_result("trimmed", "x" * 5_000)), assistant("done")]
    config = {"default_tool_cap": 1_000, "cap_head_chars": 200, "cap_tail_chars": 100}
    out, report = prepared("anthropic", messages, tmp_path, keep_orphans=True, **config)
    ((call_id, text),) = results("anthropic", out)
    assert call_id == "trimmed" and len(text) < 2_000 and report.capped == 1


def test_the_switch_comes_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Session()`` reads TOOLKEEP_KEEP_ORPHANS, so the CLI's users have the switch too."""
    monkeypatch.setenv("TOOLKEEP_KEEP_ORPHANS", "1")
    messages = to_format(PARTIAL, "openai-chat")
    with toolkeep.Session(workspace=tmp_path / "ws") as session:
        out, _ = session.prepare(messages, format="openai-chat")
    assert ("trimmed", "from before the cut") in results("openai-chat", out)
