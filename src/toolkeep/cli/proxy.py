"""``toolkeep proxy``: serve toolkeep in front of Claude Code, Codex, Gemini CLI or any
OpenAI-compatible agent."""

from __future__ import annotations

import sys

import click

from ..config import Config
from ._app import InputError, cli
from ._configfile import config_file_option
from ._settings import config_options
from ._team import Team, team_options

_HINT = "toolkeep proxy needs Starlette, uvicorn and httpx: pip install 'toolkeep[proxy]'"


@cli.command()
@config_file_option
@config_options
@team_options
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8787, show_default=True, help="Port (0: any free one)."
)
@click.option(
    "--anthropic-upstream",
    default="https://api.anthropic.com",
    show_default=True,
    metavar="URL",
    help="Base URL Anthropic requests go to (the request's path and query are appended).",
)
@click.option(
    "--openai-upstream",
    default="https://api.openai.com",
    show_default=True,
    metavar="URL",
    help="Base URL OpenAI requests go to (the request's path and query are appended).",
)
@click.option(
    "--gemini-upstream",
    default="https://generativelanguage.googleapis.com",
    show_default=True,
    metavar="URL",
    help="Base URL Gemini requests go to (the request's path and query are appended).",
)
@click.option(
    "--remote-agents",
    is_flag=True,
    help="The agents cannot read this proxy's files (they run elsewhere): shortened results name "
    "only a recall tool, never a saved path; an agent without one is told to connect the proxy's "
    "MCP server (/toolkeep/mcp).",
)
@click.option(
    "--workspace",
    type=click.Path(file_okay=False),
    help="Directory for saved results and the archive (default: proxy/ in the per-user cache dir).",
)
@click.option(
    "--store", "store_url", metavar="URL", help="Archive originals there (sqlite:///f.db, redis://...)."
)
# -- limits and access (docs/security.md) --
@click.option(
    "--max-body-bytes",
    type=click.IntRange(1),
    default=64 * 1024 * 1024,
    show_default=True,
    metavar="N",
    help="Larger request bodies get 413 (checked before the body is read, and counted as it arrives).",
)
@click.option(
    "--read-timeout",
    type=click.FloatRange(0, min_open=True),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="A request head, or a pause in a request body, longer than this closes the connection.",
)
@click.option(
    "--prepare-timeout",
    type=click.FloatRange(0, min_open=True),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="A request whose preparation takes longer is forwarded as it came (and logged).",
)
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="HOST",
    help="Also answer requests for this Host (name or name:port; * for any). Repeatable.",
)
@click.option(
    "--allow-origin",
    "allow_origins",
    multiple=True,
    metavar="ORIGIN",
    help="Also answer requests from this browser Origin (https://app.example; * for any). Repeatable.",
)
@click.option(
    "--client-token",
    envvar="TOOLKEEP_CLIENT_TOKEN",
    metavar="TOKEN",
    help="Require X-Toolkeep-Token: TOKEN on every request (env TOOLKEEP_CLIENT_TOKEN); never forwarded.",
)
def proxy(
    host: str,
    port: int,
    anthropic_upstream: str,
    openai_upstream: str,
    gemini_upstream: str,
    remote_agents: bool,
    workspace: str | None,
    store_url: str | None,
    max_body_bytes: int,
    read_timeout: float,
    prepare_timeout: float,
    allow_hosts: tuple[str, ...],
    allow_origins: tuple[str, ...],
    client_token: str | None,
    config: Config,
    team: Team,
) -> None:
    """Serve the Anthropic Messages, OpenAI Chat Completions / Responses and Gemini
    generateContent APIs, preparing each request's history and passing everything else through
    byte for byte. Every setting flag (``--policy``, ``--pricing``, ...) also reads the variable
    it names."""
    for name, url in (
        ("--anthropic-upstream", anthropic_upstream),
        ("--openai-upstream", openai_upstream),
        ("--gemini-upstream", gemini_upstream),
    ):
        if not url.startswith(("http://", "https://")):
            raise InputError(f"{name} {url!r}: an upstream is an http:// or https:// base URL")
    try:
        from ..proxy import make_preparer
        from ..proxy.app import Upstreams, create_app
        from ..proxy.guard import Guard
        from ..proxy.server import ListenError, listen, serve
    except ImportError:
        raise InputError(_HINT) from None
    try:
        listen(host, port).close()  # a busy port or a bad host: one line, before any work
    except ListenError as exc:
        raise InputError(str(exc)) from None
    preparer = make_preparer(
        config,
        workspace,
        store_url,
        remote_agents=remote_agents,
        log_json=team.open_log(),
        max_disk_bytes=team.max_disk_bytes,
        max_age_days=team.max_age_days,
    )
    upstreams = Upstreams(anthropic=anthropic_upstream, openai=openai_upstream, gemini=gemini_upstream)
    app = create_app(preparer, upstreams, prepare_timeout=prepare_timeout)
    guarded = Guard(
        app,
        allow_hosts=allow_hosts,
        allow_origins=allow_origins,
        client_token=client_token,
        max_body_bytes=max_body_bytes,
        read_timeout=read_timeout,
    )
    try:
        started = serve(guarded, host, port, read_timeout=read_timeout, on_stop=app.state.stop)
    except ListenError as exc:
        raise InputError(str(exc)) from None
    if not started:
        sys.exit(2)
    _exit_now()


def _exit_now() -> None:
    """Exit 0 without waiting for a preparation still running in its thread (one past
    ``--prepare-timeout``, whose request already went as it came): the store's writes are atomic."""
    import os
    import threading

    if any(t is not threading.main_thread() and not t.daemon and t.is_alive() for t in threading.enumerate()):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
