"""``toolkeep prepare`` and ``toolkeep validate``."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click

from ..config import Config
from ..conversation_key import history_key
from ..formats import looks_like, validate
from ..requests import read_input, read_request, validate_request
from ..session import Session
from ..workspace import Workspace
from ._app import InputError, cli, dumps, format_option, read_document, write_output
from ._settings import config_options

strict_format_option = click.option(
    "--strict-format",
    is_flag=True,
    help="Exit 2 when IN does not look like the --format named, instead of warning.",
)


def check_format(source: str, document: list[Any] | dict[str, Any], format_name: str, strict: bool) -> None:
    """Warn on stderr (with --strict-format: exit 2) when ``--format`` names a format the history
    in ``document`` does not look like: read as another format, a history's calls and results
    may go unseen, and a broken one pass as valid."""
    history = document if isinstance(document, list) else read_request(document).history
    if history is None:
        return
    formats = looks_like(history, format_name)
    if not formats:
        return
    message = (
        f"{source} looks like {' or '.join(formats)}, not {format_name}: read as {format_name}, "
        "its tool calls and results may go unseen (--format auto detects the format)"
    )
    if strict:
        raise InputError(message)
    click.echo(f"toolkeep: warning: {message}", err=True)


@cli.command()
@config_options
@click.argument("source", metavar="IN")
@click.option("-o", "--output", default="-", metavar="OUT", help="Where to write the prepared messages.")
@format_option
@click.option("--workspace", type=click.Path(file_okay=False), help="Session directory to use and keep.")
@click.option("--report", "report_path", metavar="FILE", help="Write a JSON report of what was done.")
@click.option("--indent", type=click.IntRange(0, 8), default=None, help="Indent the JSON output.")
@click.option(
    "--store", "store_url", metavar="URL", help="Archive originals there (sqlite:///f.db, redis://...)."
)
@strict_format_option
def prepare(
    source: str,
    output: str,
    format_name: str,
    workspace: str | None,
    report_path: str | None,
    indent: int | None,
    store_url: str | None,
    strict_format: bool,
    config: Config,
) -> None:
    """Repair, budget and compact the history in IN (a JSON file, - for stdin): a message list,
    or a request object, written back in its shape with every other field as it was.

    Without --workspace, the session directory is the conversation's own under the user's cache
    dir (named from its first message: the same input gives the same bytes in every run), kept
    for read and recall; every setting flag also reads the variable it names (--policy:
    economy, the cache-aware default; spec, compaction by age; seed, by age on the text as it
    stands). One line on stderr says which policy ran and what it did."""
    document = read_document(source)
    check_format(source, document, format_name, strict_format)
    if workspace is not None:
        ws = Workspace(workspace, keep=True)
    else:
        key = read_input(document, format_name).key  # what a session keys the conversation by
        ws = Workspace.for_conversation(key or history_key(()), keep=True)
        click.echo(f"toolkeep: session workspace: {ws.path}", err=True)
    with Session(config, workspace=ws, store=store_url) as session:
        prepared, report = session.prepare(document, format=format_name)
    write_output(output, dumps(prepared, indent))
    if report_path:
        write_output(report_path, dumps(report.to_dict(), 2))
    click.echo(f"toolkeep: {report.summary()}", err=True)
    if report.save_errors:
        # nothing is cut without a way back, but what could not be saved stays whole (or its
        # cut says so): the caller must know
        click.echo(
            f"toolkeep: {len(report.save_errors)} original(s) could not be saved "
            f"(first: {report.save_errors[0]}); those results are kept whole or say why",
            err=True,
        )
        sys.exit(3)


@cli.command(name="validate")
@click.argument("source", metavar="IN")
@format_option
@strict_format_option
def validate_command(source: str, format_name: str, strict_format: bool) -> None:
    """Check IN (a message list or a request object) against its provider's pairing rules; exit 1
    if any is broken."""
    document = read_document(source)
    check_format(source, document, format_name, strict_format)
    history: Sequence[Any] | None
    if isinstance(document, list):
        key, history = "messages", document
        violations = validate(document, format=format_name)
    else:
        request = read_request(document)
        key, history = request.key, request.history
        violations = validate_request(document, format=format_name)
    for v in violations:
        click.echo(f"{key}[{v.index}]\t{v.id if v.id is not None else '-'}\t{v.rule}\t{v.message}")
    if violations:
        click.echo(f"toolkeep: {len(violations)} violation(s)", err=True)
        sys.exit(1)
    if history is None:
        click.echo(f"valid: {key!r} is plain text, no pairing violations")
    else:
        click.echo(f"valid: {len(history)} messages, no pairing violations")
