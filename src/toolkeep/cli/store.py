"""``toolkeep store stats|gc``: look into an archive store and clean it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from ..exceptions import StoreNotFoundError, ToolkeepError
from ..stores import ArchiveStore, FileStore, open_store
from ..userdirs import USER_STORE_LIMITS, user_cache_dir, user_store_url
from ._app import cli
from ._team import disk_options

__all__ = ["open_cli_store", "open_user_store", "store_options"]

STORE_ENV = "TOOLKEEP_STORE_URL"


def open_user_store() -> ArchiveStore | None:
    """The per-user archive, where ``Session.cap_result`` and ``ToolLoop`` keep the originals of
    the cuts they make, with its limits; ``None`` when there is none (nothing was kept there)."""
    try:
        return open_store(user_store_url(), create=False)
    except ToolkeepError:  # absent, or a cache directory this user may not use
        return None


def _with_user_limits(url: str) -> str:
    """``url``, with the per-user archive's limits when it names that archive's file without
    limits of its own: the limits are the URL's, not the file's, and stats should show the ones
    every session opens it with."""
    if "?" in url or not url.startswith("sqlite://"):
        return url
    try:
        own = user_cache_dir() / "archive.db"
        if Path(url.removeprefix("sqlite://")).expanduser().resolve() != own.resolve():
            return url
    except (OSError, ToolkeepError):
        return url
    return f"{url}?{USER_STORE_LIMITS}"


def open_cli_store(store_url: str | None, workspace: str | None) -> ArchiveStore:
    """The store named by ``--store`` or ``--workspace`` (one of them), else by TOOLKEEP_STORE_URL,
    else the per-user archive (``~/.cache/toolkeep/archive.db``, where ``cap_result`` keeps
    originals).

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
            user = open_user_store()
            if user is None:
                raise click.ClickException(
                    "no per-user archive yet (nothing was kept there); name another with "
                    f"--workspace DIR or --store URL (or set {STORE_ENV})"
                )
            return user
        return open_store(_with_user_limits(url), create=False)
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
        help=(
            "Archive store: sqlite:///file.db, redis://host:port/db, file:///dir "
            f"(default: ${STORE_ENV}, else the per-user archive)."
        ),
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
        click.echo(f"{name:<{width}}  {_shown(name, value)}")


LIMITS = ("max_bytes", "max_entries", "ttl")


def _shown(name: str, value: object) -> str:
    """One stat as ``store stats`` prints it: a limit the store does not have is ``none``."""
    if value is None:
        return "none" if name in LIMITS else "-"
    if name == "ttl" and isinstance(value, (int, float)):
        return f"{value:,.0f} s ({value / 86_400:g} days)"
    if name == "max_bytes" and isinstance(value, int):
        return f"{value:,} ({value / 2**30:g} GiB)" if value >= 2**30 else f"{value:,}"
    return f"{value:,}" if isinstance(value, int) else str(value)


@store.command()
@store_options
@click.option(
    "--proxy",
    "proxy_folder",
    is_flag=True,
    help="Collect a proxy's folder (--workspace DIR, else the default proxy workspace): its saved "
    "results and archive, under --max-disk-bytes and --max-age-days, keeping what a running "
    "proxy's live conversations name.",
)
@disk_options
def gc(
    store_url: str | None,
    workspace: str | None,
    proxy_folder: bool,
    max_disk_bytes: int | None,
    max_age_days: float | None,
) -> None:
    """Delete expired originals and evict down to the store's caps (set in the URL's query);
    with --proxy, a proxy's folder down to its disk caps."""
    if proxy_folder:
        _gc_proxy(store_url, workspace, max_disk_bytes, max_age_days)
        return
    with open_cli_store(store_url, workspace) as archive:
        result = archive.gc()
        left = archive.stats()
    click.echo(
        f"removed {result.expired:,} expired, evicted {result.evicted:,}; "
        f"{left.entries:,} originals ({left.bytes:,} bytes) left"
    )


def _gc_proxy(
    store_url: str | None, workspace: str | None, max_bytes: int | None, max_days: float | None
) -> None:
    from ..proxy.disk import DiskCap
    from ..userdirs import user_cache_dir

    if store_url:
        raise click.UsageError("--proxy collects a proxy's folder: name it with --workspace DIR, not --store")
    folder = Path(workspace) if workspace else user_cache_dir() / "proxy"
    if not (folder / "archive").is_dir() and not (folder / "tool-results").is_dir():
        raise click.ClickException(f"{folder} holds no proxy's files (no archive/ or tool-results/)")
    disk = DiskCap(folder, None, max_bytes=max_bytes, max_age=None if max_days is None else max_days * 86_400)
    done = disk.collect()
    click.echo(
        f"removed {done.removed_files:,} files ({done.removed_bytes:,} bytes); kept {done.pinned:,} "
        f"that live conversations name; {done.files:,} files ({done.bytes:,} bytes) left"
    )
