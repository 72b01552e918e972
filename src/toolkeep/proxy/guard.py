"""Who may use the proxy, and how much of them it reads: an ASGI layer in front of the app.

A request is refused, in its provider's own error shape (:func:`provider_error`), before the app
sees it, when:

- its ``Host`` is not one of the proxy's own names (``localhost``, ``127.0.0.1``, ``[::1]``, the
  address it was reached at), nor one ``--allow-host`` names: a DNS-rebinding page reaches the
  proxy under a name of its own (421, as the MCP server answers one);
- it carries an ``Origin`` other than the proxy's own or one ``--allow-origin`` names: agents
  send none, a browser sends one with every cross-site request (403);
- the proxy has a client token (``--client-token``) and the request's ``X-Toolkeep-Token`` is not
  it (401). The header is taken off the request here: it never reaches the app, the upstream or
  a log. ``HEAD /``, Claude Code's connectivity check (sent without its custom headers), is
  answered 200 without it;
- its ``Content-Length`` is over ``max_body_bytes`` (413, before a byte of the body is read), or
  its body, counted as it arrives, grows past that (413);
- its body stalls: no part of it for ``read_timeout`` seconds (408, and the connection closes).

A stalled header is the server's to time out (:mod:`.server`).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Iterable
from typing import Any

import anyio

from .routes import provider_for

__all__ = ["TOKEN_HEADER", "Guard", "Refused", "provider_error"]

TOKEN_HEADER = b"x-toolkeep-token"

_LOOPBACK = frozenset({"localhost", "127.0.0.1", "[::1]"})

# status -> (Anthropic's error type, Gemini's status)
_KINDS = {
    400: ("invalid_request_error", "INVALID_ARGUMENT"),
    401: ("authentication_error", "UNAUTHENTICATED"),
    403: ("permission_error", "PERMISSION_DENIED"),
    408: ("timeout_error", "DEADLINE_EXCEEDED"),
    413: ("request_too_large", "INVALID_ARGUMENT"),
    421: ("permission_error", "PERMISSION_DENIED"),
    502: ("api_error", "UNAVAILABLE"),
}


def provider_error(provider: str, status: int, message: str) -> bytes:
    """The JSON body of an error as ``provider`` (``anthropic``, ``gemini``, else OpenAI's shape)
    writes one, so that the agent reports it as it reports the provider's own."""
    kind, gemini = _KINDS.get(status, ("api_error", "UNKNOWN"))
    error: dict[str, Any]
    if provider == "anthropic":
        error = {"type": "error", "error": {"type": kind, "message": message}}
    elif provider == "gemini":
        error = {"error": {"code": status, "message": message, "status": gemini}}
    else:
        error = {"error": {"message": message, "type": kind, "param": None, "code": kind}}
    return json.dumps(error).encode()


class Refused(Exception):
    """A request the guard answers itself, with this status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _host_name(host: str) -> str:
    """The name part of a ``Host`` value (``[::1]:8787`` -> ``[::1]``), lower case."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class Guard:
    """The ASGI layer (see the module docstring); lifespan and other scopes pass through."""

    def __init__(
        self,
        app: Any,
        *,
        allow_hosts: Iterable[str] = (),
        allow_origins: Iterable[str] = (),
        client_token: str | None = None,
        max_body_bytes: int = 64 * 1024 * 1024,
        read_timeout: float = 30.0,
    ) -> None:
        self.app = app
        self.allow_hosts = frozenset(h.strip().lower() for h in allow_hosts)
        self.allow_origins = frozenset(o.strip().lower().rstrip("/") for o in allow_origins)
        self.token = client_token.encode() if client_token else None
        self.max_body_bytes = max_body_bytes
        self.read_timeout = read_timeout

    @property
    def state(self) -> Any:
        return self.app.state

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = scope["headers"]
        path = scope.get("path", "/")
        try:
            self._check(scope, headers)
        except Refused as refused:
            await self._refuse(scope, send, refused)
            return
        if scope["method"] == "HEAD" and path == "/":  # Claude Code's probe: the proxy is up
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        if self.token is not None:
            scope = dict(scope, headers=[(n, v) for n, v in headers if n.lower() != TOKEN_HEADER])
        await self._run(scope, receive, send)

    def _check(self, scope: Any, headers: list[tuple[bytes, bytes]]) -> None:
        host = origin = token = None
        for name, value in headers:
            lower = name.lower()
            if lower == b"host":
                host = value.decode("latin-1")
            elif lower == b"origin":
                origin = value.decode("latin-1")
            elif lower == TOKEN_HEADER:
                token = value
        if not self._own_host(scope, host):
            raise Refused(421, f"toolkeep proxy: the host {host!r} is not this proxy's (see --allow-host)")
        if origin is not None and not self._own_origin(origin, host):
            raise Refused(403, "toolkeep proxy: requests from web pages are refused (see --allow-origin)")
        probe = scope["method"] == "HEAD" and scope.get("path") == "/"
        if (
            self.token is not None
            and not probe
            and (token is None or not hmac.compare_digest(token, self.token))
        ):
            raise Refused(401, "toolkeep proxy: a client token is required (header X-Toolkeep-Token)")
        length = next((v for n, v in headers if n.lower() == b"content-length"), None)
        if length is not None and length.strip().isdigit() and int(length) > self.max_body_bytes:
            raise Refused(413, self._too_large())

    def _too_large(self) -> str:
        return f"toolkeep proxy: the request body is over {self.max_body_bytes:,} bytes (--max-body-bytes)"

    def _own_host(self, scope: Any, host: str | None) -> bool:
        if host is None:  # HTTP/1.0 without one: no name to rebind
            return True
        name = _host_name(host)
        if "*" in self.allow_hosts or host.strip().lower() in self.allow_hosts or name in self.allow_hosts:
            return True
        if name in _LOOPBACK:
            return True
        server = scope.get("server")
        if server:  # the address the client connected to, as a name
            address = str(server[0]).lower()
            return name in (address, f"[{address}]")
        return False

    def _own_origin(self, origin: str, host: str | None) -> bool:
        origin = origin.strip().lower().rstrip("/")
        if "*" in self.allow_origins or origin in self.allow_origins:
            return True
        # a page the proxy served itself (its inspector): the Host was checked above
        return host is not None and origin in (
            f"http://{host.strip().lower()}",
            f"https://{host.strip().lower()}",
        )

    async def _run(self, scope: Any, receive: Any, send: Any) -> None:
        """The app, reading the body through a count and a timeout; a refusal while it reads is
        answered here (whatever the app would send after it is dropped)."""
        received = 0
        body_done = scope["method"] in ("GET", "HEAD")
        refused: Refused | None = None
        started = False

        async def guarded_receive() -> Any:
            nonlocal received, body_done, refused
            if body_done:
                return await receive()
            try:
                with anyio.fail_after(self.read_timeout):
                    message = await receive()
            except TimeoutError:
                refused = Refused(408, f"toolkeep proxy: the request body stalled ({self.read_timeout:g} s)")
                raise refused from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    refused = Refused(413, self._too_large())
                    raise refused
                body_done = not message.get("more_body", False)
            return message

        async def guarded_send(message: Any) -> None:
            nonlocal started
            if refused is not None:
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, guarded_receive, guarded_send)
        except Refused:
            if refused is None:
                raise
        if refused is not None and not started:
            await self._refuse(scope, send, refused, close=True)

    async def _refuse(self, scope: Any, send: Any, refused: Refused, *, close: bool = False) -> None:
        headers = {n.decode("latin-1"): v.decode("latin-1") for n, v in scope["headers"]}
        provider = provider_for(scope.get("path", "/"), headers).name
        body = provider_error(provider, refused.status, refused.message)
        out = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if close or refused.status == 413:  # the rest of the body is never read
            out.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": refused.status, "headers": out})
        await send({"type": "http.response.body", "body": body})
