"""``toolkeep inspect``: what toolkeep did to each request of recorded sessions, as one HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..config import Config
from ..replay.importers import RecordedSession
from ._app import InputError, cli
from .replay import _document, replay_options, start_run


@cli.command()
@replay_options
@click.option(
    "-o",
    "--output",
    "output",
    metavar="REPORT.html",
    required=True,
    help="The HTML file to write (one file).",
)
def inspect(output: str, quiet: bool, config: Config, **inputs: Any) -> None:
    """Replay recorded sessions as toolkeep replay does and write one self-contained HTML page.

    For each session: a timeline of its requests (tokens sent with and without toolkeep, cache
    reads, cache writes, uncached input, cost); every result sent shorter than its original, how
    it entered and which form it moved to at which request and why, with what the model saw
    beside the original, one click apart; and the repairs made. Above them: totals, the sessions
    where toolkeep saved least, and the policy and prices used. Its figures are those of
    toolkeep replay --json on the same inputs. The page needs no network: open it from disk.
    """
    from ..inspector import SessionTrace, render

    run = start_run(config=config, quiet=quiet, **inputs)
    traces: list[SessionTrace] = []

    def trace_for(recorded: RecordedSession) -> SessionTrace:
        traces.append(SessionTrace(recorded))
        return traces[-1]

    results = run.replay_all(trace_for)
    page = render(_document(results, run.skipped, run.counter, run.config), traces)
    try:
        Path(output).write_text(page, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write {output}: {exc.strerror or exc}") from None
    size = Path(output).stat().st_size
    click.echo(f"toolkeep: wrote {output} ({size / 1_000_000:.1f} MB, {len(results)} sessions)", err=True)
