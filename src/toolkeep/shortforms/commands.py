"""What a tool call did, from its tool name and, for shell-like tools, from the command it ran.

Tool names alone say little: ``bash`` runs ``cat`` as often as ``pytest``. The economy policy
keeps a read's file content for as long as the file is not read again, a search's matching
lines, and an execution's failures; for that it needs to know which one a result is::

    >>> classify_command("cd /repo && python -m pytest tests/ -x 2>&1 | tail -20")
    'exec'
    >>> classify_command("sed -n '10,40p' src/app.py")
    'read'
    >>> read_target("nl -ba django/db/models/query.py | sed -n '1,80p'")
    'django/db/models/query.py'
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

from .inputs import parsed_object

__all__ = ["Kind", "call_kind", "call_target", "classify_command", "command_of", "read_target"]

Kind: TypeAlias = Literal["read", "search", "list", "exec", "write", "other"]

_READ = frozenset({"cat", "head", "tail", "less", "more", "nl", "bat", "view", "open", "goto",
                   "scroll_down", "scroll_up", "read", "read_file", "read_many_files", "type",
                   "strings", "xxd", "hexdump", "jq", "diff", "wc"})  # fmt: skip
_SEARCH = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "search_dir", "search_file",
                     "find_file", "glob", "search", "search_file_content", "websearch",
                     "search_repositories"})  # fmt: skip
_LIST = frozenset({"ls", "tree", "find", "du", "pwd", "list_directory", "ll", "stat", "which",
                   "whereis", "file", "printenv", "env", "ps", "df"})  # fmt: skip
_WRITE = frozenset({"edit", "create", "write", "write_file", "insert", "str_replace", "mv", "cp",
                    "rm", "mkdir", "touch", "tee", "patch", "apply_patch", "chmod", "ln",
                    "multiedit", "edit_file", "create_file", "notebookedit", "replace", "rmdir",
                    "todowrite", "kill", "pkill"})  # fmt: skip
_PREFIXES = frozenset({"sudo", "time", "timeout", "nice", "env", "command", "exec", "nohup",
                       "xargs", "then", "do", "else", "!"})  # fmt: skip
_GIT_READ = frozenset({"diff", "log", "show", "status", "blame", "branch", "remote", "rev-parse",
                       "ls-files", "grep"})  # fmt: skip
_SHELL_TOOLS = frozenset({"bash", "shell", "sh", "exec", "execute", "execute_bash", "terminal",
                          "execute_command", "run", "run_command", "run_shell_command",
                          "exec_command", "shell_command", "local_shell"})  # fmt: skip
"""Tools that run a shell command (Codex CLI's are ``shell``, ``exec_command`` and
``shell_command``): their kind is the command's."""
_SPLIT = re.compile(r"\s*(?:&&|\|\||;|\||\n)\s*")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_RANK: dict[Kind, int] = {"exec": 5, "write": 4, "search": 3, "read": 2, "list": 1, "other": 0}


def _words(segment: str) -> list[str]:
    try:
        return shlex.split(segment, posix=True)
    except ValueError:  # an unbalanced quote: good enough for classifying
        return segment.split()


def _simple_kind(words: list[str]) -> Kind:
    while words and (words[0] in _PREFIXES or _ASSIGN.match(words[0]) or words[0].isdigit()):
        words = words[1:]
    if not words:
        return "other"
    word = words[0].rsplit("/", 1)[-1].lower()
    if word == "cd" or (word == "echo" and not any(w.startswith(">") for w in words)):
        return "other"
    if word == "sed":
        if any(w == "-i" or w.startswith("-i") for w in words[1:]):
            return "write"
        return "read"
    if word == "awk" or word == "cut" or word == "sort" or word == "uniq":
        return "read"
    if word == "git":
        sub = next((w for w in words[1:] if not w.startswith("-")), "")
        return "search" if sub == "grep" else "read" if sub in _GIT_READ else "exec"
    if any(w.startswith(">") and not w.startswith(">&") for w in words[1:]) and word in (
        "echo",
        "printf",
        "cat",
    ):
        return "write"
    for kind, names in (("read", _READ), ("search", _SEARCH), ("list", _LIST), ("write", _WRITE)):
        if word in names:
            return kind  # type: ignore[return-value]
    return "exec"


def classify_command(command: str) -> Kind:
    """The kind of a shell command line: the strongest kind among its simple commands.

    Executions (tests, builds, scripts) outrank writes, which outrank searches, reads and
    listings, so ``cat x | python`` is an execution and ``grep x f | head`` a search.
    """
    best: Kind = "other"
    for segment in _SPLIT.split(command.strip()):
        if not segment:
            continue
        words = _words(segment)
        if words and words[0] in ("head", "tail", "sort", "uniq", "wc", "cut") and best != "other":
            continue  # a filter after a pipe does not change what the command was
        kind = _simple_kind(words)
        if _RANK[kind] > _RANK[best]:
            best = kind
    return best


def _object(arguments: Any) -> Any:
    """``arguments`` as the object a JSON string of one holds (OpenAI formats send a call's
    arguments so: ``'{"cmd": "cat f"}'``), else as it is (a mapping, or a plain string such as
    a custom tool's input)."""
    parsed = parsed_object(arguments) if isinstance(arguments, str) else None
    return arguments if parsed is None else parsed


def command_of(arguments: Any) -> str | None:
    """The shell command in a call's arguments (a mapping, or a JSON string of one), if it has
    one; a plain string is the command itself."""
    arguments = _object(arguments)
    if isinstance(arguments, str):
        return arguments
    if not isinstance(arguments, Mapping):
        return None
    for key in ("command", "cmd", "commands", "script", "code"):
        value = arguments.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return " ".join(value)
    return None


def call_kind(name: str | None, arguments: Any) -> Kind:
    """The kind of a tool call, from its command for shell-like tools, else from its name.

    >>> call_kind("exec_command", '{"cmd": "cat src/app.py"}')
    'read'
    """
    arguments = _object(arguments)
    tool = (name or "").lower()
    command = command_of(arguments)
    if tool in ("str_replace_editor", "str_replace_based_edit_tool", "text_editor") and isinstance(
        arguments, Mapping
    ):
        return "read" if arguments.get("command") == "view" else "write"
    if command is not None and (tool in _SHELL_TOOLS or tool == command.split(" ", 1)[0].lower()):
        return classify_command(command)
    if tool in ("read", "read_file", "view", "open", "cat", "notebookread", "get_file_contents"):
        return "read"
    if tool in _SEARCH or tool in ("grep", "glob"):
        return "search"
    if tool in _LIST:
        return "list"
    if tool in _WRITE:
        return "write"
    if tool in _SHELL_TOOLS or tool in (
        "python",
        "ipython",
        "pytest",
        "make",
        "mvn",
        "mvnw",
        "javac",
        "java",
    ):
        return "exec"
    return "other"


_READ_WITH_FILE = frozenset({"cat", "nl", "head", "tail", "sed", "open", "less", "more", "bat"})


def read_target(command: str) -> str | None:
    """The file a read command shows, with its range when it shows part of one.

    ``cat f``, ``nl -ba f``, ``head -n 50 f``, ``sed -n '1,80p' f`` (as ``f:1,80p``), SWE-agent's
    ``open f [line]``. ``None`` when the command is not a plain read of one file.
    """
    segments = [s for s in _SPLIT.split(command.strip()) if s]
    if not segments:
        return None
    words = _words(segments[0])
    if not words or words[0] not in _READ_WITH_FILE:
        return None
    files = [w for w in words[1:] if not w.startswith("-") and not re.fullmatch(r"\d+", w)]
    span = ""
    if words[0] == "sed":
        script = next((w for w in words[1:] if re.fullmatch(r"\d+(,\d+)?p", w)), None)
        if script is None:
            return None
        files = [w for w in files if w != script]
        span = ":" + script
    if len(files) != 1:
        return None
    for later in segments[1:]:  # `nl -ba f | sed -n '1,80p'` shows a range of f
        lw = _words(later)
        if lw[:1] == ["sed"]:
            script = next((w for w in lw[1:] if re.fullmatch(r"\d+(,\d+)?p", w)), None)
            span += ":" + (script or "?")
        elif lw[:1] in (["head"], ["tail"]):
            span += ":" + " ".join(lw)
    if words[0] == "open" and len(words) > 2:
        span += ":" + words[2]
    return files[0] + span


def call_target(name: str | None, arguments: Any) -> str | None:
    """The file (and range) a read call shows, or the file a write call changes."""
    arguments = _object(arguments)
    if isinstance(arguments, Mapping):
        for key in ("file_path", "absolute_path", "path", "filename", "file"):
            value = arguments.get(key)
            if isinstance(value, str):
                extra = [str(arguments[k]) for k in ("offset", "limit", "view_range", "start_line", "end_line")
                         if arguments.get(k) is not None]  # fmt: skip
                return value + (":" + ",".join(extra) if extra else "")
    command = command_of(arguments)
    return read_target(command) if command is not None else None
