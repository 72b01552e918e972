"""Every CLI error is one line on stderr, exit 2 (or 1 for a negative answer), never a traceback:
the tester's cases, and a hypothesis run over argv and store URLs in real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TOOLKEEP = [sys.executable, "-m", "toolkeep"]
HUGE = "9" * 5_000


def run(*args: str, cwd: Path | None = None, close_stdout: bool = False, stdin: bytes = b"",
        stdout_to: str | None = None) -> subprocess.CompletedProcess[bytes]:  # fmt: skip
    """``toolkeep ARGS`` in a subprocess; with ``close_stdout`` its stdout is closed (``>&-``)."""
    env = {k: v for k, v in os.environ.items() if k != "TOOLKEEP_STORE_URL"}
    command = [*TOOLKEEP, *args]
    if close_stdout or stdout_to:
        redirect = ">&-" if close_stdout else f'>"{stdout_to}"'
        command = ["sh", "-c", f'exec "$@" {redirect}', "sh", *command]
    return subprocess.run(command, input=stdin, capture_output=not (close_stdout or stdout_to),
                          stderr=subprocess.PIPE if (close_stdout or stdout_to) else None,
                          env=env, cwd=cwd, timeout=120)  # fmt: skip


def assert_one_error_line(done: subprocess.CompletedProcess[bytes], code: int = 2) -> str:
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == code, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert err.count("\n") == 1 and err.startswith("toolkeep: error: "), err
    return err


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of inputs a user may hand the CLI, good and bad."""
    base = tmp_path_factory.mktemp("cli-inputs")
    ok = [{"role": "user", "content": "hi"}]
    bad_id = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "\ud800", "name": "a", "input": {}}]},
    ]
    (base / "ok.json").write_text(json.dumps(ok))
    (base / "surrogate.json").write_text(json.dumps(bad_id))  # ASCII: the id as a \ud800 escape
    (base / "huge.json").write_text(f'[{{"role": "user", "content": "x", "n": {HUGE}}}]')
    (base / "huge.jsonl").write_text(f'{{"type": "user", "n": {HUGE}}}\n')
    (base / "deep.json").write_text("[" * 100_000)
    (base / "binary.json").write_bytes(b"\xff\xfe\x00junk")
    (base / "empty.json").write_bytes(b"")
    return base


class TestTheTestersCases:
    def test_validate_a_call_id_with_a_lone_surrogate(self, files: Path) -> None:
        """The violation lines name the id backslash-escaped (it used to be a UnicodeEncodeError)."""
        done = run("validate", str(files / "surrogate.json"))
        assert done.returncode == 1 and b"Traceback" not in done.stderr
        assert b"\\ud800" in done.stdout and done.stderr == b"toolkeep: 2 violation(s)\n"

    @pytest.mark.parametrize(
        ("url", "words"),
        [("redis://[::1", "is malformed"), (f"memory://?max_entries={HUGE}", "expected a whole number"),
         (f"memory://?max_bytes={HUGE}", "expected e.g."), (f"memory://?ttl={HUGE}", "expected seconds"),
         ("memory://?max_entries=²", "expected a whole number"), ("sqlite:///x%00.db", "NUL byte"),
         ("redis://:pa/ss@127.0.0.1:6379/0", "port is not a number"),
         ("redis://127.0.0.1:1/0?colour=red", "unknown store URL parameter")],
    )  # fmt: skip
    def test_bad_store_urls(self, url: str, words: str, tmp_path: Path) -> None:
        """A malformed URL or an impossible limit: one line naming it (cut short), exit 2."""
        for args in (["store", "stats", "--store", url], ["recall", "0123456789abcdef", "--store", url]):
            err = assert_one_error_line(run(*args, cwd=tmp_path))
            assert words in err and len(err) < 500 and "pa/ss" not in err

    @pytest.mark.parametrize("name", ["huge.json", "huge.jsonl", "deep.json"])
    def test_replay_a_file_json_cannot_hold(self, name: str, files: Path) -> None:
        """A 5,000-digit number or 100,000 brackets in a replayed log: one line, exit 2."""
        err = assert_one_error_line(run("replay", "--tokens", "chars", str(files / name)))
        assert name in err

    @pytest.mark.parametrize(
        "args",
        [["validate", "ok.json"], ["prepare", "ok.json", "--workspace", "ws"], ["--help"], ["--version"],
         ["store", "stats", "--store", "memory://"], ["replay", "--tokens", "chars", "ok.json"]],
    )  # fmt: skip
    def test_stdout_closed(self, args: list[str], files: Path, tmp_path: Path) -> None:
        """``toolkeep ... >&-``: one line saying stdout is closed, exit 2 (not an AttributeError on
        None, nor silence and exit 0)."""
        args = [str(files / a) if a.endswith(".json") else a for a in args]
        err = assert_one_error_line(run(*args, cwd=tmp_path, close_stdout=True))
        assert "stdout" in err and "closed" in err

    def test_prepare_to_a_file_needs_no_stdout(self, files: Path, tmp_path: Path) -> None:
        """With -o, a closed stdout is not needed and not an error."""
        done = run("prepare", str(files / "ok.json"), "--workspace", "ws", "-o", "out.json", cwd=tmp_path,
                   close_stdout=True)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert json.loads((tmp_path / "out.json").read_text()) == [{"role": "user", "content": "hi"}]

    @pytest.mark.parametrize("args", [["validate", "ok.json"], ["store", "stats", "--store", "memory://"]])
    def test_stdout_full(self, args: list[str], files: Path) -> None:
        """Writing to /dev/full: one line with the reason, exit 2, nothing more at exit."""
        if not os.path.exists("/dev/full"):
            pytest.skip("no /dev/full here")
        args = [str(files / a) if a.endswith(".json") else a for a in args]
        err = assert_one_error_line(run(*args, stdout_to="/dev/full"))
        assert "No space left on device" in err

    def test_stderr_closed_keeps_the_exit_code(self, tmp_path: Path) -> None:
        """With stderr closed too, the error still exits 2 (not 1 from a crash writing it)."""
        done = subprocess.run(["sh", "-c", 'exec "$@" 2>&-', "sh", *TOOLKEEP, "store", "stats", "--store",
                               "ftp://x"], capture_output=True, timeout=120, cwd=tmp_path)  # fmt: skip
        assert done.returncode == 2 and done.stdout == b""


# ------------------------------------------------------------------- any argv, any store URL

_TOKENS = ["a", "é", "%00", "%40", "%3A", "@", ":", "?", "#", "&", "=", "[", "]", " ", "\\", "\udcff", "db",
           "x.db", "0", "-1", "9" * 20, HUGE, "1e5", "0.5", "²", "inf", "\n"]  # fmt: skip
_text = st.lists(st.sampled_from(_TOKENS), max_size=6).map("".join)
_PARAMS = ["max_bytes", "max_entries", "ttl", "prefix", "socket_timeout", "connect_timeout", "retry_after",
           "db", "password", "colour", "ssl_certfile", "retry_on_timeout", "max_connections", "protocol",
           "health_check_interval", ""]  # fmt: skip
_values = st.one_of(st.sampled_from(["1", "0", "-1", "0.5", "10", "64M", "7d", "x", "1e5", "", HUGE]), _text)
_query = st.lists(st.tuples(st.sampled_from(_PARAMS), _values), max_size=3).map(
    lambda pairs: "&".join(f"{k}={v}" for k, v in pairs)
)
# only loopback hosts, on ports nobody listens on (refused at once), or hosts that cannot parse;
# never an empty host, which redis-py would take for localhost:6379, someone's real server
_hosts = st.sampled_from(["127.0.0.1:1", "[::1]:1", "localhost:1", "127.0.0.1:99999", "127.0.0.1:ab",
                          "[::1", "127.0.0.1:1]"])  # fmt: skip
_userinfo = st.one_of(st.just(""), _text.map(lambda pw: f"user:{pw}@"), _text.map(lambda pw: f":{pw}@"))


@st.composite
def store_urls(draw: st.DrawFn) -> str:
    """Store URLs of every scheme, well and badly formed; paths relative (inside the cwd)."""
    kind = draw(st.sampled_from(["memory", "file", "sqlite", "redis", "rediss", "unix", "bare", "other"]))
    query = draw(_query)
    tail = f"?{query}" if query else ""
    if kind == "memory":
        return f"memory://{tail}"
    if kind in ("file", "sqlite"):
        return f"{kind}://{draw(_text) or 'x'}{tail}"
    if kind in ("redis", "rediss"):
        return f"{kind}://{draw(_userinfo)}{draw(_hosts)}/{draw(_text)}{tail}"
    if kind == "unix":
        return f"unix://{draw(_userinfo)}/nonexistent-{draw(_text)}.sock{tail}"
    if kind == "bare":
        return draw(_text) or "bare"
    return f"{draw(st.sampled_from(['ftp', 'REDIS', 'x', 'memory:']))}://{draw(_text)}{tail}"


_FILES = ["ok.json", "surrogate.json", "huge.json", "huge.jsonl", "deep.json", "binary.json", "empty.json",
          "missing.json", "-"]  # fmt: skip
_file = st.sampled_from(_FILES)
_keys = st.one_of(st.sampled_from(["0123456789abcdef", "0123456789ABCDEF", "../../etc/passwd"]), _text)
_number = st.sampled_from(["1", "0", "-3", "2", HUGE, "x", "²"])


@st.composite
def argvs(draw: st.DrawFn) -> list[str]:
    """Command lines a user (or a fuzzer) could type."""
    store = ["--store", draw(store_urls())] if draw(st.booleans()) else []
    lines = draw(st.sampled_from([[], ["--start-line", draw(_number)], ["--end-line", draw(_number)]]))
    command = draw(
        st.sampled_from(["stats", "gc", "recall", "read", "prepare", "validate", "replay", "junk"])
    )
    if command in ("stats", "gc"):
        return ["store", command, *store, *draw(st.sampled_from([[], ["--json"]]))]
    if command == "recall":
        return ["recall", draw(_keys), *store, *lines]
    if command == "read":
        return ["read", draw(_text), "--workspace", draw(st.sampled_from(["ws", ".", "missing"])), *lines]
    if command == "prepare":
        workspace = ["--workspace", draw(st.sampled_from(["ws", "w]s", "w\\s", "w…s", "w\udcffs"]))]
        return [
            "prepare",
            draw(_file),
            *workspace,
            *store,
            *draw(st.sampled_from([[], ["--format", "bedrock"]])),
        ]
    if command == "validate":
        return [
            "validate",
            draw(_file),
            *draw(st.sampled_from([[], ["--format", "openai-chat"], ["--format", "x"]])),
        ]
    if command == "replay":
        return ["replay", "--tokens", "chars", draw(_file), *draw(st.sampled_from([[], ["--json"]]))]
    return draw(
        st.lists(st.one_of(_text, st.sampled_from(["--store", "-h", "--bogus", "store"])), max_size=4)
    )


@settings(
    max_examples=int(os.environ.get("TOOLKEEP_CLI_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(argv=argvs(), close_stdout=st.booleans(), stdin=st.sampled_from([b"", b"[]", b"[" * 5_000, b"\xff"]))
def test_no_traceback_ever(argv: list[str], close_stdout: bool, stdin: bytes, files: Path) -> None:
    """Whatever the command line, the store URL, the input or a closed stdout: exit 0, 1 or 2;
    every line on stderr is toolkeep's own; an exit 2 ends with exactly one error line."""
    done = run(*argv, cwd=files, close_stdout=close_stdout, stdin=stdin)
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode in (0, 1, 2), (argv, err)
    assert "Traceback" not in err and "internal error" not in err, (argv, err)
    lines = err.splitlines()
    assert all(line.startswith("toolkeep: ") for line in lines), (argv, err)
    errors = [line for line in lines if line.startswith("toolkeep: error: ")]
    if done.returncode == 2:
        assert len(errors) == 1 and lines[-1] == errors[0], (argv, err)
