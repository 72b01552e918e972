"""bench/proxy_load.py at test size, as a real subprocess: every load runs each way, every request
is answered, and the CPU each process took is read (no timing is asserted: the bench reports it);
and its peer run (--peers) on real trajectories, toolkeep and direct, and each peer (Headroom,
LiteLLM) whose venv the bench made before (skipped, with the reason, when it is not there)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "proxy_load.py"


@pytest.mark.slow  # runs the load bench: most of a minute
def test_the_load_bench_runs_every_load_each_way(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--seconds", "2", "--conversations", "3", "--light-seconds", "1",
         "--think", "0.2", "--policy", "economy"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = re.findall(
        r"^\| ([^|]+) \| ([^|]+) \| ([\d,]+) \|.*\|\s*(\S*)\s*\| ([\d.]+) \| (\S+) \|$", done.stdout, re.M
    )
    loads = {
        (load, way): (int(n.replace(",", "")), proxy_cpu, errors)
        for load, way, n, proxy_cpu, _, errors in rows
    }
    assert set(loads) == {
        (load, way)
        for load in ("1 alone", "3 back to back", "3 paced, 0.2 s apart")
        for way in ("direct", "through the proxy, `economy`", "through the proxy, forwarded as is")
    }
    for (_, way), (requests, proxy_cpu, errors) in loads.items():
        assert requests > 0 and errors == "0"
        assert (proxy_cpu == "") is (way == "direct")  # the proxy's CPU, where there is a proxy
        if proxy_cpu:
            assert float(proxy_cpu) > 0
    assert re.search(r"The proxy: uvicorn on (uvloop|asyncio), parsing with (httptools|h11);", done.stdout)
    assert "killed mid-stream: the client got " in done.stdout and "intact after it" in done.stdout
    assert "429 (same body), 500 (same body), 529 (same body)" in done.stdout


def _bench_module() -> Any:
    spec = importlib.util.spec_from_file_location("proxy_load_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _peers_table(tmp_path: Path, ways: str) -> dict[str, dict[str, str]]:
    """bench/proxy_load.py --peers at test size, on two real trajectories (one of them ends with a
    tool call the run never answered, so its resumed request is broken as sent): each row's cell
    per way."""
    done = subprocess.run(
        [sys.executable, str(BENCH), "--peers", "--ways", ways, "--no-install",
         "--only", "ponyc-4595,basic_gui_mode", "--at-once", "2", "--think", "0.1", "--seconds", "3",
         "--saturation-seconds", "2"],
        capture_output=True, text=True, timeout=900, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    head = [c.strip() for c in lines[0].strip("|").split("|")][1:]
    table = {}
    for line in lines[1:]:
        label, *cells = (c.strip() for c in line.strip("|").split("|"))
        table[label] = dict(zip(head, cells, strict=True))
    assert re.search(r"^- toolkeep: toolkeep \S+: `toolkeep proxy ", done.stdout, re.M), done.stdout
    return table


def _check_way(table: dict[str, dict[str, str]], way: str) -> None:
    for label in ("added first byte p50, one conversation alone", "added first byte p99, 2 at once"):
        assert re.fullmatch(r"[+-]\d+\.\d ms", table[label][way])
    assert re.fullmatch(r"\d+\.\d req/s", table["throughput at saturation (2 back to back)"][way])
    assert float(table["CPU per request"][way].removesuffix(" ms")) > 0
    assert float(table["peak RSS"][way].removesuffix(" MB")) > 0
    assert re.fullmatch(r"\d\.\d\dx", table["cache-aware cost of what reached the upstream"][way])
    assert table["errors (all loads)"][way] == "0"


@pytest.mark.slow  # the peer bench at test size: about a minute
def test_the_peer_bench_replays_real_trajectories_through_toolkeep_and_direct(tmp_path: Path) -> None:
    """Every row for direct and toolkeep; the broken request as sent reaches the upstream broken
    directly, and repaired through toolkeep; toolkeep's requests cost no more than direct's."""
    table = _peers_table(tmp_path, "toolkeep")
    _check_way(table, "toolkeep")
    assert table["cache-aware cost of what reached the upstream"]["direct"] == "1.00x"
    alone = table["of them, in the one-conversation load"]
    sent = re.fullmatch(r"(\d+) of (\d+)", alone["direct"])
    assert sent and int(sent[1]) == 1, alone
    assert alone["toolkeep"] == f"0 of {sent[2]}"
    assert table["upstream requests breaking the provider's rules"]["toolkeep"].startswith("0 of ")
    assert float(table["cache-aware cost of what reached the upstream"]["toolkeep"].removesuffix("x")) <= 1.0


@pytest.mark.slow  # starts the peer's proxy (Headroom: most of a minute) beside toolkeep's
@pytest.mark.parametrize("peer", ["headroom", "litellm"])
def test_a_peer_runs_in_the_same_run_when_its_venv_is_there(tmp_path: Path, peer: str) -> None:
    venv, why = _bench_module().peer_venv(peer, install=False)
    if venv is None:
        pytest.skip(why)
    table = _peers_table(tmp_path, f"toolkeep,{peer}")
    name = {"headroom": "Headroom", "litellm": "LiteLLM"}[peer]
    _check_way(table, name)
    _check_way(table, "toolkeep")
