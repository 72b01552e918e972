"""End to end with the real clients: Claude Code (npm ``@anthropic-ai/claude-code``) and Codex
CLI (npm ``@openai/codex``), run non-interactively against the scripted model server
(tests/upstream_server.py), once directly and once through the real ``toolkeep proxy``.

The scripted model has the agent read twelve big files with its own tool (Claude Code's Read,
Codex's shell), one a turn, then open the file a shortened result names. Checked: the agent
finishes; every request the upstream sees is valid for its provider; the request after the last
big read is at most half the size of the same request without the proxy; the text toolkeep cut
comes back through the agent's own tool; every response reaches the agent byte-identical to
what the upstream sent (read off a TCP tap between the agent and the proxy).

The clients are found in ``$TOOLKEEP_AGENTS_DIR`` (``.ci/run`` installs them there), else on
``PATH``, else installed with npm into the per-user cache directory. Without npm the tests skip,
saying so; never in CI (``CI`` or ``TOOLKEEP_REQUIRE_SHARED`` set), where they fail instead.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("httpx", reason="the proxy extra is not installed: pip install 'toolkeep[proxy]'")
pytest.importorskip("uvicorn", reason="the proxy extra is not installed: pip install 'toolkeep[proxy]'")

from tests.upstream_proxy import ProxyProcess
from tests.upstream_server import SAVED, ScriptedUpstream
from tests.upstream_tap import Tap
from toolkeep.requests import validate_request

# the real clients end to end (an npm install when they are not there): the slow lane's
pytestmark = pytest.mark.slow

PACKAGES = {"claude": "@anthropic-ai/claude-code", "codex": "@openai/codex", "gemini": "@google/gemini-cli"}
FILES = 12
FINISHED = {
    "direct": f"done: read {FILES} files; no shortened result named a file",
    "proxy": f"done: read {FILES} files and the saved file",
}


def _required() -> bool:
    return bool(os.environ.get("CI") or os.environ.get("TOOLKEEP_REQUIRE_SHARED"))


def agent_binary(name: str) -> str:
    """The client's executable: from $TOOLKEEP_AGENTS_DIR, PATH, or an npm install of our own."""
    own = os.environ.get("TOOLKEEP_AGENTS_DIR")
    if own and (Path(own) / name).exists():
        return str(Path(own) / name)
    found = shutil.which(name)
    if found:
        return found
    npm = shutil.which("npm")
    if npm is None:
        if _required():
            pytest.fail(f"CI must run the {name} end-to-end test, but npm is absent")
        pytest.skip(f"npm is absent: cannot install {PACKAGES[name]} for the end-to-end test")
    from toolkeep.userdirs import user_cache_dir

    prefix = user_cache_dir() / "agents"
    binary = prefix / "node_modules" / ".bin" / name
    if not binary.exists():
        subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", PACKAGES[name]],
            check=True,
            capture_output=True,
            timeout=600,
        )
    return str(binary)


def write_big_files(root: Path) -> list[Path]:
    """The twelve big files the scripted model has the agent read, in ``root``: 800 lines each,
    with a SENTINEL line every 200 that a shortened result leaves out."""
    paths = []
    for n in range(FILES):
        lines = [
            f"SENTINEL-{n:02d} middle line {i}: the text toolkeep cut from file {n}"
            if i % 200 == 100
            else f"def function_{n}_{i}(x): return x * {i} + {n}  # filler to make the file big ...."
            for i in range(800)
        ]
        path = root / f"big_{n:02d}.txt"
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def big_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return write_big_files(tmp_path_factory.mktemp("big-files"))


def claude_env(base_url: str, home: Path) -> dict[str, str]:
    """Claude Code's environment: a home of its own, the scripted model at ``base_url``."""
    return {
        **os.environ,
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-ant-dummy-key-for-the-scripted-model",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
    }


def run_claude(binary: str, base_url: str, home: Path, project: Path) -> subprocess.CompletedProcess[str]:
    env = claude_env(base_url, home)
    prompt = "Read the files the model asks for."
    command = [binary, "-p", prompt, "--allowedTools", "Read", "--output-format", "text"]
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=300)


def run_codex(binary: str, base_url: str, home: Path, project: Path) -> subprocess.CompletedProcess[str]:
    (home / "config.toml").write_text(
        'model = "scripted-model"\nmodel_provider = "scripted"\n\n'
        "[model_providers.scripted]\n"
        f'name = "scripted"\nbase_url = "{base_url}/v1"\nenv_key = "SCRIPTED_API_KEY"\nwire_api = "responses"\n'
    )
    env = {**os.environ, "CODEX_HOME": str(home), "HOME": str(home), "SCRIPTED_API_KEY": "sk-dummy"}
    command = [binary, "exec", "--skip-git-repo-check", "-s", "danger-full-access", "Read the files."]
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=300)


RUNNERS = {
    "claude": (run_claude, "/v1/messages", "anthropic", "messages"),
    "codex": (run_codex, "/v1/responses", "openai-responses", "input"),
}


def agent_requests(upstream: ScriptedUpstream, path: str) -> list[dict[str, Any]]:
    """The requests of the main conversation: those that offer the agent's tools."""
    out = []
    for r in upstream.requests():
        if r["method"] == "POST" and r["path"] == path:
            body = json.loads(r["body"])
            if body.get("tools"):
                out.append(dict(r, json=body))
    return out


def after_last_read(requests: list[dict[str, Any]]) -> dict[str, Any]:
    last = f"call_script_{FILES - 1:02d}"
    return next(r for r in requests if last in r["body"])


def live_pages(url: str) -> dict[str, Any]:
    """What the proxy's inspector shows of the agent's run, read while the proxy still runs: the
    listed conversations, and the busiest one's page opened in a real headless Chromium (its
    errors, the requests it made, its request count, and the first shortened result opened)."""
    import re

    import httpx

    from toolkeep.inspector.chromium import Chromium, find_chromium

    listing = httpx.get(f"{url}/toolkeep/", timeout=30).text
    keys = re.findall(r"href='/toolkeep/c/([0-9a-f]+)'", listing)
    if find_chromium() is None:
        if _required():
            pytest.fail("CI must open the proxy's inspector in chromium, but chromium is absent")
        return {"keys": keys, "skipped": "chromium is not installed (apt-get install chromium)"}
    pages: list[dict[str, Any]] = []
    with Chromium(1280, 900) as browser:
        for key in keys:
            page = browser.open(f"{url}/toolkeep/c/{key}")
            turns = page.evaluate(
                "JSON.parse(document.querySelector(\"[data-k='sessions.0.turns']\")?.dataset.v ?? '0')"
            )
            opened = None
            if turns >= FILES and page.evaluate("document.querySelectorAll('button[data-open]').length"):
                page.click("button[data-open]")
                original = page.wait_for("document.querySelector('tr.panel pre.original')?.textContent")
                seen = page.evaluate("document.querySelector('tr.panel pre.seen').textContent")
                opened = {"original": original, "seen": seen}
            pages.append(
                {"key": key, "url": f"{url}/toolkeep/c/{key}", "errors": list(page.errors),
                 "requests": list(page.requests), "turns": turns, "opened": opened}
            )  # fmt: skip
    return {"keys": keys, "pages": pages}


@pytest.fixture(scope="module", params=["claude", "codex"])
def runs(
    request: pytest.FixtureRequest, big_files: list[Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    name = request.param
    binary = agent_binary(name)
    run, path, fmt, key = RUNNERS[name]
    out: dict[str, Any] = {"name": name, "path": path, "format": fmt, "key": key}
    for mode in ("direct", "proxy"):
        upstream = ScriptedUpstream(big_files)
        home = tmp_path_factory.mktemp(f"{name}-{mode}-home")
        project = tmp_path_factory.mktemp(f"{name}-{mode}-project")
        try:
            if mode == "direct":
                result = run(binary, upstream.url, home, project)
                tap = None
            else:
                workspace = tmp_path_factory.mktemp(f"{name}-workspace")
                with ProxyProcess(
                    "--anthropic-upstream",
                    upstream.url,
                    "--openai-upstream",
                    upstream.url,
                    "--workspace",
                    str(workspace),
                ) as proxy:
                    host, port = proxy.url.removeprefix("http://").rsplit(":", 1)
                    tap = Tap(host, int(port))
                    result = run(binary, tap.url, home, project)
                    tap.close()
                    out["live"] = live_pages(proxy.url)
                out["proxy_log"] = proxy.stderr()
                out["workspace"] = workspace
            out[mode] = {
                "result": result,
                "requests": upstream.requests(),
                "agent": agent_requests(upstream, path),
                "tap": tap,
            }
        finally:
            upstream.close()
    yield out


def test_the_agent_finishes_both_ways(runs: dict[str, Any]) -> None:
    for mode in ("direct", "proxy"):
        result = runs[mode]["result"]
        assert result.returncode == 0, (mode, result.stderr[-2000:])
        assert FINISHED[mode] in result.stdout, (mode, result.stdout[-2000:])
        assert len(runs[mode]["agent"]) >= FILES + 1


def test_every_request_the_upstream_sees_is_valid(runs: dict[str, Any]) -> None:
    for r in runs["proxy"]["agent"]:
        assert validate_request(r["json"], runs["format"]) == [], r["path"]


def test_the_request_after_the_last_big_read_is_at_most_half(runs: dict[str, Any]) -> None:
    direct = len(after_last_read(runs["direct"]["agent"])["body"])
    proxied = len(after_last_read(runs["proxy"]["agent"])["body"])
    print(
        f"{runs['name']}: the request after the last big read: {proxied:,} bytes, {direct:,} without the proxy"
    )
    assert proxied <= 0.5 * direct, (proxied, direct)


def test_the_cut_text_comes_back_through_the_agents_own_tool(runs: dict[str, Any]) -> None:
    requests = runs["proxy"]["agent"]
    asked = next(r for r in requests if "call_script_saved" in r["body"])
    before = requests[requests.index(asked) - 1]  # the request whose answer asked for the saved file
    path = SAVED.findall(before["body"])[0].strip()
    assert Path(path).is_relative_to(runs["workspace"])
    saved = Path(path).read_text()
    shown = before["body"]  # what the model saw of the results then (JSON-escaped text)
    cut = [line for line in saved.splitlines() if len(line) > 30 and json.dumps(line)[1:-1] not in shown]
    assert cut, "the saved file holds nothing the shortened result left out"
    answer = asked["body"][asked["body"].index("call_script_saved") :]
    back = [line for line in cut if json.dumps(line)[1:-1] in answer]
    assert len(back) >= len(cut) // 2, f"{len(back)} of {len(cut)} cut lines came back"


def test_responses_reach_the_agent_byte_identical(runs: dict[str, Any]) -> None:
    sent = Counter(
        base64.b64decode(r["response"])
        for r in runs["proxy"]["requests"]
        if r["response"] is not None and r["method"] == "POST"
    )
    received = Counter(
        body
        for method, path, _, body in runs["proxy"]["tap"].responses()
        if method == "POST" and not path.startswith("/toolkeep/")
    )
    assert sent == received
    streamed = [r for r in runs["proxy"]["agent"] if r["json"].get("stream")]
    assert len(streamed) >= FILES  # the agent's turns were streams


def test_the_proxys_inspector_shows_the_agents_run(runs: dict[str, Any]) -> None:
    """``GET /toolkeep/`` lists the agent's conversation; its page loads in Chromium with no error
    and no request but its own, counts the agent's requests, and opens a shortened result's
    original beside what the model saw."""
    live = runs["live"]
    assert live["keys"], "the proxy's inspector lists no conversation"
    if "skipped" in live:
        pytest.skip(live["skipped"])
    for page in live["pages"]:
        assert page["errors"] == [] and page["requests"] == [page["url"]], page
    main = max(live["pages"], key=lambda p: p["turns"])
    assert main["turns"] >= FILES
    assert main["opened"] is not None, "no shortened result can be opened on the page"
    assert "SENTINEL-" in main["opened"]["original"] or "function_" in main["opened"]["original"]
    assert len(main["opened"]["seen"]) < len(main["opened"]["original"])
