"""``toolkeep proxy`` in front of the Gemini API: the real command in a subprocess, a scripted
Gemini upstream on loopback. ``generateContent`` and ``streamGenerateContent`` bodies are
prepared in the ``gemini`` format (valid for Gemini, smaller, the last turn whole, one
conversation), every other Gemini path passes through as it came, paths and query strings
exact, streams byte for byte; Gemini CLI's own truncation of a long result is just text."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

httpx = pytest.importorskip("httpx", reason="the proxy extra is not installed: pip install 'toolkeep[proxy]'")
pytest.importorskip("starlette", reason="the proxy extra is not installed: pip install 'toolkeep[proxy]'")
pytest.importorskip("uvicorn", reason="the proxy extra is not installed: pip install 'toolkeep[proxy]'")

from tests.upstream_gemini import ScriptedGemini  # noqa: E402
from tests.upstream_proxy import ProxyProcess, big_text  # noqa: E402
from tests.upstream_server import ScriptedUpstream  # noqa: E402
from toolkeep.requests import validate_request  # noqa: E402
from toolkeep.shorten import archive_key  # noqa: E402
from toolkeep.stores import open_store  # noqa: E402

KEY = "AIza-very-secret-gemini-key"
MODEL = "gemini-2.5-pro"
GENERATE = f"/v1beta/models/{MODEL}:generateContent"
STREAM = f"/v1beta/models/{MODEL}:streamGenerateContent"


@pytest.fixture(scope="module")
def gemini() -> Iterator[ScriptedGemini]:
    server = ScriptedGemini()
    yield server
    server.close()


@pytest.fixture(scope="module")
def openai() -> Iterator[ScriptedUpstream]:
    server = ScriptedUpstream()
    yield server
    server.close()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('gemini-store') / 'archive.db'}"


@pytest.fixture(scope="module")
def proxy(
    gemini: ScriptedGemini, openai: ScriptedUpstream, store: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProxyProcess]:
    workspace = tmp_path_factory.mktemp("gemini-workspace")
    args = [
        "--gemini-upstream",
        gemini.url,
        "--openai-upstream",
        openai.url,
        "--anthropic-upstream",
        openai.url,
    ]
    with ProxyProcess(*args, "--workspace", str(workspace), "--store", store) as process:
        yield process


def contents(results: int, size: int = 800, first: str = "read the files") -> list[dict[str, Any]]:
    """A Gemini CLI history: ``first``, then ``results`` read_file calls (with ids, as Gemini CLI
    sends them), each answered by ``size`` lines of output."""
    out: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": first}]}]
    for n in range(results):
        call = {"id": f"read_file-{n}", "name": "read_file", "args": {"absolute_path": f"/f{n}"}}
        response = {
            "id": f"read_file-{n}",
            "name": "read_file",
            "response": {"output": big_text(size, f"file{n}")},
        }
        out.append({"role": "model", "parts": [{"functionCall": call}]})
        out.append({"role": "user", "parts": [{"functionResponse": response}]})
    return out


def request(history: list[dict[str, Any]]) -> dict[str, Any]:
    """A ``generateContent`` body as Gemini CLI writes it."""
    return {
        "contents": history,
        "systemInstruction": {"role": "user", "parts": [{"text": "You are an interactive CLI agent."}]},
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "read_file",
                        "description": "Reads a file.",
                        "parametersJsonSchema": {
                            "type": "object",
                            "properties": {"absolute_path": {"type": "string"}},
                            "required": ["absolute_path"],
                        },
                    }
                ]
            }
        ],
        "generationConfig": {"temperature": 0, "thinkingConfig": {"includeThoughts": True}},
    }


def recorded(server: ScriptedGemini | ScriptedUpstream, path: str, timeout: float = 10.0) -> dict[str, Any]:
    """The upstream's record of its last request to ``path``, once it has written its answer
    (the scripted upstream records the answers to POSTs)."""
    deadline = time.monotonic() + timeout
    while True:
        found = [r for r in server.requests() if r["path"] == path]
        done = found and (found[-1]["response"] is not None or found[-1]["method"] != "POST")
        if done or (found and time.monotonic() > deadline):
            return found[-1]
        if not found and time.monotonic() > deadline:
            raise AssertionError(f"the upstream got no request to {path}")
        time.sleep(0.01)


def test_a_long_gemini_history_is_prepared_smaller_valid_and_one_conversation(
    proxy: ProxyProcess, gemini: ScriptedGemini, store: str
) -> None:
    history = contents(8)
    before = httpx.get(f"{proxy.url}/toolkeep/stats").json()
    for n in range(1, 9):
        body = request(history[: 1 + 2 * n])
        answer = httpx.post(f"{proxy.url}{GENERATE}", json=body, headers={"x-goog-api-key": KEY}, timeout=60)
        assert answer.status_code == 200, answer.text
        assert answer.json()["candidates"][0]["content"]["parts"][0]["text"].startswith("read ")
    entry = recorded(gemini, GENERATE)
    seen = json.loads(entry["body"])
    assert validate_request(seen) == []  # valid for Gemini: every call answered, in order
    assert len(entry["body"]) < 0.5 * len(json.dumps(body))
    assert seen["contents"][-1] == history[16]  # the newest result goes whole
    assert {k: v for k, v in seen.items() if k != "contents"} == {
        k: v for k, v in body.items() if k != "contents"
    }
    assert ["x-goog-api-key", KEY] in entry["headers"]
    # an older result: shortened, its marker kept beside the saved file, both lead to the original
    old = seen["contents"][2]["parts"][0]["functionResponse"]
    text = old["response"]["output"]
    original = history[2]["parts"][0]["functionResponse"]["response"]["output"]
    path = text.split("full output saved to ")[1].split("]")[0]
    assert f"full output saved to {path}] <<ccr:{archive_key(original)}>>" in text
    assert Path(path).read_text() == original and open_store(store).get(archive_key(original)) == original
    assert old["id"] == "read_file-0" and old["name"] == "read_file"
    after = httpx.get(f"{proxy.url}/toolkeep/stats").json()
    assert after["prepared"] - before["prepared"] == 8 and after["changed"] > before["changed"]
    assert after["conversations"]["started"] - before["conversations"]["started"] == 1
    assert after["tokens"]["saved"] > before["tokens"]["saved"]
    line = proxy.log_lines(GENERATE)[-1]
    assert " 200 conversation " in line and " tokens " in line


@pytest.mark.parametrize("query", ["alt=sse", "alt=sse&key=" + KEY, ""])
def test_a_stream_reaches_the_client_byte_for_byte_with_its_query_as_it_came(
    proxy: ProxyProcess, gemini: ScriptedGemini, query: str
) -> None:
    body = request(contents(4, first=f"stream {query or 'json'}"))
    url = f"{proxy.url}{STREAM}" + (f"?{query}" if query else "")
    with httpx.stream("POST", url, json=body, timeout=60) as answer:
        got = b"".join(answer.iter_raw())
        kind = answer.headers["content-type"]
    entry = recorded(gemini, STREAM)
    assert got == base64.b64decode(entry["response"]) and len(got) > 3_000  # as the upstream sent it
    assert entry["query"] == query  # the query string as it came, the key in it too
    assert KEY not in proxy.stderr()  # and never logged
    assert kind.startswith("text/event-stream")
    if "alt=sse" in query:
        assert got.count(b"data: ") == 30 and got.endswith(b"\r\n\r\n")
    assert validate_request(json.loads(entry["body"])) == []
    assert len(entry["body"]) < len(json.dumps(body))  # the stream's request is prepared too


def test_other_gemini_paths_pass_through_untouched(
    proxy: ProxyProcess, gemini: ScriptedGemini, openai: ScriptedUpstream
) -> None:
    history = contents(6)
    # countTokens holds a history too: counted as the client sent it, so never prepared
    raw = json.dumps({"contents": history}, indent=1).encode()
    count = httpx.post(
        f"{proxy.url}/v1beta/models/{MODEL}:countTokens?key={KEY}",
        content=raw,
        headers={"content-type": "application/json"},
    )
    assert count.status_code == 200 and count.json() == {"totalTokens": len(raw) // 4}
    entry = recorded(gemini, f"/v1beta/models/{MODEL}:countTokens")
    assert entry["body"].encode() == raw and entry["query"] == f"key={KEY}"
    # the model list and one model, with their query strings, escapes left as they came
    listed = httpx.get(f"{proxy.url}/v1beta/models?pageSize=5&key={KEY}&x=%2F%20y")
    assert listed.status_code == 200 and listed.json()["models"][0]["name"] == "models/models"
    assert recorded(gemini, "/v1beta/models")["query"] == f"pageSize=5&key={KEY}&x=%2F%20y"
    one = httpx.get(f"{proxy.url}/v1beta/models/gemini%2D2.5-flash", headers={"x-goog-api-key": KEY})
    assert one.status_code == 200
    assert recorded(gemini, "/v1beta/models/gemini%2D2.5-flash")["method"] == "GET"
    # an unknown method of a model: the upstream's own error, passed as it is
    missing = httpx.post(f"{proxy.url}/v1beta/models/{MODEL}:embedContent", json={"content": {"parts": []}})
    assert missing.status_code == 404 and missing.json()["error"]["status"] == "NOT_FOUND"
    # Gemini's header claims a path of no version for Gemini; without it the path is OpenAI's
    httpx.get(f"{proxy.url}/v1/models", headers={"x-goog-api-key": KEY})
    assert recorded(gemini, "/v1/models")["method"] == "GET"
    httpx.get(f"{proxy.url}/v1/models", headers={"authorization": "Bearer sk-openai"})
    assert recorded(openai, "/v1/models")["method"] == "GET"
    stats = httpx.get(f"{proxy.url}/toolkeep/stats").json()
    assert stats["forwarded"] >= 6


def test_a_result_gemini_cli_truncated_itself_is_just_text_with_a_way_back(
    proxy: ProxyProcess, gemini: ScriptedGemini, store: str
) -> None:
    """Gemini CLI cuts a result over 40,000 chars itself: a note naming its own saved file, the
    first fifth and the last four fifths. To toolkeep that is a long text like any other: it
    is shortened again with toolkeep's marker and saved file (the original being Gemini CLI's
    text, its note and file name included), and the history stays valid."""
    output = big_text(5_000, "shell")
    kept = (
        output[:8_000]
        + "\n\n... ["
        + f"{len(output) - 40_000:,}"
        + " characters omitted] ...\n\n"
        + output[-32_000:]
    )
    folded = (
        "Output too large. Showing first 8,000 and last 32,000 characters. For full output see: "
        "/home/u/.gemini/tmp/0f3a/tool-outputs/session-1/run_shell_command_1.txt\n" + kept
    )
    history = contents(2, first="run the build")
    history[4]["parts"][0]["functionResponse"]["response"] = {"output": folded}
    history += [
        {"role": "model", "parts": [{"text": "The build printed a lot; reading the file list."}]},
        {"role": "user", "parts": [{"text": "go on"}]},
    ]
    answer = httpx.post(f"{proxy.url}{GENERATE}?key={KEY}", json=request(history), timeout=60)
    assert answer.status_code == 200
    seen = json.loads(recorded(gemini, GENERATE)["body"])
    assert validate_request(seen) == []
    text = seen["contents"][4]["parts"][0]["functionResponse"]["response"]["output"]
    assert len(text) < len(folded) and text.startswith("Output too large. Showing first 8,000")
    path = text.split("full output saved to ")[1].split("]")[0]
    assert f"full output saved to {path}] <<ccr:{archive_key(folded)}>>" in text
    assert Path(path).read_text() == folded and open_store(store).get(archive_key(folded)) == folded
