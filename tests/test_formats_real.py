"""The real trajectories, rewritten in every format, corrupted and repaired (SPEC 2, 8).

``tests/convert_formats.py`` turns each Anthropic-shape trajectory under
``../shared/bench-data/anthropic`` into the other formats at test time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import toolkeep
from toolkeep.policies import POLICIES
from toolkeep.steps import StepContext, repair_pairing

from .conftest import TRAJECTORIES, load_trajectory, shared_or_skip
from .convert_formats import CONVERTERS, corrupt, to_format

FORMATS = list(CONVERTERS)
CASES: list[tuple[Path | None, str]] = [(p, f) for p in TRAJECTORIES for f in FORMATS]
CASES = CASES or [(None, f) for f in FORMATS]


def case_id(case: Any) -> str:
    if isinstance(case, Path):
        return case.stem[:40]
    return str(case) if case is not None else "absent"


def repaired(messages: list[Any], name: str) -> list[Any]:
    """Pairing repair alone, so that a valid history must come back exactly as it was."""
    fmt = toolkeep.formats.resolve_format(messages, name)
    ctx = StepContext(fmt)
    return fmt.dump(repair_pairing(fmt.load(messages), ctx))


@pytest.mark.slow
@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize(("path", "name"), CASES, ids=case_id)
def test_real_trajectory_in_every_format(path: Path | None, name: str, policy: str, tmp_path: Path) -> None:
    """A trajectory valid for Anthropic is valid in every format and repair leaves it as it is;
    corrupted, it comes out of ``prepare`` valid, and preparing again changes nothing, under
    every policy (economy once decided otherwise on a prepared Bedrock history: its fillers
    measured as chars the history it came from did not have)."""
    shared_or_skip()
    assert path is not None
    source = load_trajectory(path)
    clean = to_format(source, name)
    assert toolkeep.detect_format(clean).name == name
    if not toolkeep.validate(source, "anthropic"):
        assert toolkeep.validate(clean, name) == []
        again = repaired(clean, name)
        assert len(again) == len(clean)
        assert all(a is b for a, b in zip(again, clean, strict=True))

    broken = to_format(corrupt(source), name)
    assert toolkeep.validate(broken, name) != []
    with toolkeep.Session(toolkeep.Config(policy=policy), workspace=tmp_path / "ws") as session:
        prepared, report = session.prepare(broken, format=name)
        assert toolkeep.validate(prepared, name) == []
        assert report.repairs
        twice, report2 = session.prepare(prepared, format=name)
    assert report2.repairs == []
    assert [_plain(m) for m in twice] == [_plain(m) for m in prepared]


def _plain(message: Any) -> Any:
    return message.model_dump() if hasattr(message, "model_dump") else message
