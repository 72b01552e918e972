"""``toolkeep proxy`` serves the way back at /toolkeep/mcp: the real proxy process, the scripted
upstream (tests/upstream_server.py) and the MCP SDK's streamable-HTTP client. What the proxy cut
comes back byte-exact from its own archive, the files it saved can be read, every answer is the
library's, and nothing on that path reaches the upstream."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import redis_server
from tests.mcp_client import http_client, whole_text
from tests.upstream_proxy import ProxyProcess, read_history
from tests.upstream_server import ScriptedUpstream
from toolkeep import Config
from toolkeep.recall import READ_TOOL, RECALL_TOOL, handle_tool_call, tool_specs
from toolkeep.shorten import archive_key
from toolkeep.stores import ArchiveStore, FileStore, open_store
from toolkeep.workspace import WorkspaceReader

redis_url = redis_server.redis_url  # the session-wide Redis fixture


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedUpstream]:
    server = ScriptedUpstream()
    yield server
    server.close()


def converse(proxy: ProxyProcess, upstream: ScriptedUpstream) -> tuple[list[str], list[str]]:
    """A long conversation through the proxy: the originals it was sent and the saved files the
    shortened history the upstream got names."""
    history = read_history(6)
    for n in range(1, 7):
        body = {"model": "echo", "max_tokens": 5, "messages": history[: 1 + 2 * n]}
        assert httpx.post(f"{proxy.url}/v1/messages", json=body).status_code == 200
    seen = json.loads([r for r in upstream.requests() if r["path"] == "/v1/messages"][-1]["body"])
    sent = json.dumps(seen)
    paths = sorted({part.split("]")[0] for part in sent.split("full output saved to ")[1:]})
    originals = [m["content"][0]["content"] for m in history[2:-1:2]]
    assert paths and originals
    return originals, paths


def library(name: str, arguments: Any, store: ArchiveStore, workspace: Path) -> str | None:
    reader = WorkspaceReader(workspace)
    return handle_tool_call(name, arguments, store=store, workspace=reader, config=Config.from_env())


def test_the_proxy_serves_what_it_cut(upstream: ScriptedUpstream, tmp_path: Path) -> None:
    """At /toolkeep/mcp and /toolkeep/mcp/: the library's tools; every original the proxy
    archived, byte-exact; its saved files; the library's sentences for mistakes."""
    with ProxyProcess("--anthropic-upstream", upstream.url, "--workspace", str(tmp_path)) as proxy:
        upstream.clear()
        originals, paths = converse(proxy, upstream)
        store = FileStore(tmp_path / "archive", create=False)
        for url in (f"{proxy.url}/toolkeep/mcp", f"{proxy.url}/toolkeep/mcp/"):
            with http_client(url) as client:
                listed = [(t.name, t.description, t.input_schema) for t in client.list_tools()]
                assert listed == [(s.name, s.description, s.schema) for s in tool_specs()]
                for original in originals:
                    assert whole_text(client, RECALL_TOOL, {"key": archive_key(original)}) == original
                for path in paths:
                    assert whole_text(client, READ_TOOL, {"path": path}) == Path(path).read_text()
                calls = [
                    (RECALL_TOOL, {"key": archive_key(originals[0]), "start_line": 5, "end_line": 9}),
                    (READ_TOOL, {"path": paths[0], "start_line": 2}),
                    (RECALL_TOOL, {"key": "0123456789abcdef"}),
                    (RECALL_TOOL, {"key": "nonsense", "start_line": "x"}),
                    (READ_TOOL, {"path": "/etc/passwd"}),
                    (READ_TOOL, {"path": "../../etc/passwd"}),
                ]
                for name, arguments in calls:
                    assert client.call(name, arguments) == library(name, arguments, store, tmp_path)
        paths_sent = {r["path"] for r in upstream.requests()}
    assert paths_sent == {"/v1/messages"}  # the MCP path never went upstream
    assert not [line for line in proxy.lines if "/toolkeep/mcp" in line]  # nor was it logged as forwarded


def test_a_proxy_on_redis_serves_its_archive(
    upstream: ScriptedUpstream, tmp_path: Path, redis_url: str
) -> None:
    """With --store redis://...: the originals come back from Redis, byte-exact."""
    store_url = f"{redis_url}?prefix={redis_server.fresh_prefix()}"
    args = ("--anthropic-upstream", upstream.url, "--workspace", str(tmp_path), "--store", store_url)
    with ProxyProcess(*args) as proxy:
        originals, _ = converse(proxy, upstream)
        store = open_store(store_url)
        with http_client(f"{proxy.url}/toolkeep/mcp") as client:
            for original in originals:
                key = archive_key(original)
                assert store.get(key) == original
                assert whole_text(client, RECALL_TOOL, {"key": key}) == original
    assert not (tmp_path / "archive").exists() or not any((tmp_path / "archive").iterdir())


def test_a_rebound_name_gets_nothing(upstream: ScriptedUpstream, tmp_path: Path) -> None:
    """A page that rebinds its name to the proxy's loopback address sends its own Host: refused."""
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    with ProxyProcess("--anthropic-upstream", upstream.url, "--workspace", str(tmp_path)) as proxy:
        url = f"{proxy.url}/toolkeep/mcp"
        assert httpx.post(url, json=call, headers=headers).status_code == 200
        assert httpx.post(url, json=call, headers={**headers, "host": "evil.example"}).status_code == 421
