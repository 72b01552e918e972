"""Golden files: real-shaped histories per format, prepared, compared with the pinned output.

Each ``tests/golden/<format>/<case>.input.json`` is a history written by hand in that provider's
shape (images, documents, cache points, thinking/reasoning, server tools, unknown keys). A
``valid*`` case must come back byte-identical; every case's prepared output and report are pinned
in ``<case>.prepared.json`` and its pairing repairs in ``<case>.repairs.json``, with the workspace path written
``<WORKSPACE>``. Regenerate the pins with ``TOOLKEEP_REGEN_GOLDEN=1``, then review the diff.

The pins are SPEC's (``policy="spec"``); the default policy's output is pinned beside them in
``<case>.economy.prepared.json``, and its repairs must be the same pin (pairing is every policy's
first step).

A string ``"@@repeat N TEXT"`` in an input stands for TEXT repeated N times, so that big tool
outputs need not be stored.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import toolkeep

GOLDEN = Path(__file__).parent / "golden"
REGEN = os.environ.get("TOOLKEEP_REGEN_GOLDEN") == "1"
CASES = sorted(GOLDEN.glob("*/*.input.json"))
PINNED = {"spec": "", "economy": ".economy"}
"""The policies whose output is pinned, with the infix of their ``prepared`` pins."""


def expand(value: Any) -> Any:
    """``value`` with every ``"@@repeat N TEXT"`` string expanded."""
    if isinstance(value, str) and value.startswith("@@repeat "):
        _, count, text = value.split(" ", 2)
        return text * int(count)
    if isinstance(value, list):
        return [expand(v) for v in value]
    if isinstance(value, dict):
        return {k: expand(v) for k, v in value.items()}
    return value


def pinned(value: Any, workspace: Path) -> str:
    """The text a pin holds: indented JSON, the workspace path normalised."""
    text = json.dumps(value, ensure_ascii=False, indent=1) + "\n"
    return text.replace(str(workspace), "<WORKSPACE>")


def check_pin(path: Path, text: str) -> None:
    """Compare ``text`` with the pin at ``path`` (or write it when regenerating)."""
    if REGEN or not path.exists():
        if not REGEN:
            pytest.fail(f"no pin {path.name}: run with TOOLKEEP_REGEN_GOLDEN=1 and review it")
        path.write_text(text, encoding="utf-8")
        return
    assert text == path.read_text(encoding="utf-8"), f"{path} differs (TOOLKEEP_REGEN_GOLDEN=1 to update)"


def case_id(path: Path) -> str:
    return f"{path.parent.name}/{path.name.removesuffix('.input.json')}"


@pytest.mark.parametrize("policy", sorted(PINNED))
@pytest.mark.parametrize("path", CASES, ids=case_id)
def test_golden(path: Path, policy: str, tmp_path: Path) -> None:
    """The prepared output and report equal the pins, and the output passes the validator."""
    fmt = path.parent.name
    messages = expand(json.loads(path.read_text(encoding="utf-8")))
    source = json.dumps(messages)
    workspace = tmp_path / "ws"
    with toolkeep.Session(toolkeep.Config(policy=policy), workspace=workspace) as session:
        prepared, report = session.prepare(messages, format=fmt)
    assert json.dumps(messages) == source  # the input is untouched
    assert toolkeep.validate(prepared, fmt) == []
    assert toolkeep.detect_format(messages).name == fmt
    stem = path.name.removesuffix(".input.json")
    if stem.startswith("valid"):
        assert json.dumps(prepared) == source
        assert all(a is b for a, b in zip(prepared, messages, strict=True))
        assert report.repairs == []
    check_pin(path.with_name(f"{stem}{PINNED[policy]}.prepared.json"), pinned(prepared, workspace))
    # the repairs only: how the budget counts chars is the pipeline's business, not the format's
    check_pin(path.with_name(f"{stem}.repairs.json"), pinned(report.to_dict()["repairs"], workspace))


@pytest.mark.parametrize("path", [p for p in CASES if not p.name.startswith("valid")], ids=case_id)
def test_golden_broken_input_is_invalid(path: Path) -> None:
    """Every broken or budget case is invalid or oversized as written, so its pin shows a change."""
    fmt = path.parent.name
    messages = expand(json.loads(path.read_text(encoding="utf-8")))
    prepared = path.with_name(path.name.replace(".input.", ".prepared."))
    if path.name.startswith("broken"):
        assert toolkeep.validate(messages, fmt) != []
    assert json.loads(prepared.read_text(encoding="utf-8")) != messages


@pytest.mark.parametrize("policy", sorted(PINNED))
@pytest.mark.parametrize("path", sorted(GOLDEN.glob("langchain/*.input.json")), ids=case_id)
def test_golden_langchain_objects(path: Path, policy: str, tmp_path: Path) -> None:
    """The LangChain cases as ``BaseMessage`` objects give the same output, as objects."""
    from langchain_core.messages import BaseMessage, messages_from_dict, messages_to_dict

    data = expand(json.loads(path.read_text(encoding="utf-8")))
    objects = messages_from_dict(data)
    workspace = tmp_path / "ws"
    with toolkeep.Session(toolkeep.Config(policy=policy), workspace=workspace) as session:
        prepared, _ = session.prepare(objects, format="auto")
    assert all(isinstance(m, BaseMessage) for m in prepared)
    stem = path.name.removesuffix(".input.json")
    expected = json.loads(path.with_name(f"{stem}{PINNED[policy]}.prepared.json").read_text(encoding="utf-8"))
    assert json.loads(pinned(messages_to_dict(prepared), workspace)) == expected
