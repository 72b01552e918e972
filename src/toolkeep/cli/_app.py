"""The ``toolkeep`` command line.

Exit codes: 0 success; 1 a negative answer (violations found, key unknown); 2 bad usage or bad
input, always with one line on stderr and never a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

try:
    import click
except ImportError:  # pragma: no cover - exercised only without the extra
    sys.stderr.write("toolkeep: the command line needs click: pip install 'toolkeep[cli]'\n")
    raise SystemExit(2) from None

from .. import __version__
from ..exceptions import ToolkeepError
from ..formats import FORMATS

__all__ = [
    "InputError",
    "cli",
    "dumps",
    "format_option",
    "main",
    "read_json",
    "split_request",
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
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{source}: invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise InputError(f"{source}: JSON nested too deeply") from None
    except ValueError as exc:  # e.g. an integer literal past int's digit limit
        raise InputError(f"{source}: invalid JSON: {exc}") from None


def split_request(document: Any, source: str) -> tuple[list[Any], Callable[[list[Any]], Any]]:
    """The message list of a document, and how to put a new list back in its place.

    A document is a message list, or a request object with a ``messages`` list.
    """
    if isinstance(document, list):
        return document, lambda messages: messages
    if isinstance(document, dict) and isinstance(document.get("messages"), list):
        return document["messages"], lambda messages: {**document, "messages": messages}
    raise InputError(
        f"{source}: expected a JSON list of messages or an object with a 'messages' list, "
        f"got {type(document).__name__}"
    )


def dumps(value: Any, indent: int | None) -> bytes:
    """Deterministic JSON bytes; lone surrogates fall back to ASCII escapes."""
    text = json.dumps(value, ensure_ascii=False, indent=indent) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(value, ensure_ascii=True, indent=indent) + "\n").encode("ascii")


def write_output(target: str, data: bytes) -> None:
    if target == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    try:
        Path(target).write_bytes(data)
    except OSError as exc:
        raise InputError(f"cannot write {target}: {exc.strerror or exc}") from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="toolkeep")
def cli() -> None:
    """Keep an agent's tool results valid, within budget and recoverable."""


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Entry point: run the CLI, turning every expected error into one line and an exit code."""
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
    except BrokenPipeError:
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


def _fail(message: str, code: int) -> NoReturn:
    line = " ".join(message.split())
    sys.stderr.write(f"toolkeep: error: {line}\n")
    sys.exit(code)
