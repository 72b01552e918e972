"""What a team's proxy shows: ``GET /metrics`` (Prometheus text, by route and policy), the JSON
request log (``--log-json``), statistics that survive a restart and are shared by replicas
(``/toolkeep/stats``, per conversation), and ``--config FILE``. The real ``toolkeep proxy`` in a
subprocess, in front of the scripted upstream; Redis where replicas share a store."""

from __future__ import annotations

import json
import math
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

httpx = pytest.importorskip("httpx", reason="the proxy extra is not installed: pip install 'toolkeep[proxy]'")
pytest.importorskip("starlette", reason="the proxy extra is not installed: pip install 'toolkeep[proxy]'")
pytest.importorskip("uvicorn", reason="the proxy extra is not installed: pip install 'toolkeep[proxy]'")

from tests import redis_server  # noqa: E402
from tests.upstream_proxy import TOOLKEEP, ProxyProcess, read_history  # noqa: E402
from tests.upstream_server import ScriptedUpstream  # noqa: E402
from toolkeep.cli._app import cli  # noqa: E402
from toolkeep.cli._configfile import file_keys  # noqa: E402
from toolkeep.costs import request_segments, serialize_message  # noqa: E402
from toolkeep.proxy.metrics import Registry  # noqa: E402
from toolkeep.requests import system_text  # noqa: E402

redis_url = redis_server.redis_url

SAMPLE = re.compile(r"^([a-z_]+)(\{[^}]*\})? (\S+)$")


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedUpstream]:
    server = ScriptedUpstream()
    yield server
    server.close()


def parse_metrics(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Each sample of a Prometheus text page, by name and labels; every line is a comment or a
    sample (the format's grammar, as a scraper reads it)."""
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        match = SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        labels = frozenset(re.findall(r'([a-z_]+)="((?:[^"\\]|\\.)*)"', match[2] or ""))
        out[(match[1], labels)] = float(match[3])
    return out


def sample(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def send_conversation(url: str, turns: int, first: str = "read the files") -> list[dict[str, Any]]:
    history = read_history(turns, first=first)
    for n in range(1, turns + 1):
        response = httpx.post(f"{url}/v1/messages", json={"model": "echo", "messages": history[: 1 + 2 * n]})
        assert response.status_code == 200
    return history


def chars4(history: list[dict[str, Any]], body: dict[str, Any]) -> int:
    """The size of a request as ``toolkeep replay --tokens chars`` counts it: ceil(chars/4) of
    each segment of the serialized request."""
    segments = request_segments(system_text(body), [serialize_message(m) for m in history])
    return sum(math.ceil(len(s) / 4) for s in segments)


# -- metrics and the JSON log --------------------------------------------------------------------


def test_metrics_and_the_json_log_describe_every_request(upstream: ScriptedUpstream, tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    args = ["--anthropic-upstream", upstream.url, "--workspace", str(tmp_path / "ws"), "--log-json", str(log)]
    with ProxyProcess(*args, "--policy", "spec") as proxy:
        history = send_conversation(proxy.url, 6)
        httpx.post(f"{proxy.url}/v1/messages/count_tokens", json={"model": "echo", "messages": history})
        broken = httpx.post(
            f"{proxy.url}/v1/messages", content=b"{not json", headers={"content-type": "application/json"}
        )
        page = httpx.get(f"{proxy.url}/metrics")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = parse_metrics(page.text)
    on = {"route": "anthropic", "policy": "spec"}
    assert sample(samples, "toolkeep_proxy_requests_total", outcome="prepared", **on) == 6
    assert sample(samples, "toolkeep_proxy_requests_total", outcome="failed_open", **on) == 1
    assert (
        sample(
            samples, "toolkeep_proxy_requests_total", outcome="forwarded", route="forwarded", policy="spec"
        )
        == 1
    )
    assert sample(samples, "toolkeep_proxy_fail_open_total", **on) == 1
    assert sample(samples, "toolkeep_proxy_prepare_seconds_count", **on) == 7
    assert sample(samples, "toolkeep_proxy_prepare_seconds_bucket", le="+Inf", **on) == 7
    before = sample(samples, "toolkeep_proxy_tokens_total", side="before", **on)
    after = sample(samples, "toolkeep_proxy_tokens_total", side="after", **on)
    assert 0 < after < before
    assert sample(samples, "toolkeep_proxy_cache_tokens_total", kind="read", **on) > 0
    assert sample(samples, "toolkeep_proxy_cache_tokens_total", kind="written", **on) > 0
    unmanaged = sample(samples, "toolkeep_proxy_cost_total", side="unmanaged", **on)
    assert 0 < sample(samples, "toolkeep_proxy_cost_total", side="managed", **on) < unmanaged
    assert sample(samples, "toolkeep_proxy_conversations_live") == 1
    answered = sample(
        samples, "toolkeep_proxy_upstream_responses_total", status=str(broken.status_code), **on
    )
    assert answered == (7 if broken.status_code == 200 else 1)

    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == 8
    prepared = [line for line in lines if line["outcome"] == "prepared"]
    assert len(prepared) == 6 and len({line["conversation"] for line in prepared}) == 1
    for n, line in enumerate(prepared, start=1):
        body = {"model": "echo", "messages": history[: 1 + 2 * n]}
        assert (
            line["tokens"]["unit"] == "chars/4"
            and "toolkeep replay --tokens chars" in line["tokens"]["counted"]
        )
        assert line["tokens"]["before"] == chars4(history[: 1 + 2 * n], body)
        assert line["status"] == 200 and line["end"] == "ok" and line["prepare_ms"] >= 0
        assert line["path"] == "/v1/messages" and line["route"] == "anthropic" and line["policy"] == "spec"
        assert isinstance(line["repairs"], dict) and isinstance(line["tiers_moved"], dict)
    assert sum(line["tokens"]["before"] for line in prepared) == before
    assert sum(line["tokens"]["after"] for line in prepared) == after
    assert any(sum(line["tiers_moved"].values()) for line in prepared)  # results did move
    failed = [line for line in lines if line["outcome"] == "failed_open"]
    assert len(failed) == 1 and "not JSON" in failed[0]["error"]
    assert [line["outcome"] for line in lines if line["path"] == "/v1/messages/count_tokens"] == ["forwarded"]


def test_the_log_line_says_what_its_figures_count(upstream: ScriptedUpstream, tmp_path: Path) -> None:
    with ProxyProcess("--anthropic-upstream", upstream.url, "--workspace", str(tmp_path)) as proxy:
        send_conversation(proxy.url, 2)
        lines = proxy.log_lines("/v1/messages")
    assert lines and all(" chars/4 " in line and "base-price tokens (cache-aware)" in line for line in lines)
    assert not any("saved" in line for line in lines)


def test_an_unopenable_log_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            *TOOLKEEP,
            "proxy",
            "--port",
            "0",
            "--workspace",
            str(tmp_path),
            "--log-json",
            str(tmp_path / "no" / "x"),
        ],
        capture_output=True,
        timeout=60,
    )
    lines = result.stderr.decode().strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "--log-json" in lines[0], lines


def test_the_registry_renders_what_a_scraper_parses() -> None:
    registry = Registry()
    registry.inc("toolkeep_proxy_requests_total", 2, route='a"b\\c', policy="spec", outcome="prepared")
    for value in (0.0005, 0.02, 100.0):
        registry.observe("toolkeep_proxy_prepare_seconds", value, route="r", policy="p")
    registry.gauge("toolkeep_proxy_conversations_live", lambda: 3)
    samples = parse_metrics(registry.render())
    assert (
        sample(
            samples, "toolkeep_proxy_requests_total", route='a\\"b\\\\c', policy="spec", outcome="prepared"
        )
        == 2
    )
    assert sample(samples, "toolkeep_proxy_prepare_seconds_bucket", route="r", policy="p", le="0.001") == 1
    assert sample(samples, "toolkeep_proxy_prepare_seconds_bucket", route="r", policy="p", le="0.025") == 2
    assert sample(samples, "toolkeep_proxy_prepare_seconds_bucket", route="r", policy="p", le="+Inf") == 3
    assert sample(samples, "toolkeep_proxy_prepare_seconds_sum", route="r", policy="p") == pytest.approx(
        100.0205
    )
    assert sample(samples, "toolkeep_proxy_conversations_live") == 3


# -- statistics in the store ---------------------------------------------------------------------


def test_statistics_survive_a_restart_and_show_each_conversation(
    upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    log = tmp_path / "log.jsonl"
    args = ["--anthropic-upstream", upstream.url, "--workspace", str(tmp_path / "ws"), "--log-json", str(log)]
    with ProxyProcess(*args) as proxy:
        send_conversation(proxy.url, 3, first="one")
        send_conversation(proxy.url, 2, first="two")
        first = httpx.get(f"{proxy.url}/toolkeep/stats").json()
    assert (first["requests"], first["prepared"], first["conversations"]["started"]) == (5, 5, 2)
    keys = {json.loads(line)["conversation"] for line in log.read_text().splitlines()}
    with ProxyProcess(*args) as proxy:
        after = httpx.get(f"{proxy.url}/toolkeep/stats").json()
        assert after["requests"] == 5 and after["conversations"] == {"active": 0, "started": 2}
        assert after["tokens"] == first["tokens"] and after["cost"] == first["cost"]
        send_conversation(proxy.url, 1, first="one")  # the first conversation goes on
        again = httpx.get(f"{proxy.url}/toolkeep/stats").json()
        listing = httpx.get(f"{proxy.url}/toolkeep/stats/conversations").json()["conversations"]
        views = {
            key: httpx.get(f"{proxy.url}/toolkeep/stats", params={"conversation": key}).json() for key in keys
        }
        missing = httpx.get(f"{proxy.url}/toolkeep/stats", params={"conversation": "0" * 16})
    assert (
        again["requests"] == 6 and again["conversations"]["started"] == 2 and again["statuses"] == {"200": 6}
    )
    assert {c["conversation"] for c in listing} == keys
    assert sorted(v["requests"] for v in views.values()) == [2, 4]
    assert sum(v["tokens"]["before"] for v in views.values()) == again["tokens"]["before"]
    assert all(v["route"] == "anthropic" and v["first_seen"] <= v["last_seen"] for v in views.values())
    assert missing.status_code == 404


def test_replicas_sharing_a_redis_store_add_to_the_same_statistics(
    upstream: ScriptedUpstream, tmp_path: Path, redis_url: str
) -> None:
    store = f"{redis_url}?prefix={redis_server.fresh_prefix()}"
    common = ["--anthropic-upstream", upstream.url, "--store", store]
    with (
        ProxyProcess(*common, "--workspace", str(tmp_path / "a")) as one,
        ProxyProcess(*common, "--workspace", str(tmp_path / "b")) as two,
    ):
        history = read_history(4, first="shared")
        for n, proxy in zip(range(1, 5), [one, two, one, two], strict=True):
            httpx.post(f"{proxy.url}/v1/messages", json={"model": "echo", "messages": history[: 1 + 2 * n]})
        # each replica writes its figures a second at most after counting them (and before it answers)
        deadline = time.monotonic() + 20
        while True:
            seen = [httpx.get(f"{p.url}/toolkeep/stats").json() for p in (one, two)]
            if all(s["requests"] == 4 for s in seen) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        listing = httpx.get(f"{one.url}/toolkeep/stats/conversations").json()["conversations"]
    for stats in seen:
        assert (stats["requests"], stats["prepared"], stats["conversations"]["started"]) == (4, 4, 1)
        assert stats["kept_in"].startswith("redis")
    assert len(listing) == 1 and listing[0]["requests"] == 4


# -- the config file -----------------------------------------------------------------------------


def test_a_config_file_sets_the_flags_and_flags_override_it(
    upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    log = tmp_path / "from-file.jsonl"
    config = tmp_path / "proxy.toml"
    config.write_text(
        f'anthropic_upstream = "{upstream.url}"\n'
        f'workspace = "{tmp_path / "ws"}"\n'
        f'log_json = "{log}"\n'
        'policy = "spec"\n'
        "max_result_chars = 30000\n"
        "remote_agents = true\n"
        'max_disk_bytes = "200M"\n'
    )
    with ProxyProcess("--config", str(config)) as proxy:
        send_conversation(proxy.url, 1)
        labels = parse_metrics(httpx.get(f"{proxy.url}/metrics").text)
    assert (
        sample(labels, "toolkeep_proxy_requests_total", outcome="prepared", route="anthropic", policy="spec")
        == 1
    )
    assert json.loads(log.read_text().splitlines()[0])["policy"] == "spec"
    assert (tmp_path / "ws" / "stats.db").exists()
    with ProxyProcess("--config", str(config), "--policy", "economy") as proxy:  # the flag wins
        send_conversation(proxy.url, 1)
    assert json.loads(log.read_text().splitlines()[-1])["policy"] == "economy"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("port = 0\nbogus_setting = 1\n", "unknown key 'bogus_setting'"),
        ("store_url = 'sqlite:///x.db'\n", "unknown key 'store_url'"),
        ("port = [1, 2]\n", "port must be a string, number or true/false"),
        ("port = 'eighty'\n", "'eighty'"),
        ("policy = 'nonsense'\n", "'nonsense' is not a policy"),
        ("port = \n", "is not TOML"),
    ],
)
def test_a_bad_config_file_is_one_line_naming_the_key_and_exit_2(
    tmp_path: Path, text: str, said: str
) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(text)
    result = subprocess.run(
        [*TOOLKEEP, "proxy", "--config", str(config), "--workspace", str(tmp_path)],
        capture_output=True,
        timeout=60,
    )
    lines = result.stderr.decode().strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and said in lines[0], lines


def test_every_flag_of_the_proxy_is_a_key_of_its_config_file() -> None:
    command = cli.commands["proxy"]
    keys = file_keys(command)
    for param in command.params:
        longs = [o for o in param.opts if o.startswith("--") and o not in ("--help", "--config")]
        for opt in longs:
            assert keys[opt[2:].replace("-", "_")] == param.name
    assert {
        "port",
        "anthropic_upstream",
        "workspace",
        "store",
        "policy",
        "log_json",
        "max_disk_bytes",
    } <= set(keys)


def test_a_preparation_past_its_timeout_counts_as_a_fail_open_of_its_route(
    upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    log = tmp_path / "log.jsonl"
    args = ["--anthropic-upstream", upstream.url, "--workspace", str(tmp_path / "ws"), "--log-json", str(log)]
    with ProxyProcess(*args, "--prepare-timeout", "0.000001") as proxy:
        history = read_history(12, size=3_000)
        httpx.post(f"{proxy.url}/v1/messages", json={"model": "echo", "messages": history}, timeout=60)
        samples = parse_metrics(httpx.get(f"{proxy.url}/metrics").text)
    on = {"route": "anthropic", "policy": "economy"}
    assert sample(samples, "toolkeep_proxy_fail_open_total", **on) == 1
    assert sample(samples, "toolkeep_proxy_requests_total", outcome="failed_open", **on) == 1
    (line,) = [json.loads(text) for text in log.read_text().splitlines()]
    assert (
        line["outcome"] == "failed_open"
        and "--prepare-timeout" in line["error"]
        and line["route"] == "anthropic"
    )
