"""The neutral message model: values compared and hashed by content, copies never touch the original."""

from __future__ import annotations

import dataclasses

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
