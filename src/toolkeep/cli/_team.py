"""The flags of a proxy a team runs: ``--log-json FILE`` and the disk caps (``--max-disk-bytes``,
``--max-age-days``), handed to the command as one :class:`Team` value (``team``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

import click

from ..exceptions import ConfigError
from ..stores import parse_limits

__all__ = ["DISK_OFF", "Team", "disk_options", "parse_age", "parse_size", "team_options"]

DISK_OFF = ("0", "none", "off")
"""Values of a disk cap that mean no cap."""


@dataclass(frozen=True)
class Team:
    log_json: str | None
    max_disk_bytes: int | None
    max_age_days: float | None

    def open_log(self) -> IO[str] | None:
        """The JSON log, opened to append; an :class:`InputError` (exit 2, one line) when it
        cannot be."""
        if self.log_json is None:
            return None
        from ..proxy.observe import open_log
        from ._app import InputError

        try:
            return open_log(self.log_json)
        except OSError as exc:
            raise InputError(
                f"--log-json {self.log_json}: cannot open it: {exc.strerror or type(exc).__name__}"
            ) from None


class _Size(click.ParamType):  # type: ignore[type-arg]
    name = "size"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int | None:
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return None if value in (None, 0) else int(value)
        text = str(value).strip().lower()
        if text in DISK_OFF:
            return None
        try:
            return parse_size(text)
        except ConfigError as exc:
            self.fail(f"{value!r}: {exc}", param, ctx)


class _Days(click.ParamType):  # type: ignore[type-arg]
    name = "days"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float | None:
        if value is None:
            return None
        if str(value).strip().lower() in DISK_OFF:
            return None
        try:
            return parse_age(value)
        except ConfigError as exc:
            self.fail(f"{value!r}: {exc}", param, ctx)


def parse_size(text: str) -> int:
    """``1G``, ``500M``, ``1073741824``: bytes (:class:`ConfigError` when it is none)."""
    size = parse_limits({"max_bytes": text}).max_bytes
    assert size is not None
    return size


def parse_age(value: object) -> float:
    """A positive number of days."""
    try:
        days = float(str(value))
    except ValueError:
        raise ConfigError("expected a number of days, e.g. 30 or 0.5") from None
    if not 0 < days < 1e6:
        raise ConfigError("expected a positive number of days below a million (0: no age cap)")
    return days


def disk_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--max-disk-bytes`` and ``--max-age-days``."""
    command = click.option(
        "--max-age-days",
        type=_Days(),
        default="30",
        show_default=True,
        metavar="DAYS",
        help="Remove saved results and archived originals not used for this long (0: never).",
    )(command)
    return click.option(
        "--max-disk-bytes",
        type=_Size(),
        default="1G",
        show_default=True,
        metavar="SIZE",
        help="Cap the saved results and archive in bytes as du counts (1G, 500M; 0: no cap), "
        "least recently used first, never what a live conversation names.",
    )(command)


def team_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--log-json FILE`` and the disk caps, passed on as ``team``."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        kwargs["team"] = Team(
            kwargs.pop("log_json"), kwargs.pop("max_disk_bytes"), kwargs.pop("max_age_days")
        )
        return command(*args, **kwargs)

    return click.option(
        "--log-json",
        metavar="FILE",
        help="Append one JSON line per request to FILE: conversation, sizes before and after, "
        "repairs, tiers moved, prepare time, upstream status.",
    )(disk_options(run))
