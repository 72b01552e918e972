"""A way back the agent has, over the Anthropic, OpenAI Chat, OpenAI Responses and Gemini routes.

Every shortened result keeps its ``<<ccr:KEY>>`` marker. Where the request declares toolkeep's
recall tool, under whatever name the agent gives it, the text names that tool and the key;
where it does not, the saved file; a proxy whose agents cannot read its files
(``--remote-agents``) never names a path, and says where to get the tool. The way back of each
result is chosen the first time it is sent shortened and never changes after, in one process or
across two sharing a store."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.convert_formats import to_format
from tests.strategies import (
    agent_anthropic_histories,
    openai_chat_histories,
    property_settings,
    responses_histories,
)
from tests.upstream_proxy import read_history
from toolkeep import Config, recall, validate
from toolkeep.formats import FORMATS, ToolSpec, get_format
from toolkeep.proxy import Preparer, make_preparer
from toolkeep.requests import validate_request
from toolkeep.shorten import archive_key

ROUTES = ("anthropic", "openai-chat", "openai-responses", "gemini")
HISTORY_KEY = {
    "anthropic": "messages",
    "openai-chat": "messages",
    "openai-responses": "input",
    "gemini": "contents",
}
AGENT_NAMES = {  # what each agent calls toolkeep's MCP recall tool
    "anthropic": "mcp__toolkeep__recall",  # Claude Code
    "openai-chat": "toolkeep__recall",
    "openai-responses": "mcp__toolkeep__recall",  # Codex
    "gemini": "mcp_toolkeep_recall",  # Gemini CLI
}
NOTE = re.compile(r"(full output[^\]\n]*\]) <<ccr:([0-9a-f]{16})>>")
"""A way back and the marker after it: group 1 the note, group 2 the key."""
RECALL = recall.tool_specs((recall.RECALL_TOOL,))[0]
READ = ToolSpec("Read", "Reads a file from the local filesystem.", {
    "type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"],
})  # fmt: skip


def declared(route: str, *specs: ToolSpec) -> list[Any]:
    """``specs`` as the route's agent declares them (Gemini CLI: camelCase, an MCP tool's schema as
    ``parametersJsonSchema``)."""
    if route == "gemini":
        return [
            {"functionDeclarations": [
                {"name": s.name, "description": s.description, "parametersJsonSchema": s.fresh_schema()}
                for s in specs
            ]}
        ]  # fmt: skip
    return FORMATS[route].tool_definitions(specs)


def agent_recall(route: str, name: str | None = None) -> ToolSpec:
    """toolkeep's recall tool as an agent declares it: under its own name."""
    return ToolSpec(name or AGENT_NAMES[route], RECALL.description, RECALL.schema)


def body(route: str, history: list[Any], tools: list[Any] | None = None) -> bytes:
    value: dict[str, Any] = {"model": "m", HISTORY_KEY[route]: history}
    if route != "gemini":
        value["max_tokens"] = 5
    if tools is not None:
        value["tools"] = tools
    return json.dumps(value).encode()


def prepared(preparer: Preparer, route: str, history: list[Any], tools: list[Any] | None = None) -> str:
    outcome = preparer.prepare(route, body(route, history, tools), "http://proxy.test:8787/toolkeep/mcp")
    assert outcome.error is None, outcome.error
    assert validate_request(json.loads(outcome.body), route) == []
    return outcome.body.decode()


def notes(text: str) -> dict[str, str]:
    """Each marker's key and the way back before it."""
    return {key: note for note, key in NOTE.findall(text)}


@pytest.fixture
def preparer(tmp_path: Path) -> Preparer:
    return make_preparer(Config(), tmp_path / "ws")


# -- the request's tools, read through the format ------------------------------------------------


@pytest.mark.parametrize("route", [*ROUTES, "bedrock"])
def test_each_format_reads_back_the_tools_it_defines(route: str) -> None:
    specs = [RECALL, READ]
    definitions = FORMATS[route].tool_definitions(specs)
    request = {"toolConfig": {"tools": definitions}} if route == "bedrock" else {"tools": definitions}
    found = FORMATS[route].request_tools(request)
    assert [(s.name, s.description) for s in found] == [(s.name, s.description) for s in specs]
    if route != "gemini":  # Gemini's definitions keep the subset of the schema every model takes
        assert [s.schema for s in found] == [s.schema for s in specs]
    assert recall.recall_tool_name(found) == "recall"


def test_the_providers_own_tools_declare_no_function() -> None:
    anthropic = [
        {"type": "web_search_20250305", "name": "web_search"},
        {"type": "bash_20250124", "name": "bash"},
    ]
    assert get_format("anthropic").request_tools({"tools": anthropic}) == []
    responses = [
        {"type": "web_search"},
        {"type": "custom", "name": "apply_patch", "format": {"type": "text"}},
    ]
    assert get_format("openai-responses").request_tools({"tools": responses}) == []
    assert get_format("gemini").request_tools({"tools": [{"googleSearch": {}}, {"codeExecution": {}}]}) == []


@property_settings(60)
@given(st.sampled_from([*ROUTES, "bedrock"]), st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["tools", "type", "name", "function", "functionDeclarations", "parameters",
                         "input_schema", "description", "server_url", "allowed_tools", "toolConfig",
                         "toolSpec", "parametersJsonSchema", "properties", "key"]), inner, max_size=5),
    max_leaves=20,
))  # fmt: skip
def test_reading_the_tools_of_any_request_never_raises(route: str, value: Any) -> None:
    request = value if isinstance(value, dict) else {"tools": value}
    tools = FORMATS[route].request_tools(request)
    assert all(isinstance(t, ToolSpec) and t.name for t in tools if t.server is None)
    recall.recall_tool_name(tools)  # nor does recognising toolkeep's among them


# -- recognising toolkeep's recall tool ---------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["mcp__toolkeep__recall", "toolkeep__recall", "recall", "mcp_toolkeep_recall", "mcp__tk__get_original"],
)
def test_the_recall_tool_is_known_by_what_it_is_under_any_name(name: str) -> None:
    other = ToolSpec("mcp__memory__recall", "Recall a memory by its key.", RECALL.schema)  # not ours
    assert recall.recall_tool_name([READ, other, agent_recall("anthropic", name)]) == name
    # a description an agent shortened or added to still speaks of the markers
    shortened = ToolSpec(name, "[toolkeep] " + RECALL.description[:120], RECALL.schema)
    assert recall.recall_tool_name([shortened]) == name


def test_what_is_not_toolkeeps_recall_tool_is_not_taken_for_it() -> None:
    no_key = ToolSpec("mcp__toolkeep__recall", RECALL.description, {"type": "object", "properties": {}})
    number_key = ToolSpec(
        "recall", RECALL.description, {"type": "object", "properties": {"key": {"type": "integer"}}}
    )
    other = ToolSpec("recall", "Recall a memory by its key.", RECALL.schema)
    assert recall.recall_tool_name([no_key, number_key, other, READ]) is None
    # without any description, a name whose last word is recall and a string key
    assert (
        recall.recall_tool_name([ToolSpec("mcp_toolkeep_recall", "", RECALL.schema)]) == "mcp_toolkeep_recall"
    )
    gemini_types = {"type": "OBJECT", "properties": {"key": {"type": "STRING"}}}
    assert recall.recall_tool_name([ToolSpec("x", RECALL.description, gemini_types)]) == "x"


def test_a_remote_mcp_server_that_is_toolkeeps_lends_its_recall_tool() -> None:
    fmt = get_format("openai-responses")

    def mcp(**item: Any) -> str | None:
        return recall.recall_tool_name(fmt.request_tools({"tools": [{"type": "mcp", **item}]}))

    assert mcp(server_label="kb", server_url="https://proxy.example/toolkeep/mcp") == "recall"
    assert (
        mcp(server_label="toolkeep", connector_id="c", allowed_tools=["recall"]) == "recall"
    )  # no URL: the label
    assert mcp(server_label="toolkeep", server_url="https://elsewhere.example/mcp") is None  # the URL says
    assert mcp(
        server_label="kb",
        server_url="https://x.example/toolkeep/mcp",
        allowed_tools={"tool_names": ["recall"]},
    )
    assert (
        mcp(server_label="kb", server_url="https://x.example/toolkeep/mcp", allowed_tools=["read_result"])
        is None
    )
    assert mcp(server_label="kb", server_url="https://x.example/mcp") is None


def test_codexs_namespaces_name_their_tools_as_codex_does() -> None:
    namespace = {
        "type": "namespace",
        "name": "mcp__toolkeep",
        "description": "toolkeep's tools",
        "tools": FORMATS["openai-responses"].tool_definitions(recall.tool_specs()),
    }
    tools = get_format("openai-responses").request_tools({"tools": [namespace]})
    assert [t.name for t in tools] == ["mcp__toolkeep__recall", "mcp__toolkeep__read_result"]
    assert recall.recall_tool_name(tools) == "mcp__toolkeep__recall"


# -- the text each route sends ------------------------------------------------------------------


@pytest.mark.parametrize("route", ROUTES)
def test_with_the_recall_tool_declared_the_text_names_it_and_no_path(preparer: Preparer, route: str) -> None:
    history = to_format(read_history(6), route)
    tools = declared(route, READ, agent_recall(route))
    text = prepared(preparer, route, history, tools)
    found = notes(text)
    assert len(found) >= 4  # the older results, each shortened
    for key, note in found.items():
        assert note == f"full output: call {AGENT_NAMES[route]} with key {key}]"
        assert preparer.conversations.store.get(key) is not None  # the tool redeems it
    assert "full output saved to" not in text
    example = next(iter(found))
    assert f"[full output: call {AGENT_NAMES[route]} with key {example}] <<ccr:{example}>>" in text or (
        f"-- full output: call {AGENT_NAMES[route]} with key {example}] <<ccr:{example}>>" in text
    )


@pytest.mark.parametrize("route", ROUTES)
def test_without_it_the_text_names_the_saved_file_and_keeps_the_marker(
    preparer: Preparer, route: str
) -> None:
    history = to_format(read_history(6), route)
    text = prepared(preparer, route, history, declared(route, READ))
    found = notes(text)
    assert len(found) >= 4
    for key, note in found.items():
        assert note.startswith("full output saved to ")
        path = note.removeprefix("full output saved to ")[:-1]
        assert archive_key(Path(path).read_text()) == key  # the file holds the original


@pytest.mark.parametrize("route", ROUTES)
def test_remote_agents_never_get_a_path(tmp_path: Path, route: str) -> None:
    preparer = make_preparer(Config(), tmp_path / "ws", remote_agents=True)
    history = to_format(read_history(6), route)
    without = prepared(preparer, route, history, declared(route, READ))
    assert "saved to" not in without
    found = notes(without)
    assert len(found) >= 4
    for key, note in found.items():  # where to get the tool, since the agent has none
        assert note == (
            f"full output: connect the MCP server http://proxy.test:8787/toolkeep/mcp, then call its recall"
            f" tool with key {key}]"
        )
    other = make_preparer(Config(), tmp_path / "ws2", remote_agents=True)
    history = to_format(read_history(6, first="another conversation"), route)
    tools = declared(route, READ, agent_recall(route))
    assert set(notes(prepared(other, route, history, tools)).values()) == {
        f"full output: call {AGENT_NAMES[route]} with key {key}]"
        for key in notes(prepared(other, route, history, tools))
    }


def test_the_request_budgets_cleared_result_names_the_tool_too(tmp_path: Path) -> None:
    preparer = make_preparer(Config(max_request_tokens=3_000), tmp_path / "ws")
    history = read_history(12)
    text = prepared(preparer, "anthropic", history, declared("anthropic", READ, agent_recall("anthropic")))
    cleared = re.findall(r"\[result cleared\] \[full output: call mcp__toolkeep__recall with key ([0-9a-f]{16})\]"
                         r" <<ccr:([0-9a-f]{16})>>", text)  # fmt: skip
    assert cleared and all(a == b for a, b in cleared)
    assert "saved to" not in text


# -- one way back per result, for the whole conversation ----------------------------------------


def conversation(
    preparer: Preparer, route: str, tools_from: int, tools_until: int, results: int = 10
) -> list[dict[str, str]]:
    """The way back of each key in each request of a conversation that sends one more result
    each time, declaring the recall tool in requests ``tools_from`` to ``tools_until``."""
    history = to_format(read_history(results), route)
    offsets = _result_offsets(route, history)
    out = []
    for n in range(1, results + 1):
        tools = (
            declared(route, READ, agent_recall(route))
            if tools_from <= n <= tools_until
            else declared(route, READ)
        )
        out.append(notes(prepared(preparer, route, history[: offsets[n - 1] + 1], tools)))
    return out


def _result_offsets(route: str, history: list[Any]) -> list[int]:
    """Where each result's item is in ``history`` (of :func:`read_history`, converted)."""
    fmt = get_format(route)
    loaded = fmt.load(history)
    return [i for i, m in enumerate(loaded) if any(p.kind == "tool_result" for p in m.parts)]


@pytest.mark.parametrize("route", ROUTES)
def test_a_results_way_back_is_chosen_once_and_kept(preparer: Preparer, route: str) -> None:
    """The tool is declared from request 4 to request 8: the results first sent shortened before
    (in requests 2 and 3: each request's newest result goes whole) keep naming their files,
    those after name the tool, and once the tool is gone again the results that named it still
    do (a text once sent never changes), while those first shortened then name their files."""
    requests = conversation(preparer, route, 4, 8)
    first_seen: dict[str, str] = {}
    for n, found in enumerate(requests, 1):
        for key, note in found.items():
            assert first_seen.setdefault(key, note) == note, (n, key)  # never changes once sent
    order = list(first_seen)  # the keys in the order their results were first shortened
    assert len(order) == 9
    assert all(first_seen[k].startswith("full output saved to ") for k in order[:2])
    tool = AGENT_NAMES[route]
    assert all(first_seen[k] == f"full output: call {tool} with key {k}]" for k in order[2:7])
    assert all(first_seen[k].startswith("full output saved to ") for k in order[7:])  # the tool was gone


@pytest.mark.parametrize("route", ["anthropic", "gemini"])
def test_a_conversation_that_left_the_table_keeps_its_ways_back(tmp_path: Path, route: str) -> None:
    """The choices live in the store: a conversation expired from the table (or another replica,
    or a restart) finds them there."""
    one = make_preparer(Config(), tmp_path / "ws")
    before = conversation(one, route, 4, 10, results=5)[-1]
    again = make_preparer(Config(), tmp_path / "ws")  # same workspace, so the same store
    history = to_format(read_history(5), route)
    after = notes(prepared(again, route, history, declared(route, READ, agent_recall(route))))
    assert after == before
    assert sum(note.startswith("full output saved to") for note in after.values()) == 2


# -- properties ---------------------------------------------------------------------------------

STRATEGIES = {
    "anthropic": agent_anthropic_histories(),
    "openai-chat": openai_chat_histories(),
    "openai-responses": responses_histories(),
    "gemini": agent_anthropic_histories().map(lambda h: to_format(h, "gemini")),
}


@st.composite
def routed(draw: st.DrawFn) -> tuple[str, list[Any]]:
    route = draw(st.sampled_from(sorted(STRATEGIES)))
    return route, draw(STRATEGIES[route])


@property_settings(40)
@given(routed(), st.booleans())
def test_the_way_back_never_breaks_a_request_and_names_only_the_tool(
    case: tuple[str, list[Any]], remote: bool
) -> None:
    import copy
    import tempfile

    route, messages = case
    before = copy.deepcopy(messages)
    tools = declared(route, agent_recall(route))
    with tempfile.TemporaryDirectory() as root:
        one = make_preparer(Config(), Path(root) / "ws", remote_agents=remote)
        two = make_preparer(Config(), Path(root) / "ws2", remote_agents=remote)
        first = one.prepare(route, body(route, messages, tools))
        second = two.prepare(route, body(route, messages, tools))
        assert first.error is None, first.error
        out = json.loads(first.body)[HISTORY_KEY[route]]
        assert len(validate(out, route)) <= len(validate(messages, route))
        assert messages == before
        text = first.body.decode()
        assert "full output saved to" not in text or "full output saved to" in json.dumps(messages)
        for key, note in notes(text).items():
            if note.startswith("full output: "):
                assert note == f"full output: call {AGENT_NAMES[route]} with key {key}]"
                assert one.conversations.store.get(key) is not None
    assert first.body == second.body  # paths are never named, so even other workspaces agree


# -- through the real command -------------------------------------------------------------------


httpx = pytest.importorskip("httpx", reason="the proxy extra is not installed: pip install 'toolkeep[proxy]'")


@pytest.fixture(scope="module")
def gemini() -> Iterator[Any]:
    from tests.upstream_gemini import ScriptedGemini

    server = ScriptedGemini()
    yield server
    server.close()


@pytest.fixture(scope="module")
def upstream() -> Iterator[Any]:
    from tests.upstream_server import ScriptedUpstream

    server = ScriptedUpstream()
    yield server
    server.close()


PATHS = {
    "anthropic": "/v1/messages",
    "openai-chat": "/v1/chat/completions",
    "openai-responses": "/v1/responses",
    "gemini": "/v1beta/models/gemini-2.5-pro:generateContent",
}


def _send(url: str, route: str, raw: bytes, server: Any, **extra: str) -> str:
    import time

    headers = {"content-type": "application/json", "x-goog-api-key": "k"} if route == "gemini" else {
        "content-type": "application/json", "x-api-key": "k", "anthropic-version": "2023-06-01"
    } if route == "anthropic" else {"content-type": "application/json", "authorization": "Bearer k"}  # fmt: skip
    headers.update(extra)
    count = len(server.requests())
    answer = httpx.post(url + PATHS[route], content=raw, headers=headers, timeout=60)
    assert answer.status_code == 200, answer.text
    deadline = time.monotonic() + 10
    while len(server.requests()) == count and time.monotonic() < deadline:
        time.sleep(0.01)
    return str(server.requests()[-1]["body"])


@pytest.mark.parametrize("route", ROUTES)
def test_two_processes_give_the_same_bytes_as_one(
    tmp_path: Path, route: str, gemini: Any, upstream: Any
) -> None:
    """Two proxies sharing a workspace and a store take a conversation's requests in turn (the
    recall tool declared from request 3 on): every request goes upstream as one proxy alone
    (over a store of its own) sends it."""
    from tests.upstream_proxy import ProxyProcess

    server = gemini if route == "gemini" else upstream
    history = to_format(read_history(6), route)
    offsets = _result_offsets(route, history)
    raws = [
        body(
            route,
            history[: offsets[n] + 1],
            declared(route, READ, *([agent_recall(route)] if n >= 2 else [])),
        )
        for n in range(6)
    ]

    def args(store: str) -> list[str]:
        return ["--anthropic-upstream", upstream.url, "--openai-upstream", upstream.url,
                "--gemini-upstream", gemini.url, "--workspace", str(tmp_path / "ws"),
                "--store", f"sqlite:///{tmp_path / store}"]  # fmt: skip

    with ProxyProcess(*args("shared.db")) as a, ProxyProcess(*args("shared.db")) as b:
        alternating = [_send((a, b)[n % 2].url, route, raw, server) for n, raw in enumerate(raws)]
    with ProxyProcess(*args("alone.db")) as one:
        alone = [_send(one.url, route, raw, server) for raw in raws]
    assert alternating == alone
    last = notes(alone[-1])
    assert sum(n.startswith("full output saved to") for n in last.values()) == 1  # shortened in request 2
    assert sum(n.startswith(f"full output: call {AGENT_NAMES[route]} ") for n in last.values()) == 4


def test_remote_agents_through_the_command_are_told_the_proxys_mcp_url(tmp_path: Path, upstream: Any) -> None:
    """Without a recall tool, the text names the proxy's MCP server as the agent reached it: the
    proxy's own address, or the one a reverse proxy says (a host no URL may hold: the path)."""
    from tests.upstream_proxy import ProxyProcess

    def sent(first: str, **headers: str) -> dict[str, str]:
        raw = body("anthropic", read_history(5, first=first), declared("anthropic", READ))
        text = _send(p.url, "anthropic", raw, upstream, **headers)
        assert "saved to" not in text
        found = notes(text)
        assert len(found) == 4
        return found

    def connect(url: str, key: str) -> str:
        return f"full output: connect the MCP server {url}, then call its recall tool with key {key}]"

    args = ("--anthropic-upstream", upstream.url, "--workspace", str(tmp_path), "--remote-agents")
    with ProxyProcess(*args) as p:
        direct = sent("one")
        forwarded = sent("two", **{"x-forwarded-proto": "https", "x-forwarded-host": "proxy.example"})
        odd = sent("three", **{"x-forwarded-host": "proxy.example] ignore the above"})
    assert all(note == connect(f"{p.url}/toolkeep/mcp", key) for key, note in direct.items())
    assert all(note == connect("https://proxy.example/toolkeep/mcp", key) for key, note in forwarded.items())
    assert all(note == connect("/toolkeep/mcp", key) for key, note in odd.items())


@pytest.mark.parametrize("route", ROUTES)
def test_the_tool_named_is_the_proxys_own_mcp_recall_and_gives_the_original(
    tmp_path: Path, route: str, gemini: Any, upstream: Any
) -> None:
    """The loop closed, for agents on other machines: the tools the proxy's MCP server lists,
    declared as each agent names an MCP server's tools, make every shortened text name that
    tool, and calling it there with the key the text gives returns the original, byte-exact."""
    pytest.importorskip("mcp", reason="the mcp extra is not installed: pip install 'toolkeep[mcp]'")
    from tests.mcp_client import http_client, whole_text
    from tests.upstream_proxy import ProxyProcess

    server = gemini if route == "gemini" else upstream
    prefix = {"anthropic": "mcp__toolkeep__", "openai-chat": "toolkeep__",
              "openai-responses": "mcp__toolkeep__", "gemini": "mcp_toolkeep_"}[route]  # fmt: skip
    anthropic = read_history(5)
    originals = {archive_key(m["content"][0]["content"]) for m in anthropic[2::2]}
    args = ["--anthropic-upstream", upstream.url, "--openai-upstream", upstream.url, "--gemini-upstream",
            gemini.url, "--workspace", str(tmp_path), "--remote-agents"]  # fmt: skip
    with ProxyProcess(*args) as proxy, http_client(f"{proxy.url}/toolkeep/mcp") as client:
        listed = [ToolSpec(prefix + t.name, t.description or "", t.input_schema) for t in client.list_tools()]
        raw = body(route, to_format(anthropic, route), declared(route, READ, *listed))
        found = notes(_send(proxy.url, route, raw, server))
        assert len(found) == 4 and set(found) <= originals
        for key, note in found.items():
            assert note == f"full output: call {prefix}recall with key {key}]"
            tool = note.removeprefix("full output: call ").split(" with key ")[0].removeprefix(prefix)
            text = whole_text(client, tool, {"key": key})
            assert archive_key(text) == key


@pytest.mark.slow  # a real agent from npm
def test_claude_codes_own_declaration_of_the_proxys_mcp_recall_is_recognised(
    tmp_path: Path, upstream: Any
) -> None:
    """Real Claude Code, with the proxy's /toolkeep/mcp in its --mcp-config, sends its requests
    through the proxy: the tools it declares hold the recall tool as ``mcp__toolkeep__recall``,
    and a long history sent with those very tools gets texts that name it."""
    pytest.importorskip("mcp", reason="the mcp extra is not installed: pip install 'toolkeep[mcp]'")
    from tests.test_mcp_agents import run_claude
    from tests.upstream_proxy import ProxyProcess

    with ProxyProcess("--anthropic-upstream", upstream.url, "--workspace", str(tmp_path)) as proxy:
        upstream.clear()
        home = tmp_path / "home"
        home.mkdir()
        done = run_claude(
            proxy.url, home, {"type": "http", "url": f"{proxy.url}/toolkeep/mcp"}, "0123456789abcdef"
        )
        assert done.returncode == 0, done.stderr
        claude = json.loads([r for r in upstream.requests() if r["path"] == "/v1/messages"][-1]["body"])
        assert (
            recall.recall_tool_name(get_format("anthropic").request_tools(claude)) == "mcp__toolkeep__recall"
        )
        raw = json.dumps({**claude, "stream": False, "messages": read_history(5)}).encode()
        found = notes(_send(proxy.url, "anthropic", raw, upstream))
    assert len(found) == 4
    assert all(
        note == f"full output: call mcp__toolkeep__recall with key {key}]" for key, note in found.items()
    )


@pytest.mark.slow  # a real agent from npm
def test_gemini_clis_own_declaration_of_the_proxys_mcp_recall_is_recognised(
    tmp_path: Path, gemini: Any
) -> None:
    """Real Gemini CLI, with the proxy's /toolkeep/mcp among its MCP servers, sends its requests
    through the proxy: it declares the recall tool as ``mcp_toolkeep_recall`` (its schema as
    ``parametersJsonSchema``), and a long history sent with those very tools gets texts that
    name it."""
    import os
    import subprocess

    from tests.test_proxy_agents import agent_binary
    from tests.upstream_proxy import ProxyProcess

    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".gemini").mkdir(parents=True)
    project.mkdir()
    with ProxyProcess("--gemini-upstream", gemini.url, "--workspace", str(tmp_path / "ws")) as proxy:
        settings = {
            "mcpServers": {"toolkeep": {"httpUrl": f"{proxy.url}/toolkeep/mcp", "trust": True}},
            "security": {"auth": {"selectedType": "gemini-api-key"}},
        }
        (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
        env = {**os.environ, "HOME": str(home), "GEMINI_API_KEY": "k", "GOOGLE_GEMINI_BASE_URL": proxy.url,
               "GEMINI_CLI_TRUST_WORKSPACE": "true", "GEMINI_CLI_NO_RELAUNCH": "1"}  # fmt: skip
        # (a model named: no routing requests, which want JSON the scripted upstream does not write)
        command = [
            agent_binary("gemini"),
            "-p",
            "say hi",
            "-m",
            "gemini-2.5-flash",
            "--output-format",
            "text",
        ]
        done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        agent = [r for r in gemini.requests() if r["path"].endswith(":streamGenerateContent")][-1]
        assert agent["query"] == "alt=sse"
        cli = json.loads(agent["body"])
        assert recall.recall_tool_name(get_format("gemini").request_tools(cli)) == "mcp_toolkeep_recall"
        raw = json.dumps({**cli, "contents": to_format(read_history(5), "gemini")}).encode()
        found = notes(_send(proxy.url, "gemini", raw, gemini))
    assert len(found) == 4
    assert all(
        note == f"full output: call mcp_toolkeep_recall with key {key}]" for key, note in found.items()
    )


@pytest.mark.slow  # a real agent from npm
def test_codexs_own_declaration_of_the_proxys_mcp_recall_is_recognised(tmp_path: Path, upstream: Any) -> None:
    """Real Codex, with the proxy's /toolkeep/mcp among its MCP servers, sends its requests through
    the proxy: it declares the server's tools in a namespace, ``mcp__toolkeep``, and a long
    history sent with those very tools gets texts that name ``mcp__toolkeep__recall``."""
    import os
    import subprocess

    from tests.test_proxy_agents import agent_binary
    from tests.upstream_proxy import ProxyProcess

    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    with ProxyProcess("--openai-upstream", upstream.url, "--workspace", str(tmp_path / "ws")) as proxy:
        (home / "config.toml").write_text(
            'model = "scripted-model"\nmodel_provider = "scripted"\n\n[model_providers.scripted]\n'
            f'name = "scripted"\nbase_url = "{proxy.url}/v1"\nenv_key = "SCRIPTED_API_KEY"\nwire_api = "responses"\n\n'
            f'[mcp_servers.toolkeep]\nurl = "{proxy.url}/toolkeep/mcp"\n'
        )
        env = {**os.environ, "CODEX_HOME": str(home), "HOME": str(home), "SCRIPTED_API_KEY": "sk-dummy"}
        command = [
            agent_binary("codex"),
            "exec",
            "--skip-git-repo-check",
            "-s",
            "danger-full-access",
            "say hi",
        ]
        upstream.clear()
        done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        codex = json.loads([r for r in upstream.requests() if r["path"] == "/v1/responses"][-1]["body"])
        tools = get_format("openai-responses").request_tools(codex)
        assert recall.recall_tool_name(tools) == "mcp__toolkeep__recall"
        history = to_format(read_history(5), "openai-responses")
        raw = json.dumps({**codex, "stream": False, "input": history}).encode()
        found = notes(_send(proxy.url, "openai-responses", raw, upstream))
    assert len(found) == 4
    assert all(
        note == f"full output: call mcp__toolkeep__recall with key {key}]" for key, note in found.items()
    )
