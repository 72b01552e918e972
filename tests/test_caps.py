"""Per-tool caps (SPEC 3): a cap per tool name, 30,000 for the rest; a cut is at most the cap long,
head and tail filling it (the head five sixths) unless they are set."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from toolkeep import (
    Config,
    ConfigError,
    MemoryStore,
    Session,
    ToolCap,
    ToolCaps,
    ToolResultPart,
    Workspace,
    get_format,
    repair_pairing,
    run_pipeline,
)
from toolkeep.config import DEFAULT_TOOL_CAPS
from toolkeep.formats import FORMATS
from toolkeep.shorten import archive_key
from toolkeep.steps import SaveContext, StepContext
from toolkeep.stores import Limits

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
        assert {n: c.cap for n, c in DEFAULT_TOOL_CAPS.items()} == {
            "read": 80_000,
            "search": 60_000,
            "tree": 50_000,
        }
        caps = ToolCaps()
        assert [caps.cap_for(n) for n in ("read", "search", "tree", "grep", None)] == [
            80_000,
            60_000,
            50_000,
            30_000,
            30_000,
        ]
        assert Config().default_tool_cap == 30_000
        assert (Config().cap_head_chars, Config().cap_tail_chars) == (None, None)

    def test_the_per_result_limit_is_the_configs_unless_a_tool_sets_its_own(self) -> None:
        """SPEC 4: every result over 20,000 is previewed, read's too, unless its ToolCap says."""
        c = Config()
        assert [c.tool_cap(n).max_result_chars for n in ("read", "search", "tree", "grep")] == [20_000] * 4
        assert Config(max_result_chars=5_000).tool_cap("read").max_result_chars == 5_000
        own = Config(tool_caps={"read": ToolCap(80_000, max_result_chars=80_000)})
        assert own.tool_cap("read").max_result_chars == 80_000

    def test_plain_ints_and_tool_caps_mix(self) -> None:
        """``tool_caps`` takes plain ints (the cap alone) and ToolCap settings, read back as ToolCaps."""
        c = Config(
            tool_caps={"grep": 1_000, "Fetch": ToolCap(9_000, head=100, tail=50, max_result_chars=9_000)}
        )
        assert c.tool_caps["grep"] == ToolCap(1_000)
        assert c.tool_cap("fetch") == ToolCap(9_000, 100, 50, 9_000)
        assert c.tool_cap("grep") == ToolCap(1_000, None, None, 20_000)
        assert Config(cap_head_chars=10).tool_cap("grep").head == 10

    @pytest.mark.parametrize(
        "bad",
        [{"tool_caps": {"grep": 99}}, {"tool_caps": {"grep": "1000"}}, {"default_tool_cap": 50},
         {"tool_caps": {"g": ToolCap(1_000)}, "cap_head_chars": -1}, {"tool_caps": [("grep", 1_000)]}],
    )  # fmt: skip
    def test_caps_below_the_marker_are_refused(self, bad: dict[str, Any]) -> None:
        """A cap must leave room for the marker: under 100 chars (or not a number) is a ConfigError."""
        with pytest.raises(ConfigError):
            Config(**bad)
        with pytest.raises(ConfigError):
            ToolCap(99)
        with pytest.raises(ConfigError):
            ToolCaps(default=10)

    @pytest.mark.parametrize("name", ["READ", "Read", "rEaD"])
    def test_names_compare_case_insensitively(self, name: str) -> None:
        """``Read`` and ``READ`` get the ``read`` cap, in ToolCaps and in Config."""
        assert ToolCaps().cap_for(name) == 80_000
        assert Config().cap_for(name) == 80_000
        assert Config(tool_caps={"MyTool": 700}).cap_for("mytool") == 700


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
        head, tail = sent[: m.start()], sent[m.end() :]
        assert len(sent) == cap  # the cut fills its cap exactly, the marker line included
        assert text.startswith(head) and text.endswith(tail)
        assert len(head) == pytest.approx(5 * len(tail), abs=6)
        assert (int(m.group(1)), int(m.group(2))) == (cap + 1 - len(head) - len(tail), len(head) + len(tail))
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
        assert "[TRUNCATED " in text_of(out) and len(text_of(out)) == 30_000

    def test_openai_chat_capped(self, session: Session) -> None:
        """Caps apply to OpenAI Chat tool messages by the name of the call that claims them."""
        h = [oa_user(), oa_assistant(("c1", "tree")), oa_tool("c1", "x" * 50_001)]
        out, report = capped_only(session, h)
        assert "[TRUNCATED " in out[2]["content"] and len(out[2]["content"]) == 50_000
        assert report.capped == 1


class TestInPipeline:
    def test_read_with_its_own_limit_over_its_cap_is_capped_not_previewed(self) -> None:
        """A read over 80,000 is cut to 80,000, which read's own per-result limit lets through."""
        config = Config(tool_caps={"read": ToolCap(80_000, max_result_chars=80_000)})
        with Session(config) as own:
            out, report = own.prepare(anthropic_turns(("t1", "read", "r" * 80_001)))
        assert report.capped == 1 and report.persisted == 0
        assert "[TRUNCATED " in text_of(out) and len(text_of(out)) == 80_000

    def test_by_default_a_fresh_read_over_the_limit_is_previewed(self, session: Session) -> None:
        """With the defaults a 25,000-char read is within its cap but over the 20,000 limit: the
        model sees the preview (what the configuration page's levels table says)."""
        out, report = session.prepare(anthropic_turns(("t1", "read", "r" * 25_000)))
        assert report.capped == 0 and report.persisted == 1
        assert 5_000 < len(text_of(out)) < 5_200

    def test_other_tools_over_the_limit_are_previewed(self, session: Session) -> None:
        """A grep of 40,000 is capped to 30,000, then over the 20,000 limit: previewed from the original."""
        out, report = session.prepare(anthropic_turns(("t1", "grep", "g" * 40_000)))
        assert report.persisted == 1
        assert "... [35,000 chars omitted -- full output saved to " in text_of(out)

    def test_a_cut_the_preview_replaces_is_not_made(self, session: Session) -> None:
        """A grep of 40,000 over a 30,000 cap over the 20,000 limit: the budget previews the
        original, so the caps step leaves it (one cut, one save); with a head set, the cap form
        is short and under the limit, so it is the one sent."""
        out, report = session.prepare(anthropic_turns(("t1", "grep", "g" * 40_000)))
        assert [c.kind for c in report.cuts] == ["persisted"]
        with Session(Config(cap_head_chars=300, cap_tail_chars=100)) as own:
            out, report = own.prepare(anthropic_turns(("t1", "grep", "g" * 40_000)))
        assert [c.kind for c in report.cuts] == ["capped"] and text_of(out).startswith(
            "g" * 300 + "\n\n[TRUNCATED "
        )

    def test_a_plain_int_cap_keeps_the_global_limit(self, session: Session) -> None:
        """``tool_caps={"read": 100_000}`` sets the cap alone; ToolCap also sets read's limit."""
        h = anthropic_turns(("t1", "read", "r" * 50_000))
        with Session(Config(tool_caps={"read": 100_000})) as plain:
            out, report = plain.prepare(h)
            assert report.persisted == 1
        with Session(Config(tool_caps={"read": ToolCap(100_000, max_result_chars=100_000)})) as own:
            out, report = own.prepare(h)
            assert out == h

    def test_capped_twice_gives_same_text(self, session: Session) -> None:
        """Preparing the capped output again restores the original and cuts it the same way."""
        h = anthropic_turns(("t1", "grep", "g" * 40_000), ("t2", "read", "r" * 90_000))
        once, _ = session.prepare(h)
        twice, _ = session.prepare(once)
        assert twice == once

    def test_the_seed_policy_keeps_chatclis_shape(self) -> None:
        """``policy="seed"`` reproduces ChatCLI: 5,000 + 1,000 chars around the marker whatever
        the cap, under the per-result limit, so the budget leaves it."""
        text = "".join(chr(0x4E00 + i % 500) for i in range(40_000))
        with Session(Config(policy="seed")) as seed:
            out, report = seed.prepare(anthropic_turns(("t1", "grep", text)))
        sent = text_of(out)
        (m,) = CAP_LINE.finditer(sent)
        assert sent[: m.start()] == text[:5_000] and sent[m.end() :] == text[-1_000:]
        assert (int(m.group(1)), int(m.group(2))) == (34_000, 6_000)
        assert [c.kind for c in report.cuts] == ["capped"]


class TestCutWithoutAFormat:
    """Cutting one result reads no format (issue 31): a :class:`SaveContext` (a workspace, a
    store, a report) is all :meth:`ToolCaps.cut` needs, as :meth:`Session.cap_result` gives it."""

    @pytest.mark.parametrize("fmt", sorted(FORMATS))
    def test_a_save_context_cuts_as_a_step_context_of_any_format(self, fmt: str, tmp_path: Path) -> None:
        text = "".join(chr(0x4E00 + i % 500) for i in range(2_500))
        part = ToolResultPart("call_1", text, name="grep")
        caps, setting = ToolCaps(), ToolCap(1_000)
        with Workspace(tmp_path / "ws") as ws:
            store = MemoryStore()
            saved = caps.cut(part, SaveContext(ws, store), setting)
            stepped = caps.cut(part, StepContext(get_format(fmt), workspace=ws, store=store), setting)
        assert saved is not None and saved == stepped
        assert len(saved.text) == 1_000 and saved.key == archive_key(text)
        (m,) = CAP_LINE.finditer(saved.text)
        assert m.group(4) == saved.key and store.get(saved.key) == text
        assert m.group(3) == saved.saved_path and Path(m.group(3)).read_text(encoding="utf-8") == text

    def test_a_refused_original_is_told_in_the_report(self, tmp_path: Path) -> None:
        """A store too small for the original: no key, the cut names the saved file alone, and
        the report the context was given says why."""
        text = "z" * 5_000
        with Workspace(tmp_path / "ws") as ws:
            ctx = SaveContext(ws, MemoryStore(limits=Limits(max_bytes=1_000)))
            cut = ToolCaps().cut(ToolResultPart("call_1", text, name="bash"), ctx, ToolCap(1_000))
        assert cut is not None and cut.key is None and cut.saved_path is not None
        assert "<<ccr:" not in cut.text and cut.saved_path in cut.text
        assert ctx.report.save_errors == [f"archive {archive_key(text)}: StoreError"]
        assert ctx.unarchived(cut.key)

    def test_a_step_context_is_a_save_context(self) -> None:
        """A step's context saves the way a :class:`SaveContext` does (it is one), so a step and
        :meth:`Session.cap_result` cut alike."""
        ctx = StepContext(get_format("anthropic"))
        assert isinstance(ctx, SaveContext)
        assert ctx.persist("call_1", "x") == (None, "no session workspace") and ctx.archive("x") is None
