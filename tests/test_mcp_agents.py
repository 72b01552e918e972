"""A real agent uses the way back over MCP: Claude Code (npm), given toolkeep's MCP server with
``--mcp-config``, is asked by the scripted model (tests/upstream_server.py) to recall a marker,
and sends back the library's answer to the byte; once over stdio (``toolkeep mcp``), once over
HTTP from a proxy it also sends its requests through (``/toolkeep/mcp``)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.mcp_client import examples_archived
from tests.test_proxy_agents import agent_binary, claude_env
from tests.upstream_proxy import TOOLKEEP, ProxyProcess, read_history
from tests.upstream_server import ScriptedUpstream
from toolkeep import Config
from toolkeep.recall import RECALL_TOOL, handle_tool_call
from toolkeep.shorten import archive_key
from toolkeep.stores import FileStore

# real agents from npm, end to end: the slow lane's
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedUpstream]:
    server = ScriptedUpstream()
    yield server
    server.close()


def run_claude(
    base_url: str, home: Path, server: dict[str, Any], key: str
) -> subprocess.CompletedProcess[str]:
    config = home / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"toolkeep": server}}))
    # the first request has the server's tools (Claude Code connects to them in the background)
    env = {**claude_env(base_url, home), "MCP_CONNECTION_NONBLOCKING": "0"}
    command = [
        agent_binary("claude"), "-p", f"Please recall <<ccr:{key}>> for me.", "--output-format", "text",
        "--mcp-config", str(config), "--strict-mcp-config", "--allowedTools", "mcp__toolkeep__recall",
    ]  # fmt: skip
    return subprocess.run(command, cwd=home, env=env, capture_output=True, text=True, timeout=300)


def recalled(upstream: ScriptedUpstream) -> str:
    """The text of the result Claude Code sent for the scripted recall call."""
    for entry in reversed(upstream.requests()):
        if entry["path"] != "/v1/messages" or "call_script_recall" not in entry["body"]:
            continue
        for message in json.loads(entry["body"])["messages"]:
            for block in message["content"] if isinstance(message["content"], list) else []:
                if block.get("type") == "tool_result" and block["tool_use_id"] == "call_script_recall":
                    content = block["content"]
                    return content if isinstance(content, str) else "".join(b["text"] for b in content)
    raise AssertionError("Claude Code never sent the recall's result")


def test_claude_code_recalls_over_stdio(upstream: ScriptedUpstream, tmp_path: Path) -> None:
    """``toolkeep mcp --workspace WS`` in Claude Code's --mcp-config, on what a real
    ``toolkeep prepare`` archived: the recall's result is the library's answer."""
    workspace, keys, _ = examples_archived(tmp_path)
    command, *rest = TOOLKEEP
    server = {"command": command, "args": [*rest, "mcp", "--workspace", str(workspace)]}
    if "PYTHONPATH" in os.environ:
        server["env"] = {"PYTHONPATH": os.environ["PYTHONPATH"]}
    upstream.clear()
    home = tmp_path / "home"
    home.mkdir()
    done = run_claude(upstream.url, home, server, keys[0])
    assert done.returncode == 0 and "done: recalled the original" in done.stdout, done.stderr
    store = FileStore(workspace / "archive", create=False)
    expected = handle_tool_call(RECALL_TOOL, {"key": keys[0]}, store=store, workspace=None, config=Config())
    assert recalled(upstream) == expected


def test_claude_code_recalls_from_the_proxy_it_talks_through(
    upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    """Claude Code sends its requests through the proxy and has the proxy's /toolkeep/mcp as an
    HTTP server: what the proxy cut earlier comes back, the first page byte-exact."""
    with ProxyProcess("--anthropic-upstream", upstream.url, "--workspace", str(tmp_path)) as proxy:
        history = read_history(4)
        for n in range(1, 5):
            body = {"model": "echo", "max_tokens": 5, "messages": history[: 1 + 2 * n]}
            assert httpx.post(f"{proxy.url}/v1/messages", json=body).status_code == 200
        original = history[2]["content"][0]["content"]
        key = archive_key(original)
        upstream.clear()
        home = tmp_path / "home"
        home.mkdir()
        server = {"type": "http", "url": f"{proxy.url}/toolkeep/mcp"}
        done = run_claude(proxy.url, home, server, key)
    assert done.returncode == 0 and "done: recalled the original" in done.stdout, done.stderr
    store = FileStore(tmp_path / "archive", create=False)
    expected = handle_tool_call(RECALL_TOOL, {"key": key}, store=store, workspace=None, config=Config())
    assert expected is not None and expected.startswith(original[:1000])
    assert recalled(upstream) == expected
