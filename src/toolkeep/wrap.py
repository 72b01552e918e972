"""What ``toolkeep wrap AGENT`` changes for one run of an agent, and nothing more.

Each agent gets one small table (:class:`Agent`) and one function that turns the proxy's URL,
the client token and the user's own arguments and environment into the command line and the
environment of this run: the agent's base URL pointed at the proxy, toolkeep's MCP server (the
proxy's ``/toolkeep/mcp``) registered for this run only, only its two tools pre-allowed, and the
token sent as ``X-Toolkeep-Token``. Nothing here writes into the user's own configuration: flags,
variables, and, where an agent reads MCP servers only from a file, a file of our own in a
temporary directory the caller removes afterwards.

=========  ============================================================================
claude     ``ANTHROPIC_BASE_URL``, ``ANTHROPIC_CUSTOM_HEADERS``, ``--mcp-config FILE``,
           ``--allowedTools mcp__toolkeep__recall,mcp__toolkeep__read_result``
codex      ``-c`` overrides: the active provider's ``base_url`` (or ``openai_base_url``) and
           ``http_headers``, ``mcp_servers.toolkeep.url``, ``.required = true`` and
           ``.default_tools_approval_mode = "approve"``
gemini     ``GOOGLE_GEMINI_BASE_URL``, ``GEMINI_CLI_CUSTOM_HEADERS``, and ``GEMINI_CLI_HOME``:
           a home of this run's own whose ``.gemini`` links to every entry of the user's but
           ``settings.json``, there the user's settings plus ``mcpServers.toolkeep`` with
           ``trust: true`` (Gemini CLI skips a system settings file that root does not own)
=========  ============================================================================
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "AGENTS",
    "MCP_PATH",
    "SERVER_NAME",
    "TOKEN_HEADER",
    "Agent",
    "Launch",
    "WrapError",
    "plan",
]

SERVER_NAME = "toolkeep"
"""The name toolkeep's MCP server is registered under (Claude Code then calls its tools
``mcp__toolkeep__recall`` and ``mcp__toolkeep__read_result``)."""

MCP_PATH = "/toolkeep/mcp"
"""Where the proxy serves toolkeep's tools over streamable HTTP."""

TOKEN_HEADER = "X-Toolkeep-Token"
TOOLS = ("recall", "read_result")


class WrapError(Exception):
    """Something about the agent's own setup that stops the run (exit 2, one line)."""


@dataclass(frozen=True)
class Launch:
    """How to start the agent: its arguments after the executable and the variables to set."""

    args: list[str]
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Agent:
    """One agent: its executable, the proxy option naming its upstream, where the user's setup
    points it (the private proxy's upstream when none is given), and its planner."""

    name: str
    executable: str
    upstream_option: str
    upstream: Callable[[Sequence[str], Mapping[str, str]], str | None]
    build: Callable[[str, str | None, Sequence[str], Mapping[str, str], Path], Launch]


def plan(
    agent: Agent, proxy_url: str, token: str | None, args: Sequence[str], env: Mapping[str, str], tmp: Path
) -> Launch:
    """The launch of ``agent`` through the proxy at ``proxy_url``; files of our own go in ``tmp``."""
    return agent.build(proxy_url.rstrip("/"), token, args, env, tmp)


def _mcp_url(proxy: str) -> str:
    return proxy + MCP_PATH


def _origin(url: str, suffix: str = "") -> str:
    """``url`` without a trailing ``suffix`` path (``/v1``) and slash."""
    url = url.rstrip("/")
    return url[: -len(suffix)] if suffix and url.endswith(suffix) else url


# -- Claude Code ------------------------------------------------------------------------------


def _claude(proxy: str, token: str | None, args: Sequence[str], env: Mapping[str, str], tmp: Path) -> Launch:
    # alwaysLoad: Claude Code waits for the server before the first request (others connect in
    # the background, and a headless run may be over before they do)
    server: dict[str, Any] = {"type": "http", "url": _mcp_url(proxy), "alwaysLoad": True}
    extra: dict[str, str] = {"ANTHROPIC_BASE_URL": proxy}
    if token is not None:
        server["headers"] = {TOKEN_HEADER: token}
        own = env.get("ANTHROPIC_CUSTOM_HEADERS", "").strip("\n")
        extra["ANTHROPIC_CUSTOM_HEADERS"] = "\n".join(filter(None, [own, f"{TOKEN_HEADER}: {token}"]))
    config = tmp / "claude-mcp.json"
    config.write_text(json.dumps({"mcpServers": {SERVER_NAME: server}}))
    allowed = ",".join(f"mcp__{SERVER_NAME}__{t}" for t in TOOLS)
    # the ``--opt=value`` form: both options take several values, and in the two-word form
    # Claude Code would take the user's prompt after them as one more
    ours = [f"--mcp-config={config}", f"--allowedTools={allowed}"]
    return Launch([*ours, *args], extra)


# -- Codex CLI --------------------------------------------------------------------------------


def _toml(value: Any) -> str:
    """``value`` as a TOML literal for ``codex -c`` (JSON strings and arrays are TOML too)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


def _codex_config(env: Mapping[str, str]) -> dict[str, Any]:
    """The user's Codex configuration, read only to learn which provider is in force."""
    home = (
        Path(env["CODEX_HOME"])
        if env.get("CODEX_HOME")
        else Path(env.get("HOME", "~")).expanduser() / ".codex"
    )
    path = home / "config.toml"
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise WrapError(f"cannot read {path}: {exc}") from None


_OVERRIDE = re.compile(r"^\s*([A-Za-z0-9_.\"-]+?)\s*=\s*(.*)$", re.DOTALL)


def _codex_choice(args: Sequence[str], config: dict[str, Any]) -> tuple[str, str | None]:
    """The provider in force for this run and the profile, from the user's ``-c`` overrides,
    ``--profile`` and their configuration, in that order of precedence."""
    provider: str | None = None
    profile: str | None = config.get("profile") if isinstance(config.get("profile"), str) else None
    items = list(args)
    for i, arg in enumerate(items):
        value = None
        if arg in ("-c", "--config") and i + 1 < len(items):
            value = items[i + 1]
        elif arg.startswith("--config="):
            value = arg.removeprefix("--config=")
        if value is not None:
            match = _OVERRIDE.match(value)
            if match and match.group(1) == "model_provider":
                provider = match.group(2).strip().strip("\"'")
        if arg in ("-p", "--profile") and i + 1 < len(items):
            profile = items[i + 1]
        elif arg.startswith("--profile="):
            profile = arg.removeprefix("--profile=")
    if provider is None and profile is not None:
        chosen = (config.get("profiles") or {}).get(profile) or {}
        provider = chosen.get("model_provider") if isinstance(chosen, dict) else None
    if provider is None:
        provider = config.get("model_provider") if isinstance(config.get("model_provider"), str) else None
    return provider or "openai", profile


def _codex_provider(args: Sequence[str], env: Mapping[str, str]) -> tuple[str, dict[str, Any] | None]:
    """The provider in force for this run: its name and, when it is the user's own, its table."""
    config = _codex_config(env)
    name, _profile = _codex_choice(args, config)
    providers = config.get("model_providers")
    own = providers.get(name) if isinstance(providers, dict) else None
    if isinstance(own, dict):
        if not re.fullmatch(r"[A-Za-z0-9_-]+", name):  # ``codex -c`` splits its keys at every dot
            raise WrapError(
                f"codex provider {name!r}: toolkeep can point only a provider named in A-Z, 0-9, _ and -"
            )
        base = own.get("base_url")
        if not isinstance(base, str) or not base.rstrip("/").endswith("/v1"):
            raise WrapError(f"codex provider {name!r}: toolkeep needs a base_url ending in /v1, not {base!r}")
        return name, own
    if name != "openai":
        raise WrapError(
            f"codex provider {name!r} is built in and not OpenAI's: toolkeep proxies OpenAI's API"
        )
    return name, None


def _codex_upstream(args: Sequence[str], env: Mapping[str, str]) -> str | None:
    _name, own = _codex_provider(args, env)
    base = (
        own.get("base_url")
        if own is not None
        else env.get("OPENAI_BASE_URL") or _codex_config(env).get("openai_base_url")
    )
    return _origin(base, "/v1") if isinstance(base, str) and base else None


def _codex(proxy: str, token: str | None, args: Sequence[str], env: Mapping[str, str], tmp: Path) -> Launch:
    name, own = _codex_provider(args, env)
    mcp = f"mcp_servers.{SERVER_NAME}"
    # required: Codex waits for the server before the first request (and says so if it is down)
    overrides = [
        f"{mcp}.url={_toml(_mcp_url(proxy))}",
        f"{mcp}.required=true",
        f'{mcp}.default_tools_approval_mode="approve"',
    ]
    if token is not None:
        overrides.append(f"{mcp}.http_headers={_toml({TOKEN_HEADER: token})}")
    if own is not None:  # a provider of the user's: its base URL and headers, for this run
        key = f"model_providers.{name}"
        overrides.append(f"{key}.base_url={_toml(proxy + '/v1')}")
        if token is not None:
            overrides.append(f"{key}.http_headers.{TOKEN_HEADER}={_toml(token)}")
    elif token is None:
        overrides.append(f"openai_base_url={_toml(proxy + '/v1')}")
    else:  # the built-in provider takes no headers: the same provider under a name of ours
        ours = {
            "name": "OpenAI",
            "base_url": proxy + "/v1",
            "wire_api": "responses",
            "requires_openai_auth": True,
            "http_headers": {TOKEN_HEADER: token},
        }
        overrides += [f"model_providers.{SERVER_NAME}={_toml(ours)}", f'model_provider="{SERVER_NAME}"']
    return Launch([*(part for o in overrides for part in ("-c", o)), *args])


# -- Gemini CLI -------------------------------------------------------------------------------


def _gemini_home(env: Mapping[str, str]) -> Path:
    """The directory Gemini CLI takes for the user's home (its ``.gemini`` is there)."""
    return Path(env.get("GEMINI_CLI_HOME") or env.get("HOME") or Path.home())


def _gemini_settings(path: Path) -> dict[str, Any]:
    """The user's Gemini CLI settings, read only (``{}`` when there are none)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise WrapError(f"cannot read {path}: {exc}") from None
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError:
        raise WrapError(
            f"{path} is not plain JSON (comments?): toolkeep cannot add its server to it"
        ) from None
    if not isinstance(value, dict):
        raise WrapError(f"{path} is not a JSON object")
    return value


def _gemini(proxy: str, token: str | None, args: Sequence[str], env: Mapping[str, str], tmp: Path) -> Launch:
    """Gemini CLI reads MCP servers only from settings files, and a system settings file only when
    root owns it and every directory above it: so this run gets a home of its own
    (``GEMINI_CLI_HOME``) whose ``.gemini`` links to every entry of the user's, but for a
    ``settings.json`` that is the user's plus toolkeep's server."""
    real = _gemini_home(env) / ".gemini"
    settings = _gemini_settings(real / "settings.json")
    security = settings.get("security")
    auth = security.get("auth") if isinstance(security, dict) else None
    chosen = auth.get("selectedType") if isinstance(auth, dict) else None
    if chosen not in (None, "gemini-api-key", "gateway"):  # the others never use the base URL
        raise WrapError(
            f"Gemini CLI's auth type is {chosen!r}: toolkeep wrap gemini needs gemini-api-key (GEMINI_API_KEY)"
        )
    server: dict[str, Any] = {"httpUrl": _mcp_url(proxy), "trust": True}
    extra = {"GOOGLE_GEMINI_BASE_URL": proxy}
    if token is not None:
        server["headers"] = {TOKEN_HEADER: token}
        own = env.get("GEMINI_CLI_CUSTOM_HEADERS", "").strip().rstrip(",")
        extra["GEMINI_CLI_CUSTOM_HEADERS"] = ", ".join(filter(None, [own, f"{TOKEN_HEADER}: {token}"]))
    shadow = tmp / "gemini-home" / ".gemini"
    shadow.mkdir(parents=True)
    if real.is_dir():
        for entry in real.iterdir():
            if entry.name != "settings.json":
                (shadow / entry.name).symlink_to(entry)
    servers = settings.get("mcpServers")
    ours = dict(settings, mcpServers={**(servers if isinstance(servers, dict) else {}), SERVER_NAME: server})
    (shadow / "settings.json").write_text(json.dumps(ours, indent=2))
    extra["GEMINI_CLI_HOME"] = str(shadow.parent)
    return Launch(list(args), extra)


def _from_env(name: str) -> Callable[[Sequence[str], Mapping[str, str]], str | None]:
    def upstream(args: Sequence[str], env: Mapping[str, str]) -> str | None:
        return _origin(env[name]) if env.get(name) else None

    return upstream


AGENTS: dict[str, Agent] = {
    "claude": Agent("claude", "claude", "--anthropic-upstream", _from_env("ANTHROPIC_BASE_URL"), _claude),
    "codex": Agent("codex", "codex", "--openai-upstream", _codex_upstream, _codex),
    "gemini": Agent("gemini", "gemini", "--gemini-upstream", _from_env("GOOGLE_GEMINI_BASE_URL"), _gemini),
}
"""The agents ``toolkeep wrap`` knows, by the name on its command line."""
