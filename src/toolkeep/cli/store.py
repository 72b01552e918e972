"""``toolkeep store stats|gc``: look into an archive store and clean it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from ..exceptions import StoreNotFoundError
from ..stores import ArchiveStore, FileStore, open_store
from ._app import cli

__all__ = ["open_cli_store", "store_options"]

STORE_ENV = "TOOLKEEP_STORE_URL"


def open_cli_store(store_url: str | None, workspace: str | None) -> ArchiveStore:
    """The store named by ``--store`` or ``--workspace`` (one of them), else by TOOLKEEP_STORE_URL.

    Only a store that exists is opened: these commands never create a directory or a database
    file. One that is missing is a negative answer (exit 1): nothing was archived there.
    """
    if store_url and workspace:
        raise click.UsageError("give --workspace DIR or --store URL, not both")
    try:
        if workspace:
            try:
                return FileStore(Path(workspace) / "archive", create=False)
            except StoreNotFoundError:
                raise click.ClickException(
                    f"{workspace} has no archive/ directory: nothing was archived there"
                ) from None
        url = store_url or os.environ.get(STORE_ENV)
        if not url:
            raise click.UsageError(
                f"name the archive with --workspace DIR or --store URL (or set {STORE_ENV})"
            )
        return open_store(url, create=False)
    except StoreNotFoundError as exc:
        raise click.ClickException(str(exc)) from None


def store_options(f: click.decorators.FC) -> click.decorators.FC:
    """``--store URL`` and ``--workspace DIR``."""
    f = click.option(
        "--workspace",
        type=click.Path(file_okay=False, exists=True),
        help="Session directory whose archive/ to use.",
    )(f)
    return click.option(
        "--store",
        "store_url",
        metavar="URL",
        help=f"Archive store: sqlite:///file.db, redis://host:port/db, file:///dir (default: ${STORE_ENV}).",
    )(f)


@cli.group()
def store() -> None:
    """Look into an archive store and clean it."""


@store.command()
@store_options
@click.option("--json", "as_json", is_flag=True, help="Print the stats as JSON.")
def stats(store_url: str | None, workspace: str | None, as_json: bool) -> None:
    """Entries, bytes, hits, misses, evictions and expirations of a store."""
    with open_cli_store(store_url, workspace) as archive:
        values = archive.stats().as_dict()
    if as_json:
        click.echo(json.dumps(values))
        return
    width = max(len(name) for name in values)
    for name, value in values.items():
        shown = "-" if value is None else f"{value:,}" if isinstance(value, int) else value
        click.echo(f"{name:<{width}}  {shown}")


@store.command()
@store_options
def gc(store_url: str | None, workspace: str | None) -> None:
    """Delete expired originals and evict down to the store's caps (set in the URL's query)."""
    with open_cli_store(store_url, workspace) as archive:
        result = archive.gc()
        left = archive.stats()
    click.echo(
        f"removed {result.expired:,} expired, evicted {result.evicted:,}; "
        f"{left.entries:,} originals ({left.bytes:,} bytes) left"
    )
