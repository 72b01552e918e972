"""The ``toolkeep`` command line.

Exit codes: 0 success; 1 a negative answer (violations found, key unknown); 2 bad usage or bad
input, always with one line on stderr and never a traceback.
"""

from __future__ import annotations

import errno
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

try:
    import click
except ImportError:  # pragma: no cover - exercised only without the extra
    sys.stderr.write("toolkeep: the command line needs click: pip install 'toolkeep[cli]'\n")
    raise SystemExit(2) from None

from .. import __version__, jsonnumbers
from ..exceptions import FormatError, ToolkeepError
from ..formats import FORMATS
from ..requests import read_request

__all__ = [
    "InputError",
    "cli",
    "dumps",
    "format_option",
    "main",
    "read_document",
    "read_json",
    "unreadable_json",
    "write_output",
]

F = TypeVar("F", bound=Callable[..., Any])
FORMAT_CHOICES = ["auto", *FORMATS]


class InputError(click.ClickException):
    """Bad input: exit 2 with one line."""

    exit_code = 2


def format_option(f: F) -> F:
    return click.option(
        "--format",
        "format_name",
        type=click.Choice(FORMAT_CHOICES),
        default="auto",
        show_default=True,
        help="History format; auto detects it.",
    )(f)


def read_json(source: str) -> Any:
    """Parse the JSON document in file ``source`` (``-`` for stdin) or raise :class:`InputError`."""
    try:
        data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {source}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{source}: not valid UTF-8 (byte {exc.start})") from None
    del data  # a 100 MB input is then held twice while parsing (text and result), not three times
    try:
        return jsonnumbers.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{source}: {unreadable_json(exc)}") from None


def unreadable_json(exc: ValueError | RecursionError) -> str:
    """What is wrong with a JSON text :func:`json.loads` refused, in a few words."""
    if isinstance(exc, json.JSONDecodeError):
        return f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
    if isinstance(exc, RecursionError):
        return "JSON nested too deeply"
    if "digits" in str(exc):  # an integer literal past int's digit limit
        return f"invalid JSON: a number has more than {sys.get_int_max_str_digits():,} digits"
    return f"invalid JSON: {exc}"


def read_document(source: str) -> list[Any] | dict[str, Any]:
    """The JSON document in ``source``: a message list, or a request object whose history can be
    found (:mod:`toolkeep.requests`); anything else is an :class:`InputError`."""
    document = read_json(source)
    if isinstance(document, list):
        return document
    expected = "expected a JSON list of messages or a request object"
    if not isinstance(document, dict):
        raise InputError(
            f"{source}: {expected} (with 'messages', 'input' or 'contents'), got {type(document).__name__}"
        )
    try:
        read_request(document)
    except FormatError as exc:
        raise InputError(f"{source}: {expected}: {exc}") from None
    return document


def dumps(value: Any, indent: int | None) -> bytes:
    """Deterministic JSON bytes; lone surrogates fall back to ASCII escapes. A number past
    float's range is written as :func:`read_json` read it (``1e400``), never as ``Infinity``."""
    try:
        return _json_text(value, indent, ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return _json_text(value, indent, ascii=True).encode("ascii")


def _json_text(value: Any, indent: int | None, *, ascii: bool) -> str:
    try:
        return jsonnumbers.dumps(value, indent=indent, ensure_ascii=ascii) + "\n"
    except ValueError as exc:  # a NaN or an infinity that no JSON text held
        raise InputError(str(exc)) from None


def write_output(target: str, data: bytes) -> None:
    if target == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    try:
        Path(target).write_bytes(data)
    except OSError as exc:
        raise InputError(f"cannot write {target}: {exc.strerror or exc}") from None


_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")


def plain(text: str | None) -> str | None:
    """``text`` as a terminal shows it: the docstrings' reST roles (:class:`~toolkeep.Config`) and
    literals (````--policy````) as the plain words they mark."""
    if text is None:
        return None
    return _LITERAL.sub(
        r"\1", _ROLE.sub(lambda m: m[1].rsplit(".", 1)[-1] if m[0].count("~") else m[1], text)
    )


class PlainCommand(click.Command):
    """A command whose help, and its options' help, is shown without reST markup: help is
    written once, in docstrings, which the API reference renders as reST."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _plain_command(self)


class PlainGroup(click.Group):
    """A group of :class:`PlainCommand` (its subgroups too), shown without reST markup."""

    command_class = PlainCommand
    group_class = type  # a subgroup is a PlainGroup too

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _plain_command(self)


def _plain_command(command: click.Command) -> None:
    command.help, command.short_help = plain(command.help), plain(command.short_help)
    for param in command.params:
        if isinstance(param, click.Option):
            param.help = plain(param.help)


@click.group(cls=PlainGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="toolkeep")
def cli() -> None:
    """Keep an agent's tool results valid, within budget and recoverable."""


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Entry point: run the CLI, turning every error into one line on stderr and an exit code
    (2 unless the error says otherwise); never a traceback."""
    _prepare_streams()
    try:
        code = cli.main(
            args=list(argv) if argv is not None else None, prog_name="toolkeep", standalone_mode=False
        )
    except click.UsageError as exc:
        _fail(f"{exc.format_message()}", 2)
    except click.ClickException as exc:
        _fail(exc.format_message(), exc.exit_code)
    except click.exceptions.Abort:
        _fail("aborted", 130)
    except ToolkeepError as exc:
        _fail(str(exc), 2)
    except RecursionError:
        _fail("input nested too deeply", 2)
    except BrokenPipeError:  # the reader went away (| head): nothing to say, nobody to say it to
        _drop_stdout()
        sys.exit(1)
    except OSError as exc:  # stdout closed (>&-) or full (/dev/full), or a file this code did not expect
        _drop_stdout()
        _fail(f"{exc.strerror or type(exc).__name__}" + (f": {exc.filename}" if exc.filename else ""), 2)
    except Exception as exc:  # a bug: still one line, naming where, never the data
        _fail(f"internal error ({_where(exc)}); please report it with the command that caused it", 2)
    sys.exit(code if isinstance(code, int) else 0)


def _fail(message: str, code: int) -> NoReturn:
    line = " ".join(message.split())
    stderr = sys.stderr
    if stderr is not None:  # stderr closed (2>&-): the exit code is all there is
        try:
            stderr.write(f"toolkeep: error: {line}\n")
            stderr.flush()
        except OSError:
            pass
    sys.exit(code)


class _Closed:
    """Stands for a standard stream the shell closed (``>&-``): writing to it is an error the
    CLI reports in one line, where Python would have ``None`` and the code a traceback."""

    encoding = "utf-8"
    errors = "backslashreplace"

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def buffer(self) -> _Closed:
        return self

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def flush(self) -> None:
        return None

    def write(self, text: object) -> int:
        raise OSError(errno.EBADF, f"cannot write to {self.name}: it is closed")


def _prepare_streams() -> None:
    """A closed stdout becomes :class:`_Closed`; text a JSON input may hold but no encoding can
    (a lone surrogate in a call id) is written backslash-escaped instead of raising."""
    if sys.stdout is None:
        sys.stdout = _Closed("stdout")
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def _drop_stdout() -> None:
    """Point stdout at the null device, so that the flush at exit cannot fail a second time."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):  # no descriptor (a closed or replaced stream)
        pass


def _where(exc: BaseException) -> str:
    """``TypeName at module.py:LINE`` of the innermost frame of ``exc``."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return type(exc).__name__
    return f"{type(exc).__name__} at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}"
