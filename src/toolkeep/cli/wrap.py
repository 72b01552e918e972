"""``toolkeep wrap AGENT [PROXY OPTIONS] [-- AGENT ARGUMENTS]``: run Claude Code, Codex or Gemini
CLI through toolkeep's proxy, with toolkeep's recall tools registered for that run only.

The private proxy (``toolkeep proxy --port 0``, or the one ``--proxy URL`` names) lives as long as
the agent: wrap waits for the agent, then stops the proxy, and exits with the agent's code (128 +
N when a signal N ended it). SIGTERM and SIGHUP to wrap go on to the agent; so does SIGINT unless
wrap runs in the terminal's foreground, where the terminal gave the agent its own Ctrl-C.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import IO

import click

from ..wrap import AGENTS, Agent, WrapError, plan
from ._app import InputError, cli

_LISTENING = re.compile(r"^listening on (http://\S+)$")
_FORWARDED = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP", "SIGINT") if hasattr(signal, n))


class _SplitAtDashes(click.Command):
    """Everything after the first ``--`` is the agent's, untouched by click."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            at = args.index("--")
            args, ctx.meta["agent_args"] = args[:at], args[at + 1 :]
        else:
            ctx.meta["agent_args"] = []
        return super().parse_args(ctx, args)


@cli.command(
    cls=_SplitAtDashes,
    context_settings={"ignore_unknown_options": True, "help_option_names": ["-h", "--help"]},
)
@click.argument("agent", type=click.Choice(sorted(AGENTS)), metavar="AGENT")
@click.option(
    "--proxy", "proxy_url", metavar="URL", help="Use this running toolkeep proxy, not a private one."
)
@click.option(
    "--client-token",
    envvar="TOOLKEEP_CLIENT_TOKEN",
    metavar="TOKEN",
    help="With --proxy: the agent sends it as X-Toolkeep-Token (env TOOLKEEP_CLIENT_TOKEN).",
)
@click.option("--agent-bin", metavar="PATH", help="The agent's executable (default: AGENT on PATH).")
@click.option(
    "--proxy-log",
    type=click.Path(dir_okay=False),
    help="Append the private proxy's log there (default: dropped).",
)
@click.argument("proxy_options", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def wrap(
    ctx: click.Context,
    agent: str,
    proxy_url: str | None,
    client_token: str | None,
    agent_bin: str | None,
    proxy_log: str | None,
    proxy_options: tuple[str, ...],
) -> None:
    """Run AGENT (claude, codex or gemini) through a toolkeep proxy: its base URL pointed at the
    proxy and toolkeep's recall tools (the proxy's /toolkeep/mcp) registered and allowed for this
    run only; every other tool keeps your permissions and no configuration file of yours is
    written. Options before -- that are not wrap's go to the private proxy (--policy,
    --workspace, --store, upstreams, ...); what follows -- goes to the agent."""
    spec = AGENTS[agent]
    args: list[str] = ctx.meta["agent_args"]
    binary = _binary(spec, agent_bin)
    if proxy_url is not None:
        if proxy_options:
            raise InputError(
                f"proxy options ({proxy_options[0]}, ...) need a private proxy: drop --proxy or them"
            )
        if not proxy_url.startswith(("http://", "https://")):
            raise InputError(f"--proxy {proxy_url!r}: a proxy is an http:// or https:// URL")
    env = dict(os.environ)
    tmp = Path(tempfile.mkdtemp(prefix="toolkeep-wrap-"))
    proxy: _PrivateProxy | None = None
    try:
        try:
            if proxy_url is None:
                upstream = spec.upstream(args, env)
                options = list(proxy_options)
                if upstream and not any(o.split("=")[0] == spec.upstream_option for o in options):
                    options = [spec.upstream_option, upstream, *options]
                proxy = _PrivateProxy(options, proxy_log)
                proxy_url = proxy.url
            launch = plan(spec, proxy_url, client_token, args, env, tmp)
        except WrapError as exc:
            raise InputError(str(exc)) from None
        code = _run(binary, launch.args, {**env, **launch.env})
    finally:
        if proxy is not None:
            proxy.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(code)


def _binary(spec: Agent, given: str | None) -> str:
    if given is not None:
        if not (os.path.isfile(given) and os.access(given, os.X_OK)):
            raise InputError(f"--agent-bin {given}: not an executable file")
        return given
    found = shutil.which(spec.executable)
    if found is None:
        raise InputError(f"{spec.executable} is not on PATH: install it, or name it with --agent-bin PATH")
    return found


def _run(binary: str, args: list[str], env: dict[str, str]) -> int:
    """Run the agent in the foreground until it exits; the signals wrap gets go on to it."""
    try:
        child = subprocess.Popen([binary, *args], env=env)
    except OSError as exc:
        raise InputError(f"cannot start {binary}: {exc.strerror or exc}") from None

    def forward(sig: int, frame: FrameType | None) -> None:
        if sig == signal.SIGINT and _terminal_gave_it():
            return
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(sig)

    before = {sig: signal.signal(sig, forward) for sig in _FORWARDED}
    try:
        while True:
            with contextlib.suppress(InterruptedError):
                code = child.wait()
                break
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    return code if code >= 0 else 128 - code


def _terminal_gave_it() -> bool:
    """Whether wrap (and so the agent) is in the foreground of its terminal: a Ctrl-C there
    reached the agent already."""
    for stream in (sys.stdin, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            if os.tcgetpgrp(stream.fileno()) == os.getpgrp():
                return True
    return False


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: the private proxy gets SIGTERM if wrap dies without stopping it (SIGKILL)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class _PrivateProxy:
    """``toolkeep proxy --port 0`` in a session of its own (a Ctrl-C in the terminal is the
    agent's), until :meth:`stop`."""

    def __init__(self, options: list[str], log: str | None) -> None:
        command = [sys.executable, "-m", "toolkeep", "proxy", "--host", "127.0.0.1", "--port", "0", *options]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
        self.url = ""
        self.tail: collections.deque[str] = collections.deque(maxlen=20)
        self._log: IO[str] | None = open(log, "a", encoding="utf-8") if log else None  # noqa: SIM115
        self._listening = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        while not self._listening.wait(0.05):
            if self.process.poll() is not None:
                self._reader.join(5)
                self.stop()
                last = next((line for line in reversed(self.tail) if line.strip()), "no message")
                last = last.removeprefix("toolkeep: error: ")
                hint = " (the agent's arguments go after --)" if "No such option" in last else ""
                raise WrapError(f"the proxy did not start: {last}{hint}")

    def _read(self) -> None:
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.tail.append(line)
            if self._log is not None:
                self._log.write(line + "\n")
                self._log.flush()
            match = _LISTENING.match(line)
            if match and not self.url:
                self.url = match.group(1)
                self._listening.set()

    def stop(self, timeout: float = 15.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(5)
        if self._log is not None:
            self._log.close()
            self._log = None
