"""``toolkeep read``: the workspace reader on the command line."""

from __future__ import annotations

import click

from ..exceptions import ReaderError
from ..workspace import WorkspaceReader
from ._app import cli
from .recall import check_range, line_range_options, write_text


@cli.command(name="read")
@click.argument("path")
@click.option(
    "--workspace",
    required=True,
    type=click.Path(file_okay=False, exists=True),
    help="The session directory; nothing outside it is read.",
)
@line_range_options
def read_command(path: str, workspace: str, start_line: int | None, end_line: int | None) -> None:
    """Print lines of a file inside the session workspace (PATH relative to it, or absolute
    inside it). Exit 1, with the reason, for anything else."""
    check_range(start_line, end_line)
    try:
        text = WorkspaceReader(workspace).read(path, start_line or 1, end_line)
    except ReaderError as exc:
        raise click.ClickException(str(exc)) from None
    write_text(text)
