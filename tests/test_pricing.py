"""Prices are configuration: presets, custom lists, the environment, the format's suggestion,
and a cost model that decides with the prices it is given."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest
from bench.economics.cost import CostModel, SessionMeter
from hypothesis import given
from hypothesis import strategies as st

import toolkeep
from toolkeep import Config
from toolkeep.costs import request_cost
from toolkeep.exceptions import ConfigError
from toolkeep.formats import FORMATS, _sdk, get_format
from toolkeep.pricing import DEFAULT_PRICING, PRESETS, Pricing, parse_pricing, resolve_pricing
from toolkeep.replay.tokens import get_counter

from .strategies import long_sessions, property_settings
from .test_policies import economy_run, requests, session_of, texts

PRICING_PAGE = (Path(__file__).resolve().parent.parent / "docs" / "pricing.md").read_text(encoding="utf-8")


class TestPresets:
    def test_the_issue_s_price_lists(self) -> None:
        """Anthropic and Bedrock: writes 1.25x (5 min) or 2x (1 h), reads 0.1x; OpenAI, Gemini
        and DeepSeek bill no write premium and read at their own discount."""
        figures = {n: (p.cache_read, p.cache_write, p.ttl_seconds) for n, p in PRESETS.items()}
        assert figures == {
            "anthropic-5m": (0.1, 1.25, 300),
            "anthropic-1h": (0.1, 2.0, 3600),
            "bedrock": (0.1, 1.25, 300),
            "openai": (0.25, 1.0, 300),
            "gemini": (0.1, 1.0, 300),
            "deepseek": (0.125, 1.0, 3600),
        }
        # a DeepSeek cache miss costs many times a hit: $0.56 against $0.07
        assert PRESETS["deepseek"].input_price == 0.56 and 1 / PRESETS["deepseek"].cache_read == 8
        assert all(p.source.startswith("https://") and p.model for p in PRESETS.values())

    def test_readme_table_gives_every_preset_s_figures(self) -> None:
        """The Pricing page's table lists each preset with its read, write, TTL and price."""
        section = PRICING_PAGE
        for name, p in PRESETS.items():
            row = next(line for line in section.splitlines() if line.startswith(f"| `{name}` |"))
            cells = [c.strip() for c in row.strip("|").split("|")]
            assert float(cells[1]) == p.cache_read and float(cells[2]) == p.cache_write, row
            assert cells[3] == f"{p.ttl_seconds:g} s" and f"${p.input_price:g}" in cells[4], row

    def test_money(self) -> None:
        p = PRESETS["anthropic-5m"]
        assert p.dollars(1_000_000, p.cache_write) == pytest.approx(3.75)
        assert p.write_premium and not PRESETS["openai"].write_premium


class TestCustomLists:
    def test_parse(self) -> None:
        p = parse_pricing(" read=0.2, write=1.5, ttl=600, price=2.5 ")
        assert (p.cache_read, p.cache_write, p.ttl_seconds, p.input_price) == (0.2, 1.5, 600, 2.5)
        assert parse_pricing("read=0.1,write=1.25,ttl=300").input_price == 1.0

    @pytest.mark.parametrize(
        ("text", "says"),
        [
            ("anthropic", "unknown price list"),
            ("read=0.1,write=1.25", "missing ttl="),
            ("read=0.1,write=x,ttl=3", "'x' is not a number"),
            ("read=0.1,write=1.25,ttl=300,cost=3", "is not one of"),
            ("read=0.1,read=0.2,write=1,ttl=3", "given twice"),
            ("read=2,write=1.25,ttl=300", "must not cost more than a write"),
            ("read=-1,write=1.25,ttl=300", "not below 0"),
            ("read=0.1,write=1.25,ttl=0", "must be positive"),
            ("read=nan,write=1.25,ttl=300", "must be a number"),
            ("read=0.1,write=inf,ttl=300", "finite"),
            ("read=0,write=0,ttl=300", "cache_write must be positive"),
        ],
    )
    def test_bad_lists_are_config_errors_naming_the_variable(self, text: str, says: str) -> None:
        with pytest.raises(ConfigError, match=re.escape(says)) as exc:
            Config.from_env({"TOOLKEEP_PRICING": text})
        assert exc.value.variable == "TOOLKEEP_PRICING"
        assert "TOOLKEEP_PRICING" in str(exc.value)
        with pytest.raises(ConfigError, match=re.escape(says)):
            Config(pricing=text)

    def test_a_value_that_is_no_list(self) -> None:
        with pytest.raises(ConfigError, match="preset name"):
            Config(pricing=0.1)  # type: ignore[arg-type]

    @given(
        read=st.floats(0, 1, allow_nan=False),
        extra=st.floats(0, 3, allow_nan=False),
        ttl=st.floats(1e-3, 1e6, allow_nan=False),
    )
    @property_settings(60)
    def test_a_written_list_reads_back(self, read: float, extra: float, ttl: float) -> None:
        write = max(read + extra, 1e-9)
        p = parse_pricing(f"read={read!r},write={write!r},ttl={ttl!r}")
        assert (p.cache_read, p.cache_write, p.ttl_seconds) == (read, write, ttl)
        assert Config(pricing=p).pricing is p


class TestResolution:
    def test_config_then_environment_then_format(self) -> None:
        assert Config().pricing is None
        assert Config(pricing="openai").pricing is PRESETS["openai"]
        assert Config.from_env({"TOOLKEEP_PRICING": "gemini"}).pricing is PRESETS["gemini"]
        assert (
            Config.from_env({"TOOLKEEP_PRICING": "gemini"}, pricing="deepseek").pricing is PRESETS["deepseek"]
        )
        assert resolve_pricing(None, get_format("openai-chat")) is PRESETS["openai"]
        assert resolve_pricing("bedrock", get_format("openai-chat")) is PRESETS["bedrock"]
        assert resolve_pricing(None) is PRESETS[DEFAULT_PRICING]

    def test_every_format_suggests_its_provider_s_list(self) -> None:
        """Each format's rules name a preset (LangChain, sent on to any provider, names none and
        gets the default); the SDK-object wrapper carries the same suggestion."""
        suggested = {name: f.rules.pricing for name, f in FORMATS.items()}
        assert suggested == {
            "anthropic": "anthropic-5m",
            "openai-chat": "openai",
            "openai-responses": "openai",
            "gemini": "gemini",
            "bedrock": "bedrock",
            "langchain": None,
        }
        for f in FORMATS.values():
            assert _sdk.wrap(f).rules.pricing == f.rules.pricing
            assert resolve_pricing(None, _sdk.wrap(f)) is resolve_pricing(None, f)

    def test_report_says_which_policy_and_pricing(self) -> None:
        history = [
            {"role": "user", "content": "go"},
            {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
             "function": {"name": "ls", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ]  # fmt: skip
        with toolkeep.Session(Config(policy="economy")) as session:
            report = session.prepare(history).report
        assert (report.policy, report.pricing) == ("economy", "openai")
        assert report.to_dict()["policy"] == "economy" and report.to_dict()["pricing"] == "openai"
        with toolkeep.Session(Config(pricing="deepseek")) as session:
            assert session.prepare(history).report.to_dict()["pricing"] == "deepseek"
        _, report = toolkeep.run_pipeline(history, config=Config(pricing="read=0.1,write=1.25,ttl=300"))
        assert (report.policy, report.pricing) == ("economy", "read=0.1,write=1.25,ttl=300")
        _, report = toolkeep.run_pipeline(history, config=Config(policy="spec"))
        assert (report.policy, report.pricing) == ("spec", "openai")


def big_turns(n: int = 6) -> list[tuple[str, dict[str, Any], str]]:
    turns = [("bash", {"command": "pytest"}, "PASSED line\n" * 666) for _ in range(n)]
    return turns + [("bash", {"command": "ls"}, "ok") for _ in range(10)]


class TestTheCostModelDecidesWithThePrices:
    def test_a_costly_write_keeps_what_a_cheap_one_shortens(self) -> None:
        """The same session under two price lists: where rewriting costs 1.25x the economy policy
        shortens old results; where it costs 100x, it sends them as they were."""
        economy = toolkeep.Economy(clear_at_least=1, min_horizon=6, trim_age=3, summary_age=99, risk=0.3)
        history = session_of(big_turns())
        cheap = texts(economy_run(history, economy, pricing="anthropic-5m")[-1])
        dear = texts(economy_run(history, economy, pricing="read=0.1,write=100,ttl=300")[-1])
        assert dear == texts(history[:-1])
        assert sum(map(len, cheap.values())) < sum(map(len, dear.values()))

    def test_the_format_s_list_is_the_one_used(self) -> None:
        """With no list in the config, an Anthropic history is decided at anthropic-5m: naming
        that list gives the same bytes, naming another may not."""
        economy = toolkeep.Economy(clear_at_least=1, min_horizon=1_000, trim_age=3, summary_age=99, risk=0.3)
        history = session_of(big_turns())
        assert economy_run(history, economy) == economy_run(history, economy, pricing="anthropic-5m")


class TestReplayPrices:
    def test_reads_writes_and_uncached_input(self) -> None:
        c = get_counter("chars")
        # 8 chars cached (2 tokens), 4 new (1 token)
        anthropic = request_cost(["abcdefgh"], ["abcdefgh", "ijkl"], c, PRESETS["anthropic-5m"])
        assert (anthropic.cached_tokens, anthropic.written_tokens, anthropic.uncached_tokens) == (2, 1, 0)
        assert anthropic.cost == pytest.approx(0.1 * 2 + 1.25)
        assert anthropic.dollars == pytest.approx((2 * 0.1 * 3 / 1e6, 1.25 * 3 / 1e6, 0.0))
        openai = request_cost(["abcdefgh"], ["abcdefgh", "ijkl"], c, PRESETS["openai"])
        assert (openai.cached_tokens, openai.written_tokens, openai.uncached_tokens) == (2, 0, 1)
        assert openai.cost == pytest.approx(0.25 * 2 + 1.0)
        assert math.isclose(sum(openai.dollars), (0.5 + 1) * 2 / 1e6)

    def test_pricing_is_frozen(self) -> None:
        with pytest.raises(AttributeError):
            PRESETS["openai"].cache_read = 0.5  # type: ignore[misc]
        assert Pricing(cache_read=0, cache_write=1, ttl_seconds=math.inf).ttl_seconds == math.inf


@st.composite
def price_lists(draw: st.DrawFn) -> Pricing:
    """A preset, or a custom list with reads from free to the base price and writes up to 3x."""
    if draw(st.booleans()):
        return PRESETS[draw(st.sampled_from(sorted(PRESETS)))]
    read = draw(st.sampled_from([0.0, 0.05, 0.1, 0.25, 0.5, 1.0]))
    write = max(read, draw(st.sampled_from([0.5, 1.0, 1.25, 2.0, 3.0])))
    return parse_pricing(f"read={read},write={write},ttl=300")


@given(long_sessions(max_blocks=10), price_lists())
@property_settings(40)
def test_no_session_costs_more_than_unmanaged_under_any_price_list(
    case: tuple[str, list[Any]], pricing: Pricing
) -> None:
    """Whatever the prices, and whichever request a session ends after, the economy policy has
    cost no more than sending the history unmanaged, priced at those prices (as the bench
    prices it, within a hundredth of a token per request for rounding)."""
    _, messages = case
    history = [*messages, {"role": "assistant", "content": "done"}]
    sent = economy_run(history, toolkeep.Economy(), pricing=pricing)
    managed, unmanaged = SessionMeter(CostModel(pricing)), SessionMeter(CostModel(pricing))
    for n, (out, recorded) in enumerate(zip(sent, requests(history), strict=True), 1):
        managed.add(out)
        unmanaged.add(recorded)
        assert managed.cost <= unmanaged.cost + 0.01 * n
