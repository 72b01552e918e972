"""The economics bench's own definitions: the cache-aware cost model and later-used facts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from bench.economics.cost import CostModel, SessionMeter
from bench.economics.data import Trajectory
from bench.economics.facts import (
    FactTally,
    check_fact,
    distinctive_tokens,
    later_used_facts,
    line_number_only,
)
from bench.economics.references import keep_newest


def msg(role: str, text: str) -> dict[str, Any]:
    """A message with plain string content."""
    return {"role": role, "content": text}


def size(m: dict[str, Any]) -> int:
    return len(json.dumps(m, separators=(",", ":"), ensure_ascii=False))


class TestCostModel:
    def test_growing_history_reads_the_previous_request(self) -> None:
        """Unmanaged: each request pays 0.1x on the previous request and 1.25x on what is new."""
        a, b, c = msg("user", "a" * 396), msg("assistant", "b" * 791), msg("user", "c" * 1000)
        meter = SessionMeter(CostModel())
        first = meter.add([a])
        second = meter.add([a, b, c])
        assert first == pytest.approx(1.25 * size(a) / 4)
        assert second == pytest.approx(0.1 * size(a) / 4 + 1.25 * (size(b) + size(c)) / 4)

    def test_a_changed_message_invalidates_what_follows(self) -> None:
        """Editing message 1 makes request 2 read only message 0 from the cache."""
        a, b, b2, c = (
            msg("user", "a" * 400),
            msg("assistant", "b" * 800),
            msg("assistant", "B" * 80),
            msg("user", "c"),
        )
        meter = SessionMeter(CostModel())
        meter.add([a, b])
        price = meter.add([a, b2, c])
        assert price == pytest.approx(0.1 * size(a) / 4 + 1.25 * (size(b2) + size(c)) / 4)

    def test_whole_prefix_lookup_is_stricter(self) -> None:
        """With ``lookup="prefix"`` only an earlier request that is a whole prefix is read."""
        a, b, c, d = (msg("user", x * 100) for x in "abcd")
        meter = SessionMeter(CostModel())
        meter.add([a, b, c])
        meter.add([a, b, d])  # lcp: reads a, b; prefix: no earlier request is a prefix
        lcp = 1.25 * sum(map(size, (a, b, c))) / 4 + 0.1 * (size(a) + size(b)) / 4 + 1.25 * size(d) / 4
        strict = 1.25 * sum(map(size, (a, b, c))) / 4 + 1.25 * sum(map(size, (a, b, d))) / 4
        assert meter.cost == pytest.approx(lcp)
        assert meter.other_cost == pytest.approx(strict)


def trajectory() -> Trajectory:
    """A user asks, the agent lists files, reads one, then uses names it saw."""
    messages: list[Any] = [
        msg("user", "fix the bug in the parser"),
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "ls"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "src/parse_args.py\nsetup.py"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "bash", "input": {"command": "cat src/parse_args.py"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "def parse_argv(x):\n    return MAX_ARGS_1024"}]},
        {"role": "assistant", "content": "parse_argv ignores MAX_ARGS_1024; also setup.py is fine"},
    ]  # fmt: skip
    requests = [i for i, m in enumerate(messages) if m["role"] == "assistant" and i > 0]
    return Trajectory("test__sample", messages, requests)


class TestFacts:
    def test_tokens(self) -> None:
        """Paths, identifiers with ``_``/digits/camelCase and 3+ digit numbers count; plain words do not."""
        tokens = distinctive_tokens("see src/app/main.py: parseArgs, max_len, 4096 and 42, the word parser")
        assert {"src/app/main.py", "main.py", "parseArgs", "max_len", "4096"} <= tokens
        assert not {"42", "parser", "word"} & tokens

    def test_first_use_of_a_token_seen_in_a_result(self) -> None:
        """A fact is used once, from the first result that showed it, and not if the agent wrote it before."""
        facts = later_used_facts(trajectory())
        found = {(f.token, f.use, f.call_id) for f in facts}
        # the cat command uses src/parse_args.py from the listing; its later mention is not new
        assert ("parse_argv", 5, "t2") in found
        assert ("MAX_ARGS_1024", 5, "t2") in found
        assert ("setup.py", 5, "t1") in found
        assert ("src/parse_args.py", 3, "t1") in found
        assert not any(f.token == "src/parse_args.py" and f.use == 5 for f in facts)

    def test_a_number_shown_only_as_a_line_number(self) -> None:
        """A number a listing shows only in its line-number column (``cat -n``, a read tool's
        ``N→``) is marked; one it also shows as content, or a grep hit's ``path:N:``, is not."""
        listing = "".join(f"{n:6}\tpass\n" for n in range(98, 103)) + "   120→x = 1\n"
        assert line_number_only("100", listing) and line_number_only("120", listing)
        assert not line_number_only("101", listing + "total 101\n")
        assert not line_number_only("206", "src/nntplib.py:206:    def body(self):\n")
        assert not line_number_only("parse_argv", listing)
        t = trajectory()
        t.messages[4]["content"][0]["content"] = (
            "   100\tdef parse_argv(x):\n   101\t    return MAX_ARGS_1024"
        )
        t.messages[5]["content"] = "parse_argv is at line 100 and MAX_ARGS_1024 at 101"
        marked = {f.token: f.line_number for f in later_used_facts(t)}
        assert marked["100"] and marked["101"] and not marked["parse_argv"]

    def test_visibility_under_masking(self) -> None:
        """Keep-1 masking hides the listing by the last use (``setup.py``); nothing leads back to it."""
        t = trajectory()
        policy = keep_newest(t, keep=1)
        tally = FactTally()
        for fact in later_used_facts(t):
            tally.count(policy(fact.use), fact, None)
        assert (tally.total, tally.visible, tally.recoverable) == (5, 4, 4)

    def test_recoverable_through_a_marker(self) -> None:
        """A shortened result whose marker leads to an original holding the token is recoverable."""
        t = trajectory()
        fact = next(f for f in later_used_facts(t) if f.token == "setup.py")
        request = json.loads(json.dumps(t.messages[: fact.use]))
        request[2]["content"][0]["content"] = (
            "[Old tool result cleared -- 2 lines, 26 chars, text] <<ccr:0123456789abcdef>>"
        )
        originals = {"0123456789abcdef": "src/parse_args.py\nsetup.py"}
        assert check_fact(request, fact, originals.get) == (False, True)
        assert check_fact(request, fact, None) == (False, False)
