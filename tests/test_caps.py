"""Per-tool caps (SPEC 3): a cap per tool name, 30,000 for the rest, head 5,000 and tail 1,000."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from toolkeep import Config, Session, ToolCaps, repair_pairing, run_pipeline
from toolkeep.config import DEFAULT_TOOL_CAPS
from toolkeep.shorten import archive_key

from .strategies import anthropic_turns, oa_assistant, oa_tool, oa_user

CAP_LINE = re.compile(
    r"\n\n\[TRUNCATED (\d+) chars omitted, (\d+) kept\] \[full output saved to ([^\]]+)\] <<ccr:([0-9a-f]{16})>>\n\n"
)


def capped_only(session: Session, messages: list[Any], caps: ToolCaps | None = None) -> tuple[list[Any], Any]:
    """Run pairing (which names each result's tool) and the caps step alone."""
    return run_pipeline(
        messages,
        steps=[repair_pairing, caps or ToolCaps()],
        workspace=session.workspace,
        store=session.store,
    )


def text_of(out: list[Any]) -> str:
    content = out[2]["content"][0]["content"]
    assert isinstance(content, str)
    return content


class TestDefaults:
    def test_default_caps_by_name(self) -> None:
        """read 80,000, search 60,000, tree 50,000, anything else 30,000."""
        assert dict(DEFAULT_TOOL_CAPS) == {"read": 80_000, "search": 60_000, "tree": 50_000}
        caps = ToolCaps()
        assert [caps.cap_for(n) for n in ("read", "search", "tree", "grep", None)] == [
            80_000,
            60_000,
            50_000,
            30_000,
            30_000,
        ]
        assert Config().default_tool_cap == 30_000
        assert (Config().cap_head_chars, Config().cap_tail_chars) == (5_000, 1_000)

    @pytest.mark.parametrize("name", ["READ", "Read", "rEaD"])
    def test_names_compare_case_insensitively(self, name: str) -> None:
        """``Read`` and ``READ`` get the ``read`` cap, in ToolCaps and in Config."""
        assert ToolCaps().cap_for(name) == 80_000
        assert Config().cap_for(name) == 80_000
        assert Config(tool_caps={"MyTool": 7}).cap_for("mytool") == 7


class TestThresholds:
    @pytest.mark.parametrize(
        ("name", "cap"),
        [("read", 80_000), ("search", 60_000), ("tree", 50_000), ("grep", 30_000), ("Tree", 50_000)],
    )
    def test_exactly_at_cap_untouched_one_past_capped(self, name: str, cap: int, session: Session) -> None:
        """A result of exactly its tool's cap is kept; one char more is cut to head + marker + tail."""
        at = anthropic_turns(("t1", name, "a" * cap))
        out, report = capped_only(session, at)
        assert out == at and report.capped == 0

        text = "".join(chr(0x4E00 + i % 500) for i in range(cap + 1))  # no line breaks, non-ASCII
        out, report = capped_only(session, anthropic_turns(("t1", name, text)))
        sent = text_of(out)
        (m,) = CAP_LINE.finditer(sent)
        assert sent[: m.start()] == text[:5_000]
        assert sent[m.end() :] == text[-1_000:]
        assert (int(m.group(1)), int(m.group(2))) == (cap + 1 - 6_000, 6_000)
        assert Path(m.group(3)).read_text(encoding="utf-8") == text
        assert Path(m.group(3)).name == f"budget_t1_{archive_key(text)}.txt"
        assert session.recall(m.group(4)) == text
        assert report.capped == 1

    def test_custom_caps_and_default(self, session: Session) -> None:
        """A tool's declared cap, and the default for the rest, come from the step's arguments."""
        caps = ToolCaps(default=8_000, caps={"fetch": 10_000}, head=100, tail=50)
        h = anthropic_turns(("a", "fetch", "f" * 10_000), ("b", "other", "o" * 8_001))
        out, report = capped_only(session, h, caps)
        assert out[2] == h[2]
        sent = out[4]["content"][0]["content"]
        assert sent.startswith("o" * 100 + "\n\n[TRUNCATED 7851 chars omitted, 150 kept]")
        assert sent.endswith("\n\n" + "o" * 50)
        assert report.capped == 1

    def test_error_results_capped_too(self, session: Session) -> None:
        """An error result over its cap is cut like any other and stays an error."""
        h = anthropic_turns(("t1", "grep", "E" * 30_001))
        h[2]["content"][0]["is_error"] = True
        out, _ = capped_only(session, h)
        assert out[2]["content"][0]["is_error"] is True
        assert "[TRUNCATED 24001 chars omitted, 6000 kept]" in text_of(out)

    def test_openai_chat_capped(self, session: Session) -> None:
        """Caps apply to OpenAI Chat tool messages by the name of the call that claims them."""
        h = [oa_user(), oa_assistant(("c1", "tree")), oa_tool("c1", "x" * 50_001)]
        out, report = capped_only(session, h)
        assert "[TRUNCATED 44001 chars omitted, 6000 kept]" in out[2]["content"]
        assert report.capped == 1


class TestInPipeline:
    def test_capped_result_is_not_previewed_again(self, session: Session) -> None:
        """After the cap (about 6,100 chars) the per-result budget has nothing left to do."""
        out, report = session.prepare(anthropic_turns(("t1", "read", "r" * 80_001)))
        assert report.capped == 1 and report.persisted == 0
        assert "[TRUNCATED 74001 chars omitted, 6000 kept]" in text_of(out)

    def test_within_cap_but_over_result_limit_is_previewed(self, session: Session) -> None:
        """A read of exactly 80,000 chars is within its cap but over 20,000: previewed."""
        out, report = session.prepare(anthropic_turns(("t1", "read", "r" * 80_000)))
        assert report.capped == 0 and report.persisted == 1
        assert "... [75,000 chars omitted -- full output saved to " in text_of(out)

    def test_capped_twice_gives_same_text(self, session: Session) -> None:
        """Preparing the capped output again restores the original and cuts it the same way."""
        h = anthropic_turns(("t1", "grep", "g" * 40_000))
        once, _ = session.prepare(h)
        twice, _ = session.prepare(once)
        assert twice == once
