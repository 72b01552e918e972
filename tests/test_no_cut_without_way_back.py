"""An original the archive refuses is never cut away: the result stays whole, or a cut says why
nothing was saved (issue: "cut with no way back"). Every policy, a store that refuses writes and
a real SQLite store over its size cap."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import toolkeep
from toolkeep.exceptions import StoreError
from toolkeep.pipeline import POLICIES
from toolkeep.shorten import CCR_MARKER_RE
from toolkeep.stores import MemoryStore, open_store


class RefusingStore(MemoryStore):
    """A store that is full: every write fails as a real one does when over its cap."""

    def put(self, key: str, text: str) -> None:
        raise StoreError("store full")


def history(results: int = 8) -> list[Any]:
    out: list[Any] = [{"role": "user", "content": "go"}]
    for n in range(results):
        text = "".join(f"result {n} line {k}: value={k * n}\n" for k in range(400))
        out += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{n}", "name": "grep", "input": {}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": text}]},
        ]
    return [*out, {"role": "assistant", "content": "done"}, {"role": "user", "content": "next"}]


def originals(messages: list[Any]) -> dict[str, str]:
    return {
        b["tool_use_id"]: b["content"]
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    }


def stores(tmp_path: Path) -> list[tuple[str, Any]]:
    return [
        ("refusing", RefusingStore()),
        ("sqlite-over-cap", open_store(f"sqlite:///{tmp_path}/sq.db?max_bytes=4K")),
    ]


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("which", ["refusing", "sqlite-over-cap"])
def test_a_refused_original_is_never_cut_away(policy: str, which: str, tmp_path: Path) -> None:
    """Every result the pipeline shortened carries a way back that works, or says why it could
    not be saved; one whose original the store refused and no file holds stays whole."""
    store = dict(stores(tmp_path))[which]
    h = history()
    whole = originals(h)
    # no workspace: a persisted file would be a way back of its own; here only the archive is
    config = toolkeep.Config(policy=policy, max_result_chars=100_000)
    with toolkeep.Session(config, store=store) as session:
        errors: list[str] = []
        for end in range(2, len(h) + 1):
            out, report = session.prepare(h[:end], format="anthropic")
            errors += report.save_errors
        for call_id, text in originals(out).items():
            if text == whole[call_id]:
                continue
            keys = CCR_MARKER_RE.findall(text)
            back = [store.get(k) for k in keys]
            assert whole[call_id] in back or "could not be saved" in text, (call_id, text[:200])
    if which == "refusing":
        assert errors  # the failure is reported, not silent
    store.close()


def test_cli_exit_status_shows_what_could_not_be_saved(tmp_path: Path) -> None:
    """``toolkeep prepare`` with a store over its cap writes the output and exits 3, one line on
    stderr; with room in the store it exits 0 (the issue's example: six 8k results, a 4K store)."""
    import json
    import subprocess
    import sys

    source = tmp_path / "in.json"
    source.write_text(json.dumps(history(6)), encoding="utf-8")

    def run(store: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "toolkeep", "prepare", str(source), "-o", str(tmp_path / "out.json"),
             "--workspace", str(tmp_path / "ws"), "--store", store],
            capture_output=True, text=True, check=False,
        )  # fmt: skip

    full = run(f"sqlite:///{tmp_path}/small.db?max_bytes=4K")
    assert full.returncode == 3, full.stderr
    assert "original(s) could not be saved" in full.stderr.splitlines()[-1]
    out = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    assert toolkeep.validate(out, "anthropic") == []
    whole = originals(history(6))
    for call_id, text in originals(out).items():  # each cut leads to a file or says why not
        assert text == whole[call_id] or "full output saved to" in text or "could not be saved" in text
    roomy = run(f"sqlite:///{tmp_path}/big.db")
    assert roomy.returncode == 0, roomy.stderr
