"""Faults: an unwritable workspace, a full disk, a store that is unreachable or lost mid-session.

In every case ``prepare`` still returns a valid history, a preview says honestly when the full
output could not be saved, nothing already saved is lost, and a later ``prepare`` saves what failed
once the fault is gone. The faults are real: permissions (as an unprivileged user when the tests run
as root), ``RLIMIT_FSIZE`` and a tiny tmpfs for a full disk, a real ``redis-server`` killed with
SIGKILL and restarted on the same port.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bench.faults import RedisServer

import toolkeep
from toolkeep import Config, Session, StoreError, WorkspaceError
from toolkeep.recall import recall_answer
from toolkeep.shorten import CCR_MARKER_RE, SAVED_PATH_RE
from toolkeep.stores.redis import RedisStore

from .redis_server import _free_port
from .test_cli_core import one_error_line, run

NOT_SAVED = "full output could not be saved: "


def block(n: int, size: int, name: str = "cat") -> list[dict[str, Any]]:
    """One Anthropic block: a call and its result of ``size`` chars, distinct per ``n``."""
    line = f"result {n} line\n"
    text = (line * (size // len(line) + 1))[:size]
    return [
        {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": name, "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": text}]},
    ]


def result_of(out: list[Any], n: int) -> str:
    """The text sent for call ``t{n}``."""
    for m in out:
        for b in m["content"] if isinstance(m["content"], list) else []:
            if b.get("type") == "tool_result" and b["tool_use_id"] == f"t{n}":
                text: str = b["content"]
                return text
    raise AssertionError(f"no result for t{n}")


def original_of(history: list[Any], n: int) -> str:
    return result_of(history, n)


def check_honest(session: Session, out: list[Any], history: list[Any], n: int) -> tuple[bool, bool]:
    """Whether result ``n`` was persisted and archived; whatever it names must hold the original."""
    text, original = result_of(out, n), original_of(history, n)
    saved = SAVED_PATH_RE.search(text)
    if saved:
        assert session.workspace.reader.read_text(saved[1]) == original
    else:
        assert NOT_SAVED in text
    keys = CCR_MARKER_RE.findall(text)
    for key in keys:
        assert session.store.get(key) == original
    return bool(saved), bool(keys)


# ---------------------------------------------------------------------------- unwritable workspace


def test_workspace_cannot_be_created() -> None:
    """A workspace path under a regular file is a WorkspaceError (API) and one line, exit 2 (CLI)."""
    with tempfile.NamedTemporaryFile() as plain:
        with pytest.raises(WorkspaceError, match="cannot create session workspace"):
            Session(workspace=Path(plain.name) / "ws")
        source = Path(plain.name).with_suffix(".json")
        source.write_text('[{"role": "user", "content": "hi"}]')
        try:
            line = one_error_line(run("prepare", str(source), "--workspace", f"{plain.name}/ws"))
        finally:
            source.unlink()
    assert "cannot create session workspace" in line


def test_workspace_removed_mid_session(tmp_path: Path) -> None:
    """The workspace deleted under a live session (a tmp cleaner, with the archive in it): prepare
    goes on, says so, and saves again once the directory is back. The archive's directory is
    made again at once, and holds again the original of the marker sent before (markers always
    recall); the saved file is said to be lost until the workspace's own directory is back."""
    history: list[Any] = [{"role": "user", "content": "go"}, *block(1, 25_000)]
    with Session(Config(), workspace=tmp_path / "ws") as session:
        out, report = session.prepare(history)
        assert check_honest(session, out, history, 1) == (True, True)
        shutil.rmtree(session.workspace.path)
        history = [*history, *block(2, 25_000)]
        out, report = session.prepare(history)
        assert toolkeep.validate(out) == []
        (key,) = CCR_MARKER_RE.findall(result_of(out, 1))
        assert session.store.get(key) == original_of(history, 1)  # its marker recalls again
        assert check_honest(session, out, history, 2) == (False, True)
        assert NOT_SAVED + "No such file or directory" in result_of(out, 2)
        assert len(report.save_errors) == 1
        (session.workspace.path / "tool-results").mkdir(parents=True)
        history = [*history, *block(3, 10)]
        out, report = session.prepare(history)
        assert report.save_errors == []
        assert check_honest(session, out, history, 2) == (True, True)


CHILD = r"""
import json, sys
import toolkeep
ws = sys.argv[1]
history = json.load(sys.stdin)
with toolkeep.Session(toolkeep.Config(), workspace=ws) as session:
    out, report = session.prepare(history)
    json.dump({"out": out, "save_errors": report.save_errors,
               "valid": [str(v) for v in toolkeep.validate(out)]}, sys.stdout)
"""


def unprivileged_base() -> Iterator[tuple[Path, list[str]]]:
    """A directory and a command prefix under which permissions really apply: as root, the child
    runs as ``nobody`` through ``setpriv`` (root ignores file modes)."""
    base = Path(tempfile.mkdtemp(prefix="toolkeep-faults-"))
    prefix: list[str] = []
    try:
        if os.geteuid() == 0:
            setpriv = shutil.which("setpriv")
            if setpriv is None:
                pytest.skip("running as root without setpriv: file modes cannot be made to apply")
            os.chown(base, 65534, 65534)
            prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
        base.chmod(0o755)
        yield base, prefix
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def unprivileged() -> Iterator[tuple[Path, list[str]]]:
    yield from unprivileged_base()


def run_child(ws: Path, history: list[Any], prefix: list[str], code: str = CHILD) -> dict[str, Any]:
    """Prepare ``history`` in a child process with workspace ``ws``; its output and report.

    The child's per-user cache dir is its own, next to ``ws`` (owned by whoever the child runs
    as): the tests' one is shared by every test of the run (and by both workers), so what it
    holds, and whether the child may use it, would depend on which tests ran before."""
    proc = subprocess.run(
        [*prefix, sys.executable, "-c", code, str(ws)],
        input=json.dumps(history).encode(),
        capture_output=True,
        timeout=120,
        cwd=ws.parent,
        env={**os.environ, "TOOLKEEP_CACHE_DIR": str(ws.parent / "cache")},
    )
    assert proc.returncode == 0, proc.stderr.decode()
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


@pytest.mark.parametrize("unwritable", [("tool-results",), ("tool-results", "archive")])
def test_workspace_unwritable(unwritable: tuple[str, ...], unprivileged: tuple[Path, list[str]]) -> None:
    """Directories the process may not write: a valid history, previews that say the output
    could not be saved (with the marker when the archive still works), and saves once writable."""
    base, prefix = unprivileged
    ws = base / "ws"
    history: list[Any] = [{"role": "user", "content": "go"}, *block(1, 25_000)]
    first = run_child(ws, history, prefix)
    for sub in unwritable:
        (ws / sub).chmod(0o500)
    history = [*history, *block(2, 25_000), *block(3, 40_000, name="grep")]
    down = run_child(ws, history, prefix)
    assert down["valid"] == []
    assert SAVED_PATH_RE.search(result_of(first["out"], 1))
    earlier = result_of(down["out"], 1)  # what was saved before still names its file and key
    assert SAVED_PATH_RE.search(earlier) and CCR_MARKER_RE.search(earlier)
    for n in (2, 3):
        text = result_of(down["out"], n)
        assert SAVED_PATH_RE.search(text) is None
        assert bool(CCR_MARKER_RE.search(text)) is ("archive" not in unwritable)
    assert NOT_SAVED + "Permission denied" in result_of(down["out"], 2)
    assert sorted(e.split()[0] for e in down["save_errors"]) == sorted(
        ["persist", "persist"] + (["archive", "archive"] if "archive" in unwritable else [])
    )
    assert list((ws / "tool-results").glob(".tmp-*")) == []
    for sub in unwritable:
        (ws / sub).chmod(0o700)
    back = run_child(ws, history, prefix)
    assert back["save_errors"] == []
    with Session(workspace=ws) as session:
        for n in (1, 2, 3):
            assert check_honest(session, back["out"], history, n) == (True, True)


# ------------------------------------------------------------------------------------- full disk

FSIZE_CHILD = r"""
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # a write past the limit fails with EFBIG instead
resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
""" + CHILD.replace("import json, sys", "import json")


def test_file_size_limit() -> None:
    """Writes past RLIMIT_FSIZE fail (EFBIG, as a full disk would): results that fit are saved,
    the others say why not, and no partial file is left behind."""
    for base, prefix in unprivileged_base():
        ws = base / "ws"
        history = [{"role": "user", "content": "go"}, *block(1, 50_000), *block(2, 150_000, name="grep")]
        history += block(3, 300_000)
        data = run_child(ws, history, prefix, FSIZE_CHILD)
        assert data["valid"] == []
        assert NOT_SAVED + "File too large" in result_of(data["out"], 3)
        assert data["save_errors"] == [
            f"archive {archive_key_of(history, 3)}: StoreError",
            "persist t3: File too large",
        ]
        with Session(workspace=ws) as session:
            assert check_honest(session, data["out"], history, 1) == (True, True)
            assert check_honest(session, data["out"], history, 2) == (True, True)
            assert check_honest(session, data["out"], history, 3) == (False, False)
        leftovers = [p.name for p in ws.rglob("*") if p.is_file() and p.name.startswith(".tmp-")]
        assert leftovers == []


def archive_key_of(history: list[Any], n: int) -> str:
    from toolkeep.shorten import archive_key

    return archive_key(original_of(history, n))


@pytest.fixture
def tiny_disk() -> Iterator[Path]:
    """A 256 KiB tmpfs: a real ENOSPC. Needs the right to mount (root in a container)."""
    point = Path(tempfile.mkdtemp(prefix="toolkeep-tinydisk-"))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", str(point)], capture_output=True
    )
    if done.returncode != 0:
        point.rmdir()
        pytest.skip(
            f"cannot mount a tmpfs here: {done.stderr.decode().strip()} (RLIMIT_FSIZE test covers it)"
        )
    try:
        yield point
    finally:
        subprocess.run(["umount", str(point)], check=False)
        point.rmdir()


def test_disk_full(tiny_disk: Path) -> None:
    """A full disk (a real ENOSPC): the history stays valid, the preview says the output could not
    be saved, what was saved before stays whole, and it is saved once space is freed."""
    filler = tiny_disk / "filler"
    history: list[Any] = [{"role": "user", "content": "go"}]
    with Session(Config(), workspace=tiny_disk / "ws") as session:
        history += block(1, 40_000)
        out, _ = session.prepare(history)
        assert check_honest(session, out, history, 1) == (True, True)
        filler.write_bytes(b"\0" * (256 * 1024 - 2 * 40_000 - 20_000))
        history += block(2, 60_000, name="grep")
        out, report = session.prepare(history)
        assert toolkeep.validate(out) == []
        assert NOT_SAVED + "No space left on device" in result_of(out, 2)
        assert report.save_errors
        assert check_honest(session, out, history, 1) == (True, True)
        assert list((session.workspace.results_dir).glob(".tmp-*")) == []
        filler.unlink()
        history += block(3, 10)
        out, report = session.prepare(history)
        assert report.save_errors == []
        assert check_honest(session, out, history, 2) == (True, True)


# ---------------------------------------------------------------------------------- Redis faults


@pytest.fixture
def durable_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server that writes every command to its append-only file before answering, so a
    SIGKILL loses nothing it acknowledged; restartable on the same port (bench/faults.py's)."""
    try:
        server = RedisServer(tmp_path)
    except FileNotFoundError:
        if os.environ.get("CI"):
            pytest.fail("no redis-server binary, but CI must run the Redis fault tests")
        pytest.skip("no redis-server binary")
    server.start()
    try:
        yield server
    finally:
        server.kill()


def test_store_unreachable_at_start(tmp_path: Path) -> None:
    """A store URL nobody answers is a StoreError when the session opens, and one CLI line."""
    url = f"redis://127.0.0.1:{_free_port()}/0"
    with pytest.raises(StoreError, match="cannot reach the Redis archive"):
        Session(workspace=tmp_path / "ws", store=url)
    source = tmp_path / "in.json"
    source.write_text('[{"role": "user", "content": "hi"}]')
    line = one_error_line(run("prepare", str(source), "--store", url, "--workspace", str(tmp_path / "w2")))
    assert "cannot reach the Redis archive" in line


def test_redis_lost_mid_session(durable_redis: RedisServer, tmp_path: Path) -> None:
    """Redis killed mid-session: prepare goes on (valid, previews name the saved file, no marker
    promised), recall says the archive is unreachable; restarted on the same port, nothing it held
    is lost and the next prepare archives what failed."""
    # retry_after=0: asked again at once, where the default leaves a failed server alone 5 s
    store = RedisStore(durable_redis.url, prefix="faults", retry_after=0)
    history: list[Any] = [{"role": "user", "content": "go"}, *block(1, 40_000)]
    with store, Session(Config(), workspace=tmp_path / "ws", store=store) as session:
        out, _ = session.prepare(history)
        assert check_honest(session, out, history, 1) == (True, True)
        (key1,) = CCR_MARKER_RE.findall(result_of(out, 1))

        durable_redis.kill()
        history += block(2, 40_000, name="grep") + block(3, 25_000)
        out, report = session.prepare(history)
        assert toolkeep.validate(out) == []
        for n in (2, 3):
            text = result_of(out, n)
            assert SAVED_PATH_RE.search(text) and not CCR_MARKER_RE.search(text)
        kinds = [e.split()[0] for e in report.save_errors]  # economy archives every long result
        assert len(kinds) >= 2 and set(kinds) == {"archive"}
        assert "could not be read just now" in recall_answer(session.store, key1)
        with pytest.raises(StoreError):
            session.recall(key1)

        durable_redis.start()
        assert session.recall(key1) == original_of(history, 1)  # nothing acknowledged was lost
        history += block(4, 10)
        out, report = session.prepare(history)
        assert report.save_errors == []
        for n in (1, 2, 3):
            assert check_honest(session, out, history, n) == (True, True)


def test_redis_lost_before_first_prepare(durable_redis: RedisServer, tmp_path: Path) -> None:
    """A store that dies between opening and the first prepare: the history is still prepared."""
    with Session(Config(), workspace=tmp_path / "ws", store=durable_redis.url) as session:
        durable_redis.kill()
        history: list[Any] = [{"role": "user", "content": "go"}, *block(1, 40_000), *block(2, 10)]
        history += block(3, 10) + block(4, 10)
        out, report = session.prepare(history)
        assert toolkeep.validate(out) == []
        assert report.save_errors and "could not be saved" not in json.dumps(out)
        assert "<<ccr:" not in json.dumps(out)  # no marker is promised
        # old enough to be truncated, but with no way back it stays whole
        assert report.truncated == 0


def test_stalled_redis_costs_one_timeout(
    durable_redis: RedisServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A Redis server that stops answering (SIGSTOP): one call waits for the socket timeout, the
    rest of the run fails at once, and after ``retry_after`` the store is asked again."""
    import signal

    import redis

    client = redis.Redis.from_url(durable_redis.url, socket_timeout=0.5, socket_connect_timeout=0.5)
    store = RedisStore(durable_redis.url, prefix="stall", client=client, retry_after=1.0)
    history: list[Any] = [{"role": "user", "content": "go"}]
    for n in range(4):
        history += block(n, 25_000 + n)
    assert durable_redis.proc is not None
    with store, Session(Config(), workspace=tmp_path / "ws", store=store) as session:
        durable_redis.proc.send_signal(signal.SIGSTOP)
        try:
            with caplog.at_level("WARNING", logger="toolkeep"):
                out, report = session.prepare(history)
        finally:
            durable_redis.proc.send_signal(signal.SIGCONT)
        assert toolkeep.validate(out) == []
        failures = [r.getMessage() for r in caplog.records if "could not archive" in r.getMessage()]
        assert len(failures) == len(report.save_errors) >= 4  # one per cut (older ones are cut twice)
        assert sum("TimeoutError" in m for m in failures) == 1
        assert sum("unreachable a moment ago" in m for m in failures) == len(failures) - 1
        time.sleep(1.1)  # past retry_after
        out, report = session.prepare([*history, *block(9, 10)])
        assert report.save_errors == []
        for n in range(4):
            assert check_honest(session, out, history, n) == (True, True)


class StallLog:
    """Every call made on a store while its server is stalled: how long it waited, how it ended."""

    def __init__(self, store: RedisStore) -> None:
        self.store = store
        self.calls: list[tuple[float, float, str]] = []  # (start, end, "ok" | "timeout" | "refused")
        self.lock = threading.Lock()

    def call(self, key: str) -> str:
        start = time.monotonic()
        try:
            self.store.get(key)
            outcome = "ok"
        except StoreError as exc:
            outcome = "timeout" if "TimeoutError" in str(exc) else "refused"
            assert outcome == "timeout" or "unreachable a moment ago" in str(exc), str(exc)
        with self.lock:
            self.calls.append((start, time.monotonic(), outcome))
        return outcome

    def timeouts(self) -> list[tuple[float, float, str]]:
        return [c for c in self.calls if c[2] == "timeout"]

    def longest_wait(self) -> float:
        return max(end - start for start, end, _ in self.calls)


SOCKET_TIMEOUT, RETRY_AFTER = 0.5, 0.4


def test_stalled_redis_fails_fast(durable_redis: RedisServer) -> None:
    """A Redis server stopped with SIGSTOP, its timeouts set in the store URL: no call waits
    longer than (a small multiple of) the socket timeout, at most one call per back-off window
    times out, the window starts when that call gave up (the next timeout starts retry_after
    later, not at once as when it was counted from the call's start, shorter here than the
    timeout), calls made while the probe waits are refused at once, and the first answer after
    SIGCONT closes the breaker."""
    import signal

    url = (f"{durable_redis.url}?prefix=stall-fast&socket_timeout={SOCKET_TIMEOUT}"
           f"&connect_timeout={SOCKET_TIMEOUT}&retry_after={RETRY_AFTER}")  # fmt: skip
    store = toolkeep.open_store(url)
    assert isinstance(store, RedisStore)
    store.put("0123456789abcdef", "kept")
    log = StallLog(store)
    assert durable_redis.proc is not None
    with store:
        durable_redis.proc.send_signal(signal.SIGSTOP)
        try:
            stop = time.monotonic() + 4.0
            while time.monotonic() < stop:
                log.call("0123456789abcdef")
                time.sleep(0.01)
            # two callers at once after a window: one probes, the other is refused meanwhile
            time.sleep(RETRY_AFTER + 0.05)
            before = len(log.timeouts())
            callers = [threading.Thread(target=log.call, args=("0123456789abcdef",)) for _ in range(2)]
            for thread in callers:
                thread.start()
            for thread in callers:
                thread.join()
            assert len(log.timeouts()) == before + 1
        finally:
            durable_redis.proc.send_signal(signal.SIGCONT)
        timeouts = log.timeouts()
        gaps = [nxt[0] - prev[1] for prev, nxt in itertools.pairwise(timeouts)]
        print(f"stalled Redis: {len(log.calls)} calls in 4 s, {len(timeouts)} timed out, longest wait "
              f"{log.longest_wait():.3f} s, gaps between timeouts {[round(g, 3) for g in gaps]}")  # fmt: skip
        assert log.longest_wait() <= 3 * SOCKET_TIMEOUT
        assert 3 <= len(timeouts) <= 4.0 / (SOCKET_TIMEOUT + RETRY_AFTER) + 2
        # at most one timeout per window (the test stamps its calls a little outside the store)
        assert all(gap >= 0.9 * RETRY_AFTER for gap in gaps)
        assert sum(c[2] == "refused" for c in log.calls) > 10 * len(timeouts)

        time.sleep(RETRY_AFTER)  # resumed: the next call is let through, answers, and closes it
        assert [log.call("0123456789abcdef") for _ in range(20)] == ["ok"] * 20
        assert store.get("0123456789abcdef") == "kept"
