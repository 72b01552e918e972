"""The proxy's inspector (``GET /toolkeep/``): the real proxy process, the scripted model server,
and each conversation's page opened in a real headless Chromium."""

from __future__ import annotations

import json
import re

import pytest

httpx = pytest.importorskip("httpx", reason="the proxy extra is not installed: pip install 'toolkeep[proxy]'")
pytest.importorskip("starlette", reason="the proxy extra is not installed: pip install 'toolkeep[proxy]'")
pytest.importorskip("uvicorn", reason="the proxy extra is not installed: pip install 'toolkeep[proxy]'")

from tests import test_proxy  # noqa: E402
from tests.upstream_proxy import ProxyProcess, read_history  # noqa: E402
from toolkeep.inspector.chromium import Chromium, find_chromium  # noqa: E402

# the proxy (and its scripted upstream and workspace) tests/test_proxy.py starts, one for this module
proxy, upstream, workspace = test_proxy.proxy, test_proxy.upstream, test_proxy.workspace
HEADERS = {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}


def test_the_list_and_a_conversations_page(proxy: ProxyProcess) -> None:
    listed = httpx.get(f"{proxy.url}/toolkeep/")
    assert listed.status_code == 200
    before = set(re.findall(r"href='/toolkeep/c/([0-9a-f]+)'", listed.text))
    counted = httpx.get(f"{proxy.url}/toolkeep/stats").json()
    history = read_history(8, first="inspect this conversation")
    for n in range(1, 9):
        body = {"model": "echo", "max_tokens": 5, "messages": history[: 1 + 2 * n]}
        assert httpx.post(f"{proxy.url}/v1/messages", json=body, headers=HEADERS).status_code == 200
    listing = httpx.get(f"{proxy.url}/toolkeep/").text
    (key,) = set(re.findall(r"href='/toolkeep/c/([0-9a-f]+)'", listing)) - before
    stats = httpx.get(f"{proxy.url}/toolkeep/stats").json()
    prepared = stats["prepared"] - counted["prepared"]
    tokens_before = stats["tokens"]["before"] - counted["tokens"]["before"]
    tokens_after = stats["tokens"]["after"] - counted["tokens"]["after"]
    assert httpx.get(f"{proxy.url}/toolkeep/c/{'0' * 16}").status_code == 404

    if find_chromium() is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    url = f"{proxy.url}/toolkeep/c/{key}"
    with Chromium(1280, 900) as browser:
        page = browser.open(url)
        assert page.errors == [] and page.requests == [url]
        figures = {
            k: v
            for k, v in page.evaluate(
                "[...document.querySelectorAll('[data-k]')].map(e => [e.dataset.k, JSON.parse(e.dataset.v)])"
            )
        }
        # the page's figures are the proxy's own count of what it received and sent
        assert figures["sessions.0.turns"] == prepared == 8
        assert figures["sessions.0.without.tokens"] == tokens_before
        assert figures["sessions.0.with.tokens"] == tokens_after < tokens_before
        assert page.evaluate("document.querySelectorAll('#s-0 svg polyline').length") == 4
        page.click("button[data-open='toolu_00']")
        original = page.wait_for("document.querySelector('tr.panel pre.original')?.textContent")
        assert original == history[2]["content"][0]["content"]
        seen = page.evaluate("document.querySelector('tr.panel pre.seen').textContent")
        assert seen != original and "full output saved to" in seen
        assert page.errors == []


def test_a_conversation_of_one_message_is_listed(proxy: ProxyProcess) -> None:
    """A conversation with no tool call at all is recorded and listed like any other."""
    body = {
        "model": "echo",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "just one message " * 10}],
    }
    response = httpx.post(f"{proxy.url}/v1/messages", content=json.dumps(body), headers=HEADERS)
    assert response.status_code == 200
    listing = httpx.get(f"{proxy.url}/toolkeep/").text
    assert "No conversation prepared yet" not in listing
    for key in re.findall(r"href='/toolkeep/c/([0-9a-f]+)'", listing):
        assert httpx.get(f"{proxy.url}/toolkeep/c/{key}").status_code == 200
