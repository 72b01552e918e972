"""The fault-injection suite (bench/faults.py) at test size: real faults, real trajectories.

Two short real trajectories are replayed request by request through a Session while its store or
workspace fails: a real Redis stopped (SIGSTOP) and resumed, killed and restarted on the same port;
a workspace on a tmpfs filled to ENOSPC, and one bind-mounted read-only (as root, a chmod would not
stop the writes; where nothing can be mounted a store that refuses every call stands in, as the
bench says); SQLite, file and Redis stores over caps small enough to bite. Every request must be
prepared, the fault must really have cost saves, and afterwards every shortened result of the
final output must lead back to its original (a marker that recalls it, a saved path that reads it,
or a text that says ``could not be saved``), with no marker that recalls nothing. No timing is
asserted (the bench reports the waits).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from bench.faults import FAULTS, Setup, capped, redis_capped, replay

from toolkeep.policies import POLICIES

from .conftest import BENCH_DATA, load_trajectory, shared_or_skip

TRAJECTORIES = (
    "mini-swe-agent__live-swe-agent__gpt-5-mini__django__django-13590.json",
    "gemini-cli__metaphi-figma-eval-49bdd49a__transcript.json",
)


def small_redis_cap(base: Path) -> Setup:
    setup = redis_capped(base)
    assert isinstance(setup.store, str)
    setup.store = setup.store.replace("max_bytes=200K", "max_bytes=60K")
    return setup


CASES: dict[str, Any] = {
    **{
        name: FAULTS[name]
        for name in ("redis stopped", "redis killed, restarted", "disk full", "read-only workspace")
    },
    "sqlite over max_bytes": capped("sqlite:///BASE/archive.db?max_bytes=60K", "sqlite max_bytes=60K"),
    "file over max_entries": capped("file://BASE/archive?max_entries=2", "file max_entries=2"),
    "redis over max_bytes": small_redis_cap,
}
NEEDS_REDIS = {"redis stopped", "redis killed, restarted", "redis over max_bytes"}


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("trajectory", TRAJECTORIES)
@pytest.mark.parametrize("fault", sorted(CASES))
def test_every_original_is_recoverable_under_the_fault(
    fault: str, trajectory: str, policy: str, tmp_path: Path
) -> None:
    shared_or_skip()
    if fault in NEEDS_REDIS and not (
        shutil.which("redis-server") or os.access("/usr/bin/redis-server", os.X_OK)
    ):
        if os.environ.get("CI"):
            pytest.fail("no redis-server binary, but CI must run the Redis fault tests")
        pytest.skip("no redis-server binary")
    history = load_trajectory(BENCH_DATA / "anthropic" / trajectory)
    outcome = replay(fault, history, tmp_path, start=0.2, end=0.8, faults=CASES, policy=policy)
    check = outcome.check
    assert outcome.prepared == outcome.requests
    assert outcome.save_errors > 0, f"{fault}: the fault never cost a save ({outcome.note})"
    assert check.shortened > 0
    assert check.lost == [], f"{fault}: no way back for {check.lost}"
    assert check.recoverable == check.shortened
    assert check.dangling == 0
    # a Redis healed less than retry_after before the run ends is not asked again yet: those last
    # outputs lead back through saved files only (the longer trajectory shows markers return);
    # the cache-aware policy archives the originals of the results it prices forms for, shortened
    # or not, so a store of two entries may hold none of those it shortened: files only, too
    files_only = fault in NEEDS_REDIS or (policy == "economy" and fault == "file over max_entries")
    assert check.markers > 0 or (files_only and check.by_file == check.shortened)
