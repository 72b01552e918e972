"""Every example in examples/ runs, as a real subprocess, offline."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
GENERATOR = "make_broken_session.py"
SCRIPTS = sorted(p.name for p in EXAMPLES.glob("*.py") if p.name != GENERATOR)

# what each example must print: the evidence that toolkeep did its part (as regexes: sizes that
# include the saved file's path depend on where the workspace is)
EXPECTED = {
    "anthropic_loop.py": [
        r"toolu_1: 30,000 chars in the history",  # cut to its 30,000 cap as it entered
        r"more: call recall with key=[0-9a-f]{16}",
    ],
    "openai_loop.py": [r"repairs \['synthetic call_1'\]", r"the search result I was sent is 1\d,\d{3} chars"],
    "langchain_agent.py": [
        # six reads in a row: economy holds reads a turn, and no batch is free before six stall
        r"sent tool results of \[6260, 6260, 6260, 6260, 6260, 6260\]",
        r"keeps them whole: \[6260, 6260, 6260, 6260, 6260, 6260\]",
    ],
    "pydantic_ai_agent.py": [r"fetch result: 11,\d{3} chars", r"recall result: 209 chars", r"row 2"],
    "openai_agents_agent.py": [r"tool outputs of \[162, 9\d{3}\] chars", r"finished every job"],
}


def run(script: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in ``cwd``, its session workspaces under ``cwd/cache`` (the per-user cache
    dir) and its temporary files under ``cwd/tmp``."""
    (cwd / "tmp").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLKEEP_", "CHATCLI_"))}
    env["TMPDIR"] = str(cwd / "tmp")
    env["TOOLKEEP_CACHE_DIR"] = str(cwd / "cache")
    env["OPENAI_API_KEY"] = env["ANTHROPIC_API_KEY"] = "offline"  # the examples must not need real keys
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_every_example_is_covered() -> None:
    """Each example file has its expected output listed here, so a new one cannot go untested."""
    assert sorted(EXPECTED) == SCRIPTS


@pytest.mark.parametrize("name", SCRIPTS)
def test_example_runs(name: str, tmp_path: Path) -> None:
    """The example exits 0 and prints what shows toolkeep at work."""
    done = run(EXAMPLES / name, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    for pattern in EXPECTED[name]:
        assert re.search(pattern, done.stdout), (pattern, done.stdout)
    sessions = tmp_path / "cache" / "sessions"
    assert sessions.is_dir()  # the example's sessions had their workspaces there...
    left = [p.name for p in sessions.iterdir() if not p.name.startswith(".")]
    assert left == []  # ...and each removed its own (with its lock) on the way out
    assert list((tmp_path / "tmp").glob("toolkeep-*")) == []


def test_broken_session_generator(tmp_path: Path) -> None:
    """make_broken_session.py, run from a copy, writes exactly the committed broken-session.json."""
    shutil.copy(EXAMPLES / GENERATOR, tmp_path / GENERATOR)
    done = run(tmp_path / GENERATOR, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "broken-session.json").read_bytes() == (EXAMPLES / "broken-session.json").read_bytes()
