"""Running the proxy: uvicorn serving the app, one line on stderr when it listens.

uvicorn handles SIGTERM and SIGINT: it stops accepting, lets in-flight responses finish (for at
most ``graceful_seconds``, then closes them) and runs the app's shutdown, which closes the
upstream client. The store's writes are atomic (a file renamed into place, a SQLite or Redis
transaction), so a stop never leaves one half-written.
"""

from __future__ import annotations

import logging
import signal
import socket
import sys
from types import FrameType
from typing import Any

import uvicorn

__all__ = ["serve"]


class _Server(uvicorn.Server):
    """uvicorn's server, saying where it listens once it does, and exiting 0 after a signal
    stopped it (uvicorn would raise the signal again once shut down: a stop asked for is no
    failure)."""

    path = ""
    """What the line saying where it listens puts after the port."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True  # a second Ctrl-C: stop waiting for the streams in flight
        else:
            self.should_exit = True

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.should_exit or not self.servers:
            return
        host, port = self.servers[0].sockets[0].getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        sys.stderr.write(f"listening on http://{shown}:{port}{self.path}\n")
        sys.stderr.flush()


def serve(app: Any, host: str, port: int, *, graceful_seconds: float = 30.0, path: str = "") -> bool:
    """Serve ``app`` until a signal stops it; False when it could not start (port taken).
    ``path`` follows the port in the line saying where it listens."""
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
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=int(graceful_seconds),
        server_header=False,
        date_header=False,
    )
    server = _Server(config)
    server.path = path
    try:
        server.run()
    except SystemExit:  # uvicorn's way out when it cannot start (the port is taken): one line said why
        if server.started:
            raise
    return server.started
