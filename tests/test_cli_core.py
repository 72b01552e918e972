"""The ``toolkeep`` command line, run as a real subprocess: prepare, recall, validate, -h, --version."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import toolkeep
from toolkeep.policies import POLICIES
from toolkeep.shorten import archive_key

from .strategies import assistant, oa_assistant, oa_tool, oa_user, tool_result, tool_use, user

SCRIPT = Path(sys.executable).with_name("toolkeep")
TOOLKEEP = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "toolkeep"]


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*TOOLKEEP, *args], input=stdin, capture_output=True, timeout=120)


def broken() -> list[Any]:
    """A broken Anthropic history: a missing result, an orphan, a duplicate id, a displaced
    result, an oversized result (age 1) and a large one old enough (age 2) to be truncated."""
    return [
        user("fix it"),
        assistant(tool_use("a", "read"), tool_use("a", "read"), tool_use("b", "grep")),
        user(tool_result("a", "x" * 5_000), tool_result("zz", "orphan")),
        assistant(tool_use("c", "fetch")),
        user("meanwhile, also look at c"),
        user(tool_result("c", "é" * 25_000)),
        assistant("done?"),
    ]


def one_error_line(result: subprocess.CompletedProcess[bytes]) -> str:
    """Assert exit 2 with exactly one line on stderr and no traceback; return the line."""
    err = result.stderr.decode()
    assert result.returncode == 2, err
    assert "Traceback" not in err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    return err.strip()


@pytest.fixture
def broken_file(tmp_path: Path) -> Path:
    path = tmp_path / "in.json"
    path.write_text(json.dumps(broken(), ensure_ascii=False), encoding="utf-8")
    return path


class TestHelpAndVersion:
    def test_version(self) -> None:
        """``--version`` prints the package version and exits 0."""
        result = run("--version")
        assert result.returncode == 0
        assert toolkeep.__version__ in result.stdout.decode()

    @pytest.mark.parametrize("flag", ["-h", "--help"])
    def test_help_lists_commands(self, flag: str) -> None:
        """``-h`` lists every command of the contract."""
        result = run(flag)
        assert result.returncode == 0
        out = result.stdout.decode()
        for command in ("prepare", "recall", "validate"):
            assert command in out

    @pytest.mark.parametrize("command", ["prepare", "recall", "validate"])
    def test_command_help(self, command: str) -> None:
        """Each command has ``-h`` naming its options."""
        out = run(command, "-h").stdout.decode()
        assert "Usage:" in out
        expected = {
            "prepare": ["-o", "--format", "--workspace", "--report"],
            "recall": ["--workspace"],
            "validate": ["--format"],
        }[command]
        for option in expected:
            assert option in out


class TestPrepare:
    def test_files_workspace_and_report(self, broken_file: Path, tmp_path: Path) -> None:
        """prepare IN -o OUT --workspace DIR --report FILE writes a valid history and the report
        (SPEC's policy, whose cuts of this history are known), and says so in one line."""
        out, ws, rep = tmp_path / "out.json", tmp_path / "ws", tmp_path / "report.json"
        result = run(
            "prepare", str(broken_file), "-o", str(out), "--workspace", str(ws), "--report", str(rep),
            "--policy", "spec",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        prepared = json.loads(out.read_text(encoding="utf-8"))
        assert toolkeep.validate(prepared, "anthropic") == []
        report = json.loads(rep.read_text(encoding="utf-8"))
        assert result.stdout == b""
        assert result.stderr.decode() == (
            "toolkeep: policy spec, pricing anthropic-5m: 4 repairs; 3 results, 1 persisted, "
            f"1 truncated, 0 summarized, 0 capped; tool-result chars {report['chars']['before']:,} -> "
            f"{report['chars']['after']:,}\n"
        )
        assert report["policy"] == "spec"
        assert {
            k: report["repairs"][k]
            for k in ("synthetic", "orphans_removed", "duplicates_pruned", "relocated")
        } == {
            "synthetic": 1,
            "orphans_removed": 1,
            "duplicates_pruned": 1,
            "relocated": 1,
        }
        results = report["results"]
        assert {k: results[k] for k in ("total", "capped", "persisted", "truncated", "summarized")} == {
            "total": 3,
            "capped": 0,
            "persisted": 1,
            "truncated": 1,
            "summarized": 0,
        }
        assert report["chars"]["before"] == 5_000 + len("orphan") + 25_000
        assert report["chars"]["after"] == sum(
            len(b["content"]) for m in prepared if m["role"] == "user" and isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result"
        )  # fmt: skip
        assert ws.is_dir() and (ws / "tool-results" / f"budget_c_{archive_key('é' * 25_000)}.txt").is_file()

    @pytest.mark.parametrize("policy", [None, "default", "economy", "spec", "seed"])
    def test_says_which_policy_ran(self, policy: str | None, broken_file: Path, tmp_path: Path) -> None:
        """The line on stderr and the report name the policy that ran: ``economy`` unless named
        (``default`` names it too)."""
        named = [] if policy is None else ["--policy", policy]
        rep = tmp_path / "report.json"
        result = run(
            "prepare", str(broken_file), "--workspace", str(tmp_path / "ws"), "--report", str(rep), *named
        )
        assert result.returncode == 0, result.stderr
        ran = "economy" if policy in (None, "default") else policy
        assert result.stderr.decode().startswith(f"toolkeep: policy {ran}, pricing anthropic-5m: 4 repairs; ")
        assert result.stderr.count(b"\n") == 1
        assert json.loads(rep.read_text(encoding="utf-8"))["policy"] == ran

    def test_repeated_prepare_same_workspace_is_byte_identical(
        self, broken_file: Path, tmp_path: Path
    ) -> None:
        """Two runs with the same --workspace give the same bytes, and the workspace is reused."""
        ws = tmp_path / "ws"
        first = run("prepare", str(broken_file), "--workspace", str(ws))
        files = sorted(p.name for p in (ws / "tool-results").iterdir())
        second = run("prepare", str(broken_file), "--workspace", str(ws))
        assert first.returncode == second.returncode == 0
        assert first.stdout == second.stdout and first.stdout
        assert sorted(p.name for p in (ws / "tool-results").iterdir()) == files

    def test_stdin_and_stdout_dash(self, broken_file: Path, tmp_path: Path) -> None:
        """``-`` reads stdin and writes stdout; the result equals the file-to-file run."""
        ws = tmp_path / "ws"
        piped = run("prepare", "-", "-o", "-", "--workspace", str(ws), stdin=broken_file.read_bytes())
        assert piped.returncode == 0, piped.stderr
        run("prepare", str(broken_file), "-o", str(tmp_path / "o.json"), "--workspace", str(ws))
        assert piped.stdout == (tmp_path / "o.json").read_bytes()

    def test_report_to_stdout(self, broken_file: Path, tmp_path: Path) -> None:
        """``--report -`` prints the report on stdout when the output goes to a file."""
        result = run(
            "prepare",
            str(broken_file),
            "-o",
            str(tmp_path / "o.json"),
            "--workspace",
            str(tmp_path / "w"),
            "--report",
            "-",
        )
        assert json.loads(result.stdout)["repairs"]["synthetic"] == 1

    def test_without_workspace_prints_path_on_stderr(self, broken_file: Path) -> None:
        """Without --workspace a new directory is made, kept, and its path printed on stderr."""
        result = run("prepare", str(broken_file))
        assert result.returncode == 0
        (path,) = re.findall(r"session workspace: (\S+)", result.stderr.decode())
        try:
            assert Path(path).is_dir()
            assert path in result.stdout.decode()  # the preview names a file in it
            assert (Path(path) / "tool-results").is_dir()
        finally:
            shutil.rmtree(path)

    @pytest.mark.parametrize("fmt", ["auto", "openai-chat"])
    def test_openai_chat_and_format_flag(self, fmt: str, tmp_path: Path) -> None:
        """--format auto detects OpenAI Chat and --format openai-chat names it; both repair it."""
        source = tmp_path / "in.json"
        source.write_text(json.dumps([oa_user(), oa_assistant(("c1", "ls")), oa_tool("zz")]))
        result = run("prepare", str(source), "--format", fmt, "--workspace", str(tmp_path / "ws"))
        assert result.returncode == 0, result.stderr
        out = json.loads(result.stdout)
        assert out[2] == oa_tool("c1", toolkeep.MISSING_RESULT_TEXT) and len(out) == 3

    def test_request_object_keeps_its_other_keys(self, tmp_path: Path) -> None:
        """A request object with a messages list comes back with its other keys as they were."""
        source = tmp_path / "req.json"
        request = {"model": "m", "max_tokens": 5, "messages": [user("go"), assistant(tool_use("a"))]}
        source.write_text(json.dumps(request))
        out = json.loads(run("prepare", str(source), "--workspace", str(tmp_path / "ws")).stdout)
        assert {k: v for k, v in out.items() if k != "messages"} == {"model": "m", "max_tokens": 5}
        assert toolkeep.validate(out["messages"]) == []

    def test_output_is_utf8_not_escaped(self, tmp_path: Path) -> None:
        """Non-ASCII text is written as UTF-8 and round-trips exactly."""
        source = tmp_path / "in.json"
        h = [user("héllo 🙂 中文"), assistant("ok")]
        source.write_text(json.dumps(h), encoding="utf-8")
        out = run("prepare", str(source), "--workspace", str(tmp_path / "ws")).stdout
        assert "🙂".encode() in out and json.loads(out) == h


class TestRecall:
    @pytest.mark.parametrize("policy", sorted(POLICIES))
    def test_recall_prints_original_byte_exact(self, policy: str, broken_file: Path, tmp_path: Path) -> None:
        """Every marker in the prepared output recalls its original, byte for byte, no newline
        added: the result over the per-result limit under every policy, and under SPEC's the
        old one it truncates too."""
        ws = tmp_path / "ws"
        out = run("prepare", str(broken_file), "--workspace", str(ws), "--policy", policy).stdout.decode()
        keys = set(re.findall(r"<<ccr:([0-9a-f]{16})>>", out))
        originals = {archive_key(text): text for text in ("é" * 25_000, "x" * 5_000, "orphan")}
        assert archive_key("é" * 25_000) in keys and keys <= set(originals)
        if policy == "spec":
            assert archive_key("x" * 5_000) in keys
        for key in keys:
            result = run("recall", key, "--workspace", str(ws))
            assert result.returncode == 0
            assert result.stdout == originals[key].encode("utf-8")

    def test_unknown_key_exits_1(self, broken_file: Path, tmp_path: Path) -> None:
        """A well-formed key the workspace's archive does not hold: exit 1 and a message naming it."""
        ws = tmp_path / "ws"
        run("prepare", str(broken_file), "--workspace", str(ws))
        result = run("recall", "0123456789abcdef", "--workspace", str(ws))
        assert result.returncode == 1
        assert result.stdout == b""
        err = result.stderr.decode()
        assert "0123456789abcdef" in err and "Traceback" not in err and err.count("\n") == 1

    def test_workspace_never_used_exits_1(self, tmp_path: Path) -> None:
        """A directory prepare never archived into: exit 1 with one line, nothing on stdout."""
        (tmp_path / "ws").mkdir()
        result = run("recall", "0123456789abcdef", "--workspace", str(tmp_path / "ws"))
        assert result.returncode == 1
        assert result.stdout == b""
        err = result.stderr.decode()
        assert "Traceback" not in err and err.count("\n") == 1

    @pytest.mark.parametrize("key", ["../../etc/passwd", "0123", "0123456789ABCDEF"])
    def test_malformed_key_exits_2(self, key: str, tmp_path: Path) -> None:
        """A malformed key is refused before it touches the filesystem."""
        (tmp_path / "ws").mkdir()
        one_error_line(run("recall", key, "--workspace", str(tmp_path / "ws")))

    def test_recall_without_a_store_looks_in_the_per_user_archive(self, tmp_path: Path) -> None:
        """recall with no store named looks in the per-user archive; with none there, exit 1 and
        one line saying so (never creating one)."""
        env = {**os.environ, "TOOLKEEP_CACHE_DIR": str(tmp_path / "cache")}
        env.pop("TOOLKEEP_STORE_URL", None)
        result = subprocess.run([*TOOLKEEP, "recall", "0123456789abcdef"], capture_output=True, env=env)
        assert result.returncode == 1 and result.stdout == b""
        assert result.stderr.decode().count("\n") == 1 and "per-user archive" in result.stderr.decode()
        assert not (tmp_path / "cache" / "archive.db").exists()


class TestValidate:
    def test_violations_listed_and_exit_1(self, broken_file: Path) -> None:
        """Each violation is a line with message index, id and rule; exit 1."""
        result = run("validate", str(broken_file))
        assert result.returncode == 1
        lines = result.stdout.decode().splitlines()
        rows = {tuple(line.split("\t")[:3]) for line in lines}
        assert ("messages[1]", "a", "duplicate_id") in rows
        assert ("messages[1]", "b", "missing_result") in rows
        assert ("messages[2]", "zz", "orphan_result") in rows
        assert ("messages[3]", "c", "missing_result") in rows

    def test_prepared_output_validates(self, broken_file: Path, tmp_path: Path) -> None:
        """The output of prepare passes validate with exit 0."""
        out = tmp_path / "o.json"
        run("prepare", str(broken_file), "-o", str(out), "--workspace", str(tmp_path / "ws"))
        result = run("validate", str(out), "--format", "anthropic")
        assert result.returncode == 0
        assert b"valid" in result.stdout

    @pytest.mark.parametrize("command", ["validate", "prepare"])
    def test_a_format_the_input_does_not_look_like(
        self, command: str, broken_file: Path, tmp_path: Path
    ) -> None:
        """--format naming a format the input is not: a warning naming the one it looks like (a
        broken Anthropic history read as OpenAI Chat has no calls to find broken); with
        --strict-format, exit 2 and that one line."""
        args = [command, str(broken_file), "--format", "openai-chat"]
        if command == "prepare":
            args += ["-o", str(tmp_path / "o.json"), "--workspace", str(tmp_path / "ws")]
        strict = one_error_line(run(*args, "--strict-format"))
        assert not (tmp_path / "ws").exists()
        result = run(*args)
        warning = result.stderr.decode().splitlines()[0]
        assert warning == (
            f"toolkeep: warning: {broken_file} looks like anthropic, not openai-chat: read as "
            "openai-chat, its tool calls and results may go unseen (--format auto detects the format)"
        )
        assert result.returncode == 0
        assert strict == warning.replace("toolkeep: warning: ", "toolkeep: error: ")
        named = run(*[a if a != "openai-chat" else "anthropic" for a in args], "--strict-format")
        assert b"looks like" not in named.stderr and named.returncode == (1 if command == "validate" else 0)

    def test_validate_openai_from_stdin(self) -> None:
        """validate reads stdin with ``-`` and knows the OpenAI Chat rules."""
        h = [oa_user(), oa_assistant(("c1", "ls")), oa_user("no tool message")]
        result = run("validate", "-", "--format", "openai-chat", stdin=json.dumps(h).encode())
        assert result.returncode == 1
        assert result.stdout.decode().startswith("messages[1]\tc1\tmissing_result")


class TestBadInput:
    @pytest.mark.parametrize(
        "args",
        [
            ["prepare"],
            ["prepare", "x.json", "--bogus"],
            ["prepare", "x.json", "--format", "gemini-xyz"],
            ["nosuchcommand"],
            ["validate"],
        ],
    )
    def test_bad_usage(self, args: list[str], tmp_path: Path) -> None:
        """Bad usage: exit 2, one line on stderr, no traceback."""
        one_error_line(run(*args))

    @pytest.mark.parametrize("command", ["prepare", "validate"])
    @pytest.mark.parametrize(
        ("name", "data"),
        [
            ("missing", None),
            ("invalid-json", b'[{"role": "user", "content": "x"'),
            ("wrong-type-number", b"42"),
            ("wrong-type-string", b'"hello"'),
            ("wrong-type-object", b'{"model": "m"}'),
            ("invalid-utf8", b'[{"role": "user", "content": "\xff\xfe"}]'),
            ("empty", b""),
            ("undetectable", b'[{"role": "robot", "content": 1}]'),
            ("bad-message", b'[{"role": "user", "content": 5}, {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "x", "input": {}}]}]'),
            ("deep", b"[" * 100_000 + b"]" * 100_000),
        ],
    )  # fmt: skip
    def test_bad_input(self, command: str, name: str, data: bytes | None, tmp_path: Path) -> None:
        """Bad input: exit 2, one line on stderr naming the problem, no traceback."""
        path = tmp_path / f"{name}.json"
        if data is not None:
            path.write_bytes(data)
        args = [command, str(path)] + (["--workspace", str(tmp_path / "ws")] if command == "prepare" else [])
        line = one_error_line(run(*args))
        assert line.startswith("toolkeep: error: ") or line.startswith("Error: ")

    @pytest.mark.parametrize("flag", ["-o", "--report"])
    def test_unwritable_output(self, flag: str, broken_file: Path, tmp_path: Path) -> None:
        """An output or report path in a missing directory: exit 2 with one line."""
        args = [
            "prepare",
            str(broken_file),
            "--workspace",
            str(tmp_path / "ws"),
            flag,
            str(tmp_path / "no" / "x.json"),
        ]
        if flag == "--report":
            args += ["-o", str(tmp_path / "out.json")]
        assert "cannot write" in one_error_line(run(*args))

    def test_bad_input_on_stdin(self) -> None:
        """Invalid JSON on stdin is reported the same way."""
        line = one_error_line(run("validate", "-", stdin=b"{nope"))
        assert "invalid JSON" in line

    def test_bad_config_variable(self, broken_file: Path, tmp_path: Path) -> None:
        """An invalid environment variable is one line naming it, exit 2."""
        import os

        env = {**os.environ, "TOOLKEEP_TOOL_RESULT_MAX_CHARS": "lots"}
        result = subprocess.run(
            [*TOOLKEEP, "prepare", str(broken_file), "--workspace", str(tmp_path / "ws")],
            capture_output=True,
            env=env,
            timeout=120,
        )
        assert "TOOLKEEP_TOOL_RESULT_MAX_CHARS" in one_error_line(result)
