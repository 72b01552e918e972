"""Request objects through ``Session.prepare``: the history found under its provider's key, read in
the format that key implies, and put back with every other field the very value it was."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

import toolkeep
import toolkeep.requests
from toolkeep import MISSING_RESULT_TEXT, Session
from toolkeep.conversation_key import conversation_key
from toolkeep.formats.openai_responses import OpenAIResponsesFormat
from toolkeep.policies import POLICIES
from toolkeep.requests import PreparedRequest, read_input, read_request, validate_request

from .strategies import assistant, oa_assistant, oa_tool, oa_user, tool_result, tool_use, user

TOOLS = [{"name": "read", "description": "Read a file", "input_schema": {"type": "object", "properties": {}}}]


def responses_call(call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "read", "arguments": "{}"}


def responses_output(call_id: str, output: str = "ok") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def same_fields(out: dict[str, Any], request: dict[str, Any], key: str) -> None:
    """``out`` has the keys of ``request`` in its order, each but ``key`` the very same object."""
    assert list(out) == list(request)
    assert all(out[k] is request[k] for k in request if k != key)


def prepare(session: Session, request: dict[str, Any], format: Any = "auto") -> PreparedRequest:
    before = copy.deepcopy(request)
    prepared = session.prepare(request, format=format)
    assert request == before
    assert isinstance(prepared, PreparedRequest) and prepared.request is not request
    return prepared


class TestShapes:
    def test_anthropic_request(self, session: Session) -> None:
        """``messages`` with the Anthropic fields around it: repaired, the rest as it was."""
        request = {
            "model": "claude-opus-4-8",
            "max_tokens": 4096,
            "system": [
                {"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}}
            ],
            "tools": TOOLS,
            "thinking": {"type": "adaptive"},
            "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
            "metadata": {"user_id": "u-1"},
            "messages": [user("go"), assistant(tool_use("t1", "read"))],
        }
        out, report = prepare(session, request)
        same_fields(out, request, "messages")
        assert report.format == "anthropic" and [r.kind for r in report.repairs] == ["synthetic"]
        assert out["messages"][2]["content"][0]["content"] == MISSING_RESULT_TEXT
        assert toolkeep.validate(out["messages"], "anthropic") == []

    def test_chat_request(self, session: Session) -> None:
        """A Chat Completions request: its ``messages`` detected as Chat's."""
        request = {
            "model": "gpt-5",
            "messages": [{"role": "system", "content": "Be brief."}, oa_user(), oa_assistant(("c1", "ls"))],
            "tools": [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}],
            "parallel_tool_calls": False,
        }
        out, report = prepare(session, request)
        same_fields(out, request, "messages")
        assert report.format == "openai-chat"
        assert out["messages"][3] == oa_tool("c1", MISSING_RESULT_TEXT)

    def test_responses_request(self, session: Session) -> None:
        """``input`` is read as Responses items whatever else the request says."""
        request = {
            "model": "gpt-5",
            "instructions": "You are a coding agent.",
            "input": [{"role": "user", "content": "go"}, responses_call("c1"), responses_output("zz")],
            "store": False,
        }
        out, report = prepare(session, request)
        same_fields(out, request, "input")
        assert report.format == "openai-responses"
        assert out["input"] == [
            request["input"][0],
            request["input"][1],
            responses_output("c1", MISSING_RESULT_TEXT),
        ]
        assert sorted(r.kind for r in report.repairs) == ["orphans_removed", "synthetic"]

    @pytest.mark.parametrize("key", ["previous_response_id", "conversation"])
    def test_responses_request_continuing_server_state(self, key: str, session: Session) -> None:
        """With ``previous_response_id`` or ``conversation`` the input holds only the new items:
        an output whose call the server keeps is carried, not removed as an orphan."""
        value: Any = "resp_123" if key == "previous_response_id" else {"id": "conv_123"}
        request = {"model": "gpt-5", key: value, "input": [responses_output("call_stored", "42")]}
        out, report = prepare(session, request)
        assert out == request and out["input"][0] is request["input"][0]
        assert report.repairs == []
        alone, alone_report = prepare(session, {"model": "gpt-5", key: None, "input": request["input"]})
        assert alone["input"] == [] and [r.kind for r in alone_report.repairs] == ["orphans_removed"]

    def test_responses_continuation_with_the_format_named(self, session: Session) -> None:
        """Naming ``openai-responses`` keeps the continuation; a format object is used as given."""
        request = {"previous_response_id": "resp_1", "input": [responses_output("call_stored")]}
        assert prepare(session, request, "openai-responses").request == request
        out, _ = prepare(session, request, OpenAIResponsesFormat())
        assert out["input"] == []

    @pytest.mark.parametrize("key", ["input", "contents"])
    def test_plain_string_history_passes_through(self, key: str, session: Session) -> None:
        """A string ``input`` (Responses) or ``contents`` (google-genai) is one user turn: the
        request comes back equal, the string the same object, an empty report."""
        request = {"model": "m", key: "Summarize the repo.", "instructions": "Be brief."}
        out, report = prepare(session, request)
        assert out == request and out[key] is request[key]
        assert report.format == ("openai-responses" if key == "input" else "gemini")
        assert report.to_dict() == toolkeep.Report(format=report.format).to_dict()

    @pytest.mark.parametrize("spelling", ["camel", "snake"])
    def test_gemini_request(self, spelling: str, session: Session) -> None:
        """A Gemini request with its system instruction (REST camelCase, or google-genai's
        arguments with ``config``): ``contents`` repaired, the rest as it was."""
        call = "functionCall" if spelling == "camel" else "function_call"
        contents = [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [{call: {"name": "ls", "args": {}}}]},
            {"role": "user", "parts": [{"text": "well?"}]},
        ]
        instruction = {"parts": [{"text": "You are a coding agent."}]}
        if spelling == "camel":
            request = {
                "contents": contents,
                "systemInstruction": instruction,
                "generationConfig": {"temperature": 0},
            }
        else:
            request = {
                "model": "gemini-2.5-pro",
                "contents": contents,
                "config": {"system_instruction": instruction},
            }
        out, report = prepare(session, request)
        same_fields(out, request, "contents")
        assert report.format == "gemini" and [r.kind for r in report.repairs] == ["synthetic"]
        assert toolkeep.validate(out["contents"], "gemini") == []

    def test_the_request_is_rebuilt_even_unchanged(self, session: Session) -> None:
        """A valid history comes back as the same message objects in a new request object."""
        request = {"model": "m", "messages": [user("go"), assistant(tool_use("t")), user(tool_result("t"))]}
        out, report = prepare(session, request)
        assert out == request and out["messages"] is not request["messages"]
        assert all(a is b for a, b in zip(out["messages"], request["messages"], strict=True))
        assert not report.changed

    def test_list_prepare_is_unchanged(self, session: Session) -> None:
        """A list is a history as before: a ``Prepared`` list comes back, not a request."""
        out, _ = session.prepare([user("go")])
        assert out == [user("go")]


class TestSession:
    @pytest.mark.parametrize("policy", sorted(POLICIES))
    def test_growing_request_matches_a_fresh_run(self, policy: str, tmp_path: Path) -> None:
        """Request after request, a session sends for each what a fresh one would (under every
        policy, each of which shortens some of these old results)."""
        messages: list[Any] = [user("go")]
        config = toolkeep.Config(policy=policy)
        with Session(config, workspace=tmp_path / "a") as session:
            for n in range(12):  # enough for economy's batches to pay
                messages = [
                    *messages,
                    assistant(tool_use(f"t{n}", "read")),
                    user(tool_result(f"t{n}", f"{n} " * 8_000)),
                    {"role": "system", "content": f"<system-reminder>turn {n}</system-reminder>"},
                ]
                request = {"model": "m", "thinking": {"type": "adaptive"}, "messages": messages}
                out, report = session.prepare(request)
                with Session(config, workspace=tmp_path / "a") as fresh:
                    again, fresh_report = fresh.prepare(request)
                assert json.dumps(out) == json.dumps(again)
                assert report.to_dict() == fresh_report.to_dict()
        assert report.truncated + report.summarized > 0
        if policy == "spec":
            assert any("[Old tool result cleared" in json.dumps(m) for m in out["messages"])

    def test_a_closed_session_refuses_requests(self, tmp_path: Path) -> None:
        """A request object, string history included, meets the same closed door as a list."""
        session = Session(toolkeep.Config(), workspace=tmp_path / "ws")
        session.close()
        for request in ({"messages": [user("go")]}, {"input": "hi"}):
            with pytest.raises(toolkeep.SessionClosedError):
                session.prepare(request)


class TestReadRequest:
    def test_where_the_history_is(self) -> None:
        """Key, history and continuation, as read."""
        request = read_request({"input": [], "previous_response_id": "r"})
        assert (request.key, request.history, request.continues) == ("input", [], True)
        assert read_request({"messages": [], "previous_response_id": "r"}).continues is False
        assert read_request({"contents": "hi"}).history is None

    def test_format(self) -> None:
        """The format each key implies for ``auto``; a name or a format given stays."""
        assert read_request({"messages": []}).format() == "auto"
        assert read_request({"messages": []}).format("openai-chat") == "openai-chat"
        assert read_request({"contents": []}).format() == "gemini"
        plain = read_request({"input": []})
        assert plain.format() == "openai-responses"
        continued = read_request({"input": [], "conversation": "conv_1"}).format()
        assert isinstance(continued, OpenAIResponsesFormat) and continued.previous_response
        assert read_request({"input": [], "conversation": "c"}).format() is continued

    def test_validate_request(self) -> None:
        """Violations of the history, read as the request says."""
        assert [v.rule for v in validate_request({"messages": [user("go"), assistant(tool_use("t"))]})] == [
            "missing_result"
        ]
        assert validate_request({"input": [responses_output("s")], "previous_response_id": "r"}) == []
        assert [v.rule for v in validate_request({"input": [responses_output("s")]})] == ["orphan_result"]
        assert validate_request({"input": "hi"}) == []


class TestReadInput:
    def test_a_list_is_read_with_what_is_sent_beside_it(self) -> None:
        """A list is the history itself, in the format asked for, its tools and system beside it."""
        history = [user("go")]
        incoming = read_input(history, "anthropic", tools=TOOLS, system="be brief")
        assert incoming.history is history
        assert (incoming.format, incoming.extras) == ("anthropic", (TOOLS, "be brief"))
        assert incoming.request is None
        assert incoming.key == conversation_key(history[0], frozenset({"cache_control"}))

    def test_a_request_object_is_read_once(self) -> None:
        """What ``read_request`` read already is used as it is; format and extras come from it."""
        body = {"input": [oa_user("go")], "instructions": "be brief", "previous_response_id": "r"}
        read = read_request(body)
        incoming = read_input(body, request=read)
        assert incoming.request is read and incoming.history is body["input"]
        assert incoming.format is read.format() and incoming.extras == ("be brief",)

    def test_a_conversation_in_hand_is_not_keyed_again(self) -> None:
        """The very first message of the conversation in hand: no key; an equal copy, a key given
        or none, an empty history: as they say."""
        first = user("go")
        assert read_input([first, user("more")], continuing=[first]).key is None
        assert read_input([copy.deepcopy(first)], continuing=[first]).key == conversation_key(first)
        assert read_input([first], key="given").key == "given"
        assert read_input([], key="given").key is None

    def test_the_key_leaves_out_the_markers_a_client_moves(self, tmp_path: Path) -> None:
        """As the proxy's: a first message with a cache marker moved off it (an equal copy, not the
        same object) continues its conversation, its state and workspace; a format whose clients
        move no such key keeps it in the key."""
        marked = {"role": "user", "content": [{"type": "text", "text": "go", "cache_control": {"type": "x"}}]}
        plain = {"role": "user", "content": [{"type": "text", "text": "go"}]}
        for format in ("auto", "anthropic"):
            assert read_input([marked], format).key == read_input([plain], format).key
        assert read_input({"messages": [marked]}).key == read_input({"messages": [plain]}).key
        assert read_input([marked], "openai-chat").key != read_input([plain], "openai-chat").key
        assert marked["content"][0]["cache_control"] == {"type": "x"}  # the caller's, untouched
        with Session(toolkeep.Config()) as session:
            first = [marked, assistant(tool_use("t1", "read")), user(tool_result("t1", "x " * 20_000))]
            session.prepare(first)
            workspace = session.workspace
            session.prepare([plain, *first[1:], assistant(tool_use("t2", "read"))])
            assert session.workspace is workspace and len(session.conversations) == 1

    def test_what_cannot_be_read_is_refused(self) -> None:
        """Tools beside a request object, or a history that is no list, say what is wrong."""
        with pytest.raises(toolkeep.FormatError) as refused:
            read_input({"messages": []}, tools=TOOLS)
        assert refused.value.field == "tools"
        with pytest.raises(toolkeep.FormatError, match="a history is a list of messages, got str"):
            read_input("go")

    def test_the_answer_takes_the_shape_of_what_came(self) -> None:
        """A list comes back as ``Prepared``, a request object as a request with its history
        replaced and every other field the very same object; a plain string as it came."""
        report = toolkeep.Report(format="anthropic")
        out = [user("went")]
        assert read_input([user("go")]).answer(out, report) == (out, report)
        body = {"model": "m", "messages": [user("go")], "tools": TOOLS}
        answered = read_input(body).answer(out, report)
        assert isinstance(answered, PreparedRequest) and answered.request["messages"] is out
        same_fields(answered.request, body, "messages")
        plain = {"model": "m", "input": "hi"}
        unchanged = read_input(plain).unchanged()
        assert unchanged.request == plain and unchanged.report == toolkeep.Report(format="openai-responses")


class TestReadOnce:
    def test_a_session_reads_each_request_once_and_keys_only_a_new_first_message(
        self, session: Session, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """One read per request object; the conversation key only when the first message is not
        the very one of the conversation in hand."""
        calls: dict[str, int] = {"read_request": 0, "history_key": 0}
        for name in calls:
            real = getattr(toolkeep.requests, name)

            def counting(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
                calls[_name] += 1
                return _real(*args, **kwargs)

            monkeypatch.setattr(toolkeep.requests, name, counting)
        messages: list[Any] = [user("go")]
        for n in range(3):
            session.prepare({"model": "m", "messages": messages})
            assert calls == {"read_request": n + 1, "history_key": 1}
            messages = [*messages, assistant(tool_use(f"t{n}", "read")), user(tool_result(f"t{n}", "ok"))]
        session.prepare({"model": "m", "messages": [user("another")]})
        assert calls == {"read_request": 4, "history_key": 2}
