"""One Session shared by threads gives every caller its own correct output; a closed one refuses.

Regression: two threads on one Session with different conversations got each other's messages
in their output (60, 36 and 11 of 60 outputs in three runs), or an IndexError."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

import toolkeep


def conversation(n: int, turns: int = 12) -> list[Any]:
    history: list[Any] = [{"role": "user", "content": f"task {n}"}]
    for k in range(turns):
        cid = f"c{n}_{k}"
        text = "".join(f"conversation {n} turn {k} line {i}\n" for i in range(300))
        history += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": cid, "name": "grep", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": cid, "content": text}]},
        ]
    return history


@pytest.mark.parametrize("policy", ["spec", "economy"])
def test_threads_sharing_a_session_get_their_own_output(policy: str, tmp_path: Path) -> None:
    """Eight threads, each growing its own conversation on one shared Session, get at every
    request what a session of their own gives."""
    config = toolkeep.Config(policy=policy)
    histories = [conversation(n) for n in range(8)]
    expected: dict[tuple[int, int], str] = {}
    for n, h in enumerate(histories):
        with toolkeep.Session(config, workspace=tmp_path / "ws") as own:
            for end in range(1, len(h) + 1):
                expected[(n, end)] = json.dumps(own.prepare(h[:end], "anthropic").messages)
    got: dict[tuple[int, int], str] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(8)
    with toolkeep.Session(config, workspace=tmp_path / "ws") as shared:

        def agent(n: int) -> None:
            try:
                start.wait()
                h = histories[n]
                for end in range(1, len(h) + 1):
                    got[(n, end)] = json.dumps(shared.prepare(h[:end], "anthropic").messages)
            except BaseException as exc:  # reported below, with the thread's conversation
                errors.append(exc)

        threads = [threading.Thread(target=agent, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
    assert got == expected


def test_a_closed_session_refuses_work(tmp_path: Path) -> None:
    session = toolkeep.Session(workspace=tmp_path / "ws")
    session.prepare(conversation(0, 2), "anthropic")
    session.close()
    with pytest.raises(toolkeep.SessionClosedError):
        session.prepare(conversation(0, 3), "anthropic")
    with pytest.raises(toolkeep.SessionClosedError):
        session.cap_result("c", "grep", "x" * 100_000)
