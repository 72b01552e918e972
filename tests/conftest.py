"""Shared fixtures: the real trajectories in ../shared, and a fresh session per test."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

import toolkeep

# HYPOTHESIS_PROFILE=slow: the long fuzzing run CI makes (tests/test_fuzz_slow.py, a few minutes);
# the default profile stays fast for everyday runs.
settings.register_profile(
    "slow",
    max_examples=1_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
# the per-user archive (toolkeep.userdirs) of the tests is their own, never the user's
os.environ.setdefault("TOOLKEEP_CACHE_DIR", tempfile.mkdtemp(prefix="toolkeep-test-cache-"))

if os.environ.get("HYPOTHESIS_PROFILE"):
    settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TOOLKEEP_SHARED", REPO.parent / "shared"))
BENCH_DATA = SHARED / "bench-data"
TRAJECTORIES = sorted((BENCH_DATA / "anthropic").glob("*.json"))


def shared_or_skip() -> None:
    """Skip when ../shared is absent (a user's clone); fail instead where CI requires it."""
    if TRAJECTORIES:
        return
    if os.environ.get("TOOLKEEP_REQUIRE_SHARED"):
        pytest.fail(f"TOOLKEEP_REQUIRE_SHARED is set but no trajectories under {BENCH_DATA}")
    pytest.skip(f"the real trajectories are not here ({BENCH_DATA} is absent): a user's clone")


def load_trajectory(path: Path) -> list[Any]:
    data: list[Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


@pytest.fixture
def session(tmp_path: Path) -> Iterator[toolkeep.Session]:
    with toolkeep.Session(toolkeep.Config(), workspace=tmp_path / "ws") as s:
        yield s
