"""Shell-command classification for the economy policy: what kind of call made a result."""

from __future__ import annotations

import pytest

from toolkeep.shortforms.commands import call_kind, call_target, classify_command, command_of, read_target


class TestClassifyCommand:
    @pytest.mark.parametrize(
        ("command", "kind"),
        [
            ("cat src/app.py", "read"),
            ("nl -ba django/db/models/query.py | sed -n '1,80p'", "read"),
            ("sed -n '10,40p' src/app.py", "read"),
            ("head -n 50 README.md", "read"),
            ("git diff", "read"),
            ("grep -rn 'def save' django/ | head -20", "search"),
            ("rg -n Foo src", "search"),
            ("ls -la", "list"),
            ("find . -name '*.py'", "list"),
            ("python -m pytest tests/test_x.py -x", "exec"),
            ("cd /repo && make test 2>&1 | tail -30", "exec"),
            ("uv run pytest", "exec"),
            ("./mvnw -q test", "exec"),
            ("cat script.py | python", "exec"),
            ("git commit -m 'fix'", "exec"),
            ("sed -i 's/a/b/' f.py", "write"),
            ("echo hi > notes.txt", "write"),
            ("mkdir -p build && mv a b", "write"),
            ("cd /repo", "other"),
        ],
    )
    def test_kind(self, command: str, kind: str) -> None:
        """Each command line gets the kind of its strongest simple command."""
        assert classify_command(command) == kind

    def test_env_assignments_and_prefixes_are_skipped(self) -> None:
        """``FOO=1 timeout 60 pytest`` is classified by ``pytest``, not by the prefix."""
        assert classify_command("FOO=1 timeout 60 pytest -q") == "exec"
        assert classify_command("sudo cat /etc/hosts") == "read"

    def test_unbalanced_quote_does_not_raise(self) -> None:
        """A command that shlex cannot split is still classified."""
        assert classify_command('grep -n "unclosed src/') == "search"


class TestReadTarget:
    @pytest.mark.parametrize(
        ("command", "target"),
        [
            ("cat src/app.py", "src/app.py"),
            ("nl -ba src/app.py", "src/app.py"),
            ("sed -n '1,80p' src/app.py", "src/app.py:1,80p"),
            ("nl -ba src/app.py | sed -n '10,20p'", "src/app.py:10,20p"),
            ("open src/Foo.java 120", "src/Foo.java:120"),
            ("cat a.py b.py", None),
            ("pytest -x", None),
            ("sed -i 's/a/b/' f.py", None),
        ],
    )
    def test_target(self, command: str, target: str | None) -> None:
        """A plain read of one file names that file (and its range); anything else names none."""
        assert read_target(command) == target


class TestCallKind:
    def test_shell_tools_are_classified_by_command(self) -> None:
        """``bash`` running ``cat`` is a read; running ``pytest`` an execution."""
        assert call_kind("bash", {"command": "cat setup.py"}) == "read"
        assert call_kind("Bash", {"command": "pytest -q"}) == "exec"
        assert call_kind("run_shell_command", {"command": "grep -rn x ."}) == "search"

    def test_editor_tool_by_subcommand(self) -> None:
        """``str_replace_editor`` viewing a file is a read; creating or replacing is a write."""
        assert call_kind("str_replace_editor", {"command": "view", "path": "/a.py"}) == "read"
        assert call_kind("str_replace_editor", {"command": "str_replace", "path": "/a.py"}) == "write"

    def test_named_tools(self) -> None:
        """Tools without a command are classified by name."""
        assert call_kind("Read", {"file_path": "/a.py"}) == "read"
        assert call_kind("Grep", {"pattern": "x"}) == "search"
        assert call_kind("Write", {"file_path": "/a.py", "content": "x"}) == "write"
        assert call_kind("browser_click", {"index": 3}) == "other"

    def test_swe_agent_commands_named_after_their_first_word(self) -> None:
        """SWE-agent logs name the tool after the command's first word: ``open`` reads, ``python`` runs."""
        assert call_kind("open", {"command": "open src/A.java"}) == "read"
        assert call_kind("python", {"command": "python reproduce.py"}) == "exec"

    def test_call_target(self) -> None:
        """File tools name their path (and range); shell reads name the file they print."""
        assert call_target("Read", {"file_path": "/a.py", "offset": 10, "limit": 50}) == "/a.py:10,50"
        assert call_target("bash", {"command": "cat /a.py"}) == "/a.py"
        assert call_target("bash", {"command": "ls"}) is None

    def test_command_of(self) -> None:
        """The command is found under the usual argument names, or is the argument itself."""
        assert command_of({"cmd": "ls"}) == "ls"
        assert command_of({"command": ["git", "status"]}) == "git status"
        assert command_of("pwd") == "pwd"
        assert command_of({"path": "/x"}) is None

    def test_openai_arguments_are_read_as_the_object_their_json_holds(self) -> None:
        """OpenAI formats send a call's arguments as a JSON string: it is classified by the
        command it holds (Codex CLI's ``exec_command`` and ``shell_command`` are shells), never
        by its JSON text, and a read names its file."""
        assert call_kind("exec_command", '{"cmd": "cat /a.py"}') == "read"
        assert call_kind("shell_command", '{"command": "pytest -q"}') == "exec"
        assert call_kind("shell", '{"command": ["rg", "-n", "x", "src"]}') == "search"
        assert call_kind("read_file", '{"path": "/a.py"}') == "read"
        assert call_target("exec_command", '{"cmd": "sed -n \'1,80p\' /a.py"}') == "/a.py:1,80p"
        assert call_target("read_file", '{"path": "/a.py"}') == "/a.py"
        assert command_of('{"cmd": "ls"}') == "ls"
        assert command_of("{not json") == "{not json"  # a custom tool's plain input is its command
