"""``toolkeep replay`` fits 100 columns; ``--wide`` and ``--json`` give the details."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("rich")

SCRIPT = Path(sys.executable).with_name("toolkeep")
TOOLKEEP = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "toolkeep"]
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "broken-session.json"
WIDTH = 100


def replay(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLKEEP_", "CHATCLI_"))}
    env["TOOLKEEP_CACHE_DIR"] = os.environ["TOOLKEEP_CACHE_DIR"]
    env["COLUMNS"] = "300"  # a wide terminal's setting must not widen piped output
    done = subprocess.run(
        [*TOOLKEEP, "replay", *args, "--tokens", "chars"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    """Sessions with long names, in a directory."""
    for name in ("a" * 90, "b-" * 40 + "session", "short"):
        shutil.copy(EXAMPLE, tmp_path / f"{name}.json")
    return tmp_path


def test_the_table_fits_100_columns(sessions: Path) -> None:
    """Every line of the default output, table and notes, is at most 100 chars, and the first
    names the policy that ran (SPEC's here, whose ratio on the example is known)."""
    out = replay(str(sessions), "--policy", "spec").stdout
    lines = out.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= WIDTH, out
    assert lines[0].startswith("toolkeep replay: policy spec, pricing anthropic-5m")
    assert any("total (3 sessions)" in line for line in lines)
    assert "--wide" in out and "0.29" in out  # the ratio of tokens sent, whole
    assert replay(str(sessions)).stdout.startswith("toolkeep replay: policy economy, ")


def test_wide_has_every_column(sessions: Path) -> None:
    """``--wide`` shows without and with, the peak and the results cut."""
    out = replay(str(sessions), "--wide").stdout
    for column in ("sent without → with", "peak without → with", "pers/trunc/summ", "recallable"):
        assert column in out
    assert max(len(line) for line in out.splitlines()) > WIDTH


def test_json_has_the_details(sessions: Path) -> None:
    """``--json`` holds what the narrow table leaves out."""
    document = json.loads(replay(str(sessions), "--json").stdout)
    first = document["sessions"][0]
    assert {"tokens", "chars", "peak_tokens", "cost"} <= set(first["without"]) <= set(first["with"])
    assert {"persisted", "truncated", "summarized"} <= set(first["results"])
    assert document["total"]["sessions"] == 3
