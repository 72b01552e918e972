"""``toolkeep replay`` shows what it is doing on a terminal from the start, and ``--quiet`` does not."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import threading
import time
from pathlib import Path

from .conftest import BENCH_DATA, shared_or_skip
from .test_replay_cli import FIXTURES


def run_on_a_terminal(
    *args: str, cwd: Path
) -> tuple[subprocess.CompletedProcess[str], list[tuple[float, bytes]]]:
    """``toolkeep replay ARGS`` with stderr on a pseudo-terminal: the result, and what stderr got,
    each chunk with the seconds since the start."""
    master, slave = pty.openpty()
    chunks: list[tuple[float, bytes]] = []
    start = time.monotonic()

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            chunks.append((time.monotonic() - start, data))

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    env = {**os.environ, "XDG_CACHE_HOME": str(cwd / "cache"), "TERM": "xterm", "COLUMNS": "120"}
    proc = subprocess.run(
        [sys.executable, "-m", "toolkeep", "replay", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=slave,
        text=True,
        timeout=900,
    )
    os.close(slave)
    reader.join(timeout=10)
    os.close(master)
    return proc, chunks


def test_progress_from_the_first_file_on_the_raw_logs(tmp_path: Path) -> None:
    """On the real raw logs, the display is drawn while the files are still being read (before any
    request is replayed), then names the session being replayed with requests done and time left."""
    shared_or_skip()
    raw = BENCH_DATA / "raw"
    proc, chunks = run_on_a_terminal(str(raw), "--tokens", "chars", cwd=tmp_path)
    assert proc.returncode == 0
    assert "total (" in proc.stdout
    shown = b"".join(data for _, data in chunks)
    # the first frame: a file being read, before any session is replayed
    assert 0 <= shown.index(b"reading") < shown.index(b" sessions)"), shown[:500]
    assert b"requests" in shown and b"left" in shown
    first_at = next(at for at, data in chunks if b"reading" in data)
    assert chunks[-1][0] > first_at  # drawn again as the run went on
    print(f"first progress frame after {first_at:.2f} s of {chunks[-1][0]:.1f} s")


def test_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    """With stderr on a terminal a progress display is drawn there; stdout still gets the table."""
    proc, chunks = run_on_a_terminal(str(FIXTURES / "sweagent-demo.traj"), cwd=tmp_path)
    assert proc.returncode == 0
    assert "total (1 session)" in proc.stdout
    assert b"sessions" in b"".join(data for _, data in chunks)


def test_quiet_draws_nothing(tmp_path: Path) -> None:
    proc, chunks = run_on_a_terminal(
        str(FIXTURES / "sweagent-demo.traj"), "--tokens", "chars", "--quiet", cwd=tmp_path
    )
    assert proc.returncode == 0 and "total (1 session)" in proc.stdout
    assert b"".join(data for _, data in chunks).strip() == b""


def test_codex_rollouts_are_priced_at_openai_in_the_table(tmp_path: Path) -> None:
    """The table says which list priced each session: a Codex rollout's is OpenAI's."""
    logs = [
        str(FIXTURES / "rollout-2025-12-08T00-37-46-codex.jsonl"),
        str(FIXTURES / "claude-code-session.jsonl"),
    ]
    proc, _ = run_on_a_terminal(*logs, "--tokens", "chars", "--quiet", cwd=tmp_path)
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert "pricing by session (anthropic-5m, openai)" in " ".join(lines[:2])
    codex = next(n for n, line in enumerate(lines) if line.lstrip().startswith("rollout-2025"))
    assert "codex" in lines[codex] and "openai" in lines[codex + 1]
    claude = next(n for n, line in enumerate(lines) if "claude-code-session" in line)
    assert "anthropic-5m" in lines[claude + 1]
    assert max(len(line.rstrip()) for line in lines) <= 100
