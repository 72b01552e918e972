"""The request budget on the largest real trajectory (2,233 messages, 1,116 requests), replayed
request by request through one Session: every request is sent within 150,000 tokens (the oldest
whole turns archived where cutting results and inputs is not enough), pairing stays valid, and
every marker recalls its original from the session's store."""

from __future__ import annotations

from typing import Any

import pytest

import toolkeep
from toolkeep.shorten import CCR_MARKER_RE
from toolkeep.window import request_tokens

from .conftest import BENCH_DATA, load_trajectory, shared_or_skip

LARGEST = BENCH_DATA / "anthropic" / "claude-code__engram__sentinel__42a88904.json"
LIMIT = 150_000


def replay(policy: str) -> dict[str, Any]:
    """Every request of the largest trajectory through one Session with the budget: what was
    sent, refused and recalled."""
    history = load_trajectory(LARGEST)
    ends = [i for i, m in enumerate(history) if m["role"] == "assistant" and i > 0]
    sent: list[int] = []
    refused: list[tuple[int, int]] = []
    unrecalled: set[str] = set()
    keys = 0
    with toolkeep.Session(toolkeep.Config(policy=policy, max_request_tokens=LIMIT)) as session:
        for n, end in enumerate(ends):
            try:
                out, report = session.prepare(history[:end], format="anthropic")
            except toolkeep.RequestTooLargeError as error:
                assert error.limit == LIMIT and error.floor > LIMIT
                refused.append((end, error.floor))
                continue
            assert report.tokens_after is not None and report.tokens_after <= LIMIT
            sent.append(report.tokens_after)
            if n % 100 == 0 or n == len(ends) - 1 or not refused:
                assert request_tokens(out) == report.tokens_after
                assert toolkeep.validate(out, "anthropic") == []
                found = set(CCR_MARKER_RE.findall(str(out)))
                keys += len(found)
                unrecalled |= {k for k in found if session.recall(k) is None}
    return {"sent": sent, "refused": refused, "unrecalled": unrecalled, "keys": keys, "requests": len(ends)}


@pytest.mark.slow  # every request of the largest trajectory: 1-2 min each
@pytest.mark.parametrize("policy", ["spec", "economy"])
def test_largest_trajectory_within_150k(policy: str) -> None:
    shared_or_skip()
    result = replay(policy)
    assert max(result["sent"]) <= LIMIT
    assert result["keys"] > 0 and not result["unrecalled"]
    # no request refused: where every old result and input is cut to its marker and a request
    # is still over, the oldest turns are archived (toolkeep.turns)
    assert not result["refused"] and len(result["sent"]) == result["requests"]
    print(
        f"\n{policy}: {len(result['sent'])} of {result['requests']} requests sent, peak "
        f"{max(result['sent']):,} tokens; {len(result['refused'])} refused (first at message "
        f"{result['refused'][0][0] if result['refused'] else '-'}, floors "
        f"{min((f for _, f in result['refused']), default=0):,} to "
        f"{max((f for _, f in result['refused']), default=0):,}); {result['keys']} markers checked, all recalled"
    )
