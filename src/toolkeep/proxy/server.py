"""Running the proxy: uvicorn serving the app, one line on stderr when it listens.

The listening socket is bound here, before uvicorn starts: a port in use or a host that does not
resolve is :class:`ListenError` (the command's one line and exit 2), not uvicorn's. uvicorn
handles SIGTERM and SIGINT: it stops accepting, lets in-flight responses finish (for at most
``graceful_seconds``, then closes them) and runs the app's shutdown, which closes the upstream
client; ``on_stop`` is called at the signal (the proxy forwards the requests it is still
preparing as they came). The store's writes are atomic (a file renamed into place, a SQLite or
Redis transaction), so a stop never leaves one half-written. A connection whose request head
does not arrive within ``read_timeout`` seconds is closed (uvicorn times out only idle
keep-alive connections), and so is an idle keep-alive connection: later than the agents' HTTP
clients drop theirs (undici after 4 s, httpx after 5 s), so a client never sends a request on a
connection the proxy is closing at that moment (with uvicorn's own 5 s, httpx's pool raced it).
"""

from __future__ import annotations

import asyncio
import logging
import math
import signal
import socket
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import uvicorn
from uvicorn.config import HTTP_PROTOCOLS
from uvicorn.importer import import_from_string

__all__ = ["ListenError", "serve"]


class ListenError(Exception):
    """The proxy cannot listen where it was told to (the message says why, in one line)."""


class _Server(uvicorn.Server):
    """uvicorn's server, saying where it listens once it does, and exiting 0 after a signal
    stopped it (uvicorn would raise the signal again once shut down: a stop asked for is no
    failure)."""

    path = ""
    """What the line saying where it listens puts after the port."""
    on_stop: Callable[[], None] | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True  # a second Ctrl-C: stop waiting for the streams in flight
        else:
            self.should_exit = True
            if self.on_stop is not None:
                self.on_stop()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.should_exit or not self.servers:
            return
        host, port = self.servers[0].sockets[0].getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        sys.stderr.write(f"listening on http://{shown}:{port}{self.path}\n")
        sys.stderr.flush()


def _protocol(read_timeout: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (httptools when installed, else h11), closing a connection whose
    request head has not arrived ``read_timeout`` seconds after it opened or after its last
    answer."""
    try:
        import httptools  # noqa: F401

        base: Any = import_from_string(HTTP_PROTOCOLS["httptools"])
    except ImportError:
        base = import_from_string(HTTP_PROTOCOLS["h11"])

    class Protocol(base):  # type: ignore[misc]
        _head_timer: asyncio.TimerHandle | None = None

        def _arm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            self._head_timer = self.loop.call_later(read_timeout, self._head_timed_out)

        def _head_timed_out(self) -> None:
            self._head_timer = None
            cycle = self.cycle
            if (cycle is None or cycle.response_complete) and not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            super().connection_lost(exc)

    return Protocol


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` (a name is resolved: its first address); a host that
    does not resolve or an address that cannot be bound is :class:`ListenError`."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError) as exc:
        raise ListenError(f"cannot listen on {host}: the host does not resolve ({_why(exc)})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.set_inheritable(True)
    except OSError as exc:
        sock.close()
        shown = f"[{host}]" if ":" in host else host
        raise ListenError(f"cannot listen on {shown}:{port}: {_why(exc)}") from None
    return sock


def _why(exc: BaseException) -> str:
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return text[:1].lower() + text[1:]


def serve(
    app: Any,
    host: str,
    port: int,
    *,
    graceful_seconds: float = 25.0,
    read_timeout: float = 30.0,
    path: str = "",
    on_stop: Callable[[], None] | None = None,
) -> bool:
    """Serve ``app`` until a signal stops it; False when it could not start. ``path`` follows
    the port in the line saying where it listens; see the module docstring for the rest."""
    sock = listen(host, port)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    proxy_log = logging.getLogger("toolkeep.proxy")
    proxy_log.addHandler(handler)
    proxy_log.setLevel(logging.INFO)
    proxy_log.propagate = False
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=_protocol(read_timeout),
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=int(graceful_seconds),
        timeout_keep_alive=math.ceil(read_timeout) + 1,  # the head timer (read_timeout) closes first
        server_header=False,
        date_header=False,
    )
    server = _Server(config)
    server.path = path
    server.on_stop = on_stop
    try:
        server.run(sockets=[sock])
    except SystemExit:  # uvicorn's way out when it cannot start: one line said why
        if server.started:
            raise
    finally:
        sock.close()
    return server.started
