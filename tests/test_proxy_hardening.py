"""A proxy a team can run (issue 28): the real ``toolkeep proxy`` process over real sockets, in
front of the scripted model server (tests/upstream_server.py), as an attacker or a careless
operator would use it.

- bodies and time: an over-size body is a 413 in its provider's shape before its body is read
  (by its ``Content-Length``, or counted as it arrives); a stalled head or body is closed; a
  preparation past ``--prepare-timeout`` goes as it came, logged; one conversation's large
  request never holds up another's small one;
- bytes: what goes upstream is UTF-8 (a lone surrogate escape stays an escape), what the proxy
  left alone goes as it came (escapes included), and a path goes with its ``%2F`` and dots;
- only agents: a foreign ``Host`` or a browser's ``Origin`` is refused, a client token is
  required when set and never forwarded or logged;
- lifecycle: SIGTERM mid-prepare forwards the request and exits 0 without a traceback; a busy
  port or a bad host is one line and exit 2; a delivered 502 is logged as one; ``HEAD /`` is 200;
- conversations: a key without the markers a client moves; one Claude Code run (the real agent,
  through ``toolkeep wrap --proxy --client-token``) is one conversation, and its token reaches
  the proxy, never the upstream.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

httpx = pytest.importorskip("httpx", reason="the proxy extra is not installed: pip install 'toolkeep[proxy]'")
pytest.importorskip("uvicorn", reason="the proxy extra is not installed: pip install 'toolkeep[proxy]'")

import toolkeep  # noqa: E402
from tests.strategies import property_settings  # noqa: E402
from tests.upstream_proxy import TOOLKEEP, ProxyProcess, read_history  # noqa: E402
from tests.upstream_server import ScriptedUpstream  # noqa: E402
from toolkeep.conversation_key import conversation_key  # noqa: E402
from toolkeep.formats import get_format  # noqa: E402

ANTHROPIC = {"anthropic-version": "2023-06-01", "x-api-key": "sk-ant-dummy"}


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedUpstream]:
    server = ScriptedUpstream()
    yield server
    server.close()


def upstreams(url: str) -> list[str]:
    return ["--anthropic-upstream", url, "--openai-upstream", url, "--gemini-upstream", url]


def exchange(url: str, data: bytes, *, stop_after: bytes | None = None) -> bytes:
    """What a raw connection to the proxy at ``url`` receives after sending ``data``, until the
    proxy closes it (or, with ``stop_after``, until that much came)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
            if stop_after is not None and stop_after in received:
                break
        return received


def status_and_json(response: bytes) -> tuple[int, dict[str, Any]]:
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(body)


def requests_to(upstream: ScriptedUpstream, path: str) -> list[dict[str, Any]]:
    return [r for r in upstream.requests() if r["path"] == path]


# -- bodies and time -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "shape"),
    [
        ("/v1/messages", lambda e: e["type"] == "error" and e["error"]["type"] == "request_too_large"),
        (
            "/v1/chat/completions",
            lambda e: e["error"]["type"] == "request_too_large" and "param" in e["error"],
        ),
        ("/v1beta/models/g:generateContent", lambda e: e["error"]["code"] == 413 and "status" in e["error"]),
    ],
)
def test_an_over_size_body_is_a_413_in_its_providers_shape_before_it_is_read(
    upstream: ScriptedUpstream, tmp_path: Path, path: str, shape: Any
) -> None:
    with ProxyProcess(
        *upstreams(upstream.url), "--workspace", str(tmp_path), "--max-body-bytes", "1000"
    ) as proxy:
        before = len(upstream.requests())
        host = proxy.url.removeprefix("http://")
        # a Content-Length of a gigabyte, and not one byte of the body sent: answered at once
        head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        answer = exchange(proxy.url, (head + "Content-Length: 1000000000\r\n\r\n").encode())
        status, error = status_and_json(answer)
        assert status == 413 and shape(error), answer
        assert "1,000 bytes" in json.dumps(error)
        # no Content-Length: counted as it arrives, refused once past the limit
        chunked = (
            head
            + "Transfer-Encoding: chunked\r\n\r\n"
            + "".join(f"{600:x}\r\n{'x' * 600}\r\n" for _ in range(4))
        )
        status, error = status_and_json(exchange(proxy.url, chunked.encode()))
        assert status == 413 and shape(error)
        # at the limit it passes
        small = httpx.post(proxy.url + path, content=b"{" + b" " * 998 + b"}", headers=ANTHROPIC, timeout=60)
        assert small.status_code != 413
    assert "Traceback" not in proxy.stderr()
    assert len(upstream.requests()) == before + 1  # only the last reached the upstream


def test_a_stalled_head_or_body_is_closed(upstream: ScriptedUpstream, tmp_path: Path) -> None:
    """``--read-timeout``: a client that stops sending mid-head is closed; one that stops mid-body
    gets a 408 and is closed. (The test waits for the close, however long it takes.)"""
    before = len(requests_to(upstream, "/v1/messages"))
    with ProxyProcess(
        *upstreams(upstream.url), "--workspace", str(tmp_path), "--read-timeout", "0.5"
    ) as proxy:
        host = proxy.url.removeprefix("http://")
        assert exchange(proxy.url, f"POST /v1/messages HTTP/1.1\r\nHost: {host}\r\n".encode()) == b""
        assert exchange(proxy.url, b"") == b""  # connected, and never a byte
        head = f"POST /v1/messages HTTP/1.1\r\nHost: {host}\r\nContent-Length: 100\r\n\r\n"
        status, error = status_and_json(exchange(proxy.url, (head + '{"model": ').encode()))
        assert status == 408 and error["error"]["type"] == "timeout_error"
        # an honest client is unaffected: a keep-alive connection serves two requests
        with httpx.Client(base_url=proxy.url, timeout=60) as client:
            for _ in range(2):
                assert client.get("/toolkeep/stats").status_code == 200
    assert "Traceback" not in proxy.stderr()
    assert len(requests_to(upstream, "/v1/messages")) == before


def test_a_preparation_past_the_timeout_goes_as_it_came_and_is_logged(
    upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    """A history of 2.6 MB is read, keyed and prepared in far more than 1 ms: it goes as it came."""
    with ProxyProcess(
        *upstreams(upstream.url), "--workspace", str(tmp_path), "--prepare-timeout", "0.001"
    ) as proxy:
        body = json.dumps({"model": "echo", "max_tokens": 5, "messages": read_history(40, 1000)}).encode()
        response = httpx.post(proxy.url + "/v1/messages", content=body, headers=ANTHROPIC, timeout=120)
        assert response.status_code == 200
        assert requests_to(upstream, "/v1/messages")[-1]["body"].encode() == body
        line = proxy.wait_for_line(lambda line: "preparing took over" in line)
    assert "forwarded unchanged: preparing took over 0.001 s (--prepare-timeout)" in line
    assert len(body) > 2_000_000


def test_a_large_request_never_holds_up_another_conversations_small_one(
    upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    """Three large requests of three conversations are in preparation or waiting for a thread
    (more than the threads for large bodies); a small request of a fourth conversation is
    prepared and answered while they still are (ordering, not time)."""
    from toolkeep.proxy import make_preparer
    from toolkeep.proxy.app import PREPARING_THREADS, Upstreams, create_app

    preparer = make_preparer(toolkeep.Config(), tmp_path)
    app = create_app(preparer, Upstreams(upstream.url, upstream.url, upstream.url), prepare_timeout=600)
    large = [
        json.dumps(
            {"model": "echo", "max_tokens": 5, "messages": read_history(60, 2000, first=f"big {n}")}
        ).encode()
        for n in range(PREPARING_THREADS + 1)
    ]
    small = {"model": "echo", "max_tokens": 5, "messages": read_history(1, 5, first="small")}

    async def run() -> tuple[list[bool], int, int]:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1", timeout=600
        ) as client:
            big = [
                asyncio.create_task(client.post("/v1/messages", content=b, headers=ANTHROPIC)) for b in large
            ]
            limiter = app.state.preparing_large
            while limiter.borrowed_tokens < PREPARING_THREADS or limiter.statistics().tasks_waiting < 1:
                await asyncio.sleep(0.01)
            answer = await client.post("/v1/messages", json=small, headers=ANTHROPIC)
            pending = [not task.done() for task in big]
            seen = len(requests_to(upstream, "/v1/messages"))
            await asyncio.gather(*big)
            return pending, answer.status_code, seen

    before = len(requests_to(upstream, "/v1/messages"))
    pending, status, seen = asyncio.run(run())
    assert status == 200 and pending == [True] * len(large)
    assert seen == before + 1  # the small one reached the upstream, none of the large yet
    bodies = [r["body"] for r in requests_to(upstream, "/v1/messages")[before:]]
    assert '"small"' in bodies[0] and len(bodies) == len(large) + 1


# -- bytes -----------------------------------------------------------------------------------


def test_what_goes_upstream_is_utf8_and_what_was_left_alone_goes_as_it_came(
    upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    """A history whose first message holds a cut emoji (``"\\ud83d"``, as Node's JSON.stringify
    writes one) and an optional escape (``\\u00e9``), and whose shortened results hold lone
    surrogates too: the prepared body is valid UTF-8, shortened, and holds the first message's
    text exactly as the client wrote it."""
    history = read_history(6)
    history[0]["content"] = "cut emoji \ud83d, caf\u00e9"
    history[2]["content"][0]["content"] = "half \udc00 " + history[2]["content"][0]["content"]
    first = '{"role": "user", "content": "cut emoji \\ud83d, caf\\u00e9"}'
    with ProxyProcess(*upstreams(upstream.url), "--workspace", str(tmp_path)) as proxy:
        for n in range(1, 7):
            body = json.dumps({"model": "echo", "max_tokens": 5, "messages": history[: 1 + 2 * n]}).encode()
            assert first.encode() in body  # (json.dumps writes escapes, as Python clients send them)
            response = httpx.post(proxy.url + "/v1/messages", content=body, headers=ANTHROPIC, timeout=60)
            assert response.status_code == 200
    sent = requests_to(upstream, "/v1/messages")[-1]["body"]  # decoded with "replace"
    assert "\ufffd" not in sent  # no byte that is not UTF-8
    assert len(sent) < len(body) / 2  # prepared
    assert first in sent  # the very text of the message the proxy left alone
    document = json.loads(sent)
    assert document["messages"][0]["content"] == "cut emoji \ud83d, caf\u00e9"
    assert toolkeep.validate(document["messages"], "anthropic") == []


def test_paths_and_queries_reach_the_upstream_as_they_came(
    upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    with ProxyProcess(*upstreams(upstream.url), "--workspace", str(tmp_path)) as proxy:
        host = proxy.url.removeprefix("http://")
        for target in ("/v1/messages/..%2F..%2Fetc?a=%2F..%2f&b=c%20d", "/v1/models/./x/../y%2e%2E/z"):
            request = f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
            answer = exchange(proxy.url, request.encode())
            assert answer.startswith(b"HTTP/1.1 200"), answer
            seen = upstream.requests()[-1]
            assert seen["path"] + "?" * bool(seen["query"]) + seen["query"] == target


# -- only agents, not browsers ---------------------------------------------------------------


def test_a_browsers_origin_or_a_foreign_host_is_refused(upstream: ScriptedUpstream, tmp_path: Path) -> None:
    """A cross-site "simple" POST (text/plain, a foreign Origin) and a DNS-rebound Host are
    refused before anything is prepared or saved; ``--allow-origin`` / ``--allow-host`` let
    them in; the agents' own requests (no Origin, a loopback Host) pass."""
    workspace = tmp_path / "ws"
    body = json.dumps({"model": "echo", "max_tokens": 5, "messages": read_history(4)})
    with ProxyProcess(*upstreams(upstream.url), "--workspace", str(workspace)) as proxy:
        before = len(upstream.requests())
        port = proxy.url.rsplit(":", 1)[1]
        cross_site = {"content-type": "text/plain", "origin": "http://evil.example"}
        refused = httpx.post(proxy.url + "/v1/messages", content=body, headers=cross_site)
        assert refused.status_code == 403 and refused.json()["error"]["type"] == "permission_error"
        rebound = {"host": f"evil.example:{port}"}
        for path in ("/toolkeep/stats", "/toolkeep/", "/v1/models"):
            answer = httpx.get(proxy.url + path, headers=rebound)
            assert answer.status_code == 421 and "--allow-host" in answer.text, path
        assert len(upstream.requests()) == before
        assert (not list(workspace.rglob("*.txt")) and not (workspace / "archive").exists()) or not any(
            (workspace / "archive").rglob("*")
        )
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", "localhost"):
            assert httpx.get(proxy.url + "/toolkeep/stats", headers={"host": host}).status_code == 200
        same = {"origin": proxy.url}  # the proxy's own pages (the inspector) may fetch from it
        assert httpx.get(proxy.url + "/toolkeep/stats", headers=same).status_code == 200
    allow = ["--allow-origin", "http://evil.example", "--allow-host", "evil.example"]
    with ProxyProcess(*upstreams(upstream.url), "--workspace", str(workspace), *allow) as proxy:
        port = proxy.url.rsplit(":", 1)[1]
        assert httpx.post(proxy.url + "/v1/messages", content=body, headers=cross_site).status_code == 200
        assert (
            httpx.get(proxy.url + "/toolkeep/stats", headers={"host": f"evil.example:{port}"}).status_code
            == 200
        )


def test_a_client_token_is_required_and_never_forwarded_or_logged(
    upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    token = "tok-secret-31415926"
    env = {"TOOLKEEP_CLIENT_TOKEN": token}
    with ProxyProcess(*upstreams(upstream.url), "--workspace", str(tmp_path), env=env) as proxy:
        before = len(upstream.requests())
        chat = {"model": "echo", "messages": [{"role": "user", "content": "hi"}]}
        for headers in ({}, {"x-toolkeep-token": "wrong"}):
            missing = httpx.post(proxy.url + "/v1/chat/completions", json=chat, headers=headers)
            assert missing.status_code == 401
            assert missing.json()["error"]["type"] == "authentication_error"  # OpenAI's shape
            assert missing.json()["error"]["param"] is None
        gemini = httpx.post(proxy.url + "/v1beta/models/g:generateContent", json={"contents": []})
        assert gemini.status_code == 401 and gemini.json()["error"]["status"] == "UNAUTHENTICATED"
        assert httpx.get(proxy.url + "/toolkeep/stats").status_code == 401
        assert len(upstream.requests()) == before
        good = {"x-toolkeep-token": token}
        assert httpx.post(proxy.url + "/v1/chat/completions", json=chat, headers=good).status_code == 200
        assert httpx.get(proxy.url + "/toolkeep/stats", headers=good).status_code == 200
        assert httpx.head(proxy.url + "/").status_code == 200  # Claude Code's probe goes without it
    seen = upstream.requests()[-1]
    assert seen["path"] == "/v1/chat/completions"
    assert token not in json.dumps(upstream.requests())  # never forwarded
    assert token not in proxy.stderr()  # never logged


# -- lifecycle -------------------------------------------------------------------------------


def read_bytes(pid: int) -> int:
    """The bytes process ``pid`` has read (sockets included): Linux's /proc/PID/io ``rchar``."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar")


def test_sigterm_mid_prepare_forwards_the_request_and_exits_0(
    upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    """A 20 MB history the proxy has not seen (seconds to prepare); SIGTERM once the proxy has
    read it: the request goes upstream as it came, the client gets the upstream's 200, and the
    proxy exits 0 with no traceback and a line saying why the request went unprepared."""
    if not Path(f"/proc/{os.getpid()}/io").exists():
        pytest.skip("needs Linux's /proc/PID/io to see the proxy read the body")
    body = json.dumps({"model": "echo", "max_tokens": 5, "messages": read_history(300, 1200)}).encode()
    proxy = ProxyProcess(*upstreams(upstream.url), "--workspace", str(tmp_path), "--prepare-timeout", "600")
    try:
        host = proxy.url.removeprefix("http://")
        head = f"POST /v1/messages HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        request = (head + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
        start = read_bytes(proxy.process.pid)
        result: list[bytes] = []
        import threading

        sender = threading.Thread(target=lambda: result.append(exchange(proxy.url, request)))
        sender.start()
        while read_bytes(proxy.process.pid) - start < len(body):
            time.sleep(0.01)
        stopped = time.monotonic()
        proxy.process.send_signal(signal.SIGTERM)
        code = proxy.process.wait(120)
        took = time.monotonic() - stopped
        sender.join(60)
    finally:
        proxy.stop()
    assert code == 0
    status, answer = status_and_json(result[0])
    assert status == 200 and answer["type"] == "message"
    assert requests_to(upstream, "/v1/messages")[-1]["body"].encode() == body
    assert "Traceback" not in proxy.stderr()
    assert any("forwarded unchanged: the proxy is stopping" in line for line in proxy.lines), proxy.stderr()
    print(f"SIGTERM to exit, mid-prepare of {len(body):,} bytes: {took:.2f} s")


def test_a_busy_port_or_a_bad_host_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cases = {
            ("--port", str(port)): f"cannot listen on 127.0.0.1:{port}: address already in use",
            (
                "--host",
                "no-such-host.invalid",
            ): "cannot listen on no-such-host.invalid: the host does not resolve",
        }
        for args, said in cases.items():
            result = subprocess.run(
                [*TOOLKEEP, "proxy", "--workspace", str(tmp_path), *args], capture_output=True, timeout=60
            )
            lines = result.stderr.decode().strip().splitlines()
            assert result.returncode == 2, (args, result.stderr)
            assert len(lines) == 1 and lines[0].startswith(f"toolkeep: error: {said}"), (args, lines)


def test_log_lines_say_what_happened_and_head_is_200(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with ProxyProcess(*upstreams(f"http://127.0.0.1:{port}"), "--workspace", str(tmp_path)) as proxy:
        response = httpx.post(
            proxy.url + "/v1/messages", json={"model": "x", "messages": []}, headers=ANTHROPIC
        )
        assert response.status_code == 502 and response.json()["error"]["type"] == "api_error"
        probe = httpx.head(proxy.url + "/")
        assert probe.status_code == 200
        line = proxy.wait_for_line(lambda line: " POST /v1/messages 502" in line)
    assert "(upstream unreachable: ConnectError)" in line and "client disconnected" not in line
    assert not any(" HEAD / " in line and "501" in line for line in proxy.lines)


def test_an_idle_keep_alive_connection_outlives_the_agents_own_keep_alive(tmp_path: Path) -> None:
    """Agents' HTTP clients drop an idle connection after a few seconds (undici 4 s, httpx 5 s).
    The proxy keeps one open longer (``--read-timeout``, 30 s), so a client never sends its next
    request on a connection the proxy is closing that very moment (uvicorn's own 5 s would race
    httpx's 5 s: the soak bench saw 20 ReadErrors in 24,000 requests). The test idles 6 s."""
    with ProxyProcess("--workspace", str(tmp_path)) as proxy:
        host, port = proxy.url.removeprefix("http://").rsplit(":", 1)
        request = f"HEAD / HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
        with socket.create_connection((host, int(port)), timeout=60) as sock:
            for _ in range(2):
                sock.sendall(request)
                answer = b""
                while b"\r\n\r\n" not in answer:
                    chunk = sock.recv(65536)
                    assert chunk, "the proxy closed an idle keep-alive connection within 6 s"
                    answer += chunk
                assert answer.startswith(b"HTTP/1.1 200")
                time.sleep(6)


# -- conversations ---------------------------------------------------------------------------


def test_the_key_ignores_the_markers_a_client_moves() -> None:
    anthropic = get_format("anthropic").moving_keys
    first = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    marked = {
        "role": "user",
        "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
    }
    assert conversation_key(marked, anthropic) == conversation_key(first, anthropic)
    assert conversation_key(marked) != conversation_key(first)  # (the plain key sees them)
    assert marked["content"][0]["cache_control"] == {"type": "ephemeral"}  # the caller's, untouched
    bedrock = get_format("bedrock").moving_keys
    point = {"role": "user", "content": [{"text": "hi"}, {"cachePoint": {"type": "default"}}]}
    assert conversation_key(point, bedrock) == conversation_key(
        {"role": "user", "content": [{"text": "hi"}]}, bedrock
    )
    other = {"role": "user", "content": [{"type": "text", "text": "ho"}]}
    assert conversation_key(other, anthropic) != conversation_key(first, anthropic)


@pytest.mark.slow
def test_one_claude_code_run_is_one_conversation_and_its_token_stays_with_the_proxy(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The real Claude Code, through ``toolkeep wrap claude --proxy URL --client-token T`` to a
    proxy that requires T: it finishes; its first request marks the first message for the cache
    and the next ones do not, and all are one conversation; every request reaching the proxy
    carries T (read off the wire), none reaching the upstream does, and no log line holds it."""
    from tests.test_wrap_agents import AGENTS, FINISHED, make_files, sent_headers, user_setup, wrap
    from tests.upstream_tap import Tap

    project = tmp_path_factory.mktemp("cc-project")
    home = tmp_path_factory.mktemp("cc-home")
    upstream = ScriptedUpstream(make_files(project))
    token = "tok-27182818"
    try:
        env, _ = user_setup("claude", home, upstream.url)
        workspace = tmp_path_factory.mktemp("cc-workspace")
        args = ["--anthropic-upstream", upstream.url, "--workspace", str(workspace), "--client-token", token]
        with ProxyProcess(*args) as proxy:
            host, port = proxy.url.removeprefix("http://").rsplit(":", 1)
            tap = Tap(host, int(port))
            result = wrap(
                "claude",
                ["--proxy", tap.url, "--client-token", token],
                AGENTS["claude"]["args"],
                env,
                project,
            )
            tap.close()
            stats = httpx.get(proxy.url + "/toolkeep/stats", headers={"x-toolkeep-token": token}).json()
        assert result.returncode == 0, result.stderr[-3000:]
        assert FINISHED in result.stdout, result.stdout[-2000:]
        model = [r for r in requests_to(upstream, "/v1/messages") if json.loads(r["body"]).get("tools")]
        assert len(model) > 5
        firsts = [json.loads(r["body"])["messages"][0] for r in model]
        assert "cache_control" in json.dumps(firsts[0]) and "cache_control" not in json.dumps(firsts[-1])
        keys = {line.split(" conversation ")[1].split()[0] for line in proxy.log_lines("/v1/messages")}
        assert stats["conversations"]["started"] == 1 and len(keys) == 1, (stats, keys)
        sent = sent_headers(tap)
        assert [p for p, t in sent if p.startswith(("/v1/", "/toolkeep/")) and t != token] == []
        assert token not in json.dumps(upstream.requests())
        assert token not in proxy.stderr()
    finally:
        upstream.close()


# -- the bytes of a changed body, as a property ------------------------------------------------

_TEXT = st.text(st.characters(exclude_categories=()), max_size=6)  # lone surrogates too
_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=10,
)


@given(
    fields=st.dictionaries(_TEXT.filter(lambda k: k != "messages"), _VALUE, max_size=4),
    history=st.lists(_VALUE, max_size=5),
    changed=st.sets(st.integers(0, 4)),
    ascii_=st.booleans(),
    indent=st.none() | st.integers(0, 2),
)
@property_settings(300)
def test_a_changed_body_keeps_the_text_of_what_was_left_alone_and_is_utf8(
    fields: dict[str, Any], history: list[Any], changed: set[int], ascii_: bool, indent: int | None
) -> None:
    """A body as any client writes it (escapes or not, spaces or not), its history's items in
    ``changed`` replaced by new values: the body put together is valid UTF-8, reads back as the
    document, and holds the text of every field and item that was left alone as it came."""
    from toolkeep.proxy.prepare import _document, _item_text, _RawBody, _wire
    from toolkeep.tokens import serialize_message

    text = json.dumps({**fields, "messages": history}, ensure_ascii=ascii_, indent=indent)
    try:
        body = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate unescaped: no client can send that as UTF-8
        return
    raw = _RawBody.read(body, json.JSONDecoder())
    assert raw is not None and raw.key == "messages"
    original = raw.document["messages"]
    out_history = [{"new": n} if n in changed else m for n, m in enumerate(original)]
    out = [
        _item_text(m, n, original, raw.items) or _wire(serialize_message(m))
        for n, m in enumerate(out_history)
    ]
    result = _document({**raw.document, "messages": out_history}, "messages", out, raw).encode("utf-8")
    assert json.loads(result) == json.loads(json.dumps({**raw.document, "messages": out_history}))
    for n, m in enumerate(original):
        if n not in changed:
            assert raw.items[id(m)].encode() in result
    for name in fields:
        assert raw.fields[name][2].encode() in result


def test_the_config_file_sets_the_limits_and_access_flags(upstream: ScriptedUpstream, tmp_path: Path) -> None:
    """``--config FILE``: a repeatable flag takes a list (``allow_host = [...]``)."""
    config = tmp_path / "proxy.toml"
    config.write_text(
        f'anthropic_upstream = "{upstream.url}"\nworkspace = "{tmp_path / "ws"}"\n'
        'allow_host = ["one.internal", "two.internal"]\nclient_token = "tok-file"\n'
        "max_body_bytes = 2000\nprepare_timeout = 3\nread_timeout = 10\n"
    )
    with ProxyProcess("--config", str(config)) as proxy:
        token = {"x-toolkeep-token": "tok-file"}
        for host in ("one.internal", "two.internal:80"):
            answer = httpx.get(proxy.url + "/toolkeep/stats", headers={**token, "host": host})
            assert answer.status_code == 200, host
        assert (
            httpx.get(proxy.url + "/toolkeep/stats", headers={**token, "host": "three.internal"}).status_code
            == 421
        )
        assert httpx.get(proxy.url + "/toolkeep/stats").status_code == 401
        big = httpx.post(proxy.url + "/v1/messages", content=b"x" * 2001, headers={**token, **ANTHROPIC})
        assert big.status_code == 413
