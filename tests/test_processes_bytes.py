"""The same history with the same (default) config gives the same bytes in any process.

Each side is a real, separate interpreter (run at the same time, each with a temp dir of its own),
through the library's ``Session()`` and through ``toolkeep prepare``, in every format: the paths
the previews name are the conversation's directory under the per-user cache dir, never a random
one, and the agent can open them while the session lives.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolkeep.formats import FORMATS
from toolkeep.shorten import SAVED_PATH_RE

from .convert_formats import to_format
from .strategies import assistant, tool_result, tool_use, user

SCRIPT = Path(sys.executable).with_name("toolkeep")
TOOLKEEP = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "toolkeep"]

CHILD = r"""
import json, os, sys
import toolkeep
from toolkeep.shorten import SAVED_PATH_RE
fmt, history = sys.argv[1], json.load(sys.stdin)
if fmt == "langchain":
    from langchain_core.messages import messages_from_dict, messages_to_dict
    history = messages_from_dict(history)
with toolkeep.Session() as session:
    out, report = session.prepare(history, format=fmt)
    if fmt == "langchain":
        out = messages_to_dict(out)
    text = json.dumps(out, ensure_ascii=False, sort_keys=True)
    opened = [len(open(p, encoding="utf-8").read()) for p in SAVED_PATH_RE.findall(text)]
print(json.dumps({"out": text, "opened": opened, "persisted": report.persisted}))
"""


def conversation(fmt: str, test: str) -> list[Any]:
    """A broken, oversized session of its own (first message names the format and the test)."""
    history = [
        user(f"bytes in every process, {fmt}, {test}"),
        assistant(tool_use("a", "read"), tool_use("b", "grep")),
        user(tool_result("a", "line\n" * 6_000)),
        assistant(tool_use("c", "fetch")),
        user(tool_result("c", "é" * 25_000)),
        assistant(tool_use("d", "ls")),
        user(tool_result("d", "f.py\n" * 9_000)),
        assistant(tool_use("e", "cat")),
        user(tool_result("e", "z" * 40_000)),
        assistant("done"),
    ]
    converted = to_format(history, fmt)
    if fmt == "langchain":
        from langchain_core.messages import messages_to_dict

        return messages_to_dict(converted)
    return converted


def environment(tmp: Path) -> dict[str, str]:
    """The default config (no TOOLKEEP_* or CHATCLI_* setting), the tests' cache dir, a temp dir
    of this process's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLKEEP_", "CHATCLI_"))}
    env["TOOLKEEP_CACHE_DIR"] = os.environ["TOOLKEEP_CACHE_DIR"]
    tmp.mkdir()
    env["TMPDIR"] = str(tmp)
    return env


def both(commands: list[list[str]], stdin: bytes, tmp_path: Path) -> list[subprocess.CompletedProcess[bytes]]:
    """Run the commands at the same time, each in a process with its own temp dir."""
    running = [
        subprocess.Popen(
            c,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=environment(tmp_path / f"tmp{i}"),
        )
        for i, c in enumerate(commands)
    ]
    done = []
    for process, command in zip(running, commands, strict=True):
        out, err = process.communicate(stdin, timeout=300)
        done.append(subprocess.CompletedProcess(command, process.returncode, out, err))
        assert process.returncode == 0, err.decode()[-2000:]
    return done


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_library_sessions_in_two_processes(fmt: str, tmp_path: Path) -> None:
    """``Session().prepare`` in two interpreters gives the same bytes, naming files that exist."""
    if fmt == "langchain":
        pytest.importorskip("langchain_core")
    stdin = json.dumps(conversation(fmt, "library")).encode()
    runs = both([[sys.executable, "-c", CHILD, fmt]] * 2, stdin, tmp_path)
    first, second = (json.loads(r.stdout) for r in runs)
    assert first["out"] == second["out"]
    assert first["persisted"] >= 1
    assert first["opened"] and all(n > 0 for n in first["opened"])  # the agent can open them
    cache = str(Path(os.environ["TOOLKEEP_CACHE_DIR"]).resolve() / "sessions")
    assert all(p.startswith(cache + "/") for p in SAVED_PATH_RE.findall(first["out"]))
    assert str(tmp_path) not in first["out"]


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_cli_prepare_in_two_processes(fmt: str, tmp_path: Path) -> None:
    """``toolkeep prepare IN`` (no --workspace) in two processes writes the same bytes."""
    if fmt == "langchain":
        pytest.importorskip("langchain_core")
    source = tmp_path / "in.json"
    source.write_text(json.dumps(conversation(fmt, "cli")), encoding="utf-8")
    runs = both([[*TOOLKEEP, "prepare", str(source), "--format", fmt]] * 2, b"", tmp_path)
    assert runs[0].stdout == runs[1].stdout
    saved = SAVED_PATH_RE.findall(runs[0].stdout.decode())
    assert saved and all(Path(p).is_file() for p in saved)  # kept for read and recall
    workspace = Path(saved[0]).parents[1]
    assert f"session workspace: {workspace}" in runs[0].stderr.decode()
