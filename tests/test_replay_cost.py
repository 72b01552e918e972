"""The cache-aware cost model, on cases worked out by hand."""

from __future__ import annotations

import json

import pytest
from hypothesis import given

from toolkeep.costs import (
    CACHE_READ,
    CACHE_WRITE,
    common_prefix_length,
    request_cost,
    request_segments,
    serialize_message,
)
from toolkeep.replay.tokens import TokenCounter, get_counter

from .strategies import property_settings, segment_pairs


@pytest.fixture
def chars() -> TokenCounter:
    return get_counter("chars")


class TestRequestCost:
    def test_first_request_writes_everything(self, chars: TokenCounter) -> None:
        """Nothing is cached before the first request: 8 chars = 2 units, all at 1.25x."""
        rc = request_cost(None, ["abcdefgh"], chars)
        assert (rc.chars, rc.tokens, rc.cached_tokens, rc.cost) == (8, 2, 0, 2.5)

    def test_appended_message_reads_the_old_prefix(self, chars: TokenCounter) -> None:
        """2 cached units at 0.1x plus 1 new unit at 1.25x = 1.45."""
        rc = request_cost(["abcdefgh"], ["abcdefgh", "ijkl"], chars)
        assert (rc.tokens, rc.cached_tokens) == (3, 2)
        assert rc.cost == pytest.approx(1.45)

    def test_edit_in_the_middle_busts_the_rest(self, chars: TokenCounter) -> None:
        """Shared: "aaaa" and the first half of the edited segment (2 units); the other 2 units are written."""
        rc = request_cost(["aaaa", "bbbbbbbb", "cccc"], ["aaaa", "bbbbXXXX", "cccc"], chars)
        assert (rc.tokens, rc.cached_tokens) == (4, 2)
        assert rc.cost == pytest.approx(CACHE_READ * 2 + CACHE_WRITE * 2) == pytest.approx(2.7)

    def test_same_request_again_is_all_cache_reads(self, chars: TokenCounter) -> None:
        """A byte-identical request costs 0.1x of its tokens."""
        segs = ["{", "x" * 40, "}"]
        rc = request_cost(list(segs), segs, chars)
        assert rc.cost == pytest.approx(0.1 * rc.tokens)

    def test_shorter_request_after_a_longer_one(self, chars: TokenCounter) -> None:
        """A request that is a prefix of the previous one is wholly cached."""
        rc = request_cost(["aaaa", "bbbb", "cccc"], ["aaaa", "bbbb"], chars)
        assert (rc.tokens, rc.cached_tokens) == (2, 2)

    def test_exact_tokens_follow_the_same_formula(self) -> None:
        """With real o200k_base counts the cost is 0.1x the shared segments' tokens plus 1.25x the rest."""
        counter = get_counter("tiktoken")
        a = serialize_message({"role": "user", "content": "Summarise the build log, please."})
        b = serialize_message({"role": "assistant", "content": "The build failed in step 3."})
        prev = request_segments("Be terse.", [a])
        cur = request_segments("Be terse.", [a, b])
        rc = request_cost(prev, cur, counter)
        shared = sum(counter.count(s) for s in cur[:2])  # opening + first message
        assert rc.tokens == sum(counter.count(s) for s in cur)
        assert rc.cached_tokens == shared
        assert rc.cost == pytest.approx(0.1 * shared + 1.25 * (rc.tokens - shared))


class TestSegments:
    def test_segments_join_to_the_compact_json_request(self) -> None:
        """The segments of a request are exactly its compact JSON serialization."""
        messages = [{"role": "user", "content": "héllo"}, {"role": "assistant", "content": "hi"}]
        joined = "".join(request_segments("sys", [serialize_message(m) for m in messages]))
        assert joined == json.dumps(
            {"system": "sys", "messages": messages}, ensure_ascii=False, separators=(",", ":")
        )
        assert json.loads("".join(request_segments(None, []))) == {"messages": []}

    def test_prefix_runs_across_segment_boundaries(self) -> None:
        """ "ab"+"cd" and "abcd" share all 4 chars: one whole segment of the second, nothing partial."""
        assert common_prefix_length(["ab", "cd"], ["abcd"]) == (4, 1, 0)
        assert common_prefix_length(["abcd"], ["ab", "cx"]) == (3, 1, 1)
        assert common_prefix_length([], ["x"]) == (0, 0, 0)

    @given(segment_pairs())
    @property_settings(200)
    def test_prefix_length_matches_the_joined_strings(self, pair: tuple[list[str], list[str]]) -> None:
        """The prefix found segment-wise is the common prefix of the joined requests, split consistently."""
        a, b = pair
        chars, whole, partial = common_prefix_length(a, b)
        ja, jb = "".join(a), "".join(b)
        assert chars == next(
            (i for i, (x, y) in enumerate(zip(ja, jb, strict=False)) if x != y), min(len(ja), len(jb))
        )
        assert sum(len(s) for s in b[:whole]) + partial == chars
        assert whole == len(b) or partial < len(b[whole])
