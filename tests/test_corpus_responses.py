"""The hand-written Responses corpus (``tests/corpus/responses``, see its README): valid, items
that are no call and no output passed through in place, idempotent, in process and through the
CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import toolkeep

from .test_sdk_types import force

CORPUS = Path(__file__).parent / "corpus" / "responses"
FILES = sorted(CORPUS.glob("*.json"))
FMT = "openai-responses"
PAIRED = {"function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output"}

# what pairing must do to each file, as (kind, id); the items it removes, by input index
REPAIRS: dict[str, list[tuple[str, str]]] = {
    "broken-reasoning.json": [
        ("invalid_calls_pruned", "call_a1"),
        ("orphans_removed", "call_a1"),
        ("orphans_removed", "call_gone"),
        ("synthetic", "call_a3"),
    ],
    "joined-turns.json": [("orphans_removed", "call_from_another_session")],
}
REMOVED: dict[str, set[int]] = {"broken-reasoning.json": {1, 2, 5, 7}, "joined-turns.json": {2}}
NOT_IN_SDK = {"future-kinds.json"}  # kinds the SDK's types do not know


def load(path: Path) -> list[Any]:
    items: list[Any] = json.loads(path.read_text(encoding="utf-8"))
    return items


def check_prepared(path: Path, items: list[Any], out: list[Any]) -> None:
    """``out`` is valid; every item of ``items`` that pairing does not own or remove is in it,
    equal, in the same order; nothing is added but synthetic outputs; the SDK takes it."""
    assert toolkeep.validate(out, FMT) == []
    removed = REMOVED.get(path.name, set())
    carried = [x for i, x in enumerate(items) if i not in removed and x.get("type") not in PAIRED]
    assert [x for x in out if x.get("type") not in PAIRED] == carried
    kept = [x for i, x in enumerate(items) if i not in removed]
    added = [x for x in out if x not in kept]
    assert all(x["output"] == toolkeep.MISSING_RESULT_TEXT for x in added)
    assert len(out) == len(kept) + len(added)
    assert "(continue)" not in json.dumps(out)
    if path.name not in NOT_IN_SDK:
        pydantic = pytest.importorskip("pydantic")
        openai = pytest.importorskip("openai")
        adapter = pydantic.TypeAdapter(list[openai.types.responses.ResponseInputItemParam])
        assert force(adapter.validate_python(items)) == items  # the file itself is valid input
        assert force(adapter.validate_python(out)) == out


def test_the_corpus_is_there() -> None:
    """Control: the files the README lists are all here."""
    assert {p.name for p in FILES} == {
        "broken-reasoning.json", "compaction.json", "future-kinds.json", "item-reference.json",
        "joined-turns.json", "reasoning-encrypted.json", "server-items.json",
    }  # fmt: skip


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_session_prepare(path: Path, tmp_path: Path) -> None:
    """In process: valid, carried in place, the expected repairs only, idempotent; an untouched
    file comes back as the very same objects."""
    items = load(path)
    with toolkeep.Session(toolkeep.Config(), workspace=tmp_path / "ws") as session:
        out, report = session.prepare(items, format=FMT)
        again, again_report = session.prepare(out, format=FMT)
    check_prepared(path, items, out)
    assert [(r.kind, r.id) for r in report.repairs] == REPAIRS.get(path.name, [])
    assert again == out and again_report.repairs == []
    if path.name not in REPAIRS:
        assert len(out) == len(items) and all(a is b for a, b in zip(out, items, strict=True))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_cli_prepare(path: Path, tmp_path: Path) -> None:
    """``python -m toolkeep prepare FILE --format openai-responses -o OUT``: exit 0, the same
    output as in process, and prepared again (``OUT`` as input) byte-identical."""
    workspace = tmp_path / "ws"
    outs = []
    source = path
    for n in range(2):
        target = tmp_path / f"out{n}.json"
        done = subprocess.run(
            [sys.executable, "-m", "toolkeep", "prepare", str(source), "--format", FMT, "-o", str(target),
             "--workspace", str(workspace)],
            capture_output=True, text=True,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        outs.append(target.read_bytes())
        source = target
    assert outs[0] == outs[1]
    out = json.loads(outs[0])
    check_prepared(path, load(path), out)
    with toolkeep.Session(toolkeep.Config(), workspace=workspace) as session:
        in_process, _ = session.prepare(load(path), format=FMT)
    assert out == in_process
    valid = subprocess.run(
        [sys.executable, "-m", "toolkeep", "validate", str(tmp_path / "out0.json"), "--format", FMT],
        capture_output=True, text=True,
    )  # fmt: skip
    assert valid.returncode == 0, valid.stdout + valid.stderr
