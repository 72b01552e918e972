"""The config's settings as command-line flags: one per setting of :data:`~toolkeep.config.ENV_VARIABLES`.

Each flag is named after its :class:`~toolkeep.Config` field (``max_result_chars`` is
``--max-result-chars``), reads its environment variables when not given (click's ``envvar``: the
``TOOLKEEP_*`` name, then the ChatCLI fallback), and parses its text as
:meth:`Config.from_env` parses the variable's, so a flag and its variable accept the same values.
A setting added to the map gets its flag here with nothing else to write; a command that already
has an option of that name (``replay --pricing``) keeps its own.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Any

import click

from ..config import DEFAULT_POLICY, DEFAULT_POLICY_ALIAS, ENV_VARIABLES, Config, _parse_env
from ..exceptions import ConfigError
from ..policies import POLICIES

__all__ = ["config_options", "flag_of"]

_TYPES = {f.name: f.type for f in fields(Config)}
_DEFAULTS = {f.name: f.default if f.default is not MISSING else f.default_factory for f in fields(Config)}


def flag_of(name: str) -> str:
    """The flag of the setting ``name``: ``--max-result-chars`` for ``max_result_chars``."""
    return "--" + name.replace("_", "-")


class _Setting(click.ParamType):  # type: ignore[type-arg]
    """The text of a flag (or of its variable), read as :meth:`Config.from_env` reads the variable."""

    def __init__(self, name: str) -> None:
        self.setting = name
        self.name = "setting"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            parsed = _parse_env(self.setting, flag_of(self.setting), value)
        except ConfigError as exc:
            # the parser's words without its "FLAG='text'", which click names already
            said = str(exc).removeprefix(f"{flag_of(self.setting)}={value!r}").lstrip(": ")
            self.fail(f"{value!r}{' ' if said.startswith(('is ', 'must ')) else ': '}{said}", param, ctx)
        if self.setting == "policy" and parsed not in (*POLICIES, DEFAULT_POLICY_ALIAS):
            known = f"{', '.join(POLICIES)}; {DEFAULT_POLICY_ALIAS} is {DEFAULT_POLICY}"
            self.fail(f"{parsed!r} is not a policy (known: {known})", param, ctx)
        return parsed


def config_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give ``command`` a flag per setting (put it right below ``@cli.command()``) and, in place of
    their values, ``config``: :meth:`Config.from_env` with the flags given over the environment
    over the defaults."""
    taken = {o for p in getattr(command, "__click_params__", ()) for o in (*p.opts, *p.secondary_opts)}
    names = [n for n in ENV_VARIABLES if flag_of(n) not in taken]

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        given = {n: kwargs.pop(n) for n in names}
        kwargs["config"] = Config.from_env(**{n: v for n, v in given.items() if v is not None})
        return command(*args, **kwargs)

    # listed after the command's own options (click shows ``__click_params__`` in reverse)
    params: list[click.Parameter] = run.__dict__.setdefault("__click_params__", [])
    params[0:0] = [_option(name) for name in reversed(names)]
    return run


class _SettingOption(click.Option):
    """A setting's flag: its help names the setting's own variable; an error names the variable
    the value came from (an older name it still reads, when that is the one set)."""

    def get_error_hint(self, ctx: click.Context | None) -> str:
        names = [self.envvar] if isinstance(self.envvar, str) else list(self.envvar or ())
        set_ = [n for n in names if n in os.environ] or names[:1]
        return " / ".join(f"'{o}'" for o in self.opts) + "".join(f" (env var: '{n}')" for n in set_[:1])


def _option(name: str) -> click.Option:
    default = _DEFAULTS.get(name)
    if callable(default):  # a field with a default_factory
        default = default()
    if isinstance(default, bool):
        shown, metavar = str(default).lower(), "true|false"
    elif isinstance(default, int) or "int" in str(_TYPES.get(name)):
        shown, metavar = f"{default:,}" if isinstance(default, int) else str(default), "N"
    else:
        shown, metavar = str(default), "|".join(POLICIES) if name == "policy" else "TEXT"
    return _SettingOption(
        [flag_of(name), name],
        type=_Setting(name),
        metavar=metavar,
        envvar=list(ENV_VARIABLES[name]),  # the first, and older names it still reads
        default=None,
        help=f"Sets Config.{name} (default: {shown}).  [env var: {ENV_VARIABLES[name][0]}]",
    )
