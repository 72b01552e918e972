"""bench/soak.py at smoke size, as a real subprocess: conversations run through a real
``toolkeep proxy`` to the scripted upstream, every marker of the live conversations recalls
through the proxy's MCP route, no upstream request is invalid, and the disk check holds when the
proxy has its cap (``--max-disk-bytes``) and says so when it has none. No timing is asserted; RSS
flatness needs the long run, so the smoke run allows any growth."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.upstream_proxy import TOOLKEEP

BENCH = Path(__file__).resolve().parents[1] / "bench" / "soak.py"


@pytest.mark.slow  # a dozen conversations through a real proxy: about half a minute
def test_a_short_soak_recalls_every_live_marker_and_sends_nothing_invalid(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--minutes", "0.15", "--conversations", "10", "--turns", "5",
         "--think", "0.1", "--sample", "0.5", "--live", "4", "--cap-mb", "50", "--rss-growth", "100"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, check=False,
    )  # fmt: skip
    out = done.stdout
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    samples = re.search(r"; (\d+) samples \|", out)
    assert samples and int(samples[1]) >= 3, out  # sampled while it ran, not only at the end
    rows = dict(re.findall(r"^\| ([^|]+?) \| [^|]+ \| (yes|NO|n/a) \|$", out, re.M))
    assert len(rows) == 5, out + done.stderr[-3000:]
    live = re.search(r"\| (\d+) of (\d+) \(older conversations: (\d+) of (\d+)\)", out)
    assert live and live[1] == live[2] and int(live[2]) > 0, out
    assert "| 0 of " in out and rows["no request invalid"] == "yes"
    assert re.search(r"\| 50 requests, 0 errors, 0 conversations cancelled; the proxy exited 0 ", out), out
    capped = (
        "--max-disk-bytes"
        in subprocess.run([*TOOLKEEP, "proxy", "--help"], capture_output=True, text=True, check=True).stdout
    )
    failed = {check for check, passed in rows.items() if passed == "NO"}
    if capped:
        assert not failed and done.returncode == 0, out
    else:
        assert "WITHOUT a disk cap" in out
        assert failed == {"disk under the cap (50 MB)"} and done.returncode == 1, out
