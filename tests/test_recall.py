"""The recall and read_result tools (SPEC 7): definitions every SDK accepts, answers that give the
original back byte-exact in pages no later step cuts, and markers that always lead home."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolkeep
from toolkeep import MISSING_RESULT_TEXT, Config, ToolResultPart
from toolkeep.exceptions import ConfigError
from toolkeep.recall import (
    READ_TOOL,
    RECALL_TOOL,
    TOOL_FORMATS,
    handle_tool_call,
    langchain_tools,
    page_limit,
    page_text,
    read_answer,
    recall_answer,
    tool_definitions,
)
from toolkeep.shorten import CCR_MARKER_RE, SAVED_PATH_RE, archive_key, format_size, line_count, marker
from toolkeep.stores import Limits, MemoryStore
from toolkeep.stores.sqlite import SQLiteStore

from .strategies import (
    anthropic_turns,
    configs,
    every_format_histories,
    histories,
    json_values,
    long_sessions,
    property_settings,
)
from .test_stores import FakeClock

_NOTE = re.compile(r"\n\n\[lines? [^\n]*\]\Z")
_OMISSION = re.compile(r"\n\n\[TRUNCATED |\n\n\.\.\. \[|\n\[\.\.\. ")
_MORE = re.compile(r"start_line=(\d+)(?:, start_char=(\d+))?\]\Z")


def page_body(answer: str) -> str:
    """The text of one answer without its closing note."""
    note = _NOTE.search(answer)
    return answer if note is None else answer[: note.start()]


def follow_pages(ask: Callable[..., str], **first: int) -> list[str]:
    """Every answer of a paged read, following each note's ``start_line``/``start_char``."""
    answers: list[str] = []
    more: dict[str, int] = dict(first)
    for _ in range(100_000):
        answer = ask(**more)
        answers.append(answer)
        found = _MORE.search(answer) if _NOTE.search(answer) else None
        if found is None:
            return answers
        more = {"start_line": int(found[1])}
        if found[2]:
            more["start_char"] = int(found[2])
    raise AssertionError("paging did not end")


def recall_all(store: Any, key: str, config: Config) -> str:
    """An original put back together from the recall tool's pages."""
    answers = follow_pages(lambda **more: recall_answer(store, key, config=config, **more))
    assert all(len(a) <= page_limit(config) for a in answers)
    return "".join(page_body(a) for a in answers)


def result_texts(fmt: str, messages: list[Any]) -> list[str]:
    """The text of every tool result in a history."""
    history = toolkeep.get_format(fmt).load(messages)
    return [p.text for m in history for p in m.parts if isinstance(p, ToolResultPart)]


def lines_text(n: int, width: int = 40) -> str:
    return "".join(f"{i:06d} {'é' * (i % width)}\n" for i in range(n))


# ------------------------------------------------------------------------------------ definitions


class TestDefinitions:
    def test_anthropic_sdk_sends_them_and_the_call_is_answered(self) -> None:
        """The Anthropic SDK accepts the definitions as ToolParam, sends them as given, and the
        model's recall call is answered from the store."""
        import anthropic
        from pydantic import TypeAdapter

        defs = tool_definitions("anthropic")
        for d in defs:
            TypeAdapter(anthropic.types.ToolParam).validate_python(d)
        store = MemoryStore()
        original = lines_text(50)
        key = archive_key(original)
        store.put(key, original)
        sent: list[Any] = []

        def reply(request: httpx2.Request) -> httpx2.Response:
            sent.append(json.loads(request.content))
            return httpx2.Response(200, json={
                "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "recall",
                             "input": {"key": key, "start_line": 3, "end_line": 4}}],
                "stop_reason": "tool_use", "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            })  # fmt: skip

        client = anthropic.Anthropic(
            api_key="test", max_retries=0, http_client=httpx2.Client(transport=httpx2.MockTransport(reply))
        )
        message = client.messages.create(
            model="claude-x", max_tokens=10, tools=defs, messages=[{"role": "user", "content": "hi"}]
        )
        assert sent[0]["tools"] == defs
        call = message.content[0]
        assert call.type == "tool_use"
        answer = handle_tool_call(call.name, call.input, store=store, workspace=None)
        assert answer is not None and page_body(answer) == "".join(original.splitlines(True)[2:4])

    def test_openai_chat_sdk_sends_them_and_string_arguments_work(self) -> None:
        """The OpenAI SDK sends the Chat definitions as given; its JSON-string arguments are read."""
        import openai
        from openai.types.chat import ChatCompletionToolParam
        from pydantic import TypeAdapter

        defs = tool_definitions("openai-chat")
        for d in defs:
            TypeAdapter(ChatCompletionToolParam).validate_python(d)
        store = MemoryStore()
        original = "short original"
        store.put(archive_key(original), original)
        sent: list[Any] = []
        arguments = json.dumps({"key": archive_key(original)})

        def reply(request: httpx2.Request) -> httpx2.Response:
            sent.append(json.loads(request.content))
            return httpx2.Response(200, json={
                "id": "c1", "object": "chat.completion", "created": 0, "model": "gpt-x",
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                    "role": "assistant", "content": None,
                    "tool_calls": [{"id": "call_1", "type": "function",
                                    "function": {"name": "recall", "arguments": arguments}}]}}],
            })  # fmt: skip

        client = openai.OpenAI(
            api_key="test", max_retries=0, http_client=httpx2.Client(transport=httpx2.MockTransport(reply))
        )
        completion = client.chat.completions.create(
            model="gpt-x", tools=defs, messages=[{"role": "user", "content": "hi"}]
        )
        assert sent[0]["tools"] == defs
        tool_calls = completion.choices[0].message.tool_calls
        assert tool_calls is not None
        function = tool_calls[0].function  # type: ignore[union-attr]
        answer = handle_tool_call(function.name, function.arguments, store=store, workspace=None)
        assert answer == original

    def test_openai_responses_sdk_sends_them(self) -> None:
        """The Responses API definitions validate as FunctionToolParam and go out as given."""
        import openai
        from openai.types.responses import FunctionToolParam
        from pydantic import TypeAdapter

        defs = tool_definitions("openai-responses")
        for d in defs:
            TypeAdapter(FunctionToolParam).validate_python(d)
        sent: list[Any] = []

        def reply(request: httpx2.Request) -> httpx2.Response:
            sent.append(json.loads(request.content))
            return httpx2.Response(200, json={
                "id": "resp_1", "object": "response", "created_at": 0, "model": "gpt-x",
                "status": "completed", "output": [], "parallel_tool_calls": True,
                "tool_choice": "auto", "tools": defs,
            })  # fmt: skip

        client = openai.OpenAI(
            api_key="test", max_retries=0, http_client=httpx2.Client(transport=httpx2.MockTransport(reply))
        )
        client.responses.create(model="gpt-x", input="hi", tools=defs)  # type: ignore[arg-type]
        assert sent[0]["tools"] == defs

    def test_gemini_types_accept_them(self) -> None:
        """google-genai's pydantic Tool and GenerateContentConfig validate the Gemini definitions."""
        from google.genai import types

        defs = tool_definitions("gemini")
        tool = types.Tool.model_validate(defs[0])
        assert tool.function_declarations is not None
        assert [f.name for f in tool.function_declarations] == [RECALL_TOOL, READ_TOOL]
        recall = tool.function_declarations[0]
        assert recall.parameters is not None and recall.parameters.required == ["key"]
        types.GenerateContentConfig(tools=defs)  # type: ignore[arg-type]

    def test_bedrock_shape(self) -> None:
        """Bedrock Converse toolSpec entries: name 1-64 of [A-Za-z0-9_-], a description, a JSON
        schema object (the Converse API's ToolSpecification)."""
        for d in tool_definitions("bedrock"):
            spec = d["toolSpec"]
            assert set(spec) == {"name", "description", "inputSchema"}
            assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", spec["name"])
            assert spec["description"]
            assert spec["inputSchema"]["json"]["type"] == "object"

    def test_langchain_tools_run(self, tmp_path: Path) -> None:
        """LangChain accepts the dict definitions, and the bound StructuredTools answer calls."""
        from langchain_core.messages import ToolMessage
        from langchain_core.utils.function_calling import convert_to_openai_tool

        for d in tool_definitions("langchain"):
            assert convert_to_openai_tool(d) == d
        store = MemoryStore()
        original = lines_text(10)
        store.put(archive_key(original), original)
        with toolkeep.Workspace(tmp_path / "ws") as ws:
            path = ws.persist("c1", original)
            recall, read = langchain_tools(store=store, workspace=ws)
            message = recall.invoke(
                {"type": "tool_call", "id": "c9", "name": "recall", "args": {"key": archive_key(original)}}
            )
            assert isinstance(message, ToolMessage) and message.content == original
            assert (
                page_body(read.invoke({"path": str(path), "start_line": 2, "end_line": 2}))
                == (original.splitlines(True)[1])
            )

    def test_every_format_has_both_tools_with_fresh_copies(self) -> None:
        """Every format defines recall and read_result; each call returns new objects."""
        for fmt in TOOL_FORMATS:
            first = tool_definitions(fmt)
            text = json.dumps(first)
            assert "recall" in text and "read_result" in text
            json.loads(text)  # plain JSON data
            first.clear()
            assert tool_definitions(fmt) != []
        with pytest.raises(ConfigError):
            tool_definitions("cohere")
        with pytest.raises(ConfigError):
            tool_definitions("anthropic", tools=("rm",))


# ---------------------------------------------------------------------------------------- answers


class TestRecallAnswers:
    def test_whole_original_byte_exact(self) -> None:
        """An original under the page limit comes back as it is, with no note."""
        store = MemoryStore()
        original = "a\r\nb\ud800\n\u2028 🙂 <<ccr:0123456789abcdef>>"
        store.put(archive_key(original), original)
        assert recall_answer(store, archive_key(original)) == original

    def test_key_forms(self) -> None:
        """The key may come wrapped in its marker, in upper case, or padded; junk is explained."""
        store = MemoryStore()
        store.put(archive_key("x"), "x")
        key = archive_key("x")
        for form in (key, marker(key), key.upper(), f"  {key} "):
            assert recall_answer(store, form) == "x"
        for junk in ("../../etc/passwd", "abc", "", "0123456789abcdeg"):
            assert "is not an archive key" in recall_answer(store, junk)

    def test_line_range_and_its_note(self) -> None:
        """A range gives exactly those lines, then a note naming them."""
        store = MemoryStore()
        original = lines_text(100)
        store.put(archive_key(original), original)
        answer = recall_answer(store, archive_key(original), start_line=10, end_line=12)
        assert page_body(answer) == "".join(original.splitlines(True)[9:12])
        assert answer.endswith("[lines 10-12 of 100; end of the requested range]")

    @pytest.mark.parametrize(
        "original",
        [
            lines_text(3_000),
            "z" * 70_000,
            lines_text(200) + "q" * 50_000 + "\n" + lines_text(50),
            "\n" * 9_000,
        ],
        ids=["many-lines", "one-huge-line", "mixed", "only-newlines"],
    )
    def test_paging_gives_the_original_back(self, original: str) -> None:
        """Following the notes rebuilds a big original byte-exact; no page is over the limit."""
        store = MemoryStore()
        store.put(archive_key(original), original)
        config = Config(recall_page_chars=3_000)
        assert recall_all(store, archive_key(original), config) == original

    def test_page_limit_respects_budget_and_cap(self) -> None:
        """A page is never over max_result_chars nor the recall tool's own cap."""
        assert page_limit(Config()) == 16_000
        assert page_limit(Config(max_result_chars=5_000)) == 5_000
        assert page_limit(Config(tool_caps={"recall": 2_000})) == 2_000
        assert page_limit(Config(tool_caps={"read_result": 900}), READ_TOOL) == 900

    def test_recalled_pages_are_not_cut_again(self, tmp_path: Path) -> None:
        """Every page of a recalled original goes through prepare unchanged."""
        config = Config(max_result_chars=5_000, default_tool_cap=6_000)
        store = MemoryStore()
        original = lines_text(4_000)
        key = archive_key(original)
        store.put(key, original)
        answers = follow_pages(lambda **more: recall_answer(store, key, config=config, **more))
        assert len(answers) > 10
        turns = [(f"r{n}", RECALL_TOOL, a) for n, a in enumerate(answers)]
        history = anthropic_turns(*turns)
        with toolkeep.Session(config, workspace=tmp_path / "ws", store=store) as session:
            out, report = session.prepare(history[:3])  # newest: age 0
        assert out == history[:3]
        assert (report.capped, report.persisted) == (0, 0)

    def test_unknown_expired_and_evicted_keys_get_an_answer(self) -> None:
        """A key never stored, expired, or evicted gets the same clear sentence, no exception."""
        clock = FakeClock()
        store = MemoryStore(limits=Limits(ttl=60, max_entries=1), clock=clock)
        store.put(archive_key("old"), "old")
        store.put(archive_key("new"), "new")  # evicts "old"
        clock.tick(61)  # expires "new"
        for key in (archive_key("never"), archive_key("old"), archive_key("new")):
            answer = recall_answer(store, key)
            assert answer.startswith(f"[recall: nothing is archived under {key} -- it expired")

    def test_failing_store_gets_an_answer(self, tmp_path: Path) -> None:
        """A store that fails (here: closed) gives a sentence, not an exception in the agent loop."""
        store = SQLiteStore(tmp_path / "a.db")
        store.close()
        answer = recall_answer(store, "0123456789abcdef")
        assert answer.startswith("[recall: the archive could not be read")

    @pytest.mark.parametrize(
        ("arguments", "words"),
        [
            ("{not json", "not valid JSON"),
            ("[1, 2]", "must be an object"),
            ({"key": "0" * 16, "start_line": "two"}, "start_line must be a whole number"),
            ({"key": "0" * 16, "start_line": True}, "start_line must be a whole number"),
            ({"key": "0" * 16, "end_line": 1.5}, "end_line must be a whole number"),
            ({"key": "KEY", "start_line": 0}, "invalid range"),
            ({"key": "KEY", "start_line": 5, "end_line": 2}, "invalid range"),
            ({"key": "KEY", "start_line": 99}, "past the end"),
            ({"key": "KEY", "start_char": 999}, "past the end of line 1"),
            ({}, "is not an archive key"),
        ],
    )
    def test_bad_arguments_get_an_answer(self, arguments: Any, words: str) -> None:
        """Malformed arguments or ranges are explained to the model, never raised."""
        store = MemoryStore()
        original = "one\ntwo\n"
        store.put(archive_key(original), original)
        if isinstance(arguments, dict) and arguments.get("key") == "KEY":
            arguments = {**arguments, "key": archive_key(original)}
        answer = handle_tool_call(RECALL_TOOL, arguments, store=store, workspace=None)
        assert answer is not None and words in answer

    def test_numbers_as_models_send_them(self) -> None:
        """start_line given as 2, 2.0 or "2" means the same."""
        store = MemoryStore()
        original = "one\ntwo\nthree\n"
        store.put(archive_key(original), original)
        answers = {
            handle_tool_call(RECALL_TOOL, {"key": archive_key(original), "start_line": v}, store=store,
                             workspace=None)
            for v in (2, 2.0, "2")
        }  # fmt: skip
        assert len(answers) == 1 and page_body(answers.pop()) == "two\nthree\n"

    def test_other_tools_are_not_ours(self) -> None:
        """handle_tool_call answers None for a tool that is not recall or read_result."""
        assert handle_tool_call("bash", {"cmd": "ls"}, store=MemoryStore(), workspace=None) is None

    def test_without_store_or_workspace(self) -> None:
        """A session without a store or workspace says so."""
        assert "no archive" in recall_answer(None, "0123456789abcdef")
        assert "no workspace" in read_answer(None, "x.txt")


def test_page_text_is_lossless() -> None:
    """page_text's pages, chained by next_line/next_char, cover the text exactly once."""
    text = lines_text(300) + "w" * 5_000
    got, line, char = [], 1, 1
    while True:
        page = page_text(text, start_line=line, start_char=char, limit=1_000)
        got.append(page.text)
        if page.next_line is None:
            break
        line, char = page.next_line, page.next_char
    assert "".join(got) == text


# ------------------------------------------------------------------------------------- protection


class TestProtection:
    def history(self, first_tool: str) -> list[Any]:
        """A big result of ``first_tool`` that is 6 turns old, then small turns."""
        big = lines_text(400)
        return anthropic_turns((
            "c0", first_tool, big), *[(f"c{n}", "ls", "ok") for n in range(1, 7)]
        )  # fmt: skip

    def first_result(self, out: list[Any]) -> str:
        text: str = out[2]["content"][0]["content"]
        return text

    # the policies that know recall (seed is ChatCLI's, which had none: it cuts by age alone),
    # with the age from which each cuts this big grep output
    @pytest.mark.parametrize(("policy", "cut_from"), [("spec", 2), ("economy", 1)])
    @pytest.mark.parametrize("protect", [0, 4, 6, 99])
    def test_recall_results_are_kept_for_the_configured_turns(
        self, tmp_path: Path, policy: str, cut_from: int, protect: int
    ) -> None:
        """A recall result is not compacted while younger than recall_protect_turns; other tools'
        results of the same age are. Once older, SPEC's cuts it by age; economy when the cut pays
        (here it no longer does: the turns after it would be rewritten)."""
        config = Config(policy=policy, recall_protect_turns=protect)
        for age in range(7):
            history = self.history(RECALL_TOOL)[: 3 + 2 * (age)]
            control = self.history("grep")[: 3 + 2 * (age)]
            with toolkeep.Session(config, workspace=tmp_path / "ws") as session:
                out, _ = session.prepare(history)
                out_control, _ = session.prepare(control)
            kept = self.first_result(out) == history[2]["content"][0]["content"]
            protected = age < max(protect, cut_from)
            assert kept == protected if policy == "spec" else kept or not protected, (age, protect)
            assert (self.first_result(out_control) == control[2]["content"][0]["content"]) == (age < cut_from)


# ---------------------------------------------------------------------------------------- markers


class TestMarkers:
    def test_carried_across_levels_never_duplicated(self, tmp_path: Path) -> None:
        """A marker already in an original is carried to the cap, preview, truncated and summary
        forms, each marker and path at most once, and prepare twice adds nothing."""
        foreign = marker("aaaaaaaaaaaaaaaa")
        original = lines_text(2_000) + foreign + "\n" + lines_text(2_000)
        own = marker(archive_key(original))
        for age in range(6):
            history = anthropic_turns(
                ("c0", "grep", original), *[(f"c{n}", "ls", "ok") for n in range(1, age + 1)]
            )
            with toolkeep.Session(Config(), workspace=tmp_path / "ws") as session:
                out, _ = session.prepare(history)
                again, _ = session.prepare(out)
            text = out[2]["content"][0]["content"]
            assert again == out
            assert text.count(own) == 1 and text.count(foreign) == 1, (age, text[-300:])
            paths = SAVED_PATH_RE.findall(text)
            assert len(paths) == len(set(paths)) <= 1

    def test_marker_in_the_kept_head_is_not_repeated(self, tmp_path: Path) -> None:
        """A marker inside the kept head is not appended a second time."""
        foreign = marker("bbbbbbbbbbbbbbbb")
        original = foreign + "\n" + lines_text(3_000)
        history = anthropic_turns(("c0", "grep", original))
        with toolkeep.Session(Config(), workspace=tmp_path / "ws") as session:
            out, _ = session.prepare(history)
        text = out[2]["content"][0]["content"]
        assert text != original and text.count(foreign) == 1


# -------------------------------------------------------------------------------- the way back


def assert_recoverable(
    text: str, originals: set[str], store: Any, ws: toolkeep.Workspace, config: Config
) -> None:
    """``text`` is a shortened form of an original, and every way back it names (each new marker,
    each saved path) gives that original back byte-exact through the tools. (The seed's summary
    counts the lines and chars of the text as it stood, ChatCLI's way, which may be an earlier
    cut: its shape is not checked against the original.)"""
    carried = {k for o in originals for k in CCR_MARKER_RE.findall(o)}
    routes = []
    for key in dict.fromkeys(CCR_MARKER_RE.findall(text)):
        if key not in carried:
            assert store.get(key) is not None, f"marker {key} leads nowhere"
            routes.append(recall_all(store, key, config))
    for path in SAVED_PATH_RE.findall(text):
        answers = follow_pages(lambda p=path, **more: read_answer(ws, p, config=config, **more))
        routes.append("".join(page_body(a) for a in answers))
    assert routes, f"no way back from {text[:120]!r}...{text[-160:]!r}"
    for recovered in routes:
        assert recovered in originals, text[-200:]
        assert config.policy == "seed" or _shortened_from(text, recovered), text[-200:]


def _shortened_from(text: str, original: str) -> bool:
    """True when ``text`` has the shape of a shortened form of ``original``."""
    if text.startswith("[Old tool result cleared -- "):
        return f"{line_count(original)} lines, {format_size(len(original))} chars" in text
    head = _OMISSION.split(text, maxsplit=1)[0]
    return original.startswith(head)


class TestEveryCutIsRecoverable:
    @property_settings(40)
    @given(
        case=st.one_of(histories(max_blocks=5), every_format_histories(max_blocks=4), long_sessions()),
        config=configs(),
    )
    def test_any_history_any_config(
        self, case: tuple[str, list[Any]], config: Config, tmp_path_factory: Any
    ) -> None:
        """For any history and config, every shortened result comes back byte-exact through the
        recall tool (its marker) or the read_result tool (its saved path)."""
        fmt, history = case
        # the synthetic result pairing adds is one more original (the seed, which preserves
        # nothing, may shorten it too)
        originals = {*result_texts(fmt, history), MISSING_RESULT_TEXT}
        store = MemoryStore()
        with toolkeep.Session(config, workspace=tmp_path_factory.mktemp("ws"), store=store) as session:
            out, _ = session.prepare(history, format=fmt)
            for text in result_texts(fmt, out):
                if text in originals or text == MISSING_RESULT_TEXT:
                    continue
                assert_recoverable(text, originals, store, session.workspace, config)


def test_a_resumed_session_recalls_from_sqlite(tmp_path: Path) -> None:
    """Originals archived in SQLite by one session are recalled by a later one with a new
    workspace (the first one is gone)."""
    url = f"sqlite://{tmp_path}/archive.db"
    originals = [lines_text(3_000 + n) for n in range(3)]
    history = anthropic_turns(*[(f"c{n}", "grep", t) for n, t in enumerate(originals)])
    with toolkeep.Session(Config(), store=url) as first:
        out, _ = first.prepare(history)
    keys = [CCR_MARKER_RE.findall(t)[0] for t in result_texts("anthropic", out) if "<<ccr:" in t]
    assert len(keys) == 3
    with toolkeep.Session(Config(), store=url) as resumed:
        assert [recall_all(resumed.store, k, Config()) for k in keys] == originals


# ------------------------------------------------------------------ whatever the model sends

_SENT_ORIGINAL = "".join(f"line {n:03d} of what the tool printed\n" for n in range(60))


@pytest.fixture(scope="module")
def sent_world(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A workspace holding one persisted output and a store holding its original."""
    ws = toolkeep.Workspace(tmp_path_factory.mktemp("model-args") / "ws")
    store = MemoryStore()
    store.put(archive_key(_SENT_ORIGINAL), _SENT_ORIGINAL)
    path = ws.persist("call_1", _SENT_ORIGINAL)
    return ws, store, str(path)


_KEY = archive_key(_SENT_ORIGINAL)
_numbers = st.one_of(
    st.integers(-(2**64), 2**64),
    st.integers(-(10**6000), 10**6000),  # past Python's int-to-text limit
    st.floats(),  # nan and infinities included
    st.from_regex(r"\A\s?[+-]{0,3}[0-9²³٣０-９]{1,20}\s?\Z"),
    st.integers(4_000, 6_000).map(lambda n: "9" * n),
    st.booleans(),
)


def _huge_literal(digits: int) -> str:
    """Arguments as JSON text whose start_line has ``digits`` digits (past the int-to-text limit)."""
    return f'{{"key": "{_KEY}", "start_line": {"9" * digits}}}'


_field_values = st.one_of(_numbers, json_values(6))
_keys = st.one_of(
    st.sampled_from([_KEY, marker(_KEY), _KEY.upper(), f"  {_KEY} "]),
    st.text(),
    json_values(6),
)
_paths = st.one_of(
    st.sampled_from(["tool-results", "/etc/passwd", "..", "tool-results/../../x", "\ud800", "a\x00b"]),
    st.text(),
    json_values(6),
)
_mappings = st.fixed_dictionaries(
    {},
    optional={
        "key": _keys,
        "path": _paths,
        "start_line": _field_values,
        "end_line": _field_values,
        "start_char": _field_values,
    },
)
_json_safe = st.fixed_dictionaries(
    {},
    optional={
        "key": _keys,
        "path": _paths,
        "start_line": st.one_of(st.integers(-(2**64), 2**64), st.floats(), st.text(max_size=12)),
        "end_line": st.integers(-5, 200),
    },
)
_texts = st.one_of(
    _json_safe.map(json.dumps),
    _json_safe.map(lambda m: json.dumps(m, ensure_ascii=False)),  # lone surrogates raw in the text
    json_values(10).map(json.dumps),
    st.integers(1, 200_000).map(lambda n: "[" * n),
    st.integers(1, 50_000).map(lambda n: '{"key": ' * n),
    st.integers(4_000, 6_000).map(_huge_literal),
    st.text(),
)
model_arguments = st.one_of(_mappings, _texts, json_values(10), st.binary(max_size=20), st.none())


class TestWhateverTheModelSends:
    CONFIG = Config(recall_page_chars=600)

    @property_settings(300)
    @given(name=st.sampled_from([RECALL_TOOL, READ_TOOL]), arguments=model_arguments, data=st.data())
    def test_every_input_gets_a_sentence(self, name: str, arguments: Any, data: Any, sent_world: Any) -> None:
        """Any JSON value, any text (not JSON, nested 200,000 deep, a 6,000-digit number, lone
        surrogates), any mapping: the answer is text that fits one page and can be sent (no raw
        lone surrogate the model did not get from the original), never an exception."""
        ws, store, path = sent_world
        if isinstance(arguments, dict) and data.draw(st.booleans(), label="real path"):
            arguments = {**arguments, "path": path}
        answer = handle_tool_call(name, arguments, store=store, workspace=ws, config=self.CONFIG)
        assert isinstance(answer, str)
        answer.encode("utf-8")  # strict: would raise on a lone surrogate
        assert len(answer) <= page_limit(self.CONFIG, name)

    @pytest.mark.parametrize(
        ("arguments", "words"),
        [
            ({"key": _KEY, "start_line": "--3"}, "start_line must be a whole number"),
            ({"key": _KEY, "start_line": "²"}, "start_line must be a whole number"),
            ({"key": _KEY, "end_line": "³"}, "end_line must be a whole number"),
            ({"key": _KEY, "start_line": 10**5000}, "a number of about 5,000 digits"),
            ({"key": _KEY, "start_line": "9" * 5000}, "(5,000 chars)"),
            (_huge_literal(5_000), "a number too long"),
            ("[" * 100_000, "nested too deeply"),
            ({"key": _KEY, "start_char": float("inf")}, "start_char must be a whole number"),
            ({"key": [[["deep"]]]}, "a JSON array is not an archive key"),
            ("42", "must be an object, got 42"),
        ],
    )
    def test_the_testers_inputs(self, arguments: Any, words: str, sent_world: Any) -> None:
        """The inputs that used to raise (ValueError, RecursionError) get a sentence naming the fault."""
        ws, store, _ = sent_world
        answer = handle_tool_call(RECALL_TOOL, arguments, store=store, workspace=ws)
        assert answer is not None and words in answer, answer

    @pytest.mark.parametrize("path", ["\ud800", "tool-results/\udcff", "\udfff.txt"])
    def test_lone_surrogate_path_is_refused(self, path: str, sent_world: Any) -> None:
        """A path with a lone surrogate (no file name can hold one as text) is refused, not a
        UnicodeEncodeError from the file system call."""
        ws, store, _ = sent_world
        answer = handle_tool_call(READ_TOOL, {"path": path}, store=store, workspace=ws)
        assert answer is not None and "lone surrogate" in answer

    def test_sane_numbers_still_work(self, sent_world: Any) -> None:
        """ " 3 ", "+3", "٣" (a decimal digit in another script), 3.0 and 3 all mean line 3;
        10**15 is past the end, not refused."""
        ws, store, path = sent_world
        for value in (" 3 ", "+3", "٣", 3.0, 3):
            answer = handle_tool_call(READ_TOOL, {"path": path, "start_line": value, "end_line": 3},
                                      store=store, workspace=ws)  # fmt: skip
            assert answer is not None and page_body(answer) == "line 002 of what the tool printed\n"
        answer = handle_tool_call(RECALL_TOOL, {"key": _KEY, "start_line": 10**15}, store=store, workspace=ws)
        assert answer is not None and "past the end" in answer
