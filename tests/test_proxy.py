"""``toolkeep proxy``, the real process over real HTTP, in front of the scripted model server
(tests/upstream_server.py): exact pass-through of headers, query, unknown fields, error answers
and streams (byte for byte, unbuffered), fail open, prepared histories that name a file the
agent can read, one log line per request, statistics, signals."""

from __future__ import annotations

import base64
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

httpx = pytest.importorskip("httpx", reason="the proxy extra is not installed: pip install 'toolkeep[proxy]'")
pytest.importorskip("starlette", reason="the proxy extra is not installed: pip install 'toolkeep[proxy]'")
pytest.importorskip("uvicorn", reason="the proxy extra is not installed: pip install 'toolkeep[proxy]'")

import toolkeep  # noqa: E402
from tests import redis_server  # noqa: E402
from tests.upstream_proxy import TOOLKEEP, ProxyProcess, big_text, read_history  # noqa: E402
from tests.upstream_server import ScriptedUpstream  # noqa: E402
from toolkeep.shorten import archive_key  # noqa: E402

redis_url = redis_server.redis_url  # the session-wide Redis fixture

SECRET = "sk-ant-very-secret-value-1234"


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedUpstream]:
    server = ScriptedUpstream()
    yield server
    server.close()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("proxy-workspace")


@pytest.fixture(scope="module")
def proxy(upstream: ScriptedUpstream, workspace: Path) -> Iterator[ProxyProcess]:
    with ProxyProcess(
        "--anthropic-upstream", upstream.url, "--openai-upstream", upstream.url, "--workspace", str(workspace)
    ) as process:
        yield process


def last(upstream: ScriptedUpstream, path: str) -> dict[str, Any]:
    return [r for r in upstream.requests() if r["path"] == path][-1]


def sent_bytes(entry: dict[str, Any]) -> bytes:
    return base64.b64decode(entry["response"])


def last_sent(upstream: ScriptedUpstream, path: str, timeout: float = 10.0) -> bytes:
    """What the upstream sent for its last request to ``path``, once it has recorded it: a client
    can read the last byte before the upstream's handler has finished writing its record."""
    deadline = time.monotonic() + timeout
    while (entry := last(upstream, path))["response"] is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return sent_bytes(entry)


# -- the command -------------------------------------------------------------------------------


def test_listening_line_names_the_port_and_stats_answer(proxy: ProxyProcess) -> None:
    assert proxy.url.startswith("http://127.0.0.1:")
    stats = httpx.get(f"{proxy.url}/toolkeep/stats").json()
    assert {"requests", "prepared", "failed_open", "tokens", "cost"} <= set(stats)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_it_cleanly_finishing_the_stream_in_flight(
    upstream: ScriptedUpstream, tmp_path: Path, sig: int
) -> None:
    process = ProxyProcess("--anthropic-upstream", upstream.url, "--workspace", str(tmp_path))
    body = {"model": "slow", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with httpx.stream("POST", f"{process.url}/v1/messages", json=body, timeout=60) as response:
        chunks = response.iter_raw()
        first = next(chunks)
        process.process.send_signal(sig)
        rest = b"".join(chunks)
    assert process.process.wait(60) == 0
    assert (first + rest).endswith(b'data: {"type": "message_stop"}\n\n')  # the stream in flight finished
    assert last(upstream, "/v1/messages")["disconnected"] is False


def test_refusals_are_one_line_and_exit_2(tmp_path: Path) -> None:
    import subprocess

    cases = [
        ["--policy", "nonsense"],
        ["--anthropic-upstream", "ftp://example.com"],
        ["--store", "nosuch://x"],
        ["--pricing", "nonsense"],
        ["--max-request-tokens", "-5"],
    ]
    for args in cases:
        result = subprocess.run(
            [*TOOLKEEP, "proxy", "--port", "0", "--workspace", str(tmp_path), *args],
            capture_output=True,
            timeout=60,
        )
        lines = result.stderr.decode().strip().splitlines()
        assert result.returncode == 2, (args, result.stderr)
        assert len(lines) == 1 and lines[0].startswith("toolkeep: error: "), (args, lines)


# -- exact pass-through ------------------------------------------------------------------------


def test_headers_query_and_unknown_fields_reach_the_upstream_as_sent(
    proxy: ProxyProcess, upstream: ScriptedUpstream
) -> None:
    body = {
        "model": "echo",
        "max_tokens": 10,
        "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
        "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
        "zz_unknown": {"nested": [1, 2.5, None, "ü"]},
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
            }
        ],
    }
    raw = json.dumps(body).encode()
    headers = {
        "x-api-key": SECRET,
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "context-management-2025-06-27,fine-grained-tool-streaming-2025-05-14",
        "x-custom-thing": "kept as it is",
        "content-type": "application/json",
        "user-agent": "claude-cli/2.0 (external, cli)",
    }
    response = httpx.post(f"{proxy.url}/v1/messages?beta=true&x=%2F1", content=raw, headers=headers)
    assert response.status_code == 200
    seen = last(upstream, "/v1/messages")
    assert seen["query"] == "beta=true&x=%2F1"
    got = dict(seen["headers"])
    for name, value in headers.items():
        assert got[name] == value
    assert got["accept-encoding"] == response.request.headers["accept-encoding"]  # the client's own
    assert json.loads(seen["body"]) == body
    assert seen["body"].encode() == raw  # nothing to prepare: the very bytes
    assert response.content == last_sent(upstream, "/v1/messages")


def test_auth_is_forwarded_and_never_logged(proxy: ProxyProcess, upstream: ScriptedUpstream) -> None:
    body = {"model": "echo", "messages": [{"role": "user", "content": "hi"}]}
    httpx.post(f"{proxy.url}/v1/chat/completions", json=body, headers={"authorization": f"Bearer {SECRET}"})
    assert dict(last(upstream, "/v1/chat/completions")["headers"])["authorization"] == f"Bearer {SECRET}"
    proxy.wait_for_line(lambda line: "/v1/chat/completions 200" in line)
    assert SECRET not in proxy.stderr()


@pytest.mark.parametrize(
    ("path", "end"),
    [
        ("/v1/messages", b'data: {"type": "message_stop"}\n\n'),
        ("/v1/chat/completions", b"data: [DONE]\n\n"),
        ("/v1/responses", b'"status": "completed"}}\n\n'),
    ],
)
def test_streams_reach_the_client_byte_for_byte(
    proxy: ProxyProcess, upstream: ScriptedUpstream, path: str, end: bytes
) -> None:
    key = "input" if path == "/v1/responses" else "messages"
    body = {"model": "stream", "stream": True, key: [{"role": "user", "content": "hi"}]}
    with httpx.stream("POST", f"{proxy.url}{path}", json=body) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        got = b"".join(response.iter_raw())
    sent = last_sent(upstream, path)
    assert got == sent and got.endswith(end)
    assert "ünïcödé".encode() in got


def test_the_first_bytes_arrive_while_the_upstream_is_still_sending(
    proxy: ProxyProcess, upstream: ScriptedUpstream
) -> None:
    body = {"model": "slow", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with httpx.stream("POST", f"{proxy.url}/v1/messages", json=body, timeout=60) as response:
        chunks = response.iter_raw()
        first = next(chunks)
        entry = last(upstream, "/v1/messages")
        assert entry["response"] is None  # the upstream has not finished: nothing was buffered
        rest = b"".join(chunks)
    assert first + rest == last_sent(upstream, "/v1/messages")


def test_a_compressed_answer_passes_as_its_raw_bytes(proxy: ProxyProcess, upstream: ScriptedUpstream) -> None:
    body = {"model": "gzip", "messages": [{"role": "user", "content": "hi"}]}
    with httpx.stream("POST", f"{proxy.url}/v1/chat/completions", json=body) as response:
        assert response.headers["content-encoding"] == "gzip"
        raw = b"".join(response.iter_raw())
    assert raw == last_sent(upstream, "/v1/chat/completions")


@pytest.mark.parametrize(("model", "status"), [("error-429", 429), ("error-500", 500), ("overloaded", 529)])
def test_upstream_errors_pass_with_status_body_and_headers(
    proxy: ProxyProcess, upstream: ScriptedUpstream, model: str, status: int
) -> None:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    response = httpx.post(f"{proxy.url}/v1/messages", json=body)
    assert response.status_code == status
    assert response.headers["retry-after"] == "7" and response.headers["x-scripted"] == model
    assert response.content == last_sent(upstream, "/v1/messages")


def test_an_unreachable_upstream_is_a_502_not_a_hang(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with ProxyProcess(
        "--openai-upstream", f"http://127.0.0.1:{port}", "--workspace", str(tmp_path)
    ) as process:
        response = httpx.post(f"{process.url}/v1/responses", json={"model": "x", "input": "hi"}, timeout=60)
    assert response.status_code == 502
    assert "could not be reached" in response.json()["error"]["message"]


@pytest.mark.parametrize("path", ["/v1/messages/count_tokens", "/v1/responses/compact"])
def test_count_tokens_and_compact_are_forwarded_as_they_are(
    proxy: ProxyProcess, upstream: ScriptedUpstream, path: str
) -> None:
    key = "input" if "responses" in path else "messages"
    history = read_history(6) if key == "messages" else [{"role": "user", "content": big_text(800, "x")}]
    raw = json.dumps({"model": "m", key: history}).encode()
    response = httpx.post(
        f"{proxy.url}{path}?beta=true", content=raw, headers={"content-type": "application/json"}
    )
    assert response.status_code == 200
    seen = last(upstream, path)
    assert seen["body"].encode() == raw and seen["query"] == "beta=true"


def test_an_upstream_base_with_a_path_gets_the_request_path_appended(
    upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    with ProxyProcess("--openai-upstream", f"{upstream.url}/base", "--workspace", str(tmp_path)) as process:
        httpx.post(f"{process.url}/v1/responses?a=1", json={"model": "echo", "input": "hi"})
    assert [r for r in upstream.requests() if r["path"] == "/base/v1/responses"][-1]["query"] == "a=1"


# -- fail open ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b'{"model": "echo", "messages": 5}',
        b'["a", "list"]',
        b'{"model": "echo", "messages": [{"role": "user", "content": "x"}], "input": []}',
        # a number past a float's range (valid JSON), in a history toolkeep would shorten
        json.dumps({"model": "echo", "messages": read_history(3)}).encode()[:-1] + b', "n": 1e400}',
        json.dumps({"model": "echo", "messages": read_history(3)})
        .encode()
        .replace(b'"/f0"}', b'"/f0", "x": -1E999}'),
        # names Python's parser takes and JSON does not
        b'{"model": "echo", "temperature": NaN, "messages": [{"role": "user", "content": "x"}]}',
        b'{"model": "echo", "messages": [{"role": "user", "content": "x"}], "top_p": -Infinity}',
    ],
    ids=[
        "not-json",
        "messages-not-a-list",
        "a-list",
        "two-histories",
        "1e400",
        "in-a-call",
        "nan",
        "infinity",
    ],
)
def test_what_cannot_be_prepared_is_forwarded_unchanged_with_one_line(
    proxy: ProxyProcess, upstream: ScriptedUpstream, raw: bytes
) -> None:
    before = len(proxy.log_lines("/v1/messages:"))
    response = httpx.post(
        f"{proxy.url}/v1/messages", content=raw, headers={"content-type": "application/json"}
    )
    assert response.status_code in (200, 400)  # the upstream's own answer, never a 500 of ours
    assert last(upstream, "/v1/messages")["body"].encode() == raw
    deadline = time.monotonic() + 10
    while len(proxy.log_lines("/v1/messages:")) <= before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(proxy.log_lines("/v1/messages:")) == before + 1


# -- prepared histories ------------------------------------------------------------------------


def test_a_long_conversation_is_shortened_valid_and_names_files_it_can_read(
    proxy: ProxyProcess, upstream: ScriptedUpstream, workspace: Path
) -> None:
    headers = {"x-api-key": SECRET, "anthropic-version": "2023-06-01"}
    history = read_history(8)
    for n in range(1, 9):
        body = {"model": "echo", "max_tokens": 5, "messages": history[: 1 + 2 * n]}
        assert httpx.post(f"{proxy.url}/v1/messages", json=body, headers=headers).status_code == 200
    seen = json.loads(last(upstream, "/v1/messages")["body"])
    assert toolkeep.validate(seen["messages"], "anthropic") == []
    assert seen["messages"][-1] == history[16]  # the last user turn is never shortened
    sent = json.dumps(seen)
    assert len(sent) < 0.5 * len(json.dumps(body))
    first = seen["messages"][2]["content"][0]["content"]
    path = first.split("full output saved to ")[1].split("]")[0]
    original = history[2]["content"][0]["content"]
    assert Path(path).is_relative_to(workspace) and Path(path).read_text() == original
    # the marker stays beside the file: the proxy's recall tool redeems it too
    assert f"full output saved to {path}] <<ccr:{archive_key(original)}>>" in first
    assert sent.count("<<ccr:") >= sent.count("full output saved to ") > 0
    line = proxy.log_lines("/v1/messages")[-1]
    assert "conversation " in line and " tokens " in line and " repairs 0" in line


def test_the_same_history_gives_the_same_bytes_from_two_replicas(
    upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    history = read_history(6)
    raws = []
    for _ in range(2):  # one replica, then another over the same workspace
        with ProxyProcess("--anthropic-upstream", upstream.url, "--workspace", str(tmp_path)) as process:
            for n in (3, 6):
                sent = json.dumps({"model": "echo", "messages": history[: 1 + 2 * n]})
                httpx.post(f"{process.url}/v1/messages", content=sent)
                raws.append(last(upstream, "/v1/messages")["body"])
    assert raws[0] == raws[2] and raws[1] == raws[3]
    assert raws[1] != json.dumps({"model": "echo", "messages": history})  # prepared: it changed


def test_a_client_that_disconnects_cancels_the_upstream(
    proxy: ProxyProcess, upstream: ScriptedUpstream
) -> None:
    body = {"model": "slow", "stream": True, "messages": [{"role": "user", "content": "bye"}]}
    with httpx.stream("POST", f"{proxy.url}/v1/messages", json=body, timeout=60) as response:
        next(response.iter_raw())
        entry = last(upstream, "/v1/messages")
    deadline = time.monotonic() + 20
    while not entry["disconnected"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert entry["disconnected"], "the upstream went on streaming to nobody"
    proxy.wait_for_line(lambda line: "(client disconnected)" in line)


def test_stats_count_requests_savings_and_cache_aware_cost(
    upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    history = read_history(8)
    with ProxyProcess("--anthropic-upstream", upstream.url, "--workspace", str(tmp_path)) as process:
        for n in range(1, 9):
            httpx.post(f"{process.url}/v1/messages", json={"model": "echo", "messages": history[: 1 + 2 * n]})
        httpx.post(f"{process.url}/v1/messages/count_tokens", json={"model": "echo", "messages": history})
        stats = httpx.get(f"{process.url}/toolkeep/stats").json()
        lines = process.log_lines("/v1/messages")
    assert (stats["requests"], stats["prepared"], stats["forwarded"], stats["failed_open"]) == (9, 8, 1, 0)
    assert stats["statuses"] == {"200": 9} and stats["conversations"] == {"active": 1, "started": 1}
    tokens = stats["tokens"]
    assert tokens["saved"] == tokens["before"] - tokens["after"] > 0.5 * tokens["before"]
    cost = stats["cost"]
    assert 0 < cost["managed"] < cost["unmanaged"] and cost["ratio"] == round(
        cost["managed"] / cost["unmanaged"], 4
    )
    assert len(lines) == 8 and all(" conversation " in line and " cost " in line for line in lines)


def test_the_docs_give_the_command_and_its_flags_exist() -> None:
    """The proxy page's command and the flags it names are the proxy's own, and the defaults it
    states are the ones -h shows."""
    import re
    import subprocess

    page = (Path(__file__).resolve().parents[1] / "docs" / "proxy.md").read_text(encoding="utf-8")
    assert "toolkeep proxy --host 127.0.0.1 --port 8787" in page
    assert "ANTHROPIC_BASE_URL=http://127.0.0.1:8787 claude" in page
    named = re.search(r"Its flags \((.*?)\) are in the", page, re.DOTALL)
    assert named is not None
    helped = subprocess.run([*TOOLKEEP, "proxy", "-h"], capture_output=True, text=True, timeout=60).stdout
    flags = re.findall(r"--[a-z-]+", named.group(1))
    assert len(flags) >= 6
    for flag in flags:
        assert flag in helped
    assert "default: 127.0.0.1" in helped and "default: 8787" in helped


def stream_broken_by(url: str, kill: Any) -> None:
    """Start a slow stream through the proxy at ``url``, ``kill()`` once the first bytes are in:
    the client must get an error (not a hang, not a clean end)."""
    body = {"model": "slow", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with (
        pytest.raises(httpx.HTTPError),
        httpx.stream("POST", f"{url}/v1/messages", json=body, timeout=30) as response,
    ):
        chunks = response.iter_raw()
        next(chunks)
        kill()
        for _ in chunks:
            pass


def test_a_replica_killed_mid_stream_gives_an_error_and_loses_nothing(
    upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    from toolkeep.shorten import archive_key
    from toolkeep.stores import FileStore

    process = ProxyProcess("--anthropic-upstream", upstream.url, "--workspace", str(tmp_path))
    history = read_history(4)
    httpx.post(f"{process.url}/v1/messages", json={"model": "echo", "messages": history})
    stream_broken_by(process.url, process.process.kill)
    process.stop()
    store = FileStore(tmp_path / "archive")
    for message in history[2:-1:2]:  # every original the shortened forms lead back to
        original = message["content"][0]["content"]
        assert store.get(archive_key(original)) == original


def test_two_replicas_sharing_redis_give_one_replicas_bytes(
    upstream: ScriptedUpstream, tmp_path: Path, redis_url: str
) -> None:
    """Under the cache-aware policy (which decides with time too), each request to the other
    replica: the bytes one replica alone sends (over a store of its own, so that it decides
    from nothing the pair recorded), and a retry on the other replica sends them again."""

    def args(prefix: str) -> tuple[str, ...]:
        store = f"{redis_url}?prefix={prefix}"
        return ("--anthropic-upstream", upstream.url, "--workspace", str(tmp_path), "--store", store,
                "--policy", "economy")  # fmt: skip

    history = read_history(6)

    def send(replica: ProxyProcess, n: int) -> str:
        httpx.post(f"{replica.url}/v1/messages", json={"model": "echo", "messages": history[: 1 + 2 * n]})
        return str(last(upstream, "/v1/messages")["body"])

    shared = args(redis_server.fresh_prefix())
    with ProxyProcess(*shared) as a, ProxyProcess(*shared) as b:
        alternating = [send((a, b)[n % 2], n) for n in range(1, 7)]
        retried = send(a, 6)  # request 6 went to b
    with ProxyProcess(*args(redis_server.fresh_prefix())) as one:
        alone = [send(one, n) for n in range(1, 7)]
    assert alternating == alone and retried == alone[-1]
    assert "full output saved to" in alone[-1]


def test_an_upstream_that_dies_mid_stream_gives_the_client_an_error_and_one_line(tmp_path: Path) -> None:
    import re
    import subprocess
    import sys

    server = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("upstream_server.py"))], stderr=subprocess.PIPE
    )
    assert server.stderr is not None
    url = re.match(r"listening on (\S+)", server.stderr.readline().decode())
    assert url is not None
    try:
        with ProxyProcess("--anthropic-upstream", url.group(1), "--workspace", str(tmp_path)) as process:
            stream_broken_by(process.url, server.kill)
            process.wait_for_line(lambda line: "(upstream broke off: " in line)
    finally:
        server.kill()
        server.wait()
    assert "Traceback" not in process.stderr()


# -- preparing under load ----------------------------------------------------------------------


def test_at_most_preparing_threads_requests_are_prepared_at_once(tmp_path: Path) -> None:
    """Preparing holds the GIL: more threads than two only take turns with it, at a cost. Five
    requests at once: two are prepared, three wait for a thread, and all five are answered."""
    import asyncio
    import threading

    from toolkeep.proxy import Outcome, make_preparer
    from toolkeep.proxy.app import PREPARING_THREADS, Upstreams, create_app

    preparer = make_preparer(toolkeep.Config(), tmp_path)
    inside: list[str] = []
    release = threading.Event()

    def prepare(route: str, body: bytes, mcp_url: str | None = None) -> Outcome:
        inside.append(route)
        release.wait(60)
        return Outcome(body)

    preparer.prepare = prepare  # type: ignore[method-assign]
    upstream = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda request: httpx.Response(200, stream=httpx.ByteStream(b"ok")))
    )
    app = create_app(preparer, Upstreams("http://upstream", "http://upstream"), client=upstream)

    async def five() -> list[int]:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://proxy"
        ) as client:
            sent = [asyncio.create_task(client.post("/v1/messages", json={"messages": []})) for _ in range(5)]
            # until the three others wait for a thread and the two admitted have entered prepare
            # (a thread is admitted before it runs), or one too many entered, or a minute passed
            for _ in range(6_000):
                waiting = app.state.preparing.statistics().tasks_waiting
                # (a thread that holds the limiter may not have begun preparing yet: wait for both)
                settled = waiting == 5 - PREPARING_THREADS and len(inside) == PREPARING_THREADS
                if settled or len(inside) > PREPARING_THREADS:
                    break
                await asyncio.sleep(0.01)
            prepared_at_once = len(inside)
            release.set()
            answers = await asyncio.gather(*sent)
        assert prepared_at_once == PREPARING_THREADS == 2
        return [a.status_code for a in answers]

    assert asyncio.run(five()) == [200] * 5 and len(inside) == 5
