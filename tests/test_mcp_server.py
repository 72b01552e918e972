"""``toolkeep mcp``: the real command as a subprocess, over stdio and streamable HTTP, called with
the MCP SDK's own client. The tools are the library's (names, descriptions, schemas), their
answers the library's to the byte (originals whole and by pages, every mistake's sentence), on
a workspace, a SQLite and a Redis store archived by a real ``toolkeep prepare`` or ``Session``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import redis_server
from tests.mcp_client import McpClient, examples_archived, http_client, stdio_client_for, whole_text
from tests.strategies import property_settings
from tests.upstream_proxy import TOOLKEEP, ProxyProcess
from toolkeep import Config, Session
from toolkeep.recall import READ_TOOL, RECALL_TOOL, handle_tool_call, tool_specs
from toolkeep.stores import ArchiveStore, FileStore, open_store
from toolkeep.workspace import WorkspaceReader, split_lines

redis_url = redis_server.redis_url  # the session-wide Redis fixture

UNKNOWN = "0123456789abcdef"


@pytest.fixture(scope="module")
def archived(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], list[str]]:
    """A workspace ``toolkeep prepare`` cut the example session into: its keys and saved files."""
    return examples_archived(tmp_path_factory.mktemp("mcp"))


@pytest.fixture(scope="module")
def stdio(archived: tuple[Path, list[str], list[str]]) -> Iterator[McpClient]:
    """A session with ``toolkeep mcp --workspace WS`` over stdio."""
    with stdio_client_for("--workspace", str(archived[0])) as client:
        yield client


def library(name: str, arguments: Any, store: ArchiveStore | None, workspace: Path | None) -> str | None:
    """The library's own answer, on the same store and workspace, with the same settings."""
    reader = WorkspaceReader(workspace) if workspace is not None else None
    return handle_tool_call(name, arguments, store=store, workspace=reader, config=Config.from_env())


def mistakes(workspace: Path) -> list[tuple[str, dict[str, Any]]]:
    """Calls a model gets wrong: unknown, malformed and missing keys, bad line numbers, paths
    outside the workspace or not there."""
    return [
        (RECALL_TOOL, {"key": UNKNOWN}),
        (RECALL_TOOL, {"key": "<<ccr:FEDCBA9876543210>>"}),
        (RECALL_TOOL, {"key": "not-a-key"}),
        (RECALL_TOOL, {"key": 5}),
        (RECALL_TOOL, {"key": None}),
        (RECALL_TOOL, {"key": ["a"]}),
        (RECALL_TOOL, {}),
        (RECALL_TOOL, {"key": UNKNOWN, "start_line": 0}),
        (RECALL_TOOL, {"key": UNKNOWN, "start_line": "three"}),
        (RECALL_TOOL, {"key": UNKNOWN, "end_line": 2.5}),
        (RECALL_TOOL, {"key": UNKNOWN, "start_char": True}),
        (RECALL_TOOL, {"key": UNKNOWN, "start_line": 10**20}),
        (READ_TOOL, {}),
        (READ_TOOL, {"path": "/etc/passwd"}),
        (READ_TOOL, {"path": "../outside.txt"}),
        (READ_TOOL, {"path": str(workspace.parent / "prepared.json")}),
        (READ_TOOL, {"path": "tool-results/missing.txt"}),
        (READ_TOOL, {"path": "archive"}),
        (READ_TOOL, {"path": 7}),
        (READ_TOOL, {"path": "tool-results/x", "start_line": -1}),
    ]


# -- over stdio ----------------------------------------------------------------------------------


def test_the_tools_are_the_librarys(stdio: McpClient) -> None:
    """Names, descriptions and argument schemas are tool_specs(), in its order."""
    listed = [(t.name, t.description, t.input_schema) for t in stdio.list_tools()]
    assert listed == [(s.name, s.description, s.schema) for s in tool_specs()]


def test_recall_gives_the_originals_back_byte_exact(
    stdio: McpClient, archived: tuple[Path, list[str], list[str]]
) -> None:
    """Every key the prepared history names: whole (all its pages put together) and by lines,
    each answer the library's."""
    workspace, keys, _ = archived
    store = FileStore(workspace / "archive", create=False)
    for key in keys:
        original = store.get(key)
        assert original is not None
        assert whole_text(stdio, RECALL_TOOL, {"key": key}) == original
        for arguments in ({"key": key}, {"key": f"<<ccr:{key}>>", "start_line": 2, "end_line": 4}):
            assert stdio.call(RECALL_TOOL, arguments) == library(RECALL_TOOL, arguments, store, workspace)
        lines = split_lines(original)
        page = stdio.call(RECALL_TOOL, {"key": key, "start_line": 2, "end_line": 4})
        assert page.rpartition("\n\n[")[0] == "".join(lines[1:4])


def test_read_result_pages_the_saved_files(
    stdio: McpClient, archived: tuple[Path, list[str], list[str]]
) -> None:
    """A saved file by the path the preview names, and relative to the workspace."""
    workspace, _, paths = archived
    for path in paths:
        saved = Path(path).read_text(encoding="utf-8")
        assert whole_text(stdio, READ_TOOL, {"path": path}) == saved
        relative = str(Path(path).relative_to(workspace))
        for arguments in ({"path": path}, {"path": relative, "start_line": 3, "end_line": 9}):
            assert stdio.call(READ_TOOL, arguments) == library(READ_TOOL, arguments, None, workspace)


def test_mistakes_get_the_librarys_sentences(
    stdio: McpClient, archived: tuple[Path, list[str], list[str]]
) -> None:
    """As tool results, not protocol errors, word for word."""
    workspace = archived[0]
    store = FileStore(workspace / "archive", create=False)
    for name, arguments in mistakes(workspace):
        answer = stdio.call(name, arguments)
        assert answer == library(name, arguments, store, workspace), (name, arguments)
        assert answer.startswith(f"[{name}: "), answer


def test_a_tool_that_is_not_ours_is_a_protocol_error(stdio: McpClient) -> None:
    """As for any server's unknown tool: the protocol's error, naming the tools there are."""
    from mcp.shared.exceptions import MCPError

    with pytest.raises(MCPError, match="recall, read_result"):
        stdio.raw("bash", {"command": "ls"})


_fields = st.sampled_from(["key", "path", "start_line", "end_line", "start_char"])
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(codec="utf-8"), max_size=30),
    st.sampled_from([UNKNOWN, "<<ccr:0123456789ABCDEF>>", "tool-results", "/etc/passwd", "1", "2.0", " 3 "]),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
_arguments = st.dictionaries(st.one_of(_fields, st.text(max_size=10)), _values, max_size=6)
"""What a model may send as a call's arguments (a JSON object: the protocol carries no other
kind; text the client can encode, as every client must before sending)."""


@property_settings(60)
@given(name=st.sampled_from([RECALL_TOOL, READ_TOOL]), arguments=_arguments, real=st.booleans())
def test_whatever_the_model_sends_the_answer_is_the_librarys(
    stdio: McpClient,
    archived: tuple[Path, list[str], list[str]],
    name: str,
    arguments: dict[str, Any],
    real: bool,
) -> None:
    """Any JSON object as arguments (with a real key or path at times): a tool result, the
    library's answer to the same arguments as they arrived."""
    workspace, keys, paths = archived
    if real:
        arguments = {**arguments, "key": keys[0], "path": paths[0]}
    arrived = json.loads(json.dumps(arguments))
    store = FileStore(workspace / "archive", create=False)
    assert stdio.call(name, arguments) == library(name, arrived, store, workspace)


# -- stores ----------------------------------------------------------------------------------------


def test_a_sqlite_store_with_an_expired_original(tmp_path: Path) -> None:
    """prepare --store sqlite:///...: recall gives the originals back; one past the store's TTL
    gets the library's 'expired' sentence."""
    db = tmp_path / "archive.db"
    workspace, keys, _ = examples_archived(tmp_path, "--store", f"sqlite:///{db}")
    url = f"sqlite:///{db}?ttl=1h"
    with open_store(url, clock=lambda: 1_000.0) as old:  # used long ago
        old.put(UNKNOWN, "an original nobody asked for in time\n")
    store = open_store(url)
    with stdio_client_for("--store", url, "--workspace", str(workspace)) as client:
        for key in keys:
            assert whole_text(client, RECALL_TOOL, {"key": key}) == store.get(key)
        expired = client.call(RECALL_TOOL, {"key": UNKNOWN})
    assert expired == library(RECALL_TOOL, {"key": UNKNOWN}, store, workspace)
    assert "expired" in expired


def test_a_redis_store_archived_by_a_session(tmp_path: Path, redis_url: str) -> None:
    """A Session's cut on Redis, recalled by a server on the same store: byte-exact, whole and
    by lines; an unknown key as the library says."""
    url = f"{redis_url}?prefix={redis_server.fresh_prefix()}"
    original = "".join(f"line {n}: ünïcode and output \t{n * 'x'}\n" for n in range(400))
    with Session(Config(), workspace=tmp_path / "ws", store=url) as session:
        capped = session.cap_result("call_1", "bash", original, cap=500)
        key = capped.split("<<ccr:")[1][:16]
    store = open_store(url)
    with stdio_client_for("--store", url) as client:
        assert whole_text(client, RECALL_TOOL, {"key": key}) == original
        page = client.call(RECALL_TOOL, {"key": key, "start_line": 10, "end_line": 12})
        assert page.rpartition("\n\n[")[0] == "".join(split_lines(original)[9:12])
        for arguments in ({"key": key, "start_line": 10, "end_line": 12}, {"key": UNKNOWN}):
            assert client.call(RECALL_TOOL, arguments) == library(RECALL_TOOL, arguments, store, None)
        assert client.call(READ_TOOL, {"path": "x"}) == library(READ_TOOL, {"path": "x"}, store, None)


# -- over HTTP ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(archived: tuple[Path, list[str], list[str]]) -> Iterator[ProxyProcess]:
    """``toolkeep mcp --transport http --port 0 --workspace WS``."""
    with ProxyProcess("--transport", "http", "--workspace", str(archived[0]), command="mcp") as process:
        yield process
        assert process.stop() == 0  # a signal stops it cleanly


def test_http_at_mcp_and_mcp_slash(served: ProxyProcess, archived: tuple[Path, list[str], list[str]]) -> None:
    """The line on stderr names the endpoint; the SDK's client gets the same tools and answers
    at /mcp and at /mcp/."""
    workspace, keys, paths = archived
    store = FileStore(workspace / "archive", create=False)
    assert served.url.startswith("http://127.0.0.1:") and served.url.endswith("/mcp")
    for url in (served.url, served.url + "/"):
        with http_client(url) as client:
            assert [t.name for t in client.list_tools()] == [RECALL_TOOL, READ_TOOL]
            assert whole_text(client, RECALL_TOOL, {"key": keys[0]}) == store.get(keys[0])
            for name, arguments in [(READ_TOOL, {"path": paths[0]}), *mistakes(workspace)]:
                assert client.call(name, arguments) == library(name, arguments, store, workspace)


def post(url: str, message: dict[str, Any], **headers: str) -> httpx.Response:
    base = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    return httpx.post(url, json=message, headers={**base, **headers})


def test_http_is_stateless_json_and_refuses_a_rebound_name(
    served: ProxyProcess, archived: tuple[Path, list[str], list[str]]
) -> None:
    """A call with no session (what a replica that never saw the client gets) is answered in
    JSON; a Host or an Origin that is not loopback, as a page that rebinds its name to
    127.0.0.1 sends, is refused."""
    workspace, keys, _ = archived
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": RECALL_TOOL, "arguments": {"key": keys[0], "end_line": 2}}}  # fmt: skip
    answer = post(served.url, call)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/json")
    assert "mcp-session-id" not in answer.headers
    store = FileStore(workspace / "archive", create=False)
    text = answer.json()["result"]["content"][0]["text"]
    assert text == library(RECALL_TOOL, {"key": keys[0], "end_line": 2}, store, workspace)
    port = served.url.split(":")[2].split("/")[0]
    for host in (f"localhost:{port}", f"127.0.0.1:{port}"):
        assert post(served.url, call, host=host).status_code == 200
    assert post(served.url, call, origin=f"http://localhost:{port}").status_code == 200
    assert post(served.url, call, host="evil.example").status_code == 421
    assert post(served.url, call, host=f"evil.example:{port}").status_code == 421
    assert post(served.url, call, origin="http://evil.example").status_code == 403


# -- the command -----------------------------------------------------------------------------------


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TOOLKEEP, "mcp", *args], capture_output=True, text=True, timeout=60, env={**os.environ, **env}
    )


def test_refusals_are_one_line_and_exit_2(tmp_path: Path, served: ProxyProcess) -> None:
    """A missing workspace, one with nothing archived, a store that is not there, a taken port,
    a transport that does not exist."""
    port = served.url.split(":")[2].split("/")[0]
    cases = [
        (["--workspace", str(tmp_path / "missing")], "does not exist"),
        (["--workspace", str(tmp_path)], "nothing was archived there"),
        (["--store", f"sqlite:///{tmp_path}/none.db"], "none.db"),
        (["--transport", "http", "--port", port, "--workspace", str(served_workspace(served))], "address"),
        (["--transport", "sse"], "'sse' is not one of"),
    ]
    for args, words in cases:
        done = run(*args)
        assert done.returncode == 2, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], (args, done.stderr)


def served_workspace(served: ProxyProcess) -> str:
    return served.process.args[served.process.args.index("--workspace") + 1]  # type: ignore[union-attr]


def test_without_the_mcp_package_it_says_what_to_install(tmp_path: Path) -> None:
    """``import toolkeep`` never needs mcp; the command without it is one line and exit 2."""
    imports = "import sys, toolkeep, toolkeep.mcp_server, toolkeep.cli; print('mcp' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", imports], capture_output=True, text=True).stdout == "False\n"
    code = (
        "import sys; sys.modules['mcp'] = None\n"
        "from toolkeep.cli import main\n"
        f"main(['mcp', '--workspace', {str(tmp_path)!r}])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2
    assert (
        done.stderr == "toolkeep: error: the MCP server needs the mcp package: pip install 'toolkeep[mcp]'\n"
    )


def test_an_original_with_lone_surrogates_is_sent_escaped(tmp_path: Path) -> None:
    """JSON-RPC over UTF-8 cannot carry a lone surrogate: each comes as its \\udXXX escape, the
    rest of the original as it is (the answer still comes, the server goes on)."""
    original = "binary output: \udcff\udc80 then text\n"
    key = "00112233445566aa"
    with FileStore(tmp_path / "archive") as store:
        store.put(key, original)
    with stdio_client_for("--workspace", str(tmp_path)) as client:
        assert client.call(RECALL_TOOL, {"key": key}) == "binary output: \\udcff\\udc80 then text\n"
        unknown = client.call(RECALL_TOOL, {"key": UNKNOWN})
    assert unknown == library(RECALL_TOOL, {"key": UNKNOWN}, FileStore(tmp_path / "archive"), tmp_path)
