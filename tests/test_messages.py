"""The neutral message model: values compared and hashed by content, copies never touch the original."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from toolkeep.messages import Message, TextPart, ToolCallPart, ToolResultPart


def test_parts_are_values() -> None:
    assert TextPart("x") == TextPart("x")
    assert hash(TextPart("x")) == hash(TextPart("x"))
    assert {ToolCallPart("c1", "ls"), ToolCallPart("c1", "ls")} == {ToolCallPart("c1", "ls")}
    assert ToolResultPart("c1", "a") != ToolResultPart("c1", "b")


def test_copies_leave_the_original_as_it_was() -> None:
    part = ToolResultPart("c1", "full output")
    message = Message("user", (part,))
    shortened = part.with_text("short")
    renamed = part.named("cat")
    rebuilt = message.with_parts([shortened])
    assert (part.text, part.original, part.modified, part.name) == ("full output", None, False, None)
    assert (shortened.text, shortened.original, shortened.modified) == ("short", "full output", True)
    assert renamed.name == "cat" and dataclasses.replace(renamed, name=None) == part
    assert message.parts == (part,) and not message.dirty
    assert rebuilt.parts == (shortened,) and rebuilt.dirty
    assert message.results == (part,) and message.calls == ()


@pytest.mark.slow  # runs mypy: 10-20 s
def test_type_checkers_refuse_an_assignment(tmp_path: Path) -> None:
    """The model is frozen for type checkers (plain slotted dataclasses at run time, for speed):
    mypy must flag an assignment to any of its classes, and accept ``replace``."""
    api = pytest.importorskip("mypy.api", reason="mypy is in the test extras")
    snippet = tmp_path / "assign.py"
    snippet.write_text(
        "from dataclasses import replace\n"
        "from toolkeep.messages import Message, TextPart, ToolCallPart, ToolResultPart\n"
        "r = ToolResultPart('c1', 'text')\n"
        "r.text = 'other'\n"
        "Message('user', (r,)).dirty = True\n"
        "TextPart('x').text = 'y'\n"
        "ToolCallPart('c1', 'ls').id = 'c2'\n"
        "ok = replace(r, text='other')\n"
    )
    out, _, status = api.run(
        [str(snippet), "--follow-imports=silent", "--no-incremental", "--show-error-codes"]
    )
    flagged = sorted(int(line.split(":")[1]) for line in out.splitlines() if "read-only" in line)
    assert status == 1 and flagged == [4, 5, 6, 7], out
