"""End to end: ``toolkeep wrap AGENT`` with the real Claude Code, Codex CLI and Gemini CLI, each
started as a user would (the agent on ``PATH``, its upstream in the user's own setup, no
permission flag for Claude Code), against the scripted model server (tests/upstream_server.py).

The scripted model has the agent read twelve big files with its own tool, then reads the name of
a recall tool and a ``<<ccr:KEY>>`` key out of a shortened result and calls that tool: toolkeep's
MCP server, which wrap registered for the run and the proxy serves at ``/toolkeep/mcp``. Checked:
the agent finishes; every request the upstream sees is valid for its provider; the recall answer
holds text the shortened results had cut; the private proxy is gone afterwards (port closed, no
process left); the user's configuration files are byte for byte what they were. Also: a missing
agent, the agent's exit code, SIGTERM and SIGINT to wrap, and Claude Code attached with
``--proxy URL`` to a shared proxy whose files it cannot see (the proxy runs in a mount namespace
of its own, its workspace on a tmpfs there: the agent's process sees an empty directory).

The clients come from ``$TOOLKEEP_AGENTS_DIR``, ``PATH`` or an npm install of our own (see
tests/test_proxy_agents.py); without npm the tests skip, in CI they fail.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("httpx", reason="the proxy extra is not installed: pip install 'toolkeep[proxy]'")
pytest.importorskip("uvicorn", reason="the proxy extra is not installed: pip install 'toolkeep[proxy]'")

from tests.test_proxy_agents import FILES, agent_binary, write_big_files
from tests.upstream_proxy import TOOLKEEP, ProxyProcess
from tests.upstream_server import ScriptedUpstream, _tool_names
from tests.upstream_tap import Tap, _head
from toolkeep.requests import validate_request

# real agents from npm, end to end: the slow lane's
pytestmark = pytest.mark.slow

FINISHED = f"done: read {FILES} files and recalled the cut text"
SENTINELS = {
    f"SENTINEL-{n:02d} middle line {i}: the text toolkeep cut from file {n}"
    for n in range(FILES)
    for i in range(100, 800, 200)
}
LISTENING = re.compile(r"^listening on (http://\S+)$", re.MULTILINE)

# (model path, format, where the recall's answer is, the agent's arguments after --)
AGENTS: dict[str, dict[str, Any]] = {
    "claude": {
        "path": "/v1/messages",
        "format": "anthropic",
        "args": ["-p", "Read the files the model asks for."],
    },
    "codex": {
        "path": "/v1/responses",
        "format": "openai-responses",
        "args": ["exec", "--skip-git-repo-check", "-s", "danger-full-access", "Read the files."],
    },
    "gemini": {"path": ":streamGenerateContent", "format": "gemini", "args": ["-p", "Read the files."]},
}


def make_files(project: Path) -> list[Path]:
    """The twelve big files, inside the project (where Claude Code reads without asking)."""
    root = project / "big"
    root.mkdir()
    return write_big_files(root)


USER_SERVER = {"command": sys.executable, "args": [str(Path(__file__).with_name("user_mcp_server.py"))]}
"""The user's own MCP server (stdio), registered in their own configuration."""


def user_setup(name: str, home: Path, upstream: str) -> tuple[dict[str, str], list[Path]]:
    """The user's own environment and configuration files for ``name``, pointed at ``upstream``
    as a user of a gateway would, with an MCP server of their own; the files wrap must leave as
    they are."""
    env = {"HOME": str(home), "PATH": f"{Path(agent_binary(name)).parent}{os.pathsep}{os.environ['PATH']}"}
    if name == "claude":
        (home / ".claude").mkdir()
        # user-scoped MCP servers live in ~/.claude.json, which Claude Code rewrites itself
        # (alwaysLoad: Claude Code waits for it: a Python MCP server takes seconds to start here)
        server = dict(USER_SERVER, alwaysLoad=True)
        (home / ".claude.json").write_text(json.dumps({"mcpServers": {"usertools": server}}))
        settings = home / ".claude" / "settings.json"
        settings.write_text(json.dumps({"permissions": {"deny": ["WebFetch"]}, "env": {"USER_OWN": "1"}}))
        env.update(
            ANTHROPIC_BASE_URL=upstream,
            ANTHROPIC_API_KEY="sk-ant-dummy-key-for-the-scripted-model",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
        )
        return env, [settings]
    if name == "codex":
        (home / ".codex").mkdir()
        config = home / ".codex" / "config.toml"
        config.write_text(
            # Codex cuts a command's output over 10,000 tokens itself, SENTINEL lines and all: the
            # user lets it send them whole, for toolkeep to shorten and give back
            'model = "scripted-model"\nmodel_provider = "scripted"\ntool_output_token_limit = 40000\n\n'
            "[model_providers.scripted]\n"
            f'name = "scripted"\nbase_url = "{upstream}/v1"\nenv_key = "SCRIPTED_API_KEY"\nwire_api = "responses"\n'
            f"\n[mcp_servers.usertools]\ncommand = {json.dumps(USER_SERVER['command'])}\n"
            f"args = {json.dumps(USER_SERVER['args'])}\nrequired = true\n"  # (Codex waits for it)
        )
        env.update(SCRIPTED_API_KEY="sk-dummy")
        return env, [config]
    (home / ".gemini").mkdir()
    settings = home / ".gemini" / "settings.json"
    # (trust: headless Gemini CLI offers the model no tool that would need asking)
    server = dict(USER_SERVER, trust=True)
    user = {"security": {"auth": {"selectedType": "gemini-api-key"}}, "mcpServers": {"usertools": server}}
    settings.write_text(json.dumps(user))
    env.update(
        GEMINI_API_KEY="dummy-gemini-key", GEMINI_CLI_TRUST_WORKSPACE="true", GOOGLE_GEMINI_BASE_URL=upstream
    )
    return env, [settings]


def digests(paths: list[Path]) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def wrap(
    name: str, options: list[str], args: list[str], env: dict[str, str], cwd: Path, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    command = [*TOOLKEEP, "wrap", name, *options, "--", *args]
    return subprocess.run(
        command, cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout
    )


def processes_naming(text: str) -> list[int]:
    """The processes whose command line holds ``text``."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    out.append(int(entry.name))
            except OSError:
                continue
    return out


def port_closed(url: str) -> bool:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
    except OSError:
        return True
    return False


def sent_headers(tap: Tap) -> list[tuple[str, str | None]]:
    """(path, X-Toolkeep-Token) of every request the agent sent through ``tap``."""
    out = []
    for exchange in tap.exchanges:
        data, pos = bytes(exchange.sent), 0
        while pos < len(data):
            first, headers, pos = _head(data, pos)
            pos += int(headers.get("content-length", "0"))
            out.append((first.split(" ")[1].split("?")[0], headers.get("x-toolkeep-token")))
    return out


def model_requests(upstream: ScriptedUpstream, path: str) -> list[dict[str, Any]]:
    """The requests of the main conversation: POSTs to the model that offer the agent's tools."""
    out = []
    for r in upstream.requests():
        if r["method"] == "POST" and r["path"].endswith(path):
            body = json.loads(r["body"])
            if body.get("tools"):
                out.append(dict(r, json=body))
    return out


def recalled(requests: list[dict[str, Any]]) -> tuple[set[str], set[str]]:
    """(the SENTINEL lines of the big files that the model had not seen when it called recall,
    those of them that the recall's answer holds)."""
    answer = next(r for r in requests if "call_script_recall" in r["body"])
    before = requests[requests.index(answer) - 1]
    cut = {line for line in SENTINELS if line not in before["body"]}
    back = answer["body"][answer["body"].index("call_script_recall") :]
    return cut, {line for line in cut if line in back}


@pytest.fixture(scope="module", params=sorted(AGENTS))
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    name = request.param
    spec = AGENTS[name]
    project = tmp_path_factory.mktemp(f"{name}-project")
    home = tmp_path_factory.mktemp(f"{name}-home")
    workspace = tmp_path_factory.mktemp(f"{name}-workspace")
    log = tmp_path_factory.mktemp(f"{name}-log") / "proxy.log"
    upstream = ScriptedUpstream(make_files(project))
    try:
        env, configs = user_setup(name, home, upstream.url)
        before = digests(configs)
        options = ["--workspace", str(workspace), "--proxy-log", str(log)]
        result = wrap(name, options, spec["args"], env, project)
        yield {
            "name": name,
            "result": result,
            "requests": model_requests(upstream, spec["path"]),
            "format": spec["format"],
            "configs": (before, digests(configs)),
            "log": log.read_text() if log.exists() else "",
            "workspace": workspace,
        }
    finally:
        upstream.close()


def test_the_agent_finishes_after_recalling(run: dict[str, Any]) -> None:
    result = run["result"]
    assert result.returncode == 0, (result.stderr[-3000:], run["log"][-3000:])
    assert FINISHED in result.stdout, (result.stdout[-2000:], result.stderr[-2000:])
    assert len(run["requests"]) >= FILES + 2


def test_every_request_the_upstream_sees_is_valid(run: dict[str, Any]) -> None:
    assert run["requests"]
    for r in run["requests"]:
        assert validate_request(r["json"], run["format"]) == [], r["path"]


def test_results_were_shortened_and_the_cut_text_came_back_over_mcp(run: dict[str, Any]) -> None:
    assert "<<ccr:" in json.dumps([r["json"] for r in run["requests"]])
    cut, back = recalled(run["requests"])
    assert cut, "the shortened results cut no SENTINEL line"
    assert back, "the recall's answer holds none of the SENTINEL lines the shortened results had cut"


def test_the_users_own_mcp_server_is_there_beside_toolkeeps(run: dict[str, Any]) -> None:
    names = _tool_names(run["requests"][-1]["json"].get("tools"))
    assert [n for n in names if "usertools" in n and "user_echo" in n], names
    assert [n for n in names if "toolkeep" in n and "recall" in n], names


def test_the_private_proxy_is_gone_afterwards(run: dict[str, Any]) -> None:
    url = LISTENING.search(run["log"])
    assert url is not None, run["log"][:2000]
    assert port_closed(url.group(1))
    assert processes_naming(str(run["workspace"])) == []


def test_the_users_configuration_is_untouched(run: dict[str, Any]) -> None:
    before, after = run["configs"]
    assert before == after


# -- wrap itself ------------------------------------------------------------------------------


def test_a_missing_agent_is_one_line_and_exit_2(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    result = wrap("claude", [], ["-p", "hi"], {"PATH": str(empty)}, tmp_path, timeout=60)
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and "claude" in result.stderr, result.stderr
    result = wrap("codex", ["--agent-bin", str(tmp_path / "nope")], [], {}, tmp_path, timeout=60)
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and "--agent-bin" in result.stderr, result.stderr


def test_an_unknown_agent_is_exit_2(tmp_path: Path) -> None:
    result = wrap("aider", [], [], {}, tmp_path, timeout=60)
    assert result.returncode == 2
    assert "aider" in result.stderr


def test_wraps_own_usage_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    """Proxy options beside ``--proxy``, and agent arguments before ``--`` (which the private
    proxy refuses), are told apart from the agent's own failures."""
    env = {
        "HOME": str(tmp_path),
        "PATH": f"{Path(agent_binary('claude')).parent}{os.pathsep}{os.environ['PATH']}",
    }
    result = wrap(
        "claude", ["--proxy", "http://127.0.0.1:9", "--policy", "spec"], [], env, tmp_path, timeout=60
    )
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    command = [*TOOLKEEP, "wrap", "claude", "-p", "hi"]  # no --: -p goes to the proxy
    result = subprocess.run(
        command, cwd=tmp_path, env={**os.environ, **env}, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert "after --" in result.stderr


def test_the_agents_exit_code_comes_through(tmp_path: Path) -> None:
    binary = agent_binary("claude")
    own = subprocess.run([binary, "--no-such-flag"], capture_output=True, text=True, timeout=120)
    assert own.returncode not in (0, 2)  # so that passing it through is told apart from wrap's own
    log = tmp_path / "proxy.log"
    env = {"HOME": str(tmp_path), "PATH": f"{Path(binary).parent}{os.pathsep}{os.environ['PATH']}"}
    result = wrap("claude", ["--proxy-log", str(log)], ["--no-such-flag"], env, tmp_path, timeout=120)
    assert result.returncode == own.returncode, result.stderr
    url = LISTENING.search(log.read_text())
    assert url is not None and port_closed(url.group(1))


def wrap_in_a_slow_answer(
    tmp_path: Path, upstream: ScriptedUpstream, workspace: Path, log: Path
) -> subprocess.Popen[bytes]:
    """``toolkeep wrap claude`` in a process group of its own, once the scripted model has begun
    its slow (8 s) answer. No terminal: wrap passes a SIGINT on (a terminal's reaches the agent
    itself)."""
    env, _ = user_setup("claude", tmp_path, upstream.url)
    command = [*TOOLKEEP, "wrap", "claude", "--workspace", str(workspace), "--proxy-log", str(log), "--"]
    process = subprocess.Popen(
        [*command, "-p", "hello", "--model", "slow"],
        cwd=tmp_path,
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while not any(r["path"] == "/v1/messages" and '"slow"' in r["body"] for r in upstream.requests()):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    return process


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_wrap_ends_the_agent_and_the_proxy(sig: int, tmp_path: Path) -> None:
    upstream = ScriptedUpstream()
    try:
        workspace, log = tmp_path / "workspace", tmp_path / "proxy.log"
        process = wrap_in_a_slow_answer(tmp_path, upstream, workspace, log)
        process.send_signal(sig)
        code = process.wait(60)
        if sig == signal.SIGTERM:
            assert code == 128 + signal.SIGTERM  # Claude Code's own code for it, passed through
        # the agent stopped mid-answer: the stream to it was cut (a stream the scripted model
        # writes for 8 s; the upstream sees the cut at its next write)
        deadline = time.monotonic() + 30
        while not any(r["disconnected"] for r in upstream.requests()):
            assert time.monotonic() < deadline, "the stream to the agent was not cut"
            time.sleep(0.05)
        url = LISTENING.search(log.read_text())
        assert url is not None and port_closed(url.group(1))
        assert processes_naming(str(workspace)) == []
    finally:
        upstream.close()


@pytest.mark.skipif(
    not os.path.exists("/proc/self"), reason="Linux: the proxy dies with wrap by PR_SET_PDEATHSIG"
)
def test_the_private_proxy_dies_with_a_killed_wrap(tmp_path: Path) -> None:
    """SIGKILL leaves wrap no time to stop the proxy: the kernel stops it."""
    upstream = ScriptedUpstream()
    try:
        workspace, log = tmp_path / "workspace", tmp_path / "proxy.log"
        process = wrap_in_a_slow_answer(tmp_path, upstream, workspace, log)
        process.kill()
        process.wait(60)
        url = LISTENING.search(log.read_text())
        assert url is not None
        deadline = time.monotonic() + 60
        while processes_naming(str(workspace)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert processes_naming(str(workspace)) == []
        assert port_closed(url.group(1))
    finally:
        with contextlib.suppress(ProcessLookupError):  # the agent, whom nobody stopped (its group is ours)
            os.killpg(process.pid, signal.SIGKILL)
        upstream.close()


@pytest.mark.parametrize("name", ["codex", "gemini"])
def test_the_client_token_reaches_a_shared_proxy(name: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """``--proxy URL --client-token T``: every request to the model and to the MCP server carries
    ``X-Toolkeep-Token: T`` (Claude Code's: in the last test)."""
    project = tmp_path_factory.mktemp(f"{name}-token-project")
    home = tmp_path_factory.mktemp(f"{name}-token-home")
    upstream = ScriptedUpstream(make_files(project))
    try:
        env, _ = user_setup(name, home, upstream.url)
        proxy_args = ["--openai-upstream", upstream.url, "--gemini-upstream", upstream.url]
        with ProxyProcess(*proxy_args, "--client-token", "tok-2718") as proxy:  # (required)
            host, port = proxy.url.removeprefix("http://").rsplit(":", 1)
            tap = Tap(host, int(port))
            options = ["--proxy", tap.url, "--client-token", "tok-2718"]
            result = wrap(name, options, AGENTS[name]["args"], env, project)
            tap.close()
        assert result.returncode == 0, result.stderr[-3000:]
        assert FINISHED in result.stdout, result.stdout[-2000:]
        sent = sent_headers(tap)
        model = "/v1/responses" if name == "codex" else "/v1beta/models/"
        assert any(p.startswith(model) for p, _ in sent) and "/toolkeep/mcp" in {p for p, _ in sent}
        assert [p for p, token in sent if p.startswith((model, "/toolkeep/")) and token != "tok-2718"] == []
        assert "tok-2718" not in json.dumps(upstream.requests())  # the proxy keeps it
    finally:
        upstream.close()


# -- a shared proxy whose files the agent cannot see ------------------------------------------


def test_claude_attached_to_a_proxy_it_cannot_see_into_recalls_over_mcp(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The proxy runs in a mount namespace of its own with a tmpfs over its workspace's
    directory: what it saves there, the agent (outside) cannot open. ``--remote-agents`` tells
    it so, and the shortened texts name only the recall tool. The client token reaches the proxy
    on every request, the model's and the MCP server's."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs unshare and root to give the proxy a mount namespace of its own")
    project = tmp_path_factory.mktemp("hidden-project")
    home = tmp_path_factory.mktemp("hidden-home")
    hidden = tmp_path_factory.mktemp("hidden")
    upstream = ScriptedUpstream(make_files(project))
    inner = " ".join(
        [
            f"mount -t tmpfs toolkeep-hidden {hidden} &&",
            "exec",
            *TOOLKEEP,
            "proxy --port 0 --remote-agents --client-token tok-3141",
            f"--workspace {hidden}/workspace --anthropic-upstream {upstream.url}",
        ]
    )
    proxy = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", inner],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proxy.stderr is not None
        line = proxy.stderr.readline()
        match = LISTENING.match(line.strip())
        assert match, line + proxy.stderr.read() if proxy.poll() is not None else line
        env, _ = user_setup("claude", home, upstream.url)
        host, port = match.group(1).removeprefix("http://").rsplit(":", 1)
        tap = Tap(host, int(port))  # what the agent sends the proxy, read off the wire
        options = ["--proxy", tap.url, "--client-token", "tok-3141"]
        result = wrap("claude", options, AGENTS["claude"]["args"], env, project)
        tap.close()
        assert result.returncode == 0, result.stderr[-3000:]
        sent = sent_headers(tap)
        assert {path for path, _ in sent} >= {"/v1/messages", "/toolkeep/mcp"}
        # (Claude Code's connectivity check, HEAD /, goes without the headers of API requests)
        assert [p for p, token in sent if p.startswith(("/v1/", "/toolkeep/")) and token != "tok-3141"] == []
        assert "tok-3141" not in json.dumps(upstream.requests())  # the proxy keeps it
        assert FINISHED in result.stdout, result.stdout[-2000:]
        assert list(hidden.iterdir()) == []  # what the agent's process sees of the workspace
        requests = model_requests(upstream, "/v1/messages")
        assert str(hidden) not in json.dumps([r["json"] for r in requests])  # no saved path named
        cut, back = recalled(requests)
        assert cut and back
    finally:
        proxy.send_signal(signal.SIGTERM)
        proxy.wait(60)
        upstream.close()
