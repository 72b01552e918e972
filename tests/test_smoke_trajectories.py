"""The real trajectories: prepared output is valid for Anthropic and idempotent."""

from __future__ import annotations

from pathlib import Path

import pytest

import toolkeep

from .conftest import TRAJECTORIES, load_trajectory, shared_or_skip


@pytest.mark.parametrize("path", TRAJECTORIES or [None], ids=lambda p: p.stem[:60] if p else "absent")
def test_real_trajectory_prepared_is_valid_and_idempotent(path: Path | None, tmp_path: Path) -> None:
    """Every real trajectory comes out valid, and preparing the output again changes nothing."""
    shared_or_skip()
    assert path is not None
    history = load_trajectory(path)
    with toolkeep.Session(toolkeep.Config(), workspace=tmp_path) as session:
        prepared, _ = session.prepare(history, format="anthropic")
        assert toolkeep.validate(prepared, "anthropic") == []
        again, _ = session.prepare(prepared, format="anthropic")
    assert again == prepared
