"""``--config FILE``: a TOML file that sets a command's flags, so a team can version its settings.

Its keys are the command's flags' names with underscores (``--anthropic-upstream`` is
``anthropic_upstream``, ``--store`` is ``store``), read from the command's own options, so a flag
added later is covered with nothing to write here. A flag given on the command line wins over the
file, and a flag's environment variable too (the file is the flag's default); a key that names
no flag is an error that names it (exit 2). Values are TOML's own (``port = 8080``,
``remote_agents = true``, ``workspace = "/srv/toolkeep"``, a list for a repeatable flag:
``allow_host = ["a.internal", "b.internal"]``); a setting flag (``--policy``,
``--max-result-chars``, ...) reads its value as it reads its text.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from typing import Any

import click

__all__ = ["config_file_option", "file_keys"]


def file_keys(command: click.Command) -> dict[str, str]:
    """Each key a config file may hold for ``command``: the long name of each of its options
    with underscores, mapped to the option's parameter name (``--config`` and ``--help`` have none)."""
    keys: dict[str, str] = {}
    for param in command.params:
        if not isinstance(param, click.Option) or param.name in (None, "config_file") or param.hidden:
            continue
        for opt in (*param.opts, *param.secondary_opts):
            if opt.startswith("--") and opt != "--help":
                keys[opt[2:].replace("-", "_")] = param.name
    return keys


def _read(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        with open(value, "rb") as handle:
            document = tomllib.load(handle)
    except OSError as exc:
        raise click.BadParameter(
            f"cannot read {value}: {exc.strerror or type(exc).__name__}", ctx, param
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise click.BadParameter(f"{value} is not TOML: {exc}", ctx, param) from None
    keys = file_keys(ctx.command)
    defaults: dict[str, Any] = dict(ctx.default_map or {})
    by_name = {p.name: p for p in ctx.command.params}
    for key, raw in document.items():
        name = keys.get(key)
        if name is None:
            known = ", ".join(sorted(keys))
            raise click.BadParameter(f"{value}: unknown key {key!r} (known: {known})", ctx, param)
        repeatable = isinstance(by_name[name], click.Option) and getattr(by_name[name], "multiple", False)
        if isinstance(raw, list) and repeatable and all(isinstance(v, (str, int, float)) for v in raw):
            defaults[name] = raw  # a repeatable flag (--allow-host): a list of its values
            continue
        if isinstance(raw, (dict, list)) or raw is None:
            raise click.BadParameter(
                f"{value}: {key} must be a string, number or true/false, not a {type(raw).__name__}",
                ctx,
                param,
            )
        defaults[name] = _as_flag_value(by_name[name], raw)
    ctx.default_map = defaults
    return value


def _as_flag_value(param: click.Parameter, raw: Any) -> Any:
    """``raw`` as the option takes it: a flag takes true/false; a setting flag (whose type reads
    text, as its environment variable's) takes text."""
    if isinstance(param, click.Option) and param.is_flag:
        return raw
    if type(param.type).__name__ == "_Setting":
        if isinstance(raw, bool):
            return "true" if raw else "false"
        return str(raw)
    return raw


def config_file_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give ``command`` ``--config FILE`` (put it right below ``@cli.command()``, above the other
    options' decorators, so that it sees every option); its value is not passed on."""
    option = click.option(
        "--config",
        "config_file",
        type=click.Path(exists=True, dir_okay=False),
        metavar="FILE",
        is_eager=True,
        expose_value=False,
        callback=_read,
        help="A TOML file setting any of these flags (keys: the flags' names with underscores, "
        "e.g. port = 8080); flags and their variables override it.",
    )
    return option(command)
