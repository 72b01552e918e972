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
def proxy(
    host: str,
    port: int,
    anthropic_upstream: str,
    openai_upstream: str,
    gemini_upstream: str,
    remote_agents: bool,
    workspace: str | None,
    store_url: str | None,
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
        from ..proxy.server import serve
    except ImportError:
        raise InputError(_HINT) from None
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
    app = create_app(preparer, upstreams)
    if not serve(app, host, port):
        sys.exit(2)
