"""The proxy's folder on disk: each saved result written once (a hard link to its archived
original), kept under ``--max-disk-bytes`` and ``--max-age-days``, least recently used first,
never what a live conversation's markers name; ``toolkeep store gc --proxy`` does the same from
outside. Real files, the real proxy process in front of the scripted upstream."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkeep.proxy.disk import DiskCap, ProxyArchive, ProxyWorkspace
from toolkeep.shorten import archive_key
from toolkeep.stores import FileStore, Limits

httpx = pytest.importorskip("httpx", reason="the proxy extra is not installed: pip install 'toolkeep[proxy]'")
pytest.importorskip("starlette", reason="the proxy extra is not installed: pip install 'toolkeep[proxy]'")
pytest.importorskip("uvicorn", reason="the proxy extra is not installed: pip install 'toolkeep[proxy]'")

from tests.upstream_proxy import TOOLKEEP, ProxyProcess, read_history  # noqa: E402
from tests.upstream_server import ScriptedUpstream  # noqa: E402

MARKER = re.compile(r"<<ccr:([0-9a-f]{16})>>")
NOW = 1_800_000_000.0


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedUpstream]:
    server = ScriptedUpstream()
    yield server
    server.close()


def folder_bytes(path: Path) -> tuple[int, int]:
    """Files and allocated bytes of ``tool-results/`` and ``archive/``, each inode once (as du)."""
    seen: set[int] = set()
    files = size = 0
    for sub in ("tool-results", "archive"):
        for file in (path / sub).glob("*.txt"):
            info = file.stat()
            files += 1
            if info.st_ino not in seen:
                seen.add(info.st_ino)
                size += info.st_blocks * 512
    return files, size


def age(path: Path, seconds: float) -> None:
    """Make every saved and archived file ``seconds`` older (their last use)."""
    for sub in ("tool-results", "archive"):
        for file in (path / sub).glob("*.txt"):
            info = file.stat()
            os.utime(file, (info.st_atime - seconds, info.st_mtime - seconds))


def workspace_with(
    tmp: Path, count: int, size: int = 20_000, now: float = NOW
) -> tuple[ProxyWorkspace, FileStore, list[str]]:
    """A proxy workspace holding ``count`` saved results of ``size`` chars, the i-th last used at
    ``now - 1000 + i`` (so the first is the least recently used); its store's clock says ``now``."""
    ws = ProxyWorkspace(tmp, keep=True)
    store = ProxyArchive(ws, clock=lambda: now)
    keys = []
    for i in range(count):
        text = f"result {i}\n" + "x" * size
        path = ws.persist(f"toolu_{i}", text)  # saved as it enters
        key = archive_key(text)
        store.put(key, text)  # archived as it is shortened
        keys.append(key)
        for file in (path, ws.archive_dir / f"{key}.txt"):
            os.utime(file, (now - 1000 + i, now - 1000 + i))
    return ws, store, keys


# -- write once ----------------------------------------------------------------------------------


def test_a_saved_result_is_written_once_a_hard_link_to_its_original(tmp_path: Path) -> None:
    ws, store, keys = workspace_with(tmp_path, 3)
    for i, key in enumerate(keys):
        archived = ws.archive_dir / f"{key}.txt"
        saved = next(ws.results_dir.glob(f"budget_toolu_{i}_{key}.txt"))
        assert os.path.samefile(archived, saved) and archived.stat().st_nlink == 2
        assert saved.read_text() == store.get(key) == f"result {i}\n" + "x" * 20_000
        assert ws.read(saved).startswith(f"result {i}")  # the agent's reader opens it
    files, size = folder_bytes(tmp_path)
    assert files == 6 and size < 3 * 2 * 20_000  # three texts, not six


def test_an_original_never_saved_or_under_store_caps_is_written_as_any_store_writes(tmp_path: Path) -> None:
    ws = ProxyWorkspace(tmp_path / "ws", keep=True)
    path = ws.persist("toolu_1", "y" * 5_000)
    ProxyArchive(ws).put(archive_key("z" * 5_000), "z" * 5_000)  # no saved file of that text
    assert (ws.archive_dir / f"{archive_key('z' * 5_000)}.txt").stat().st_nlink == 1
    capped = ProxyArchive(ws, limits=Limits(max_bytes=1 << 20))  # its own caps count its own bytes
    capped.put(archive_key("y" * 5_000), "y" * 5_000)
    assert path.stat().st_nlink == 1 and capped.get(archive_key("y" * 5_000)) == "y" * 5_000


def test_the_proxy_writes_each_result_once(upstream: ScriptedUpstream, tmp_path: Path) -> None:
    args = ["--anthropic-upstream", upstream.url, "--workspace", str(tmp_path), "--policy", "spec"]
    with ProxyProcess(*args) as proxy:
        history = read_history(6)
        for n in range(1, 7):
            httpx.post(f"{proxy.url}/v1/messages", json={"model": "echo", "messages": history[: 1 + 2 * n]})
        sent = [r for r in upstream.requests() if r["path"] == "/v1/messages"][-1]["body"]
    saved = {
        f.name.rsplit("_", 1)[1].removesuffix(".txt"): f for f in (tmp_path / "tool-results").glob("*.txt")
    }
    shortened = set(MARKER.findall(sent))
    assert len(saved) == 6 and shortened and shortened <= set(saved)
    for key in shortened:  # the original of each shortened result is its saved file, linked
        assert os.path.samefile(saved[key], tmp_path / "archive" / f"{key}.txt")


# -- the caps ------------------------------------------------------------------------------------


def test_the_least_recently_used_go_first_and_pinned_ones_stay(tmp_path: Path) -> None:
    ws, store, keys = workspace_with(tmp_path, 10)
    one = folder_bytes(tmp_path)[1] // 10
    store.pin("live-conversation", keys[:2])  # the two oldest are named by a live conversation
    disk = DiskCap(tmp_path, store, max_bytes=5 * one, max_age=None, clock=lambda: NOW)
    done = disk.collect()
    left = {key for key in keys if (ws.archive_dir / f"{key}.txt").exists()}
    assert left == {*keys[:2], *keys[7:]}  # pinned, then the three newest that fit
    assert done.bytes == folder_bytes(tmp_path)[1] <= 5 * one and done.pinned == 2
    assert done.removed_files == 10 and sorted(p.name for p in ws.results_dir.iterdir()) == sorted(
        f"budget_toolu_{i}_{keys[i]}.txt" for i in (0, 1, 7, 8, 9)
    )
    store.release("live-conversation")  # the conversation ended: its two may go now
    DiskCap(tmp_path, store, max_bytes=4 * one, max_age=None, clock=lambda: NOW).collect()
    assert {k for k in keys if (ws.archive_dir / f"{k}.txt").exists()} == {keys[1], *keys[7:]}


def test_the_age_cap_removes_what_was_not_used_for_that_long(tmp_path: Path) -> None:
    ws, store, keys = workspace_with(tmp_path, 6)
    disk = DiskCap(tmp_path, store, max_bytes=None, max_age=997.5, clock=lambda: NOW)
    disk.collect()  # last used at NOW-1000 .. NOW-995: the three oldest are 998 s old or more
    assert [(ws.archive_dir / f"{k}.txt").exists() for k in keys] == [False] * 3 + [True] * 3
    store.get(keys[3])  # a use (the store stamps it with its clock: now)
    disk = DiskCap(tmp_path, store, max_bytes=None, max_age=10.0, clock=lambda: NOW)
    disk.collect()
    assert [(ws.archive_dir / f"{k}.txt").exists() for k in keys] == [False] * 3 + [True, False, False]


def test_another_proxys_pins_are_kept_through_its_pin_file(tmp_path: Path) -> None:
    ws, store, keys = workspace_with(tmp_path, 4)
    other = DiskCap(tmp_path, store, clock=lambda: NOW)
    store.pin("theirs", [keys[0]])
    other.write_pins()  # a replica that shares the folder wrote down what it pins
    assert json.loads(next(tmp_path.glob(".pinned-*")).read_text()) == [keys[0]]
    ours = DiskCap(
        tmp_path,
        FileStore(ws.archive_dir),
        max_bytes=1,
        max_age=None,
        clock=lambda: NOW,
        pin_file=".pinned-ours",
    )
    ours.collect()
    assert [(ws.archive_dir / f"{k}.txt").exists() for k in keys] == [True, False, False, False]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    uses=st.lists(st.integers(0, 5_000), min_size=1, max_size=12),
    pinned=st.sets(st.integers(0, 11), max_size=6),
    cap_units=st.integers(0, 12),
    max_age=st.one_of(st.none(), st.integers(1, 6_000)),
)
def test_a_collection_keeps_pins_and_goes_least_recently_used_first(
    tmp_path_factory: pytest.TempPathFactory,
    uses: list[int],
    pinned: set[int],
    cap_units: int,
    max_age: int | None,
) -> None:
    tmp = tmp_path_factory.mktemp("cap")
    ws = ProxyWorkspace(tmp, keep=True)
    store = ProxyArchive(ws)
    keys = []
    for i, ago in enumerate(uses):
        text = f"{i}\n" + "z" * 9_000
        path = ws.persist(f"toolu_{i}", text)
        keys.append(archive_key(text))
        store.put(keys[-1], text)
        for file in (path, ws.archive_dir / f"{keys[-1]}.txt"):
            os.utime(file, (NOW - 20 - ago, NOW - 20 - ago))
    store.pin("live", [keys[i] for i in pinned if i < len(keys)])
    one = folder_bytes(tmp)[1] // len(keys)
    disk = DiskCap(tmp, store, max_bytes=max(cap_units * one, 1), max_age=max_age, clock=lambda: NOW)
    done = disk.collect()
    kept = [i for i, k in enumerate(keys) if (ws.archive_dir / f"{k}.txt").exists()]
    gone = [i for i in range(len(keys)) if i not in kept]
    assert all(i in kept for i in pinned if i < len(keys))  # never a pinned one
    for i in gone:  # each removed one was past the age cap, or older than every unpinned one kept
        old = max_age is not None and 20 + uses[i] >= max_age
        assert old or all(uses[j] <= uses[i] for j in kept if j not in pinned)
    unpinned_kept = [i for i in kept if i not in pinned]
    assert done.bytes <= cap_units * one or not unpinned_kept  # under the cap, or only pins are left
    assert all(max_age is None or 20 + uses[i] < max_age for i in unpinned_kept)
    for i in kept:  # a unit goes whole: its saved file goes with its original
        assert any(ws.results_dir.glob(f"budget_toolu_{i}_{keys[i]}.txt"))
    assert len(list(ws.results_dir.iterdir())) == len(kept)


def test_the_proxy_stays_under_its_cap_and_live_markers_still_recall(
    upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    common = ["--anthropic-upstream", upstream.url, "--workspace", str(tmp_path), "--policy", "spec"]

    def conversation(url: str, turns: int, first: str) -> str:
        history = read_history(turns, first=first)
        for message in history[2::2]:  # results of its own (the same text would be one file)
            message["content"][0]["content"] = f"{first}\n" + message["content"][0]["content"]
        for n in range(1, turns + 1):
            httpx.post(f"{url}/v1/messages", json={"model": "echo", "messages": history[: 1 + 2 * n]})
        body: str = [r for r in upstream.requests() if r["path"] == "/v1/messages"][-1]["body"]
        return body

    with ProxyProcess(*common) as proxy:  # no cap of ours: the default 1 GiB
        for c in range(10):
            conversation(proxy.url, 4, f"conversation {c}")
    cap = 600_000
    assert folder_bytes(tmp_path)[1] > 2 * cap
    age(tmp_path, 120)  # all of it last used two minutes ago
    with ProxyProcess(*common, "--max-disk-bytes", str(cap)) as proxy:
        assert folder_bytes(tmp_path)[1] <= cap  # collected as it started
        live = conversation(proxy.url, 6, "the live one")
        age(tmp_path, 120)
        conversation(proxy.url, 3, "one more")  # its writes take the folder past the cap: collected
        files, size = folder_bytes(tmp_path)
        assert size <= cap, (files, size)
        keys = set(MARKER.findall(live))
        assert keys and all((tmp_path / "archive" / f"{key}.txt").exists() for key in keys)
        # and the live conversation's next request names the same files, which are there
        again = conversation(proxy.url, 6, "the live one")
        assert all((tmp_path / "archive" / f"{key}.txt").exists() for key in MARKER.findall(again))


def test_store_gc_collects_a_proxys_folder(tmp_path: Path) -> None:
    ws, store, keys = workspace_with(tmp_path, 8, now=time.time())
    store.pin("running-proxy", keys[:1])
    DiskCap(tmp_path, store).write_pins()  # a running proxy's pins, written down
    result = subprocess.run(
        [*TOOLKEEP, "store", "gc", "--proxy", "--workspace", str(tmp_path), "--max-disk-bytes", "0",
         "--max-age-days", "0.01"],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "removed 14 files" in result.stdout and "kept 1 " in result.stdout
    assert [(ws.archive_dir / f"{k}.txt").exists() for k in keys] == [True] + [False] * 7
    missing = subprocess.run(
        [*TOOLKEEP, "store", "gc", "--proxy", "--workspace", str(tmp_path / "scratch")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 1 and "no proxy's files" in missing.stderr


def test_the_caps_cover_the_conversations_kept_states(tmp_path: Path) -> None:
    """Each conversation's kept state (``archive-state/``, toolkeep.resume) grows the proxy's
    folder with every conversation: the caps count it and collect it by age and size, like the
    saved results and the archive."""
    from toolkeep import Config
    from toolkeep.proxy import make_preparer

    preparer = make_preparer(Config(), tmp_path, max_disk_bytes=None, max_age_days=None)
    for n in range(3):
        messages: list[dict[str, object]] = [{"role": "user", "content": f"conversation {n}"}]
        for turn in range(4):
            call = f"toolu_{n}_{turn}"
            messages += [
                {"role": "assistant", "content": [{"type": "tool_use", "id": call, "name": "Read", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call, "content": f"{n} " * 9_000}]},
            ]  # fmt: skip
            preparer.prepare("anthropic", json.dumps({"model": "m", "messages": messages}).encode())
    preparer.conversations.close()  # (the states are written at the latest as a conversation closes)
    states = sorted((tmp_path / "archive-state").glob("*.txt"))
    assert states
    state_bytes = sum(p.stat().st_blocks * 512 for p in states)
    store = preparer.conversations.store
    assert (
        DiskCap(tmp_path, store, max_bytes=None, max_age=None).usage().bytes
        >= state_bytes + folder_bytes(tmp_path)[1]
    )
    for path in states:
        info = path.stat()
        os.utime(path, (info.st_atime - 10 * 86_400, info.st_mtime - 10 * 86_400))
    DiskCap(tmp_path, store, max_bytes=None, max_age=86_400).collect()
    assert not list((tmp_path / "archive-state").glob("*.txt"))


def test_a_conversation_whose_kept_state_was_collected_goes_on_and_resumes_to_the_same_bytes(
    tmp_path: Path,
) -> None:
    """The caps collect state files of conversations still going (least recently used first, and
    no pin holds them): the proxy keeps writing their state, and a proxy started afterwards on the
    folder sends each conversation's next request as the proxy that saw all of them does."""
    from toolkeep import Config
    from toolkeep.proxy import make_preparer

    def request(n: int, turns: int) -> bytes:
        messages: list[dict[str, object]] = [{"role": "user", "content": f"conversation {n}"}]
        for turn in range(turns):
            call = f"toolu_{n}_{turn}"
            messages += [
                {"role": "assistant", "content": [{"type": "tool_use", "id": call, "name": "Read", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call, "content": f"{n}.{turn} " * 3_000}]},
            ]  # fmt: skip
        return json.dumps({"model": "m", "messages": messages}).encode()

    first = make_preparer(Config(), tmp_path, max_disk_bytes=None, max_age_days=None)
    for turns in range(1, 10):
        for n in range(3):
            assert first.prepare("anthropic", request(n, turns)).error is None
        if turns in (3, 6):  # the cap took some of them, the heads among them
            for path in sorted((tmp_path / "archive-state").glob("*.txt"))[::2]:
                path.unlink()
    sent = {n: first.prepare("anthropic", request(n, 10)) for n in range(3)}
    first.conversations.close()
    restarted = make_preparer(Config(), tmp_path, max_disk_bytes=None, max_age_days=None)
    for n in range(3):
        again = restarted.prepare("anthropic", request(n, 10))
        assert again.error is None and sent[n].error is None
        assert again.body == sent[n].body
    restarted.conversations.close()
