"""``toolkeep recall``: the original behind a marker."""

from __future__ import annotations

import os
import sys

import click

from ..exceptions import InvalidKeyError
from ..stores import validate_key
from ..workspace import split_lines
from ._app import InputError, cli
from .store import STORE_ENV, open_cli_store, open_user_store, store_options

__all__ = ["line_range_options", "write_text"]


def line_range_options(f: click.decorators.FC) -> click.decorators.FC:
    """``--start-line N`` and ``--end-line M`` (1-based, inclusive)."""
    f = click.option("--end-line", type=click.IntRange(min=1), help="Last line to print (inclusive).")(f)
    return click.option("--start-line", type=click.IntRange(min=1), help="First line to print (1-based).")(f)


def check_range(start_line: int | None, end_line: int | None) -> None:
    """Refuse an end before the start (exit 2)."""
    if start_line is not None and end_line is not None and end_line < start_line:
        raise click.UsageError(f"--end-line {end_line} is before --start-line {start_line}")


def write_text(text: str) -> None:
    """Write ``text`` to stdout byte-exact (lone surrogates as they were archived)."""
    sys.stdout.buffer.write(text.encode("utf-8", "surrogatepass"))
    sys.stdout.buffer.flush()


@cli.command()
@click.argument("key")
@store_options
@line_range_options
def recall(
    key: str, store_url: str | None, workspace: str | None, start_line: int | None, end_line: int | None
) -> None:
    """Print the original behind a <<ccr:KEY>> marker, byte-exact (or lines of it).

    Looks in the store named (--workspace, --store, $TOOLKEEP_STORE_URL), then in the per-user
    archive, where a tool's capped output keeps its original. Exit 1 if neither holds KEY
    (never archived, evicted or expired).
    """
    check_range(start_line, end_line)
    try:
        validate_key(key)
    except InvalidKeyError as exc:
        raise InputError(str(exc)) from None
    with open_cli_store(store_url, workspace) as archive:
        text = archive.get(key)
    named = workspace or store_url or os.environ.get(STORE_ENV)
    where = workspace or ("the store" if named else "the per-user archive")
    if text is None and named and not store_url:  # a cap's original outlives its session there
        user = open_user_store()
        if user is not None:
            with user:
                text = user.get(key)
            where += " or the per-user archive"
    if text is None:
        raise click.ClickException(f"no archived original under key {key} in {where} (unknown or expired)")
    if start_line is not None or end_line is not None:
        lines = split_lines(text)
        first = start_line or 1
        if first > max(len(lines), 1):
            raise click.ClickException(f"--start-line {first} is past the end: {key} has {len(lines)} lines")
        text = "".join(lines[first - 1 : end_line])
    write_text(text)
