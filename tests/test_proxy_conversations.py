"""The proxy's preparing, in process: one state per conversation (LRU, idle expiry, rewritten
histories start fresh), shortened results that name readable files and keep their markers, the
last turn sent whole, fail open; and, as properties over broken agent
histories, valid, deterministic output that never mutates its input."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolkeep
from tests.strategies import (
    agent_anthropic_histories,
    openai_chat_histories,
    property_settings,
    responses_histories,
)
from tests.upstream_proxy import read_history
from toolkeep import Config, validate
from toolkeep.pricing import CacheTimes
from toolkeep.proxy import Preparer, make_preparer
from toolkeep.proxy.conversations import Conversations
from toolkeep.proxy.files import keep_last_turn, name_ways_back
from toolkeep.proxy.prepare import _document
from toolkeep.proxy.timeline import Timeline
from toolkeep.shorten import archive_key
from toolkeep.stores import MemoryStore
from toolkeep.tokens import serialize_message
from toolkeep.workspace import Workspace

SAVED = re.compile(r"full output saved to ([^\]\n]+)\]")


def history(results: int, first: str = "read the files", size: int = 900) -> list[dict[str, Any]]:
    return read_history(results, size, first)


def body(messages: list[Any], key: str = "messages") -> bytes:
    return json.dumps({"model": "m", "max_tokens": 5, key: messages}).encode()


def sent(preparer: Preparer, messages: list[Any], route: str = "anthropic") -> dict[str, Any]:
    key = "input" if route == "openai-responses" else "messages"
    outcome = preparer.prepare(route, body(messages, key))
    assert outcome.error is None, outcome.error
    value: dict[str, Any] = json.loads(outcome.body)
    return value


@pytest.fixture
def preparer(tmp_path: Path) -> Preparer:
    return make_preparer(Config(), tmp_path / "ws")


def test_shortened_results_name_files_holding_the_original_and_keep_their_marker(preparer: Preparer) -> None:
    h = history(8)
    out = sent(preparer, h)["messages"]
    assert validate(out, "anthropic") == []
    paths = SAVED.findall(json.dumps(out))
    assert paths
    for n, message in enumerate(out[2:-1:2]):  # every older result names its original's file
        result = message["content"][0]["content"]
        original = h[2 + 2 * n]["content"][0]["content"]
        path = SAVED.findall(result)[0]
        assert Path(path).read_text() == original
        # and its marker, right after the file, which the store redeems (the proxy's recall tool)
        assert f"full output saved to {path}] <<ccr:{archive_key(original)}>>" in result
        assert preparer.conversations.store.get(archive_key(original)) == original
    assert out[-1] == h[-1]  # the last turn goes whole


def test_small_results_under_the_compaction_limit_persist_nothing(tmp_path: Path) -> None:
    preparer = make_preparer(Config(), tmp_path / "ws")
    h = history(6, size=10)  # about 600 chars each: never shortened
    outcome = preparer.prepare("anthropic", body(h))
    assert outcome.body == body(h)  # nothing changed: the very bytes
    assert list((tmp_path / "ws" / "tool-results").iterdir()) == []


def test_one_state_per_conversation_and_a_bounded_table(tmp_path: Path) -> None:
    now = [0.0]
    table = Conversations(
        Config(),
        Workspace(tmp_path / "ws"),
        MemoryStore(),
        max_conversations=3,
        idle_seconds=100,
        clock=lambda: now[0],
    )
    a = table.get("anthropic", history(1, "a"))
    assert table.get("anthropic", history(3, "a")) is a  # the same conversation, grown
    assert table.get("openai-chat", history(1, "a")) is not a  # another route is another conversation
    for first in ("b", "c"):
        table.get("anthropic", history(1, first))
    assert len(table) == 3 and table.started == 4
    assert table.get("anthropic", history(1, "a")) is not a  # the least recently used went
    now[0] = 150.0
    table.get("anthropic", history(1, "d"))
    assert len(table) == 1  # the idle ones expired


def test_a_conversation_the_table_drops_releases_its_pins(tmp_path: Path) -> None:
    """The originals a conversation's markers named stay pinned in the store while it is in the
    table; evicted, expired or at the proxy's close, its session releases them (so a capped
    store may evict them again), and the shared workspace and store stay usable."""
    now = [0.0]
    store = MemoryStore()
    table = Conversations(
        Config(), Workspace(tmp_path / "ws", keep=True), store, max_conversations=1, idle_seconds=100,
        clock=lambda: now[0],
    )  # fmt: skip
    first = table.get("anthropic", history(8, "a"))
    first.state.prepare(history(8, "a"), "anthropic")
    held = store.pinned()
    assert held  # what the shortened results name
    second = table.get("anthropic", history(8, "b"))  # the table holds one: "a" goes
    with pytest.raises(toolkeep.SessionClosedError):
        first.state.prepare(history(8, "a"), "anthropic")
    assert store.pinned() == frozenset()
    second.state.prepare(history(8, "b"), "anthropic")
    assert store.pinned()
    now[0] = 150.0
    third = table.get("anthropic", history(8, "c"))  # "b" expired
    assert store.pinned() == frozenset()
    third.state.prepare(history(8, "c"), "anthropic")
    table.close()
    assert store.pinned() == frozenset() and len(table) == 0
    assert all(store.get(key) is not None for key in held)  # released, not deleted


@pytest.mark.parametrize("rewrite", ["rewind", "compaction"])
def test_a_history_the_agent_rewrote_starts_fresh_cleanly(tmp_path: Path, rewrite: str) -> None:
    preparer = make_preparer(Config(), tmp_path / "a")
    h = history(10)
    for n in range(1, 11):
        sent(preparer, h[: 1 + 2 * n])
    if rewrite == "rewind":  # back to turn 4, then a different turn
        new = [
            *h[:9],
            {"role": "assistant", "content": "let me think again"},
            {"role": "user", "content": "go on"},
        ]
    else:  # Claude Code's compaction: a summary replaces the history
        new = [{"role": "user", "content": "This session is being continued. Summary: ..."}, *h[11:17]]
        new[1] = {"role": "assistant", "content": [{"type": "text", "text": "resuming"}, *h[11]["content"]]}
    fresh = make_preparer(Config(), tmp_path / "b")
    got, expected = sent(preparer, new), sent(fresh, new)
    assert json.dumps(got).replace(str(tmp_path / "a"), "WS") == json.dumps(expected).replace(
        str(tmp_path / "b"), "WS"
    )
    assert validate(got["messages"], "anthropic") == []


def test_preparing_failures_fail_open(preparer: Preparer) -> None:
    for raw in (b"\xff\xfe not json", b'{"messages": {"a": 1}}', b"[]", b'{"model": "m"}'):
        outcome = preparer.prepare("anthropic", raw)
        assert outcome.body == raw and outcome.error and "\n" not in outcome.error


@pytest.mark.parametrize(
    "number", ["1e400", "-1E+999", "1e309", "NaN", "Infinity", "-Infinity"], ids=lambda n: n.lower()
)
@pytest.mark.parametrize("where", ["a field", "a call's input", "the first message"])
def test_a_body_with_a_number_json_cannot_carry_goes_out_as_it_came(
    tmp_path: Path, number: str, where: str
) -> None:
    """``1e400`` is valid JSON that reads as ``inf``, and ``NaN`` / ``Infinity`` are not JSON but
    Python reads them: none can be written back as it came, so the body goes out byte for byte,
    with the reason, before any conversation's state is touched (nothing prepared, nothing
    recorded, nothing saved)."""
    preparer = make_preparer(Config(policy="economy"), tmp_path / "ws")
    h = history(6)
    raw = body(h)
    if where == "a field":
        raw = raw.replace(b'"max_tokens": 5', b'"max_tokens": 5, "temperature": ' + number.encode())
    elif where == "a call's input":
        raw = raw.replace(b'"file_path": "/f3"', b'"file_path": "/f3", "n": ' + number.encode())
    else:
        raw = raw.replace(b'"content": "read the files"', b'"content": [' + number.encode() + b"]")
    assert number.encode() in raw
    outcome = preparer.prepare("anthropic", raw)
    assert outcome.body == raw and outcome.error is not None and "\n" not in outcome.error
    assert not outcome.prepared and preparer.conversations.started == 0
    assert not (tmp_path / "ws" / "tool-results").exists() or not any(
        (tmp_path / "ws" / "tool-results").iterdir()
    )
    assert sent(preparer, h) != json.loads(raw)  # the same history without it is prepared


def test_the_way_back_goes_where_a_saved_file_stands_and_every_marker_stays() -> None:
    kept = {"role": "user", "content": "see [x] <<ccr:0123456789abcdef>>"}
    changed = {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "t",
                "content": "x <<ccr:1111111111111111>> [full output saved to /w/f.txt] <<ccr:0123456789abcdef>>"
                " <<ccr:2222222222222222>>\n[result cleared] <<ccr:3333333333333333>>",
            }
        ],
    }
    lone = {"role": "user", "content": "y <<ccr:0123456789abcdef>>"}
    asked: list[str] = []

    def way(key: str) -> str:
        asked.append(key)
        return "tool:mcp__toolkeep__recall"

    out = name_ways_back([kept, changed, lone], [kept], way)
    assert out[0] is kept and out[2] == lone  # the client's own text, and a marker after no note
    assert out[1]["content"][0]["content"] == (
        "x <<ccr:1111111111111111>> [full output: call mcp__toolkeep__recall with key 0123456789abcdef]"
        " <<ccr:0123456789abcdef>> <<ccr:2222222222222222>>\n[result cleared] [full output: call"
        " mcp__toolkeep__recall with key 3333333333333333] <<ccr:3333333333333333>>"
    )
    assert asked == ["0123456789abcdef", "3333333333333333"]  # the first marker of each: the result's own
    assert changed["content"][0]["content"].startswith("x <<ccr:1111111111111111>> [full output saved")
    # the saved file's way leaves the text as the forms wrote it, markers and all
    same = name_ways_back([changed], [], lambda key: "path")
    assert same[0] == changed and same[0] is not changed


# -- properties --------------------------------------------------------------------------------

ROUTES = {
    "anthropic": agent_anthropic_histories(),
    "openai-chat": openai_chat_histories(),
    "openai-responses": responses_histories(),
}


@st.composite
def routed(draw: st.DrawFn) -> tuple[str, list[Any]]:
    route = draw(st.sampled_from(sorted(ROUTES)))
    return route, draw(ROUTES[route])


@property_settings(40)
@given(routed())
def test_the_proxy_output_is_valid_deterministic_and_never_mutates(case: tuple[str, list[Any]]) -> None:
    import tempfile

    route, messages = case
    key = "input" if route == "openai-responses" else "messages"
    before = copy.deepcopy(messages)
    with tempfile.TemporaryDirectory() as root:
        one = make_preparer(Config(), Path(root) / "ws")
        two = make_preparer(Config(), Path(root) / "ws")
        first, second = one.prepare(route, body(messages, key)), two.prepare(route, body(messages, key))
    assert messages == before
    assert first.error is None, first.error
    assert first.body == second.body  # the same history gives the same bytes, from any replica
    out = json.loads(first.body)[key]
    assert validate(out, route) == [] or len(validate(out, route)) <= len(validate(messages, route))
    text = first.body.decode()  # every saved file's reference is followed by its marker
    assert text.count("full output saved to ") == len(
        re.findall(r"full output saved to [^\]]+\] <<ccr:", text)
    )


@pytest.mark.slow  # 40 generated agent histories through the proxy's preparing: 20 s
@property_settings(40)
@given(agent_anthropic_histories())
def test_keeping_the_last_turn_never_adds_a_violation(messages: list[Any]) -> None:
    from toolkeep import Session

    with Session(Config()) as session:
        prepared = session.prepare(messages, "anthropic").messages
    given_list = list(prepared)
    out = keep_last_turn(given_list, messages, "anthropic")
    assert len(validate(out, "anthropic")) <= len(validate(prepared, "anthropic"))
    assert out is given_list or out[-1] is messages[-1]  # unchanged, or ending in the client's own turn


def test_the_statistics_price_with_the_configured_price_list(tmp_path: Path) -> None:
    """The cost the stats give is at the price list the session decides with, not a fixed one:
    OpenAI's has no write premium, so the same requests cost less unmanaged than at Anthropic's."""
    costs = {}
    for pricing in ("anthropic-5m", "openai"):
        preparer = make_preparer(Config(pricing=pricing), tmp_path / pricing)
        costs[pricing] = sum(
            preparer.prepare("anthropic", body(history(n))).figures.cost_unmanaged for n in (2, 4, 6)
        )
    assert costs["openai"] < costs["anthropic-5m"]


def test_the_statistics_price_each_route_as_its_policy_decides(tmp_path: Path) -> None:
    """Without a configured price list, a route's requests are priced with the one its format
    suggests, as the cache-aware policy decides with it: OpenAI's bills no cache write, so a
    first request (nothing cached) costs its size there, and 1.25x its size at Anthropic's."""
    preparer = make_preparer(Config(), tmp_path / "ws")
    for route, key, write in (("anthropic", "messages", 1.25), ("openai-responses", "input", 1.0)):
        first = [{"role": "user", "content": f"hello from {route}"}]
        figures = preparer.prepare(route, body(first, key)).figures
        assert figures.cost_unmanaged == figures.tokens_before * write > 0


def test_a_string_history_is_forwarded_not_counted_as_prepared(preparer: Preparer) -> None:
    raw = json.dumps({"model": "m", "input": "hi"}).encode()
    outcome = preparer.prepare("openai-responses", raw)
    assert outcome.body == raw and not outcome.prepared
    assert outcome.error is None and outcome.conversation is None  # counted as forwarded (.observe)


def codex_history(results: int, command: str = "python run.py", lines: int = 120) -> list[dict[str, Any]]:
    """A Responses input as Codex CLI sends it: developer and user messages, then one
    ``exec_command`` call a turn (its arguments a JSON string) answered by a
    ``function_call_output`` item that carries an ``id`` of its own, as Codex's do."""
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "be brief"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "run it"}]},
    ]
    for n in range(results):
        call = f"call_{n:02d}"
        output = "Process exited with code 0\nOutput:\n" + "".join(
            f"step {n}.{i}: computed value {i * 7919 % 1000} for item {i}\n" for i in range(lines)
        )
        items += [
            {"type": "function_call", "name": "exec_command", "call_id": call,
             "arguments": json.dumps({"cmd": f"{command} {n}"})},
            {"type": "function_call_output", "id": f"fco_{n:040d}", "call_id": call, "output": output},
        ]  # fmt: skip
    return items


def test_a_codex_conversation_is_shortened_under_the_cache_aware_policy(tmp_path: Path) -> None:
    """Nothing is ever cut as it enters here (Codex cuts each output itself), so nothing is
    saved to pay for a first batch: once batches have stalled for ``lean_after`` requests, it
    is made of lean summaries whose move costs nothing, and what they save pays for the whole
    summaries of the rest. The lean summaries were once sized for an output item without
    Codex's ``id``, so each overran what is free by a few dozen chars and no batch was ever
    made."""
    preparer = make_preparer(Config(policy="economy", pricing="openai"), tmp_path / "ws")
    h = codex_history(16)
    for n in range(1, 17):
        out = sent(preparer, h[: 2 + 2 * n], "openai-responses")["input"]
    outputs = [item["output"] for item in out if item["type"] == "function_call_output"]
    original = [item["output"] for item in h if item["type"] == "function_call_output"]
    assert outputs[-1] == original[-1]  # the last turn goes whole
    shortened = [n for n, (a, b) in enumerate(zip(outputs, original, strict=True)) if a != b]
    assert len(shortened) >= 12  # of the 15 before the last turn
    assert all("full output saved to " in outputs[n] for n in shortened)
    assert validate(out, "openai-responses") == []


@pytest.mark.parametrize("lean_tail", [True, False])
def test_a_codex_run_of_reads_is_shortened_once_its_batches_stall(lean_tail: bool, tmp_path: Path) -> None:
    """Every result a ``cat``: a read is held a turn longer, so each due move would rewrite the
    younger read after it whole and no first batch is ever free. After ``min_horizon`` requests
    stalled like that, the due reads and the held ones go to one-line stubs in one batch that
    costs nothing; without the lever (``lean_tail=False``) nothing is ever shortened."""
    from toolkeep.config import Economy

    config = Config(policy="economy", pricing="openai", economy=Economy(lean_tail=lean_tail))
    preparer = make_preparer(config, tmp_path / "ws")
    h = codex_history(12, command="cat src/mod.py #", lines=250)
    for item in h:  # one file per read: ``cat src/mod_N.py``
        if item["type"] == "function_call":
            n = int(json.loads(item["arguments"])["cmd"].rsplit(" ", 1)[1])
            item["arguments"] = json.dumps({"cmd": f"cat src/mod_{n}.py"})
    for n in range(1, 13):
        out = sent(preparer, h[: 2 + 2 * n], "openai-responses")["input"]
    outputs = [item["output"] for item in out if item["type"] == "function_call_output"]
    original = [item["output"] for item in h if item["type"] == "function_call_output"]
    shortened = [n for n, (a, b) in enumerate(zip(outputs, original, strict=True)) if a != b]
    assert validate(out, "openai-responses") == []
    if not lean_tail:
        assert shortened == []
        return
    assert len(shortened) >= 8 and shortened == list(range(len(shortened)))
    assert outputs[-1] == original[-1] and outputs[-2] == original[-2]  # the newest stay whole
    assert len(json.dumps(out)) <= 0.5 * len(json.dumps(h))


class Replicas:
    """Proxies under the cache-aware policy over one workspace path and one store, reading one
    wall clock (replicas on machines whose clocks agree), sent the growing requests of one
    conversation of big reads."""

    def __init__(self, root: Path, count: int, store: MemoryStore | None = None) -> None:
        self.now = 1_000.0
        self.store = store if store is not None else MemoryStore()
        config = Config(policy="economy")
        self.proxies = [
            Preparer(Conversations(config, Workspace(root, keep=True), self.store, wall_clock=self.clock))
            for _ in range(count)
        ]
        self.history = history(10)

    def clock(self) -> float:
        return self.now

    def send(self, n: int, replica: int, after: float = 1.0) -> bytes:
        """Request ``n`` (``n + 1`` results), ``after`` seconds after the one before it."""
        self.now += after
        outcome = self.proxies[replica].prepare("anthropic", body(self.history[: 3 + 2 * n]))
        assert outcome.error is None, outcome.error
        return outcome.body


GAP = {3: 600.0}
"""Request 3 comes ten minutes after request 2: past the 5-minute cache's TTL."""


def test_replicas_sharing_a_store_give_one_replicas_bytes_whatever_the_gaps(tmp_path: Path) -> None:
    """The cache-aware policy decides a request sent after the cache expired differently (every
    due move is made there) and the requests after it knowing that: each replica must learn the
    gaps and which requests found the cache expired from the shared store, not from its own
    memory of the requests it happened to get."""
    alone = Replicas(tmp_path, 1)
    one = [alone.send(n, 0, GAP.get(n, 1.0)) for n in range(10)]
    steady = Replicas(tmp_path, 1)
    assert [steady.send(n, 0) for n in range(10)][3:] != one[3:]  # the gap changed the output
    alternating = Replicas(tmp_path, 2)
    assert [alternating.send(n, n % 2, GAP.get(n, 1.0)) for n in range(10)] == one
    joining = Replicas(tmp_path, 3)  # a third replica gets its first request at request 6
    assert [joining.send(n, 2 if n >= 6 else n % 2, GAP.get(n, 1.0)) for n in range(10)] == one


def test_a_retry_on_another_replica_later_gives_the_first_answers_bytes(tmp_path: Path) -> None:
    """A request sent again (a client's retry, to whichever replica) is decided as it was the
    first time, however much later it comes."""
    pair = Replicas(tmp_path, 2)
    sent = [pair.send(n, 0) for n in range(5)]
    assert pair.send(4, 1, after=900.0) == sent[4]  # past the TTL, elsewhere: the same bytes
    assert pair.send(4, 0, after=900.0) == sent[4]


def test_a_requests_record_is_found_by_the_digest_of_its_conversation_and_items() -> None:
    """The record keys are a digest of the conversation and each item's length and UTF-8, the
    request before's of the items it sent: replicas of two versions sharing a store (an upgrade
    under way) must find each other's records, so the digest is pinned here, item by item."""
    h = read_history(3, 40, first="read the fïles ✓")
    h[1]["content"][0]["input"]["note"] = "\ud800 lone"  # kept as it came (surrogatepass)
    texts = [serialize_message(m) for m in h]

    def digest(items: list[str]) -> str:
        d = hashlib.sha256(b"toolkeep-proxy-request\0conv")
        for text in items:
            d.update(b"\0%d\0" % len(text))
            d.update(text.encode("utf-8", "surrogatepass"))
        return d.hexdigest()[:16]

    store = MemoryStore()
    earlier = {"time": 100.0, "last": 40.0, "before": [1], "after": [1, 4]}
    store.put(digest(texts[:5]), json.dumps(earlier))  # the request before: up to the last answer
    timeline = Timeline(store, clock=lambda: 500.0)
    moment = timeline.moment("conv", h, texts, CacheTimes())
    assert moment.key == digest(texts) and not moment.recorded
    assert (moment.time, moment.cache) == (500.0, CacheTimes(100.0, frozenset({1, 4})))
    timeline.record(moment, CacheTimes(500.0, frozenset({1, 4})))
    again = timeline.moment("conv", h, texts, CacheTimes())  # a retry: its own record
    assert again.recorded and (again.time, again.cache) == (500.0, moment.cache)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@given(
    fields=st.dictionaries(st.text(max_size=8), _JSON, max_size=5),
    history=st.lists(_JSON, max_size=5),
    at=st.integers(min_value=0, max_value=5),
)
@property_settings(200)
def test_a_changed_body_is_the_json_of_its_document(
    fields: dict[str, Any], history: list[Any], at: int
) -> None:
    """A changed body is put together from its history's items, each serialized once: byte for
    byte what serializing the whole document gives, wherever the history's key stands."""
    items = list(fields.items())
    document = dict([*items[:at], ("messages", history), *items[at:]])
    whole = json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    assert _document(document, "messages", [serialize_message(m) for m in history], None) == whole
