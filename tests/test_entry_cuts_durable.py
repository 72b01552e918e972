"""A cut made where a result enters the caller's history (``cap_result``, ``ToolLoop``, the
framework wrappers) never outlives its way back.

The caller's history keeps such a cut after the session, so its original must be archived where
it outlives the session (the per-user archive, by default). When that archive refuses the write
(full of what live sessions pin, an original bigger than its whole cap, its directory a symbolic
link), the file the session saved goes with the workspace on ``close()``: the result then enters
whole (and a WARNING says why), never cut with no way back. Every case is checked after the
session closed, from a new session.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolkeep import Config, Session, Workspace
from toolkeep.integrations.raw import ToolLoop
from toolkeep.shorten import CCR_MARKER_RE

from . import test_caps_integrations as frameworks
from .strategies import property_settings

ORIGINAL = "".join(f"{n:06d} {'row of a very long tool output '[: 20 + n % 11]}\n" for n in range(7_800))[
    :211_889
]
assert len(ORIGINAL) == 211_889


def way_back_outlives(text: str, original: str, config: Config) -> bool:
    """True when ``text`` (as the caller's history keeps it, the session closed) is the
    original, or a cut each of whose markers recalls it from a new session, or one that says
    its original could not be saved."""
    if text == original:
        return True
    if "could not be saved" in text:
        return True
    keys = CCR_MARKER_RE.findall(text)
    if not keys:
        return False
    with Session(config) as later:
        return all(later.recall(key) == original for key in keys[:1])


# ------------------------------------------------------------------------ the per-user archive


def healthy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Config:
    return Config(caller_store_url=f"sqlite://{tmp_path / 'user.db'}")


def too_small(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Config:
    """A cap smaller than the original: the write is refused before anything is evicted."""
    return Config(caller_store_url=f"sqlite://{tmp_path / 'user.db'}?max_bytes=100K")


def full_of_pins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Config]:
    """Full of originals a live session's history names (pinned in the file): no room."""
    config = Config(caller_store_url=f"sqlite://{tmp_path / 'user.db'}?max_bytes=300K")
    with Session(config) as holder:
        for n in range(2):
            text = holder.cap_result(f"h{n}", "grep", f"{n}" + ORIGINAL[:140_000])
            assert CCR_MARKER_RE.search(text)
        yield config


def symlinked_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Config:
    """The archive's directory replaced by a symbolic link (refused: it could lead anywhere)."""
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "archive").symlink_to(tmp_path / "elsewhere")
    return Config(caller_store_url=f"file://{tmp_path / 'archive'}")


def symlinked_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Config:
    """The per-user directory itself a symbolic link (the default per-user archive)."""
    (tmp_path / "real-cache").mkdir()
    (tmp_path / "cache").symlink_to(tmp_path / "real-cache")
    monkeypatch.setenv("TOOLKEEP_CACHE_DIR", str(tmp_path / "cache"))
    return Config()


ARCHIVES: dict[str, Callable[[Path, pytest.MonkeyPatch], Any]] = {
    "healthy": healthy,
    "too small": too_small,
    "full of pins": full_of_pins,
    "directory a symlink": symlinked_directory,
    "cache dir a symlink": symlinked_cache_dir,
}


@pytest.fixture(params=sorted(ARCHIVES))
def archive(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, Config]]:
    made = ARCHIVES[request.param](tmp_path, monkeypatch)
    if isinstance(made, Config):
        yield request.param, made
        return
    config = next(made)
    yield request.param, config
    next(made, None)


def private_session(config: Config) -> Session:
    """A session whose workspace (and own archive) goes on close: only the per-user archive
    can outlive it. Its workspace is a temp directory, so that a per-user directory that is a
    symbolic link refuses the archive only."""
    return Session(config, workspace=Workspace(None))


def refused(name: str) -> bool:
    return name != "healthy"


# ------------------------------------------------------------------------------ entry points


def through_cap_result(config: Config) -> str:
    with private_session(config) as session:
        return session.cap_result("c1", "grep", ORIGINAL)


def through_tool_loop(config: Config) -> str:
    def read(path: str) -> str:
        return ORIGINAL

    response = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "/f"}}],
    }
    with ToolLoop({"read": read}, format="anthropic", session=private_session(config)) as loop:
        messages = loop.results(response)
        session = loop.session
    session.close()
    text: str = messages[0]["content"][0]["content"]
    return text


def through_framework(name: str) -> Callable[[Config], str]:
    def run(config: Config) -> str:
        entered: dict[str, str] = {}

        def keep(got: dict[str, str], *args: Any) -> None:
            entered.update(got)

        original_check = frameworks.check
        frameworks.check = keep
        try:
            with Session(
                config.replace(max_result_chars=400_000, turn_budget_chars=800_000), workspace=Workspace(None)
            ) as session:
                frameworks.RUNNERS[name](80_000, len(ORIGINAL), session)
        finally:
            frameworks.check = original_check
        return entered["big"]

    return run


ENTRIES: dict[str, Callable[[Config], str]] = {
    "cap_result": through_cap_result,
    "ToolLoop": through_tool_loop,
    **{name: through_framework(name) for name in sorted(frameworks.RUNNERS)},
}


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_the_cut_outlives_the_session_or_is_not_made(
    entry: str, archive: tuple[str, Config], caplog: pytest.LogCaptureFixture
) -> None:
    name, config = archive
    original = ORIGINAL if entry in ("cap_result", "ToolLoop") else frameworks.output_of(len(ORIGINAL))
    with caplog.at_level(logging.WARNING, logger="toolkeep"):
        text = ENTRIES[entry](config)
    assert way_back_outlives(text, original, config)
    if refused(name):
        assert text == original  # kept whole...
        assert any("kept whole" in r.getMessage() for r in caplog.records)  # ...and said so
    else:
        assert len(text) <= 80_000 and CCR_MARKER_RE.search(text)


def test_a_kept_workspace_is_a_way_back_that_outlives(tmp_path: Path) -> None:
    """With the workspace kept, the saved file outlives the session: the cut names it."""
    config = Config(caller_store_url=f"sqlite://{tmp_path / 'user.db'}?max_bytes=100K")
    with Session(config, workspace=tmp_path / "ws") as session:
        text = session.cap_result("c1", "grep", ORIGINAL)
    assert len(text) < len(ORIGINAL)
    with Session(config, workspace=tmp_path / "ws") as later:
        key = CCR_MARKER_RE.search(text)
        assert key is not None and later.recall(key[1]) == ORIGINAL


@property_settings(20)
@given(
    size=st.integers(100, 250_000),
    cap=st.integers(1_000, 100_000),
    state=st.sampled_from(["healthy", "too small"]),
)
def test_any_size_any_cap(tmp_path_factory: pytest.TempPathFactory, size: int, cap: int, state: str) -> None:
    """Any output and any cap, the archive working or refusing: after ``close()`` the text is
    the original, or a cut whose marker recalls it."""
    base = tmp_path_factory.mktemp("entry")
    query = "?max_bytes=1K" if state == "too small" else ""
    config = Config(caller_store_url=f"sqlite://{base / 'user.db'}{query}")
    original = ORIGINAL[:size]
    with private_session(config) as session:
        text = session.cap_result("c1", "bash", original, cap=cap)
    assert len(text) <= max(cap, len(original)) and way_back_outlives(text, original, config)
    if state == "too small" and size > 1_000:
        assert text == original
