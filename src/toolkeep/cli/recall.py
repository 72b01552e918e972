"""``toolkeep recall``: the original behind a marker."""

from __future__ import annotations

import sys

import click

from ..config import Config
from ..exceptions import InvalidKeyError
from ..session import Session
from ..stores import validate_key
from ._app import InputError, cli


@cli.command()
@click.argument("key")
@click.option("--workspace", type=click.Path(file_okay=False, exists=True), help="Session directory.")
def recall(key: str, workspace: str | None) -> None:
    """Print the original behind a <<ccr:KEY>> marker, byte-exact."""
    if workspace is None:
        raise click.UsageError("recall needs --workspace DIR")
    try:
        validate_key(key)
    except InvalidKeyError as exc:
        raise InputError(str(exc)) from None
    with Session(Config(keep_tmpdir=True), workspace=workspace) as session:
        text = session.recall(key)
    if text is None:
        raise click.ClickException(f"no archived original under key {key} in {workspace}")
    sys.stdout.buffer.write(text.encode("utf-8", "surrogatepass"))
    sys.stdout.buffer.flush()
