"""bench/proxy_load.py at test size, as a real subprocess: every load runs each way, every request
is answered, and the CPU each process took is read (no timing is asserted: the bench reports it)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

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
