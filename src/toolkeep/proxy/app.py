"""The proxy's web application: Starlette routes, httpx to the upstream, bytes passed through.

Every header but the hop-by-hop ones reaches the upstream as it came (auth included, never
logged), with the path and query string as they came appended to the base URL of the request's
provider (:mod:`.routes`: Anthropic, Gemini or OpenAI, by path, else headers). The response goes
back with the upstream's status and headers and its body byte for byte as it arrives (the raw,
still-encoded bytes: SSE streams and compressed bodies alike), chunk by chunk. A client that
disconnects cancels the upstream request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import anyio
import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ..mcp_server import create_http_endpoint
from ..recall import MCP_PATH
from .guard import provider_error
from .memory import TRIM_SECONDS, trim
from .observe import observer_for
from .prepare import Outcome, Preparer
from .routes import DEFAULT_UPSTREAMS, prepared_route, provider_for

__all__ = ["ANTHROPIC_UPSTREAM", "GEMINI_UPSTREAM", "MCP_PATH", "OPENAI_UPSTREAM", "Upstreams", "create_app"]

log = logging.getLogger("toolkeep.proxy")

ANTHROPIC_UPSTREAM = DEFAULT_UPSTREAMS["anthropic"]
GEMINI_UPSTREAM = DEFAULT_UPSTREAMS["gemini"]
OPENAI_UPSTREAM = DEFAULT_UPSTREAMS["openai"]

PREPARING_THREADS = 2
"""How many requests are prepared at once, each in a worker thread: the rest wait their turn.
Preparing is Python under the GIL, so more threads run no faster; they only take turns with the
GIL, and many of them take turns at a cost (50 conversations sending back to back: 11.4 ms of
the proxy's CPU a request with anyio's 40 threads, 7.8 ms with two, and 40 % more requests a
second). Two, not one: a long request (a big history the proxy has not seen) leaves a thread
for the others."""
LARGE_BODY_BYTES = 1024 * 1024
"""A body this big or bigger is prepared by threads of its own (:data:`PREPARING_THREADS` of them
too): one conversation's large request never holds up another's small one."""
PREPARE_TIMEOUT = 5.0
"""Seconds a request's preparation may take; after that it is forwarded as it came (fail open)."""

_HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"te", b"trailer",
     b"upgrade", b"proxy-authenticate", b"proxy-authorization"}
)  # fmt: skip
_RECOMPUTED = frozenset({b"host", b"content-length"})


@dataclass(frozen=True)
class Upstreams:
    """The base URLs requests are forwarded to."""

    anthropic: str = ANTHROPIC_UPSTREAM
    openai: str = OPENAI_UPSTREAM
    gemini: str = GEMINI_UPSTREAM

    def base_for(self, path: str, headers: Mapping[str, str]) -> str:
        """The base URL of the request's provider (:func:`.routes.provider_for`: by its path,
        else its headers, else OpenAI)."""
        base: str = getattr(self, provider_for(path, headers).name)
        return base.rstrip("/")


def create_app(
    preparer: Preparer,
    upstreams: Upstreams,
    *,
    client: httpx.AsyncClient | None = None,
    prepare_timeout: float = PREPARE_TIMEOUT,
) -> Starlette:
    """The ASGI application of a proxy (``toolkeep proxy`` runs it on uvicorn); its
    ``state.preparing`` is the limiter of the threads that prepare requests (``state.preparing_large``
    those of large bodies), its ``state.stop()`` (thread- and signal-safe) makes the requests in
    preparation go as they came: the server is stopping. A preparation that takes longer than
    ``prepare_timeout`` seconds is left to finish in its thread, and the request goes as it came."""
    owned = client is None
    http = client or httpx.AsyncClient(
        timeout=httpx.Timeout(connect=30.0, read=600.0, write=600.0, pool=60.0),
        limits=httpx.Limits(max_connections=1_000, max_keepalive_connections=100),
        follow_redirects=False,
    )

    preparing = anyio.CapacityLimiter(PREPARING_THREADS)
    observer = observer_for(preparer)  # /metrics, /toolkeep/stats, --log-json
    preparing_large = anyio.CapacityLimiter(PREPARING_THREADS)
    stopping = _Stopping()

    prepared = [0]  # requests prepared since the last trim (see .memory)

    async def prepare(route: str, request: Request, body: bytes) -> Outcome:
        """The request's outcome, or, past the timeout or once the server stops, its body as it came."""
        done: list[Outcome] = []
        prepared[0] += 1
        limiter = preparing_large if len(body) >= LARGE_BODY_BYTES else preparing
        with anyio.move_on_after(prepare_timeout) as timer:
            async with anyio.create_task_group() as group:

                async def run() -> None:
                    done.append(
                        await anyio.to_thread.run_sync(
                            preparer.prepare,
                            route,
                            body,
                            _mcp_url(request),
                            limiter=limiter,
                            abandon_on_cancel=True,
                        )
                    )
                    group.cancel_scope.cancel()

                async def stop() -> None:
                    await stopping.wait()
                    group.cancel_scope.cancel()

                group.start_soon(run)
                group.start_soon(stop)
        if done:
            return done[0]
        why = (
            f"preparing took over {prepare_timeout:g} s (--prepare-timeout)"
            if timer.cancelled_caught
            else "the proxy is stopping"
        )
        return Outcome(
            body, error=why, route=route, prepare_seconds=prepare_timeout if timer.cancelled_caught else 0.0
        )

    async def conversations(request: Request) -> Response:
        return HTMLResponse(preparer.records.index())

    async def conversation(request: Request) -> Response:
        page = await anyio.to_thread.run_sync(preparer.records.page, request.path_params["key"])
        if page is None:
            return HTMLResponse(
                "<!doctype html><title>not found</title>no such conversation", status_code=404
            )
        return HTMLResponse(page)

    async def forward(request: Request) -> Response:
        started = time.perf_counter()
        path = request.url.path
        body = await request.body()
        route = prepared_route(request.method, path)
        outcome: Outcome | None = None
        if route is not None:
            outcome = await prepare(route, request, body)
            if outcome.error is not None:
                log.warning(
                    "toolkeep proxy: %s %s: forwarded unchanged: %s", request.method, path, outcome.error
                )
            body = outcome.body
        base = upstreams.base_for(path, request.headers)
        return Forwarded(
            http, _upstream_request(http, request, base, body), request, outcome, started, preparer
        )

    table = preparer.conversations
    mcp = create_http_endpoint(table.store, table.workspace, table.config)

    async def trimming() -> None:
        """Give the memory of prepared requests back every TRIM_SECONDS while requests come."""
        while True:
            await anyio.sleep(TRIM_SECONDS)
            if prepared[0]:
                prepared[0] = 0
                await anyio.to_thread.run_sync(trim)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        stopping.bind()
        trimmer = asyncio.get_running_loop().create_task(trimming())
        try:
            async with mcp.lifespan():
                yield
        finally:
            trimmer.cancel()
        # their pins go; a preparation still running (past its timeout) holds its conversation:
        # that one is not waited for long (the store's writes are atomic)
        with anyio.move_on_after(2.0):
            await anyio.to_thread.run_sync(preparer.conversations.close, abandon_on_cancel=True)
        await anyio.to_thread.run_sync(observer.close)  # the statistics left are written
        if owned:
            await http.aclose()

    routes = [
        *observer.routes(),
        *mcp.routes(MCP_PATH),  # the way back for agents anywhere; never forwarded
        Route("/toolkeep/", conversations, methods=["GET"]),  # the inspector (toolkeep.inspector.live)
        Route("/toolkeep/c/{key}", conversation, methods=["GET"]),
        Route("/{path:path}", forward, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.preparing = preparing
    app.state.preparing_large = preparing_large
    app.state.stop = stopping.set
    return app


def _mcp_url(request: Request) -> str:
    """The URL of the proxy's MCP server as the client reached the proxy (behind a reverse
    proxy, as its ``x-forwarded-proto`` and ``x-forwarded-host`` say); the path alone when the
    host is none a URL may hold (it goes into the text the model reads)."""
    headers = request.headers
    scheme = headers.get("x-forwarded-proto", "").split(",")[0].strip()
    host = headers.get("x-forwarded-host", "").split(",")[0].strip() or headers.get("host", "")
    if scheme not in ("http", "https"):
        scheme = request.url.scheme
    return f"{scheme}://{host}{MCP_PATH}" if _HOST.fullmatch(host) else MCP_PATH


_HOST = re.compile(r"[A-Za-z0-9.-]{1,253}(?::[0-9]{1,5})?|\[[0-9A-Fa-f:.]{2,45}\](?::[0-9]{1,5})?")
"""A host and port as a URL holds them: a name or IPv4 address, or an IPv6 one in brackets."""


def _upstream_request(http: httpx.AsyncClient, request: Request, base: str, body: bytes) -> httpx.Request:
    """The request to the upstream at the base URL ``base``: the path and query as they came
    (never decoded: ``%2F`` stays ``%2F``; never resolved: ``/../`` stays, where httpx would
    resolve it, so the request line's target is httpcore's ``target`` extension), the client's
    headers as they came (but hop-by-hop ones), and no header httpx would add of its own."""
    raw_path = request.scope.get("raw_path") or request.url.path.encode("latin-1")
    query = request.scope.get("query_string", b"")
    tail = raw_path + (b"?" + query if query else b"")
    url = base + tail.decode("latin-1")
    headers = [
        (name, value)
        for name, value in request.scope["headers"]
        if name.lower() not in _HOP_BY_HOP and name.lower() not in _RECOMPUTED
    ]
    target = urlsplit(base).path.encode("latin-1") + tail
    upstream = http.build_request(
        request.method, url, headers=headers, content=body, extensions={"target": target}
    )
    sent = {name.lower() for name, _ in request.scope["headers"]}
    for name in list(upstream.headers.keys()):
        encoded = name.lower().encode("latin-1")
        if encoded not in sent and encoded not in _RECOMPUTED:
            del upstream.headers[name]
    return upstream


class Forwarded(Response):
    """The upstream's answer, streamed to the client as it arrives; a disconnect cancels it."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        upstream: httpx.Request,
        request: Request,
        outcome: Outcome | None,
        started: float,
        preparer: Preparer,
    ) -> None:
        self.http = http
        self.upstream = upstream
        self.request = request
        self.outcome = outcome
        self.started = started
        self.preparer = preparer
        self.background = None
        self.status_code = 502
        self.sent = 0
        self.end = "cancelled"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as group:

                async def watch() -> None:
                    while True:
                        message = await receive()
                        if message["type"] == "http.disconnect":
                            if self.end == "cancelled":  # (an answer delivered says what it was)
                                self.end = "client disconnected"
                            group.cancel_scope.cancel()
                            return

                group.start_soon(watch)
                await self._relay(send)
                group.cancel_scope.cancel()
        finally:
            self._log()

    async def _relay(self, send: Send) -> None:
        try:
            response = await self.http.send(self.upstream, stream=True)
        except httpx.HTTPError as exc:
            self.end = f"upstream unreachable: {type(exc).__name__}"
            provider = provider_for(self.request.url.path, self.request.headers).name
            message = f"toolkeep proxy: the upstream could not be reached ({type(exc).__name__})"
            await _send_error(send, 502, provider_error(provider, 502, message))
            return
        try:
            self.status_code = response.status_code
            headers = [(n, v) for n, v in response.headers.raw if n.lower() not in _HOP_BY_HOP]
            await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
            try:
                async for chunk in response.aiter_raw():
                    self.sent += len(chunk)
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except httpx.HTTPError as exc:
                # the upstream broke off mid-body: so does the client's response, left incomplete
                # (uvicorn then closes the connection: the client gets an error, not a hang)
                self.end = f"upstream broke off: {type(exc).__name__}"
                return
            self.end = "ok"
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()

    def _log(self) -> None:
        o = self.outcome
        f = o.figures if o is not None else None
        ms = (time.perf_counter() - self.started) * 1_000
        path = self.request.url.path
        observer_for(self.preparer).done(
            self.request.method, path, o, self.status_code, self.end, self.sent, ms
        )
        what = ""
        if o is not None and f is not None and o.prepared:
            what = (
                f" conversation {o.conversation[:8] if o.conversation else '-'}"
                f" size {f.tokens_before:,} -> {f.tokens_after:,} chars/4 repairs {f.repairs} cuts {f.cuts}"
                f" cost {f.cost_unmanaged:,.0f} -> {f.cost_managed:,.0f} base-price tokens (cache-aware)"
            )
        elif o is not None:
            what = " forwarded unchanged"
        end = "" if self.end == "ok" else f" ({self.end})"
        log.info(
            "toolkeep proxy: %s %s %d%s %d bytes %.0f ms%s",
            self.request.method, self.request.url.path, self.status_code, what, self.sent, ms, end,
        )  # fmt: skip


class _Stopping:
    """An event set from a signal handler (any thread) and awaited in the server's loop."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None

    def bind(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()

    def set(self) -> None:
        if self._loop is not None and self._event is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing waits
                self._loop.call_soon_threadsafe(self._event.set)

    async def wait(self) -> None:
        if self._event is None:
            await anyio.sleep_forever()
        else:
            await self._event.wait()


async def _send_error(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
