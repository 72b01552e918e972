"""``toolkeep replay --policy --pricing`` as a real subprocess: the price list named, and the
input split into cache reads, cache writes and uncached input, in tokens and dollars."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkeep.pricing import PRESETS

from .test_replay_cli import FIXTURES, run

LOG = str(FIXTURES / "anthropic-request.json")


@pytest.mark.parametrize("pricing", ["anthropic-5m", "openai", "read=0.2,write=2,ttl=60,price=4"])
def test_the_price_list_prices_both_sides(pricing: str, tmp_path: Path) -> None:
    out = run(LOG, "--json", "--tokens", "chars", "--policy", "economy", "--pricing", pricing, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    expected = PRESETS.get(pricing)
    read, write, price = (
        (expected.cache_read, expected.cache_write, expected.input_price) if expected else (0.2, 2.0, 4.0)
    )
    model = doc["cost_model"]
    assert (model["pricing"], model["cache_read"], model["cache_write"]) == (pricing, read, write)
    assert doc["policy"] == "economy"
    for s in [*doc["sessions"], doc["total"]]:
        for side in ("without", "with"):
            t = s[side]
            assert t["cache_read_tokens"] + t["cache_write_tokens"] + t["uncached_tokens"] == t["tokens"]
            assert (t["cache_write_tokens"] == 0) == (write == 1.0)
            assert t["cost"] == pytest.approx(
                read * t["cache_read_tokens"] + write * (t["cache_write_tokens"] + t["uncached_tokens"]),
                abs=0.01,
            )
            dollars = t["dollars"]
            assert dollars["total"] == pytest.approx(t["cost"] * price / 1e6, abs=1e-4)
            assert dollars["total"] == pytest.approx(
                dollars["cache_reads"] + dollars["cache_writes"] + dollars["uncached"], abs=1e-4
            )
    session = doc["sessions"][0]
    assert session["policy"] == "economy" and session["pricing"]["cache_read"] == read


def test_without_a_list_each_session_is_priced_at_its_agents_provider(tmp_path: Path) -> None:
    """Codex runs on OpenAI, Gemini CLI on Gemini, Claude Code on Anthropic: each log is priced so,
    and says where its list came from; a history in a provider format gets that format's list."""
    out = run(str(FIXTURES), "--json", "--tokens", "chars", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    by_format = {(s["format"], s["pricing"]["name"], s["pricing_source"]) for s in doc["sessions"]}
    assert ("codex", "openai", "log format") in by_format
    assert ("gemini-cli", "gemini", "log format") in by_format
    assert ("claude-code", "anthropic-5m", "log format") in by_format
    assert ("openai-chat", "openai", "history format") in by_format
    assert {name for f, name, _ in by_format if f == "codex"} == {"openai"}
    given = json.loads(
        run(str(FIXTURES), "--json", "--tokens", "chars", "--pricing", "deepseek", cwd=tmp_path).stdout
    )
    assert {(s["pricing"]["name"], s["pricing_source"]) for s in given["sessions"]} == {("deepseek", "given")}
    assert given["cost_model"]["pricing"] == "deepseek"


def test_the_table_names_policy_and_pricing(tmp_path: Path) -> None:
    out = run(LOG, "--tokens", "chars", "--policy", "seed", "--pricing", "deepseek", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "policy seed, pricing deepseek" in out.stdout
    # the cache split and the dollars are details: the 100-column table leaves them to --wide
    wide = run(LOG, "--tokens", "chars", "--policy", "seed", "--pricing", "deepseek", "--wide", cwd=tmp_path)
    assert "policy seed, pricing deepseek" in wide.stdout
    assert "read/write/uncached" in wide.stdout and "$ without → with" in wide.stdout


@pytest.mark.parametrize(("args", "says"), [(["--pricing", "cheap"], "unknown price list"),
                                            (["--pricing", "read=0.1"], "missing write=, ttl="),
                                            (["--policy", "fastest"], "Invalid value for '--policy'")])  # fmt: skip
def test_bad_options_exit_2_in_one_line(args: list[str], says: str, tmp_path: Path) -> None:
    out = run(LOG, *args, cwd=tmp_path)
    assert out.returncode == 2
    assert says in out.stderr and "Traceback" not in out.stderr
